"""Timer index: a persistent timing wheel over an append-only timer log, after RocketMQ 5's
TimerWheel and TimerLog.

It indexes ``(due_ms, ref)`` pairs by the slot they are due in, slot = ``due_ms //
precision_ms`` (a second at the default precision; "second" below means a slot); ``ref`` is an int64 that only
the caller interprets (an offset in a topic). Memory does not grow with the number of pending
timers: both files are read and written with pread/pwrite, and only one small number per log
segment is kept in memory.

On-disk format
--------------
Directory ``directory`` holding:

``wheel``
    ``wheel_slots`` (N) slots of 24 bytes, slot ``second % N``::

        second          int64   the second whose list this slot holds
        last_position   int64   log position of that second's newest unit
        count           int64   how many units the list holds (0: empty slot)

    A slot whose ``second`` is not the one asked for belongs to another lap of the wheel and
    is empty for the second asked for. The file is created sparse (ftruncate), so slots never
    written cost neither disk nor page cache. Slots are read and written with pread/pwrite,
    never through a memory mapping: on a full disk a page fault on a hole (a read on tmpfs,
    a write on ext4) can only fail with SIGBUS, which kills the process; a pread of a hole
    reads zeros, and a slot's blocks are allocated (posix_fallocate) before anything of an
    ``add`` is written, so a full disk refuses the add whole with ENOSPC.

``log/<first position, 20 digits>.tl``
    The timer log: append-only segments of ``segment_units`` units of 32 bytes::

        prev_position   int64   the same second's previous unit, -1 for none
        due_ms          int64   when the timer is due (kept exact, also when rolled)
        ref             int64   the caller's reference
        unit_slot       int64   the second whose list the unit is linked into

    Positions are global byte positions, contiguous across segments (as in a commitlog); a
    segment starts at a multiple of its size. Each second's units form a list through
    ``prev_position``, newest first; the wheel slot points at its head.

Invariants (when every ``add`` passes a ``read_slot`` that never decreases, R below):
``unit_slot`` is in ``[R, R + N)`` when the unit is added, so the seconds still pending all
fit the wheel at once and never contend for a slot. Every unit of a list has the list's
``unit_slot``, and ``prev_position`` points backwards, so a list never reaches past a
truncation point nor into a segment whose units were all processed.

Full disk
---------
An ``add`` that finds no room raises OSError (ENOSPC) and leaves the index as it was: the
wheel blocks it needs are allocated first, then the units are appended to the log (cut back
to where it ended if that fails), and only then are the slots written.

Crash behaviour
---------------
Writes are in-place pwrites with no ordering between the two files; the caller's checkpoint
fdatasyncs ``take_dirty_fds()`` and records ``log_length`` with its ``read_slot``. After a
crash ``open`` cuts the log back to that length (later units may be garbage after an OS crash)
and rebuilds the whole wheel from the log units whose ``unit_slot >= read_slot`` (the
wheel may point at cut or garbage units). A rebuilt wheel is written to ``wheel.new`` and
renamed over ``wheel`` (a leftover ``wheel.new`` is a rebuild a crash interrupted, and is
deleted); the old file is not truncated in place, because freeing its blocks is slow (a
wheel filled over weeks has an extent per page first used) and would delay the start: its
descriptor goes to ``release_fd``, by default closed on a thread of its own. A log shorter than the checkpoint, or units that do
not fit the window of the checkpoint's ``read_slot``, mean the index cannot be trusted:
``TimerIndexLostError`` tells the caller to rebuild it from its source. After a clean shutdown
(``log_length`` None) the files are trusted as they are; a partial trailing unit is dropped.
Segments are deleted oldest first; a crash that kept a newer unlink but lost an older one
leaves segments before a gap, which open deletes when none of their units is pending.

``wheel_slots`` and ``segment_units`` belong to the directory: a wheel of another size is
rebuilt from the log on open, segments of another size are refused.

Memory: nothing per pending timer. A rebuild holds two int64 arrays of N (16 bytes a slot,
9.7 MB for a 7-day wheel of seconds) until it has written the wheel; reading a second holds 16 bytes
per unit of that second.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import struct
import sys
import threading
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path

from .files import fsync_path

UNIT = struct.Struct(">qqqq")
UNIT_SIZE = UNIT.size  # 32
SLOT = struct.Struct(">qqq")
SLOT_SIZE = SLOT.size  # 24
NO_POSITION = -1
WHEEL_FILE = "wheel"
_WHEEL_NEW = WHEEL_FILE + ".new"  # a rebuilt wheel until it is renamed over WHEEL_FILE
LOG_DIR = "log"
_SUFFIX = ".tl"
_NO_SECOND = -(1 << 63)  # max unit_slot of an empty segment
_SCAN_UNITS = 1 << 15  # units per pread while scanning the log (1 MiB)
_WALK_BLOCK = 4096  # bytes per pread while walking a list (a multiple of UNIT_SIZE)
_PAGE = 4096  # the wheel is allocated a page at a time


class _SlotPages:
    """The wheel slots of ``seconds``, read and written a page at a time: the slots that
    start on one page are read with one pread spanning them, and written back with one
    pwrite of the same span. The span's other slots are written back as they were read (only
    the loop's thread writes the wheel), and lie on pages the changed slots' allocation
    covers already, so the file gains no block it would not have had."""

    def __init__(self, fd: int, slots: int, seconds: set[int]) -> None:
        self._fd = fd
        self._slots = slots
        by_page: dict[int, list[int]] = {}
        for second in seconds:
            at = (second % slots) * SLOT_SIZE
            by_page.setdefault(at // _PAGE, []).append(at)
        # page -> (span start, span bytes as read and then changed)
        self._spans: dict[int, tuple[int, bytearray]] = {}
        for page, ats in by_page.items():
            low, high = min(ats), max(ats) + SLOT_SIZE
            self._spans[page] = (low, bytearray(_pread(fd, high - low, low)))
        self._changed: set[int] = set()

    def _where(self, second: int) -> tuple[int, bytearray, int]:
        at = (second % self._slots) * SLOT_SIZE
        page = at // _PAGE
        low, span = self._spans[page]
        return page, span, at - low

    def slot(self, second: int) -> tuple[int, int, int]:
        """(second held, last position, count) of the wheel slot of ``second``."""
        _, span, rel = self._where(second)
        return SLOT.unpack_from(span, rel)

    def set(self, second: int, last: int, count: int) -> None:
        page, span, rel = self._where(second)
        SLOT.pack_into(span, rel, second, last, count)
        self._changed.add(page)

    def write(self) -> None:
        for page in sorted(self._changed):
            low, span = self._spans[page]
            _pwrite(self._fd, span, low)
        self._changed.clear()


class TimerIndexLostError(Exception):
    """The files cannot be trusted; the caller must rebuild the index from its source."""


def _close_on_a_thread(fd: int) -> None:
    threading.Thread(target=os.close, args=(fd,), name="timer-wheel-release", daemon=True).start()


def _pwrite(fd: int, data: bytes | memoryview, offset: int) -> None:
    """Write all of ``data``; a short write is continued, so that a full disk raises its own
    error (ENOSPC) from the next call."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.EIO, f"short write: {len(data) - len(view)} of {len(data)} bytes")
        view, offset = view[written:], offset + written


