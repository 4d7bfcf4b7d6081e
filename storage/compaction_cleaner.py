"""What one cleaning of a compacted partition does, with Kafka's rules (LogCleanerManager,
Cleaner): which part of the partition it covers, and the compacted file it writes to the
compaction store (storage.compaction_store). storage.log_cleaner runs cleanings.

A partition's segments. The commitlog's segments hold every partition, so a compacted
partition's "segments" are defined over its own batches, the way Kafka rolls a log: from
the first offset not yet cleaned (the "first dirty offset"), a segment takes batches until
the next one would bring it past ``segment.bytes``, or carries a timestamp more than
``segment.ms`` (for a compacted topic: the smaller of it and ``max.compaction.lag.ms``, as
Kafka's LogConfig) after the segment's first batch's; then the next segment starts. The
last segment is the active one and is never cleaned (so the newest batch is always kept,
as in Kafka, where a roll only happens on an append). These boundaries follow from the
batches alone: nothing about them is stored.

What a cleaning covers ("cleanable"): the dirty batches from the first dirty offset up to
the first of: the active segment, the first segment holding a timestamp newer than
``now - min.compaction.lag.ms``, the last stable offset (an open transaction), the first
batch the commitlog has not fsynced yet (an OS crash could take it back while the fsynced
compaction store kept its offsets), and the point where the key map is full. It runs when dirty bytes / (clean + dirty bytes) reaches
``min.cleanable.dirty.ratio``, or the first dirty batch is older than
``max.compaction.lag.ms``.

A cleaning, in a worker thread with its own file descriptors (so it never holds the event
loop): pass 1 maps each key of the cleanable range to its latest offset (aborted
transactional batches and control batches left out); pass 2 reads the compacted file and
then the cleanable range in offset order and writes a new compacted file keeping

* a record if its key maps to it or to an older offset (its key is not in the range), and
  it is not a tombstone first seen by a cleaning more than ``delete.retention.ms`` ago;
  records without a key are dropped, as Kafka's cleaner drops them;
* no batch of an aborted transaction;
* an end-transaction marker, until its transaction has no record left and
  ``delete.retention.ms`` passed since a cleaning first saw it;
* every other batch as stored; a batch with some records removed is rebuilt keeping its
  base offset, last offset delta, producer fields and codec (batch_builder.subset_batch);
  a batch left with no record goes.

When a tombstone or marker was first seen is kept per range of offsets in the compacted
file ("epochs"), not in the batch as Kafka's delete horizon is: records are then copied
byte for byte. Then, on the loop, the new file is switched in atomically and the partition
serves its cleaned offsets from it. A batch kept empty as the last of its producer (Kafka
keeps one for the producer's sequence state) is not kept: the broker's producer state comes
from its own checkpoint, not from the log.

Bounds: the key map holds at most ``dedupe_buffer_bytes / KEY_MAP_ENTRY_BYTES`` keys
(memory is bounded whatever the keys); a key longer than 16 bytes is mapped by a 128-bit
BLAKE2b digest, as Kafka's map keeps an MD5 digest. A cleaning looks at no more than
MAX_SCAN_BATCHES dirty batches. Past either bound the partition is cleaned in steps.
Closing the store stops a cleaning at its next batch and discards its file.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

from . import record_batch
from .batch_builder import subset_batch
from .commitlog import ENTRY_HEADER, ENTRY_HEADER_SIZE
from .compaction_store import CompactedLog, CompactedWriter, batches_from, merge_epochs
from .consume_queue import ENTRY_SIZE, batch_runs
from .recompress import NONE, Compression, records_region
from .record_batch import CONTROL_BIT, TRANSACTIONAL_BIT
from .record_layout import record_ends
from .txn_index import end_marker

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
# What one key costs in the map: a bytes object of at most 17 bytes (~50), an int offset
# (~32) and its dict slot, with the dict's spare room; bench/cleaner.py measured the broker's
# RSS growing by 169 MiB while a cleaning mapped 1,000,000 keys.
KEY_MAP_ENTRY_BYTES = 176
_QUEUE_CHUNK = 65536  # consume-queue entries read at a time
# Dirty batches one cleaning looks at, at most (their count is the producers' choice): a
# partition with more is cleaned in steps.
MAX_SCAN_BATCHES = 250_000
_SHORT_KEY = 16


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """One compacted topic's cleaning rules (Kafka's topic configs of the same names)."""

    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    segment_ms: int = 604_800_000
    segment_bytes: int = 1 << 30

    @property
    def roll_ms(self) -> int:
        return min(self.segment_ms, self.max_compaction_lag_ms)


@dataclass(frozen=True, slots=True)
class DirtyBatch:
    """One batch of the dirty range as the consume queue names it: offsets (logical)
    ``base`` up to ``nxt`` (exclusive; ``base`` is the first dirty offset when the range
    starts inside the batch); ``position`` (bytes) of the batch in the commitlog and its
    ``size`` in bytes; its largest record timestamp (ms)."""

    base: int
    nxt: int
    position: int
    size: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class Plan:
    """What a cleaning would cover: dirty batches ``[0, count)`` of the scan, ending at
    ``cleanable_end``; ``dirty_ratio`` as Kafka computes it; ``must``: the first dirty batch
    is older than ``max.compaction.lag.ms``."""

    count: int
    cleanable_end: int
    dirty_bytes: int
    dirty_ratio: float
    must: bool

    def worth(self, settings: CompactionSettings) -> bool:
        return self.count > 0 and (self.must or self.dirty_ratio >= settings.min_cleanable_dirty_ratio)


def plan(batches: list[DirtyBatch], first_dirty: int, stable_end: int, clean_bytes: int,
         settings: CompactionSettings, now_ms: int, *, to_the_end: bool = True,
         durable_position: int | None = None) -> Plan:
    """The cleanable part of ``batches`` (the dirty batches in offset order; see the module
    docstring for the rules). ``to_the_end``: they reach the log end, so their last segment
    is the active one; otherwise (a scan cut at MAX_SCAN_BATCHES) every one may be cleaned.
    ``durable_position``: the commitlog is fsynced below it; a batch not wholly below it is
    not cleaned (an OS crash could take it back from the commitlog while the compaction
    store, fsynced, kept its offsets)."""
    segments: list[int] = []  # index of each segment's first batch
    seg_bytes = 0
    seg_first_ts = -1
    newest: list[int] = []  # each segment's largest timestamp
    for i, b in enumerate(batches):
        roll = not segments or seg_bytes + b.size > settings.segment_bytes or (
            seg_first_ts >= 0 and b.max_timestamp >= 0 and b.max_timestamp - seg_first_ts > settings.roll_ms)
        if roll:
            segments.append(i)
            newest.append(b.max_timestamp)
            seg_bytes, seg_first_ts = 0, b.max_timestamp
        seg_bytes += b.size
        newest[-1] = max(newest[-1], b.max_timestamp)
    count = (segments[-1] if segments else 0) if to_the_end else len(batches)  # the active one never
    for start, ts in zip(segments, newest):
        if start < count and ts > now_ms - settings.min_compaction_lag_ms:
            count = start
            break
    while count and batches[count - 1].nxt > stable_end:  # an open transaction: stop before it
        count -= 1
    while count and durable_position is not None and \
            batches[count - 1].position + batches[count - 1].size > durable_position:
        count -= 1
    dirty = sum(b.size for b in batches[:count])
    ratio = dirty / (clean_bytes + dirty) if dirty else 0.0
    must = bool(count) and 0 <= batches[0].max_timestamp < now_ms - settings.max_compaction_lag_ms
    end = batches[count].base if count < len(batches) else (batches[-1].nxt if batches else first_dirty)
    return Plan(count, end if count else first_dirty, dirty, ratio, must)


class KeyMap:
    """Key -> latest offset for the keys of a cleanable range, at most ``capacity`` keys."""

    __slots__ = ("_map", "capacity")

    def __init__(self, capacity: int) -> None:
        self._map: dict[bytes, int] = {}
        self.capacity = capacity

    @staticmethod
    def digest(key: bytes) -> bytes:
        # short keys stand for themselves (exact); longer ones by a 17-byte value no short
        # key can equal
        if len(key) <= _SHORT_KEY:
            return key
        return b"\xff" + hashlib.blake2b(key, digest_size=16).digest()

    def __len__(self) -> int:
        return len(self._map)

    def room_for(self, count: int) -> bool:
        return len(self._map) + count <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        self._map[self.digest(key)] = offset

    def latest(self, key: bytes) -> int | None:
        return self._map.get(self.digest(key))

    def put_records(self, records: list) -> None:
        """``put`` of every keyed record (the loop inlined: it runs once per record)."""
        mapping = self._map
        for record in records:
            key = record.key
            if key is None:
                continue
            if len(key) > _SHORT_KEY:
                key = b"\xff" + hashlib.blake2b(key, digest_size=16).digest()
            mapping[key] = record.offset

    def superseded(self, records: list) -> list[bool]:
        """Per record: whether a later offset holds its key (a keyless one counts as
        superseded: the cleaner drops it)."""
        get = self._map.get
        out = []
        for record in records:
            key = record.key
            if key is None:
                out.append(True)
                continue
            if len(key) > _SHORT_KEY:
                key = b"\xff" + hashlib.blake2b(key, digest_size=16).digest()
            latest = get(key)
            out.append(latest is not None and record.offset < latest)
        return out


@dataclass(slots=True)
class CleanJob:
    """Everything a cleaning needs, taken on the loop; the thread touches nothing else."""

    topic_id: UUID
    partition: int
    queue_dir: Path
    entries_per_file: int
    segments: list[tuple[int, Path]]  # commitlog (base position, path)
    log_start: int
    first_dirty: int
    next_offset: int
    stable_end: int
    aborted: list[tuple[int, int, int]]  # (producer id, first offset, last offset)
    previous: CompactedLog | None
    settings: CompactionSettings
    now_ms: int
    map_capacity: int
    out_dir: Path
    force: bool = False  # clean whatever is cleanable, whatever the dirty ratio
    cancel: threading.Event | None = None  # set: stop at the next batch (the store closes)
    durable_position: int | None = None  # the commitlog is fsynced below it
    # dirty batches a previous pass found from ``first_dirty`` on (still valid: see
    # LogCleaner._known); the scan goes on from the last one's end
    known: list[DirtyBatch] = field(default_factory=list)


class CleaningCancelled(Exception):
    """The store is closing: the cleaning stopped and its file was discarded."""


def _check(job: CleanJob) -> None:
    if job.cancel is not None and job.cancel.is_set():
        raise CleaningCancelled


@dataclass(slots=True)
class CleanResult:
    plan: Plan
    scanned: list[DirtyBatch]  # the dirty batches found (from the first dirty offset)
    writer: CompactedWriter | None = None  # None: nothing was cleaned
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    keys: int = 0


class _Reader:
    """The commitlog and consume-queue files, read through descriptors of its own (opened
    on first use, by the paths the job took on the loop: a file retention deletes meanwhile
    makes the cleaning fail with OSError, and it is tried again at a later pass)."""

    def __init__(self, job: CleanJob) -> None:
        self.job = job
        self._bases = [b for b, _ in job.segments]
        self._fds: dict[Path, int] = {}

    def _fd(self, path: Path) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY)
        return fd

    def dirty_batches(self) -> tuple[list[DirtyBatch], bool]:
        """The partition's batches from the first dirty offset to its end, in order, at
        most MAX_SCAN_BATCHES; and whether they reach the end. Those the job knows are
        taken as they are; the consume queue is read from the end of the last one."""
        limit = MAX_SCAN_BATCHES
        out = self.job.known[:limit]
        if len(out) == limit:
            return out, False
        start = out[-1].nxt if out else self.job.first_dirty
        for base, nxt, position, size in batch_runs(start, self._queue_chunks(start)):
            if size <= 0:
                continue  # lost offsets (no batch)
            if len(out) == limit:
                return out, False
            out.append(self._dirty(base, nxt, position, size))
        return out, True

    def _queue_chunks(self, offset: int) -> Iterator[bytes]:
        """The consume-queue entries from ``offset`` to the end, a chunk at a time."""
        job = self.job
        while offset < job.next_offset:
            _check(job)
            base = offset - offset % job.entries_per_file
            count = min(_QUEUE_CHUNK, job.next_offset - offset, base + job.entries_per_file - offset)
            data = os.pread(self._fd(job.queue_dir / f"{base:020d}.cq"), count * ENTRY_SIZE,
                            (offset - base) * ENTRY_SIZE)
            if len(data) != count * ENTRY_SIZE:
                raise OSError(f"{job.queue_dir}: consume queue shorter than its next offset")
            yield data
            offset += count

    def _dirty(self, base: int, nxt: int, position: int, size: int) -> DirtyBatch:
        head = self.read(position - ENTRY_HEADER_SIZE, ENTRY_HEADER_SIZE + record_batch.HEADER_SIZE)
        _, _, _, topic, partition = ENTRY_HEADER.unpack_from(head, 0)
        if topic != self.job.topic_id.bytes or partition != self.job.partition:
            raise OSError(f"consume-queue entry of offset {base} does not name this partition's batch")
        batch_base = record_batch.base_offset_of(head[ENTRY_HEADER_SIZE:])
        info = record_batch.read_info(head[ENTRY_HEADER_SIZE:])
        # A run of entries must name a whole batch (only the first run may start inside
        # one, at the first dirty offset): the loop re-pointing a moved batch's entries
        # while they are read shows its offsets as two runs, which would copy it twice.
        if batch_base + info.last_offset_delta + 1 != nxt or not (
                batch_base == base or batch_base < base == self.job.first_dirty):
            raise OSError(f"consume-queue entries of offsets {base}..{nxt - 1} name only part of the batch "
                          f"at commitlog position {position} (re-pointed meanwhile); tried again later")
        return DirtyBatch(base, nxt, position, size, info.max_timestamp)

    def read(self, position: int, size: int) -> bytes:
        index = bisect.bisect_right(self._bases, position) - 1
        if index < 0:
            raise OSError(f"commitlog position {position} was deleted")
        base, path = self.job.segments[index]
        data = os.pread(self._fd(path), size, position - base)
        if len(data) != size:
            raise OSError(f"{path}: short read at {position - base}")
        return data

    def batch(self, b: DirtyBatch) -> bytes:
        batch = self.read(b.position, b.size)
        if not record_batch.crc_ok(batch):
            raise OSError(f"batch at commitlog position {b.position} fails its CRC")
        return batch

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def run_job(job: CleanJob) -> CleanResult:
    """Plan and, when worth it (or ``force``), clean; runs in the cleaner thread."""
    reader = _Reader(job)
    try:
        batches, to_the_end = reader.dirty_batches()
        clean_bytes = job.previous.data_bytes if job.previous is not None else 0
        the_plan = plan(batches, job.first_dirty, job.stable_end, clean_bytes, job.settings, job.now_ms,
                        to_the_end=to_the_end, durable_position=job.durable_position)
        if not (the_plan.worth(job.settings) or (job.force and the_plan.count)):
            return CleanResult(the_plan, batches)
        return _clean(job, reader, batches, the_plan)
    finally:
        reader.close()


def _clean(job: CleanJob, reader: _Reader, scanned: list[DirtyBatch], the_plan: Plan) -> CleanResult:
    aborted = _Aborted(job.aborted)
    dirty = scanned[: the_plan.count]
    keys = KeyMap(job.map_capacity)
    mapped = 0
    for b in dirty:  # pass 1
        _check(job)
        batch = reader.batch(b)
        attrs = batch[22]
        if attrs & CONTROL_BIT:
            mapped += 1
            continue
        producer_id = _producer_id(batch)
        if attrs & TRANSACTIONAL_BIT and aborted.holds(producer_id, b.base):
            mapped += 1
            continue
        records = record_batch.read_records(batch)
        if mapped and not keys.room_for(len(records)):
            break  # the map is full: clean up to here
        keys.put_records(records)
        mapped += 1
    dirty = dirty[:mapped]
    end = dirty[-1].nxt if dirty else job.first_dirty
    if mapped < the_plan.count:
        the_plan = Plan(mapped, end, sum(b.size for b in dirty), the_plan.dirty_ratio, the_plan.must)
    epochs = list(job.previous.epochs) if job.previous is not None else []
    new_epochs = merge_epochs(epochs + [(end, job.now_ms)], job.log_start)
    writer = CompactedWriter(job.out_dir, end, new_epochs)
    result = CleanResult(the_plan, scanned, writer, keys=len(keys))
    try:
        pass2 = _Filter(job, keys, aborted, epochs, result)
        for batch in _sources(job, reader, dirty):
            _check(job)
            result.bytes_read += len(batch)
            kept = pass2.filter(batch)
            if kept is not None:
                writer.add(kept)
        writer.finish()
    except BaseException:
        writer.discard()
        raise
    result.bytes_written = writer.written
    return result


def _sources(job: CleanJob, reader: _Reader, dirty: list[DirtyBatch]) -> Iterator[bytes]:
    """The compacted file's batches at or above the log start, then the cleanable ones."""
    previous = job.previous
    if previous is not None:
        fd = os.open(previous.path, os.O_RDONLY)  # its own: the loop may close the served one
        try:
            yield from batches_from(fd, previous.path, previous.index, job.log_start)
        finally:
            os.close(fd)
    for b in dirty:
        yield reader.batch(b)


