"""Requests and responses through the codec, checked against kio and real client encoders.

Every supported (api key, version) is round-tripped both ways with entities built
generically from kio's dataclass fields, once with every optional and tagged field set
and once with them all at their minimum. Client interop uses kafka-python 3.0's and
aiokafka's own protocol classes, which share no code with kio.
"""

from __future__ import annotations

import datetime
import io
import struct

from typing import Any

import pytest

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i32Timedelta
from kio_builders import build
from kio_builders import client_request_frame
from kio_builders import read_response_frame
from kio_builders import record_batch
from kio_builders import unframe

from rmqkafka.adapter.codec.errors import CodecError
from rmqkafka.adapter.codec.errors import MalformedRequest
from rmqkafka.adapter.codec.errors import RequestError
from rmqkafka.adapter.codec.errors import UnknownApiKey
from rmqkafka.adapter.codec.errors import UnsupportedVersion
from rmqkafka.adapter.codec.messages import Request
from rmqkafka.adapter.codec.messages import decode_request
from rmqkafka.adapter.codec.messages import encode_api_versions_fallback
from rmqkafka.adapter.codec.messages import encode_legacy_produce_rejection
from rmqkafka.adapter.codec.messages import encode_response
from rmqkafka.adapter.codec.messages import response_type
from rmqkafka.adapter.codec.versions import ADVERTISED_VERSIONS
from rmqkafka.adapter.codec.versions import ApiKey
from rmqkafka.adapter.codec.versions import supported_versions

# kafka-python 3.0.12 loads its JSON schemas with deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings(
    "ignore:read_text is deprecated:DeprecationWarning",
    "ignore:open_text is deprecated:DeprecationWarning",
)

SUPPORTED = [
    (key, version) for key in sorted(ADVERTISED_VERSIONS) for version in supported_versions(key)
]
SUPPORTED_IDS = [f"key{key}-v{version}" for key, version in SUPPORTED]


# --- every supported version, both directions -------------------------------------------


@pytest.mark.parametrize(("api_key", "version"), SUPPORTED, ids=SUPPORTED_IDS)
@pytest.mark.parametrize("full", [True, False], ids=["full", "minimal"])
def test_request_round_trip(api_key: int, version: int, full: bool) -> None:
    schema = load_request_schema(api_key, version)
    body = build(schema, full)
    request = decode_request(unframe(client_request_frame(body, correlation_id=4242)))
    assert request == Request(
        api_key=api_key,
        api_version=version,
        correlation_id=4242,
        client_id="test-client",
        body=body,
        flexible=schema.__flexible__,
    )


@pytest.mark.parametrize(("api_key", "version"), SUPPORTED, ids=SUPPORTED_IDS)
@pytest.mark.parametrize("full", [True, False], ids=["full", "minimal"])
def test_response_round_trip(api_key: int, version: int, full: bool) -> None:
    schema = load_request_schema(api_key, version)
    request = decode_request(unframe(client_request_frame(build(schema, False), -7)))
    resp_type = response_type(request)
    assert resp_type.__api_key__ == api_key and resp_type.__version__ == version
    body = build(resp_type, full)
    # v0 header for non-flexible responses and always for ApiVersions, else v1.
    tagged_header = schema.__flexible__ and api_key != ApiKey.API_VERSIONS
    assert resp_type.__header_schema__.__version__ == (1 if tagged_header else 0)
    correlation_id, decoded = read_response_frame(
        encode_response(request, body), resp_type, tagged_header
    )
    assert correlation_id == -7
    assert decoded == body


def test_null_client_id() -> None:
    body = build(load_request_schema(ApiKey.METADATA, 12), True)
    request = decode_request(unframe(client_request_frame(body, 1, client_id=None)))
    assert request.client_id is None
    assert request.body == body


def test_decode_accepts_bytearray_and_memoryview() -> None:
    payload = unframe(client_request_frame(build(load_request_schema(3, 1), True), 3))
    assert decode_request(bytearray(payload)) == decode_request(payload)
    assert decode_request(memoryview(bytearray(payload))) == decode_request(payload)


