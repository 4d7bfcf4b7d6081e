"""Time index: from a timestamp to the first batch that may hold it, for ListOffsets.

On-disk format
--------------
File ``consumequeue/<topic id>/<partition>/timeindex`` (created by its first entry): 16-byte entries
``(running max timestamp int64, batch base offset int64)``, appended only when a batch raises
the partition's running maximum timestamp. Timestamps in the file therefore strictly
increase, and the first entry whose timestamp is >= T names the first batch holding a record
stamped >= T (CreateTime records inside a partition need not be ordered; the running maximum
is what makes a binary search valid, as in Kafka's own time index).

Derived data: after a crash it is cut back to the entry count the last checkpoint recorded
(later entries may be garbage after an OS crash), then to the offsets the consume queue
keeps, then rebuilt by re-dispatch. A partial trailing entry is dropped on open.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from .files import SingleFileIndex, pwrite_all

ENTRY = struct.Struct(">qq")
ENTRY_SIZE = ENTRY.size
NO_TIMESTAMP = -1


class TimeIndex(SingleFileIndex):
    def __init__(self, path: Path) -> None:
        self._path = path
        self._fd = self._open_existing()  # None until the first entry (see SingleFileIndex)
        size = 0 if self._fd is None else os.fstat(self._fd).st_size
        self._count = size // ENTRY_SIZE
        if self._fd is not None and self._count * ENTRY_SIZE != size:
            os.ftruncate(self._fd, self._count * ENTRY_SIZE)
        self._dirty = False
        if not self._count:
            self.close()  # an empty file (older versions made one per partition): no descriptor
        self.max_timestamp = NO_TIMESTAMP
        self.max_timestamp_offset = -1  # base offset of the batch holding max_timestamp
        if self._count:
            self.max_timestamp, self.max_timestamp_offset = self._entry(self._count - 1)

    def _entry(self, index: int) -> tuple[int, int]:
        assert self._fd is not None  # there are entries
        return ENTRY.unpack(os.pread(self._fd, ENTRY_SIZE, index * ENTRY_SIZE))

    def maybe_append(self, max_timestamp: int, base_offset: int) -> None:
        if max_timestamp <= self.max_timestamp:
            return
        fd = self._create() if self._fd is None else self._fd
        pwrite_all(fd, ENTRY.pack(max_timestamp, base_offset), self._count * ENTRY_SIZE)
        self._count += 1
        self._dirty = True
        self.max_timestamp, self.max_timestamp_offset = max_timestamp, base_offset

    def lookup(self, timestamp: int) -> int | None:
        """Base offset of the first batch whose running max timestamp is >= ``timestamp``."""
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry(mid)[0] < timestamp:
                lo = mid + 1
            else:
                hi = mid
        return self._entry(lo)[1] if lo < self._count else None

    @property
    def entry_count(self) -> int:
        return self._count

    def truncate_to(self, offset: int) -> None:
        """Drop entries for batches at or after ``offset``."""
        keep = self._count
        while keep and self._entry(keep - 1)[1] >= offset:
            keep -= 1
        self.truncate_entries(keep)

    def truncate_entries(self, count: int) -> None:
        """Keep only the first ``count`` entries (at ``entry_count``: whatever a failed append
        left in the file past them)."""
        if self._fd is not None and count <= self._count:
            os.ftruncate(self._fd, count * ENTRY_SIZE)
            self._count = count
            if count:
                self.max_timestamp, self.max_timestamp_offset = self._entry(count - 1)
            else:
                self.max_timestamp, self.max_timestamp_offset = NO_TIMESTAMP, -1
