from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from batches import (
    CODEC_NAMES,
    CODECS,
    GZIP,
    fix_crc,
    flip,
    legacy_message,
    make_batch,
    records,
    with_field,
)
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.errors import CorruptRecordError, InvalidRecordError

codecs = pytest.mark.parametrize("codec", CODECS, ids=lambda c: CODEC_NAMES[c])


# -- split_batches / validate ------------------------------------------------------------------
def test_split_several_concatenated_batches():
    parts = [make_batch(3), make_batch(1, codec=GZIP), make_batch([b"x" * 500] * 4, codec=4)]
    out = rb.split_batches(b"".join(parts))
    assert [bytes(b) for b in out] == parts
    assert all(isinstance(b, memoryview) for b in out)


def test_split_single_batch_returns_views_not_copies():
    data = bytearray(make_batch(2))
    (view,) = rb.split_batches(data)
    assert view.obj is data


def test_empty_record_set_is_invalid():
    with pytest.raises(InvalidRecordError):
        rb.split_batches(b"")


@codecs
def test_any_flipped_byte_covered_by_crc_is_corrupt(codec):
    batch = make_batch([b"abc", None, b"x" * 40], codec=codec, tags=["TagA", None, "B"])
    for at in range(17, len(batch)):  # the CRC itself and everything it covers
        with pytest.raises(CorruptRecordError):
            rb.split_batches(flip(batch, at))


def test_flipped_byte_in_second_batch_is_corrupt():
    a, b = make_batch(2), make_batch(2)
    with pytest.raises(CorruptRecordError):
        rb.split_batches(a + flip(b, 40))


def test_base_offset_and_leader_epoch_are_not_covered_by_crc():
    batch = make_batch(2)
    for at in (0, 7, 12, 15):
        rb.split_batches(flip(batch, at))  # accepted: the broker overwrites these fields


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("value", [b"v", b"v" * 200], ids=["small", "large"])
def test_old_magic_is_invalid_not_corrupt(magic, value):
    with pytest.raises(InvalidRecordError, match="magic"):
        rb.split_batches(legacy_message(magic, value))


def test_magic_1_after_a_good_batch_is_invalid():
    with pytest.raises(InvalidRecordError):
        rb.split_batches(make_batch(1) + legacy_message(1))


def test_unknown_magic_3_is_invalid():
    batch = bytearray(make_batch(1))
    batch[16] = 3
    with pytest.raises(InvalidRecordError):
        rb.split_batches(bytes(batch))


@pytest.mark.parametrize("cut", [1, 10, 30, 60])
def test_truncated_batch_is_corrupt(cut):
    batch = make_batch(3)
    with pytest.raises(CorruptRecordError):
        rb.split_batches(batch[:-cut])
    with pytest.raises(CorruptRecordError):
        rb.split_batches(make_batch(1) + batch[:-cut])


@pytest.mark.parametrize("keep", [5, 12, 17, 20, 40])
def test_truncated_header_is_corrupt(keep):
    with pytest.raises(CorruptRecordError):
        rb.split_batches(make_batch(1)[:keep])


def test_length_field_contradictions_are_corrupt():
    batch = make_batch(2)
    with pytest.raises(CorruptRecordError):  # longer than the data
        rb.split_batches(with_field(batch, 8, ">i", len(batch), recrc=False))
    with pytest.raises(CorruptRecordError):  # shorter than a header
        rb.split_batches(with_field(batch, 8, ">i", 10, recrc=False))
    with pytest.raises(CorruptRecordError):
        rb.split_batches(with_field(batch, 8, ">i", -1, recrc=False))
    with pytest.raises(CorruptRecordError):  # trailing garbage after the last batch
        rb.split_batches(batch + b"\x00" * 20)


def test_records_count_mismatch_is_invalid():
    batch = make_batch(3)
    with pytest.raises(InvalidRecordError):
        rb.split_batches(with_field(batch, 57, ">i", 4))  # count 4, last delta 2
    with pytest.raises(InvalidRecordError):
        rb.split_batches(with_field(batch, 23, ">i", 5))  # count 3, last delta 5
    with pytest.raises(InvalidRecordError):
        rb.split_batches(with_field(with_field(batch, 57, ">i", 0), 23, ">i", -1))