def test_encode_response_refuses_the_wrong_response_class() -> None:
    metadata_v12 = build(load_request_schema(3, 12), False)
    request = decode_request(unframe(client_request_frame(metadata_v12, 1)))
    with pytest.raises(TypeError):
        encode_response(request, metadata_v12)  # a request, not a response
    with pytest.raises(TypeError):
        encode_response(request, build(load_response_schema(3, 11), False))  # wrong version


# --- errors carry what they know ----------------------------------------------------------


def test_unknown_api_key() -> None:
    with pytest.raises(UnknownApiKey) as caught:
        decode_request(struct.pack(">hhi", 9999, 0, 31) + b"\x00\x00")
    error = caught.value
    assert (error.api_key, error.api_version, error.correlation_id) == (9999, 0, 31)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (ApiKey.FETCH, 3),
        (ApiKey.FETCH, 18),
        (ApiKey.METADATA, -1),
        (ApiKey.API_VERSIONS, 5),
        (ApiKey.PRODUCE, 12),
    ],
)
def test_version_outside_range(api_key: int, version: int) -> None:
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(struct.pack(">hhi", api_key, version, 77) + b"\x00\x00garbage")
    error = caught.value
    assert (error.api_key, error.api_version, error.correlation_id) == (api_key, version, 77)
    assert error.body is None
    assert error.error_code is ErrorCode.unsupported_version


@pytest.mark.parametrize("length", range(8))
def test_shorter_than_a_header(length: int) -> None:
    data = struct.pack(">hhi", 3, 12, 5)[:length]
    with pytest.raises(MalformedRequest) as caught:
        decode_request(data)
    error = caught.value
    assert error.api_key == (3 if length >= 2 else None)
    assert error.api_version == (12 if length >= 4 else None)
    assert error.correlation_id is None


SAMPLE_KEYS = [
    (ApiKey.PRODUCE, 9),
    (ApiKey.FETCH, 12),
    (ApiKey.METADATA, 1),
    (ApiKey.API_VERSIONS, 3),
    (ApiKey.CREATE_TOPICS, 5),
]


@pytest.mark.parametrize(("api_key", "version"), SAMPLE_KEYS)
def test_every_truncation_is_malformed(api_key: int, version: int) -> None:
    payload = unframe(client_request_frame(build(load_request_schema(api_key, version), True), 99))
    for cut in range(8, len(payload)):
        with pytest.raises(MalformedRequest) as caught:
            decode_request(payload[:cut])
        assert caught.value.correlation_id == 99


@pytest.mark.parametrize(("api_key", "version"), SAMPLE_KEYS)
def test_bytes_after_a_parsed_request_are_ignored(api_key: int, version: int) -> None:
    # Apache Kafka ignores them too; librdkafka 2.x sends three after an all-topics
    # Metadata v13 body (librdkafka #5049).
    payload = unframe(client_request_frame(build(load_request_schema(api_key, version), True), 98))
    expected = decode_request(payload)
    for garbage in (b"\x00", b"\xff" * 10):
        assert decode_request(payload + garbage) == expected


def test_librdkafka_all_topics_metadata_v13_with_stale_bytes() -> None:
    # The exact body librdkafka 2.16 sends for list_topics(): null topics, then 3 stale bytes.
    header = struct.pack(">hhih", 3, 13, 7, 4) + b"test" + b"\x00"
    request = decode_request(header + bytes.fromhex("00000000010000"))
    assert request.body.topics is None


def test_kio_value_errors_become_malformed() -> None:
    # Metadata v1: topics array of one string with invalid UTF-8; bounds are fine.
    data = struct.pack(">hhih", 3, 1, 8, -1) + struct.pack(">ih", 1, 1) + b"\xff"
    with pytest.raises(MalformedRequest, match="undecodable") as caught:
        decode_request(data)
    assert caught.value.correlation_id == 8


def test_null_for_a_non_nullable_array_is_malformed() -> None:
    # CreateTopics v2 with topics = null; kio would hand the handler None.
    data = struct.pack(">hhih", 19, 2, 8, -1) + struct.pack(">iib", -1, 1000, 0)
    with pytest.raises(MalformedRequest, match="non-nullable"):
        decode_request(data)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\xff\xff\xff\xff\x0f\x00",  # compact array count ~2**32 (aborted the process)
        b"\x00\xff\xff\xff\xff\x0e",
        b"\x00\x80\x80\x80\x80\x80",  # over-long varint
    ],
)
def test_array_bombs_are_refused_before_kio_sees_them(body: bytes) -> None:
    data = struct.pack(">hhih", 3, 12, 6, -1) + body
    with pytest.raises(MalformedRequest) as caught:
        decode_request(data)
    assert caught.value.correlation_id == 6


