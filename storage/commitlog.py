"""The commitlog: every record batch of every partition, in append order, in one file chain.

On-disk format
--------------
Segment files ``commitlog/<first position, 20 digits>.log``; a segment's name is the global
byte position of its first byte, so positions are contiguous across segments and ``ls`` sorts
them. Each entry is::

    0   entry_size   int32   bytes of the whole entry, this field included
    4   magic        int32   ENTRY_MAGIC
    8   header_crc   uint32  CRC32C of bytes [12, 49): topic id, partition and the batch's
                             base offset, length, leader epoch and magic (the batch CRC
                             covers the rest of the batch)
    12  topic_id     16 bytes (UUID)
    28  partition    int32
    32  batch        a Kafka v2 record batch exactly as stored (see record_batch)

Invariants: entries never span segments; only the last (active) segment is written; a batch
is found by (position of its first byte, its size) which is what consume queues record.

Crash behaviour: appends are written with pwrite at the end position, so a crash can leave at
most one torn entry at the tail of the active segment. ``recover`` re-validates entries from
a given position (length, magic, header CRC, batch CRC32C). An invalid entry with no valid
one after it in the last segment is a torn tail: the file is cut back there. Anything else
invalid is damage (a disk error, a file cut short or overwritten while the broker was
stopped), and a segment followed by later segments is never cut or deleted for it: the
scan resyncs at the next valid entry of the same segment (found by its magic, then every
check above: random bytes pass a header CRC and a batch CRC by chance no more often than
corruption goes undetected; only bytes a producer shaped into a whole valid entry inside
a record of the damaged batch could be taken for one), else at the next segment's first
byte, and reports the skipped byte range
(``Damage``) so the store can tell which offsets were lost. A segment that ends short of
the next segment's base (cut while stopped) is damage from its end to that base
(``gaps`` finds such a segment without reading it). Nothing else on disk is trusted more
than this file.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from crc32c import crc32c

from . import record_batch
from .errors import SyncFailedError
from .files import fsync_path, pwrite_all
from .record_batch import Buffer

log = logging.getLogger(__name__)

ENTRY_MAGIC = 0x524D4B31  # "RMK1"
ENTRY_HEADER = struct.Struct(">iiI16si")
ENTRY_HEADER_SIZE = ENTRY_HEADER.size  # 32
_HEADER_CRC_END = ENTRY_HEADER_SIZE + 17  # through the batch's magic byte
_READ_APART_BYTES = 32 << 10  # read_checked: from this batch size on, the batch is read on its own
_MIN_ENTRY = ENTRY_HEADER_SIZE + record_batch.HEADER_SIZE
_SUFFIX = ".log"
_MAGIC_BYTES = struct.pack(">i", ENTRY_MAGIC)
_RESYNC_CHUNK = 1 << 20  # bytes read at a time while looking for the next entry
# a batch's head up to its last offset delta: base offset, length, epoch, magic, crc, attributes
_BATCH_HEAD = struct.Struct(">qiibIhi")
_HEAD_BYTES = ENTRY_HEADER_SIZE + _BATCH_HEAD.size


def _segment_name(base_position: int) -> str:
    return f"{base_position:020d}{_SUFFIX}"


@dataclass(slots=True)
class Segment:
    base_position: int
    path: Path
    fd: int
    size: int

    @property
    def end_position(self) -> int:
        return self.base_position + self.size

    def mtime_ms(self) -> float:
        """When the file was last written (the broker's segment retention rule)."""
        return os.fstat(self.fd).st_mtime * 1000


@dataclass(frozen=True, slots=True)
class Entry:
    """One validated commitlog entry, as recovery and re-dispatch see it."""

    position: int  # of the batch (not of the entry header)
    topic_id: UUID
    partition: int
    batch: bytes

    @property
    def end_position(self) -> int:
        return self.position + len(self.batch)


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes [start, end) of the commitlog (global positions) that hold no valid entry and
    were skipped by recovery: ``segment`` is the file that holds (or should hold) them."""

    segment: Path
    segment_base: int
    start: int
    end: int

    def describe(self) -> str:
        return (f"{self.segment} bytes {self.start - self.segment_base}..{self.end - self.segment_base} "
                f"(commitlog positions {self.start}..{self.end}, {self.end - self.start} bytes)")


@dataclass(frozen=True, slots=True)
class EntryHead:
    """Where one entry's batch is and which offsets it spans (``CommitLog.heads``)."""

    position: int  # of the batch
    topic_id: UUID
    partition: int
    base_offset: int
    last_offset_delta: int
    size: int  # of the batch


class DamagedSegmentError(Exception):
    """``CommitLog.heads`` met bytes that are not an entry header at ``position``."""

    def __init__(self, position: int) -> None:
        super().__init__(f"no entry header at commitlog position {position}")
        self.position = position


def encode_entry_header(topic_id: UUID, partition: int, batch_size: int, batch_head: bytes) -> bytes:
    """The 32-byte entry header; ``batch_head`` is the batch's first 17 bytes as stored."""
    head = bytearray(
        ENTRY_HEADER.pack(ENTRY_HEADER_SIZE + batch_size, ENTRY_MAGIC, 0, topic_id.bytes, partition)
    )
    struct.pack_into(">I", head, 8, crc32c(bytes(head[12:]) + batch_head))
    return bytes(head)


class CommitLog:
    """Append-only chain of segment files holding all batches; see the module docstring."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self._dir = directory
        self._segment_bytes = segment_bytes
        self._dir.mkdir(parents=True, exist_ok=True)
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        for path in sorted(self._dir.glob("*" + _SUFFIX)):
            base = int(path.name[: -len(_SUFFIX)])
            fd = os.open(path, os.O_RDWR)
            self._segments.append(Segment(base, path, fd, os.fstat(fd).st_size))
        if not self._segments:
            self._segments.append(self._create_segment(0))
        self._bases = [s.base_position for s in self._segments]
        # Closed segments were fdatasynced when rolled, but after a process crash the active
        # segment's tail may exist only in the page cache: the first flush must cover it.
        self._unflushed_from = self._segments[-1].base_position

    # -- positions -------------------------------------------------------------------------
    @property
    def start_position(self) -> int:
        return self._segments[0].base_position

    @property
    def end_position(self) -> int:
        return self._segments[-1].end_position

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    def size_bytes(self) -> int:
        return self.end_position - self.start_position

    # -- writing ---------------------------------------------------------------------------
    def append(self, topic_id: UUID, partition: int, batch_parts: list[Buffer]) -> int:
        """Append one entry whose batch is the concatenation of ``batch_parts``.

        Taking the batch in parts lets the caller patch the base offset without copying the
        batch (the first part must hold at least the batch's first 17 bytes). Returns the
        position of the batch's first byte.
        """
        batch_size = sum(len(p) for p in batch_parts)
        head = encode_entry_header(topic_id, partition, batch_size, bytes(batch_parts[0][:17]))
        entry_size = len(head) + batch_size
        active = self._segments[-1]
        if active.size > 0 and active.size + entry_size > self._segment_bytes:
            active = self._roll()
        try:
            self._write_all(active.fd, [head, *batch_parts], active.size)
        except OSError:
            # Disk full or an I/O error: take back the part that was written, so the file
            # ends where the log does (the entry never happened).
            try:
                os.ftruncate(active.fd, active.size)
            except OSError:
                log.exception("%s: could not cut a failed append back to %d bytes", active.path, active.size)
            raise
        position = active.end_position + len(head)
        active.size += entry_size
        return position

    @staticmethod
    def _write_all(fd: int, parts: list[Buffer], at: int) -> None:
        written = os.pwritev(fd, parts, at)
        total = sum(len(p) for p in parts)
        if written < total:  # rare short write: finish the rest plainly
            pwrite_all(fd, memoryview(b"".join(bytes(p) for p in parts))[written:], at + written)

    def _create_segment(self, base_position: int) -> Segment:
        path = self._dir / _segment_name(base_position)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        return Segment(base_position, path, fd, os.fstat(fd).st_size)

    def _roll(self) -> Segment:
        """Start the next segment: the full one is fdatasynced first (a closed segment is
        complete on disk), the new one's directory entry is fsynced before anything is
        written to it. A failed sync raises SyncFailedError (fatal: see its docstring); a
        segment that could not be created (a full disk) raises OSError and nothing changes."""
        old = self._segments[-1]
        try:
            os.fdatasync(old.fd)
        except OSError as exc:
            raise SyncFailedError(exc.errno, f"fdatasync of {old.path} failed: {exc.strerror}") from exc
        segment = self._create_segment(old.end_position)
        try:
            fsync_path(self._dir)
        except OSError as exc:
            os.close(segment.fd)
            raise SyncFailedError(exc.errno, f"fsync of {self._dir} failed: {exc.strerror}") from exc
        self._segments.append(segment)
        self._bases.append(segment.base_position)
        return segment

    def unflushed(self) -> tuple[list[int], int]:
        """(file descriptors to fdatasync, end position they cover); call on the owning thread."""
        end = self.end_position
        fds = [s.fd for s in self._segments if s.end_position > self._unflushed_from]
        return fds, end

    def mark_flushed(self, end_position: int) -> None:
        self._unflushed_from = max(self._unflushed_from, end_position)

    def flush(self) -> int:
        """fdatasync everything appended; returns the position below which all is durable."""
        fds, end = self.unflushed()
        for fd in fds:
            os.fdatasync(fd)
        self.mark_flushed(end)
        return end

    # -- reading ---------------------------------------------------------------------------
    def read_checked(self, position: int, size: int, topic_id: UUID, partition: int) -> bytes | None:
        """The batch at ``position`` of ``size`` bytes, or None unless its entry header says
        exactly that (the entry's length, magic and CRC, topic id and partition: what a
        damaged index entry pointing elsewhere would contradict) and the batch's CRC32C
        holds (bytes damaged inside it)."""
        if (size < record_batch.HEADER_SIZE or position - ENTRY_HEADER_SIZE < self.start_position
                or position + size > self.end_position):
            return None
        # A large batch is read on its own after its entry header: slicing it off one read
        # would copy it again (py-spy: a third of the broker's samples under a consume load
        # of 1 KiB records); a small one costs less as one read than as two system calls.
        apart = size >= _READ_APART_BYTES
        first = ENTRY_HEADER_SIZE + (record_batch.HEADER_SIZE if apart else size)  # the CRC covers the magic
        data = self.read(position - ENTRY_HEADER_SIZE, first)
        if len(data) != first:
            return None
        length, magic, crc, entry_topic, entry_partition = ENTRY_HEADER.unpack_from(data, 0)
        if (length != ENTRY_HEADER_SIZE + size or magic != ENTRY_MAGIC or entry_topic != topic_id.bytes
                or entry_partition != partition or crc32c(data[12:_HEADER_CRC_END]) != crc):
            return None
        batch = self.read(position, size) if apart else data[ENTRY_HEADER_SIZE:]
        return batch if len(batch) == size and record_batch.crc_ok(batch) else None

    def read(self, position: int, size: int) -> bytes:
        index = bisect.bisect_right(self._bases, position) - 1
        if index < 0:
            raise ValueError(f"position {position} precedes the commitlog start")
        segment = self._segments[index]
        return os.pread(segment.fd, size, position - segment.base_position)

    def entries(self, from_position: int) -> Iterator[Entry]:
        """Validated entries from an entry boundary on, skipping damage as ``recover`` does;
        stops at a torn tail."""
        for item in self.scan(from_position):
            if isinstance(item, Entry):
                yield item

    def scan(self, from_position: int) -> Iterator[Entry | Damage]:
        """``entries``, with each damaged range skipped reported in its place."""
        for item, _ in self._scan(from_position):
            if item is None:
                return
            yield item

    def gaps(self) -> list[Damage]:
        """Segments (all but the last) that end short of the next segment's base: bytes
        lost while the broker was stopped, found from file sizes alone."""
        return [self._gap(s, n.base_position) for s, n in zip(self._segments, self._segments[1:])
                if s.end_position < n.base_position]

    @staticmethod
    def _gap(segment: Segment, next_base: int) -> Damage:
        return Damage(segment.path, segment.base_position, segment.end_position, next_base)

    def _scan(self, from_position: int) -> Iterator[tuple[Entry | Damage | None, int]]:
        """(entry, its start) for each valid entry; (Damage, its start) for each skipped
        range; (None, where) once, at a torn tail of the last segment."""
        index = max(0, bisect.bisect_right(self._bases, from_position) - 1)
        position = max(from_position, self._segments[index].base_position)
        while index < len(self._segments):
            segment = self._segments[index]
            last = index == len(self._segments) - 1
            next_base = None if last else self._segments[index + 1].base_position
            local = position - segment.base_position
            skipped_to_next = False  # a damage already reported up to the next segment
            while local < segment.size:
                entry = self._read_entry(segment, local)
                if entry is not None:
                    yield entry, segment.base_position + local
                    local += ENTRY_HEADER_SIZE + len(entry.batch)
                    continue
                resume = self._resync(segment, local + 1)
                if resume is None and next_base is None:
                    yield None, segment.base_position + local  # a torn tail
                    return
                end = next_base if resume is None else segment.base_position + resume
                assert end is not None
                yield Damage(segment.path, segment.base_position, segment.base_position + local, end), \
                    segment.base_position + local
                local = segment.size if resume is None else resume
                skipped_to_next = resume is None
            if next_base is not None and not skipped_to_next and segment.end_position < next_base:
                yield self._gap(segment, next_base), segment.end_position
            index += 1
            if next_base is not None:
                position = next_base

    def _resync(self, segment: Segment, local: int) -> int | None:
        """The first position at or after ``local`` in ``segment`` where a valid entry
        starts, or None: candidates are found by the entry magic (fast, in C), then checked
        in full. The segment is read with pread, a chunk at a time, never mapped: a damaged
        disk then fails the read with EIO (an OSError), where a mapping would end the
        process with SIGBUS."""
        if local + _MIN_ENTRY > segment.size:
            return None
        at = local + 4  # where the magic of an entry at ``local + 1`` or later can start
        while at < segment.size:
            chunk = os.pread(segment.fd, min(_RESYNC_CHUNK, segment.size - at), at)
            found = chunk.find(_MAGIC_BYTES)
            while found >= 0:
                if self._read_entry(segment, at + found - 4) is not None:
                    return at + found - 4
                found = chunk.find(_MAGIC_BYTES, found + 1)
            if len(chunk) < _RESYNC_CHUNK:
                return None
            at += len(chunk) - (len(_MAGIC_BYTES) - 1)  # a magic across the chunk's end is found next
        return None

    def _read_entry(self, segment: Segment, local: int) -> Entry | None:
        remaining = segment.size - local
        if remaining < _MIN_ENTRY:
            return None
        head = os.pread(segment.fd, ENTRY_HEADER_SIZE, local)
        size, magic, header_crc, topic_bytes, partition = ENTRY_HEADER.unpack(head)
        if magic != ENTRY_MAGIC or size < _MIN_ENTRY or size > remaining:
            return None
        batch = os.pread(segment.fd, size - ENTRY_HEADER_SIZE, local + ENTRY_HEADER_SIZE)
        if crc32c(head[12:] + batch[:17]) != header_crc:
            return None
        (length,) = struct.unpack_from(">i", batch, 8)
        if length + record_batch.LOG_OVERHEAD != len(batch) or not record_batch.crc_ok(batch):
            return None
        return Entry(
            segment.base_position + local + ENTRY_HEADER_SIZE, UUID(bytes=topic_bytes), partition, batch
        )

    def heads(self, segment: Segment) -> Iterator[EntryHead]:
        """The entries of closed ``segment`` in order, from their headers alone (no CRC is
        checked: retention only asks the consume queues whether each batch is still the one
        they point at), read a chunk at a time. Raises DamagedSegmentError at the first
        header that does not chain (damage): the caller then treats the rest of the segment
        as unknown, never as dead."""
        local, chunk, at = 0, b"", 0  # ``chunk`` holds the segment's bytes from ``at``
        while local < segment.size:
            if local + _HEAD_BYTES > at + len(chunk):
                at = local
                chunk = os.pread(segment.fd, min(_RESYNC_CHUNK, segment.size - local), local)
            i = local - at
            if len(chunk) - i < _HEAD_BYTES:
                raise DamagedSegmentError(segment.base_position + local)
            length, magic, _, topic, partition = ENTRY_HEADER.unpack_from(chunk, i)
            if magic != ENTRY_MAGIC or length < _MIN_ENTRY or local + length > segment.size:
                raise DamagedSegmentError(segment.base_position + local)
            base, _, _, _, _, _, last_delta = _BATCH_HEAD.unpack_from(chunk, i + ENTRY_HEADER_SIZE)
            yield EntryHead(segment.base_position + local + ENTRY_HEADER_SIZE, UUID(bytes=topic), partition,
                            base, last_delta, length - ENTRY_HEADER_SIZE)
            local += length

    # -- recovery and retention ------------------------------------------------------------
    def recover(self, from_position: int, dispatch: Callable[[Entry], None],
                damaged: Callable[[Damage], None] | None = None) -> int:
        """Validate from ``from_position`` (an entry boundary) and truncate a torn tail.

        Every valid entry found is handed to ``dispatch`` in order, so derived structures
        can be rebuilt without holding the log in memory; every damaged range skipped goes
        to ``damaged`` (before the entries after it). Only the last segment is ever cut.
        Returns the valid end position.
        """
        end = max(from_position, self.start_position)
        for item, item_start in self._scan(end):
            if item is None:
                end = item_start
                break
            if isinstance(item, Damage):
                if damaged is not None:
                    damaged(item)
                end = item.end
                continue
            dispatch(item)
            end = item.end_position
        if end >= self._segments[-1].base_position:
            self.truncate(end)
        return end

    def truncate(self, end_position: int) -> None:
        """Drop every byte at or after ``end_position``."""
        while len(self._segments) > 1 and self._segments[-1].base_position >= end_position:
            segment = self._segments.pop()
            self._bases.pop()
            os.close(segment.fd)
            segment.path.unlink()
        active = self._segments[-1]
        keep = max(0, end_position - active.base_position)
        if keep < active.size:
            os.ftruncate(active.fd, keep)
            os.fsync(active.fd)
            active.size = keep
        self._unflushed_from = min(self._unflushed_from, self.end_position)

    def delete_oldest_segment(self) -> Segment | None:
        """Remove the oldest closed segment (never the active one); returns what it removed.
        The file goes first and the segment list after: a crash in between leaves the next
        segment as the first, which is what the list would say."""
        if len(self._segments) < 2:
            return None
        segment = self._segments[0]
        segment.path.unlink()
        self._segments.pop(0)
        self._bases.pop(0)
        os.close(segment.fd)
        return segment

    def close(self) -> None:
        for segment in self._segments:
            os.close(segment.fd)
        self._segments = []
