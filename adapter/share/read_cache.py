"""The batches a share fetch last read of each topic-partition, so that the group's other
members fetching the same partition do not each read and CRC-check them again.

A producer's batch often holds thousands of small records while a ShareFetch acquires
MaxRecords (librdkafka: 500) of them, so without this every member re-reads the whole batch
for each 500 records it takes (py-spy: a third of the broker's time under four share
consumers). Kafka reads once per fetch too, but from the page cache in Java; ours is Python.

Invariants:
- An entry is what ``PartitionLog.read`` returned for a run of consecutive batches (checked,
  covering batches included), for one ``PartitionLog`` object: a topic deleted and created
  again, or a partition reopened, has another object and never hits an old entry.
- A hit returns exactly the batches ``PartitionLog.read`` would (the same stop rules for
  ``max_bytes``, ``min_one`` and ``max_offset``), else it is a miss: when the cached run ends
  before the read would stop, the log is read. Offsets below the log start are a miss (the
  read raises OffsetOutOfRange as before).
- Topics only (a view's read is filtered by its current filter: not cached).
- Bounded: at most ``max_bytes`` held over all entries, least recently used dropped first;
  a read larger than a quarter of that is not kept.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from rmqkafka.storage import record_batch
from rmqkafka.storage.partition_log import PartitionLog

CacheKey = tuple[object, int]  # (topic id, partition)
_NO_RECORDS = bytes(4)  # a batch's record count field, 0


@dataclass(slots=True)
class _Run:
    plog: PartitionLog
    batches: list[bytes]
    bases: list[int]  # base offset of each batch
    nexts: list[int]  # next offset after each batch
    size: int


class ShareReadCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._runs: OrderedDict[CacheKey, _Run] = OrderedDict()
        self._size = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey, plog: PartitionLog, offset: int, max_bytes: int, min_one: bool,
            max_offset: int | None) -> list[bytes] | None:
        """The batches ``plog.read(offset, max_bytes, min_one, max_offset)`` returns, when the
        cached run holds all of them; None otherwise."""
        run = self._runs.get(key)
        if run is None or run.plog is not plog or not plog.log_start_offset <= offset <= plog.next_offset:
            self.misses += 1
            return None
        end = plog.next_offset
        stop = end if max_offset is None else min(max_offset, end)
        # the batch holding ``offset``: runs are short (a read's chunk), a scan is fine
        i = next((j for j, (b, n) in enumerate(zip(run.bases, run.nexts)) if b <= offset < n), None)
        if i is None:
            self.misses += 1
            return None
        out: list[bytes] = []
        size = 0
        while offset < stop:
            if out and size >= max_bytes:
                break  # any next batch is over the limit: the read stops here too
            if i == len(run.batches):  # the read would go on past what is cached
                self.misses += 1
                return None
            batch = run.batches[i]
            if size + len(batch) > max_bytes and (out or not min_one):
                break
            out.append(batch)
            size += len(batch)
            offset = run.nexts[i]
            i += 1
        self._runs.move_to_end(key)
        self.hits += 1
        return out

    def put(self, key: CacheKey, plog: PartitionLog, batches: list[bytes]) -> None:
        """Keep what a read returned (replacing the partition's previous run)."""
        self.discard(key)
        size = sum(len(b) for b in batches)
        # a covering batch (no records: lost or parked offsets) is sized to the log end of
        # its read, which a later read may see further: such runs are read again
        if not batches or size > self.max_bytes // 4 or any(b[57:61] == _NO_RECORDS for b in batches):
            return
        self._runs[key] = _Run(plog, list(batches), [record_batch.base_offset_of(b) for b in batches],
                               [record_batch.next_offset_of(b) for b in batches], size)
        self._size += size
        while self._size > self.max_bytes:
            _, old = self._runs.popitem(last=False)
            self._size -= old.size

    def discard(self, key: CacheKey) -> None:
        run = self._runs.pop(key, None)
        if run is not None:
            self._size -= run.size

    @property
    def size(self) -> int:
        return self._size
