"""Incremental fetch sessions (KIP-227): Kafka's FetchSessionCache, FetchManager.newContext
and its fetch contexts, for the Fetch handler (adapter/handlers/fetch.py).

A session remembers the partitions a consumer fetches, with each one's request parameters
(fetch offset, log start offset, partition max bytes, current leader epoch) and what the last
answer told the client (high watermark, log start offset). An incremental request lists only
what changed; its answer lists only partitions with something new. The rules are Kafka's
(FetchSession.scala):

- Request metadata (v7+): epoch -1 (FINAL) is a sessionless full fetch; epoch 0 (INITIAL) a
  full fetch that opens a session when the cache has room (the answer carries its id, else
  0). Both close the session id they name. Any other epoch is incremental on that session:
  an unknown id is FETCH_SESSION_ID_NOT_FOUND, another epoch INVALID_FETCH_SESSION_EPOCH, a
  request whose version disagrees with the session's use of topic ids (v13+) is
  FETCH_SESSION_TOPIC_ID_ERROR; all three with no partitions and session id 0.
- An incremental request adds or updates its partitions, then removes ForgottenTopicsData's;
  a session left empty is closed and the request answered sessionless. Otherwise the epoch
  moves on (``next_epoch``: 2**31-1 wraps to 1) and the answer lists the partitions with
  records, an error, or a high watermark or log start offset other than the one last sent
  (CachedPartition.maybeUpdateResponseData; the last stable offset is not compared, as in
  Kafka). A partition answered with records moves to the end of the session's order, so the
  next fetch reads the others first (its budget is shared in that order).
- A throttled answer (client quotas) changes nothing: no session is created, nothing cached
  is updated, and the answer is Kafka's (session id 0 for full fetches, the session's for
  incremental ones).
- Eviction (FetchSessionCache.tryEvict): with the cache full, a new session may replace the
  least recently used one if it was idle longer than ``eviction_ms``; else the smallest
  session (fewest partitions, then lowest id) among those last used more than
  ``eviction_ms`` after their creation, if the new one has more partitions. Ties on last use are broken by the order the sessions were
  used (Kafka breaks them by id; ids are random, so neither order means anything). There are
  no followers here, so no session is privileged, and there is one cache shard.

Ours, stricter than Kafka: a session belongs to the principal that created it; another
principal naming it gets FETCH_SESSION_ID_NOT_FOUND (its full fetches do not close it), so one
client cannot burn another's epochs. Ids are random (``secrets``), never 0 or -1. A session
holds at most ``max_partitions`` partitions (the broker's partition limit), all sessions
together at most ``max_total_partitions`` (a session of 10,000 partitions costs 2.4-4.8 MB,
so Kafka's 1000 slots of them would be GBs any client could make the broker hold), and no
name longer than any topic's (``topic_names.MAX_LENGTH``: such a name is answered, never
kept, so a kept name costs at most 249 bytes): a full fetch that would break one of these
opens no session (sessions idle longer than ``eviction_ms`` are evicted for room), and an
incremental one that would closes its session with FETCH_SESSION_ID_NOT_FOUND, so the
client starts over. Sessions are not durable: after a
restart every client gets FETCH_SESSION_ID_NOT_FOUND and starts over, as with Kafka.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from .security.principal import Principal
from .topic_names import MAX_LENGTH as MAX_TOPIC_NAME_LENGTH

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH, FINAL_EPOCH = 0, -1
MAX_EPOCH = 2**31 - 1

TopicKey = Any  # the topic name (v7-12) or its id (v13+, a UUID)
PartitionKey = tuple[Any, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: FINAL stays FINAL, the largest int wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a fetch: the request's parameters (named as kio names them, so a
    request's own partition entries read the same) and, in a session, what the client was
    last told."""

    topic: TopicKey
    partition: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    high_watermark: int = -1
    local_log_start_offset: int = -1

    @property
    def key(self) -> PartitionKey:
        return self.topic, self.partition

    def update_request(self, req: Any) -> None:
        self.fetch_offset = req.fetch_offset
        self.log_start_offset = getattr(req, "log_start_offset", -1)
        self.partition_max_bytes = req.partition_max_bytes
        self.current_leader_epoch = getattr(req, "current_leader_epoch", -1)

    def must_respond(self, entry: dict, update: bool) -> bool:
        """Kafka's maybeUpdateResponseData: whether ``entry`` (this partition's answer) has
        anything the client does not know; with ``update``, remember it as sent."""
        respond = bool(entry["records"])
        if self.high_watermark != entry["high_watermark"]:
            respond = True
            if update:
                self.high_watermark = entry["high_watermark"]
        if self.local_log_start_offset != entry["log_start_offset"]:
            respond = True
            if update:
                self.local_log_start_offset = entry["log_start_offset"]
        if entry["error_code"] != ErrorCode.none:
            # an error is always answered, and answered again once it is gone
            respond = True
            if update:
                self.high_watermark = -1
        return respond