def _pread(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise OSError(errno.EIO, f"short read: {len(data)} of {size} bytes at {offset}")
    return data


@functools.lru_cache(maxsize=4)
def _unit_slots_of(units: int) -> struct.Struct:
    """Unpacks only the unit_slot of each unit: the pad bytes make no int objects."""
    return struct.Struct(">" + "24xq" * units)


def _unit_slots(data: bytes) -> tuple[int, ...]:
    return _unit_slots_of(len(data) // UNIT_SIZE).unpack(data)


class _WheelImage:
    """A wheel being rebuilt in memory, fed the log's units oldest first: two int64 arrays of
    N (16 bytes a slot: bounded by ``wheel_slots``, not by the log). A slot's second is not
    kept: every pending second is in ``[read_slot, read_slot + N)``, one per slot."""

    def __init__(self, slots: int, read_slot: int) -> None:
        self._n = slots
        self._read_slot = read_slot
        self._lasts = array("q", [0]) * slots
        self._counts = array("q", [0]) * slots

    def add_units(self, seconds: tuple[int, ...], position: int) -> None:
        """Link units with these unit_slots, the first at ``position``, into the image."""
        n, read_slot = self._n, self._read_slot
        low, high = min(seconds), max(seconds)
        if high < read_slot:
            return  # all processed: the common case for old segments
        if high >= read_slot + n:
            raise TimerIndexLostError(
                f"a unit for second {high} does not fit the wheel at {read_slot}:"
                " read_slot is older than the checkpoint that recorded the log length"
            )
        lasts, counts = self._lasts, self._counts
        positions = range(position, position + len(seconds) * UNIT_SIZE, UNIT_SIZE)
        if low >= read_slot:  # nothing to skip: the tight loop (rebuild time is spent here)
            for second, at in zip(seconds, positions):
                i = second % n
                lasts[i] = at  # units come oldest first: the last one seen is the newest
                counts[i] += 1
            return
        for second, at in zip(seconds, positions):
            if second >= read_slot:
                i = second % n
                lasts[i] = at
                counts[i] += 1

    def blocks(self) -> Iterator[tuple[int, bytes]]:
        """(wheel file offset, big-endian slots) of every block holding a non-empty slot."""
        per_block = 1 << 11  # slots per write (48 KiB)
        zero = array("q", [0]) * per_block
        for first in range(0, self._n, per_block):
            end = min(first + per_block, self._n)
            counts = self._counts[first:end]
            if counts == zero[: end - first]:
                continue  # leave the file sparse there
            block = array("q", [0]) * (3 * (end - first))
            block[0::3] = self._seconds(first, end)
            block[1::3] = self._lasts[first:end]
            block[2::3] = counts
            if sys.byteorder == "little":
                block.byteswap()
            yield first * SLOT_SIZE, block.tobytes()

    def _seconds(self, first: int, end: int) -> array:
        """The seconds slots ``first`` to ``end`` stand for in the window at read_slot
        (empty slots get one too; their count of 0 keeps them empty)."""
        n, read_slot = self._n, self._read_slot
        offset = (first - read_slot) % n  # of slot ``first`` from read_slot
        head = min(end - first, n - offset)
        seconds = array("q", range(read_slot + offset, read_slot + offset + head))
        seconds.extend(range(read_slot, read_slot + (end - first - head)))  # wrapped
        return seconds


class TimerIndex:
    def __init__(
        self, directory: Path, *, wheel_slots: int = 7 * 86400, segment_units: int = 1 << 21,
        precision_ms: int = 1000, release_fd: Callable[[int], None] | None = None,
    ) -> None:
        """``release_fd`` receives the descriptor of a wheel file a rebuild replaced, whose
        close frees its blocks (seconds for a fragmented wheel); by default a thread of its
        own closes it."""
        if wheel_slots < 1 or segment_units < 1 or precision_ms < 1:
            raise ValueError("wheel_slots, segment_units and precision_ms must be positive")
        self._precision = precision_ms
        self._dir = directory
        self._log_dir = directory / LOG_DIR
        self._slots = wheel_slots
        self._segment_bytes = segment_units * UNIT_SIZE
        self._wheel_fd = -1
        self._release_fd = release_fd or _close_on_a_thread
        # Wheel pages known to have their blocks (one flag a page: 10 KB for 41 MB of wheel),
        # so that posix_fallocate runs once a page, not once an add.
        self._allocated = bytearray()
        self._log_dir_fd = -1
        # Segment base -> fd and -> max unit_slot, in ascending base order (dicts keep
        # insertion order; segments are only appended at the end and deleted at the front).
        self._segments: dict[int, int] = {}
        self._max_slot: dict[int, int] = {}
        self._start = 0  # first position still in the log
        self._end = 0  # next position to write
        self._dirty: set[int] = set()  # segment bases written since take_dirty_fds
        self._wheel_dirty = False
        self._log_dir_dirty = False  # a segment was created or deleted

    # -- opening ---------------------------------------------------------------------------
    def open(self, *, read_slot: int, log_length: int | None) -> None:
        """Open the files. ``read_slot`` is the first second not yet fully processed;
        ``log_length`` is what the caller's checkpoint (taken with that ``read_slot``)
        recorded, or None after a clean shutdown."""
        if self._wheel_fd >= 0:
            raise RuntimeError("timer index already open")
        created = not (self._dir / WHEEL_FILE).exists()
        self._log_dir.mkdir(parents=True, exist_ok=True)
        (self._dir / _WHEEL_NEW).unlink(missing_ok=True)  # a rebuild a crash interrupted
        self._log_dir_fd = os.open(self._log_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._open_segments()
            if log_length is None:
                self._drop_torn_unit()
            else:
                self._truncate_log(log_length)
            self._drop_deleted_prefix(read_slot)
            wheel_fresh = self._open_wheel()
            if created:  # make the new names durable; segments' go through take_dirty_fds
                fsync_path(self._dir)
            rebuild = log_length is not None or not wheel_fresh
            self._scan(read_slot if rebuild else None)
        except BaseException:
            self.close()
            raise

    def _segment_path(self, base: int) -> Path:
        return self._log_dir / f"{base:020d}{_SUFFIX}"

    def _open_segments(self) -> None:
        for path in sorted(self._log_dir.glob("*" + _SUFFIX)):
            base = int(path.name[: -len(_SUFFIX)])
            if base % self._segment_bytes:
                raise ValueError(f"{path} does not start at a multiple of segment_units")
            self._segments[base] = os.open(path, os.O_RDWR)
            if self._size(base) > self._segment_bytes:
                raise ValueError(f"{path} is longer than segment_units units")
        bases = list(self._segments)
        self._start = bases[0] if bases else 0
        self._end = bases[-1] + self._size(bases[-1]) if bases else 0

    def _size(self, base: int) -> int:
        return os.fstat(self._segments[base]).st_size

    def _drop_torn_unit(self) -> None:
        if not self._segments:
            return
        last = next(reversed(self._segments))
        size = self._size(last)
        if size % UNIT_SIZE:
            os.ftruncate(self._segments[last], size - size % UNIT_SIZE)
            self._end = last + size - size % UNIT_SIZE

    def _truncate_log(self, log_length: int) -> None:
        if log_length % UNIT_SIZE or log_length < 0:
            raise ValueError(f"log length {log_length} is not a whole number of units")
        if log_length > self._end:
            raise TimerIndexLostError(f"timer log holds {self._end} bytes, checkpoint {log_length}")
        if log_length < self._start:
            raise TimerIndexLostError(f"timer log starts at {self._start}, checkpoint {log_length}")
        for base in reversed(list(self._segments)):
            if base > log_length:
                self._delete_segment(base)
            else:
                if self._size(base) < log_length - base:  # hole: units the checkpoint counted
                    raise TimerIndexLostError(f"timer log segment {base} is short")
                os.ftruncate(self._segments[base], log_length - base)
                break
        self._end = log_length

    def _drop_deleted_prefix(self, read_slot: int) -> None:
        """Segments are deleted oldest first, but an OS crash may keep the unlink of a newer
        one and lose an older one's: segments before a missing one are leftovers of such a
        deletion, which is only legitimate when none of their units is still pending."""
        bases = list(self._segments)
        live = max(len(bases) - 1, 0)  # index of the oldest segment of the contiguous run
        while live > 0:
            prev = bases[live - 1]
            if prev + self._segment_bytes != bases[live]:
                break
            if self._size(prev) != self._segment_bytes:  # lost units, not a deletion
                raise TimerIndexLostError(f"timer log segment {prev} is short")
            live -= 1
        for base in bases[:live]:
            if self._scan_segment(base, None) >= read_slot:
                raise TimerIndexLostError(f"timer log has a gap after segment {base}")
            self._delete_segment(base)
        if live:
            self._start = bases[live]

    def _open_wheel(self) -> bool:
        """Open the wheel; True when it can be used as it is (it is not rebuilt after a clean
        shutdown unless it is missing or sized for another ``wheel_slots``)."""
        path = self._dir / WHEEL_FILE
        self._wheel_fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._allocated = bytearray(-(-self._slots * SLOT_SIZE // _PAGE))
        size = os.fstat(self._wheel_fd).st_size
        if size == self._slots * SLOT_SIZE:
            return True
        if size != 0:
            return False  # another size: the rebuild replaces the file
        os.ftruncate(self._wheel_fd, self._slots * SLOT_SIZE)
        self._wheel_dirty = True
        return self._end == self._start

    # -- scanning and rebuilding -----------------------------------------------------------
    def _scan(self, read_slot: int | None) -> None:
        """Recompute each segment's max unit_slot; with ``read_slot``, also rebuild the
        wheel from the units still pending."""
        image = None
        if read_slot is not None and self._end > self._start:
            image = _WheelImage(self._slots, read_slot)
        for base in self._segments:
            self._max_slot[base] = self._scan_segment(base, image)
        if read_slot is not None:
            self._write_wheel(image)

    def _scan_segment(self, base: int, image: _WheelImage | None) -> int:
        """The segment's max unit_slot; its pending units go into ``image``."""
        fd = self._segments[base]
        size = self._size(base)
        size -= size % UNIT_SIZE
        top = _NO_SECOND
        rel = 0
        while rel < size:
            seconds = _unit_slots(_pread(fd, min(_SCAN_UNITS * UNIT_SIZE, size - rel), rel))
            top = max(top, max(seconds))
            if image is not None:
                image.add_units(seconds, base + rel)
            rel += len(seconds) * UNIT_SIZE
        return top

    def _write_wheel(self, image: _WheelImage | None) -> None:
        """A new sparse wheel holding only the blocks with slots, renamed over the old one.
        Truncating the old file in place instead took 9.7-11 s for a wheel of 300,000 timers
        (8,747 extents, ext4 mounted with discard), all before the broker was ready."""
        path = self._dir / _WHEEL_NEW
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            self._write_image(fd, image)
            os.replace(path, self._dir / WHEEL_FILE)
            fsync_path(self._dir)  # the new name, before anything relies on the new file
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            # No room for a second wheel beside the old one: free the old one's blocks
            # first, slow as that is, and write the image into it.
            os.ftruncate(self._wheel_fd, 0)
            self._write_image(self._wheel_fd, image)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        else:
            old, self._wheel_fd = self._wheel_fd, fd
            self._release_fd(old)
        self._allocated = bytearray(-(-self._slots * SLOT_SIZE // _PAGE))
        self._wheel_dirty = True

    def _write_image(self, fd: int, image: _WheelImage | None) -> None:
        os.ftruncate(fd, self._slots * SLOT_SIZE)  # sparse: slots never written cost nothing
        if image is not None:
            for at, data in image.blocks():
                _pwrite(fd, data, at)

    # -- writing ---------------------------------------------------------------------------
    def add(self, due_ms: int, ref: int, *, read_slot: int) -> None:
        """Index ``ref`` as due at ``due_ms``. Its slot is ``max(due_ms // precision_ms, read_slot)``
        capped at ``read_slot + N - 1``: a unit due later rolls (keeps its ``due_ms``; the
        caller re-adds it when that slot is processed)."""
        self.add_many([(due_ms, ref)], read_slot=read_slot)

    def slot_for(self, due_ms: int, *, read_slot: int) -> int:
        """The slot ``add`` puts a unit due at ``due_ms`` in, while ``read_slot`` is read."""
        return min(max(due_ms // self._precision, read_slot), read_slot + self._slots - 1)

    def add_many(self, items: list[tuple[int, int]], *, read_slot: int) -> None:
        """``add`` for each ``(due_ms, ref)`` of ``items``, in order, with one wheel read and
        write per wheel page its slots are on (_PAGE bytes: 170 slots) and one log write per
        segment touched (a produced batch of timers costs a few system calls, not three per
        timer, also when every timer has a slot of its own)."""
        if not items:
            return
        n = self._slots
        precision, window_end = self._precision, read_slot + n - 1
        seconds = [min(max(due_ms // precision, read_slot), window_end) for due_ms, _ in items]  # slot_for
        pages = _SlotPages(self._wheel_fd, n, set(seconds))
        heads: dict[int, tuple[int, int]] = {}  # slot -> (last position, count) as updated
        units = bytearray()
        position = self._end
        for (due_ms, ref), second in zip(items, seconds):
            head = heads.get(second)
            if head is None:
                held, last, count = pages.slot(second)
                if count > 0 and held > second:
                    raise ValueError(f"slot of second {second} holds later second {held}")
                head = (last, count) if count > 0 and held == second else (NO_POSITION, 0)
            units += UNIT.pack(head[0], due_ms, ref, second)
            heads[second] = (position, head[1] + 1)
            position += UNIT_SIZE
        for second in heads:  # before anything is written: a full disk refuses the add whole
            self._allocate_slot(second)
        start = self._end
        try:
            self._write_units(bytes(units), max(heads))
        except OSError:
            self._cut_log_back(start)
            raise
        for second, (last, count) in heads.items():
            pages.set(second, last, count)
        pages.write()
        self._wheel_dirty = True

    def _read_slot(self, second: int) -> tuple[int, int, int]:
        """(second held, last position, count) of the wheel slot of ``second``."""
        return SLOT.unpack(_pread(self._wheel_fd, SLOT_SIZE, (second % self._slots) * SLOT_SIZE))

    def _allocate_slot(self, second: int) -> None:
        """Give the wheel slot of ``second`` its blocks (ENOSPC if the disk has none), so that
        writing the slot cannot fail for room."""
        at = (second % self._slots) * SLOT_SIZE
        first, last = at // _PAGE, (at + SLOT_SIZE - 1) // _PAGE
        if self._allocated[first] and self._allocated[last]:
            return
        try:
            end = min((last + 1) * _PAGE, self._slots * SLOT_SIZE)  # never past the wheel's end
            os.posix_fallocate(self._wheel_fd, first * _PAGE, end - first * _PAGE)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            return  # a file system without fallocate: a write may still find no room (ENOSPC)
        self._allocated[first] = self._allocated[last] = 1

    def _cut_log_back(self, end: int) -> None:
        """Take back the units an add wrote before it failed (the log ends at ``end`` again)."""
        for base in reversed(list(self._segments)):
            if base > end or (base == end and base > self._start):
                self._delete_segment(base)
            elif base <= end:
                os.ftruncate(self._segments[base], end - base)
                break
        self._end = end

    def _write_units(self, data: bytes, high: int | None) -> None:
        """Append ``data`` (whole units) at the log end, split at segment boundaries."""
        view = memoryview(data)
        while view:
            position = self._end
            base = position - position % self._segment_bytes
            room = base + self._segment_bytes - position
            chunk = view[:room]
            _pwrite(self._segment_fd(base), chunk, position - base)
            self._end = position + len(chunk)
            if high is not None:
                self._max_slot[base] = max(self._max_slot[base], high)
            self._dirty.add(base)
            view = view[len(chunk):]

    def _segment_fd(self, base: int) -> int:
        fd = self._segments.get(base)
        if fd is None:
            fd = os.open(self._segment_path(base), os.O_RDWR | os.O_CREAT, 0o644)
            self._segments[base] = fd
            self._max_slot[base] = _NO_SECOND
            self._log_dir_dirty = True
        return fd

    # -- reading ---------------------------------------------------------------------------
    def _slot(self, second: int) -> tuple[int, int]:
        """(newest position, count) of ``second``'s list; count 0 if the slot holds another."""
        held, last, count = self._read_slot(second)
        if count <= 0 or held != second:
            return NO_POSITION, 0
        return last, count

    def slot_count(self, second: int) -> int:
        return self._slot(second)[1]

    def entries(self, second: int) -> list[tuple[int, int]]:
        """The (due_ms, ref) of ``second``'s units, oldest first."""
        return list(self.iter_entries(second))

    def iter_entries(self, second: int) -> Iterator[tuple[int, int]]:
        """Like ``entries`` but holding 16 bytes per unit instead of a list of tuples, for
        slots that collected very many units (rolls). The list is read before the first
        item is yielded."""
        dues, refs = self._walk(second)
        return zip(reversed(dues), reversed(refs), strict=True)

    def _walk(self, second: int) -> tuple[array, array]:
        position, count = self._slot(second)
        dues, refs = array("q"), array("q")
        block_at, block = 0, b""  # lists often run through nearby units: read blocks
        while len(dues) < count:
            if not block_at <= position < block_at + len(block):
                block_at, block = self._read_block(position, second)
            prev, due, ref, unit_second = UNIT.unpack_from(block, position - block_at)
            if unit_second != second:
                raise TimerIndexLostError(f"list of second {second} reaches unit at {position}")
            dues.append(due)
            refs.append(ref)
            position = prev
        return dues, refs

    def _read_block(self, position: int, second: int) -> tuple[int, bytes]:
        base = position - position % self._segment_bytes
        fd = self._segments.get(base)
        if fd is None or position < self._start or position + UNIT_SIZE > self._end:
            raise TimerIndexLostError(f"list of second {second} reaches missing unit {position}")
        rel = position - base
        start = rel - rel % _WALK_BLOCK
        length = min(start + _WALK_BLOCK, self._segment_bytes, self._end - base) - start
        return base + start, _pread(fd, length, start)

    @property
    def log_length(self) -> int:
        """Bytes of log written (the next unit's position), for the caller's checkpoint."""
        return self._end

    @property
    def log_start(self) -> int:
        """Position of the oldest unit still kept."""
        return self._start

    # -- retention -------------------------------------------------------------------------
    def delete_processed(self, read_slot: int) -> int:
        """Delete the oldest segments all of whose units have ``unit_slot < read_slot``;
        returns how many. Pass a ``read_slot`` the caller's checkpoint already holds: a
        crash must not bring back seconds whose units are gone. The newest segment is always
        kept: its name and size are where the log continues."""
        deleted = 0
        for base in list(self._segments)[:-1]:
            if self._max_slot[base] >= read_slot:
                break  # only a prefix, so the log stays contiguous
            self._delete_segment(base)
            deleted += 1
        if deleted:
            self._start = next(iter(self._segments))
        return deleted

    def _delete_segment(self, base: int) -> None:
        os.close(self._segments.pop(base))
        self._max_slot.pop(base, None)
        self._dirty.discard(base)
        self._segment_path(base).unlink()
        self._log_dir_dirty = True

    # -- durability ------------------------------------------------------------------------
    def take_dirty_fds(self) -> list[int]:
        """File descriptors written since the last call, for a checkpoint's fdatasync; the log
        directory's when a segment was created or deleted."""
        fds = [self._segments[base] for base in sorted(self._dirty) if base in self._segments]
        self._dirty.clear()
        if self._wheel_dirty:
            fds.append(self._wheel_fd)
            self._wheel_dirty = False
        if self._log_dir_dirty:
            fds.append(self._log_dir_fd)
            self._log_dir_dirty = False
        return fds

    def flush(self) -> None:
        for fd in self.take_dirty_fds():
            if fd == self._log_dir_fd:
                os.fsync(fd)
            else:
                os.fdatasync(fd)

    def close(self) -> None:
        for fd in self._segments.values():
            os.close(fd)
        self._segments.clear()
        self._max_slot.clear()
        self._dirty.clear()
        for fd in (self._wheel_fd, self._log_dir_fd):
            if fd >= 0:
                os.close(fd)
        self._wheel_fd = self._log_dir_fd = -1
        self._wheel_dirty = self._log_dir_dirty = False

    def reset(self, *, read_slot: int) -> None:
        """Delete both files and open an empty index (after TimerIndexLostError, before the
        caller re-adds what its source still holds)."""
        self.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        self._start = self._end = 0
        self.open(read_slot=read_slot, log_length=None)
