"""storage.record_layout and storage.batch_builder: record framing read without decoding, and
the batches a filtered read builds (checked with aiokafka's and kafka-python's readers)."""

from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from batches import BASE_TS, CODEC_NAMES, CODECS, NONE, ZSTD, make_batch, records
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from rmqkafka.storage import record_batch
from rmqkafka.storage.batch_builder import covering_batch, subset_batch
from rmqkafka.storage.errors import CorruptRecordError
from rmqkafka.storage.recompress import Compression, records_region
from rmqkafka.storage.record_layout import record_ends, record_headers, timestamp_delta


def sized(*sizes: int) -> bytes:
    """Records whose values are ``sizes`` bytes: 1-, 2- and 3-byte length varints."""
    return make_batch([b"v" * n for n in sizes], keys=[b"key-%d" % i for i in range(len(sizes))],
                      headers=[[("a", b"1"), ("TAGS", b"T%d" % i), ("n", None)] for i in range(len(sizes))],
                      timestamps=[BASE_TS + 7 * i - 3 for i in range(len(sizes))])


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_record_ends_headers_and_timestamps_agree_with_aiokafka(codec):
    batch = make_batch([b"v" * n for n in (0, 10, 60, 64, 200, 8000, 9000, 70000)], codec=codec,
                       headers=[[("a", b"1"), ("TAGS", b"T%d" % i), ("n", None)] for i in range(8)],
                       timestamps=[BASE_TS + 7 * i - 3 for i in range(8)])
    region = bytes(records_region(batch))
    ends = record_ends(region)
    decoded = records(batch)
    assert len(ends) == len(decoded) and ends[-1] == len(region)
    base_ts = record_batch.read_info(batch).base_timestamp
    for i, record in enumerate(decoded):
        start = ends[i - 1] if i else 0
        assert record_headers(region, start) == list(record.headers)
        assert base_ts + timestamp_delta(region, start) == record.timestamp


def test_bad_framing_is_refused():
    region = bytes(records_region(sized(3, 4)))
    with pytest.raises(CorruptRecordError):
        record_ends(region[:-1])
    with pytest.raises(CorruptRecordError):
        record_ends(b"\x01")  # a negative length
    with pytest.raises(CorruptRecordError):
        record_headers(b"\xff", 0)


@pytest.mark.parametrize("codec", [NONE, ZSTD], ids=["to none", "to zstd"])
def test_subset_batch(codec):
    source = record_batch.stored_parts(memoryview(sized(5, 100, 300, 9000)), 40, None)
    source = b"".join(bytes(p) for p in source)
    region = bytes(records_region(source))
    got = subset_batch(source, region, record_ends(region), [1, 3], Compression(codec) if codec else None)
    assert record_batch.crc_ok(got)
    info, original = record_batch.read_info(got), record_batch.read_info(source)
    assert record_batch.base_offset_of(got) == 40 and info.last_offset_delta == 3
    assert info.records_count == 2 and info.compression == codec
    assert info.base_timestamp == original.base_timestamp
    assert info.max_timestamp == BASE_TS + 7 * 3 - 3
    kept = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records(got)]
    every = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records(source)]
    assert kept == [every[1], every[3]]
    assert [r.offset for r in KafkaPythonBatch(got)] == [41, 43]


def test_covering_batch_is_a_commit_marker_covering_the_range():
    batch = covering_batch(100, 1_000_099)
    info = record_batch.read_info(batch)
    assert record_batch.crc_ok(batch) and info.length == len(batch)
    assert record_batch.next_offset_of(batch) == 1_000_100
    assert info.is_control and info.producer_id == -1 and info.records_count == 1
    for reader in (DefaultRecordBatch, KafkaPythonBatch):
        parsed = reader(batch)
        assert parsed.is_control_batch and parsed.next_offset == 1_000_100
        (marker,) = list(parsed)
        assert marker.offset == 1_000_099 and marker.key == struct.pack(">hh", 0, 1)  # COMMIT
