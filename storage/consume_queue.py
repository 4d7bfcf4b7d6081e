"""Consume queue: the per-partition index from record offset to batch, RocketMQ style.

On-disk format
--------------
Directory ``consumequeue/<topic id>/<partition>/`` (made by the first append: a partition
never written to has none) holding files ``<first offset, 20 digits>.cq``.
Each file holds at most ``entries_per_file`` entries and starts at an offset that is a
multiple of it. An entry is 20 bytes, one per record offset::

    position   int64   commitlog position of the batch that holds the record
    size       int32   byte size of that batch
    tag_code   int64   Java String.hashCode of the record's tag header, 0 if none;
                       CONTROL_CODE for the records of a control batch; PARKED_CODE for an
                       offset its batch no longer holds (the record was moved elsewhere on
                       append: a delayed or timed record parked until it is due); for the
                       schedule and timer topics, the record's delivery time in ms;
                       LOST_CODE for an offset whose batch was in a damaged commitlog range
                       (recovery skipped it: see storage.commitlog); such an entry's
                       position is where the damage starts and its size is 0

So offset -> entry is arithmetic, and a filter can walk tag codes without touching the
commitlog. Entries of one batch share (position, size); a batch has an entry for every offset
it spans (base offset .. base + last offset delta), held records or not. Tag codes are 32-bit
values stored in 64 bits, so CONTROL_CODE (the int64 minimum) and PARKED_CODE are never a
tag's: a reader that must pass control batches through finds them from the queue alone.

Invariants: entries are dense from ``min_offset`` to ``next_offset - 1``; positions never
decrease, except where retention moved a batch to the commitlog head (storage.retention:
its entries are re-pointed, ``rewrite``) -- only in partitions of topics with their own
retention, whose log start retention never finds by position (``first_offset_at_position``
then only serves a recovery that cuts at a checkpoint, which a move always precedes). (An index rebuilt after retention may hold zero entries below the partition's log
start offset, see ``restart_at``; readers never go below that offset.) The file is derived data: after a crash the store truncates it to what the
commitlog proves and re-dispatches the rest; a partial trailing entry is dropped on open.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from . import batch_scan
from .files import pwrite_all

ENTRY = struct.Struct(">qiq")
ENTRY_SIZE = ENTRY.size  # 20
CODE_AT = 12  # where the tag code sits in an entry
CONTROL_CODE = -(1 << 63)
PARKED_CODE = CONTROL_CODE + 1
LOST_CODE = CONTROL_CODE + 2
_SUFFIX = ".cq"


def pack_entries(position: int, size: int, codes: Sequence[int] | None, count: int) -> bytes:
    """The entries of the ``count`` offsets of one batch (at commitlog ``position``, ``size``
    bytes), with their tag codes (None: no tag)."""
    if codes is None:
        return ENTRY.pack(position, size, 0) * count
    if len(codes) != count:
        raise ValueError(f"{len(codes)} tag codes for {count} offsets")
    if batch_scan.cq_entries is not None and type(codes) is list:
        return batch_scan.cq_entries(position, size, codes)  # one C loop
    return b"".join(ENTRY.pack(position, size, code) for code in codes)


def batch_runs(offset: int, chunks: Iterable[bytes]) -> Iterator[tuple[int, int, int, int]]:
    """(first offset, next offset, position, size) of each batch named by raw entries read
    in order from ``offset`` (the entries of one batch share its position and size, so a
    run of equal ones is one batch); a run is yielded once the entry after it is seen, the
    last one at the end of ``chunks``."""
    start = position = size = -1
    for raw in chunks:
        for entry_position, entry_size, _ in ENTRY.iter_unpack(raw):
            if entry_position != position or entry_size != size:
                if start >= 0:
                    yield start, offset, position, size
                start, position, size = offset, entry_position, entry_size
            offset += 1
    if start >= 0:
        yield start, offset, position, size


def _queue_files(directory: Path) -> list[str]:
    """Names of the queue files in ``directory``, sorted; none when it does not exist (a
    listdir, not a glob: a broker with 100,000 partitions builds this for each one used)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(_SUFFIX))


