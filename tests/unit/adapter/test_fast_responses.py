"""The hand-written Produce and Fetch encoders write exactly what kio writes.

kio is the oracle: for every supported version, random and edge-case responses (many
topics and partitions, errors, null vs empty aborted transactions, null vs empty records,
several batches, topic ids, unicode names, None error messages, lengths that need
multi-byte varints) are encoded both ways and the framed bytes compared, header included.
"""

from __future__ import annotations

import datetime
import io
import uuid

from typing import Any

import pytest

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio_builders import build

from rmqkafka.adapter.codec import Encoded
from rmqkafka.adapter.codec import Request
from rmqkafka.adapter.codec import encode_fetch_response
from rmqkafka.adapter.codec import encode_produce_response
from rmqkafka.adapter.codec import encode_response
from rmqkafka.adapter.codec import frame_parts
from rmqkafka.adapter.codec import response_parts
from rmqkafka.adapter.codec import response_type
from rmqkafka.adapter.codec.entities import make
from rmqkafka.adapter.codec.versions import ApiKey

PRODUCE_VERSIONS = list(range(3, 12))
FETCH_VERSIONS = list(range(4, 18))
EXAMPLES = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# --- strategies ---------------------------------------------------------------------------

int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
error_codes = st.sampled_from(list(ErrorCode))
# Unicode, including multi-byte characters; no lone surrogates (not encodable as UTF-8).
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
long_texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=100, max_size=200)
names = texts | st.sampled_from(["", "t", "topic-ü-名前", "a" * 200])
messages = st.none() | texts | long_texts
batches = st.binary(max_size=300)
# None (null records), [] (empty), or several batches, some of them empty.
records = st.none() | st.lists(batches, max_size=4)
aborted = st.none() | st.lists(st.fixed_dictionaries({"producer_id": int64s, "first_offset": int64s}), max_size=3)
# Milliseconds the way produce.py turns them into datetimes (kio writes round(ts * 1000)).
append_times = st.none() | st.integers(0, 4_102_444_800_000)


def _request(api_key: int, version: int, correlation_id: int = 7) -> Request:
    return Request(
        api_key=api_key,
        api_version=version,
        correlation_id=correlation_id,
        client_id="test",
        body=None,  # type: ignore[arg-type]  # the encoders never look at the request body
        flexible=load_response_schema(api_key, version).__flexible__,
    )


@st.composite
def produce_partitions(draw: st.DrawFn) -> dict[str, Any]:
    return dict(
        index=draw(int32s),
        error_code=draw(error_codes),
        base_offset=draw(int64s),
        log_append_time=draw(append_times),
        log_start_offset=draw(int64s),
        record_errors=draw(
            st.lists(
                st.fixed_dictionaries({"batch_index": int32s, "batch_index_error_message": messages}), max_size=3
            )
        ),
        error_message=draw(messages),
    )


produce_topics = st.lists(
    st.fixed_dictionaries({"name": names, "partition_responses": st.lists(produce_partitions(), max_size=6)}),
    max_size=6,
)


@st.composite
def fetch_partitions(draw: st.DrawFn) -> dict[str, Any]:
    return dict(
        partition_index=draw(int32s),
        error_code=draw(error_codes),
        high_watermark=draw(int64s),
        last_stable_offset=draw(int64s),
        log_start_offset=draw(int64s),
        aborted_transactions=draw(aborted),
        preferred_read_replica=draw(int32s),
        records=draw(records),
    )


fetch_topics = st.lists(
    st.fixed_dictionaries(
        {
            "topic": names,
            "topic_id": st.none() | st.uuids(),
            "partitions": st.lists(fetch_partitions(), max_size=6),
        }
    ),
    max_size=6,
)

# --- oracles ------------------------------------------------------------------------------


def _as_datetime(ms: int | None) -> datetime.datetime | None:
    return None if ms is None else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def kio_produce(request: Request, responses: list[dict]) -> bytes:
    for_kio = [
        dict(
            topic,
            partition_responses=[
                dict(p, log_append_time=_as_datetime(p["log_append_time"])) for p in topic["partition_responses"]
            ],
        )
        for topic in responses
    ]
    body = make(response_type(request), responses=for_kio, throttle_time=0, node_endpoints=())
    return encode_response(request, body)


def kio_fetch(request: Request, error_code: int, session_id: int, responses: list[dict]) -> bytes:
    def joined(records: list[bytes] | None) -> bytes | None:
        return None if records is None else b"".join(records)

    for_kio = [
        dict(topic, partitions=[dict(p, records=joined(p["records"])) for p in topic["partitions"]])
        for topic in responses
    ]
    body = make(
        response_type(request),
        throttle_time=0,
        error_code=error_code,
        session_id=session_id,
        responses=for_kio,
        node_endpoints=(),
    )
    return encode_response(request, body)


def fast(request: Request, parts: list) -> bytes:
    framed = frame_parts(request, parts)
    assert all(isinstance(part, (bytes, bytearray, memoryview)) for part in framed)
    return b"".join(framed)


