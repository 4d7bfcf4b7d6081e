"""The share-partition manager (Kafka's SharePartitionManager): every share-partition of this
broker, keyed by (group, topic, partition), with the records it hands out read from the store.

- A share-partition is loaded on a member's first fetch: restored from ``__share_group_state``
  (rmqsemantics.share.state_store) when it has a state, else, only when the group's coordinator
  assigns the partition to some member now, started where ``share.auto.offset.reset`` says and
  that start written first. A fetch of any other partition is UnknownSharePartition (Kafka's
  UNKNOWN_TOPIC_OR_PARTITION for a share-partition whose state was never initialized), so a
  client cannot create durable state for group ids and partitions of its choosing. Its settings are the group's
  configs over the broker's ``group.share.*`` defaults, looked up again on every fetch, so an
  altered group config applies to the next acquisition.
- A fetch reads the log from the first acquirable offset (whole batches, as Fetch returns them,
  at most the bytes the request allows, only below the LSO under read_committed), acquires
  records only inside what it read (so every acquired record leaves with its batch), and
  returns the batches holding acquired records. Control records are archived unseen, and under
  read_committed so are aborted transactions' records (found in the batches read with the
  partition's aborted-transaction index, as a read_committed client finds them).
- One timer task expires acquisition locks (and wakes records waiting out a RocketMQ backoff)
  at the earliest deadline, at most one round per 20 ms (a round looks at every
  share-partition); freed records wake waiting ShareFetches like an append does.
- An archived record (REJECT, or the delivery limit) is written to the group's KIP-1191
  dead-letter topic (``errors.deadletterqueue.topic.name``: ``__dlq.errors.*`` headers, key and
  value only with ``errors.deadletterqueue.copy.record.enable``), else, when the group uses
  RocketMQ's options, copied whole to ``rmq_dlq.<group>`` with ORIGIN_*, RECONSUME_TIMES and
  DLQ_REASON headers, so ``rmqk dlq`` lists and resends it. The copy follows the durable state change and is not atomic
  with it (as in Kafka): a crash in between loses that dead letter, never the state change.

Memory is bounded by the share-partitions' windows (SharePartition's own bound) times the
share-partitions fetched; nothing here grows with the topic.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rmqkafka.rmqsemantics.parked_records import build_batch
from rmqkafka.rmqsemantics.scheduler import DLQ_PREFIX
from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.rmqsemantics.share.config import BACKOFF_LEVELS, READ_COMMITTED, ShareGroupSettings
from rmqkafka.rmqsemantics.share.partition import (
    AckBatch,
    AcquiredRange,
    AckType,
    RecordState,
    SharePartition,
    StateUpdate,
    initial_start_offset,
)
from rmqkafka.rmqsemantics.share.state_log import SharePartitionKey
from rmqkafka.rmqsemantics.share.state_store import ShareStateStore
from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import Clock
from rmqkafka.rmqsemantics.views import View
from rmqkafka.storage.topics import TopicMeta

Entity = TopicMeta | View  # a share group reads a topic or a subscription view

from .read_cache import ShareReadCache
from .sessions import ShareSessionCache
from .settings import DeadLetterTarget

log = logging.getLogger(__name__)

ORIGIN_TOPIC, ORIGIN_PARTITION, ORIGIN_OFFSET = "ORIGIN_TOPIC", "ORIGIN_PARTITION", "ORIGIN_OFFSET"
RECONSUME_TIMES, DLQ_REASON = "RECONSUME_TIMES", "DLQ_REASON"
_DONE_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_TIMER_IDLE_S = 30.0  # the timer looks again at least this often (a group config may change)
_TIMER_TICK_S = 0.02  # locks expire at most this late
_UPKEEP_S = 30.0  # how often __share_group_state is checked for compaction and trimming
_READ_CHUNK = 1 << 20  # bytes of log read at a time by a share fetch, at most
_FIRST_CHUNK_MIN = 16 << 10
_BYTES_PER_RECORD_GUESS = 128  # sizes a fetch's first chunk: MaxRecords x this
_MAX_CHUNKS = 64  # chunks one partition's acquisition reads at most
_READ_CACHE_BYTES = 8 << 20  # batches kept for the other members' fetches (read_cache), all partitions


class UnknownSharePartition(Exception):
    """Acknowledgements for a share-partition that has no state, or a fetch of one that no
    member is assigned (Kafka's UNKNOWN_TOPIC_OR_PARTITION)."""


@dataclass(slots=True)
class PartitionFetch:
    """One partition's part of a ShareFetch answer."""

    acquired: list[AcquiredRange] = field(default_factory=list)
    batches: list[bytes] = field(default_factory=list)
    size: int = 0

    @property
    def count(self) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.acquired)


