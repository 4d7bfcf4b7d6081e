"""Delay levels, timers, retries and dead letters: records parked in system topics of the
commitlog and delivered to their real partition when due.

Parking (a storage Diverter): a produced record with a scheduling header (parking.py), and
every record produced to ``rmq_retry.<group>``, is taken out of its batch. The batch keeps
its offsets (storage stores it sparse or empty), so idempotent producers are unaffected;
the record is parked first, with ``REAL_TOPIC`` / ``REAL_QID``:

* delay level n -> ``SCHEDULE_TOPIC_XXXX`` partition n-1; its consume-queue code is the
  delivery time. Each level is delivered in order: a level's records have the same delay, so
  its queue is in due order and a level's progress is one offset (RocketMQ's delayOffset).
* a timer -> ``rmq_sys_wheel_timer`` partition 0 (code = delivery time), indexed in the
  timing wheel (storage.timer_index): a slot per second, processed in order; progress is the
  second being processed and how many of its slot's units are done. A timer beyond the
  wheel's window waits in its last slot and is then parked again (a new copy, so commitlog
  retention longer than the window never removes a waiting timer).
* a retry (``rmq_retry.g``): ``RECONSUME_TIMES`` + 1 and delay level ``3 + RECONSUME_TIMES``
  (or the record's own ``DELAY``), delivered back to ``rmq_retry.g``; once
  ``RECONSUME_TIMES`` reaches the group's maximum it is parked as a timer due now for
  ``rmq_dlq.g`` instead.

Exactly once, across restarts and kill -9. Everything here is derived from the commitlog
(a storage DerivedState): the progress above is snapshotted in each store checkpoint, in
the same step as the checkpoint's commitlog position P, and recovery replays the entries
after P to it. A delivered record carries ``PARKED_AT`` (the parked record it came from),
so the replay learns which parked records were delivered after P, and nothing is delivered
twice. A park entry is written just before the batch it came from (storage.store's order),
so the replay also tells a parked record whose batch never reached the commitlog (a crash in
between; the producer was never answered and will retry): it is cancelled, never delivered.
Deliveries and the progress they advance change in one synchronous step, never across an
await.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import Clock
from rmqkafka.storage.store import MessageStore
from rmqkafka.storage.timer_index import TimerIndex, TimerIndexLostError

from .config import SemanticsConfig
from .parked_records import (
    PARKED_AT,
    PARKED_AT_NEEDLE,
    delivered_batch,
    header,
    marker,
    park_batch,
    parse_marker,
    real_partition,
)
from .parking import DELAY, Park, scheduling_of

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
DELIVERY_BUDGET = 20_000  # records one deliver_due call handles per queue (the loop yields)
_TIMER_PARTITION = 0


@dataclass(slots=True)
class TimerProgress:
    read_slot: int = 0  # the slot being processed (a slot spans timerPrecisionMs)
    done_in_slot: int = 0  # its units handled so far (slots list units in insertion order)
    enqueued: int = 0  # timer-topic offsets below this are in the index
    log_length: int | None = None  # the index's log length at the snapshot


@dataclass(slots=True)
class _Pending:
    """Park entries replayed and not yet matched with the batch they came from."""

    real: tuple[str, int] | None = None
    parks: list[tuple[str, int, list[int]]] = field(default_factory=list)


class Scheduler:
    """See the module docstring. Registered with the store as Diverter and DerivedState."""

    name = "scheduler"

    def __init__(self, config: SemanticsConfig, store: MessageStore, data_dir: Path, clock: Clock,
                 delivery_options: Callable[[dict[str, str]], dict] | None = None) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self._delivery_options = delivery_options or (lambda configs: {})
        self._precision = config.timer_precision_ms
        self._index = TimerIndex(Path(data_dir) / "timerwheel", wheel_slots=config.timer_wheel_slots,
                                 precision_ms=config.timer_precision_ms)
        self._levels = len(config.delay_levels_ms)
        self._level_next: dict[int, int] = {}  # schedule partition -> next offset to deliver
        self._timer = TimerProgress()
        self._pending_by_hour: dict[int, int] = {}  # timers pending per due hour (epoch hours)
        self._cancelled: set[tuple[str, int, int]] = set()
        self._replayed_timers: set[int] = set()  # timer offsets delivered after the checkpoint
        self._replay = _Pending()
        self._selections: deque[list[Park | None]] = deque()
        self._last_parked: list[tuple[str, int, list[int], list[int]]] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self.delivered = 0
        self.dropped = 0
        self.dead_lettered = 0
        self.cancelled = 0

    # -- DerivedState ----------------------------------------------------------------------
    def snapshot(self) -> object:
        timer = self._timer
        return {
            "levels": {str(p): n for p, n in self._level_next.items()},
            "timer": [timer.read_slot, timer.done_in_slot, timer.enqueued, self._index.log_length],
            "pending_by_hour": {str(h): n for h, n in self._pending_by_hour.items() if n},
            "cancelled": sorted(self._cancelled),
            "replayed_timers": sorted(self._replayed_timers),
        }

    def dirty_fds(self) -> list[int]:
        return self._index.take_dirty_fds()

    def restore(self, state: object | None) -> None:
        state = state if isinstance(state, dict) else {}
        self._level_next = {int(p): int(n) for p, n in state.get("levels", {}).items()}
        timer = state.get("timer")
        if timer:
            self._timer = TimerProgress(int(timer[0]), int(timer[1]), int(timer[2]), timer[3])
        else:
            self._timer = TimerProgress(read_slot=self.clock.now_ms() // self._precision)
        self._pending_by_hour = {int(h): int(n) for h, n in state.get("pending_by_hour", {}).items()}
        self._cancelled = {(t, int(p), int(o)) for t, p, o in state.get("cancelled", [])}
        self._replayed_timers = {int(o) for o in state.get("replayed_timers", [])}
        self._replay = _Pending()

    def replay(self, topic: str, partition: int, batch: bytes) -> None:
        view = memoryview(batch)
        if topic in SYSTEM_TOPICS and PARKED_AT_NEEDLE not in batch:
            self._replay_park(topic, partition, batch)
            return
        if self._replay.parks:
            if self._replay.real == (topic, partition):
                self._replay = _Pending()  # the batch the parked records came from: confirmed
            else:
                self._cancel_replayed_parks()
        if view[22] & record_batch.COMPRESSION_MASK == 0 and PARKED_AT_NEEDLE in batch:
            for record in record_batch.read_records(batch):
                value = header(record, PARKED_AT)
                where = parse_marker(value) if value is not None else None
                if where is not None and self._delivered_here(where, topic, partition):
                    self._mark_delivered(*where)

    def _delivered_here(self, where: tuple[str, int, int], topic: str, partition: int) -> bool:
        """Whether a ``PARKED_AT`` found in a batch of ``topic``-``partition`` records a
        delivery: the parked record it names exists and was for this partition (a timer
        re-parked from the wheel's last slot names its old copy in the timer topic). A
        record a consumer copied to another topic keeps its header, and is no delivery."""
        system, system_partition, offset = where
        if system not in SYSTEM_TOPICS:
            return False
        if topic == TIMER_TOPIC:
            return system == TIMER_TOPIC
        try:
            plog = self.store.partition(system, system_partition)
            if not plog.log_start_offset <= offset < plog.next_offset:
                return False
            for record in record_batch.read_records(plog.batch_at(offset)):
                if record.offset == offset:
                    return real_partition(record) == (topic, partition)
        except Exception:  # a damaged or missing parked batch: not a delivery we can prove
            return False
        return False

    def _replay_park(self, topic: str, partition: int, batch: bytes) -> None:
        records = record_batch.read_records(batch)
        if not records:
            return
        real = real_partition(records[0])
        if self._replay.parks and self._replay.real != real:
            self._cancel_replayed_parks()
        self._replay.real = real
        self._replay.parks.append((topic, partition, [r.offset for r in records]))

    def _cancel_replayed_parks(self) -> None:
        for topic, partition, offsets in self._replay.parks:
            log.warning("%s-%d: %d parked record(s) at offsets %d..%d lost their batch in a crash "
                        "(the producer was not answered); cancelled", topic, partition, len(offsets),
                        offsets[0], offsets[-1])
            for offset in offsets:
                self._cancel(topic, partition, offset)
        self._replay = _Pending()

    def _cancel(self, topic: str, partition: int, offset: int) -> None:
        self._cancelled.add((topic, partition, offset))
        self.cancelled += 1
        if topic == TIMER_TOPIC and offset < self._timer.enqueued:
            due = self._timer_due(offset)
            if due is not None:
                self._count_pending(due, -1)

    def _mark_delivered(self, topic: str, partition: int, offset: int) -> None:
        if topic == SCHEDULE_TOPIC:
            self._level_next[partition] = max(self._level_next.get(partition, 0), offset + 1)
        elif topic == TIMER_TOPIC and offset not in self._replayed_timers:
            self._replayed_timers.add(offset)
            due = self._timer_due(offset)
            if due is not None and offset < self._timer.enqueued:
                self._count_pending(due, -1)

    def recovered(self) -> None:
        if self._replay.parks:
            self._cancel_replayed_parks()
        self._ensure_system_topics()
        timer = self._timer
        try:
            self._index.open(read_slot=timer.read_slot,
                             log_length=None if self.store.clean_start else timer.log_length)
        except TimerIndexLostError as exc:
            log.error("timer index lost (%s); rebuilding it from %s: timers due before %d ms "
                      "count as delivered", exc, TIMER_TOPIC, timer.read_slot * self._precision)
            self._index.reset(read_slot=timer.read_slot)
            timer.enqueued, timer.done_in_slot = 0, 0
            self._pending_by_hour = {}
        self._enqueue_from_topic()

    def _ensure_system_topics(self) -> None:
        topics = self.store.topics
        meta = topics.get(SCHEDULE_TOPIC)
        if meta is None:
            self.store.create_topic(SCHEDULE_TOPIC, self._levels, {})
        elif meta.partitions < self._levels:
            self.store.add_partitions(SCHEDULE_TOPIC, self._levels)
        if topics.get(TIMER_TOPIC) is None:
            self.store.create_topic(TIMER_TOPIC, 1, {})

    def _enqueue_from_topic(self) -> None:
        """Index the timer-topic records the index does not hold yet (after a crash: those
        parked after the checkpoint; after a lost index: all still due)."""
        plog = self.store.partition(TIMER_TOPIC, _TIMER_PARTITION)
        timer = self._timer
        offset = max(timer.enqueued, plog.log_start_offset)
        floor_ms = timer.read_slot * self._precision
        while offset < plog.next_offset:
            raw = plog.consume_queue.entries(offset, 4096)
            for i in range(len(raw) // 20):
                ref = offset + i
                due = int.from_bytes(raw[i * 20 + 12 : i * 20 + 20], "big", signed=True)
                if (TIMER_TOPIC, 0, ref) in self._cancelled or ref in self._replayed_timers:
                    continue
                if timer.enqueued == 0 and due < floor_ms:  # rebuilding a lost index
                    continue
                self._index.add(due, ref, read_slot=timer.read_slot)
                self._count_pending(due, 1)
            offset += len(raw) // 20
        timer.enqueued = plog.next_offset

    # -- Diverter --------------------------------------------------------------------------
    def begin(self) -> None:
        """Forget selections of a request that was refused before it was written."""
        self._selections.clear()

    def select(self, topic: str, partition: int, records: list) -> list[int]:
        now = self.clock.now_ms()
        if topic.startswith(RETRY_PREFIX):
            self._selections.append([None] * len(records))
            return list(range(len(records)))
        levels, max_ms = self.config.delay_levels_ms, self.config.timer_max_delay_sec * 1000
        parks = [scheduling_of(record.headers, now, levels, max_ms) for record in records]
        taken = [i for i, park in enumerate(parks) if park is not None]
        if taken:
            self._selections.append([parks[i] for i in taken])
        return taken

    def park(self, topic: str, partition: int, placed: list[tuple[int, object]]) -> None:
        parks = self._selections.popleft()
        records = [record for _, record in placed]
        self._last_parked = []
        if topic.startswith(RETRY_PREFIX):
            self._park_retries(topic, partition, records)
            return
        by_level: dict[int | None, list[int]] = {}
        for i, park in enumerate(parks):
            assert park is not None
            by_level.setdefault(park.level, []).append(i)
        for level, indices in by_level.items():
            chosen = [records[i] for i in indices]
            dues = [parks[i].due_ms for i in indices]  # type: ignore[union-attr]
            if level is None:
                self._park_timers(chosen, dues, topic, partition)
            else:
                self._park_level(level, chosen, dues[0], topic, partition)
        self._wake()

    def abandon(self) -> None:
        """The batch the last park came from was not written: cancel what was parked."""
        for topic, partition, offsets, _ in self._last_parked:
            for offset in offsets:
                self._cancel(topic, partition, offset)
        self._last_parked = []

    def _park_level(self, level: int, records: list, due: int, topic: str, partition: int,
                    changes: list[dict[str, bytes]] | None = None) -> None:
        batch = park_batch(records, topic, partition, changes)
        result = self.store.append_built(SCHEDULE_TOPIC, level - 1, batch, [due] * len(records))
        offsets = list(range(result.base_offset, result.base_offset + len(records)))
        self._last_parked.append((SCHEDULE_TOPIC, level - 1, offsets, [due] * len(records)))

    def _park_timers(self, records: list, dues: list[int], topic: str, partition: int,
                     changes: list[dict[str, bytes]] | None = None) -> None:
        batch = park_batch(records, topic, partition, changes)
        self._append_timers(batch, dues)

    def _append_timers(self, batch: bytes, dues: list[int]) -> int:
        result = self.store.append_built(TIMER_TOPIC, _TIMER_PARTITION, batch, dues)
        timer = self._timer
        for i, due in enumerate(dues):
            self._index.add(due, result.base_offset + i, read_slot=timer.read_slot)
            self._count_pending(due, 1)
        timer.enqueued = result.base_offset + len(dues)
        offsets = list(range(result.base_offset, result.base_offset + len(dues)))
        self._last_parked.append((TIMER_TOPIC, _TIMER_PARTITION, offsets, dues))
        return result.base_offset

    def _park_retries(self, topic: str, partition: int, records: list) -> None:
        group = topic[len(RETRY_PREFIX):]
        limit = self.max_reconsume_times(group)
        now = self.clock.now_ms()
        levels: dict[int, list[tuple[object, dict[str, bytes]]]] = {}
        dead: list[tuple[object, dict[str, bytes]]] = []
        for record in records:
            times = _reconsume_times(record)
            changes = {RECONSUME_TIMES: str(times + 1).encode()}
            if times >= limit:
                dead.append((record, changes))
                continue
            asked = header(record, DELAY)
            level = RETRY_BASE_LEVEL + times
            if asked is not None and asked.strip().isdigit() and int(asked) > 0:
                level = int(asked)
            levels.setdefault(min(level, self._levels), []).append((record, changes))
        for level, items in levels.items():
            due = now + self.config.delay_levels_ms[level - 1]
            self._park_level(level, [r for r, _ in items], due, topic, partition, [c for _, c in items])
        if dead:
            dlq = DLQ_PREFIX + group
            if self.store.topics.get(dlq) is None:
                self.store.create_topic(dlq, 1, {})
            batch = park_batch([r for r, _ in dead], dlq, 0, [c for _, c in dead])
            self._append_timers(batch, [now] * len(dead))
            self.dead_lettered += len(dead)

    def max_reconsume_times(self, group: str) -> int:
        meta = self.store.topics.get(RETRY_PREFIX + group)
        value = meta.configs.get(MAX_RECONSUME_CONFIG) if meta is not None else None
        if value is None or int(value) < 0:
            return self.config.max_reconsume_times
        return int(value)

    # -- delivery --------------------------------------------------------------------------
    def deliver_due(self, now_ms: int | None = None) -> int | None:
        """Deliver what is due at ``now_ms`` (the clock's time by default), at most a budget
        per queue; returns when to call again (epoch ms), None when nothing is pending."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        wake: list[int] = []
        for partition in range(self._levels):
            due = self._deliver_level(partition, now)
            if due is not None:
                wake.append(due)
        due = self._deliver_timers(now)
        if due is not None:
            wake.append(due)
        return min(wake) if wake else None

    def _deliver_level(self, partition: int, now: int) -> int | None:
        plog = self.store.partition(SCHEDULE_TOPIC, partition)
        offset = max(self._level_next.get(partition, 0), plog.log_start_offset)
        end = plog.next_offset
        out: list[tuple[tuple[str, int] | None, str, object]] = []
        wake = None
        while offset < end and len(out) < DELIVERY_BUDGET:
            position, size, due = plog.consume_queue.entry(offset)
            if due > now:
                wake = due
                break
            batch = plog.read_at(position, size)
            for record in record_batch.read_records(batch):
                if record.offset < offset:
                    continue
                if (SCHEDULE_TOPIC, partition, record.offset) in self._cancelled:
                    self._cancelled.discard((SCHEDULE_TOPIC, partition, record.offset))
                    continue
                out.append((real_partition(record), marker(SCHEDULE_TOPIC, partition, record.offset), record))
            offset = record_batch.next_offset_of(batch)
        self._deliver(out)
        self._level_next[partition] = offset
        if wake is None and offset < end:
            return now  # the budget ran out: more is due at once
        return wake

    def _deliver_timers(self, now: int) -> int | None:
        """Process the wheel's slots whose every due time has come (slot s spans
        [s*P, (s+1)*P) ms for precision P): a timer is never delivered early, and at most P
        late plus the time to deliver."""
        timer = self._timer
        precision = self._precision
        ready = (now + 1) // precision - 1  # the last slot wholly at or before now
        budget = DELIVERY_BUDGET
        plog = self.store.partition(TIMER_TOPIC, _TIMER_PARTITION)
        cache: dict[int, list] = {}
        while timer.read_slot <= ready and budget > 0:
            slot = timer.read_slot
            entries = self._index.entries(slot)
            chunk = entries[timer.done_in_slot : timer.done_in_slot + budget]
            out: list[tuple[tuple[str, int] | None, str, object]] = []
            rolled: list[tuple[object, int, int]] = []
            for due, ref in chunk:
                if ref in self._replayed_timers or (TIMER_TOPIC, 0, ref) in self._cancelled:
                    self._replayed_timers.discard(ref)
                    self._cancelled.discard((TIMER_TOPIC, 0, ref))
                    continue
                record = self._timer_record(plog, ref, cache)
                if record is None:
                    self._count_pending(due, -1)
                    self.dropped += 1
                    continue
                if due // precision > slot:  # waited in the wheel's last slot: park again
                    rolled.append((record, due, ref))
                    continue
                self._count_pending(due, -1)
                out.append((real_partition(record), marker(TIMER_TOPIC, 0, ref), record))
            self._deliver(out)
            for record, due, ref in rolled:
                self._count_pending(due, -1)
                # The copy names the record it replaces in PARKED_AT: a replay knows that one is done.
                self._append_timers(delivered_batch([(marker(TIMER_TOPIC, 0, ref), record)]), [due])
            budget -= len(chunk)
            if timer.done_in_slot + len(chunk) >= len(entries):
                timer.read_slot += 1
                timer.done_in_slot = 0
            else:
                timer.done_in_slot += len(chunk)
        self._last_parked = []
        if timer.read_slot <= ready:
            return now
        return (timer.read_slot + 1) * precision - 1 if self._pending_total() else None

    def _timer_record(self, plog, ref: int, cache: dict[int, list]):
        try:
            position, size, _ = plog.consume_queue.entry(ref)
        except (KeyError, OSError):
            position = None
        if position is None or ref < plog.log_start_offset:
            log.error("%s-0: timer record at offset %d is gone (retention?); not delivered", TIMER_TOPIC, ref)
            return None
        records = cache.get(position)
        if records is None:
            cache.clear()
            records = cache[position] = record_batch.read_records(plog.read_at(position, size))
        for record in records:
            if record.offset == ref:
                return record
        return None

    def _timer_due(self, ref: int) -> int | None:
        plog = self.store.partition(TIMER_TOPIC, _TIMER_PARTITION)
        if not plog.log_start_offset <= ref < plog.next_offset:
            return None
        return plog.consume_queue.entry(ref)[2]

    def _deliver(self, out: list[tuple[tuple[str, int] | None, str, object]]) -> None:
        """Append ``(real partition, PARKED_AT, record)`` in order, consecutive records for
        the same partition in one batch."""
        i = 0
        while i < len(out):
            real = out[i][0]
            j = i + 1
            while j < len(out) and out[j][0] == real and j - i < DELIVERY_BATCH_RECORDS:
                j += 1
            self._deliver_to(real, [(m, r) for _, m, r in out[i:j]])
            i = j

    def _deliver_to(self, real: tuple[str, int] | None, parked: list[tuple[str, object]]) -> None:
        meta = self.store.topics.get(real[0]) if real is not None else None
        if real is None or meta is None or not 0 <= real[1] < meta.partitions:
            log.warning("dropping %d due record(s): their partition %s no longer exists", len(parked), real)
            self.dropped += len(parked)
            return
        options = self._delivery_options(meta.configs)
        self.store.append_built(real[0], real[1], delivered_batch(parked), **options)
        self.delivered += len(parked)

    # -- pending counts --------------------------------------------------------------------
    def _count_pending(self, due_ms: int, delta: int) -> None:
        hour = due_ms // 3_600_000
        count = self._pending_by_hour.get(hour, 0) + delta
        if count > 0:
            self._pending_by_hour[hour] = count
        else:
            self._pending_by_hour.pop(hour, None)

    def _pending_total(self) -> int:
        return sum(self._pending_by_hour.values())

    def status(self) -> dict:
        """What ``rmqk delays`` shows: per level its delay, depth and next due time; timers
        pending per due hour."""
        levels = []
        for partition in range(self._levels):
            plog = self.store.partition(SCHEDULE_TOPIC, partition)
            offset = max(self._level_next.get(partition, 0), plog.log_start_offset)
            depth = plog.next_offset - offset
            next_due = plog.consume_queue.entry(offset)[2] if depth > 0 else None
            levels.append({"level": partition + 1, "delay_ms": self.config.delay_levels_ms[partition],
                           "depth": depth, "next_due_ms": next_due, "delivered_up_to": offset})
        return {
            "levels": levels,
            "timers_pending": self._pending_total(),
            "timers_by_hour": dict(sorted(self._pending_by_hour.items())),
            "timers_done_before_ms": self._timer.read_slot * self._precision,
            "delivered": self.delivered, "dropped": self.dropped,
            "dead_lettered": self.dead_lettered, "cancelled": self.cancelled,
        }

    # -- the delivery loop -----------------------------------------------------------------
    def _wake(self) -> None:
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
        self._index.flush()

    def close(self) -> None:
        self._index.close()

    async def _run(self) -> None:
        assert self._wakeup is not None
        last_cleanup = 0
        while True:
            self._wakeup.clear()
            try:
                wake = self.deliver_due()
            except Exception:  # a delivery bug must not stop every later delivery
                log.exception("scheduled delivery failed; retrying in 1 s")
                wake = self.clock.now_ms() + 1000
            now = self.clock.now_ms()
            if now - last_cleanup > 60_000:
                self._index.delete_processed(self._timer.read_slot)
                last_cleanup = now
            delay = 1.0 if wake is None else max(0.0, min(1.0, (wake - now) / 1000))
            if delay == 0:
                await asyncio.sleep(0)
                continue
            try:
                await asyncio.wait_for(self._wakeup.wait(), delay)
            except TimeoutError:
                pass


def _reconsume_times(record) -> int:
    """A nacked record's RECONSUME_TIMES (absent, negative or not a number: 0)."""
    value = header(record, RECONSUME_TIMES)
    try:
        return max(0, int(value)) if value is not None else 0
    except ValueError:
        return 0
