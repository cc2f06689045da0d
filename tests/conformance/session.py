"""Scripted sessions, run once against eoslog and once against Apache Kafka.

A session is a function of a ``Target``: it sends kio requests (the same bytes to both brokers;
only ids a broker allocated, such as a producer id, are fed back from its own answers) and records
what it observes. ``Catalogue`` collects a module's sessions; its ``run`` executes one session on
both brokers, judges the two observations (compare.py, allowed.py) and reports the verdict
(report.py). A session fails only on an unexplained difference (or on an error of its own).
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.static.primitive import i8, i16, i32, i64

from conformance import allowed, report
from conformance.compare import judge
from conformance.observe import Aliases, tree
from eoslog.protocol.codec import decode_response
from eoslog.protocol.messages import build, request_types
from support.rawkafka import ConnectionClosed, RawClient, api_versions_request

SessionFn = Callable[["Target"], None]
POLL_TIMEOUT_S = 60.0


def common_versions(bootstraps: list[str]) -> dict[int, int]:
    """The highest version of each API that every broker supports (byte-identical requests)."""
    ranges: list[dict[int, tuple[int, int]]] = []
    for b in bootstraps:
        with RawClient(b) as c:
            resp = c.call(api_versions_request(3))
        ranges.append({int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys})
    common = {}
    for k in set.intersection(*(set(r) for r in ranges)):
        low, high = max(r[k][0] for r in ranges), min(r[k][1] for r in ranges)
        if low <= high:
            common[k] = high
    return common


@dataclass
class Broker:
    """One side of the comparison: a name, a bootstrap address, the versions to speak, and its
    log directory (for sessions that read what the broker wrote with Kafka's tools)."""
    name: str
    bootstrap: str
    versions: dict[int, int]
    data_dir: Path | None = None


@dataclass
class Target:
    broker: Broker
    # API key → the highest version this session speaks (a session of an older client's protocol).
    caps: dict[int, int] = field(default_factory=dict)
    observations: dict[str, object] = field(default_factory=dict)
    aliases: Aliases = field(default_factory=Aliases)
    _conns: dict[str, RawClient] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- connections and raw calls ---------------------------------------------------------

    def conn(self, name: str = "main", timeout_s: float = 30.0) -> RawClient:
        """A named connection, opened on first use (a request that may go unanswered uses a
        connection of its own with a short ``timeout_s``)."""
        with self._lock:
            if name not in self._conns:
                self._conns[name] = RawClient(self.broker.bootstrap, timeout_s=timeout_s)
            return self._conns[name]

    def close(self) -> None:
        for c in self._conns.values():
            c.close()

    def v(self, api_key: int, at_most: int | None = None) -> int:
        """The version to use: the highest both brokers speak (capped by the session's caps and
        ``at_most``)."""
        v = min(self.broker.versions[api_key], self.caps.get(api_key, self.broker.versions[api_key]))
        return v if at_most is None else min(v, at_most)

    def request(self, api_key: int, version: int, cls: str, **fields: Any) -> Any:
        return build(getattr(request_types(api_key, version), cls), **fields)

    def types(self, api_key: int, version: int) -> Any:
        return request_types(api_key, version)

    def call(self, request: Any, label: str | None = None, conn: str = "main") -> Any:
        """Send, read the answer, record it (under ``label``, default ``<Api>#n``)."""
        response = self.quiet_call(request, conn)
        self.record(label or self._label(type(request).__name__.removesuffix("Request")), response)
        return response

    def send(self, request: Any, conn: str) -> int:
        """Send without waiting (a request the broker holds, such as a JoinGroup during a
        rebalance); ``receive`` reads and records its answer later."""
        cid, data = self.conn(conn).frame(request)
        self.conn(conn).send(data)
        return cid

    def receive(self, request: Any, cid: int, label: str, conn: str) -> Any:
        got, response = decode_response(self.conn(conn).read_frame(), request.__api_key__, request.__version__)
        assert got == cid, f"correlation id {got}, expected {cid}"
        self.record(label, response)
        return response

    def send_only(self, request: Any, conn: str = "main") -> None:
        """A request the broker does not answer (Produce with acks=0)."""
        _, data = self.conn(conn).frame(request)
        self.conn(conn).send(data)

    def quiet_call(self, request: Any, conn: str = "main") -> Any:
        """A call whose answer is not part of the observation (set-up, polling)."""
        return self.conn(conn).call(request)

    # -- observations ------------------------------------------------------------------

    def _label(self, base: str) -> str:
        with self._lock:
            n = self._counts[base] = self._counts.get(base, 0) + 1
        return f"{base}#{n}"

    def record(self, label: str, value: object) -> None:
        with self._lock:
            assert label not in self.observations, f"label {label} recorded twice"
            self.observations[label] = tree(value, self.aliases)

    def until(self, what: str, probe: Callable[[], Any], done: Callable[[Any], bool],
              timeout_s: float = POLL_TIMEOUT_S) -> Any:
        """Poll ``probe`` (quietly) until ``done`` holds for its result; fail naming ``what``."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = probe()
            if done(result):
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.broker.name}: gave up waiting for {what}; last: {result!r}")
            time.sleep(0.05)

    def parallel(self, *steps: Callable[[], Any]) -> list[Any]:
        """Run steps at once (members joining a group); their results in order."""
        results: list[Any] = [None] * len(steps)
        errors: list[BaseException] = []

        def run(i: int, step: Callable[[], Any]) -> None:
            try:
                results[i] = step()
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(steps)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        if errors:
            raise errors[0]
        return results


# Helpers for the fields every session needs; the kio primitives are re-exported for sessions.
__all__ = ["Broker", "Catalogue", "Target", "i8", "i16", "i32", "i64", "ms"]


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


@dataclass
class Catalogue:
    """A module's sessions, by name, in order."""
    area: str
    sessions: dict[str, tuple[SessionFn, str]] = field(default_factory=dict)
    caps: dict[int, int] = field(default_factory=dict)  # every session's, as Target.caps

    def session(self, name: str, what: str) -> Callable[[SessionFn], SessionFn]:
        def register(fn: SessionFn) -> SessionFn:
            assert name not in self.sessions, f"session {name} defined twice"
            self.sessions[name] = (fn, what)
            return fn
        return register

    def names(self) -> list[str]:
        return list(self.sessions)

    def run(self, name: str, brokers: tuple[Broker, Broker]) -> None:
        fn, what = self.sessions[name]
        observed = []
        for broker in brokers:
            t = Target(broker, dict(self.caps))
            try:
                fn(t)
            except (OSError, ConnectionClosed, AssertionError) as e:
                # A closed connection or a broker that never got there is observable too; the
                # session stops at that point on that broker.
                t.observations["raised"] = type(e).__name__
                t.observations["raised.detail"] = str(e)
            finally:
                t.close()
            observed.append(t.observations)
        key = f"{self.area}/{name}"
        report.dump(key, observed)
        verdict = judge(observed[0], observed[1], allowed.ALLOWED, allowed.known_for(key))
        report.add(key, what, verdict)
        if verdict.unexplained:
            lines = "\n  ".join(str(d) for d in verdict.unexplained[:40])
            more = len(verdict.unexplained) - 40
            raise AssertionError(f"{key}: {len(verdict.unexplained)} unexplained difference(s) from "
                                 f"Apache Kafka:\n  {lines}" + (f"\n  ... {more} more" if more > 0 else ""))
