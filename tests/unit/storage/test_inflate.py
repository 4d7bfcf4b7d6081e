"""Decompression with a bound (storage.inflate): every codec inflates what it holds, stops
one byte past the limit, and a bomb is refused before it costs more than the limit."""

from __future__ import annotations

import tracemalloc

import pytest

from batches import make_batch
from rmqkafka.storage import record_batch
from rmqkafka.storage.errors import CorruptRecordError, RecordTooLargeError
from rmqkafka.storage.inflate import GZIP, LZ4, SNAPPY, ZSTD, inflate
from rmqkafka.storage.recompress import Compression, encode_records
from storage_helpers import append

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_and_the_bound(codec):
    data = bytes(range(256)) * 1000 + b"\x00" * 300_000
    packed = encode_records(Compression(codec), data)
    assert inflate(codec, packed, len(data)) == data
    with pytest.raises(RecordTooLargeError, match=f"more than {len(data) - 1} bytes"):
        inflate(codec, packed, len(data) - 1)
    with pytest.raises(CorruptRecordError):
        inflate(codec, b"\xff" * 64, len(data))


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_costs_at_most_the_limit(codec):
    """256 MB of zeros compress to a few hundred KB; refused at a 4 MB limit without
    allocating anything near the whole."""
    zeros = bytes(256 << 20)
    bomb = bytes(encode_records(Compression(codec), zeros))
    del zeros
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            inflate(codec, bomb, 4 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"{peak >> 20} MB allocated to refuse a bomb"


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])  # snappy cannot pack more than ~21x
def test_a_produced_bomb_is_refused_and_nothing_is_written(stores, codec):
    store = stores.open()
    store.create_topic("t", 1, {})
    batch = make_batch([bytes(8 << 20)], codec=codec)  # one 8 MB record of zeros
    with pytest.raises(RecordTooLargeError, match="inflate"):
        append(store, "t", 0, batch, max_batch_bytes=100_000)
    assert store.partition("t", 0).next_offset == 0
    assert [r.value for r in record_batch.read_records(batch)] == [bytes(8 << 20)]  # fine when stored
