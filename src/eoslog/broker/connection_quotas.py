"""How many connections the broker takes, as Kafka's ``ConnectionQuotas`` decides.

- ``max.connections`` (broker-wide) and ``listener.name.<name>.max.connections``: while a
  listener has no slot its acceptor stops accepting (``wait_for_slot``), so a new client is
  connected by the kernel (the listen backlog) but not read or answered until a connection
  closes, as with Kafka.
- ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``, ``host:count`` pairs):
  a connection from an address that already has its maximum is closed as soon as it is
  accepted, and logged ("Rejected connection from ..."), as Kafka's acceptor does.
- The inter-broker listener, when the broker has others, is never held by ``max.connections``
  (only by its own listener limit): its connection is taken, and the least recently active
  connection of another listener is closed to make room (Kafka's closeExcessConnections).

- Descriptors (eoslog's, not Kafka's): a client's socket may not take one of the top tenth of
  the process's soft ``RLIMIT_NOFILE`` (at least 64), kept for the logs' files, group-commit
  rounds and checkpoints; a socket accepted there is closed at once. Without it, enough idle
  connections made the next fsync round fail for want of a descriptor and halted the broker.

Nothing here reads or writes sockets: the acceptor asks ``wait_for_slot`` and ``accept``, a
connection reports ``release`` when it ends. The limits are read at each decision.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import socket
from collections.abc import Callable, Iterable
from typing import Protocol

from eoslog.config import BrokerConfig, ConfigError

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1


class QuotedConnection(Protocol):
    """What the quotas need of a connection (``KafkaProtocol``)."""

    listener_name: str
    peer_host: str
    last_active: float

    @property
    def established(self) -> bool: ...  # past its TLS handshake, not closed: it can be closed

    def close(self) -> None: ...


def parse_overrides(text: str, resolve: Callable[[str], str] = socket.gethostbyname) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated; a host name
    is resolved once, as Kafka's ``InetAddress.getByName``."""
    out: dict[str, int] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            limit = int(count)
        except ValueError:
            limit = -1
        if not sep or not host or limit < 0:
            raise ConfigError(f"Invalid value {text} for configuration max.connections.per.ip.overrides: "
                              f"{item!r} is not host:count")
        try:
            address = str(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            try:
                address = resolve(host)
            except OSError as e:
                raise ConfigError(
                    f"max.connections.per.ip.overrides contains invalid addresses : {host} ({e})") from None
        out[address] = limit
    return out


def descriptor_ceiling(soft: int) -> int:
    """The lowest descriptor number a client's socket may not have under the soft limit
    ``soft``. The kernel hands out the lowest free number, so a socket numbered at or above it
    means fewer descriptors are free than the reserve kept for storage."""
    if soft == resource.RLIM_INFINITY:
        return INT_MAX
    return soft - max(64, soft // 10)


def check_connection_limits(config: BrokerConfig) -> None:
    """Kafka's start-up checks of these settings (KafkaConfig): per-ip 0 needs overrides."""
    overrides = parse_overrides(str(config["max.connections.per.ip.overrides"]))
    if int(config["max.connections.per.ip"]) == 0 and not overrides:
        raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                          "property is set.")


class ConnectionQuotas:
    def __init__(self, config: BrokerConfig, listener_names: Iterable[str], inter_broker_listener: str | None) -> None:
        self.config = config
        names = list(listener_names)
        # Kafka's protectedListener: the inter-broker listener, when the broker has others.
        self.protected = inter_broker_listener if len(names) > 1 else None
        self.total = 0
        self.by_listener = dict.fromkeys(names, 0)
        self.by_host: dict[str, int] = {}
        self.counted: set[QuotedConnection] = set()
        self._freed = asyncio.Event()  # set whenever a counted connection ends
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}
        self.descriptor_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.descriptor_ceiling = descriptor_ceiling(self.descriptor_limit)
        self._at_descriptor_ceiling = False  # logged once per stretch

    # -- the limits -------------------------------------------------------------------------

    def _max_for_host(self, host: str) -> int:
        text = str(self.config["max.connections.per.ip.overrides"])
        if text != self._overrides_text:
            self._overrides, self._overrides_text = parse_overrides(text), text
        return self._overrides.get(host, int(self.config["max.connections.per.ip"]))

    def _max_for_listener(self, name: str) -> int:
        return int(self.config.values.get(f"listener.name.{name.lower()}.max.connections", INT_MAX))

    def slot_available(self, name: str) -> bool:
        """Kafka's connectionSlotAvailable: may the listener accept one more connection?"""
        if self.by_listener.get(name, 0) >= self._max_for_listener(name):
            return False
        return name == self.protected or self.total < int(self.config["max.connections"])

    # -- decisions ------------------------------------------------------------------------------

    async def wait_for_slot(self, name: str) -> None:
        """Until the listener may accept a connection (Kafka's waitForConnectionSlot)."""
        while not self.slot_available(name):
            self._freed.clear()
            await self._freed.wait()

    def accept(self, conn: QuotedConnection) -> bool:
        """Count a connection just accepted; False (not counted) when its address has its maximum."""
        host = conn.peer_host
        limit = self._max_for_host(host)
        if self.by_host.get(host, 0) >= limit:
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     host, limit)
            return False
        name = conn.listener_name
        self.total += 1
        self.by_listener[name] = self.by_listener.get(name, 0) + 1
        self.by_host[host] = self.by_host.get(host, 0) + 1
        self.counted.add(conn)
        if name == self.protected:
            self._close_excess()
        return True

    def within_descriptors(self, fd: int, host: str) -> bool:
        """May a socket with descriptor ``fd`` be kept (below the ceiling)? Logged once per stretch."""
        if fd < self.descriptor_ceiling:
            if self._at_descriptor_ceiling:
                self._at_descriptor_ceiling = False
                log.info("accepting connections again: descriptors are free")
            return True
        if not self._at_descriptor_ceiling:
            self._at_descriptor_ceiling = True
            log.warning("Rejected connection from %s: the broker keeps its last %d file descriptors for its logs "
                        "(soft RLIMIT_NOFILE %d); raise the limit (ulimit -n) for more connections",
                        host, self.descriptor_limit - self.descriptor_ceiling, self.descriptor_limit)
        return False

    def release(self, conn: QuotedConnection) -> None:
        """A counted connection ended (again: nothing): its slot is free."""
        if conn not in self.counted:
            return
        self.counted.discard(conn)
        host = conn.peer_host
        self.total -= 1
        self.by_listener[conn.listener_name] -= 1
        left = self.by_host[host] - 1
        if left:
            self.by_host[host] = left
        else:
            del self.by_host[host]
        self._freed.set()

    def _close_excess(self) -> None:
        """Over max.connections because of the protected listener: close the least recently
        active connection of another listener, as many as it takes."""
        limit = int(self.config["max.connections"])
        while self.total > limit:
            others = [c for c in self.counted if c.listener_name != self.protected and c.established]
            if not others:
                return
            victim = min(others, key=lambda c: c.last_active)
            log.info("closing the least recently used connection from %s on %s: max.connections=%d reached",
                     victim.peer_host, victim.listener_name, limit)
            victim.close()
            self.release(victim)
