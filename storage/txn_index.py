"""Transaction state of one partition: its aborted transactions (a file) and its ongoing
ones (in memory, snapshotted in the checkpoint).

A read_committed consumer is sent data only below the last stable offset (LSO) and, with
it, the aborted transactions overlapping what it is sent, as (producer id, first offset):
it drops that producer's records from the first offset up to the ABORT marker. Kafka keeps
the same list in each segment's ``.txnindex``; here it is one file per partition.

On-disk format
--------------
File ``consumequeue/<topic id>/<partition>/txnindex`` (created by its first entry; no file
is an empty index): 32-byte slots of four int64::

    slot 0     header: MAGIC, VERSION, dropped (entries removed from the front so far),
               start offset (transactions that ended below it were removed; 0 at first)
    slot 1...  one aborted transaction each:
                 producer id
                 first offset        base offset of the producer's first transactional
                                     batch of the transaction in this partition
                 last offset         offset of its ABORT marker
                 last stable offset  the partition's LSO once the marker is in (Kafka's
                                     lastStableOffset: the first offset of the earliest other
                                     ongoing transaction, else marker offset + 1)

Entries are appended in marker order, so last offsets strictly increase; a query binary
searches them. Entry numbers are logical: entry ``i`` (counted since the file was created)
is in slot ``i - dropped + 1`` and ``entry_count`` is dropped + the entries in the file.
Dropping entries wholly below the log start offset (``drop_before``) therefore leaves
every entry's number, and the count the checkpoint records, unchanged. The index answers
only for offsets at or above its start offset: the store never lets the partition's log
start offset fall below it on open (a crash after DeleteRecords moved the log start, before
a checkpoint recorded it, would otherwise serve offsets whose aborts were dropped).

Open transactions (``OngoingTxns``, memory only): producer id -> first offset. A
transactional data batch opens one for its producer unless one is open; an end marker (a
control batch with a producer id whose record key has type ABORT or COMMIT) closes it, and
an ABORT appends an entry here. A marker with nothing open records nothing (an empty
transaction, as in Kafka). The store snapshots the map in each checkpoint ("txns") and
replays the commitlog after it.

Crash behaviour: derived data. After a crash the store cuts the file back to the entry
count of the last checkpoint (later entries may read back as garbage after an OS crash),
then to the offsets the consume queue keeps, and re-dispatch appends the rest again. A
partial trailing slot is dropped on open; a file without a valid header is emptied (the
store then finds it shorter than the checkpoint says and rebuilds every index from the
commitlog). ``drop_before`` writes the surviving entries to a temporary file, fsyncs it and
renames it over the index: a crash leaves the old file or the new one, which hold the same
entries from the new first one on, under the same numbers.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from .errors import CorruptRecordError
from .files import SingleFileIndex, fsync_path, pwrite_all
from .recompress import records_region
from .record_batch import Buffer
from .record_layout import decode_record

log = logging.getLogger(__name__)

SLOT = struct.Struct(">qqqq")
SLOT_SIZE = SLOT.size  # 32
MAGIC = 0x524D4B54584E4958  # "RMKTXNIX"
VERSION = 1
ABORT, COMMIT = 0, 1  # control record types of an end-transaction marker's key
_MARKER_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_SCAN_SLOTS = 256  # entries read per pread while scanning


def end_marker(batch: Buffer) -> tuple[int, int] | None:
    """(ABORT or COMMIT, coordinator epoch) of a control batch holding an end-transaction
    marker; None when its first record's key is not one (Kafka refuses such a batch; it
    never ends anything). A value too short for a coordinator epoch reads as -1."""
    try:
        _, _, key, value, _ = decode_record(bytes(records_region(batch)), 0)
    except CorruptRecordError:
        return None
    if key is None or len(key) < _MARKER_KEY.size:
        return None
    version, kind = _MARKER_KEY.unpack_from(key)
    if version < 0 or kind not in (ABORT, COMMIT):
        return None
    epoch = _MARKER_VALUE.unpack_from(value)[1] if value is not None and len(value) >= _MARKER_VALUE.size else -1
    return kind, epoch


class TxnIndex(SingleFileIndex):
    """The ``txnindex`` file of one partition (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._tmp = path.with_name(path.name + ".tmp")
        self._tmp.unlink(missing_ok=True)  # a drop_before cut short by a crash
        self._fd = self._open_existing()  # None until the first entry (see SingleFileIndex)
        self._dirty = False
        self._dropped, self.start_offset, self._count = 0, 0, 0
        if self._fd is None:
            return
        size = os.fstat(self._fd).st_size
        header = self._read_header(size)
        if header is None:
            if size:
                log.warning("%s: no valid header; emptied", path)
            self._reset()
            size = SLOT_SIZE
        else:
            self._dropped, self.start_offset = header
        self._count = size // SLOT_SIZE - 1  # entries in the file
        if (self._count + 1) * SLOT_SIZE != size:  # torn trailing entry
            os.ftruncate(self._fd, (self._count + 1) * SLOT_SIZE)
        if not (self._count or self._dropped or self.start_offset):
            # only a fresh header (older versions made one per partition): the same as no
            # file, so no descriptor either; the first entry writes the header again
            self.close()
            self._dirty = False

    def _read_header(self, size: int) -> tuple[int, int] | None:
        """(dropped, start offset) from a valid header; None without one."""
        if size < SLOT_SIZE:
            return None
        magic, version, dropped, start = SLOT.unpack(os.pread(self._fd, SLOT_SIZE, 0))
        if magic != MAGIC or version != VERSION or dropped < 0 or start < 0:
            return None
        return dropped, start

    def _reset(self) -> None:
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        pwrite_all(self._fd, SLOT.pack(MAGIC, VERSION, 0, 0), 0)
        self._dropped = 0
        self.start_offset = 0  # see the module docstring
        self._dirty = True

    # -- writing ---------------------------------------------------------------------------
    def append(self, producer_id: int, first_offset: int, last_offset: int,
               last_stable_offset: int) -> None:
        """Record an aborted transaction; ``last_offset`` (its marker) follows every other's."""
        data = SLOT.pack(producer_id, first_offset, last_offset, last_stable_offset)
        if self._fd is None:  # the first entry: the file starts with its header
            self._create()
            self._reset()
        assert self._fd is not None
        pwrite_all(self._fd, data, (self._count + 1) * SLOT_SIZE)
        self._count += 1
        self._dirty = True

    # -- reading ---------------------------------------------------------------------------
    @property
    def entry_count(self) -> int:
        """Entries ever kept and not truncated: the ones dropped from the front included."""
        return self._dropped + self._count

    def _entry(self, index: int) -> tuple[int, int, int, int]:
        """Entry ``index`` of those in the file (0 = the first not dropped)."""
        assert self._fd is not None  # there are entries
        return SLOT.unpack(os.pread(self._fd, SLOT_SIZE, (index + 1) * SLOT_SIZE))

    def _first_ending_at_or_after(self, offset: int) -> int:
        """Index in the file of the first entry whose last offset is >= ``offset``."""
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry(mid)[2] < offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _entries_from(self, index: int) -> Iterator[tuple[int, int, int, int]]:
        while index < self._count:
            assert self._fd is not None  # there are entries
            n = min(_SCAN_SLOTS, self._count - index)
            data = os.pread(self._fd, n * SLOT_SIZE, (index + 1) * SLOT_SIZE)
            yield from SLOT.iter_unpack(data)
            index += n

    def aborted_between(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of each aborted transaction with a record in
        [``start``, ``upper``): last offset >= start and first offset < upper, in marker order.

        The scan stops after an entry whose LSO is >= ``upper`` (as Kafka's does): every
        transaction still open when that marker went in started at or after that LSO, and
        every later one starts after the marker, so no later entry can start below ``upper``.
        """
        return [(producer_id, first) for producer_id, first, _ in self.aborted_ranges(start, upper)]

    def aborted_ranges(self, start: int, upper: int) -> list[tuple[int, int, int]]:
        """``aborted_between`` with each transaction's last offset (its ABORT marker's):
        (producer id, first offset, last offset)."""
        found = []
        for producer_id, first, last, stable in self._entries_from(self._first_ending_at_or_after(start)):
            if first < upper:
                found.append((producer_id, first, last))
            if stable >= upper:
                break
        return found

    # -- truncation ------------------------------------------------------------------------
    def truncate_entries(self, count: int) -> None:
        """Keep only entries numbered below ``count`` (the checkpoint's ``entry_count``).
        When the front was dropped past ``count`` meanwhile, nothing stays in the file."""
        self._truncate_file(max(0, count - self._dropped))

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose last offset is >= ``offset`` (their marker is not indexed)."""
        self._truncate_file(self._first_ending_at_or_after(offset))

    def _truncate_file(self, keep: int) -> None:
        if self._fd is not None and keep <= self._count:  # at the count: whatever a failed append left past it
            os.ftruncate(self._fd, (keep + 1) * SLOT_SIZE)
            self._count = keep

    def drop_before(self, offset: int) -> None:
        """Forget transactions that ended below ``offset`` (the new log start offset); one
        straddling it stays. The file is rewritten only once at least half of it can go, so
        each entry is copied O(1) times on average."""
        gone = self._first_ending_at_or_after(offset)
        if gone == 0 or 2 * gone < self._count or self._fd is None:
            return
        kept = os.pread(self._fd, (self._count - gone) * SLOT_SIZE, (gone + 1) * SLOT_SIZE)
        fd = os.open(self._tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            start = max(self.start_offset, offset)
            pwrite_all(fd, SLOT.pack(MAGIC, VERSION, self._dropped + gone, start) + kept, 0)
            os.fsync(fd)
            os.replace(self._tmp, self._path)
        except BaseException:
            os.close(fd)
            self._tmp.unlink(missing_ok=True)
            raise
        os.close(self._fd)
        self._fd = fd
        self._dropped += gone
        self._count -= gone
        self.start_offset = start
        self._dirty = False  # every entry is in the file just fsynced
        fsync_path(self._path.parent)  # the rename


class OngoingTxns:
    """Producer id -> first offset of its transaction still open in the partition (data
    batches appended, no marker yet).

    Kept in insertion order, which is ascending first offset: a transaction starts at the
    batch being appended, the newest of the partition. So the earliest is always first and
    the LSO is found without a search.
    """

    def __init__(self) -> None:
        self._first: dict[int, int] = {}

    def begin(self, producer_id: int, offset: int) -> None:
        """A transactional batch at ``offset``: starts a transaction unless one is open."""
        self._first.setdefault(producer_id, offset)

    def end(self, producer_id: int) -> int | None:
        """A marker: the first offset of the transaction it ends, None if none was open."""
        return self._first.pop(producer_id, None)

    def first_offset(self) -> int | None:
        """The first offset of the earliest open transaction, None if none is open."""
        return next(iter(self._first.values()), None)

    def items(self) -> Iterator[tuple[int, int]]:
        """(producer id, first offset) of the open transactions, earliest first."""
        return iter(self._first.items())

    def first_offset_of(self, producer_id: int) -> int:
        """The first offset of ``producer_id``'s open transaction, -1 if it has none."""
        return self._first.get(producer_id, -1)

    def snapshot(self) -> dict[str, int]:
        return {str(pid): first for pid, first in self._first.items()}

    @classmethod
    def from_snapshot(cls, data: dict[str, int]) -> OngoingTxns:
        txns = cls()
        for pid, first in sorted(data.items(), key=lambda item: item[1]):
            txns._first[int(pid)] = int(first)
        return txns

    def __len__(self) -> int:
        return len(self._first)


