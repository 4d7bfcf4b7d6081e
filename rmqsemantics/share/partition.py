"""One share-partition: which records of a topic-partition a share group has handed out,
to whom, how often, and which are done (Kafka's ``SharePartition``, KIP-932).

Offsets, not positions: every number here is a Kafka offset of the data partition.

- ``start_offset`` (SPSO): every record below it is done (acknowledged or archived), except
  the records of the retry schedule (below).
- ``end_offset`` (SPEO + 1, exclusive): the next offset never acquired. The in-flight window
  ``[start_offset, end_offset)`` holds at most ``max_record_locks`` records (plus, after a
  batch-optimized acquisition, the rest of the batch it began: at most
  ``MAX_BATCH_OVERSHOOT``), each with a state (available, acquired, acknowledged, archived)
  and a delivery count.
- An acquisition raises the delivery count and locks the record for one member until
  ``record_lock_duration_ms`` passes. ACCEPT acknowledges it, REJECT and GAP archive it,
  RELEASE or lock expiry make it available again, or archive it when its delivery count has
  reached the limit. SPSO moves over every done prefix of the window. RENEW (KIP-1222) keeps
  the record acquired by the same member with the same delivery count and starts its lock
  again (now + ``record_lock_duration_ms``); nothing is persisted for it, as for an
  acquisition (Kafka's SharePartition renews the lock "without changing the state or
  persisting anything").

State per offset range, as Kafka's InFlightBatch: the records a member acquires for their
first delivery are one *run* (one entry, one lock-heap entry) until a request looks at its
records one by one (a release, a reject, an expiry, a type per offset), which splits those
records off as one entry each. An ACCEPT (or RENEW) of a range of a run makes that range a run
of its own: a run accepted becomes one acknowledged entry, SPSO passes it in one step, and its
state is written as one StateBatch, so a consumer acknowledging what it fetched costs
O(batches), not O(records), also when it releases a record here and there (the records between
stay runs). The persisted format is the same.

RocketMQ's ``rmq.redelivery.backoff=levels``: a released or expired record becomes available
only after its retry delay (``due_ms``). A waiting record does not hold SPSO: SPSO moves over
it as over a done record, and it stays below SPSO in the *retry schedule* (RocketMQ's retry
topic), acquired first once due. So a poison record never fills the window. Memory: at most
``max_record_locks + MAX_BATCH_OVERSHOOT`` window entries plus ``max_retry_records`` retry entries; when the retry
schedule is full, waiting records stay in the window, which then back-pressures acquisition.

Durability: every change other than an acquisition is handed to ``persist`` (a
``StateUpdate``) before it takes effect; if ``persist`` raises, the change is undone and the
error propagates. Acquisitions are not persisted (as in Kafka): after a restart an acquired
record is available again with the delivery count last persisted. The state machine is
sans-IO: time comes from the injected clock, lock expiry runs at the start of every call
(and from ``expire_locks`` on the caller's timer, see ``next_wakeup_ms``).
"""

from __future__ import annotations

import enum
import heapq
import itertools
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rmqkafka.storage.clock import Clock

from .config import ShareGroupSettings
from .errors import InvalidRecordState, InvalidShareRequest

