"""Python and the Rust CLI share a queue, both ways."""

from __future__ import annotations

import subprocess

import delayq


def test_python_offers_and_the_cli_takes(url: str, name: str, cli: str) -> None:
    with delayq.Client(url) as client:
        q = client.delayed_queue(name, scheduler=False)
        q.offer("zamówienie 注文", 0.2)
        q.offer(b"\x00\xff", 0.1)
    out = subprocess.run(
        [cli, "--url", url, "--base64", "take", name, "--count", "2", "--timeout-ms", "5000"],
        capture_output=True,
        check=True,
        text=True,
    )
    import base64

    got = sorted(base64.b64decode(line) for line in out.stdout.split())
    assert got == sorted([b"\x00\xff", "zamówienie 注文".encode()])


def test_the_cli_offers_and_python_takes(url: str, name: str, cli: str) -> None:
    subprocess.run(
        [cli, "--url", url, "offer", name, "200", "from rust"], check=True, capture_output=True
    )
    with delayq.Client(url) as client:
        assert client.delayed_queue(name).take(5) == b"from rust"


def test_reliable_queue_with_the_cli(url: str, name: str, cli: str) -> None:
    subprocess.run(
        [cli, "--url", url, "reliable", "offer", name, "0", "job", "--id", "j1"],
        check=True,
        capture_output=True,
    )
    with delayq.Client(url) as client:
        d = client.reliable_queue(name).receive(5)
        assert d is not None and (d.id, d.payload) == ("j1", b"job")
        d.ack()