@dataclass(slots=True)
class ShareMetrics:
    """Counters since start (the metrics collector reads them)."""

    acquisitions: int = 0  # records acquired
    redeliveries: int = 0  # acquisitions of a record delivered before
    acks: Counter = field(default_factory=Counter)  # by AckType name
    lock_expiries: int = 0
    dead_letters: int = 0


class SharePartitionManager:
    def __init__(self, semantics: Semantics, clock: Clock, state: ShareStateStore,
                 settings_for: Callable[[str], ShareGroupSettings], sessions: ShareSessionCache,
                 notify: Callable[[str, int], None] = lambda topic, partition: None,
                 is_group_empty: Callable[[str], bool] | None = None,
                 dead_letter_target: Callable[[str], DeadLetterTarget] = lambda group_id: DeadLetterTarget()) -> None:
        """``settings_for(group id)``: the group's settings now; ``notify(topic, partition)``:
        records of that partition became acquirable again (wakes waiting fetches);
        ``is_group_empty(group id)``: the share group coordinator's word on membership (until
        it is given, a group is empty when none of its members has a share session);
        ``dead_letter_target(group id)``: the group's KIP-1191 dead-letter topic."""
        self.semantics = semantics
        self.clock = clock
        self.state = state
        self.settings_for = settings_for
        self.sessions = sessions
        self.notify = notify
        self._is_group_empty = is_group_empty
        # until the coordinator is handed over (use_membership), any partition may get state
        self._is_assigned: Callable[[str, str, int], bool] = lambda group_id, topic, partition: True
        self._dead_letter_target = dead_letter_target
        self.metrics = ShareMetrics()
        self.read_cache = ShareReadCache(_READ_CACHE_BYTES)
        self._partitions: dict[SharePartitionKey, SharePartition] = {}
        self._dead: list[tuple[SharePartitionKey, int, int, str]] = []
        self._wakeup = asyncio.Event()
        self._next_wake_ms: int | None = None  # the timer's next planned round (epoch ms)
        self._timer: asyncio.Task | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._timer = asyncio.create_task(self._run_timer(), name="share-lock-timer")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            try:
                await self._timer
            except asyncio.CancelledError:
                pass
            self._timer = None

    async def _run_timer(self) -> None:
        last_upkeep = self.clock.monotonic()
        while True:
            if self.clock.monotonic() - last_upkeep >= _UPKEEP_S:
                last_upkeep = self.clock.monotonic()
                await self.upkeep()
            wake = self.expire_due()
            self._next_wake_ms = wake
            delay = _TIMER_IDLE_S if wake is None else max(0.0, (wake - self.clock.now_ms()) / 1000)
            self._wakeup.clear()
            try:
                # at most one round per _TIMER_TICK_S: a round looks at every share-partition,
                # so a stream of locks with distinct deadlines must not make it run each ms
                await asyncio.wait_for(self._wakeup.wait(), max(min(delay, _TIMER_IDLE_S), _TIMER_TICK_S))
            except TimeoutError:
                pass

    async def upkeep(self) -> None:
        """``__share_group_state`` neither grows without bound nor loses a state to retention:
        it is compacted (and a checkpoint records its new log start) or written again."""
        try:
            self.state.rewrite_if_trimmed()
            if self.state.compact():
                await self.semantics.store.checkpoint()
        except Exception:
            log.exception("%s upkeep failed; tried again later", "__share_group_state")

    def _plan(self, deadline_ms: int | None) -> None:
        """A new lock or a record waiting out a backoff: the timer needs an earlier round only
        if this comes first."""
        if deadline_ms is None:
            return
        if self._next_wake_ms is None or deadline_ms < self._next_wake_ms:
            self._next_wake_ms = deadline_ms
            self._wakeup.set()

    def expire_due(self) -> int | None:
        """Expire every due lock, wake fetches of partitions with freed records; returns the
        next deadline (epoch ms) or None."""
        wake: list[int] = []
        for key, sp in list(self._partitions.items()):
            try:
                expired = sp.expire_locks()
            except Exception:  # a failed state write: the locks stay, tried again next round
                log.exception("share-partition %s: lock expiry not written", key)
                wake.append(self.clock.now_ms() + 1000)
                continue
            self.metrics.lock_expiries += expired
            self._send_dead_letters()
            due = sp.next_wakeup_ms()
            if due is not None:
                wake.append(due)
            if expired or (due is not None and due <= self.clock.now_ms()) or sp.has_due_retries():
                self._notify(key)
        return min(wake, default=None)

    def _notify(self, key: SharePartitionKey) -> None:
        """Wake the fetches waiting on the stored partition a share-partition reads (a
        view's source)."""
        try:
            topic, partition, _ = self.semantics.arrivals(key[1], key[2])
        except Exception:  # the topic or view is gone: nobody waits on it
            return
        self.notify(topic, partition)

    # -- share-partitions ------------------------------------------------------------------
    def get(self, key: SharePartitionKey) -> SharePartition | None:
        return self._partitions.get(key)

    def keys(self) -> list[SharePartitionKey]:
        return sorted(self._partitions)

    def _load(self, key: SharePartitionKey, meta: Entity, create: bool) -> SharePartition | None:
        sp = self._partitions.get(key)
        settings = self.settings_for(key[0])
        if sp is not None:
            sp.settings = settings
            return sp
        restored = self.state.restored(key)
        if restored is None:
            if not create:
                return None
            plog = self.semantics.source_partition(meta, key[2])

            def offset_for(ts: int) -> int | None:
                found = plog.offset_for_timestamp(ts)
                return None if found is None else found[0]

            start = initial_start_offset(settings, plog.log_start_offset, plog.next_offset, offset_for,
                                         self.clock.now_ms())
            self.state.initialize(key, start)
            restored = StateUpdate(start, ())
        sp = SharePartition(settings, self.clock, restored.start_offset, persist=self.state.persister(key),
                            dead_letter=lambda offset, count, reason: self._dead.append((key, offset, count, reason)),
                            restored=restored.batches, dead_letters=restored.dead_letters or 0)
        self._partitions[key] = sp
        return sp

    # -- fetching ----------------------------------------------------------------------------
    def acquire(self, group_id: str, member_id: str, meta: Entity, partition: int, max_records: int,
                batch_size: int, max_bytes: int, min_one: bool, strict: bool = False) -> PartitionFetch:
        """Acquire up to ``max_records`` records for the member and read their batches.
        ``max_records`` is Kafka's soft limit (ShareAcquireMode batch_optimized): new records
        run to the end of the last batch they begin (SharePartition.acquire); with ``strict``
        (record_limit) it is never exceeded. Storage errors propagate (the caller answers with
        their Kafka code)."""
        key = (group_id, meta.name, partition)
        sp = self._load(key, meta, create=self._is_assigned(group_id, meta.name, partition))
        if sp is None:
            raise UnknownSharePartition(f"No share-partition {meta.name}-{partition} in group {group_id}")
        plog = self.semantics.source_partition(meta, partition)
        if plog.log_start_offset > sp.start_offset:
            sp.advance_log_start(plog.log_start_offset)
        committed = sp.settings.isolation_level == READ_COMMITTED
        stable, end = plog.last_stable_offset, plog.next_offset
        limit = stable if committed else end
        start = sp.next_fetch_offset()
        out = PartitionFetch()
        window_full = start >= sp.end_offset and sp.in_flight_count() >= sp.settings.max_record_locks
        if (start >= limit or window_full) and not sp.has_due_retries():
            return out  # nothing acquirable: no read of the log
        budget = max_bytes
        # The log is read a chunk at a time, so that a fetch of 500 small records does not
        # read (and CRC-check, and drop) the 50 MB its MaxBytes allows: the first chunk is
        # sized for the records asked for, each next one twice the last (up to 1 MiB). A
        # chunk that yields nothing stops the loop unless it moved the window (records
        # archived unseen).
        chunk = min(_READ_CHUNK, max(_FIRST_CHUNK_MIN, max_records * _BYTES_PER_RECORD_GUESS))
        for _ in range(_MAX_CHUNKS):
            read: list[bytes] = []
            below = start
            if start < limit and (budget > 0 or (min_one and not out.batches)):
                max_offset = stable if committed else None
                size = min(max(budget, 0), chunk)
                read = self._read(meta, partition, start, size, min_one and not out.batches, max_offset)
                if not read and budget > size:  # a batch larger than the chunk, within the budget
                    read = self._read(meta, partition, start, budget, False, max_offset)
                if read:
                    below = record_batch.next_offset_of(read[-1])
                chunk = min(_READ_CHUNK, chunk * 2)
            control, aborted = _unseen(read, plog.aborted_transactions(start, below) if committed and read else ())
            window_end = sp.end_offset
            ends = () if strict else [record_batch.next_offset_of(b) for b in read]
            try:
                acquired = sp.acquire(member_id, end, max_records - out.count, batch_size or None,
                                      last_stable_offset=stable, aborted=aborted, control=control, below=below,
                                      batch_ends=ends)
            finally:
                self._send_dead_letters()
            if acquired:
                batches = self._batches_for(meta, partition, acquired, read)
                out.acquired += acquired
                out.batches += batches
                size = sum(len(b) for b in batches)
                out.size += size
                budget -= size
            if (not read or below >= limit or out.count >= max_records or budget <= 0
                    or (not acquired and sp.end_offset == window_end)):
                break
            start = below
        if not out.acquired:
            return out
        self._plan(self.clock.now_ms() + sp.settings.record_lock_duration_ms)
        for r in out.acquired:
            count = r.last_offset - r.first_offset + 1
            self.metrics.acquisitions += count
            if r.delivery_count > 1:
                self.metrics.redeliveries += count
        if len(out.batches) > 1:  # retried records' batches were read out of order
            by_base = {record_batch.base_offset_of(b): b for b in out.batches}
            out.batches = [by_base[base] for base in sorted(by_base)]
            out.size = sum(len(b) for b in out.batches)
            out.acquired.sort(key=lambda r: r.first_offset)
        return out

    def _read(self, meta: Entity, partition: int, offset: int, max_bytes: int, min_one: bool,
              max_offset: int | None) -> list[bytes]:
        """What ``Semantics.read`` returns, from the read cache when it holds it (a topic's
        batches another member's fetch just read)."""
        if not isinstance(meta, TopicMeta):
            return list(self.semantics.read(meta, partition, offset, max_bytes, min_one,
                                            max_offset=max_offset).batches)
        plog = self.semantics.source_partition(meta, partition)

        def read_log(offset: int, max_bytes: int, min_one: bool) -> list[bytes]:
            return list(self.semantics.read(meta, partition, offset, max_bytes, min_one,
                                            max_offset=max_offset).batches)

        return self.read_cache.read((meta.topic_id, partition), plog, offset, max_bytes, min_one, max_offset,
                                    read_log)

    def bytes_available(self, group_id: str, meta: Entity, partition: int, limit: int) -> int | None:
        """Bytes of log from the share-partition's next fetch offset to the log end (the LSO
        under read_committed), counted up to ``limit``: what a ShareFetch's MinBytes is
        compared with, as Kafka's DelayedShareFetch compares the log positions. ``limit``
        when a RocketMQ retry is due (it is acquirable at once). The share-partition is loaded
        (or created) as an acquisition would; None when it may not be (the acquisition answers
        that)."""
        key = (group_id, meta.name, partition)
        sp = self._load(key, meta, create=self._is_assigned(group_id, meta.name, partition))
        if sp is None:
            return None
        if sp.has_due_retries():
            return limit
        start = sp.next_fetch_offset()
        if start >= sp.end_offset and sp.in_flight_count() >= sp.settings.max_record_locks:
            return 0  # the window is full: nothing past it is acquirable
        plog = self.semantics.source_partition(meta, partition)
        committed = sp.settings.isolation_level == READ_COMMITTED
        # below the log start (retention) the acquisition moves SPSO up; count from there
        return plog.bytes_available(max(start, plog.log_start_offset), limit,
                                    plog.last_stable_offset if committed else None)

    def _batches_for(self, meta: Entity, partition: int, acquired: list[AcquiredRange],
                     read: list[bytes]) -> list[bytes]:
        """The batches holding acquired records, in offset order: those read, plus those of
        retried records below the read (RocketMQ backoff), read one batch at a time."""
        spans = {record_batch.base_offset_of(b): b for b in read}
        for r in acquired:
            offset = r.first_offset
            while offset <= r.last_offset:
                batch = next((b for base, b in spans.items()
                              if base <= offset < record_batch.next_offset_of(b)), None)
                if batch is None:
                    found = self.semantics.read(meta, partition, offset, 1, True).batches
                    if not found:
                        break
                    batch = found[0]
                    spans[record_batch.base_offset_of(batch)] = batch
                offset = max(offset + 1, record_batch.next_offset_of(batch))
        wanted = []
        for base in sorted(spans):
            batch = spans[base]
            last = record_batch.next_offset_of(batch) - 1
            if any(r.first_offset <= last and base <= r.last_offset for r in acquired):
                wanted.append(batch)
        return wanted

    def acknowledge(self, group_id: str, member_id: str, meta: Entity, partition: int,
                    batches: list[AckBatch]) -> None:
        """Apply acknowledgements; ShareError (InvalidRecordState, InvalidShareRequest),
        UnknownSharePartition or a storage error when they cannot be."""
        sp = self._load((group_id, meta.name, partition), meta, create=False)
        if sp is None:
            raise UnknownSharePartition(f"No share-partition {meta.name}-{partition} in group {group_id}")
        was_full = sp.in_flight_count() >= sp.settings.max_record_locks
        try:
            sp.acknowledge(member_id, batches)
        finally:
            self._send_dead_letters()
        if sp.settings.redelivery_backoff == BACKOFF_LEVELS:
            self._plan(sp.next_wakeup_ms())  # a released record becomes due later
        for batch in batches:
            if len(batch.types) == 1:
                self.metrics.acks[_ACK_NAMES[batch.types[0]]] += batch.last_offset - batch.first_offset + 1
            else:
                for t, n in Counter(batch.types).items():
                    self.metrics.acks[_ACK_NAMES[t]] += n
        # released records are available again, and accepted ones may have made room in a
        # full window: then fetches waiting on the partition look again (only then: waking
        # every member at every acknowledgement costs more than it brings)
        if (any(t == AckType.RELEASE for b in batches for t in b.types)
                or (was_full and sp.in_flight_count() < sp.settings.max_record_locks)):
            self._notify((group_id, meta.name, partition))

    # -- members and groups (the share group coordinator calls these) -----------------------
    def member_left(self, group_id: str, member_id: str) -> None:
        """The member left or its session timed out: its records are available again at once
        and its share session is gone."""
        self.sessions.close(group_id, member_id)
        self._release(group_id, member_id, undelivered=False)

    def session_closed(self, group_id: str, member_id: str) -> None:
        """The member closed its share session (epoch -1): what it still holds was never
        handed to its application, so the delivery counts go back one (KAFKA-17541)."""
        self.sessions.close(group_id, member_id)
        self._release(group_id, member_id, undelivered=True)

    def _release(self, group_id: str, member_id: str, undelivered: bool) -> None:
        for key, sp in list(self._partitions.items()):
            if key[0] != group_id:
                continue
            try:
                released = sp.release_member(member_id, undelivered=undelivered)
            except Exception:  # not written: the locks expire later instead
                log.exception("share-partition %s: release of member %s not written", key, member_id)
                continue
            finally:
                self._send_dead_letters()
            if released:
                self._notify(key)

    def group_ids_with_state(self) -> set[str]:
        """The share groups with a durable share-partition state."""
        return {key[0] for key in self.state.keys()}

    def group_deleted(self, group_id: str) -> None:
        """The share group was deleted: its sessions and share-partitions go, durably."""
        self.sessions.drop_group(group_id)
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]
        for key in [k for k in self.state.keys() if k[0] == group_id]:
            self.state.delete(key)

    # -- share offsets (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets)
    def topic_deleted(self, topic: str) -> None:
        """A topic or view was deleted: every share group's share-partitions of it go, durably
        (a topic created again under the name starts afresh)."""
        for key in {k for k in self._partitions if k[1] == topic} | {k for k in self.state.keys() if k[1] == topic}:
            self._partitions.pop(key, None)
            try:
                self.state.delete(key)
            except Exception:  # kept: its next fetch finds the offsets past the new log's end
                log.exception("share state of %s not deleted", key)

    def use_membership(self, is_group_empty: Callable[[str], bool],
                       is_assigned: Callable[[str, str, int], bool] | None = None) -> None:
        """The share group coordinator's word on whether a group has members and whether a
        (group, topic, partition) is assigned to one of them (it is built before this
        manager, so it is handed over here)."""
        self._is_group_empty = is_group_empty
        if is_assigned is not None:
            self._is_assigned = is_assigned

    def group_is_empty(self, group_id: str) -> bool:
        if self._is_group_empty is not None:
            return self._is_group_empty(group_id)
        return not self.sessions.members(group_id)

    def start_and_lag(self, key: SharePartitionKey, meta: Entity) -> tuple[int, int]:
        """(SPSO, lag) of a share-partition: -1, -1 when it has no state. Lag (KIP-1226):
        records from SPSO to the high watermark not yet acknowledged or archived."""
        sp = self._partitions.get(key)
        if sp is not None:
            start, window = sp.start_offset, sp.snapshot().batches
        else:
            restored = self.state.restored(key)
            if restored is None:
                return -1, -1
            start, window = restored.start_offset, restored.batches
        end = self.semantics.source_partition(meta, key[2]).next_offset
        done = sum(min(b.last_offset, end - 1) - max(b.first_offset, start) + 1 for b in window
                   if b.state in _DONE_STATES and b.last_offset >= start and b.first_offset < end)
        return start, max(end - start - done, 0)

    def dead_letters(self, key: SharePartitionKey) -> int | None:
        """Records the share-partition dead-lettered since its state began (kept across
        restarts, started afresh when its offsets are altered or deleted); None without a state."""
        sp = self._partitions.get(key)
        return sp.dead_letters if sp is not None else self.state.dead_letters(key)

    def alter_start(self, key: SharePartitionKey, start_offset: int) -> None:
        """Start a share-partition afresh at ``start_offset`` (its group is empty)."""
        self._partitions.pop(key, None)
        self.state.initialize(key, start_offset)

    def delete_topic_state(self, group_id: str, topic: str) -> None:
        for key in [k for k in self.partitions_of(group_id) if k[1] == topic]:
            self._partitions.pop(key, None)
            self.state.delete(key)

    def partitions_of(self, group_id: str) -> list[SharePartitionKey]:
        """The group's share-partitions with a durable state (loaded or not)."""
        return sorted({k for k in self.state.keys() if k[0] == group_id}
                      | {k for k in self._partitions if k[0] == group_id})

    # -- dead letters ----------------------------------------------------------------------
    def _send_dead_letters(self) -> None:
        dead, self._dead = self._dead, []
        for key, offset, count, reason in dead:
            self.metrics.dead_letters += 1
            group_id, topic, partition = key
            sp = self._partitions.get(key)
            settings = sp.settings if sp is not None else self.settings_for(group_id)
            target = self._dead_letter_target(group_id)
            if not target.topic and not _rocketmq_dlq(settings):
                continue
            try:
                self._copy_to_dlq(group_id, topic, partition, offset, count, reason, target)
            except Exception:  # the state change is durable; a lost copy is logged, not retried
                log.exception("dead letter %s-%d@%d of share group %s not written", topic, partition, offset, group_id)

    def _copy_to_dlq(self, group_id: str, topic: str, partition: int, offset: int, count: int, reason: str,
                     target: DeadLetterTarget) -> None:
        store = self.semantics.store
        found = self.semantics.read(topic, partition, offset, 1, True).batches
        view = self.semantics.views.get(topic)
        if view is not None:  # the origin is the view's source: rmqk dlq resend --to-origin produces to it
            topic = view.source
        record = None
        if found:
            record = next((r for r in record_batch.read_records(found[0]) if r.offset == offset), None)
        if record is None:  # a gap or a record retention took: nothing to copy
            return
        if target.topic:  # KIP-1191 (ShareGroupDLQRecordHelper): headers, the record only if asked
            meta = store.topics.get(target.topic) or store.create_topic(target.topic, 1, {})
            message = f"The record was {reason}" + (" (the delivery count limit was reached)"
                                                     if reason == "exhausted" else " by a consumer")
            kip_headers = [("__dlq.errors.topic", topic.encode()), ("__dlq.errors.partition", str(partition).encode()),
                           ("__dlq.errors.offset", str(offset).encode()), ("__dlq.errors.group", group_id.encode()),
                           ("__dlq.errors.delivery.count", str(count).encode()),
                           ("__dlq.errors.message", message.encode())]
            key, value = (record.key, record.value) if target.copy_record else (None, None)
            store.append_built(meta.name, partition % meta.partitions,
                               build_batch([(self.clock.now_ms(), key, value, kip_headers)]))
            return
        dlq = DLQ_PREFIX + group_id
        if store.topics.get(dlq) is None:
            store.create_topic(dlq, 1, {})
        headers = [(k, v) for k, v in record.headers
                   if k not in (ORIGIN_TOPIC, ORIGIN_PARTITION, ORIGIN_OFFSET, RECONSUME_TIMES, DLQ_REASON)]
        headers += [(ORIGIN_TOPIC, topic.encode()), (ORIGIN_PARTITION, str(partition).encode()),
                    (ORIGIN_OFFSET, str(offset).encode()), (RECONSUME_TIMES, str(max(count - 1, 0)).encode()),
                    (DLQ_REASON, reason.encode())]
        store.append_built(dlq, 0, build_batch([(record.timestamp, record.key, record.value, headers)]))


