"""Re-encoding batches with another codec (storage/recompress.py), the record timestamp
check (record_batch.timestamp_errors), and both inside MessageStore.append."""

from __future__ import annotations

import itertools
import struct

import pytest
from batches import (
    BASE_TS,
    CODEC_NAMES,
    CODECS,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    fix_crc,
    idempotent,
    make_batch,
    records,
)
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.errors import (
    CorruptRecordError,
    InvalidTimestampError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from rmqkafka.storage.recompress import Compression, recompress
from storage_helpers import append, read_all

# Header bytes a re-encoding keeps: base offset; leader epoch and magic; last offset delta
# .. records count (the length at 8, the CRC at 17 and the attributes at 21 change).
_KEPT = [(0, 8), (12, 17), (23, 61)]
_NOT_CODEC = ~rb.COMPRESSION_MASK & 0xFFFF


def sample_batches(codec: int) -> dict[str, bytes]:
    """Batches that exercise every field a re-encoding must keep."""
    return {
        "plain": make_batch(5, codec=codec),
        "idempotent": idempotent(
            [b"a", None, b"c" * 3000], 4242, 7, 123_456, codec=codec,
            keys=[None, b"k1", b""], headers=[[("h", b"1"), ("n", None)], [], [("TAGS", b"T")]],
            timestamps=[BASE_TS + 50, BASE_TS - 7, BASE_TS + 9],
        ),
        "transactional": idempotent([b"t1", b"t2"], 99, 0, 0, codec=codec, transactional=True),
        "compressible": make_batch([b"x" * 100_000, b"y" * 70_000], codec=codec),
    }


def attrs(batch) -> int:
    return struct.unpack_from(">h", batch, 21)[0]


def record_fields(batch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records(bytes(batch))]


@pytest.mark.parametrize(
    ("source", "target"),
    list(itertools.product(CODECS, CODECS)),
    ids=[f"{CODEC_NAMES[a]}-to-{CODEC_NAMES[b]}" for a, b in itertools.product(CODECS, CODECS)],
)
def test_every_codec_pair_keeps_every_record_and_header_field(source, target):
    for name, batch in sample_batches(source).items():
        out = bytes(recompress(batch, Compression(target)))
        assert rb.crc_ok(out), name
        assert attrs(out) & rb.COMPRESSION_MASK == target, name
        assert attrs(out) & _NOT_CODEC == attrs(batch) & _NOT_CODEC, name  # txn/control/ts type
        for start, end in _KEPT:
            assert out[start:end] == batch[start:end], name
        assert struct.unpack_from(">i", out, 8)[0] == len(out) - rb.LOG_OVERHEAD, name
        assert record_fields(out) == record_fields(batch), name
        rb.validate(memoryview(out))


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_same_codec_is_returned_as_is(codec):
    batch = make_batch(3, codec=codec)
    view = memoryview(batch)
    assert recompress(view, Compression(codec, 5 if codec in (GZIP, LZ4, ZSTD) else None)) is view


@pytest.mark.parametrize(
    ("codec", "levels"),
    [(GZIP, (-1, 1, 9)), (LZ4, (1, 9, 17)), (ZSTD, (-131072, -5, 3, 22))],
    ids=["gzip", "lz4", "zstd"],
)
def test_levels(codec, levels):
    text = b" ".join(b"record %d of a fairly repetitive payload" % i for i in range(3000))
    batch = make_batch([text], codec=NONE)
    sizes = {}
    for level in levels:
        out = bytes(recompress(batch, Compression(codec, level)))
        assert record_fields(out) == record_fields(batch)
        sizes[level] = len(out)
    # The fastest setting compresses worst and the strongest best.
    assert sizes[levels[0] if codec != GZIP else 1] > sizes[levels[-1]]


def test_snappy_uses_xerial_framing_and_reads_raw_snappy():
    import cramjam

    plain = make_batch(3)
    out = bytes(recompress(plain, Compression(SNAPPY)))
    assert out[rb.HEADER_SIZE : rb.HEADER_SIZE + 8] == b"\x82SNAPPY\x00"  # as Java writes it
    # librdkafka writes raw snappy (no framing); that is read too.
    raw = bytearray(plain[: rb.HEADER_SIZE]) + bytes(cramjam.snappy.compress_raw(plain[rb.HEADER_SIZE :]))
    struct.pack_into(">i", raw, 8, len(raw) - rb.LOG_OVERHEAD)
    struct.pack_into(">h", raw, 21, SNAPPY)
    assert record_fields(recompress(fix_crc(raw), Compression(NONE))) == record_fields(plain)


def test_lz4_frames_have_independent_blocks():
    out = bytes(recompress(make_batch(3), Compression(LZ4)))
    body = out[rb.HEADER_SIZE :]
    assert body[:4] == b"\x04\x22\x4d\x18"
    assert body[4] & 0x20  # FLG: block independence (Kafka's LZ4 reader needs it)


def test_control_batches_are_left_alone():
    out = bytearray(make_batch(1))
    struct.pack_into(">h", out, 21, rb.CONTROL_BIT)
    control = fix_crc(out)
    assert recompress(control, Compression(ZSTD)) is control


def test_a_body_that_does_not_decompress_is_corrupt():
    batch = bytearray(make_batch(3, codec=GZIP))
    batch[rb.HEADER_SIZE + 12 :] = b"\x00" * (len(batch) - rb.HEADER_SIZE - 12)
    with pytest.raises(CorruptRecordError, match="does not decompress"):
        recompress(fix_crc(batch), Compression(ZSTD))


# -- timestamp_errors ------------------------------------------------------------------------


def test_timestamp_errors_in_kafkas_words():
    batch = make_batch(4, timestamps=[BASE_TS, BASE_TS - 1001, -1, BASE_TS + 2001])
    recs = rb.read_records(batch)
    assert rb.timestamp_errors(recs, BASE_TS - 1000, BASE_TS + 2000) == [
        (1, (f"Timestamp {BASE_TS - 1001} of message with offset 1 is out of range. "
            f"The timestamp should be within [{BASE_TS - 1000}, {BASE_TS + 2000}]")),
        (3, (f"Timestamp {BASE_TS + 2001} of message with offset 3 is out of range. "
            f"The timestamp should be within [{BASE_TS - 1000}, {BASE_TS + 2000}]")),
    ]  # -1 (no timestamp) is exempt, as in Kafka
    assert rb.timestamp_errors(recs[:1], BASE_TS, BASE_TS) == []  # bounds are inclusive


# -- MessageStore.append -----------------------------------------------------------------------


@pytest.fixture
def store(stores):
    s = stores.open()
    s.create_topic("t", 1, {})
    return s


def test_append_recompresses_and_reads_back(store):
    batches = [make_batch(3, codec=GZIP), make_batch(2, codec=ZSTD), make_batch(2, codec=LZ4)]
    append(store, "t", 0, *batches, compression=Compression(ZSTD, 5))
    stored = read_all(store, "t", 0)
    assert [attrs(b) & rb.COMPRESSION_MASK for b in stored] == [ZSTD, ZSTD, ZSTD]
    assert [r.value for b in stored for r in records(bytes(b))] == [
        r.value for b in batches for r in records(b)
    ]
    assert [r.offset for b in stored for r in records(bytes(b))] == list(range(7))
    assert all(rb.crc_ok(b) for b in stored)


def test_append_without_compression_stores_the_producers_bytes(store):
    batch = make_batch(3, codec=GZIP)
    append(store, "t", 0, batch)
    (stored,) = read_all(store, "t", 0)
    assert bytes(stored)[17:] == batch[17:]


def test_max_batch_bytes_applies_as_received_and_as_stored(store):
    big = make_batch([b"z" * 50_000], codec=GZIP)  # ~150 bytes compressed
    with pytest.raises(RecordTooLargeError, match="after recompression to none"):
        append(store, "t", 0, big, max_batch_bytes=10_000, compression=Compression(NONE))
    plain = make_batch([b"z" * 50_000])
    with pytest.raises(RecordTooLargeError, match="exceeds the maximum of 10000"):
        append(store, "t", 0, plain, max_batch_bytes=10_000, compression=Compression(ZSTD))
    assert read_all(store, "t", 0) == []
    append(store, "t", 0, big, max_batch_bytes=10_000, compression=Compression(ZSTD))


def test_what_is_stored_must_fit_a_segment(stores):
    store = stores.open(segment_bytes=20_000)
    store.create_topic("t", 1, {})
    big = make_batch([b"z" * 50_000], codec=GZIP)
    with pytest.raises(RecordListTooLargeError, match="after recompression to none exceed the segment size"):
        append(store, "t", 0, big, compression=Compression(NONE))


def test_idempotent_batches_deduplicate_after_recompression(store):
    first = idempotent([b"a", b"b"], 5, 0, 0, codec=GZIP)
    assert append(store, "t", 0, first, compression=Compression(LZ4)).base_offset == 0
    again = append(store, "t", 0, first, compression=Compression(LZ4))
    assert again.duplicate and again.base_offset == 0
    assert append(store, "t", 0, idempotent([b"c"], 5, 0, 2), compression=Compression(LZ4)).base_offset == 2
    stored = read_all(store, "t", 0)
    assert [(rb.read_info(b).producer_id, rb.read_info(b).base_sequence) for b in stored] == [(5, 0), (5, 2)]


def test_timestamp_range_refuses_the_whole_request(store):
    good = make_batch(2, timestamps=[BASE_TS, BASE_TS])
    bad = make_batch(3, timestamps=[BASE_TS, BASE_TS + 10_000, BASE_TS])
    with pytest.raises(InvalidTimestampError) as info:
        append(store, "t", 0, good, bad, timestamp_range=(BASE_TS - 5, BASE_TS + 5))
    assert str(info.value) == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in info.value.record_errors] == [1]
    assert read_all(store, "t", 0) == []
    # LogAppendTime replaces the timestamps, so the range does not apply.
    append(store, "t", 0, good, bad, timestamp_range=(BASE_TS - 5, BASE_TS + 5), log_append_time=True)
    assert len(read_all(store, "t", 0)) == 2
