"""One member of a classic group, and the results handed back to its pending requests.

A member that sent JoinGroup (or SyncGroup) and waits for the rebalance to progress holds
a callback; the coordinator calls it exactly once with a ``JoinResult`` (``SyncResult``)
and clears it. Results carry Kafka errors (``Errors.NONE``, ``Errors.UNKNOWN_MEMBER_ID``, ...): the
handlers turn them into protocol codes, nothing here knows the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from eoslog.errors import Errors

UNKNOWN_MEMBER_ID = ""  # the member id a member sends before the coordinator gave it one

Protocols = tuple[tuple[str, bytes], ...]  # (protocol name, metadata), in the member's preference


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: Errors
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = field(default=None, repr=False)
    awaiting_sync: SyncCallback | None = field(default=None, repr=False)
    # Joined but not yet through a completed join phase: such a member is expired after
    # the new-member join timeout even while it awaits the join (Kafka's isNew).
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol!r}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols with the same metadata, in the same order (a no-op rejoin)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def complete_join(self, result: JoinResult) -> bool:
        callback, self.awaiting_join = self.awaiting_join, None
        if callback is None:
            return False
        callback(result)
        return True

    def complete_sync(self, result: SyncResult) -> bool:
        callback, self.awaiting_sync = self.awaiting_sync, None
        if callback is None:
            return False
        callback(result)
        return True
