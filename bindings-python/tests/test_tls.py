"""Connection options: mutual TLS against a redis-server that requires client certificates
(a CA, server and client certificates made here with ``openssl``), the durability option
reaching core, and a Sentinel URL."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import delayq
import delayq.asyncio
from conftest import RedisServer, spawn_redis


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d: Path) -> None:
    """``ca.crt``, ``server.crt``/``.key`` for 127.0.0.1 and ``client.crt``/``.key``
    signed by it; ``other-ca.crt``, a CA that signed neither."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for ca in ("ca", "other-ca"):
        _openssl(
            d,
            "req",
            "-x509",
            *ec,
            "-days",
            "2",
            "-subj",
            f"/CN=delayq test {ca}",
            "-keyout",
            f"{ca}.key",
            "-out",
            f"{ca}.crt",
        )
    leaves = {
        "server": "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        "client": "extendedKeyUsage=clientAuth\n",
    }
    for leaf, ext in leaves.items():
        (d / f"{leaf}.ext").write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n" + ext
        )
        _openssl(
            d,
            "req",
            *ec,
            "-subj",
            f"/CN=delayq test {leaf}",
            "-keyout",
            f"{leaf}.key",
            "-out",
            f"{leaf}.csr",
        )
        _openssl(
            d,
            "x509",
            "-req",
            "-in",
            f"{leaf}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            f"{leaf}.ext",
            "-out",
            f"{leaf}.crt",
        )


class TlsServer:
    """A redis-server that speaks only TLS and requires a client certificate."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="delayq-py-tls-"))
        make_certs(self.dir)
        d = self.dir
        self.port = 0
        self.port, self.proc = spawn_redis(
            str(d),
            lambda port: [
                "redis-server",
                "--port",
                "0",
                "--tls-port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(d),
                "--tls-cert-file",
                str(d / "server.crt"),
                "--tls-key-file",
                str(d / "server.key"),
                "--tls-ca-cert-file",
                str(d / "ca.crt"),
                "--tls-auth-clients",
                "yes",
            ],
            lambda port: self.cli_at(port, "INFO", "server", timeout=2),
        )

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}"

    def cli(self, *args: str) -> str:
        return self.cli_at(self.port, *args)

    def cli_at(self, port: int, *args: str, timeout: float = 30) -> str:
        d = self.dir
        out = subprocess.run(
            [
                "redis-cli",
                "-p",
                str(port),
                "--tls",
                "--cacert",
                str(d / "ca.crt"),
                "--cert",
                str(d / "client.crt"),
                "--key",
                str(d / "client.key"),
                *args,
            ],
            capture_output=True,
            timeout=timeout,
        )
        return out.stdout.decode().strip()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make the test certificates")
    server = TlsServer()
    yield server
    server.stop()


def test_mutual_tls_carries_a_delayed_queue(tls_server: TlsServer, name: str) -> None:
    d = tls_server.dir
    with delayq.Client(
        tls_server.url,
        tls_ca_file=str(d / "ca.crt"),
        tls_cert_file=d / "client.crt",  # os.PathLike works too
        tls_key_file=d / "client.key",
    ) as client:
        q = client.delayed_queue(name)
        q.offer(b"secure", 0.1)
        assert q.take(5) == b"secure"
        assert tls_server.cli("LLEN", name) == "0"


def test_mutual_tls_with_asyncio(tls_server: TlsServer, name: str) -> None:
    d = tls_server.dir

    async def main() -> None:
        client = await delayq.asyncio.Client.connect(
            tls_server.url,
            tls_ca_file=d / "ca.crt",
            tls_cert_file=d / "client.crt",
            tls_key_file=d / "client.key",
        )
        async with client:
            r = client.reliable_queue(name)
            message_id = await r.offer(b"job", 0)
            delivery = await r.receive(5)
            assert delivery is not None and delivery.id == message_id
            assert await delivery.ack()

    asyncio.run(main())


def test_a_server_certificate_from_another_ca_is_refused(tls_server: TlsServer) -> None:
    d = tls_server.dir
    with pytest.raises(delayq.ConnectionError, match="UnknownIssuer"):
        delayq.Client(
            tls_server.url,
            tls_ca_file=d / "other-ca.crt",
            tls_cert_file=d / "client.crt",
            tls_key_file=d / "client.key",
        )


def test_a_client_without_a_certificate_is_refused(tls_server: TlsServer) -> None:
    with pytest.raises(delayq.ConnectionError, match="CertificateRequired"):
        delayq.Client(tls_server.url, tls_ca_file=tls_server.dir / "ca.crt")


def test_bad_certificate_options_are_invalid_arguments(tls_server: TlsServer) -> None:
    d = tls_server.dir
    with pytest.raises(delayq.InvalidArgument, match="no-such.crt"):
        delayq.Client(tls_server.url, tls_ca_file=d / "no-such.crt")
    with pytest.raises(delayq.InvalidArgument, match="needs its key"):
        delayq.Client(tls_server.url, tls_ca_file=d / "ca.crt", tls_cert_file=d / "client.crt")


def test_durability_options_reach_core(url: str, name: str) -> None:
    # No replica: a write waits for one, is not confirmed in time, and says so.
    with delayq.Client(url, durability_replicas=1, durability_timeout=0.2) as client:
        q = client.delayed_queue(name, scheduler=False)
        with pytest.raises(delayq.TimeoutError, match="replica"):
            q.offer(b"v", 60)
    # Zero replicas: nothing to wait for.
    with delayq.Client(url, durability_replicas=0) as client:
        assert client.delayed_queue(name, scheduler=False).offer(b"v", 60) > 0
    for bad in (-1, "1", 2**40):
        with pytest.raises(delayq.InvalidArgument):
            delayq.Client(url, durability_replicas=bad)  # type: ignore[arg-type]
    with pytest.raises(delayq.InvalidArgument):
        delayq.Client(url, durability_replicas=1, durability_timeout=-1)


def test_a_sentinel_url_reaches_the_master(redis_server: RedisServer, name: str) -> None:
    """``redis+sentinel://host:port/MASTER``: the sentinel names the master, delayq uses it."""
    if shutil.which("redis-sentinel") is None:
        pytest.skip("redis-sentinel is not installed")
    d = Path(tempfile.mkdtemp(prefix="delayq-py-sentinel-"))
    proc, port = None, 0
    try:
        # A port taken between choosing it and binding it ends the sentinel: another one.
        for _ in range(5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            (d / "sentinel.conf").write_text(
                f"port {port}\nbind 127.0.0.1\ndir {d}\n"
                f"sentinel monitor pymaster 127.0.0.1 {redis_server.port} 1\n"
            )
            proc = subprocess.Popen(
                ["redis-sentinel", str(d / "sentinel.conf")],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.time() + 10
            ask = ["redis-cli", "-p", str(port), "SENTINEL", "get-master-addr-by-name", "pymaster"]
            while (
                str(redis_server.port)
                not in subprocess.run(ask, capture_output=True).stdout.decode()
            ):
                if proc.poll() is not None:
                    break
                assert time.time() < deadline, "redis-sentinel did not start"
                time.sleep(0.02)
            if proc.poll() is None:
                break
        else:
            raise AssertionError("redis-sentinel could not bind a free port in 5 tries")
        with delayq.Client(f"redis+sentinel://127.0.0.1:{port}/pymaster") as client:
            q = client.delayed_queue(name)
            q.offer(b"via-sentinel", 0)
            assert q.take(5) == b"via-sentinel"
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)
