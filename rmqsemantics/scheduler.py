"""Delay levels, timers, retries and dead letters: records parked in system topics of the
commitlog and delivered to their real partition when due.

Parking (a storage Diverter): a produced record with a scheduling header (parking.py), and
every record produced to ``rmq_retry.<group>``, is taken out of its batch. The batch keeps
its offsets (storage stores it sparse or empty), so idempotent producers are unaffected;
the record is parked first (parked_records.py: with ``REAL_TOPIC`` / ``REAL_QID``, its due
time and the offset it came from):

* delay level n -> ``SCHEDULE_TOPIC_XXXX`` partition n-1; its consume-queue code is the
  delivery time. Each level is delivered in order: a level's records have the same delay, so
  its queue is in due order and a level's progress is one offset (RocketMQ's delayOffset).
* a timer -> ``rmq_sys_wheel_timer`` partition 0 (code = delivery time), indexed in the
  timing wheel (timer_queue.py); a slot's timers are read one record at a time
  (parked_reader.py). A timer beyond the wheel's
  window waits in its last slot and is then parked again (a new copy naming the old one in
  ``PARKED_AT``, so commitlog retention longer than the window never removes a waiting
  timer).
* a retry (``rmq_retry.g``): ``RECONSUME_TIMES`` + 1 and delay level ``3 + RECONSUME_TIMES``
  (or the record's own ``DELAY``), delivered back to ``rmq_retry.g``; once
  ``RECONSUME_TIMES`` reaches the group's maximum it is parked as a timer due now for
  ``rmq_dlq.g`` instead.

Exactly once, across restarts and kill -9. Everything here is derived from the commitlog
(a storage DerivedState): the progress above is snapshotted in each store checkpoint, in the
same step as the checkpoint's commitlog position P, and recovery replays the entries after
P to it (park_replay.py): a delivered record names the parked record it came from, so
nothing delivered after P is delivered again; a park whose batch never followed it in the
commitlog (a crash or a failed write in between; the producer was never answered and will
retry) is cancelled, never delivered; the consume-queue codes of replayed parks are their
due times again (``codes``). Deliveries and the progress they advance change in one
synchronous step, never across an await.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path

from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import Clock
from rmqkafka.storage.errors import InvalidRecordError
from rmqkafka.storage.store import MessageStore

from .config import SemanticsConfig
from .half_messages import HalfMessages
from .half_records import Intent
from .park_replay import ParkReplay, Where
from .parked_reader import ParkedReader
from .parked_records import (
    PARKED_FROM,
    TIMER_OUT_MS,
    build_batch,
    delivered_batch,
    due_of,
    header,
    marker,
    park_batch,
    real_partition,
)
from .parking import DELAY, Park, scheduling_of
from .timer_queue import TimerQueue

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
SYSTEM_TOPICS = frozenset((SCHEDULE_TOPIC, TIMER_TOPIC))
RETRY_PREFIX = "rmq_retry."
DLQ_PREFIX = "rmq_dlq."
RECONSUME_TIMES = "RECONSUME_TIMES"
MAX_RECONSUME_CONFIG = "rmq.max.reconsume.times"
RETRY_BASE_LEVEL = 3  # RocketMQ: a retry waits level 3 + reconsumeTimes

DELIVERY_BATCH_RECORDS = 5000  # records per delivered batch at most
# Bytes of records per parked or delivered batch, about: a batch the broker builds stays far
# below a commitlog segment (at least 1 MiB), whatever headers it adds.
PARK_BATCH_BYTES = 256 << 10
RETRY_MS = 1000  # a failed delivery is tried again this much later
DELIVERY_BUDGET = 20_000  # records one deliver_due call handles per queue (the loop yields)
CLEANUP_INTERVAL_MS = 60_000  # how often processed timer-log segments are deleted

Delivery = tuple[tuple[str, int] | None, str, object]  # (real partition, PARKED_AT, record)


class Scheduler:
    """See the module docstring. Registered with the store as Diverter and DerivedState."""

    name = "scheduler"

    def __init__(self, config: SemanticsConfig, store: MessageStore, data_dir: Path, clock: Clock,
                 delivery_options: Callable[[dict[str, str]], dict] | None = None) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self._delivery_options = delivery_options or (lambda configs: {})
        self._levels = len(config.delay_levels_ms)
        self._level_next: dict[int, int] = {}  # schedule partition -> next offset to deliver
        self._level_cancelled: set[tuple[int, int]] = set()  # (schedule partition, offset)
        self._timers = TimerQueue(Path(data_dir) / "timerwheel", TIMER_TOPIC,
                                  precision_ms=config.timer_precision_ms,
                                  wheel_slots=config.timer_wheel_slots)
        self._replay = ParkReplay(self._cancel, self._replayed_delivery)
        self._parked = ParkedReader()
        self._fresh = True
        self._selections: deque[list[Park]] = deque()
        self._last_parked: list[tuple[str, int, int, int]] = []  # (topic, partition, base, count)
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.counters = {"delivered": 0, "dropped": 0, "dead_lettered": 0, "cancelled": 0}
        self._saved_read_slots: deque[int] = deque(maxlen=2)
        self.halves = HalfMessages(config, store, clock, self._deliver_committed, SYSTEM_TOPICS)

    # -- DerivedState ----------------------------------------------------------------------
    def snapshot(self) -> object:
        # Processed timer-log segments are deleted only below a read slot that a checkpoint
        # already holds (the one before this snapshot's, in case this one is never written).
        self._saved_read_slots.append(self._timers.read_slot)
        return {
            "levels": {str(p): n for p, n in self._level_next.items()},
            "level_cancelled": sorted(self._level_cancelled),
            "timers": self._timers.state(),
            "halves": self.halves.snapshot(),
        }

    def dirty_fds(self) -> list[int]:
        return self._timers.index.take_dirty_fds()

    def restore(self, state: object | None) -> None:
        self._fresh = not isinstance(state, dict)
        state = state if isinstance(state, dict) else {}
        self._level_next = {int(p): int(n) for p, n in state.get("levels", {}).items()}
        self._level_cancelled = {(int(p), int(o)) for p, o in state.get("level_cancelled", [])}
        self._timers.restore(state.get("timers"), self.clock.now_ms())
        self._replay = ParkReplay(self._cancel, self._replayed_delivery)
        self.halves.restore(state.get("halves"))

    def codes(self, topic: str, partition: int, batch: bytes) -> list[int] | None:
        """Consume-queue codes of a replayed batch of a system topic: its due times."""
        if topic not in SYSTEM_TOPICS:
            return None
        return [due_of(record) for record in record_batch.read_records(batch)]

    def replay(self, topic: str, partition: int, batch: bytes) -> None:
        self.halves.replay(topic, partition, batch)
        if topic in SYSTEM_TOPICS:
            records = record_batch.read_records(batch)
            if records and header(records[0], PARKED_FROM) is not None:
                self._replay.park(topic, partition, records)
                return
        self._replay.entry(topic, partition, batch)

    def _replayed_delivery(self, where: Where, topic: str, partition: int) -> None:
        """A ``PARKED_AT`` met in a replayed batch of ``topic``-``partition``: a delivery if
        the parked record it names was for that partition (a timer re-parked from the
        wheel's last slot names its previous copy in the timer topic). A record a consumer
        copied elsewhere keeps the header, and proves nothing."""
        system, system_partition, offset = where
        if system == TIMER_TOPIC and topic == TIMER_TOPIC:
            self._timers.drop(offset, self._timer_due(offset))
            return
        if system not in SYSTEM_TOPICS or self._parked_for(where) != (topic, partition):
            return
        if system == SCHEDULE_TOPIC:
            self._level_next[system_partition] = max(self._level_next.get(system_partition, 0), offset + 1)
        else:
            self._timers.drop(offset, self._timer_due(offset))

    def _parked_for(self, where: Where) -> tuple[str, int] | None:
        system, partition, offset = where
        try:
            plog = self.store.partition(system, partition)
            if not plog.log_start_offset <= offset < plog.next_offset:
                return None
            for record in record_batch.read_records(plog.batch_at(offset)):
                if record.offset == offset:
                    return real_partition(record)
        except Exception:  # noqa: BLE001  # damaged or gone: not a delivery we can prove
            return None
        return None

    def _cancel(self, where: Where) -> None:
        system, partition, offset = where
        log.warning("%s-%d@%d: parked record cancelled: the batch it was taken from was not "
                    "written (its producer got an error or no answer)", system, partition, offset)
        self.counters["cancelled"] += 1
        if system == SCHEDULE_TOPIC:
            self._level_cancelled.add((partition, offset))
        else:
            self._timers.drop(offset, self._timer_due(offset))

    def recovered(self) -> None:
        self._replay.orphaned()
        self.halves.recovered()
        self._ensure_system_topics()
        self._timers.open(self.store.partition(TIMER_TOPIC, 0), fresh=self._fresh,
                          clean=self.store.clean_start)

    def _ensure_system_topics(self) -> None:
        topics = self.store.topics
        meta = topics.get(SCHEDULE_TOPIC)
        if meta is None:
            self.store.create_topic(SCHEDULE_TOPIC, self._levels, {})
        elif meta.partitions < self._levels:
            self.store.add_partitions(SCHEDULE_TOPIC, self._levels)
        if topics.get(TIMER_TOPIC) is None:
            self.store.create_topic(TIMER_TOPIC, 1, {})

    # -- Diverter --------------------------------------------------------------------------
    def begin(self) -> None:
        """Forget selections of a request that was refused before it was written."""
        self._selections.clear()
        self.halves.begin()

    def select(self, topic: str, partition: int, records: list, transactional: bool = False) -> list[int]:
        if topic.startswith(RETRY_PREFIX):
            if transactional:
                raise InvalidRecordError(
                    f"{topic} takes no transactional batches: a nack parked in a transaction "
                    "that aborts would still be retried")
            return list(range(len(records)))
        if not record_batch.has_headers(records):
            return []  # parked records and half messages are known by their headers only
        intents = self.halves.classify(topic, records, transactional)
        now = self.clock.now_ms()
        levels, max_ms = self.config.delay_levels_ms, self.config.timer_max_delay_sec * 1000
        taken: list[int] = []
        kinds: list[Park | Intent] = []
        for i, record in enumerate(records):
            headers = record.headers
            if headers:
                park = scheduling_of(headers, now, levels, max_ms)  # validates a half's delay too
                intent = intents.get(i)
                if intent is not None:
                    taken.append(i)
                    kinds.append(intent)
                elif park is not None:
                    taken.append(i)
                    kinds.append(park)
        if taken and transactional:
            raise InvalidRecordError(
                "scheduling headers (DELAY, TIMER_*) are not accepted in transactional batches: a "
                "parked record would be delivered even if its transaction aborted")
        if taken:
            self._selections.append(kinds)
        return taken

    def park(self, topic: str, partition: int, placed: list[tuple[int, object]]) -> None:
        """Half messages, then delayed records: the batch's parks right before the batch, in
        the order the replays expect (park_replay.py). End records take effect once the
        batch is written (``written``)."""
        self._last_parked = []
        if topic.startswith(RETRY_PREFIX):
            self._park_retries(topic, partition, placed)
            self._wake()
            return
        kinds = self._selections.popleft()
        self.halves.defer_ends([kind for kind in kinds if isinstance(kind, Intent) and kind.end])
        halves = [(kind, item) for kind, item in zip(kinds, placed) if isinstance(kind, Intent) and not kind.end]
        self.halves.park(topic, partition, [item for _, item in halves], [kind for kind, _ in halves])
        parks = [kind for kind in kinds if isinstance(kind, Park)]
        delayed = [item for kind, item in zip(kinds, placed) if isinstance(kind, Park)]
        by_level: dict[int | None, list[int]] = {}
        for i, park in enumerate(parks):
            by_level.setdefault(park.level, []).append(i)
        for level, indices in by_level.items():
            items = [delayed[i] for i in indices]
            dues = [parks[i].due_ms for i in indices]
            if level is None:
                self._park_timers(items, dues, topic, partition, topic, partition)
            else:
                self._park_level(level, items, dues[0], topic, partition)
        self._wake()

    def written(self) -> None:
        self.halves.written()

    def abandon(self) -> None:
        """The batch the last park came from was not written: cancel what was parked."""
        self.halves.abandon()
        for system, partition, base, count in self._last_parked:
            for offset in range(base, base + count):
                self._cancel((system, partition, offset))
        self._last_parked = []

    def _park_level(self, level: int, placed: list[tuple[int, object]], due: int, topic: str,
                    partition: int, changes: list[dict[str, bytes]] | None = None) -> None:
        for start, end in _chunks([record for _, record in placed], PARK_BATCH_BYTES):
            records = [record for _, record in placed[start:end]]
            dues = [due] * len(records)
            batch = park_batch(records, topic, partition, dues, (topic, partition),
                               [offset for offset, _ in placed[start:end]], changes[start:end] if changes else None)
            result = self.store.append_built(SCHEDULE_TOPIC, level - 1, batch, dues, records=records)
            self._last_parked.append((SCHEDULE_TOPIC, level - 1, result.base_offset, len(records)))

    def _park_timers(self, placed: list[tuple[int, object]], dues: list[int], real_topic: str,
                     real_qid: int, topic: str, partition: int,
                     changes: list[dict[str, bytes]] | None = None) -> None:
        for start, end in _chunks([record for _, record in placed], PARK_BATCH_BYTES):
            records = [record for _, record in placed[start:end]]
            batch = park_batch(records, real_topic, real_qid, dues[start:end], (topic, partition),
                               [offset for offset, _ in placed[start:end]], changes[start:end] if changes else None)
            base = self._append_timers(batch, dues[start:end], records)
            self._last_parked.append((TIMER_TOPIC, 0, base, len(records)))

    def _append_timers(self, batch: bytes, dues: list[int], records: list | None = None) -> int:
        """Append ``batch`` to the timer topic and index its records; returns its base offset.
        ``records``: what the append listeners see of it (nothing waits on this topic)."""
        result = self.store.append_built(TIMER_TOPIC, 0, batch, dues, records=records)
        base = result.base_offset
        self._timers.add(list(zip(dues, range(base, base + len(dues)))))
        return base

    def _park_retries(self, topic: str, partition: int, placed: list[tuple[int, object]]) -> None:
        group = topic[len(RETRY_PREFIX):]
        limit = self.max_reconsume_times(group)
        now = self.clock.now_ms()
        levels: dict[int, list[tuple[tuple[int, object], dict[str, bytes]]]] = {}
        dead: list[tuple[tuple[int, object], dict[str, bytes]]] = []
        for item in placed:
            record = item[1]
            times = _reconsume_times(record)
            changes = {RECONSUME_TIMES: str(times + 1).encode()}
            if times >= limit:
                dead.append((item, changes))
                continue
            level = RETRY_BASE_LEVEL + times
            asked = header(record, DELAY)
            if asked is not None and asked.strip().isdigit() and int(asked) > 0:
                level = int(asked)
            levels.setdefault(min(level, self._levels), []).append((item, changes))
        for level, items in levels.items():
            due = now + self.config.delay_levels_ms[level - 1]
            self._park_level(level, [i for i, _ in items], due, topic, partition, [c for _, c in items])
        if dead:
            dlq = DLQ_PREFIX + group
            if self.store.topics.get(dlq) is None:
                self.store.create_topic(dlq, 1, {})
            self._park_timers([i for i, _ in dead], [now] * len(dead), dlq, 0, topic, partition,
                              [c for _, c in dead])
            self.counters["dead_lettered"] += len(dead)

    def max_reconsume_times(self, group: str) -> int:
        """The group's maxReconsumeTimes: ``rmq.max.reconsume.times`` on its retry topic,
        or the broker's."""
        meta = self.store.topics.get(RETRY_PREFIX + group)
        value = meta.configs.get(MAX_RECONSUME_CONFIG) if meta is not None else None
        if value is None or int(value) < 0:
            return self.config.max_reconsume_times
        return int(value)

    # -- delivery --------------------------------------------------------------------------
    def deliver_due(self, now_ms: int | None = None) -> int | None:
        """Deliver what is due at ``now_ms`` (the clock's time by default), at most a budget
        per queue; returns when to call again (epoch ms), None when nothing is pending. A
        queue whose delivery fails (an append refused) stops where it failed and is tried
        again a second later; the others go on."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        wake = [due for due in (self._deliver_level(p, now) for p in range(self._levels)) if due is not None]
        due = self._timers.handle_due(now, DELIVERY_BUDGET, self._handle_timers)
        if due is not None:
            wake.append(due)
        self._last_parked = []  # re-parked copies are not a produced batch's parks
        return min(wake) if wake else None

    def _deliver_level(self, partition: int, now: int) -> int | None:
        plog = self.store.partition(SCHEDULE_TOPIC, partition)
        offset = max(self._level_next.get(partition, 0), plog.log_start_offset)
        end = plog.next_offset
        out: list[Delivery] = []
        offsets: list[int] = []
        wake = None
        while offset < end and len(out) < DELIVERY_BUDGET:
            position, size, due = plog.consume_queue.entry(offset)
            if size == 0:  # a lost offset (damaged commitlog range): nothing to deliver
                offset += 1
                continue
            if due > now:
                wake = due
                break
            batch = plog.read_at(position, size)
            for record in record_batch.read_records(batch):
                if record.offset < offset:
                    continue
                if (partition, record.offset) in self._level_cancelled:
                    self._level_cancelled.discard((partition, record.offset))
                    continue
                out.append((real_partition(record), marker(SCHEDULE_TOPIC, partition, record.offset), record))
                offsets.append(record.offset)
            offset = record_batch.next_offset_of(batch)
        delivered = self._deliver(out)
        if delivered < len(out):
            self._level_next[partition] = offsets[delivered]
            return now + RETRY_MS
        self._level_next[partition] = offset
        if wake is None and offset < end:
            return now  # the budget ran out: more is due at once
        return wake

    def _handle_timers(self, slot: int, units: list[tuple[int, int]]) -> set[int]:
        """Deliver a slot's due timers; park again those that only waited in the wheel's
        last slot. Returns the refs handled."""
        plog = self.store.partition(TIMER_TOPIC, 0)
        precision = self._timers.precision
        out: list[Delivery] = []
        refs: list[int] = []
        rolled: list[Delivery] = []
        rolled_units: list[tuple[int, int]] = []
        handled: set[int] = set()
        for due, ref in units:
            found = self._parked.record(plog, ref) if plog.log_start_offset <= ref < plog.next_offset else None
            if found is None:
                log.error("%s-0@%d: timer record gone (retention?); not delivered", TIMER_TOPIC, ref)
                self.counters["dropped"] += 1
                handled.add(ref)
            elif due // precision > slot:
                rolled.append((found[1], marker(TIMER_TOPIC, 0, ref), found[0]))
                rolled_units.append((due, ref))
            else:
                out.append((found[1], marker(TIMER_TOPIC, 0, ref), found[0]))
                refs.append(ref)
        handled.update(refs[: self._deliver(out)])
        # Re-parked copies, one batch per real partition (parked_reader: a parked batch's
        # records are for one partition).
        by_real: dict[tuple[str, int] | None, list[int]] = {}
        for i, (real, _, _) in enumerate(rolled):
            by_real.setdefault(real, []).append(i)
        try:
            for indices in by_real.values():
                copies = [rolled[i][1:] for i in indices]
                for start, end in _chunks([record for _, record in copies], PARK_BATCH_BYTES):
                    units_ = [rolled_units[i] for i in indices[start:end]]
                    self._append_timers(delivered_batch(copies[start:end]), [due for due, _ in units_])
                    handled.update(ref for _, ref in units_)
        except Exception:  # retried with the slot's other failures
            log.exception("%s: re-parking timers failed", TIMER_TOPIC)
        return handled

    def _timer_due(self, ref: int) -> int | None:
        plog = self.store.partition(TIMER_TOPIC, 0)
        if not plog.log_start_offset <= ref < plog.next_offset:
            return None
        return plog.consume_queue.entry(ref)[2]

    def _deliver(self, out: list[Delivery]) -> int:
        """Append the deliveries in order, consecutive ones for one partition in one batch
        (at most DELIVERY_BATCH_RECORDS and about PARK_BATCH_BYTES); returns how many were
        delivered or dropped: all, or those before the first append that failed."""
        i = 0
        while i < len(out):
            real = out[i][0]
            j = i + 1
            while j < len(out) and out[j][0] == real and j - i < DELIVERY_BATCH_RECORDS:
                j += 1
            for start, end in _chunks([r for _, _, r in out[i:j]], PARK_BATCH_BYTES):
                try:
                    self._deliver_to(real, [(m, r) for _, m, r in out[i + start : i + end]])
                except Exception:  # this queue stops here and retries
                    log.exception("delivering %d due record(s) to %s failed; retrying in %d ms",
                                  end - start, real, RETRY_MS)
                    return i + start
            i = j
        return len(out)

    def _deliver_to(self, real: tuple[str, int] | None, parked: list[tuple[str, object]]) -> None:
        meta = self.store.topics.get(real[0]) if real is not None else None
        if real is None or meta is None or not 0 <= real[1] < meta.partitions:
            log.warning("dropping %d due record(s): their partition %s no longer exists", len(parked), real)
            self.counters["dropped"] += len(parked)
            return
        options = self._delivery_options(meta.configs)
        self.store.append_built(real[0], real[1], delivered_batch(parked), **options)
        self.counters["delivered"] += len(parked)

    def _deliver_committed(self, items: list[tuple[object, list]], topic: str, partition: int) -> None:
        """Committed half messages (record, headers) for one partition: appended now, in
        batches, or parked for their DELAY / TIMER_* (counted from the commit, as RocketMQ
        delays a committed message)."""
        meta = self.store.topics.get(topic)
        if meta is None or not 0 <= partition < meta.partitions:
            log.warning("%d committed half message(s) dropped: their partition %s-%d no longer exists",
                        len(items), topic, partition)
            self.counters["dropped"] += len(items)
            return
        now = self.clock.now_ms()
        levels, max_ms = self.config.delay_levels_ms, self.config.timer_max_delay_sec * 1000
        now_rows, now_records = [], []
        for record, headers in items:
            park = scheduling_of(headers, now, levels, max_ms)
            if park is None:
                now_rows.append((record.timestamp, record.key, record.value, headers))
                now_records.append(record)
                continue
            batch = build_batch([(record.timestamp, record.key, record.value,
                                  [*headers, (TIMER_OUT_MS, b"%d" % park.due_ms)])])
            if park.level is None:
                self._append_timers(batch, [park.due_ms])
            else:
                self.store.append_built(SCHEDULE_TOPIC, park.level - 1, batch, [park.due_ms])
            self._wake()
        options = self._delivery_options(meta.configs)
        for start, end in _chunks(now_records, PARK_BATCH_BYTES):
            self.store.append_built(topic, partition, build_batch(now_rows[start:end]), **options)

    # -- status ----------------------------------------------------------------------------
    def status(self) -> dict:
        """What ``rmqk delays`` shows: per level its delay, depth and next due time; timers
        pending per due hour (epoch hours); counters."""
        levels = []
        for partition in range(self._levels):
            plog = self.store.partition(SCHEDULE_TOPIC, partition)
            offset = max(self._level_next.get(partition, 0), plog.log_start_offset)
            depth = plog.next_offset - offset
            next_due = plog.consume_queue.entry(offset)[2] if depth > 0 else None
            levels.append({"level": partition + 1, "delay_ms": self.config.delay_levels_ms[partition],
                           "depth": depth, "next_due_ms": next_due, "delivered_up_to": offset})
        timers = self._timers
        return {
            "levels": levels,
            "timers_pending": timers.pending,
            "timers_by_hour": dict(sorted(timers.pending_by_hour.items())),
            "timers_done_before_ms": timers.read_slot * timers.precision,
            **self.counters,
        }

    # -- the delivery loop -----------------------------------------------------------------
    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def reconfigure(self, config: SemanticsConfig) -> None:
        """New settings (Semantics.reconfigure); the delivery loop wakes to use a new check
        interval at once. transactionTimeOut applies to half messages stored from now on
        (each one's first check time is set when it is stored)."""
        self.config = self.halves.config = config
        if self._wakeup is not None:
            self._wakeup.set()

    def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        self._timers.index.flush()

    def close(self) -> None:
        self._timers.index.close()

    async def _run(self) -> None:
        assert self._wakeup is not None
        last_cleanup = 0
        last_check = self.clock.now_ms()
        while True:
            self._wakeup.clear()
            try:
                wake = self.deliver_due()
            except Exception:  # a delivery bug must not stop every later delivery
                log.exception("scheduled delivery failed; retrying in 1 s")
                wake = self.clock.now_ms() + 1000
            now = self.clock.now_ms()
            interval = self.config.transaction_check_interval_ms
            if now - last_check >= interval:
                last_check = now
                try:
                    for _ in self.halves.check_steps(now):
                        await asyncio.sleep(0)  # a long pass must not stall the broker
                except Exception:  # a check bug must not stop deliveries
                    log.exception("half-message check pass failed")
            wake = min(wake, last_check + interval) if wake is not None else last_check + interval
            if now - last_cleanup > CLEANUP_INTERVAL_MS and len(self._saved_read_slots) == 2:
                self._timers.index.delete_processed(self._saved_read_slots[0])
                last_cleanup = now
            delay = 1.0 if wake is None else max(0.0, min(1.0, (wake - now) / 1000))
            if delay == 0:
                await asyncio.sleep(0)
                continue
            try:
                await asyncio.wait_for(self._wakeup.wait(), delay)
            except TimeoutError:
                pass


def _chunks(records: list, limit: int) -> list[tuple[int, int]]:
    """[start, end) ranges of ``records`` whose keys, values and headers add up to about
    ``limit`` bytes at most (one record at least)."""
    ranges = []
    start = size = 0
    for i, record in enumerate(records):
        headers = record.headers
        length = 64 + len(record.key or b"") + len(record.value or b"")
        if headers:
            length += sum([len(name) + len(value or b"") + 4 for name, value in headers])
        if i > start and size + length > limit:
            ranges.append((start, i))
            start, size = i, 0
        size += length
    if start < len(records):
        ranges.append((start, len(records)))
    return ranges


def _reconsume_times(record) -> int:
    """A nacked record's RECONSUME_TIMES (absent, negative or not a number: 0)."""
    value = header(record, RECONSUME_TIMES)
    try:
        return max(0, int(value)) if value is not None else 0
    except ValueError:
        return 0