def test_read_info():
    batch = make_batch(4, producer_id=7, producer_epoch=2, base_sequence=10, codec=GZIP,
                       timestamps=[50, 40, 90, 60], transactional=True)
    info = rb.read_info(batch)
    assert info.length == len(batch)
    assert info.records_count == 4 and info.last_offset_delta == 3
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (7, 2, 10)
    assert info.last_sequence == 13
    assert (info.base_timestamp, info.max_timestamp) == (50, 90)
    assert info.compression == GZIP
    assert info.attributes & rb.TRANSACTIONAL_BIT
    assert not info.is_control


def test_last_sequence_wraps_at_int32_max():
    info = rb.read_info(make_batch(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert info.last_sequence == 0
    assert rb.read_info(make_batch(1)).last_sequence == rb.NO_SEQUENCE


def test_offsets_of_a_stored_batch():
    batch = with_field(make_batch(5), 0, ">q", 100, recrc=False)
    assert rb.base_offset_of(batch) == 100
    assert rb.next_offset_of(batch) == 105


# -- stored_parts ------------------------------------------------------------------------------
def _joined(parts) -> bytes:
    return b"".join(bytes(p) for p in parts)


@codecs
def test_stored_parts_patches_only_base_offset_and_leader_epoch(codec):
    original = bytearray(make_batch(3, codec=codec))
    struct.pack_into(">i", original, 12, 77)  # a producer-side leader epoch
    view = memoryview(original)
    parts = rb.stored_parts(view, 1234, None)
    stored = _joined(parts)
    assert rb.base_offset_of(stored) == 1234
    assert struct.unpack_from(">i", stored, 12)[0] == 0
    assert stored[8:12] == original[8:12]
    assert stored[16:] == original[16:]
    assert len(parts[0]) == 17
    assert isinstance(parts[1], memoryview) and parts[1].obj is original  # no copy of the body
    assert rb.crc_ok(stored) and DefaultRecordBatch(stored).validate_crc()
    assert [r.offset for r in records(stored)] == [1234, 1235, 1236]
    assert bytes(original) == bytes(view)  # the input is untouched


@codecs
def test_stored_parts_log_append_time(codec):
    original = make_batch([b"a", b"b", b"c"], codec=codec, timestamps=[10, 30, 20])
    parts = rb.stored_parts(memoryview(original), 50, 999_999)
    stored = _joined(parts)
    info = rb.read_info(stored)
    assert info.attributes & rb.TIMESTAMP_TYPE_BIT
    assert info.compression == codec
    assert info.max_timestamp == 999_999
    assert info.base_timestamp == 10  # left alone, as Kafka does
    assert rb.crc_ok(stored) and DefaultRecordBatch(stored).validate_crc()
    assert rb.split_batches(stored)  # a valid batch again
    # Everything else is byte for byte the producer's.
    assert stored[8:12] == original[8:12]
    assert stored[16] == original[16]
    assert stored[23:35] == original[23:35]
    assert stored[43:] == original[43:]
    recs = records(stored)
    assert [(r.offset, r.timestamp, r.timestamp_type, r.value) for r in recs] == [
        (50, 999_999, 1, b"a"), (51, 999_999, 1, b"b"), (52, 999_999, 1, b"c")
    ]


# -- header_values -----------------------------------------------------------------------------
@codecs
def test_header_values_with_tags(codec):
    batch = make_batch(4, codec=codec, headers=[("k", b"v")], tags=["TagA", None, "标签", "TagA"])
    assert rb.header_values(batch, "TAGS") == [b"TagA", None, "标签".encode(), b"TagA"]
    assert rb.header_values(batch, "k") == [b"v"] * 4


@codecs
def test_header_values_without_the_header(codec):
    assert rb.header_values(make_batch(3, codec=codec), "TAGS") is None
    other = make_batch(3, codec=codec, headers=[("KEYS", b"TAGS"), ("TAGSX", b"a")])
    assert rb.header_values(other, "TAGS") is None  # the name appears, but as a value/prefix


@codecs
def test_header_values_null_header_value(codec):
    batch = make_batch(2, codec=codec, headers=[[("TAGS", None)], []])
    # present-but-null is the same as absent for the consume queue (tag code 0)
    assert rb.header_values(batch, "TAGS") in ([None, None], None)


def test_header_values_first_occurrence_wins():
    batch = make_batch(1, headers=[("TAGS", b"first"), ("TAGS", b"second")])
    assert rb.header_values(batch, "TAGS") == [b"first"]


@codecs
def test_has_headers_is_any_record_with_a_header(codec):
    assert not rb.has_headers(rb.read_records(make_batch(3, codec=codec)))
    assert not rb.has_headers([])
    # a header name in a value is not a header
    assert not rb.has_headers(rb.read_records(make_batch([b"TAGS DELAY TRAN_MSG"], codec=codec)))
    assert rb.has_headers(rb.read_records(make_batch(3, codec=codec, headers=[[], [], [("k", None)]])))


def _counting(fn, calls):
    def wrapper(*args, **kw):
        calls.append(args)
        return fn(*args, **kw)

    return wrapper


def test_every_batch_is_parsed_but_headers_scanned_only_when_needed(monkeypatch):
    parsed = []
    monkeypatch.setattr(rb, "read_records", _counting(rb.read_records, parsed))
    assert rb.header_values(make_batch(5, headers=[("KEYS", b"k")]), "TAGS") is None
    assert rb.header_values(memoryview(make_batch(5)), "TAGS") is None
    assert rb.header_values(make_batch(5, codec=GZIP), "TAGS") is None
    assert rb.header_values(make_batch(2, tags=["a", "b"]), "TAGS") == [b"a", b"b"]
    assert len(parsed) == 4  # the record count of every batch is checked


def test_uncompressed_batch_lying_about_its_record_count_is_corrupt():
    batch = make_batch(5)  # no tag header: the fast path must still count the records
    for count in (6, 4):
        lying = with_field(with_field(batch, 57, ">i", count), 23, ">i", count - 1)
        with pytest.raises(CorruptRecordError):
            rb.header_values(lying, "TAGS")


@codecs
def test_header_values_on_crc_valid_garbage_is_corrupt_record_error(codec):
    """A batch can carry a correct CRC over a body that does not parse (a buggy or hostile
    producer computes the CRC last). Parsing must fail with the store's own error."""
    batch = make_batch(3, codec=codec, tags=["a", "b", "c"])
    lying = with_field(with_field(batch, 57, ">i", 4), 23, ">i", 3)  # claims 4 records
    with pytest.raises(CorruptRecordError):
        rb.header_values(lying, "TAGS")
    short = with_field(with_field(batch, 57, ">i", 2), 23, ">i", 1)  # claims 2 records
    with pytest.raises(CorruptRecordError):
        rb.header_values(short, "TAGS")


def test_header_values_on_garbage_compressed_payload():
    batch = bytearray(make_batch(3, codec=GZIP, tags=["a", "b", "c"]))
    batch[-6] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        rb.header_values(fix_crc(batch), "TAGS")


# -- timestamps --------------------------------------------------------------------------------
@codecs
def test_timestamp_lookups_inside_a_batch(codec):
    batch = with_field(make_batch(4, codec=codec, timestamps=[100, 300, 200, 300]), 0, ">q", 10,
                       recrc=False)
    assert rb.first_offset_at_or_after(batch, 0) == (10, 100)
    assert rb.first_offset_at_or_after(batch, 150) == (11, 300)
    assert rb.first_offset_at_or_after(batch, 301) is None
    assert rb.offset_of_timestamp(batch, 300) == 11
    assert rb.offset_of_timestamp(batch, 200) == 12
    assert rb.offset_of_timestamp(batch, 250) is None


def test_crc_ok():
    batch = make_batch(2)
    assert rb.crc_ok(batch) and rb.crc_ok(memoryview(batch))
    assert not rb.crc_ok(flip(batch, 30))
    assert rb.crc_ok(flip(batch, 3))