def _keepable(topic: TopicKey) -> bool:
    """Whether a session may keep a partition of ``topic``: a name longer than any topic's
    names none, and would cost up to 32 KB for each partition kept."""
    return not isinstance(topic, str) or len(topic) <= MAX_TOPIC_NAME_LENGTH


def cached(topic: TopicKey, req: Any) -> CachedPartition:
    return CachedPartition(topic, req.partition, req.fetch_offset, getattr(req, "log_start_offset", -1),
                           req.partition_max_bytes, getattr(req, "current_leader_epoch", -1))


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    principal: Principal
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    # insertion-ordered: the order the partitions are read in
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)


@dataclass(slots=True)
class Answered:
    """One partition as read: the fetch's entry for it and the response entry built."""

    part: Any  # a CachedPartition or a request's partition entry
    topic: TopicKey
    entry: dict


class FetchContext:
    """What one Fetch works on (``partitions``, in reading order) and how its answer is cut
    and remembered. The base class is the sessionless context (epoch -1)."""

    error: ErrorCode = ErrorCode.none

    def __init__(self, partitions: Sequence[tuple[TopicKey, Any]]) -> None:
        self.partitions = partitions

    def select(self, answered: list[Answered]) -> list[Answered]:
        """The partitions to answer, changing nothing (the size a quota is charged for)."""
        return answered

    def commit(self, answered: list[Answered]) -> tuple[ErrorCode, int, list[Answered]]:
        """Remember what is sent: (top-level error, session id, partitions to answer)."""
        return ErrorCode.none, INVALID_SESSION_ID, answered

    def throttled(self) -> tuple[ErrorCode, int]:
        """The top-level error and session id of a throttled (empty) answer."""
        return ErrorCode.none, INVALID_SESSION_ID


class SessionErrorContext(FetchContext):
    def __init__(self, error: ErrorCode) -> None:
        super().__init__(())
        self.error = error

    def commit(self, answered: list[Answered]) -> tuple[ErrorCode, int, list[Answered]]:
        return self.error, INVALID_SESSION_ID, []

    def throttled(self) -> tuple[ErrorCode, int]:
        return self.error, INVALID_SESSION_ID


class FullFetchContext(FetchContext):
    """Epoch 0: answered in full; a session of every partition answered is opened at commit."""

    def __init__(self, cache: FetchSessionCache, partitions: Sequence[tuple[TopicKey, Any]],
                 uses_topic_ids: bool, principal: Principal) -> None:
        super().__init__(partitions)
        self._cache = cache
        self._uses_topic_ids = uses_topic_ids
        self._principal = principal

    def commit(self, answered: list[Answered]) -> tuple[ErrorCode, int, list[Answered]]:
        def build() -> dict[PartitionKey, CachedPartition]:
            parts: dict[PartitionKey, CachedPartition] = {}
            for a in answered:
                part = cached(a.topic, a.part)
                part.high_watermark = a.entry["high_watermark"]
                part.local_log_start_offset = a.entry["log_start_offset"]
                parts.pop(part.key, None)  # a partition listed twice: the last entry counts
                parts[part.key] = part
            return parts

        if not all(_keepable(a.topic) for a in answered):
            return ErrorCode.none, INVALID_SESSION_ID, answered
        session_id = self._cache.maybe_create(self._principal, self._uses_topic_ids, len(answered), build)
        return ErrorCode.none, session_id, answered


class IncrementalFetchContext(FetchContext):
    """An epoch > 0 on a session: every partition of the session is read, only news answered."""

    def __init__(self, session: FetchSession) -> None:
        super().__init__([(p.topic, p) for p in session.partitions.values()])
        self.session = session
        self._expected_epoch = session.epoch

    def _stale(self) -> bool:
        # another request moved the session on while this one waited (Kafka: "possible
        # duplicate request")
        return self.session.epoch != self._expected_epoch

    def select(self, answered: list[Answered]) -> list[Answered]:
        if self._stale():
            return []
        return [a for a in answered if a.part.must_respond(a.entry, False)]

    def commit(self, answered: list[Answered]) -> tuple[ErrorCode, int, list[Answered]]:
        session = self.session
        if self._stale():
            return ErrorCode.invalid_fetch_session_epoch, session.id, []
        chosen = []
        parts = session.partitions
        for a in answered:
            part = a.part
            if part.must_respond(a.entry, True):
                chosen.append(a)
                if a.entry["records"] and parts.get(part.key) is part:
                    del parts[part.key]  # Kafka's fairness: to the end of the session's order
                    parts[part.key] = part
        return ErrorCode.none, session.id, chosen

    def throttled(self) -> tuple[ErrorCode, int]:
        if self._stale():
            return ErrorCode.invalid_fetch_session_epoch, self.session.id
        return ErrorCode.none, self.session.id


