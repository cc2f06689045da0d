"""The network-partition lab itself: hosts reach each other and the test process through
the switch, an isolated host reaches nobody and is reached by nobody but itself, and healing
restores both directions."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from support.harness import wait_until
from support.netns import Host, Lab

ECHO = ("import socket,sys; s=socket.create_server((sys.argv[1], 7000)); "
        "[c.sendall(b'hi') or c.close() for c in iter(lambda: s.accept()[0], None)]")


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab = Lab().start()
    yield lab
    lab.close()


def _reaches(address: str) -> bool:
    try:
        with socket.create_connection((address, 7000), timeout=1) as s:
            return s.recv(2) == b"hi"
    except OSError:
        return False


def _reaches_from(host: Host, address: str) -> bool:
    probe = f"import socket; s=socket.create_connection(('{address}', 7000), timeout=1); assert s.recv(2) == b'hi'"
    return subprocess.run(host.command(sys.executable, "-c", probe), capture_output=True, timeout=30).returncode == 0


def test_isolate_and_heal(lab: Lab) -> None:
    a, b = lab.add_host("a"), lab.add_host("b")
    servers = [subprocess.Popen(h.command(sys.executable, "-c", ECHO, h.address)) for h in (a, b)]
    try:
        wait_until(lambda: _reaches(a.address) and _reaches(b.address), "both echo servers", 30)
        assert _reaches_from(a, b.address) and _reaches_from(b, a.address)
        lab.isolate(a)
        assert not _reaches(a.address) and not _reaches_from(b, a.address) and not _reaches_from(a, b.address)
        assert _reaches_from(a, a.address)  # its own processes still reach it
        assert _reaches(b.address)
        lab.heal(a)
        time.sleep(0.2)
        wait_until(lambda: _reaches(a.address) and _reaches_from(b, a.address), "a reachable again", 30)
    finally:
        for s in servers:
            s.kill()
            s.wait(10)
