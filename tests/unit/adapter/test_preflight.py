"""The bounds walk agrees with kio on valid bytes and refuses impossible lengths."""

from __future__ import annotations

import io
import struct

import pytest

from kio.index import load_request_schema
from kio.index import load_response_schema
from kio.serial import entity_reader
from kio.serial import entity_writer
from kio_builders import build

from rmqkafka.adapter.codec.errors import MalformedRequest
from rmqkafka.adapter.codec.messages import decode_request
from rmqkafka.adapter.codec.preflight import BoundsError
from rmqkafka.adapter.codec.preflight import entity_skipper
from rmqkafka.adapter.codec.versions import ADVERTISED_VERSIONS
from rmqkafka.adapter.codec.versions import supported_versions

ALL_SCHEMAS = [
    loader(key, version)
    for key in sorted(ADVERTISED_VERSIONS)
    for version in supported_versions(key)
    for loader in (load_request_schema, load_response_schema)
]


def encoded(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def schema_id(schema: type) -> str:
    return f"{schema.__module__.split('.')[2]}-v{schema.__version__}-{schema.__name__}"


@pytest.mark.parametrize("schema", ALL_SCHEMAS, ids=schema_id)
def test_walk_ends_where_kio_ends(schema: type) -> None:
    # Responses too: they hold the shapes requests lack (tagged structs, uuids, ...).
    skip = entity_skipper(schema)
    for full in (True, False):
        data = b"\x07\x07" + encoded(build(schema, full))
        _, consumed = entity_reader(schema)(data, 2)
        assert skip(data, 2) == 2 + consumed
        for cut in range(2, len(data)):
            with pytest.raises(BoundsError):
                skip(data[:cut], 2)


def flexible_metadata_request(topics_section: bytes, tags: bytes = b"\x00") -> bytes:
    # Metadata v12 body: topics compact array, allow_auto_topic_creation,
    # include_topic_authorized_operations, tagged fields.
    return topics_section + b"\x01\x00" + tags


METADATA_V12 = load_request_schema(3, 12)


def test_compact_array_count_beyond_the_bytes_left() -> None:
    skip = entity_skipper(METADATA_V12)
    with pytest.raises(BoundsError, match="longer than the request"):
        skip(flexible_metadata_request(b"\x05"), 0)  # 4 topics claimed, 3 bytes follow


def test_null_array_where_nullable_is_fine() -> None:
    data = flexible_metadata_request(b"\x00")
    assert entity_skipper(METADATA_V12)(data, 0) == len(data)


def test_tagged_field_size_must_match_its_content() -> None:
    # Fetch v12 request tag 0 is cluster_id (compact nullable string).
    schema = load_request_schema(1, 12)
    body = build(schema, False)
    data = encoded(body)
    assert data[-1] == 0  # empty tagged section at the end
    good = data[:-1] + b"\x01" + b"\x00" + b"\x03" + b"\x03ab"
    assert entity_skipper(schema)(good, 0) == len(good)
    assert entity_reader(schema)(good, 0)[0].cluster_id == "ab"
    lying = data[:-1] + b"\x01" + b"\x00" + b"\x04" + b"\x03ab" + b"\x00"
    with pytest.raises(BoundsError, match="does not match its size"):
        entity_skipper(schema)(lying, 0)


def test_tagged_field_count_beyond_the_bytes_left() -> None:
    with pytest.raises(BoundsError, match="tagged fields"):
        entity_skipper(METADATA_V12)(flexible_metadata_request(b"\x01", tags=b"\x7f"), 0)


def test_unknown_tag_passes_the_walk_but_kio_refuses_it() -> None:
    # Kafka ignores unknown tags; kio 0.6.5 raises KeyError, so the codec refuses them.
    data = flexible_metadata_request(b"\x01", tags=b"\x01\x63\x02ok")
    assert entity_skipper(METADATA_V12)(data, 0) == len(data)
    header = struct.pack(">hhih", 3, 12, 9, -1) + b"\x00"
    with pytest.raises(MalformedRequest, match="Unknown tagged field"):
        decode_request(header + data)


def test_varints_longer_than_five_bytes() -> None:
    with pytest.raises(BoundsError, match="longer than 5 bytes"):
        entity_skipper(METADATA_V12)(b"\xff\xff\xff\xff\xff\x01", 0)


@pytest.mark.parametrize(
    ("length", "message"),
    [(-2, "negative"), (5, "longer than the request")],
)
def test_legacy_string_lengths(length: int, message: str) -> None:
    schema = load_request_schema(3, 1)  # topics: array of legacy strings
    data = struct.pack(">ih", 1, length) + b"abc"
    with pytest.raises(BoundsError, match=message):
        entity_skipper(schema)(data, 0)


@pytest.mark.parametrize(("length", "message"), [(-2, "negative"), (100, "longer than")])
def test_legacy_bytes_lengths(length: int, message: str) -> None:
    schema = load_request_schema(0, 3)
    # Produce v3: transactional_id null, acks, timeout, one topic "t", one partition.
    data = struct.pack(">hhi", -1, 1, 100) + struct.pack(">ih", 1, 1) + b"t"
    data += struct.pack(">iii", 1, 0, length)
    with pytest.raises(BoundsError, match=message):
        entity_skipper(schema)(data, 0)


def test_negative_legacy_array_length() -> None:
    with pytest.raises(BoundsError, match="negative array length"):
        entity_skipper(load_request_schema(3, 1))(struct.pack(">i", -2), 0)


def test_fixed_size_items_are_skipped_in_one_step() -> None:
    # ListOffsets v1: replica_id, topics[name, partitions[index int32, timestamp int64]].
    schema = load_request_schema(2, 1)
    partitions = 1000
    data = struct.pack(">ii", -1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", partitions)
    data += struct.pack(">iq", 0, -1) * partitions
    assert entity_skipper(schema)(data, 0) == len(data)
    with pytest.raises(BoundsError):
        entity_skipper(schema)(data[:-1], 0)


def test_nullable_struct_marker() -> None:
    # DescribeTopicPartitions (75, which Java admin clients try first) has a nullable
    # struct ``cursor``; no API served today has one, the walk must handle it anyway.
    schema = load_request_schema(75, 0)
    for full in (True, False):
        data = encoded(build(schema, full))
        _, consumed = entity_reader(schema)(data, 0)
        assert entity_skipper(schema)(data, 0) == consumed == len(data)
    null_cursor = encoded(build(schema, False))
    assert null_cursor[-2:] == b"\xff\x00"  # -1 marker, then the empty tagged section
    with pytest.raises(BoundsError, match="nullable struct marker"):
        entity_skipper(schema)(null_cursor[:-2], 0)


def test_an_acknowledgement_batchs_types_array_inline() -> None:
    # ShareAcknowledge v1's AcknowledgeTypes (a compact int8 array, one per acknowledgement
    # batch) is walked inline in its batch's walk: its count, null and bounds rules hold there
    schema = load_request_schema(79, 1)
    head = b"\x02g\x02m" + struct.pack(">i", 1) + b"\x02" + bytes(16) + b"\x02" + struct.pack(">i", 0)

    def request(types_section: bytes, batches: int = 1) -> bytes:
        batch = struct.pack(">qq", 5, 5) + types_section + b"\x00"
        return head + bytes([batches + 1]) + batch * batches + b"\x00\x00\x00"

    good = request(b"\x02\x01", 3)
    assert entity_skipper(schema)(good, 0) == len(good)
    assert entity_reader(schema)(good, 0)[1] == len(good)
    with pytest.raises(BoundsError, match="null for a non-nullable array"):
        entity_skipper(schema)(request(b"\x00"), 0)
    with pytest.raises(BoundsError, match="longer than the request"):
        entity_skipper(schema)(request(b"\x7f\x01"), 0)  # 126 types claimed
    with pytest.raises(BoundsError, match="longer than the request"):
        entity_skipper(schema)(request(b"\xff\xff\xff\xff\x07"), 0)  # 2**31 types claimed