# --- Produce ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@EXAMPLES
@given(responses=produce_topics, correlation_id=int32s, as_datetime=st.booleans())
def test_produce_matches_kio(version: int, responses: list[dict], correlation_id: int, as_datetime: bool) -> None:
    request = _request(ApiKey.PRODUCE, version, correlation_id)
    expected = kio_produce(request, responses)
    if as_datetime:  # what produce.py hands over; the int form must encode the same
        responses = [
            dict(
                t,
                partition_responses=[
                    dict(p, log_append_time=_as_datetime(p["log_append_time"])) for p in t["partition_responses"]
                ],
            )
            for t in responses
        ]
    assert fast(request, encode_produce_response(version, responses)) == expected


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_edges(version: int) -> None:
    request = _request(ApiKey.PRODUCE, version)
    partition = dict(
        index=0,
        error_code=ErrorCode.none,
        base_offset=-1,
        log_append_time=None,
        log_start_offset=-1,
        record_errors=(),
        error_message=None,
    )
    cases: list[list[dict]] = [
        [],
        [dict(name="", partition_responses=[])],
        # 200 partitions: the compact array length needs two varint bytes.
        [dict(name="t", partition_responses=[dict(partition, index=i) for i in range(200)])],
        [
            dict(
                name="ünïcødé-トピック",
                partition_responses=[
                    dict(partition, error_code=ErrorCode.corrupt_message, error_message="é" * 300),
                    dict(partition, record_errors=[dict(batch_index=3, batch_index_error_message=None)]),
                ],
            )
        ],
    ]
    for responses in cases:
        assert fast(request, encode_produce_response(version, responses)) == kio_produce(request, responses)


# --- Fetch --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@EXAMPLES
@given(responses=fetch_topics, error_code=error_codes, session_id=int32s, correlation_id=int32s)
def test_fetch_matches_kio(
    version: int, responses: list[dict], error_code: ErrorCode, session_id: int, correlation_id: int
) -> None:
    request = _request(ApiKey.FETCH, version, correlation_id)
    expected = kio_fetch(request, error_code, session_id, responses)
    assert fast(request, encode_fetch_response(version, error_code, session_id, responses)) == expected


def _fetch_partition(**overrides: Any) -> dict[str, Any]:
    return dict(
        dict(
            partition_index=0,
            error_code=ErrorCode.none,
            high_watermark=10,
            last_stable_offset=10,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=[],
        ),
        **overrides,
    )


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_edges(version: int) -> None:
    request = _request(ApiKey.FETCH, version)
    big = [bytes([i]) * 22_000 for i in range(3)]  # 66 KB: a three-byte varint length
    cases: list[list[dict]] = [
        [],
        [dict(topic="", topic_id=None, partitions=[])],
        [
            dict(
                topic="t-ü",
                topic_id=uuid.UUID(int=1),
                partitions=[
                    _fetch_partition(),  # empty records
                    _fetch_partition(partition_index=1, records=None),  # null records
                    _fetch_partition(partition_index=2, aborted_transactions=[]),  # empty, not null
                    _fetch_partition(
                        partition_index=3,
                        aborted_transactions=[dict(producer_id=5, first_offset=7)] * 130,
                        records=big,
                    ),
                    _fetch_partition(partition_index=4, error_code=ErrorCode.offset_out_of_range, records=[b""]),
                ],
            )
        ],
        [
            dict(
                topic=f"topic-{t}",
                topic_id=uuid.uuid4(),
                partitions=[_fetch_partition(partition_index=i, records=[b"x" * i]) for i in range(150)],
            )
            for t in range(3)
        ],
    ]
    for responses in cases:
        expected = kio_fetch(request, ErrorCode.none, 0, responses)
        assert fast(request, encode_fetch_response(version, ErrorCode.none, 0, responses)) == expected


@pytest.mark.parametrize("version", [11, 12, 17])
def test_fetch_batches_are_not_copied(version: int) -> None:
    batches = [b"a" * 1000, b"b" * 2000, b"c" * 3000]
    second = [bytearray(b"d" * 500)]
    responses = [
        dict(
            topic="t",
            topic_id=uuid.UUID(int=9),
            partitions=[_fetch_partition(records=batches), _fetch_partition(partition_index=1, records=second)],
        )
    ]
    parts = encode_fetch_response(version, 0, 0, responses)
    framed = frame_parts(_request(ApiKey.FETCH, version), parts)
    for batch in [*batches, *second]:
        assert any(part is batch for part in framed)


def test_fetch_accepts_a_single_bytes_object() -> None:
    request = _request(ApiKey.FETCH, 12)
    joined = [dict(topic="t", partitions=[_fetch_partition(records=b"abc")])]
    listed = [dict(topic="t", partitions=[_fetch_partition(records=[b"a", b"bc"])])]
    assert fast(request, encode_fetch_response(12, 0, 0, joined)) == fast(
        request, encode_fetch_response(12, 0, 0, listed)
    )


# --- framing and dispatch -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.API_VERSIONS, 0), (ApiKey.API_VERSIONS, 3), (ApiKey.METADATA, 8), (ApiKey.METADATA, 12)],
)
def test_frame_parts_header_matches_encode_response(api_key: int, version: int) -> None:
    # ApiVersions v3 is flexible yet keeps header v0; Metadata v12 gets header v1.
    request = _request(api_key, version, correlation_id=-5)
    body = build(response_type(request), True)
    schema = response_type(request)
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, body)
    expected = encode_response(request, body)
    assert b"".join(frame_parts(request, [buffer.getvalue()])) == expected
    assert b"".join(frame_parts(request, [buffer.getvalue()[:3], buffer.getvalue()[3:]])) == expected
    assert response_parts(request, body) == [expected]
    assert b"".join(response_parts(request, Encoded([buffer.getvalue()]))) == expected


@pytest.mark.parametrize(
    ("encode", "version"),
    [
        (lambda v: encode_produce_response(v, []), 2),
        (lambda v: encode_produce_response(v, []), 12),
        (lambda v: encode_fetch_response(v, 0, 0, []), 3),
        (lambda v: encode_fetch_response(v, 0, 0, []), 18),
    ],
)
def test_versions_outside_the_range_are_refused(encode: Any, version: int) -> None:
    with pytest.raises(ValueError):
        encode(version)
