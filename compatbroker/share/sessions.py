"""Share sessions (KIP-932), as Kafka's ShareSessionCache and SharePartitionManager.newContext keep them: one per
(group id, member id) on each broker, holding the partitions the member fetches from this broker.

- ShareFetch with ShareSessionEpoch 0 opens a session (dropping the member's previous one) with the request's
  partitions; piggybacked acknowledgements are INVALID_REQUEST then; at `group.share.max.share.sessions` sessions
  the answer is SHARE_SESSION_LIMIT_REACHED. The session's epoch becomes 1.
- A later request must carry the session's epoch (INVALID_SHARE_SESSION_EPOCH otherwise; SHARE_SESSION_NOT_FOUND
  without a session); its partitions are added, its forgotten topics removed, and the epoch moves on (after
  Integer.MAX_VALUE it wraps to 1).
- Epoch -1 closes the session (SHARE_SESSION_NOT_FOUND without one): the request's acknowledgements are applied,
  then the member's acquired records on the session's partitions are released.
- ShareAcknowledge may not open a session (epoch 0: INVALID_SHARE_SESSION_EPOCH); otherwise the same epoch rules.
- A session also ends with the connection that opened it (Kafka's ConnectionDisconnectListener): the member's
  acquired records on its partitions are released then too.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..protocol.error_codes import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1

PartitionKey = tuple  # (topic id, partition)


class ShareSessionError(Exception):
    def __init__(self, error_code: ErrorCode, message: str = ""):
        super().__init__(message or error_code.name)
        self.error_code = error_code


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


@dataclass(eq=False)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    partitions: dict = field(default_factory=dict)   # PartitionKey -> True while the next answer must name it
    connection: object = None                        # what identifies the connection that opened it

    @property
    def key(self) -> tuple[str, str]:
        return self.group_id, self.member_id

    def update(self, added: Iterable[PartitionKey], forgotten: Iterable[PartitionKey]) -> None:
        for key in added:
            self.partitions.setdefault(key, True)  # new ones appear in the next answer even without data
        for key in forgotten:
            self.partitions.pop(key, None)


class ShareSessionCache:
    """The sessions of one broker, bounded by `group.share.max.share.sessions`."""

    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def sessions_of_group(self, group_id: str) -> list[ShareSession]:
        return [session for key, session in self._sessions.items() if key[0] == group_id]

    def open(self, group_id: str, member_id: str, partitions: Iterable[PartitionKey], connection) -> ShareSession:
        """A new session (epoch 0 requests), replacing the member's previous one (whose records stay acquired, as
        in Kafka). Raises ShareSessionError at the limit."""
        self._sessions.pop((group_id, member_id), None)
        if len(self._sessions) >= self.max_sessions:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                    "The limit of share sessions has been reached.")
        session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH),
                               {key: True for key in partitions}, connection)
        self._sessions[session.key] = session
        return session

    def existing(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request of `epoch` (> 0, or -1) continues; raises ShareSessionError."""
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "The share session was not found.")
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"Expected share session epoch {session.epoch}, got {epoch}.")
        return session

    def advance(self, session: ShareSession) -> None:
        session.epoch = next_epoch(session.epoch)

    def remove_session(self, session: ShareSession) -> bool:
        """Remove exactly this session (not a newer one of the same member); True when it was there."""
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
            return True
        return False