class FetchSessionCache:
    """The broker's fetch sessions: at most ``max_entries``, each of at most
    ``max_partitions`` partitions. ``now_ms`` is the injected clock's."""

    def __init__(self, max_entries: int, eviction_ms: int, now_ms: Callable[[], int],
                 max_partitions: int = 10_000, max_total_partitions: int = 1_000_000) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.max_partitions = max_partitions
        self.max_total_partitions = max_total_partitions
        self._total = 0  # the partitions of all sessions
        self._now_ms = now_ms
        self._sessions: dict[int, FetchSession] = {}
        # ids in the order of their last use: the first is the least recently used
        self._last_used: dict[int, None] = {}
        # sessions created more than eviction_ms before their last use: (size, id) by id
        self._evictable: dict[int, tuple[int, int]] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def total_partitions(self) -> int:
        return self._total

    # -- Kafka's FetchManager.newContext ---------------------------------------------------
    def new_context(self, version: int, session_id: int, epoch: int, principal: Principal,
                    wanted: Sequence[tuple[TopicKey, Any]], forgotten: Iterable[PartitionKey]) -> FetchContext:
        """The context of one Fetch: ``wanted`` its (topic, partition entry) pairs in request
        order, ``forgotten`` its ForgottenTopicsData as (topic, partition) keys."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                session = self._sessions.get(session_id)
                if session is not None and session.principal == principal:
                    self.remove(session)
                    log.debug("fetch session %d closed by a full fetch", session_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(wanted)
            return FullFetchContext(self, wanted, version >= 13, principal)
        session = self._sessions.get(session_id)
        if session is None or session.principal != principal:
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != (version >= 13):
            return SessionErrorContext(ErrorCode.fetch_session_topic_id_error)
        parts = session.partitions
        before = len(parts)
        for topic, req in wanted:
            part = parts.get((topic, req.partition))
            if part is None:
                parts[(topic, req.partition)] = cached(topic, req)
            else:
                part.update_request(req)
        for key in forgotten:
            parts.pop(key, None)
        self._total += len(parts) - before
        if not parts:
            self.remove(session)
            log.debug("fetch session %d closed: no partitions left", session.id)
            return FetchContext(wanted)
        if len(parts) > self.max_partitions or self._total > self.max_total_partitions \
                or not all(_keepable(topic) for topic, _ in wanted):
            self.remove(session)
            log.debug("fetch session %d closed: over its bounds (%d partitions, %d in all sessions)",
                      session.id, len(parts), self._total)
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        self.touch(session, self._now_ms())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session)

    # -- Kafka's FetchSessionCache ---------------------------------------------------------
    def maybe_create(self, principal: Principal, uses_topic_ids: bool, size: int,
                     build: Callable[[], dict[PartitionKey, CachedPartition]]) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if size > self.max_partitions or size > self.max_total_partitions or self.max_entries <= 0:
            return INVALID_SESSION_ID
        now = self._now_ms()
        if len(self._sessions) >= self.max_entries and not self._try_evict(size, now):
            log.debug("no fetch session created for %d partitions: the cache is full", size)
            return INVALID_SESSION_ID
        while self._total + size > self.max_total_partitions:
            # only sessions idle past eviction_ms make room: one big newcomer must not push
            # out many sessions in use
            if not self._evict_stale(now):
                log.debug("no fetch session created for %d partitions: %d are cached", size, self._total)
                return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), principal, uses_topic_ids, now, now, next_epoch(INITIAL_EPOCH),
                               build())
        self._sessions[session.id] = session
        self._total += len(session.partitions)
        self.touch(session, now)
        log.debug("fetch session %d created for %s with %d partitions", session.id, principal, len(session.partitions))
        return session.id

    def _new_id(self) -> int:
        while True:
            candidate = 1 + secrets.randbelow(MAX_EPOCH)  # 1 .. 2**31-1: never 0 or -1
            if candidate not in self._sessions:
                return candidate

    def _try_evict(self, size: int, now: int) -> bool:
        if self._evict_stale(now):
            return True
        if not self._evictable:
            return False
        smallest = min(self._evictable.values())
        if (size, 0) < smallest:  # Kafka's EvictableKey(size, id 0) against the smallest
            return False
        self._evict(smallest[1])
        return True

    def _evict_stale(self, now: int) -> bool:
        oldest = next(iter(self._last_used), None)
        if oldest is None or now - self._sessions[oldest].last_used_ms <= self.eviction_ms:
            return False
        self._evict(oldest)
        return True

    def _evict(self, session_id: int) -> None:
        log.debug("fetch session %d evicted", session_id)
        self.remove(self._sessions[session_id])
        self.evictions += 1

    def remove(self, session: FetchSession) -> None:
        if self._sessions.get(session.id) is session:
            del self._sessions[session.id]
            self._total -= len(session.partitions)
            self._last_used.pop(session.id, None)
            self._evictable.pop(session.id, None)

    def touch(self, session: FetchSession, now: int) -> None:
        """Kafka's touch: the session's last use, and whether (and how big) it is evictable."""
        session.last_used_ms = now
        self._last_used.pop(session.id, None)
        self._last_used[session.id] = None
        if now - session.creation_ms > self.eviction_ms:
            self._evictable[session.id] = (len(session.partitions), session.id)
        else:
            self._evictable.pop(session.id, None)
