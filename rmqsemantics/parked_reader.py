"""Single parked records by offset, for the timers' delivery.

The timers of one produced batch are parked in one batch of ``rmq_sys_wheel_timer`` but fall
due at different times, so a slot of the timing wheel needs a few records of many batches.
Parsing a whole batch for each would cost its every record per slot; instead the reader
keeps recently used batches (their bytes and record boundaries, within a byte budget, least
recently used first out) and decodes only the record asked for. Parked batches are the
broker's own: uncompressed, CreateTime, a record at every offset.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass

from rmqkafka.storage.partition_log import PartitionLog
from rmqkafka.storage.record_batch import HEADER_SIZE
from rmqkafka.storage.record_layout import Header, decode_record, record_ends

CACHE_BYTES = 16 << 20
_BASE = struct.Struct(">q")
_BASE_TIMESTAMP = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ParkedRecord:
    """A record as delivery needs it (the fields aiokafka's records have)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


class ParkedReader:
    def __init__(self, budget_bytes: int = CACHE_BYTES) -> None:
        self._budget = budget_bytes
        self._size = 0
        self._batches: OrderedDict[int, tuple[bytes, int, int, list[int]]] = OrderedDict()

    def record(self, plog: PartitionLog, offset: int) -> ParkedRecord | None:
        """The record at ``offset`` of ``plog`` (None if its batch holds no such record)."""
        position, size, _ = plog.consume_queue.entry(offset)
        cached = self._batches.get(position)
        if cached is None:
            batch = plog.read_at(position, size)
            cached = (batch, _BASE.unpack_from(batch, 0)[0], _BASE_TIMESTAMP.unpack_from(batch, 27)[0],
                      record_ends(memoryview(batch)[HEADER_SIZE:]))
            self._batches[position] = cached
            self._size += len(batch)
            while self._size > self._budget and len(self._batches) > 1:
                _, (old, *_) = self._batches.popitem(last=False)
                self._size -= len(old)
        else:
            self._batches.move_to_end(position)
        batch, base, base_timestamp, ends = cached
        index = offset - base
        if not 0 <= index < len(ends):
            return None
        region = memoryview(batch)[HEADER_SIZE:]
        timestamp_delta, offset_delta, key, value, headers = decode_record(region, ends[index - 1] if index else 0)
        if offset_delta != index:
            return None
        return ParkedRecord(offset, base_timestamp + timestamp_delta, key, value, headers)

    def clear(self) -> None:
        self._batches.clear()
        self._size = 0
