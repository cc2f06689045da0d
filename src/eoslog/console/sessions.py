"""The console's sessions: who is logged in, with which clients, until when.

A person logs in with their own Kafka SASL credentials; the console then talks to the cluster
*as that user*: one admin client and, when the records or Spark page needs them, one consumer
per isolation level, made for the session and closed at logout or expiry. So the broker's
ACLs decide every page and action, and its audit line names the person.

Sessions live here, server-side: the cookie holds only a random id (``secrets``, 256 bits).
Each session has a CSRF token (``csrf``), the destructive actions waiting for their
confirmation (``pending``: what was asked, replayed exactly as stored), a one-shot message for
the next page, and its own lag history. A session ends ``idle_s`` after its last request, or
``max_s`` after the login, whichever comes first. A visitor that has not logged in gets a
session too (no principal, no clients): the login form's CSRF token lives there.

With ``--no-auth`` every session shares the console's own clients (its ``--command-config``
identity), which are closed only when the console stops.

What it must never do: keep or log a password (it goes to the client's SASL exchange only),
hand one session's clients to another.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pygal

from eoslog.client import Admin, Consumer

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_INLINE_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.DOTALL | re.IGNORECASE)
MAX_VISITORS = 10_000  # sessions without a login kept at once; the oldest go first


class LagHistory:
    """Each group's total lag (against the high watermark and the LSO) as one session's groups
    page saw it, the last ``MAX_POINTS`` times, drawn as a small line chart (pygal, inline SVG)."""

    MAX_POINTS = 120

    def __init__(self) -> None:
        self._points: dict[str, deque[tuple[float, int, int]]] = {}

    def sample(self, group_id: str, lag: int, lag_stable: int) -> None:
        self._points.setdefault(group_id, deque(maxlen=self.MAX_POINTS)).append((time.time(), lag, lag_stable))

    def chart(self, group_id: str) -> str:
        points = list(self._points.get(group_id, ()))
        chart = pygal.Line(width=520, height=170, js=[], disable_xml_declaration=True, legend_at_bottom=True,
                           show_x_labels=False, include_x_axis=True, title="lag over time")
        chart.add("lag", [lag for _, lag, _ in points])
        chart.add("lag (read_committed)", [stable for _, _, stable in points])
        # pygal puts its tooltips' config in an inline script even with js=[]: no script on a page
        # but the console's own file (its Content-Security-Policy would refuse it anyway).
        return _INLINE_SCRIPT.sub("", str(chart.render(is_unicode=True)))


class Clients:
    """One admin client and, made when first needed, one consumer per isolation level (no
    group), all with the same settings: one person's identity, or the console's own."""

    def __init__(self, settings: Mapping[str, Any], admin: Admin | None = None) -> None:
        self.settings = dict(settings)
        self.admin = admin if admin is not None else Admin({"client.id": "eoslog-console", **self.settings})
        self._consumers: dict[str, Consumer] = {}
        self.lock = threading.Lock()  # a consumer serves one page at a time

    def consumer(self, isolation: str) -> Consumer:
        """Call with ``lock`` held."""
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(isolation)
        if isolation not in self._consumers:
            self._consumers[isolation] = Consumer({"client.id": "eoslog-console-records", **self.settings,
                                                   "isolation.level": isolation})
        return self._consumers[isolation]

    def close(self) -> None:
        with self.lock:
            for c in self._consumers.values():
                c.close()
            self._consumers.clear()
        self.admin.close()


@dataclass(frozen=True, slots=True)
class PendingAction:
    """A destructive action asked for and shown for confirmation: exactly what the confirming
    POST will do."""

    action: str  # the route's name: "delete-records", "reset-offsets", "abort"
    values: Mapping[str, str]
    summary: str  # what is about to happen, in words


@dataclass
class Session:
    id: str
    csrf: str
    principal: str | None  # "User:alice"; None: a visitor who has not logged in
    clients: Clients | None
    owns_clients: bool
    created: float
    last_seen: float
    pending: dict[str, PendingAction] = field(default_factory=dict)
    message: str | None = None
    lag: LagHistory = field(default_factory=LagHistory)

    @property
    def logged_in(self) -> bool:
        return self.principal is not None and self.clients is not None

    def take_message(self) -> str | None:
        message, self.message = self.message, None
        return message

    def ask(self, action: PendingAction) -> str:
        """Store ``action`` until confirmed; the token the confirming POST carries."""
        token = secrets.token_urlsafe(16)
        while len(self.pending) >= 16:  # a few open confirmation pages at most
            self.pending.pop(next(iter(self.pending)))
        self.pending[token] = action
        return token


class SessionStore:
    def __init__(self, idle_s: float, max_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_s, self.max_s, self.clock = idle_s, max_s, clock
        self._sessions: dict[str, Session] = {}
        self._visitors: OrderedDict[str, None] = OrderedDict()  # sessions without a login, oldest first
        self._swept = float("-inf")
        self._lock = threading.Lock()

    def visitor(self) -> Session:
        """A session for someone who has not logged in: a CSRF token for the login form."""
        return self._add(None, None, owns_clients=False)

    def login(self, principal: str, clients: Clients, owns_clients: bool = True) -> Session:
        """A new session (a new id: the visitor's id never becomes a logged-in one)."""
        return self._add(principal, clients, owns_clients)

    def _add(self, principal: str | None, clients: Clients | None, owns_clients: bool) -> Session:
        now = self.clock()
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), principal, clients, owns_clients,
                          now, now)
        with self._lock:
            self._sessions[session.id] = session
            if principal is None:
                self._visitors[session.id] = None
                while len(self._visitors) > MAX_VISITORS:
                    self._sessions.pop(self._visitors.popitem(last=False)[0], None)
        return session

    def _drop(self, session_id: str) -> Session | None:
        self._visitors.pop(session_id, None)
        return self._sessions.pop(session_id, None)

    def get(self, session_id: str | None) -> tuple[Session | None, list[Clients]]:
        """The live session of that id, its idle time restarted; and the clients of every session
        that expired meanwhile, for the caller to close (off the event loop)."""
        now = self.clock()
        expired: list[Session] = []
        with self._lock:
            if now - self._swept >= 1:  # every session looked at once a second at most
                self._swept = now
                expired = [s for s in self._sessions.values() if self._ended(s, now)]
                for s in expired:
                    self._drop(s.id)
            session = self._sessions.get(session_id) if session_id else None
            if session is not None and self._ended(session, now):
                expired.append(session)
                self._drop(session.id)
                session = None
            if session is not None:
                session.last_seen = now
        return session, [s.clients for s in expired if s.owns_clients and s.clients is not None]

    def _ended(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self.idle_s or now - session.created > self.max_s

    def end(self, session: Session) -> Clients | None:
        """Log out: the session is gone; its own clients are returned to be closed."""
        with self._lock:
            self._drop(session.id)
        return session.clients if session.owns_clients else None

    def end_all(self) -> list[Clients]:
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
            self._visitors.clear()
        return [s.clients for s in sessions if s.owns_clients and s.clients is not None]
