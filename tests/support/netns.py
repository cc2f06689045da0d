"""Hosts in Linux network namespaces for network-partition tests (iproute2, root only).

A ``Lab`` is a bridge in a "switch" namespace; each host is a namespace with one veth whose
other end is on that bridge, and the test process (root namespace) reaches every host
through a veth of its own. ``isolate(host)`` takes the host's port on the switch down — the
host then reaches nobody (other brokers, ZooKeeper, the test) and only processes inside its
namespace reach it; ``heal(host)`` brings it back. Everything is named with a tag (and a
subnet) the lab holds a lock on for its life, so labs of concurrent runs (pytest-xdist's
workers, other people's runs) never share names or addresses, and what a dead run left under
a free tag is removed before it is reused; ``close()`` removes everything (namespaces take
their interfaces with them) and frees the tag.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from support import deps


def require_netns() -> None:
    deps.require("root and iproute2 (network namespaces)", os.geteuid() == 0 and _has_ip(),
                 "run the tests as root on Linux with iproute2 installed (apt-get install -y iproute2)")


def _has_ip() -> bool:
    try:
        return subprocess.run(["ip", "-V"], capture_output=True, timeout=10).returncode == 0
    except OSError:
        return False


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str
    switch_port: str  # the veth end on the bridge

    def command(self, *cmd: str) -> list[str]:
        """``cmd`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *cmd]


TAGS = range(20, 220)  # e20..e219, subnets 10.213.20-219.0/24


def _claim_tag() -> tuple[int, int]:
    """A tag number no live lab holds, and the open file whose lock holds it (released with the
    file, so by a crashed process too)."""
    locks = Path(tempfile.gettempdir()) / "eoslog-netns-locks"
    locks.mkdir(exist_ok=True)
    first = os.getpid() % len(TAGS)
    for i in range(len(TAGS)):
        n = TAGS[(first + i) % len(TAGS)]
        fd = os.open(locks / f"e{n}", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return n, fd
    raise RuntimeError(f"every network-namespace lab tag is in use ({locks})")


class Lab:
    def __init__(self) -> None:
        self._lock: int | None = None
        self.hosts: dict[str, Host] = {}

    def _name(self, n: int) -> None:
        self.tag = f"e{n}"  # interface names stay within 15 characters
        self.subnet = f"10.213.{n}"
        self.switch = f"{self.tag}sw"
        self.gateway = f"{self.subnet}.1"  # the root namespace's address on the bridge
        self._root_link = f"{self.tag}root"

    def start(self) -> Lab:
        require_netns()
        n, self._lock = _claim_tag()
        self._name(n)
        self._remove()  # what a dead run left under this tag
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        _ip("link", "add", self._root_link, "type", "veth", "peer", "name", "rootport", "netns", self.switch)
        _ip("addr", "add", f"{self.gateway}/24", "dev", self._root_link)
        _ip("link", "set", self._root_link, "up")
        _ip("-n", self.switch, "link", "set", "rootport", "master", "br0")
        _ip("-n", self.switch, "link", "set", "rootport", "up")
        return self

    def add_host(self, name: str) -> Host:
        index = len(self.hosts) + 10
        namespace, port = f"{self.tag}-{name}", f"port{index}"
        host = Host(name, namespace, f"{self.subnet}.{index}", port)
        _ip("netns", "add", namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", self.switch)
        _ip("-n", namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        _ip("-n", self.switch, "link", "set", port, "master", "br0")
        _ip("-n", self.switch, "link", "set", port, "up")
        self.hosts[name] = host
        return host

    def isolate(self, host: Host) -> None:
        _ip("-n", self.switch, "link", "set", host.switch_port, "down")

    def heal(self, host: Host) -> None:
        _ip("-n", self.switch, "link", "set", host.switch_port, "up")

    def close(self) -> None:
        if self._lock is None:
            return
        self._remove()
        os.close(self._lock)
        self._lock = None

    def _remove(self) -> None:
        leftovers = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
        mine = {ns for ns in (line.split()[0] for line in leftovers.splitlines() if line.strip())
                if ns == self.switch or ns.startswith(f"{self.tag}-")}
        for namespace in {h.namespace for h in self.hosts.values()} | mine:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self._root_link], capture_output=True, timeout=30)
        self.hosts.clear()
