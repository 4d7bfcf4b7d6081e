"""The batches share fetches last read of each topic-partition, so that the group's other
members fetching the same partition do not each read and CRC-check them again.

A producer's batch often holds thousands of small records while a ShareFetch acquires
MaxRecords (librdkafka: 500) of them, so without this every member re-reads the whole batch
for each 500 records it takes (py-spy: a third of the broker's time under four share
consumers). Kafka reads once per fetch too, but from the page cache in Java; ours is Python.

Invariants:
- An entry is a run of consecutive batches ``PartitionLog.read`` returned (checked), for one
  ``PartitionLog`` object: a topic deleted and created again, or a partition reopened, has
  another object and never hits an old entry. A run holding a covering batch is not kept.
- ``read`` returns exactly the batches ``PartitionLog.read`` would (the same stop rules for
  ``max_bytes``, ``min_one`` and ``max_offset``): the cached ones it would return, then, when
  the read would go on past the run, the rest read from the log at the run's end with the
  bytes left, which extend the run. The fetches of a share-partition move forward (they
  start at its first acquirable offset), so a run follows them: the members' reads, which
  overlap, read each batch of the log once, and batches wholly below a read's start leave
  the run. Offsets outside the run, or below the log start, are read from the log (the read
  raises OffsetOutOfRange as before); a read below the run (a redelivery) leaves it as it is,
  one past it starts a new run.
- Topics only (a view's read is filtered by its current filter: not cached).
- Bounded: at most ``max_bytes`` held over all entries, least recently used dropped first;
  a read larger than a quarter of that is not kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
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


class _NotCached(Exception):
    pass


class ShareReadCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._runs: OrderedDict[CacheKey, _Run] = OrderedDict()
        self._size = 0
        self.hits = 0
        self.misses = 0

    def read(self, key: CacheKey, plog: PartitionLog, offset: int, max_bytes: int, min_one: bool,
             max_offset: int | None, read_log: Callable[[int, int, bool], list[bytes]]) -> list[bytes]:
        """What ``plog.read(offset, max_bytes, min_one, max_offset)`` returns; ``read_log(offset,
        max_bytes, min_one)`` is that read (with ``max_offset``), called only for what the run
        does not hold. A hit: at least one batch came from the run."""
        run = self._runs.get(key)
        i = None
        if run is not None and run.plog is plog and plog.log_start_offset <= offset <= plog.next_offset:
            if offset == run.nexts[-1]:
                i = len(run.batches)  # right after the run: the read extends it
            else:  # the batch holding ``offset``: a run is a few reads' chunks, a scan is fine
                i = next((j for j, (b, n) in enumerate(zip(run.bases, run.nexts)) if b <= offset < n), None)
        if run is None or i is None:
            self.misses += 1
            batches = read_log(offset, max_bytes, min_one)
            if run is not None and run.plog is plog and offset < run.bases[0]:
                # a redelivery behind the run (released or expired records): the members'
                # forward reads keep the run they share
                return batches
            self.discard(key)
            self._extend(key, plog, None, batches, offset)
            return batches
        end = plog.next_offset
        stop = end if max_offset is None else min(max_offset, end)
        first = offset
        out: list[bytes] = []
        size = cached = 0
        while offset < stop:
            if out and size >= max_bytes:
                break  # any next batch is over the limit: the read stops here too
            if i == len(run.batches):  # the read goes on past the run: the rest from the log
                rest = read_log(offset, max_bytes - size, min_one and not out)
                out += rest
                self._extend(key, plog, run, rest, first)
                break
            batch = run.batches[i]
            if size + len(batch) > max_bytes and (out or not min_one):
                break
            out.append(batch)
            size += len(batch)
            cached += 1
            offset = run.nexts[i]
            i += 1
        if key in self._runs:
            self._runs.move_to_end(key)
        if cached:
            self.hits += 1
        else:
            self.misses += 1
        return out

    def get(self, key: CacheKey, plog: PartitionLog, offset: int, max_bytes: int, min_one: bool,
            max_offset: int | None) -> list[bytes] | None:
        """What ``read`` returns when the run holds all of it; None (nothing read) otherwise."""
        def short(offset: int, max_bytes: int, min_one: bool) -> list[bytes]:
            raise _NotCached

        try:
            return self.read(key, plog, offset, max_bytes, min_one, max_offset, short)
        except _NotCached:
            return None

    def _extend(self, key: CacheKey, plog: PartitionLog, run: _Run | None, batches: list[bytes], first: int) -> None:
        """Append what a read returned to the partition's run (a new run when ``run`` is
        None), drop the run's batches wholly below ``first`` (the read's start), and keep the
        bounds: a run at most a quarter of the cache, all runs at most the cache."""
        # a covering batch (no records: lost or parked offsets) is sized to the log end of
        # its read, which a later read may see further: such runs are read again
        if any(b[57:61] == _NO_RECORDS for b in batches):
            self.discard(key)
            return
        if run is None:
            if not batches:
                return
            run = self._runs[key] = _Run(plog, [], [], [], 0)
        added = 0
        for b in batches:
            run.batches.append(b)
            run.bases.append(record_batch.base_offset_of(b))
            run.nexts.append(record_batch.next_offset_of(b))
            added += len(b)
        run.size += added
        self._size += added
        drop = 0
        while drop < len(run.batches) - 1 and (run.nexts[drop] <= first or run.size > self.max_bytes // 4):
            run.size -= len(run.batches[drop])
            self._size -= len(run.batches[drop])
            drop += 1
        if drop:
            del run.batches[:drop], run.bases[:drop], run.nexts[:drop]
        if run.size > self.max_bytes // 4:  # one batch larger than a run may be
            self.discard(key)
        while self._size > self.max_bytes:
            _, old = self._runs.popitem(last=False)
            self._size -= old.size

    def put(self, key: CacheKey, plog: PartitionLog, batches: list[bytes]) -> None:
        """Keep what a read returned (replacing the partition's previous run)."""
        self.discard(key)
        self._extend(key, plog, None, list(batches), 0)

    def discard(self, key: CacheKey) -> None:
        run = self._runs.pop(key, None)
        if run is not None:
            self._size -= run.size

    @property
    def size(self) -> int:
        return self._size
