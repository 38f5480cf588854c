#!/usr/bin/env python3
"""The cross-language matrix: producers and consumers in every language share queues.

Phase 1 (sharing): every language produces COUNT messages with delays spread over
0..MAX_DELAY ms into one queue while consumers in every language take from it at once.
Every payload must arrive exactly once and none before its due time (server clock).

Phase 2 (bytes): for each consumer language, every producer language offers the special
payloads (zero bytes, invalid UTF-8, multi-byte UTF-8, the empty value) into a queue that
only that consumer reads (once the producers are done); each must come out byte-identical.

Agents follow tests/interop/agents/README.md. Usage:
  matrix.py --kind delayed --agent rust='target/debug/delayq-interop-agent' --agent python='...'
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def special_payloads(lang: str) -> list[bytes]:
    return [
        b"",
        b"\x00" + lang.encode() + b"\x00zero\x00",
        b"\xff\xfe\xc3\x28" + lang.encode(),
        f"zamówienie-注文-🚚-{lang}".encode(),
    ]


def payloads(lang: str, count: int, max_delay: int) -> list[tuple[bytes, int]]:
    out = []
    specials = special_payloads(lang)
    for i in range(count):
        payload = specials[i] if i < len(specials) else f"{lang}-{i}".encode()
        out.append((payload, (i * 7919) % (max_delay + 1)))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    """A redis-server on a free port. The port is let go before the server binds it, so
    another process may take it first: a server that exits before answering, or a port
    answered by another server, starts again on another port."""

    def __init__(self, workdir: str) -> None:
        log = os.path.join(workdir, "redis.log")
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    workdir,
                    "--logfile",
                    log,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._answers():
                return
            self.proc.kill()
            self.proc.wait()
        tail = open(log).read()[-2000:] if os.path.exists(log) else "(no log)"
        raise RuntimeError(f"redis-server did not start; its log ends:\n{tail}")

    def _answers(self) -> bool:
        deadline = time.time() + 10
        info = ["redis-cli", "-p", str(self.port), "INFO", "server"]
        while time.time() < deadline and self.proc.poll() is None:
            try:
                out = subprocess.run(info, capture_output=True, timeout=2).stdout
            except subprocess.TimeoutExpired:  # something else holds the port, mute
                return False
            if f"process_id:{self.proc.pid}".encode() in out:
                return True
            time.sleep(0.05)
        return False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run_all(commands: list[tuple[str, list[str]]], timeout: float) -> None:
    procs = [(name, subprocess.Popen(cmd, stderr=subprocess.PIPE)) for name, cmd in commands]
    failed = []
    for name, p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            failed.append(f"{name}: timed out\n{err.decode(errors='replace')[-2000:]}")
            continue
        if p.returncode != 0:
            failed.append(f"{name}: exit {p.returncode}\n{err.decode(errors='replace')[-2000:]}")
    if failed:
        raise RuntimeError("agents failed:\n" + "\n".join(failed))


def read_lines(path: str) -> list[list[str]]:
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip() or line == "\t-1\n"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=["delayed", "reliable"], default="delayed")
    ap.add_argument("--agent", action="append", default=[], help="lang=command")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--max-delay-ms", type=int, default=3000)
    ap.add_argument("--idle-ms", type=int, default=6000)
    ap.add_argument("--consumers", type=int, default=1, help="consumer processes per language")
    ap.add_argument("--skip-bytes", action="store_true", help="skip phase 2")
    args = ap.parse_args()
    agents = {}
    for spec in args.agent:
        lang, _, cmd = spec.partition("=")
        agents[lang] = shlex.split(cmd)
    if not agents:
        ap.error("no --agent given")

    work = tempfile.mkdtemp(prefix="delayq-interop-")
    redis = Redis(work)
    passed, failed = 0, 0

    def check(ok: bool, what: str) -> None:
        nonlocal passed, failed
        if ok:
            passed += 1
            print(f"ok    {what}")
        else:
            failed += 1
            print(f"FAIL  {what}")

    try:
        # Phase 1: everyone produces into one queue while everyone consumes from it.
        queue = f"interop-{args.kind}-{os.getpid()}"
        sent: dict[str, list[tuple[bytes, int]]] = {}
        commands = []
        for lang, cmd in agents.items():
            sent[lang] = payloads(lang, args.count, args.max_delay_ms)
            infile = os.path.join(work, f"in-{lang}")
            with open(infile, "w") as f:
                for payload, delay in sent[lang]:
                    f.write(f"{payload.hex()}\t{delay}\n")
            for c in range(args.consumers):
                commands.append(
                    (
                        f"consumer {lang} #{c}",
                        cmd
                        + [
                            "consume",
                            redis.url,
                            args.kind,
                            queue,
                            str(args.idle_ms),
                            os.path.join(work, f"got-{lang}-{c}"),
                        ],
                    )
                )
        for lang, cmd in agents.items():
            commands.append(
                (
                    f"producer {lang}",
                    cmd
                    + [
                        "produce",
                        redis.url,
                        args.kind,
                        queue,
                        os.path.join(work, f"in-{lang}"),
                        os.path.join(work, f"due-{lang}"),
                    ],
                )
            )
        started = time.time()
        run_all(commands, timeout=120 + args.count / 50)
        print(
            f"phase 1: {len(agents)} producers x {args.count} messages, "
            f"{len(agents) * args.consumers} consumers, "
            f"{time.time() - started:.1f} s"
        )

        due_by_payload: dict[bytes, list[int]] = collections.defaultdict(list)
        origin: dict[bytes, str] = {}
        for lang in agents:
            for row in read_lines(os.path.join(work, f"due-{lang}")):
                due_by_payload[bytes.fromhex(row[0])].append(int(row[1]))
            for payload, _ in sent[lang]:
                origin[payload] = lang
        arrivals: dict[bytes, list[tuple[int, int]]] = collections.defaultdict(list)
        table: dict[tuple[str, str], int] = collections.Counter()
        per_consumer = collections.Counter()
        for lang in agents:
            for c in range(args.consumers):
                for row in read_lines(os.path.join(work, f"got-{lang}-{c}")):
                    payload = bytes.fromhex(row[0])
                    arrivals[payload].append((int(row[1]), int(row[2])))
                    table[(origin.get(payload, "?"), lang)] += 1
                    per_consumer[lang] += 1

        expected = collections.Counter(p for lang in agents for p, _ in sent[lang])
        received = collections.Counter({p: len(a) for p, a in arrivals.items()})
        lost = expected - received
        extra = received - expected
        check(
            not lost,
            f"{args.kind}: every payload arrived ({sum(expected.values())} sent, "
            f"{sum(lost.values())} lost)",
        )
        check(
            not extra,
            f"{args.kind}: no payload arrived twice or from nowhere ({sum(extra.values())} extra)",
        )
        early = 0
        for payload, got in arrivals.items():
            if args.kind == "reliable":
                early += sum(1 for at, due in got if at < due)
            else:
                dues = sorted(due_by_payload.get(payload, []))
                ats = sorted(at for at, _ in got)
                early += sum(1 for at, due in zip(ats, dues) if at < due)
        check(
            early == 0, f"{args.kind}: no message before its due time (server clock): {early} early"
        )
        for lang in agents:
            check(
                per_consumer[lang] > 0,
                f"{args.kind}: the {lang} consumer took {per_consumer[lang]} messages",
            )
        langs = list(agents)
        print("producer \\ consumer  " + "".join(f"{c:>9}" for c in langs))
        for p in langs:
            print(f"{p:<20} " + "".join(f"{table[(p, c)]:>9}" for c in langs))

        # Phase 2: byte-identical special payloads, every producer to every consumer.
        if args.skip_bytes:
            return finish(passed, failed, args.kind)
        # Producers first, then consumers: a consumer's idle window must not pass while a
        # slow-starting producer (a JVM on a loaded machine) has not offered yet.
        producers, consumers = [], []
        for consumer in agents:
            q = f"bytes-{args.kind}-{consumer}-{os.getpid()}"
            for producer, cmd in agents.items():
                infile = os.path.join(work, f"bytes-in-{producer}")
                with open(infile, "w") as f:
                    for i, payload in enumerate(special_payloads(producer)):
                        f.write(f"{payload.hex()}\t{i * 100}\n")
                producers.append(
                    (
                        f"bytes producer {producer}->{consumer}",
                        cmd
                        + [
                            "produce",
                            redis.url,
                            args.kind,
                            q,
                            infile,
                            os.path.join(work, f"bytes-due-{producer}-{consumer}"),
                        ],
                    )
                )
            consumers.append(
                (
                    f"bytes consumer {consumer}",
                    agents[consumer]
                    + [
                        "consume",
                        redis.url,
                        args.kind,
                        q,
                        "4000",
                        os.path.join(work, f"bytes-got-{consumer}"),
                    ],
                )
            )
        run_all(producers, timeout=180)
        run_all(consumers, timeout=180)
        for consumer in agents:
            got = collections.Counter(
                bytes.fromhex(r[0]) for r in read_lines(os.path.join(work, f"bytes-got-{consumer}"))
            )
            want = collections.Counter(p for producer in agents for p in special_payloads(producer))
            check(
                got == want,
                f"{args.kind}: {consumer} gets zero bytes, invalid and multi-byte UTF-8 "
                f"and the empty value byte-identical from every language",
            )
    finally:
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)
    return finish(passed, failed, args.kind)


def finish(passed: int, failed: int, kind: str) -> int:
    print(f"interop {kind}: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