def _producer_id(batch: bytes) -> int:
    return struct.unpack_from(">q", batch, 43)[0]


class _Aborted:
    """Which transactional batches belong to an aborted transaction: per producer, its
    aborted ranges [first, last] from the txnindex."""

    def __init__(self, ranges: list[tuple[int, int, int]]) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = {}
        for pid, first, last in ranges:
            self._by_pid.setdefault(pid, []).append((first, last))
        for spans in self._by_pid.values():
            spans.sort()

    def holds(self, producer_id: int, offset: int) -> bool:
        spans = self._by_pid.get(producer_id)
        if not spans:
            return False
        i = bisect.bisect_right(spans, (offset, LONG_MAX)) - 1
        return i >= 0 and spans[i][0] <= offset <= spans[i][1]


class _Filter:
    """Pass 2's rules for one batch (see the module docstring). ``epochs``: the previous
    file's; an offset not in them is seen for the first time now."""

    def __init__(self, job: CleanJob, keys: KeyMap, aborted: _Aborted, epochs: list[tuple[int, int]],
                 result: CleanResult) -> None:
        self.job = job
        self.keys = keys
        self.aborted = aborted
        self._ends = [end for end, _ in epochs]
        self._seen = [seen for _, seen in epochs]
        self.result = result
        # producer id -> whether its open transaction (in scan order) kept a record
        self._txn_kept: dict[int, bool] = {}

    def _expired(self, offset: int) -> bool:
        """Whether a tombstone or marker at ``offset`` was first seen more than
        delete.retention.ms ago."""
        i = bisect.bisect_right(self._ends, offset)
        if i >= len(self._ends):
            return False
        return self._seen[i] + self.job.settings.delete_retention_ms <= self.job.now_ms

    def filter(self, batch: bytes) -> bytes | None:
        if record_batch.next_offset_of(batch) <= self.job.log_start:
            return None
        attrs = batch[22]
        producer_id = _producer_id(batch)
        base = record_batch.base_offset_of(batch)
        if attrs & CONTROL_BIT:
            marker = end_marker(batch) if attrs & TRANSACTIONAL_BIT else None
            if marker is None:
                return batch
            had_records = self._txn_kept.pop(producer_id, False)
            if not had_records and self._expired(base):
                return None
            return batch
        transactional = bool(attrs & TRANSACTIONAL_BIT)
        if transactional and self.aborted.holds(producer_id, base):
            return None
        records = record_batch.read_records(batch)
        if not records:  # every record parked elsewhere on append: nothing to keep
            return None
        self.result.records_read += len(records)
        keep = [i for i, gone in enumerate(self.keys.superseded(records))
                if not gone and not (records[i].value is None and self._expired(records[i].offset))]
        self.result.records_kept += len(keep)
        if transactional:
            self._txn_kept[producer_id] = self._txn_kept.get(producer_id, False) or bool(keep)
        if len(keep) == len(records):
            return batch
        if not keep:
            return None
        region = bytes(records_region(batch))
        codec = attrs & 0x07
        return subset_batch(batch, region, record_ends(region), keep,
                            None if codec == NONE else Compression(codec))


__all__ = ["CleanJob", "CleanResult", "CompactionSettings", "KeyMap", "plan", "run_job"]
