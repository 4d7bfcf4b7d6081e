"""Share sessions (KIP-932): Kafka's ShareSessionCache, keyed by (group id, member id).

A share session remembers which share-partitions a member fetches, so that its incremental
ShareFetch requests may carry no topics at all (librdkafka sends exactly that). The rules are
Kafka's (SharePartitionManager.newContext / acknowledgeSessionUpdate):

- ShareFetch epoch 0 opens a session with the request's partitions, replacing any the member
  had; acknowledgements on epoch 0 are INVALID_REQUEST. A full cache refuses a new session
  with SHARE_SESSION_LIMIT_REACHED (``group.share.max.share.sessions``); replacing a
  session never needs room.
- ShareFetch epoch -1 closes the session (no session: SHARE_SESSION_NOT_FOUND): its
  acknowledgements are applied, nothing is fetched, then the session goes. (Kafka's 2024 code
  refused partitions on it with INVALID_REQUEST; 4.1 and later accept them.)
- Any other epoch must be the session's (INVALID_SHARE_SESSION_EPOCH), which then moves on
  (wrapping from 2**31-1 to 1); the request's partitions are added, ForgottenTopicsData's
  removed.
- ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1 needs a session (it is closed
  after the acknowledgements); any other epoch must match and moves the session on.

Memory: at most ``max_sessions`` sessions of at most MAX_SESSION_PARTITIONS partitions each
(more is INVALID_REQUEST, the session unchanged). Sessions are not durable: after a
restart a member gets SHARE_SESSION_NOT_FOUND and opens a new one, as with Kafka's broker.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_EPOCH = 2**31 - 1
# partitions one session may name: each costs an acquisition attempt on every fetch
MAX_SESSION_PARTITIONS = 10_000

SessionPartition = tuple[uuid.UUID, int]  # (topic id, partition)
SessionKey = tuple[str, str]  # (group id, member id)


class ShareSessionError(Exception):
    """A request the share session refuses as a whole."""


class SessionNotFound(ShareSessionError):
    """Kafka's SHARE_SESSION_NOT_FOUND (122)."""


class InvalidSessionEpoch(ShareSessionError):
    """Kafka's INVALID_SHARE_SESSION_EPOCH (123)."""


class SessionLimitReached(ShareSessionError):
    """Kafka's SHARE_SESSION_LIMIT_REACHED (133)."""


class InvalidSessionRequest(ShareSessionError):
    """Kafka's INVALID_REQUEST (42) for a session's epoch and its contents."""


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    epoch: int
    # insertion-ordered: the order the member asked for its partitions
    partitions: dict[SessionPartition, None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FetchContext:
    """What one ShareFetch works on: the session's partitions after the request, whether it
    opened the session (a full response) and whether it closes it."""

    partitions: tuple[SessionPartition, ...]
    full: bool
    final: bool


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch_context(self, group_id: str, member_id: str, epoch: int, wanted: Iterable[SessionPartition],
                      forgotten: Iterable[SessionPartition], has_acks: bool) -> FetchContext:
        key = (group_id, member_id)
        wanted = list(wanted)
        if epoch == FINAL_EPOCH:
            # Kafka (since 4.1) no longer refuses partitions here: they carry the last
            # acknowledgements, and nothing is fetched on the final epoch
            session = self._sessions.get(key)
            if session is None:
                raise SessionNotFound(f"Share session not found for group {group_id} member {member_id}")
            return FetchContext(tuple(session.partitions), False, True)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise InvalidSessionRequest("Acknowledge data present in the initial share fetch request")
            if key not in self._sessions and len(self._sessions) >= self.max_sessions:
                raise SessionLimitReached("The share session cache is full")
            if len(set(wanted)) > MAX_SESSION_PARTITIONS:
                raise InvalidSessionRequest(f"A share session holds at most {MAX_SESSION_PARTITIONS} partitions")
            session = self._sessions[key] = ShareSession(next_epoch(INITIAL_EPOCH), dict.fromkeys(wanted))
            return FetchContext(tuple(session.partitions), True, False)
        session = self._checked(key, epoch)
        kept = dict(session.partitions)
        for partition in forgotten:
            kept.pop(partition, None)
        for partition in wanted:
            kept.setdefault(partition, None)
        if len(kept) > MAX_SESSION_PARTITIONS:
            raise InvalidSessionRequest(f"A share session holds at most {MAX_SESSION_PARTITIONS} partitions")
        session.partitions = kept
        session.epoch = next_epoch(session.epoch)
        return FetchContext(tuple(session.partitions), False, False)

    def acknowledge_update(self, group_id: str, member_id: str, epoch: int) -> bool:
        """Check a ShareAcknowledge's epoch and move the session on; True when it closes it."""
        if epoch == INITIAL_EPOCH:
            raise InvalidSessionEpoch("A share acknowledge request cannot have the initial epoch")
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self._sessions:
                raise SessionNotFound(f"Share session not found for group {group_id} member {member_id}")
            return True
        session = self._checked(key, epoch)
        session.epoch = next_epoch(session.epoch)
        return False

    def _checked(self, key: SessionKey, epoch: int) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise SessionNotFound(f"Share session not found for group {key[0]} member {key[1]}")
        if session.epoch != epoch:
            raise InvalidSessionEpoch(f"Share session epoch {epoch} is not the expected {session.epoch}")
        return session

    def close(self, group_id: str, member_id: str) -> bool:
        return self._sessions.pop((group_id, member_id), None) is not None

    def drop_group(self, group_id: str) -> int:
        gone = [key for key in self._sessions if key[0] == group_id]
        for key in gone:
            del self._sessions[key]
        return len(gone)

    def members(self, group_id: str) -> list[str]:
        return [member for group, member in self._sessions if group == group_id]
