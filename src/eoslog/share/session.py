"""Share sessions (Kafka's ``ShareSessionCache``): per (group, member), the share-partitions a
member fetches from this broker and the epoch its next ShareFetch/ShareAcknowledge must carry.

Epochs (Kafka's ``ShareRequestMetadata``): 0 opens a session (replacing one the member had),
-1 closes it, anything else must be the session's current epoch and moves it on by one
(wrapping from Integer.MAX_VALUE to 1). Without a session: SHARE_SESSION_NOT_FOUND; with
another epoch: INVALID_SHARE_SESSION_EPOCH; past ``group.share.max.share.sessions`` sessions
a new one is refused with SHARE_SESSION_LIMIT_REACHED. A session belongs to the connection that
opened it: when that connection closes, its sessions end (and their members' records are
released by the manager), as Kafka's ConnectionDisconnectListener does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eoslog.errors import Errors

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

SessionKey = tuple[str, str]  # (group id, member id)
SharePartitionRef = tuple[str, int]  # (topic name, partition), in the order the member added them


def next_epoch(epoch: int) -> int:
    return 1 if epoch in (_MAX_EPOCH, FINAL_EPOCH) else epoch + 1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    connection: object
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[SharePartitionRef, None] = field(default_factory=dict)  # an ordered set

    @property
    def key(self) -> SessionKey:
        return self.group_id, self.member_id


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[SessionKey, ShareSession] = {}

    def open(self, group_id: str, member_id: str, connection: object) -> tuple[Errors, ShareSession | None]:
        """Epoch 0: a new session, replacing the member's previous one."""
        key = (group_id, member_id)
        if key not in self.sessions and len(self.sessions) >= self.max_sessions:
            return Errors.SHARE_SESSION_LIMIT_REACHED, None
        session = self.sessions[key] = ShareSession(group_id, member_id, connection)
        return Errors.NONE, session

    def resume(self, group_id: str, member_id: str, epoch: int) -> tuple[Errors, ShareSession | None]:
        """Any other epoch: the member's session, if ``epoch`` is the one it expects (-1 always
        is: the session is closed after this request). The epoch moves on."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return Errors.SHARE_SESSION_NOT_FOUND, None
        if epoch != FINAL_EPOCH:
            if epoch != session.epoch:
                return Errors.INVALID_SHARE_SESSION_EPOCH, None
            session.epoch = next_epoch(epoch)
        return Errors.NONE, session

    def close(self, session: ShareSession) -> None:
        if self.sessions.get(session.key) is session:
            del self.sessions[session.key]

    def disconnected(self, connection: object) -> list[ShareSession]:
        """The sessions opened on ``connection`` (now closed): removed and returned."""
        gone = [s for s in self.sessions.values() if s.connection is connection]
        for s in gone:
            del self.sessions[s.key]
        return gone

    def members(self, group_id: str) -> int:
        return sum(1 for g, _ in self.sessions if g == group_id)