class ConsumeQueue:
    def __init__(self, directory: Path, entries_per_file: int) -> None:
        self._dir = directory
        self._per_file = entries_per_file
        # The directory is made by the first append: a partition never written to costs no
        # directory and no descriptor (a topic with a huge partition count still starts).
        self._fds: dict[int, int] = {}  # file base offset -> fd
        self._dirty: set[int] = set()
        for name in _queue_files(directory):
            self._fds[int(name[: -len(_SUFFIX)])] = os.open(directory / name, os.O_RDWR)
        self._next_offset = 0
        self._min_offset = 0
        if self._fds:
            bases = sorted(self._fds)
            self._min_offset = bases[0]
            last = bases[-1]
            size = os.fstat(self._fds[last]).st_size
            whole = size // ENTRY_SIZE
            if whole * ENTRY_SIZE != size:  # torn trailing entry
                os.ftruncate(self._fds[last], whole * ENTRY_SIZE)
            self._next_offset = last + whole

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def entries_per_file(self) -> int:
        return self._per_file

    @property
    def min_offset(self) -> int:
        """The first offset that still has an entry (whole files are deleted by retention)."""
        return self._min_offset

    def _fd_for(self, base: int) -> int:
        fd = self._fds.get(base)
        if fd is None:
            self._dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._dir / f"{base:020d}{_SUFFIX}", os.O_RDWR | os.O_CREAT, 0o644)
            self._fds[base] = fd
        return fd

    # -- writing ---------------------------------------------------------------------------
    def append(self, count: int, position: int, size: int, tag_codes: list[int] | None) -> None:
        """Add ``count`` entries (the offsets one batch spans) starting at ``next_offset``."""
        data = pack_entries(position, size, tag_codes, count)
        offset = self._next_offset
        view = memoryview(data)
        while view:
            base = offset - offset % self._per_file
            room = base + self._per_file - offset
            chunk = view[: room * ENTRY_SIZE]
            fd = self._fd_for(base)
            pwrite_all(fd, chunk, (offset - base) * ENTRY_SIZE)
            self._dirty.add(base)
            offset += len(chunk) // ENTRY_SIZE
            view = view[len(chunk) :]
        self._next_offset = offset

    def append_lost(self, count: int, position: int) -> None:
        """Add ``count`` LOST_CODE entries: offsets whose batch is gone (damaged commitlog
        bytes from ``position`` on), kept so that no offset is handed out twice."""
        self.append(count, position, 0, [LOST_CODE] * count)

    def lost_run_end(self, offset: int) -> int:
        """The first offset at or after ``offset`` whose entry is not LOST_CODE (or
        ``next_offset``)."""
        while offset < self._next_offset:
            raw = self.entries(offset, 4096)
            for i in range(len(raw) // ENTRY_SIZE):
                if ENTRY.unpack_from(raw, i * ENTRY_SIZE)[2] != LOST_CODE:
                    return offset + i
            offset += len(raw) // ENTRY_SIZE
        return offset

    def rewrite(self, offset: int, data: bytes) -> None:
        """Overwrite the entries from ``offset`` with ``data`` (whole entries, in place: a
        damaged range rebuilt from the commitlog). Only existing entries are written: none
        below ``min_offset`` (files retention deleted meanwhile) or at ``next_offset`` on."""
        skip = max(0, self._min_offset - offset)
        offset += skip
        view = memoryview(data)[skip * ENTRY_SIZE:(self._next_offset - offset + skip) * ENTRY_SIZE]
        while view:
            base = offset - offset % self._per_file
            chunk = view[: (base + self._per_file - offset) * ENTRY_SIZE]
            pwrite_all(self._fds[base], chunk, (offset - base) * ENTRY_SIZE)
            self._dirty.add(base)
            offset += len(chunk) // ENTRY_SIZE
            view = view[len(chunk):]

    def repoint(self, offset: int, end: int, position: int, size: int) -> None:
        """Point the existing entries of offsets [offset, end) at the batch now at
        ``position`` (``size`` bytes), keeping their tag codes (storage.retention moved it)."""
        offset = max(offset, self._min_offset)
        end = min(end, self._next_offset)
        while offset < end:
            raw = self.entries(offset, end - offset)
            count = len(raw) // ENTRY_SIZE
            self.rewrite(offset, pack_entries(position, size, [code for _, _, code in ENTRY.iter_unpack(raw)],
                                              count))
            offset += count

    def restart_at(self, offset: int) -> None:
        """Let an empty queue continue at ``offset``: an index rebuilt from the commitlog
        after retention deleted the batches before it. The file holding ``offset`` gets a
        hole of zero entries below it, which the partition's log start offset fences off.
        """
        if self._next_offset != self._min_offset or offset < self._next_offset:
            raise ValueError(f"cannot restart a consume queue at {offset}")
        self._next_offset = self._min_offset = offset

    def take_dirty_fds(self) -> list[int]:
        """File descriptors written since the last call, for a flush on another thread."""
        fds = [self._fds[b] for b in self._dirty if b in self._fds]
        self._dirty.clear()
        return fds

    def flush(self) -> None:
        for base in self._dirty:
            fd = self._fds.get(base)
            if fd is not None:
                os.fdatasync(fd)
        self._dirty.clear()

    # -- reading ---------------------------------------------------------------------------
    def entry(self, offset: int) -> tuple[int, int, int]:
        """(batch position, batch size, tag code) of ``offset``; min_offset <= offset < next."""
        base = offset - offset % self._per_file
        data = os.pread(self._fds[base], ENTRY_SIZE, (offset - base) * ENTRY_SIZE)
        return ENTRY.unpack(data)

    def entries(self, offset: int, limit: int) -> bytes:
        """Raw entries from ``offset``, at most ``limit`` and never past the file's end."""
        base = offset - offset % self._per_file
        count = min(limit, self._next_offset - offset, base + self._per_file - offset)
        if count <= 0:
            return b""
        return os.pread(self._fds[base], count * ENTRY_SIZE, (offset - base) * ENTRY_SIZE)

    def first_offset_at_position(self, position: int) -> int:
        """The first offset whose batch position is >= ``position`` (next_offset if none)."""
        lo, hi = self._min_offset, self._next_offset
        if lo < hi and self.entry(lo)[0] >= position:
            # the usual answer (nothing before ``position`` is indexed), found without a
            # binary search that a damaged entry further on could mislead
            return lo
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[0] < position:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- truncation ------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop entries at and after ``offset`` (at ``next_offset``: whatever a failed append
        left in the files past it)."""
        if offset > self._next_offset:
            return
        offset = max(offset, self._min_offset)
        for base in sorted(self._fds, reverse=True):
            if base >= offset and base != offset - offset % self._per_file:
                os.close(self._fds.pop(base))
                (self._dir / f"{base:020d}{_SUFFIX}").unlink()
                self._dirty.discard(base)
        base = offset - offset % self._per_file
        if base in self._fds:
            os.ftruncate(self._fds[base], (offset - base) * ENTRY_SIZE)
        self._next_offset = offset

    def truncate_from_position(self, position: int) -> None:
        """Drop every entry whose batch starts at or after ``position`` (crash recovery)."""
        self.truncate_to(self.first_offset_at_position(position))

    def delete_before(self, offset: int) -> None:
        """Delete whole files that hold only offsets below ``offset``; moves min_offset.

        The newest file is always kept: its name and length are what ``next_offset`` is
        recovered from.
        """
        bases = sorted(self._fds)
        for base in bases[:-1]:
            if base + self._per_file <= offset:
                os.close(self._fds.pop(base))
                (self._dir / f"{base:020d}{_SUFFIX}").unlink()
                self._dirty.discard(base)
        if self._fds:
            self._min_offset = max(self._min_offset, min(self._fds))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def destroy(self) -> None:
        self.close()
        shutil.rmtree(self._dir, ignore_errors=True)
