"""The console's server-side sessions (console/sessions.py) with a controllable clock: idle and
absolute expiry, logout, the clients an ended session hands back to be closed, and the
one-time confirmations of destructive actions."""

from __future__ import annotations

from typing import Any, cast

from eoslog.console.sessions import MAX_VISITORS, Clients, PendingAction, SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def clients(name: str) -> Clients:
    return cast(Clients, name)  # the store only hands them back: no client is made here


def test_a_session_ends_after_its_idle_time_and_after_its_absolute_lifetime() -> None:
    clock = Clock()
    store = SessionStore(idle_s=60, max_s=300, clock=clock)
    alice = store.login("User:alice", clients("alice's"))
    for _ in range(5):  # used every 50 s: never idle for 60 s ...
        clock.now += 50
        found, closed = store.get(alice.id)
        assert found is alice and closed == []
    clock.now += 51  # ... but 301 s after the login it ends all the same
    found, closed = store.get(alice.id)
    assert found is None and closed == [clients("alice's")]
    bob = store.login("User:bob", clients("bob's"))
    clock.now += 61
    assert store.get(bob.id) == (None, [clients("bob's")])
    assert store.get(bob.id) == (None, [])  # closed once


def test_logout_ends_the_session_and_shared_clients_are_never_handed_back() -> None:
    store = SessionStore(idle_s=60, max_s=300, clock=Clock())
    mine = store.login("User:carol", clients("carol's"))
    shared = store.login("User:ANONYMOUS (--no-auth)", clients("the console's"), owns_clients=False)
    assert store.end(mine) == clients("carol's") and store.get(mine.id)[0] is None
    assert store.end(shared) is None
    assert store.get("not-a-session-id")[0] is None and store.get(None)[0] is None


def test_ids_and_tokens_are_unguessable_and_a_login_gets_a_new_id() -> None:
    store = SessionStore(idle_s=60, max_s=300, clock=Clock())
    visitor = store.visitor()
    assert not visitor.logged_in
    logged = store.login("User:dan", clients("dan's"))
    assert logged.id != visitor.id and logged.csrf != visitor.csrf
    assert len({visitor.id, visitor.csrf, logged.id, logged.csrf}) == 4
    assert all(len(t) >= 43 for t in (visitor.id, visitor.csrf))  # 32 random bytes, base64url


def test_a_confirmation_is_used_once_and_old_ones_are_dropped() -> None:
    store = SessionStore(idle_s=60, max_s=300, clock=Clock())
    s = store.login("User:erin", clients("erin's"))
    asked = PendingAction("/partitions/delete-records", {"topic": "t", "partition": "0", "offset": "4"}, "delete")
    token = s.ask(asked)
    assert s.pending.pop(token) == asked and token not in s.pending
    tokens = [s.ask(asked) for _ in range(20)]
    assert len(s.pending) == 16 and tokens[0] not in s.pending and tokens[-1] in s.pending


def test_visitors_without_a_login_are_capped() -> None:
    store = SessionStore(idle_s=60, max_s=300, clock=Clock())
    logged = store.login("User:fay", clients("fay's"))
    first = store.visitor()
    for _ in range(MAX_VISITORS):
        store.visitor()
    sessions: dict[str, Any] = store._sessions
    assert first.id not in sessions and logged.id in sessions
    assert sum(1 for x in sessions.values() if x.principal is None) == MAX_VISITORS