def test_legacy_array_bomb_is_refused() -> None:
    data = struct.pack(">hhih", 3, 1, 6, -1) + struct.pack(">i", 2**31 - 1)
    with pytest.raises(MalformedRequest, match="longer than the request"):
        decode_request(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_codec_errors(data: bytes) -> None:
    try:
        decode_request(data)
    except RequestError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    key_version=st.sampled_from(SUPPORTED),
    body=st.binary(max_size=120),
    client_id=st.one_of(st.none(), st.text(max_size=10)),
)
def test_valid_header_random_body_only_raises_codec_errors(
    key_version: tuple[int, int], body: bytes, client_id: str | None
) -> None:
    api_key, version = key_version
    schema = load_request_schema(api_key, version)
    header_schema = schema.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_schema)(
        buffer,
        header_schema(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=1,
            client_id=client_id,
        ),
    )
    try:
        request = decode_request(buffer.getvalue() + body)
    except RequestError as error:
        assert error.correlation_id == 1
    else:
        assert isinstance(request.body, schema)


@settings(max_examples=200, deadline=None)
@given(
    key_version=st.sampled_from(SAMPLE_KEYS),
    flips=st.lists(
        st.tuples(st.integers(min_value=8), st.integers(0, 255)), min_size=1, max_size=4
    ),
)
def test_corrupted_valid_requests_only_raise_codec_errors(
    key_version: tuple[int, int], flips: list[tuple[int, int]]
) -> None:
    body = build(load_request_schema(*key_version), True)
    payload = bytearray(unframe(client_request_frame(body, 5)))
    for position, value in flips:
        payload[position % len(payload)] = value
    try:
        decode_request(bytes(payload))
    except CodecError:
        pass


# --- ApiVersions fallback -------------------------------------------------------------------


