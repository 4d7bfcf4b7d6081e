"""Reading a system topic's keyed records back, for state rebuilt on start."""

from __future__ import annotations

from collections.abc import Iterator

from . import record_batch
from .record_batch import CONTROL_BIT

_READ_CHUNK = 1 << 24


def keyed_records(plog) -> Iterator[tuple[int, bytes, bytes]]:
    """(offset, key, value) of every data record of ``plog`` (a PartitionLog) from its log
    start offset on; control batches and records without a key or a value are skipped.
    Batches are CRC-checked by ``read``; a torn tail was cut at recovery."""
    offset = plog.log_start_offset
    while offset < plog.next_offset:
        result = plog.read(offset, _READ_CHUNK, True)
        if not result.batches:
            break
        for batch in result.batches:
            if not batch[22] & CONTROL_BIT:
                for record in record_batch.read_records(batch):
                    if record.key is not None and record.value is not None:
                        yield record.offset, bytes(record.key), bytes(record.value)
            offset = record_batch.next_offset_of(batch)
