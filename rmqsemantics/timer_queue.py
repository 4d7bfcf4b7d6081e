"""The timers' side of the scheduler: the timing wheel over ``rmq_sys_wheel_timer`` and the
progress of its delivery.

Each record parked in the timer topic (offset ``ref``, due ``due``) is added to the wheel
(storage.timer_index) when it is appended. The wheel's slots are handled in order: slot s
once every time in it has come (never early, at most a slot late); within a slot, its units
in insertion order, at most a budget at a time. Progress is ``read_slot`` plus the refs of
that slot already handled (``done``), so a crash part-way through a slot, and even a lost
index rebuilt part-way through one, neither repeats nor skips a unit.

What a checkpoint snapshot holds (``state``): read_slot, done, ``enqueued`` (timer-topic
offsets below it are in the index), the index's log length, timers pending per due hour,
and the refs to skip: cancelled parks and deliveries the crash replay found after the
checkpoint (those refs may still be in the index, or be indexed again from the topic).

Rebuilding a lost index (files deleted or damaged): every timer-topic record still due is
indexed again, except what is known done: due before the slot being read, in ``done``,
delivered after the checkpoint, cancelled, or replaced by a re-parked copy (a copy names the
record it replaces in ``PARKED_AT``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from rmqkafka.storage import record_batch
from rmqkafka.storage.consume_queue import ENTRY
from rmqkafka.storage.partition_log import PartitionLog
from rmqkafka.storage.timer_index import TimerIndex, TimerIndexLostError

from .parked_records import PARKED_AT, PARKED_AT_NEEDLE, header, parse_marker

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
# (slot, [(due, ref)]) -> the refs handled (delivered, re-parked or found gone); on a failed
# delivery, the others stay for a later call
Handler = Callable[[int, list[tuple[int, int]]], set[int]]
RETRY_MS = 1000  # after a failed delivery


class TimerQueue:
    def __init__(self, directory: Path, topic: str, *, precision_ms: int, wheel_slots: int) -> None:
        self.topic = topic
        self.precision = precision_ms
        self.index = TimerIndex(directory, wheel_slots=wheel_slots, precision_ms=precision_ms)
        self.read_slot = 0
        self.done: set[int] = set()
        self.enqueued = 0
        self.skip: set[int] = set()  # refs never to deliver: cancelled, or delivered after the checkpoint
        self.pending_by_hour: dict[int, int] = {}
        self._log_length: int | None = None
        self._slot_entries: tuple[int, list[tuple[int, int]]] | None = None

    # -- state -----------------------------------------------------------------------------
    def state(self) -> list:
        return [self.read_slot, sorted(self.done), self.enqueued, self.index.log_length,
                {str(h): n for h, n in self.pending_by_hour.items()}, sorted(self.skip)]

    def restore(self, state: list | None, now_ms: int) -> None:
        if state:
            read_slot, done, enqueued, log_length, pending, skip = state
            self.read_slot, self.enqueued, self._log_length = int(read_slot), int(enqueued), log_length
            self.done = {int(ref) for ref in done}
            self.pending_by_hour = {int(h): int(n) for h, n in pending.items()}
            self.skip = {int(ref) for ref in skip}
        else:
            self.read_slot, self.enqueued, self._log_length = now_ms // self.precision, 0, None
            self.done, self.pending_by_hour, self.skip = set(), {}, set()

    def open(self, plog: PartitionLog, *, fresh: bool, clean: bool) -> None:
        """Open the index and add what the topic holds beyond it (see the module docstring).
        ``fresh``: no snapshot was restored (the replay saw every delivery still in the
        commitlog); ``clean``: the broker was shut down cleanly."""
        floor = None
        if fresh:
            self.index.reset(read_slot=self.read_slot)
            floor = 0
        else:
            try:
                self.index.open(read_slot=self.read_slot, log_length=None if clean else self._log_length)
                if self.index.log_length < (self._log_length or 0):
                    raise TimerIndexLostError(
                        f"the timer log holds {self.index.log_length} bytes, the checkpoint says "
                        f"{self._log_length}")
            except TimerIndexLostError as exc:
                floor = self.read_slot * self.precision
                log.error("timer index lost (%s); rebuilding it from %s", exc, self.topic)
                self.index.reset(read_slot=self.read_slot)
        if floor is not None:
            self.enqueued, self.pending_by_hour = 0, {}
        self._enqueue_from(plog, floor)

    def _enqueue_from(self, plog: PartitionLog, floor_ms: int | None) -> None:
        replaced = _replaced_refs(plog) if floor_ms is not None else set()
        offset = max(self.enqueued, plog.log_start_offset)
        while offset < plog.next_offset:
            raw = plog.consume_queue.entries(offset, 4096)
            items = []
            for i, (_, size, due) in enumerate(ENTRY.iter_unpack(raw)):
                ref = offset + i
                if size == 0:  # a lost offset (damaged commitlog range): no timer there
                    continue
                if ref in self.skip:
                    self.skip.discard(ref)
                    continue
                if floor_ms is not None and (due < floor_ms or ref in replaced or ref in self.done):
                    continue
                items.append((due, ref))
            self.add(items)
            offset += len(raw) // ENTRY.size
        self.enqueued = plog.next_offset

    # -- adding and skipping ---------------------------------------------------------------
    def add(self, items: list[tuple[int, int]]) -> None:
        """Index ``(due, ref)`` of records just appended to the timer topic."""
        if not items:
            return
        if self._slot_entries is not None and min(due for due, _ in items) // self.precision <= self.read_slot:
            self._slot_entries = None  # the slot being read gets a unit
        self.index.add_many(items, read_slot=self.read_slot)
        self.enqueued = max(self.enqueued, items[-1][1] + 1)
        for hour, count in Counter(due // HOUR_MS for due, _ in items).items():
            self.pending_by_hour[hour] = self.pending_by_hour.get(hour, 0) + count

    def drop(self, ref: int, due: int | None) -> None:
        """``ref`` will not be delivered (cancelled, or found delivered by the replay)."""
        if ref in self.skip:
            return
        self.skip.add(ref)
        if due is not None and ref < self.enqueued:
            self.uncount(due)

    def uncount(self, due: int) -> None:
        hour = due // HOUR_MS
        count = self.pending_by_hour.get(hour, 0) - 1
        if count > 0:
            self.pending_by_hour[hour] = count
        else:
            self.pending_by_hour.pop(hour, None)

    @property
    def pending(self) -> int:
        return sum(self.pending_by_hour.values())

    # -- delivering ------------------------------------------------------------------------
    def handle_due(self, now_ms: int, budget: int, handle: Handler) -> int | None:
        """Hand the units of every slot whose time has wholly come to ``handle`` (at most
        ``budget`` units), skipped refs left out; returns when to call again (epoch ms;
        ``now_ms`` when the budget ran out, a second later when a delivery failed), None when
        nothing is pending."""
        precision = self.precision
        ready = (now_ms + 1) // precision - 1  # the last slot wholly at or before now
        while self.read_slot <= ready and budget > 0:
            slot = self.read_slot
            todo = []
            if self._slot_entries is None or self._slot_entries[0] != slot:
                # kept while the slot takes several calls (a walk of its list reads it all)
                self._slot_entries = (slot, self.index.entries(slot))
            for due, ref in self._slot_entries[1]:
                if ref in self.done:
                    continue
                if ref in self.skip:
                    self.skip.discard(ref)
                    self.done.add(ref)
                    continue
                todo.append((due, ref))
            chunk = todo[:budget]
            handled = handle(slot, chunk)
            for due, ref in chunk:
                if ref in handled:
                    self.uncount(due)
            budget -= len(chunk)
            if len(handled) < len(chunk):  # a delivery failed: the rest is tried again later
                self.done.update(handled)
                return now_ms + RETRY_MS
            if len(chunk) == len(todo):
                self.read_slot += 1
                self.done.clear()
                self._slot_entries = None
            else:
                self.done.update(handled)
        if self.read_slot <= ready:
            return now_ms
        return (self.read_slot + 1) * precision - 1 if self.pending else None


def _replaced_refs(plog: PartitionLog) -> set[int]:
    """Timer-topic offsets that a re-parked copy replaced (named in its ``PARKED_AT``)."""
    replaced: set[int] = set()
    offset = plog.log_start_offset
    while offset < plog.next_offset:
        batch = plog.batch_at(offset)
        if PARKED_AT_NEEDLE in batch:
            for record in record_batch.read_records(batch):
                value = header(record, PARKED_AT)
                where = parse_marker(value) if value is not None else None
                if where is not None:
                    replaced.add(where[2])
        offset = record_batch.next_offset_of(batch)
    return replaced