def parse_api_versions_v0(data: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    (size, correlation_id, error_code, count) = struct.unpack_from(">iihi", data, 0)
    assert size == len(data) - 4
    offset = 14
    table = {}
    for _ in range(count):
        key, low, high = struct.unpack_from(">hhh", data, offset)
        table[key] = (low, high)
        offset += 6
    assert offset == len(data)
    return correlation_id, error_code, table


def test_api_versions_v5_gets_the_v0_fallback() -> None:
    # An ApiVersions v5 request from a future client: header v2, body unknown to kio.
    data = struct.pack(">hhih", 18, 5, 123, 2) + b"kp\x00" + b"\x05future\x021\x00"
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(data)
    response = encode_api_versions_fallback(caught.value.correlation_id)
    correlation_id, error_code, table = parse_api_versions_v0(response)
    assert correlation_id == 123
    assert error_code == 35
    assert table == {key: tuple(window) for key, window in ADVERTISED_VERSIONS.items()}
    assert table[0] == (0, 11)


def test_kafka_python_reads_the_fallback() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse

    response = ApiVersionsResponse.decode(
        encode_api_versions_fallback(9), version=4, header=True, framed=True
    )
    assert response.header.correlation_id == 9
    assert response.error_code == 35
    assert {(v.api_key, v.min_version, v.max_version) for v in response.api_keys} == {
        (key, low, high) for key, (low, high) in ADVERTISED_VERSIONS.items()
    }


# --- Produce v0-2 ----------------------------------------------------------------------------


def legacy_produce_body(
    acks: int, topics: list[tuple[str, list[tuple[int, bytes | None]]]]
) -> bytes:
    parts = [struct.pack(">hii", acks, 1500, len(topics))]
    for name, partitions in topics:
        encoded = name.encode()
        parts.append(struct.pack(">h", len(encoded)) + encoded + struct.pack(">i", len(partitions)))
        for partition, records in partitions:
            length = -1 if records is None else len(records)
            parts.append(struct.pack(">ii", partition, length) + (records or b""))
    return b"".join(parts)


def parse_legacy_produce_response(data: bytes, version: int) -> tuple[int, list, int | None]:
    (size, correlation_id, topic_count) = struct.unpack_from(">iii", data, 0)
    assert size == len(data) - 4
    offset = 12
    topics = []
    for _ in range(topic_count):
        (name_length,) = struct.unpack_from(">h", data, offset)
        name = data[offset + 2 : offset + 2 + name_length].decode()
        offset += 2 + name_length
        (partition_count,) = struct.unpack_from(">i", data, offset)
        offset += 4
        partitions = []
        for _ in range(partition_count):
            partition, error_code, base_offset = struct.unpack_from(">ihq", data, offset)
            offset += 14
            entry = [partition, error_code, base_offset]
            if version >= 2:
                entry.append(struct.unpack_from(">q", data, offset)[0])
                offset += 8
            partitions.append(tuple(entry))
        topics.append((name, partitions))
    throttle = None
    if version >= 1:
        (throttle,) = struct.unpack_from(">i", data, offset)
        offset += 4
    assert offset == len(data)
    return correlation_id, topics, throttle


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_is_rejected_per_partition(version: int) -> None:
    body = legacy_produce_body(1, [("orders", [(0, b"msgset"), (3, None)]), ("é", [(1, b"")])])
    data = struct.pack(">hhih", 0, version, 555, 3) + b"cli" + body
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(data)
    error = caught.value
    assert (error.api_key, error.api_version, error.correlation_id) == (0, version, 555)
    assert error.body == body

    response = encode_legacy_produce_rejection(error.api_version, error.correlation_id, error.body)
    assert response is not None
    correlation_id, topics, throttle = parse_legacy_produce_response(response, version)
    assert correlation_id == 555
    tail = (35, -1, -1) if version >= 2 else (35, -1)
    assert topics == [("orders", [(0, *tail), (3, *tail)]), ("é", [(1, *tail)])]
    assert throttle == (0 if version >= 1 else None)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_kafka_python_legacy_produce_round_trip(version: int) -> None:
    from kafka.protocol.producer import ProduceRequest
    from kafka.protocol.producer import ProduceResponse

    client_request = ProduceRequest[version](
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=2, records=b"x" * 30
                    )
                ],
            )
        ],
    )
    client_request.with_header(correlation_id=17, client_id="kafka-python")
    payload = unframe(bytes(client_request.encode(header=True, framed=True)))
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(payload)
    response = encode_legacy_produce_rejection(version, 17, caught.value.body)
    decoded = ProduceResponse.decode(response, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 17
    (topic,) = decoded.responses
    assert topic.name == "t"
    (partition,) = topic.partition_responses
    assert (partition.index, partition.error_code, partition.base_offset) == (2, 35, -1)


def test_legacy_produce_with_acks_zero_gets_no_response() -> None:
    body = legacy_produce_body(0, [("t", [(0, b"m")])])
    assert encode_legacy_produce_rejection(1, 5, body) is None


def test_legacy_produce_with_null_client_id() -> None:
    body = legacy_produce_body(1, [])
    with pytest.raises(UnsupportedVersion) as caught:
        decode_request(struct.pack(">hhih", 0, 2, 1, -1) + body)
    assert caught.value.body == body


@pytest.mark.parametrize(
    "header",
    [
        struct.pack(">hhi", 0, 1, 4) + b"\x00",  # truncated client id length
        struct.pack(">hhih", 0, 1, 4, 10) + b"short",  # client id longer than the frame
        struct.pack(">hhih", 0, 1, 4, -2),  # negative client id length
    ],
)
def test_legacy_produce_with_broken_header(header: bytes) -> None:
    with pytest.raises(MalformedRequest) as caught:
        decode_request(header)
    assert caught.value.correlation_id == 4


def test_legacy_produce_malformed_bodies() -> None:
    good = legacy_produce_body(1, [("topic", [(0, b"abc"), (1, None)])])
    for cut in range(len(good)):
        with pytest.raises(MalformedRequest) as caught:
            encode_legacy_produce_rejection(2, 8, good[:cut])
        error = caught.value
        assert (error.api_key, error.api_version, error.correlation_id) == (0, 2, 8)
    with pytest.raises(MalformedRequest, match="bytes after"):
        encode_legacy_produce_rejection(2, 8, good + b"\x00")
    for bad in (
        struct.pack(">hii", 1, 0, -1),  # negative topic count
        struct.pack(">hii", 1, 0, 2**31 - 1),  # count larger than the body
        struct.pack(">hiih", 1, 0, 1, -1) + struct.pack(">i", 0),  # null topic name
        # records length -2
        struct.pack(">hiih", 1, 0, 1, 1) + b"t" + struct.pack(">iii", 1, 0, -2),
    ):
        with pytest.raises(MalformedRequest):
            encode_legacy_produce_rejection(0, 8, bad)


def test_legacy_rejection_only_for_legacy_versions() -> None:
    with pytest.raises(ValueError):
        encode_legacy_produce_rejection(3, 1, legacy_produce_body(1, []))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100), st.sampled_from([0, 1, 2]))
