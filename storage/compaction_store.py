"""The compaction store: where a compacted partition keeps its cleaned offsets.

Why beside the commitlog, not rewritten into it. The commitlog is one chain shared by every
partition and the only source of truth that recovery replays in append order; batches
rewritten into it would come after newer batches of the same partition (offsets going
backwards in the replay) and could never free the segments they were copied from while
other partitions still use them. RocketMQ 5 keeps compaction topics in a CompactionStore
beside its commitlog for the same reasons. So a partition whose topic is compacted keeps
its cleaned prefix here, serves every offset below ``end_offset`` from here, and pins the
commitlog only from there on (``PartitionLog.commitlog_start_offset``).

On-disk format
--------------
Directory ``compaction/<topic id>-<partition>/`` holding one file ``<end offset, 20
digits>.clean``::

    0   magic          4 bytes  b"RMKC"
    4   version        int16    1
    6   end_offset     int64    every offset below it is served from this file
    14  epoch count    int32    n
    18  epochs         n x (end int64, first_seen_ms int64): tombstones and transaction
                       markers at offsets below ``end`` (and at or above the previous
                       epoch's end) were first seen by a cleaning at ``first_seen_ms``
    ..  header_crc     uint32   CRC32C of every header byte before it
    ..  batches        Kafka v2 record batches back to back, as clients receive them,
                       base offsets ascending, each ending at or below ``end_offset``
    ..  footer         (version 2) what ``open`` needs, so that it reads no batch:
        bases          n x int64 little-endian: the sparse index's base offsets
        positions      n x int64 little-endian: their byte positions (BatchIndex)
        count          int64    batches in the file
        data_end       int64    where the batches end (the footer starts)
        n              int32    index entries
        data_crc       uint32   CRC32C of the batches' bytes, [header end, data_end)
        magic          4 bytes  b"RMKF"
        footer_crc     uint32   CRC32C of every footer byte before it

Opening a version 2 file checks the header CRC, the footer's CRC, that the footer ends the
file exactly and that its index is ordered and inside the batches, and the batches' bytes
against ``data_crc`` (CRC32C in C: 0.07-0.16 s for a million 186-byte batches on this
machine, where walking and checking each batch in Python took 5.6-6.6 s; bench.compacted_open). So damage anywhere (header,
batches, index) is still found at open, at a fraction of the cost. A version 1 file (no
footer, written before) is still opened the old way, walking and checking every batch;
the next cleaning of its partition writes version 2.

A batch here is a stored batch with some records left out (storage.batch_builder's
subset_batch: base offset, last offset delta, producer fields and attributes kept) or a
stored batch as it was; offsets between batches were removed by cleaning (gaps every client
skips, as after Kafka's cleaner).

Invariants and crash safety: a file is complete or absent. A cleaning writes
``<end>.clean.tmp``, fsyncs it, renames it to ``<end>.clean``, fsyncs the directory and only
then removes the previous file; so after a kill at any point the directory holds the old
file, or the new one, or both (the newest complete one wins), plus perhaps a ``.tmp`` that
``open`` deletes: a cleaning is finished or discarded, never half applied. A cleaning that
fails (a full disk, an fsync or rename error) removes its own file, ``.tmp`` or renamed, and
the previous file goes on serving; it is tried again at a later pass. The commitlog
keeps everything at and above the end of the file in use, so nothing live is lost. A file
whose header, footer or batches do not check (damage on disk) is set aside as
``<name>.damaged`` and logged at ERROR; the partition then serves what the commitlog still
holds.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from . import record_batch
from .files import fsync_path

log = logging.getLogger(__name__)

MAGIC = b"RMKC"
VERSION = 2
VERSIONS = (1, 2)  # read; version 1 has no footer
FOOTER_MAGIC = b"RMKF"
_HEAD = struct.Struct(">4shqi")
_EPOCH = struct.Struct(">qq")
_CRC = struct.Struct(">I")
SUFFIX = ".clean"
TMP_SUFFIX = ".clean.tmp"
MAX_EPOCHS = 64  # tombstone epochs kept; older neighbours merge (a tombstone is then kept longer)
_READ_CHUNK = 1 << 20  # bytes read at a time when a file is opened (every batch checked)
_WALK_CHUNK = 64 << 10  # bytes read at a time by a lookup or a fetch
INDEX_INTERVAL_BYTES = 4096  # Kafka's index.interval.bytes default
_LENGTH = struct.Struct(">i")
_TRAILER = struct.Struct("<qqiI4sI")  # count, data_end, n, data_crc, magic, footer_crc
_CRC_CHUNK = 8 << 20  # bytes read at a time to check the batches' CRC at open


def file_name(end_offset: int) -> str:
    return f"{end_offset:020d}{SUFFIX}"


def encode_header(end_offset: int, epochs: list[tuple[int, int]], version: int = VERSION) -> bytes:
    out = bytearray(_HEAD.pack(MAGIC, version, end_offset, len(epochs)))
    for end, seen in epochs:
        out += _EPOCH.pack(end, seen)
    out += _CRC.pack(crc32c(bytes(out)))
    return bytes(out)


def merge_epochs(epochs: list[tuple[int, int]], log_start: int, limit: int = MAX_EPOCHS) -> list[tuple[int, int]]:
    """``epochs`` without those wholly below ``log_start``, at most ``limit`` long: the oldest
    neighbours merge into one with the later first-seen time (a tombstone may then be kept
    longer than ``delete.retention.ms``, never shorter)."""
    kept = [e for e in epochs if e[0] > log_start]
    while len(kept) > limit:
        (_, seen_a), (end_b, seen_b) = kept[0], kept[1]
        kept[0:2] = [(end_b, max(seen_a, seen_b))]
    return kept


class DamagedBatchError(OSError):
    """A compacted file's batch is torn, malformed or fails its CRC (damage on disk, not an
    I/O error)."""


@dataclass(slots=True)
class BatchIndex:
    """A sparse index of a compacted file, as Kafka's offset index: the first batch, then
    the first batch at least INDEX_INTERVAL_BYTES past the last one indexed; parallel arrays
    of int64 (base offset, byte position), both ascending. Its memory is 16 bytes per 4 KiB
    of batches whatever their count (which the producers choose); a lookup reads forward
    from the entry at or before the offset, about INDEX_INTERVAL_BYTES. ``count``,
    ``end_position``: the batches of the file and where the last one ends."""

    bases: array
    positions: array
    count: int = 0
    end_position: int = 0

    @classmethod
    def empty(cls, start_position: int) -> BatchIndex:
        return cls(array("q"), array("q"), 0, start_position)

    def add(self, base: int, position: int, size: int) -> None:
        if not self.positions or position - self.positions[-1] >= INDEX_INTERVAL_BYTES:
            self.bases.append(base)
            self.positions.append(position)
        self.count += 1
        self.end_position = position + size

    def walk_start(self, offset: int) -> int:
        """Where a walk to the batch holding ``offset`` (or the next one) starts."""
        i = bisect.bisect_right(self.bases, offset) - 1
        return self.positions[max(i, 0)] if self.positions else self.end_position


def encode_footer(index: BatchIndex, data_crc: int) -> bytes:
    """The version 2 footer of a file whose batches ``index`` indexes (see the module
    docstring)."""
    bases, positions = _little_endian(index.bases), _little_endian(index.positions)
    head = bases + positions + _TRAILER.pack(index.count, index.end_position, len(index.bases), data_crc,
                                             FOOTER_MAGIC, 0)[:-_CRC.size]
    return head + struct.pack("<I", crc32c(head))


def _little_endian(values: array) -> bytes:
    if sys.byteorder == "little":
        return values.tobytes()
    swapped = array("q", values)
    swapped.byteswap()
    return swapped.tobytes()


def _int64s(raw: bytes) -> array:
    values = array("q")
    values.frombytes(raw)
    if sys.byteorder != "little":
        values.byteswap()
    return values


def _read_footer(fd: int, start: int, size: int) -> tuple[BatchIndex, int] | None:
    """(index, data CRC) from a version 2 file's footer; None when the footer is damaged
    (its CRC, its place, or an index that is not ordered inside the batches)."""
    if size < start + _TRAILER.size:
        return None
    trailer = os.pread(fd, _TRAILER.size, size - _TRAILER.size)
    count, data_end, n, data_crc, magic, crc = _TRAILER.unpack(trailer)
    if magic != FOOTER_MAGIC or n < 0 or count < n or data_end < start \
            or data_end + 16 * n + _TRAILER.size != size:
        return None
    entries = os.pread(fd, 16 * n, data_end)
    if len(entries) != 16 * n or crc32c(entries + trailer[:-_CRC.size]) != crc:
        return None
    bases, positions = _int64s(entries[: 8 * n]), _int64s(entries[8 * n :])
    if (count == 0) != (n == 0) or (n and (positions[0] != start or positions[-1] >= data_end)) \
            or (count == 0 and data_end != start):
        return None
    if any(a >= b for a, b in zip(bases, bases[1:])) or any(a >= b for a, b in zip(positions, positions[1:])):
        return None
    return BatchIndex(bases, positions, count, data_end), data_crc


def _data_crc_ok(fd: int, start: int, end: int, expected: int) -> bool:
    crc, position = 0, start
    while position < end:
        chunk = os.pread(fd, min(_CRC_CHUNK, end - position), position)
        if not chunk:
            return False
        crc = crc32c(chunk, crc)
        position += len(chunk)
    return crc == expected


def walk(fd: int, path: Path, position: int, end: int,
         chunk: int = _WALK_CHUNK) -> Iterator[tuple[int, bytes]]:
    """(position, batch) of each batch of the compacted file ``path`` (open as ``fd``) from
    byte ``position`` (a batch start) to ``end``, read ``chunk`` bytes at a time (a larger
    batch on its own), its CRC checked; DamagedBatchError for one that is torn, malformed or
    fails its CRC."""
    buf, at = b"", position  # ``buf`` holds the file's bytes from ``at``
    while position < end:
        i = position - at
        if i + record_batch.LOG_OVERHEAD > len(buf):
            buf, at, i = os.pread(fd, min(chunk, end - position), position), position, 0
        if len(buf) - i < record_batch.LOG_OVERHEAD:
            raise DamagedBatchError(f"{path}: batch at byte {position} is torn")
        size = record_batch.LOG_OVERHEAD + _LENGTH.unpack_from(buf, i + 8)[0]
        if size < record_batch.HEADER_SIZE or position + size > end:
            raise DamagedBatchError(f"{path}: batch at byte {position} is malformed")
        batch = buf[i:i + size] if i + size <= len(buf) else os.pread(fd, size, position)
        if len(batch) != size or not record_batch.crc_ok(batch):
            raise DamagedBatchError(f"{path}: batch at byte {position} is damaged")
        yield position, batch
        position += size


def batches_from(fd: int, path: Path, index: BatchIndex, offset: int) -> Iterator[bytes]:
    """Each batch of a compacted file from the one holding ``offset`` (or the next one) on."""
    for _, batch in walk(fd, path, index.walk_start(offset), index.end_position):
        if record_batch.next_offset_of(batch) > offset:
            yield batch


class CompactedLog:
    """One partition's cleaned prefix (see the module docstring); reads only, on the loop.

    ``end_offset``: offsets below it are served from here. ``epochs``: the tombstone epochs
    of the file. ``data_bytes``: bytes of batches held (the "clean" bytes of Kafka's dirty
    ratio)."""

    def __init__(self, path: Path, end_offset: int, epochs: list[tuple[int, int]], index: BatchIndex,
                 data_start: int) -> None:
        self.path = path
        self.end_offset = end_offset
        self.epochs = epochs
        self._index = index
        self.data_bytes = index.end_position - data_start
        self._fd = os.open(path, os.O_RDONLY)

    @property
    def first_offset(self) -> int:
        """The base offset of the first batch held (the end offset when none is)."""
        return self._index.bases[0] if self._index.bases else self.end_offset

    @property
    def index(self) -> BatchIndex:
        return self._index

    @property
    def batch_count(self) -> int:
        return self._index.count

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: Path) -> CompactedLog | None:
        """The newest complete file of ``directory``; leftovers of an interrupted cleaning
        (``.tmp``, older files) are removed, a damaged file is set aside (ERROR)."""
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return None
        for name in names:
            if name.endswith(TMP_SUFFIX):
                (directory / name).unlink()
        found: CompactedLog | None = None
        for name in sorted((n for n in names if n.endswith(SUFFIX)), reverse=True):
            path = directory / name
            if found is not None:
                path.unlink()  # superseded: the cleaning that wrote the newer one was killed
                continue
            loaded = _load(path)
            if loaded is None:
                log.error("%s: compacted file damaged (its header, footer or batches fail their checks); set "
                          "aside as %s.damaged, the partition serves what the commitlog still holds", path, name)
                path.rename(path.with_name(name + ".damaged"))
                continue
            found = cls(path, *loaded)
        return found

    # -- reading ---------------------------------------------------------------------------
    def read(self, offset: int, stop: int, max_bytes: int, min_one: bool,
             have: int = 0) -> tuple[list[bytes], int, bool]:
        """Batches from the one holding ``offset`` (or the next one) that start below
        ``stop``, up to ``max_bytes`` counting ``have`` bytes already taken (``min_one``:
        the first even if larger). Returns (batches, their size, full): ``full`` when
        ``max_bytes`` stopped the read."""
        out: list[bytes] = []
        size = 0
        for batch in self.batches_from(offset):
            if record_batch.base_offset_of(batch) >= stop:
                break
            if have + size + len(batch) > max_bytes and (out or have or not min_one):
                return out, size, True
            out.append(batch)
            size += len(batch)
        return out, size, False

    def bytes_from(self, offset: int) -> int:
        """Bytes of the batches from the one holding ``offset`` (or the next one) to the end
        (batches are back to back: no more is read than to find that one)."""
        index = self._index
        for position, batch in walk(self._fd, self.path, index.walk_start(offset), index.end_position):
            if record_batch.next_offset_of(batch) > offset:
                return index.end_position - position
        return 0

    def batches_from(self, offset: int) -> Iterator[bytes]:
        """Each batch from the one holding ``offset`` (or the next one) on."""
        return batches_from(self._fd, self.path, self._index, offset)

    def batch_at_or_after(self, offset: int) -> bytes | None:
        return next(self.batches_from(offset), None)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _load(path: Path) -> tuple[int, list[tuple[int, int]], BatchIndex, int] | None:
    """(end offset, epochs, index, where the batches start) of a compacted file whose header,
    footer and batches all check; None for a damaged one."""
    with open(path, "rb") as f:
        data_head = f.read(_HEAD.size)
        if len(data_head) != _HEAD.size:
            return None
        magic, version, end, count = _HEAD.unpack(data_head)
        if magic != MAGIC or version not in VERSIONS or not 0 <= count <= 1 << 20:
            return None
        rest = f.read(count * _EPOCH.size + _CRC.size)
        if len(rest) != count * _EPOCH.size + _CRC.size:
            return None
        (crc,) = _CRC.unpack_from(rest, count * _EPOCH.size)
        if crc32c(data_head + rest[: count * _EPOCH.size]) != crc:
            return None
        epochs = [(int(a), int(b)) for a, b in (_EPOCH.unpack_from(rest, i * _EPOCH.size) for i in range(count))]
        start = _HEAD.size + len(rest)
        size = os.fstat(f.fileno()).st_size
        if version == 1:
            index = _walk_and_index(f.fileno(), path, start, size, end)
        else:
            footer = _read_footer(f.fileno(), start, size)
            index = footer[0] if footer is not None and _data_crc_ok(f.fileno(), start, footer[0].end_position,
                                                                      footer[1]) else None
            if index is not None and index.bases and index.bases[-1] >= end:
                index = None
    return None if index is None else (end, epochs, index, start)


def _walk_and_index(fd: int, path: Path, start: int, size: int, end: int) -> BatchIndex | None:
    """The index of a version 1 file (no footer), every batch read and checked; None when
    one is damaged or out of order. (An I/O error is raised: the file is not set aside for
    it.)"""
    index = BatchIndex.empty(start)
    last_next = -1
    try:
        for position, batch in walk(fd, path, start, size, _READ_CHUNK):
            base, nxt = record_batch.base_offset_of(batch), record_batch.next_offset_of(batch)
            if base < last_next or nxt > end:
                return None
            index.add(base, position, len(batch))
            last_next = nxt
    except DamagedBatchError:
        return None
    return index


class CompactedWriter:
    """Writes a new compacted file; every step but ``opened`` runs in the cleaner's thread.

    ``add`` appends batches to ``<end>.clean.tmp`` and ``finish`` fsyncs it; ``commit``
    renames it into place and fsyncs the directory; ``opened`` (on the loop) is the
    CompactedLog serving it; ``remove`` deletes the file it supersedes. A step that fails
    leaves no file of its own behind (``discard``): a full disk is not made fuller by the
    leftovers of failed cleanings, and a file whose rename a failed directory fsync may not
    have made durable does not win at the next restart over the one still served (an fsync
    error is fatal for what it covered: it is never retried as if it had succeeded)."""

    def __init__(self, directory: Path, end_offset: int, epochs: list[tuple[int, int]]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.end_offset = end_offset
        self.epochs = epochs
        self.tmp = directory / (f"{end_offset:020d}" + TMP_SUFFIX)
        self.final = directory / file_name(end_offset)
        self._renamed = False
        self._f = open(self.tmp, "wb")
        header = encode_header(end_offset, epochs)
        try:
            self._f.write(header)
        except BaseException:
            self.discard()
            raise
        self.data_start = self.position = len(header)
        self.index = BatchIndex.empty(self.position)
        self.written = 0
        self._data_crc = 0

    def add(self, batch: bytes) -> None:
        self._f.write(batch)
        self.index.add(record_batch.base_offset_of(batch), self.position, len(batch))
        self.position += len(batch)
        self.written += len(batch)
        self._data_crc = crc32c(batch, self._data_crc)

    def finish(self) -> None:
        """Write the footer and make the file durable."""
        self._f.write(encode_footer(self.index, self._data_crc))
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()

    def discard(self) -> None:
        """Remove the file written so far (renamed or not); never raises."""
        try:
            self._f.close()  # flushes what it buffers: on a full disk that fails, and closes
        except OSError:
            pass
        for path in (self.tmp, self.final) if self._renamed else (self.tmp,):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.error("%s: could not remove a discarded compacted file (%s)", path, exc)

    def commit(self) -> None:
        """Rename the finished file into place and make that durable (directory fsync);
        on failure the file is removed again and the error raised."""
        try:
            os.replace(self.tmp, self.final)
            self._renamed = True
            fsync_path(self.directory)
        except BaseException:
            self.discard()
            raise

    def opened(self) -> CompactedLog:
        """The committed file, ready to serve."""
        return CompactedLog(self.final, self.end_offset, self.epochs, self.index, self.data_start)

    def remove(self, previous: CompactedLog) -> None:
        """Delete the file this one supersedes (closed by then). A failure costs only disk
        space until the next open, which keeps the newest file and deletes older ones."""
        if previous.path == self.final:
            return
        try:
            previous.path.unlink(missing_ok=True)
            fsync_path(self.directory)
        except OSError as exc:
            log.warning("%s: could not remove the superseded compacted file (%s); the next open "
                        "removes it", previous.path, exc)