NO_MEMBER = ""


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids (they are also the persisted ``deliveryState``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge ``AcknowledgeTypes`` values (RENEW: KIP-1222, v2)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


REJECTED, EXHAUSTED = "rejected", "exhausted"  # why a record went to the dead-letter sink
# Batch-optimized acquisition takes a batch's records to its end even past the window's bound
# (Kafka bounds this only by the batch); here by at most this many records, librdkafka's
# default batch.num.messages, so the window's memory stays bounded whatever a producer sends.
MAX_BATCH_OVERSHOOT = 10_000
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class WindowCounts:
    """What a share-partition's window holds now, by state (``waiting``: available but
    waiting out a redelivery backoff; ``retrying``: held below SPSO for a retry schedule)."""

    in_flight: int  # records from SPSO to the end offset
    available: int
    acquired: int
    acknowledged: int
    archived: int
    waiting: int
    retrying: int


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str = NO_MEMBER
    deadline_ms: int = 0  # acquisition lock expiry (ACQUIRED only)
    due_ms: int = 0  # not acquirable before (rmq.redelivery.backoff=levels)


@dataclass(slots=True)
class _Run:
    """Records ``[first, last]`` acquired together for their first delivery and not looked
    at one by one since (Kafka's InFlightBatch before an acknowledgement splits it): ACQUIRED
    by one member under one lock, or ACKNOWLEDGED together. Delivery count 1, no backoff."""

    first: int
    last: int
    state: RecordState
    member_id: str
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """What ShareFetch's AcquiredRecords carries."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One AcknowledgementBatch: one type for the range, or one type per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Persisted state of ``[first_offset, last_offset]``: all records share it."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    due_ms: int = 0


@dataclass(frozen=True, slots=True)
class StateUpdate:
    """A change (or, as a snapshot, the whole state): the new SPSO and the records changed.
    Offsets below ``start_offset`` that no batch names are done. ``dead_letters``: records
    archived by REJECT or the delivery limit since the state began, a total, not a change
    (None in a change that dead-lettered nothing: the total stays)."""

    start_offset: int
    batches: tuple[StateBatch, ...]
    dead_letters: int | None = None


PersistFn = Callable[[StateUpdate], None]
DeadLetterFn = Callable[[int, int, str], None]  # (offset, delivery count, reason)


def _no_persist(update: StateUpdate) -> None:
    pass


def _no_dead_letter(offset: int, delivery_count: int, reason: str) -> None:
    pass


class _Ranges:
    """Sorted, disjoint inclusive offset ranges (aborted transactions, control records)."""

    def __init__(self, ranges: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for first, last in sorted(ranges):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        self._firsts = [r[0] for r in merged]
        self._lasts = [r[1] for r in merged]

    def __bool__(self) -> bool:
        return bool(self._firsts)

    def __contains__(self, offset: int) -> bool:
        i = bisect_right(self._firsts, offset) - 1
        return i >= 0 and offset <= self._lasts[i]


class SharePartition:
    def __init__(self, settings: ShareGroupSettings, clock: Clock, start_offset: int, *,
                 persist: PersistFn = _no_persist, dead_letter: DeadLetterFn = _no_dead_letter,
                 restored: Sequence[StateBatch] = (), dead_letters: int = 0) -> None:
        self.settings = settings
        self._clock = clock
        self._persist = persist
        self._dead_letter = dead_letter
        self._start = start_offset
        self._records: dict[int, InFlight] = {}
        # Every window offset is in exactly one of _records and the runs: a run keeps a batch
        # of first deliveries as one entry until a request looks at part of it (_materialize),
        # so acquiring and accepting whole batches, and SPSO passing them, cost O(1) each.
        self._runs: dict[int, _Run] = {}  # first offset -> run
        self._run_starts: list[int] = []  # the runs' first offsets, ascending
        self._run_offsets = 0  # offsets the runs hold
        # (deadline_ms, sequence number, offsets): one entry per acquisition call, not per
        # record (a run's offsets are a range); lazily invalidated (an offset counts only while
        # its record holds that deadline)
        self._locks: list[tuple[int, int, Sequence[int]]] = []
        self._lock_seq = itertools.count()  # orders entries of one deadline (offsets do not compare)
        self._locked = 0  # offsets the lock heap names (its memory)
        self._retries: list[tuple[int, int]] = []  # (due_ms, offset) below SPSO, lazily invalidated
        # no window record below this offset is available: acquisitions start looking here,
        # so members holding a full window do not make every fetch walk all of it
        self._hint = start_offset
        # offset -> its fields before the change (a tuple: cheaper than a copy), None if new
        self._undo: dict[int, tuple | None] | None = None
        self._gone: dict[int, InFlight] = {}  # records this change removed, by final state
        # first -> (run, last, state, member, deadline) before the change; runs it removed
        self._run_undo: dict[int, tuple] = {}
        self._gone_runs: list[_Run] = []
        # records archived by REJECT or the delivery limit since the state began (restored:
        # persisted with the change that archived them)
        self.dead_letters = dead_letters
        end = start_offset
        for batch in restored:
            for offset in range(max(batch.first_offset, start_offset if batch.state in _DONE else 0),
                                batch.last_offset + 1):
                state = RecordState.AVAILABLE if batch.state == RecordState.ACQUIRED else batch.state
                self._records[offset] = InFlight(state, batch.delivery_count, due_ms=batch.due_ms)
                end = max(end, offset + 1)
        self._end = end
        for offset in range(start_offset, end):  # acquired before a crash, never persisted
            self._records.setdefault(offset, InFlight(RecordState.AVAILABLE))
        for offset, rec in self._records.items():
            if offset < start_offset:
                heapq.heappush(self._retries, (rec.due_ms, offset))

    # -- reading -----------------------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    def in_flight_count(self) -> int:
        return self._end - self._start

    def retry_count(self) -> int:
        return len(self._records) + self._run_offsets - (self._end - self._start)

    def record(self, offset: int) -> InFlight | None:
        """The record's state (of a run's record, a copy: to read, not to change)."""
        rec = self._records.get(offset)
        if rec is None:
            run = self._run_at(offset)
            if run is not None:
                return InFlight(run.state, 1, run.member_id, run.deadline_ms)
        return rec

    def _run_at(self, offset: int) -> _Run | None:
        starts = self._run_starts
        i = bisect_right(starts, offset) - 1
        if i >= 0:
            run = self._runs[starts[i]]
            if offset <= run.last:
                return run
        return None

    def _add_run(self, run: _Run) -> None:
        self._runs[run.first] = run
        if not self._run_starts or self._run_starts[-1] < run.first:
            self._run_starts.append(run.first)  # the usual case: new records at the end
        else:
            insort(self._run_starts, run.first)
        self._run_offsets += run.last - run.first + 1

    def _drop_run(self, run: _Run) -> None:
        del self._runs[run.first]
        del self._run_starts[bisect_left(self._run_starts, run.first)]
        self._run_offsets -= run.last - run.first + 1

    def _split(self, run: _Run, first: int, last: int) -> _Run:
        """``run``'s records from ``first`` to ``last`` as a run of their own, same state,
        member and lock; the rest of it stays runs (never inside ``_write``)."""
        first, last = max(first, run.first), min(last, run.last)
        self._cut(run, first, last)
        part = _Run(first, last, run.state, run.member_id, run.deadline_ms)
        self._add_run(part)
        return part

    def _cut(self, run: _Run, first: int, last: int) -> None:
        """Drop ``run``, keeping what lies outside ``[first, last]`` as runs."""
        self._drop_run(run)
        if run.first < first:
            self._add_run(_Run(run.first, first - 1, run.state, run.member_id, run.deadline_ms))
        if last < run.last:
            self._add_run(_Run(last + 1, run.last, run.state, run.member_id, run.deadline_ms))

    def _materialize(self, run: _Run, first: int | None = None, last: int | None = None) -> None:
        """Hold ``run``'s records from ``first`` to ``last`` (all by default) one by one, same
        states; the rest of it stays runs (never inside ``_write``)."""
        first = run.first if first is None else max(first, run.first)
        last = run.last if last is None else min(last, run.last)
        self._cut(run, first, last)
        records = self._records
        for offset in range(first, last + 1):
            records[offset] = InFlight(run.state, 1, run.member_id, run.deadline_ms)

    def counts(self) -> WindowCounts:
        """The window's records by state: one pass over the window (bounded by the
        share-partition's record locks), never over the topic."""
        now = self._clock.now_ms()
        by_state = {state: 0 for state in RecordState}
        waiting = 0
        for rec in self._records.values():
            by_state[rec.state] += 1
            if rec.state == RecordState.AVAILABLE and rec.due_ms > now:
                waiting += 1
        for run in self._runs.values():
            by_state[run.state] += run.last - run.first + 1
        return WindowCounts(self.in_flight_count(), by_state[RecordState.AVAILABLE], by_state[RecordState.ACQUIRED],
                            by_state[RecordState.ACKNOWLEDGED], by_state[RecordState.ARCHIVED], waiting,
                            self.retry_count())

    def next_wakeup_ms(self) -> int | None:
        """When the next lock expires or the next waiting record becomes due."""
        times = [rec.deadline_ms for rec in self._records.values() if rec.state == RecordState.ACQUIRED]
        times += [run.deadline_ms for run in self._runs.values() if run.state == RecordState.ACQUIRED]
        times += [rec.due_ms for rec in self._records.values()
                  if rec.state == RecordState.AVAILABLE and rec.due_ms > self._clock.now_ms()]
        return min(times, default=None)

    def next_fetch_offset(self) -> int:
        """The first offset of the window an acquisition could take now (an available,
        due record), else the end offset: where the next read of the log starts."""
        now = self._clock.now_ms()
        offset, records = max(self._start, self._hint), self._records
        while offset < self._end:
            rec = records.get(offset)
            if rec is None:  # a run: none of it is available
                offset = self._run_at(offset).last + 1  # type: ignore[union-attr]
                continue
            if rec.state == RecordState.AVAILABLE and rec.due_ms <= now:
                return offset
            offset += 1
        return self._end

    def has_due_retries(self) -> bool:
        """Whether a record waiting below SPSO (retry schedule) is due now."""
        return bool(self._retries) and self._retries[0][0] <= self._clock.now_ms()

    def snapshot(self) -> StateUpdate:
        """The state as a snapshot record would hold it; an acquired record appears as
        available with the delivery count it has now (this acquisition counted)."""
        return StateUpdate(self._start, _with_runs(state_batches(
            (offset, rec) for offset, rec in sorted(self._records.items())
            if rec.state != RecordState.AVAILABLE or rec.delivery_count or rec.due_ms), self._runs.values()),
            self.dead_letters)

    # -- acquisition ---------------------------------------------------------------------------
    def acquire(self, member_id: str, log_end: int, max_records: int, batch_size: int | None = None, *,
                last_stable_offset: int | None = None, aborted: Iterable[tuple[int, int]] = (),
                control: Iterable[tuple[int, int]] = (), below: int | None = None,
                batch_ends: Sequence[int] = ()) -> list[AcquiredRange]:
        """Lock up to ``max_records`` available records for ``member_id``: due retries first,
        then the window in offset order, then new records below ``log_end`` (the high
        watermark; with read_committed, ``last_stable_offset``). ``aborted`` ranges are
        archived unseen under read_committed, ``control`` ranges always; both are inclusive
        offset ranges the caller read from the log. ``below``: no record of the window or
        past it at or above this offset is acquired (the end of the batches the caller read,
        so that every acquired record goes out with its batch); due retries are exempt. If writing the archived unseen records
        fails, the error propagates and this call's acquisitions come back when their locks
        expire.

        ``batch_ends`` (ascending next offsets of the log batches the caller read) asks for
        Kafka's batch-optimized acquisition (ShareAcquireMode 0, the default): ``max_records``
        is then a soft limit for new records, which run to the end of the batch holding the
        last one counted (Kafka's ``lastOffsetFromBatchWithRequestOffset``), even past the
        window's bound, by at most ``MAX_BATCH_OVERSHOOT`` records; the ranges returned are cut
        only at batch starts, once ``batch_size`` records long (Kafka's ``createBatches``).
        Without it the limit is strict (ShareAcquireMode 1, record_limit)."""
        if not member_id:
            raise InvalidShareRequest("The member id must not be empty")
        now = self._clock.now_ms()
        self.expire_locks()
        read_committed = self.settings.isolation_level == "read_committed"
        limit = log_end
        if read_committed:
            limit = min(log_end, log_end if last_stable_offset is None else last_stable_offset)
        window_limit = self._end if below is None else min(self._end, below)
        if below is not None:
            limit = min(limit, below)
        unseen = _Ranges([*control, *(aborted if read_committed else ())])
        has_unseen = bool(unseen)
        deadline = now + self.settings.record_lock_duration_ms
        taken: list[int] = []
        acquired = RecordState.ACQUIRED

        def take(offset: int, rec: InFlight) -> None:
            rec.state, rec.member_id, rec.deadline_ms, rec.due_ms = acquired, member_id, deadline, 0
            rec.delivery_count += 1
            taken.append(offset)

        while self._retries and len(taken) < max_records and self._retries[0][0] <= now:
            due, offset = heapq.heappop(self._retries)
            rec = self._records.get(offset)
            if rec is not None and offset < self._start and rec.state == RecordState.AVAILABLE \
                    and rec.due_ms == due:
                take(offset, rec)
        offset = max(self._start, self._hint)
        waiting = None  # the first available record not taken (not due, or the limit reached)
        records, available = self._records, RecordState.AVAILABLE
        stop, quota, retried = window_limit, max_records, len(taken)
        while True:
            while offset < stop and len(taken) < quota:
                rec = records.get(offset)
                if rec is None:  # a run: none of it is available
                    offset = self._run_at(offset).last + 1  # type: ignore[union-attr]
                    continue
                if rec.state == available:
                    if rec.due_ms <= now:
                        take(offset, rec)
                    elif waiting is None:
                        waiting = offset
                offset += 1
            if (not batch_ends or len(taken) < quota or len(taken) == retried or offset >= window_limit
                    or stop != window_limit):
                break
            # batch-optimized (Kafka's acquireSubsetBatchRecords): every available record of
            # the batch holding the last one taken goes too, whatever the count
            stop, quota = _batch_end(offset, batch_ends, window_limit), len(taken) + window_limit - offset
        self._hint = offset if waiting is None else waiting
        window_end = self._end
        archived_unseen = []
        new = range(0)
        # new records: made acquired at once, as one run (the common case of a consumer
        # keeping up: no object and no call per record)
        window_cap = self._start + self.settings.max_record_locks
        taken_before_new = len(taken)
        # batch-optimized: new records may run past the window's bound to their batch's end
        soft_cap = min(limit, window_cap + MAX_BATCH_OVERSHOOT) if batch_ends else limit
        if has_unseen:
            first_new = self._end
            stop, quota = min(limit, window_cap), max_records
            while True:
                while self._end < stop and len(taken) < quota:
                    offset, self._end = self._end, self._end + 1
                    rec = records[offset] = InFlight(available)
                    if offset in unseen:
                        archived_unseen.append(offset)
                    else:
                        take(offset, rec)
                if not batch_ends or self._end <= first_new:
                    break
                end = _batch_end(self._end, batch_ends, soft_cap)  # the rest of the last batch begun
                if end <= self._end:
                    break
                stop, quota = end, len(taken) + end - self._end
        else:
            first_new = self._end
            last_new = min(limit, first_new + max_records - len(taken), window_cap)
            if last_new > first_new and batch_ends:
                last_new = _batch_end(last_new, batch_ends, soft_cap)
            if last_new > first_new:
                self._end = last_new
                self._add_run(_Run(first_new, last_new - 1, acquired, member_id, deadline))
                new = range(first_new, last_new)
        if waiting is None and self._hint == window_end:
            # the window was walked to its end and every new record is taken or archived
            # unseen: the next fetch need not walk them again to find nothing available
            self._hint = self._end
        if taken:
            heapq.heappush(self._locks, (deadline, next(self._lock_seq), tuple(taken)))
            self._locked += len(taken)
        if new:
            heapq.heappush(self._locks, (deadline, next(self._lock_seq), new))
            self._locked += len(new)
        if archived_unseen:  # archived unseen, persisted so a restart does not deliver them
            self._write(lambda: [self._set(o, RecordState.ARCHIVED, 0) for o in archived_unseen])
        self._trim_heaps()
        if not taken and new:
            # only new records, all first deliveries: the ranges need no look at each record
            if batch_ends:
                return _cut_at_batches(new, batch_ends, batch_size)
            step = batch_size or len(new)
            return [AcquiredRange(first, min(first + step, new.stop) - 1, 1) for first in range(new.start, new.stop, step)]
        return _ranges([*sorted(taken), *new], self._records, batch_size)

    def _trim_heaps(self) -> None:
        """Acknowledged records leave stale heap entries until their deadline: rebuild the
        heaps once they name twice the records (or twice the window's bound, so that a window
        kept small by fast acknowledgements is not rebuilt every few fetches), so memory
        follows the window's bound, not the rate."""
        held = self.in_flight_count() + self.retry_count()
        if self._locked + len(self._retries) > 2 * max(held, self.settings.max_record_locks) + 64:
            seq = self._lock_seq
            locks: list[tuple[int, int, Sequence[int]]] = [
                (r.deadline_ms, next(seq), (o,)) for o, r in self._records.items() if r.state == RecordState.ACQUIRED]
            locks += [(run.deadline_ms, next(seq), range(run.first, run.last + 1)) for run in self._runs.values()
                      if run.state == RecordState.ACQUIRED]
            self._locks = locks
            self._retries = [(r.due_ms, o) for o, r in self._records.items()
                             if o < self._start and r.state == RecordState.AVAILABLE]
            heapq.heapify(self._locks)
            self._locked = sum(len(offsets) for _, _, offsets in locks)
            heapq.heapify(self._retries)

    # -- acknowledgement -----------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: Sequence[AckBatch]) -> None:
        """Apply one request's acknowledgements, all or none (Kafka rolls back on error)."""
        self.expire_locks()
        now = self._clock.now_ms()
        plan: dict[int, int] = {}  # offset -> AckType value
        run_plan: dict[int, int] = {}  # first offset of a whole run -> ACCEPT or RENEW
        for batch in batches:
            self._check_batch(member_id, batch, plan, run_plan)
        dead: list[tuple[int, int, str]] = []
        acknowledged = RecordState.ACKNOWLEDGED

        def apply() -> None:
            records, undo = self._records, self._undo
            assert undo is not None
            for offset, ack in plan.items():
                rec = records[offset]
                if ack == AckType.ACCEPT:  # _set inlined: the hot path of every consumer
                    if offset not in undo:
                        undo[offset] = (rec.state, rec.delivery_count, rec.member_id, rec.deadline_ms, rec.due_ms)
                    rec.state, rec.member_id, rec.deadline_ms, rec.due_ms = acknowledged, NO_MEMBER, 0, 0
                elif ack == AckType.RELEASE:
                    self._settle(offset, now, dead, backoff=True)
                else:
                    self._set(offset, RecordState.ARCHIVED, rec.delivery_count)
                    if ack == AckType.REJECT:
                        dead.append((offset, rec.delivery_count, REJECTED))
            run_undo = self._run_undo
            for run in accepted:  # a whole batch accepted: one entry changes
                run_undo.setdefault(run.first, (run, run.last, run.state, run.member_id, run.deadline_ms))
                run.state, run.member_id, run.deadline_ms = acknowledged, NO_MEMBER, 0

        renewed = [o for o, ack in plan.items() if ack == AckType.RENEW]
        renewed_runs = [self._runs[f] for f, ack in run_plan.items() if ack == AckType.RENEW]
        if renewed or renewed_runs:
            if not self.settings.renew_acknowledge_enable:
                raise InvalidRecordState("The renew acknowledge type is not enabled")
            for offset in renewed:
                del plan[offset]
        accepted = [self._runs[f] for f, ack in run_plan.items() if ack == AckType.ACCEPT]
        if plan or accepted:
            self._write(apply, dead)
            self._dead_lettered(dead)
        if renewed or renewed_runs:  # after the other types were written: a failed write renews nothing
            deadline = now + self.settings.record_lock_duration_ms
            for offset in renewed:
                self._records[offset].deadline_ms = deadline
            if renewed:
                heapq.heappush(self._locks, (deadline, next(self._lock_seq), tuple(renewed)))
                self._locked += len(renewed)
            for run in renewed_runs:
                run.deadline_ms = deadline
                heapq.heappush(self._locks, (deadline, next(self._lock_seq), range(run.first, run.last + 1)))
                self._locked += run.last - run.first + 1
            self._trim_heaps()

    def _check_batch(self, member_id: str, batch: AckBatch, plan: dict[int, int], run_plan: dict[int, int]) -> None:
        first, last, types = batch.first_offset, batch.last_offset, batch.types
        if first > last or first < 0:
            raise InvalidShareRequest(f"Invalid acknowledgement batch: first offset {first}, last offset {last}")
        if len(types) != 1 and len(types) != last - first + 1:
            raise InvalidShareRequest("The number of acknowledge types does not match the batch's offsets")
        for t in types:
            if t not in AckType._value2member_map_:
                raise InvalidShareRequest(f"Invalid acknowledge type: {t}")
        if first >= self._end:
            raise InvalidShareRequest("Batch record not found. The first offset in request is past acquired records.")
        if last >= self._end:
            raise InvalidShareRequest("Batch record not found. The last offset in request is past acquired records.")
        # Below SPSO only retry records exist (a done one is skipped, as Kafka skips offsets
        # below its start offset): walk the records, never the client's range, so a range
        # from offset 0 costs the window and the retry schedule at most.
        # (the scan happens only for a batch reaching below SPSO, where nothing but retry
        # records live: a request of 500 one-offset batches does not walk the window 500 times)
        retried = sorted(o for o in self._records if first <= o <= last and o < self._start) \
            if first < self._start else []
        if last < self._start and not retried:
            raise InvalidRecordState("Batch record not found. The request batch offsets are not found in the cache.")
        records, acquired, one = self._records, RecordState.ACQUIRED, len(types) == 1
        whole = one and types[0] in (AckType.ACCEPT, AckType.RENEW)

        def check(offset: int, rec: InFlight) -> None:
            if rec.state != acquired or offset in plan:
                raise InvalidRecordState("The batch cannot be acknowledged. The offset is not acquired.")
            if rec.member_id != member_id:
                raise InvalidRecordState("Member is not the owner of offset")
            plan[offset] = types[0] if one else types[offset - first]  # checked above

        for offset in retried:  # records below SPSO are never in runs
            check(offset, records[offset])
        offset = max(first, self._start)
        while offset <= last:
            rec = records.get(offset)
            if rec is None:  # in a run
                run = self._run_at(offset)
                assert run is not None
                if whole and run.first not in run_plan:
                    if run.state != acquired:
                        raise InvalidRecordState("The batch cannot be acknowledged. The offset is not acquired.")
                    if run.member_id != member_id:
                        raise InvalidRecordState("Member is not the owner of offset")
                    if offset != run.first or run.last > last:
                        # part of it (the records between released ones, as a consumer
                        # acknowledges them): that part becomes a run of its own, so it is
                        # accepted, passed by SPSO and written as one entry, not per record
                        run = self._split(run, offset, last)
                    run_plan[run.first] = types[0]
                    offset = run.last + 1
                    continue
                planned = run_plan.pop(run.first, None)
                if planned is not None:  # an earlier batch of this request took it whole
                    self._materialize(run)
                    plan.update(dict.fromkeys(range(run.first, run.last + 1), planned))
                else:  # a type per offset: that part's records one by one
                    self._materialize(run, offset, last)
                rec = records[offset]
            check(offset, rec)
            offset += 1

    # -- lock expiry and members ------------------------------------------------------------------
    def expire_locks(self) -> int:
        """Make every record whose acquisition lock has expired available again (or archive
        it at the delivery limit). Returns how many expired."""
        now = self._clock.now_ms()
        expired: dict[int, None] = {}
        while self._locks and self._locks[0][0] <= now:
            deadline, _, offsets = heapq.heappop(self._locks)
            self._locked -= len(offsets)
            if type(offsets) is range:  # a run's lock: the runs left of it (parts may be split off)
                run = self._runs.get(offsets.start)
                if run is not None and run.last == offsets[-1]:  # still whole
                    if run.state != RecordState.ACQUIRED or run.deadline_ms != deadline:
                        continue  # accepted, or renewed: nothing of it expires now
                    self._materialize(run)
                else:
                    starts = self._run_starts
                    for first in starts[bisect_left(starts, offsets.start):bisect_left(starts, offsets.stop)]:
                        part = self._runs[first]
                        if part.state == RecordState.ACQUIRED and part.deadline_ms == deadline:
                            self._materialize(part)
            for offset in offsets:
                rec = self._records.get(offset)
                # an offset acquired again within one ms has several entries with one deadline
                if rec is not None and rec.state == RecordState.ACQUIRED and rec.deadline_ms == deadline:
                    expired[offset] = None
        if expired:
            self._release(list(expired), now, backoff=True)
        return len(expired)

    def release_member(self, member_id: str, *, undelivered: bool = False) -> int:
        """A member left or its session expired: its records are available again at once
        (leaving is not a failed delivery, so no backoff); delivery counts are kept. With
        ``undelivered`` (the member closed its share session normally: what it still held
        was fetched but never handed to the application) each count is first lowered by
        one, as Kafka does since KAFKA-17541."""
        self.expire_locks()
        for run in [r for r in self._runs.values() if r.state == RecordState.ACQUIRED and r.member_id == member_id]:
            self._materialize(run)
        mine = [o for o, rec in self._records.items()
                if rec.state == RecordState.ACQUIRED and rec.member_id == member_id]
        if mine:
            if undelivered:
                for offset in mine:  # undone with the rest if the write fails
                    self._records[offset].delivery_count -= 1
            try:
                self._release(mine, self._clock.now_ms(), backoff=False)
            except BaseException:
                if undelivered:
                    for offset in mine:
                        self._records[offset].delivery_count += 1
                raise
        return len(mine)

    def advance_log_start(self, log_start: int) -> None:
        """Retention removed the records below ``log_start``: they can never be delivered."""
        for run in [r for r in self._runs.values() if r.first < log_start]:
            self._materialize(run)
        if log_start <= self._start and not any(o < log_start for o in self._records):
            return

        def apply() -> None:
            for offset in [o for o in self._records if o < log_start]:
                self._remember(offset)
                self._gone[offset] = InFlight(RecordState.ARCHIVED, self._records.pop(offset).delivery_count)
            if log_start > self._start:
                self._start = log_start
                self._end = max(self._end, log_start)

        self._write(apply)

    def _release(self, offsets: list[int], now: int, backoff: bool) -> None:
        dead: list[tuple[int, int, str]] = []
        self._write(lambda: [self._settle(o, now, dead, backoff) for o in sorted(offsets)], dead)
        self._dead_lettered(dead)

    def _dead_lettered(self, dead: list[tuple[int, int, str]]) -> None:
        self.dead_letters += len(dead)
        for item in dead:
            self._dead_letter(*item)

    def _settle(self, offset: int, now: int, dead: list, backoff: bool) -> None:
        count = self._records[offset].delivery_count
        if count >= self.settings.delivery_limit:
            self._set(offset, RecordState.ARCHIVED, count)
            dead.append((offset, count, EXHAUSTED))
            return
        delay = self.settings.retry_delay_ms(count) if backoff else 0
        self._set(offset, RecordState.AVAILABLE, count, now + delay if delay else 0)
        if offset < self._start and delay == 0:
            heapq.heappush(self._retries, (0, offset))

    # -- changes: undo log, SPSO, persistence ------------------------------------------------------
    def _remember(self, offset: int) -> None:
        assert self._undo is not None
        if offset not in self._undo:
            rec = self._records.get(offset)
            self._undo[offset] = None if rec is None else (
                rec.state, rec.delivery_count, rec.member_id, rec.deadline_ms, rec.due_ms)

    def _set(self, offset: int, state: RecordState, count: int, due_ms: int = 0) -> None:
        self._remember(offset)  # a copy: the record itself may change in place
        if state == RecordState.AVAILABLE and offset < self._hint:
            self._hint = offset
        rec = self._records.get(offset)
        if rec is None:
            self._records[offset] = InFlight(state, count, due_ms=due_ms)
        else:
            rec.state, rec.delivery_count, rec.member_id, rec.deadline_ms, rec.due_ms = \
                state, count, NO_MEMBER, 0, due_ms

    def _write(self, apply: Callable[[], object], dead: list | None = None) -> None:
        """Apply a change, move SPSO, persist; on a persist failure undo all of it. ``dead``:
        the list ``apply`` fills with the records it dead-letters; their new total is written
        with the change, so the count is exactly as durable as the archiving."""
        self._undo, self._gone = {}, {}
        self._run_undo, self._gone_runs = {}, []
        start, end = self._start, self._end
        try:
            apply()
            self._advance_start()
            records = self._records
            changed = sorted(o for o in self._undo if o in records)
            # done records are named too: replay must drop a retry record below SPSO
            final = self._gone
            if changed:
                final = {**final, **{o: records[o] for o in changed}}
            batches = state_batches(sorted(final.items()))
            if self._run_undo:
                batches = _with_runs(batches, [entry[0] for entry in self._run_undo.values()])
            self._persist(StateUpdate(self._start, batches, self.dead_letters + len(dead) if dead else None))
        except BaseException:
            for offset, old in self._undo.items():
                if old is None:
                    self._records.pop(offset, None)
                else:
                    self._records[offset] = InFlight(*old)
            for run, last, state, member_id, deadline in self._run_undo.values():
                run.last, run.state, run.member_id, run.deadline_ms = last, state, member_id, deadline
                if run.first not in self._runs:
                    self._add_run(run)
            self._start, self._end = start, end
            self._hint = min(self._hint, start)  # records the undo made available again
            raise
        finally:
            self._undo = None
        for offset in changed:
            rec = self._records[offset]
            if offset < self._start and rec.state == RecordState.AVAILABLE and rec.due_ms:
                heapq.heappush(self._retries, (rec.due_ms, offset))

    def _advance_start(self) -> None:
        assert self._undo is not None
        for offset in [o for o in self._undo if o < self._start]:  # a retry record done
            rec = self._records.get(offset)
            if rec is not None and rec.state in _DONE:
                self._gone[offset] = self._records.pop(offset)
        now = self._clock.now_ms()
        room = self.settings.max_retry_records - self.retry_count()
        records, gone, undo = self._records, self._gone, self._undo
        start, end = self._start, self._end
        while start < end:
            rec = records.get(start)
            if rec is None:  # a run begins here: SPSO passes it whole once it is accepted
                run = self._runs.get(start)
                if run is None or run.state != RecordState.ACKNOWLEDGED:
                    break
                self._run_undo.setdefault(start, (run, run.last, run.state, run.member_id, run.deadline_ms))
                self._drop_run(run)
                self._gone_runs.append(run)
                start = run.last + 1
                continue
            if rec.state in _DONE:
                if start not in undo:
                    self._remember(start)
                gone[start] = records.pop(start)
            elif rec.state == RecordState.AVAILABLE and rec.due_ms > now and room > 0:
                self._remember(start)  # moves into the retry schedule
                room -= 1
            else:
                break
            start += 1
        self._start = start