def test_legacy_random_bodies_only_raise_malformed(body: bytes, version: int) -> None:
    try:
        encode_legacy_produce_rejection(version, 1, body)
    except MalformedRequest:
        pass


# --- real client encoders -------------------------------------------------------------------


def kafka_python_payload(request: Any, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="kafka-python")
    return unframe(bytes(request.encode(header=True, framed=True)))


@pytest.mark.parametrize("version", [0, 3])
def test_kafka_python_api_versions(version: int) -> None:
    from kafka.protocol.metadata import ApiVersionsRequest
    from kafka.protocol.metadata import ApiVersionsResponse

    if version >= 3:
        client = ApiVersionsRequest[version](
            client_software_name="kafka-python", client_software_version="3.0.12"
        )
    else:
        client = ApiVersionsRequest[version]()
    request = decode_request(kafka_python_payload(client, 21))
    assert (request.api_key, request.api_version, request.correlation_id) == (18, version, 21)
    assert request.client_id == "kafka-python"
    assert request.flexible is (version >= 3)
    if version >= 3:
        assert request.body.client_software_name == "kafka-python"
        assert request.body.client_software_version == "3.0.12"

    # And kafka-python understands our answer (v0 response header even for v3).
    resp_type = response_type(request)
    api_version_type = resp_type.__dataclass_fields__["api_keys"].type.__args__[0]
    table = tuple(
        api_version_type(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in sorted(ADVERTISED_VERSIONS.items())
    )
    fields = {"error_code": ErrorCode.none, "api_keys": table}
    if version >= 1:
        fields["throttle_time"] = i32Timedelta.parse(datetime.timedelta(0))
    decoded = ApiVersionsResponse.decode(
        encode_response(request, resp_type(**fields)), version=version, header=True, framed=True
    )
    assert decoded.header.correlation_id == 21
    assert decoded.error_code == 0
    assert {(v.api_key, v.min_version, v.max_version) for v in decoded.api_keys} == {
        (k, lo, hi) for k, (lo, hi) in ADVERTISED_VERSIONS.items()
    }


def test_kafka_python_metadata_v1() -> None:
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.metadata import MetadataResponse

    client = MetadataRequest[1](topics=[MetadataRequest.MetadataRequestTopic(name="orders")])
    request = decode_request(kafka_python_payload(client, 3))
    assert (request.api_key, request.api_version) == (3, 1)
    assert [topic.name for topic in request.body.topics] == ["orders"]

    null_topics = decode_request(kafka_python_payload(MetadataRequest[1](topics=None), 4))
    assert null_topics.body.topics is None  # v1+: null means "all topics"

    resp_type = response_type(request)
    body = build(resp_type, True)
    decoded = MetadataResponse.decode(
        encode_response(request, body), version=1, header=True, framed=True
    )
    assert decoded.header.correlation_id == 3
    assert [b.node_id for b in decoded.brokers] == [b.node_id for b in body.brokers]
    assert [t.name for t in decoded.topics] == [t.name for t in body.topics]


def test_kafka_python_produce_v7() -> None:
    from kafka.protocol.producer import ProduceRequest
    from kafka.protocol.producer import ProduceResponse

    batch = record_batch(b"v" * 100)
    client = ProduceRequest[7](
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="orders",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch),
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=1, records=batch),
                ],
            )
        ],
    )
    request = decode_request(kafka_python_payload(client, 44))
    assert (request.api_key, request.api_version, request.correlation_id) == (0, 7, 44)
    assert request.body.acks == -1
    assert request.body.timeout == datetime.timedelta(seconds=30)
    (topic,) = request.body.topic_data
    assert topic.name == "orders"
    assert [(p.index, p.records) for p in topic.partition_data] == [(0, batch), (1, batch)]

    body = build(response_type(request), True)
    decoded = ProduceResponse.decode(
        encode_response(request, body), version=7, header=True, framed=True
    )
    assert decoded.header.correlation_id == 44
    assert [r.name for r in decoded.responses] == [r.name for r in body.responses]


