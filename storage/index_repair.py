"""Rebuilding damaged consume-queue entries from the commitlog while the store serves.

A read that meets an entry which does not point at its batch (``PartitionLog._checked``)
refuses it (CorruptIndexError: the client gets KAFKA_STORAGE_ERROR, which Kafka clients
retry) and asks the store for an ``IndexRepair`` of that offset. The repair:

1. finds the run of damaged entries around the offset: it walks back and then forward to
   the nearest good entry, one that points at a batch of this partition holding its offset
   (checked as a read checks it) or a LOST entry (see storage.consume_queue); without one
   below, the run starts at the log start offset, without one above it ends at the log end
   offset as the repair began;
2. reads the commitlog from the batch of the good entry below (or the commitlog start) to
   the batch of the good entry above (or the commitlog end) and takes this partition's
   batches from it;
3. rewrites the entry of every offset in the run: the batch's position and size and the
   code recovery would give it (``codes_of``); an offset no batch holds (the commitlog is
   damaged there too, and the damaged range is logged) gets a LOST entry, as recovery gives
   it.

``steps`` does the work in slices (``slice_entries`` commitlog entries or queue entries
walked) and yields between them so that the caller can let other work run. Nothing is held
across a pause that the store may change meanwhile: the commitlog scan resumes from a
position (retention may delete a segment in between), appends only add offsets above the
run, and entries in queue files retention deleted meanwhile are skipped (rewrite). The
caller must stop calling ``steps`` when the partition itself goes (its topic deleted).

Crash behaviour: the rewritten entries are dirty queue pages like any append's, made durable
by the next checkpoint; a crash before it leaves the damaged entries, which the next read
that meets them repairs again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from . import record_batch
from .commitlog import ENTRY_HEADER_SIZE, CommitLog, Damage
from .consume_queue import ENTRY, ENTRY_SIZE, LOST_CODE
from .partition_log import PartitionLog

log = logging.getLogger(__name__)

CodesOf = Callable[[bytes], "list[int] | None"]


@dataclass(frozen=True, slots=True)
class _Bound:
    """A good entry next to the damaged run: its offset and the commitlog position the scan
    starts or stops at (its batch's entry, or where the damage of a LOST entry starts)."""

    offset: int
    position: int


@dataclass(slots=True)
class IndexRepair:
    plog: PartitionLog
    commitlog: CommitLog
    damaged_offset: int
    codes_of: CodesOf  # consume-queue codes of a batch of this partition (None: all 0)
    slice_entries: int = 4096
    first: int = -1  # the run rewritten: [first, stop), known after the walk
    stop: int = -1
    lost: list[tuple[int, int]] = field(default_factory=list)  # offsets no batch holds
    damage: list[Damage] = field(default_factory=list)  # commitlog ranges the scan skipped
    _verified: dict[tuple[int, int], tuple[int, int] | None] = field(default_factory=dict)

    def steps(self) -> Iterator[None]:
        below = yield from self._walk(-1)
        above = yield from self._walk(+1)
        queue = self.plog.consume_queue
        self.first = max(self.plog.log_start_offset, queue.min_offset) if below is None else below.offset + 1
        self.stop = queue.next_offset if above is None else above.offset
        if self.first >= self.stop:
            return  # nothing damaged is left (another repair, or retention, got there first)
        scan_from = self.commitlog.start_position if below is None else below.position
        scan_to = self.commitlog.end_position if above is None else above.position
        yield from self._rewrite(scan_from, scan_to)

    # -- finding the damaged run -------------------------------------------------------------
    def _walk(self, step: int) -> Iterator[None]:
        """The nearest good entry below (``step`` -1) or above (+1) the damaged offset."""
        queue = self.plog.consume_queue
        low = max(self.plog.log_start_offset, queue.min_offset)
        offset = self.damaged_offset + step
        while low <= offset < queue.next_offset:
            start = offset if step > 0 else max(low, offset - self.slice_entries + 1,
                                                 offset - offset % queue.entries_per_file)
            raw = queue.entries(start, self.slice_entries if step > 0 else offset - start + 1)
            count = len(raw) // ENTRY_SIZE
            order = range(count) if step > 0 else range(count - 1, -1, -1)
            for i in order:
                position, size, code = ENTRY.unpack_from(raw, i * ENTRY_SIZE)
                bound = self._good(start + i, position, size, code)
                if bound is not None:
                    return bound
            offset = start + count if step > 0 else start - 1
            yield
        return None

    def _good(self, offset: int, position: int, size: int, code: int) -> _Bound | None:
        if code == LOST_CODE:
            return _Bound(offset, position) if size == 0 else None
        key = (position, size)
        if key not in self._verified:
            batch = self.commitlog.read_checked(position, size, self.plog.topic_id, self.plog.partition)
            self._verified[key] = None if batch is None else (
                record_batch.base_offset_of(batch), record_batch.next_offset_of(batch))
        span = self._verified[key]
        if span is None or not span[0] <= offset < span[1]:
            return None
        return _Bound(offset, position - ENTRY_HEADER_SIZE)

    # -- rebuilding it ---------------------------------------------------------------------
    def _rewrite(self, scan_from: int, scan_to: int) -> Iterator[None]:
        expected = self.first  # the next offset of the run to rewrite
        position = scan_from
        done = False
        while not done:
            entries: list[bytes] = []
            at = expected
            seen = 0
            done = True
            for item in self.commitlog.scan(position):
                if isinstance(item, Damage):
                    self.damage.append(item)
                    position = item.end
                    continue
                if item.position - ENTRY_HEADER_SIZE > scan_to:
                    break
                position = item.end_position
                if item.topic_id == self.plog.topic_id and item.partition == self.plog.partition:
                    expected = self._add(item.position, item.batch, expected, entries)
                    if expected >= self.stop:
                        break
                seen += 1
                if seen >= self.slice_entries:
                    done = False
                    break
            if done and expected < self.stop:  # held by no batch left in the commitlog
                expected = self._lose(expected, self.stop, position, entries)
            if entries:
                self.plog.consume_queue.rewrite(at, b"".join(entries))
            if not done:
                yield

    def _add(self, position: int, batch: bytes, expected: int, entries: list[bytes]) -> int:
        """Entries for the offsets of ``batch`` in the run; returns the next one expected."""
        base, end = record_batch.base_offset_of(batch), record_batch.next_offset_of(batch)
        if end <= expected or base >= self.stop:
            return expected  # before the run, or past it
        if base > expected:
            expected = self._lose(expected, base, position, entries)
        # (base < expected: the good batch below, whose later offsets are in the run)
        codes = self.codes_of(batch)
        size = len(batch)
        for offset in range(expected, min(end, self.stop)):
            entries.append(ENTRY.pack(position, size, 0 if codes is None else codes[offset - base]))
        return min(end, self.stop)

    def _lose(self, first: int, end: int, position: int, entries: list[bytes]) -> int:
        self.lost.append((first, end))
        entries.append(ENTRY.pack(position, 0, LOST_CODE) * (end - first))
        return end