def state_batches(items: Iterable[tuple[int, InFlight]]) -> tuple[StateBatch, ...]:
    """Runs of consecutive offsets with the same persisted state, as StateBatches."""
    out: list[StateBatch] = []
    first = last = -1
    state = count = due = -1
    acquired, available = RecordState.ACQUIRED, RecordState.AVAILABLE
    for offset, rec in items:
        s = available if rec.state == acquired else rec.state
        # compared field by field, no key tuple: this runs once per record acknowledged
        if last + 1 == offset and s == state and rec.delivery_count == count and rec.due_ms == due and first >= 0:
            last = offset
            continue
        if first >= 0:
            out.append(StateBatch(first, last, state, count, due))
        first = last = offset
        state, count, due = s, rec.delivery_count, rec.due_ms
    if first >= 0:
        out.append(StateBatch(first, last, state, count, due))
    return tuple(out)


def _with_runs(batches: tuple[StateBatch, ...], runs: Iterable[_Run]) -> tuple[StateBatch, ...]:
    """``batches`` and the runs' states (an acquired run as available, count 1), in offset
    order, adjacent batches of one state joined: what ``state_batches`` would make of the
    same records one by one."""
    available, acquired = RecordState.AVAILABLE, RecordState.ACQUIRED
    items = sorted([*batches, *(StateBatch(r.first, r.last, available if r.state == acquired else r.state, 1)
                                for r in runs)], key=lambda b: b.first_offset)
    out: list[StateBatch] = []
    for b in items:
        if out:
            p = out[-1]
            if p.last_offset + 1 == b.first_offset and (p.state, p.delivery_count, p.due_ms) == (
                    b.state, b.delivery_count, b.due_ms):
                out[-1] = StateBatch(p.first_offset, b.last_offset, p.state, p.delivery_count, p.due_ms)
                continue
        out.append(b)
    return tuple(out)