def test_kafka_python_flexible_produce_v9() -> None:
    from kafka.protocol.producer import ProduceRequest
    from kafka.protocol.producer import ProduceResponse

    batch = record_batch(b"flex")
    client = ProduceRequest[9](
        transactional_id="tx",
        acks=1,
        timeout_ms=100,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=5, records=batch)
                ],
            )
        ],
    )
    request = decode_request(kafka_python_payload(client, 45))
    assert request.flexible
    assert request.body.transactional_id == "tx"
    assert request.body.topic_data[0].partition_data[0].records == batch
    body = build(response_type(request), True)
    decoded = ProduceResponse.decode(
        encode_response(request, body), version=9, header=True, framed=True
    )
    assert decoded.header.correlation_id == 45


def test_aiokafka_requests_and_responses() -> None:
    from aiokafka.protocol.metadata import MetadataRequest_v1
    from aiokafka.protocol.metadata import MetadataResponse_v1
    from aiokafka.protocol.produce import ProduceRequest_v7
    from aiokafka.protocol.produce import ProduceResponse_v7

    def aiokafka_payload(struct_request: Any, correlation_id: int) -> bytes:
        header = struct_request.build_request_header(
            correlation_id=correlation_id, client_id="aiokafka"
        )
        return header.encode() + struct_request.encode()

    request = decode_request(aiokafka_payload(MetadataRequest_v1(["a", "b"]), 10))
    assert [topic.name for topic in request.body.topics] == ["a", "b"]
    assert request.client_id == "aiokafka"
    body = build(response_type(request), True)
    response = encode_response(request, body)
    assert struct.unpack_from(">i", response, 4)[0] == 10
    decoded = MetadataResponse_v1.decode(io.BytesIO(response[8:]))
    assert [broker[0] for broker in decoded.brokers] == [b.node_id for b in body.brokers]

    batch = record_batch(b"aio")
    produce = ProduceRequest_v7(None, 1, 5000, [("t", [(3, batch)])])
    request = decode_request(aiokafka_payload(produce, 11))
    assert request.body.topic_data[0].partition_data[0].records == batch
    body = build(response_type(request), True)
    decoded = ProduceResponse_v7.decode(io.BytesIO(encode_response(request, body)[8:]))
    assert decoded.topics[0][0] == body.responses[0].name


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("retention_ms", [2**63 - 1, -(2**63), 10**16, -2])
def test_offset_commit_retention_time_beyond_a_timedelta_decodes(version, retention_ms):
    """Hostile sweep: OffsetCommit v2-4's retention_time is any int64 on the wire (Kafka
    takes them all), but kio reads it into a timedelta and fails beyond about 2^63 us:
    the request was refused as undecodable and its connection closed. Such a value is read
    as the longest retention kio can hold (the broker does not use it anyway)."""
    schema = load_request_schema(8, version)
    body = schema(group_id="g", generation_id_or_member_epoch=-1, member_id="m",
                  retention_time=datetime.timedelta(milliseconds=123456789), topics=())
    frame = unframe(client_request_frame(body, 3)).replace(
        struct.pack(">q", 123456789), struct.pack(">q", retention_ms))
    request = decode_request(frame)
    limit = (2**63 - 1) // 1000
    expected = max(-limit, min(limit, retention_ms))
    assert request.body.retention_time == datetime.timedelta(milliseconds=expected)
    assert request.body.group_id == "g" and request.body.member_id == "m"
