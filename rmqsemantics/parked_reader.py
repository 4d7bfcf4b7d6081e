"""Single parked records by offset, for the timers' delivery.

The timers of one produced batch are parked in one batch of ``rmq_sys_wheel_timer`` but fall
due at different times, so a slot of the timing wheel needs a few records of many batches.
Parsing a whole batch for each would cost its every record per slot; instead the reader
keeps recently used batches parsed (aiokafka's C reader, ~0.3 us a record), within a budget
of batch bytes, least recently used first out: a batch is parsed once while its records
fall due. Parked batches are the broker's own: a record at every offset.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from rmqkafka.storage import record_batch
from rmqkafka.storage.partition_log import PartitionLog

from .parked_records import real_partition

# Bytes of parked batches kept parsed (their records take a few times as much as objects).
CACHE_BYTES = 8 << 20
# Bytes of batches kept as built (``remember``): the newest, for ends that follow their half
# messages soon; small, since they are kept whether or not an end ever comes (100,000 half
# messages never ended must not hold 8 MiB of batches as objects, 30 MB and more).
BUILT_BYTES = 1 << 20


class BuiltRecord(NamedTuple):
    """A record of a batch the broker built, as the builder was given it: what reading the
    batch back would give (offset, timestamp, key, value, headers), without the parse."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list


class ParkedReader:
    def __init__(self, budget_bytes: int = CACHE_BYTES, built_bytes: int = BUILT_BYTES) -> None:
        self._budget = budget_bytes
        self._size = 0
        self._built_budget = built_bytes
        self._built_size = 0
        self._built: OrderedDict[int, tuple[int, int, list, tuple[str, int] | None]] = OrderedDict()
        # position -> (size, base offset, records (rows in _built), their real partition)
        self._batches: OrderedDict[int, tuple[int, int, list, tuple[str, int] | None]] = OrderedDict()
        self._last: tuple[int, int, PartitionLog, tuple] | None = None  # (base, end, plog, cached)

    def record(self, plog: PartitionLog, offset: int) -> tuple[object, tuple[str, int] | None] | None:
        """The record at ``offset`` of ``plog`` (an aiokafka record) and the partition it is
        for (a parked batch's records share it), None if its batch holds no record there."""
        last = self._last
        if last is not None and last[2] is plog and last[0] <= offset < last[1]:
            cached = last[3]  # the batch of the previous record: no consume-queue lookup
            return self._at(cached, offset)
        position, size, _ = plog.consume_queue.entry(offset)
        if size == 0:  # a lost offset (damaged commitlog range): no record there
            return None
        built = self._built.get(position)
        if built is not None:  # rows as built: a record is made only for the one asked for
            _, base, rows, real = built
            index = offset - base
            return (BuiltRecord(offset, *rows[index]), real) if 0 <= index < len(rows) else None
        cached = self._batches.get(position)
        if cached is None:
            batch = plog.read_at(position, size)
            records = record_batch.read_records(batch)
            real = real_partition(records[0]) if records else None
            cached = (size, record_batch.base_offset_of(batch), records, real)
            self._batches[position] = cached
            self._size += size
            while self._size > self._budget and len(self._batches) > 1:
                _, (old, *_) = self._batches.popitem(last=False)
                self._size -= old
        elif position in self._batches:
            self._batches.move_to_end(position)
        self._last = (cached[1], cached[1] + len(cached[2]), plog, cached)
        return self._at(cached, offset)

    def remember(self, plog: PartitionLog, base: int, size: int, rows: list, real: tuple[str, int]) -> None:
        """Keep a batch just appended to ``plog`` at offset ``base`` (``size`` bytes, built
        from (timestamp, key, value, headers) ``rows`` for partition ``real``) as if it had
        been read: its records are found without reading or parsing it."""
        position, _, _ = plog.consume_queue.entry(base)
        self._built[position] = (size, base, rows, real)
        self._built_size += size
        while self._built_size > self._built_budget and len(self._built) > 1:
            _, (old, *_) = self._built.popitem(last=False)
            self._built_size -= old
        self._last = None

    @staticmethod
    def _at(cached: tuple[int, int, list, tuple[str, int] | None], offset: int):
        _, base, records, real = cached
        index = offset - base
        if not 0 <= index < len(records) or records[index].offset != offset:
            return None
        return records[index], real

    def clear(self) -> None:
        self._batches.clear()
        self._size = 0
        self._built.clear()
        self._built_size = 0
        self._last = None