def _batch_end(offset: int, batch_ends: Sequence[int], cap: int) -> int:
    """The end (exclusive) of the batch holding ``offset - 1``, at most ``cap`` and at least
    ``offset`` (``offset`` itself past the batches)."""
    i = bisect_left(batch_ends, offset)
    return offset if i == len(batch_ends) else max(offset, min(batch_ends[i], cap))


def _cut_at_batches(new: range, batch_ends: Sequence[int], batch_size: int | None) -> list[AcquiredRange]:
    """First deliveries ``new`` as AcquiredRecords cut where a batch starts once the range
    holds ``batch_size`` records (Kafka's createBatches: a range never splits a batch)."""
    out: list[AcquiredRange] = []
    first = new.start
    if batch_size:
        for start in batch_ends[bisect_right(batch_ends, new.start):bisect_left(batch_ends, new.stop)]:
            if start - first >= batch_size:  # a batch ending at ``start`` ends a range
                out.append(AcquiredRange(first, start - 1, 1))
                first = start
    out.append(AcquiredRange(first, new.stop - 1, 1))
    return out


def _ranges(offsets: list[int], records: Mapping[int, InFlight], batch_size: int | None) -> list[AcquiredRange]:
    """Consecutive acquired offsets with one delivery count, at most ``batch_size`` each
    (an offset without a record is of a run just made: a first delivery)."""
    out: list[AcquiredRange] = []
    first = last = count = -1
    for offset in offsets:
        rec = records.get(offset)
        c = 1 if rec is None else rec.delivery_count
        if first >= 0 and last + 1 == offset and c == count and (batch_size is None or offset - first < batch_size):
            last = offset
            continue
        if first >= 0:
            out.append(AcquiredRange(first, last, count))
        first = last = offset
        count = c
    if first >= 0:
        out.append(AcquiredRange(first, last, count))
    return out


def initial_start_offset(settings: ShareGroupSettings, log_start: int, log_end: int,
                         offset_for_timestamp: Callable[[int], int | None], now_ms: int) -> int:
    """The first SPSO of a new share-partition (``share.auto.offset.reset``).
    ``offset_for_timestamp(ts)`` is the first offset with a timestamp >= ts, None if none."""
    reset = settings.auto_offset_reset
    if reset.strategy == "earliest":
        return log_start
    if reset.strategy == "latest":
        return log_end
    found = offset_for_timestamp(now_ms - reset.duration_ms)
    return log_end if found is None else max(found, log_start)