def _rocketmq_dlq(settings: ShareGroupSettings) -> bool:
    return settings.redelivery_backoff == BACKOFF_LEVELS or settings.max_reconsume_times is not None


_ACK_NAMES = {t.value: t.name.lower() for t in AckType}  # the batches were checked: no other type


def _unseen(batches: Iterable[bytes], aborted_txns: Iterable[tuple[int, int]]
            ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(ranges never delivered, aborted ranges) of the batches read. Never delivered: control
    batches (a view's covering batches are control batches too) and the offsets a view's
    subset batch left out. Aborted: what a read_committed client drops, found the way it
    finds them (an aborted transaction's producer is aborted from its first offset until
    its abort marker)."""
    pending = sorted(aborted_txns, key=lambda item: item[1])
    active: set[int] = set()
    control: list[tuple[int, int]] = []
    aborted: list[tuple[int, int]] = []
    for batch in batches:
        base = record_batch.base_offset_of(batch)
        last = record_batch.next_offset_of(batch) - 1
        info = record_batch.read_info(batch)
        while pending and pending[0][1] <= last:
            active.add(pending.pop(0)[0])
        if info.is_control:
            control.append((base, last))
            active.discard(info.producer_id)
            continue
        if info.attributes & record_batch.TRANSACTIONAL_BIT and info.producer_id in active:
            aborted.append((base, last))
        elif info.records_count != last - base + 1:  # a view's subset: its missing offsets are gaps
            present = {r.offset for r in record_batch.read_records(batch)}
            control += [(o, o) for o in range(base, last + 1) if o not in present]
    return control, aborted
