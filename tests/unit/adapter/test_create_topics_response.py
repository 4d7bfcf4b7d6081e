"""The hand-written CreateTopics response encoder writes exactly what kio writes (kio is the
oracle), for every supported version, including topics sharing one config list."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.codec import Request, encode_response, frame_parts, response_type
from rmqkafka.adapter.codec.create_topics_response import VERSIONS, encode_create_topics_response
from rmqkafka.adapter.codec.entities import make
from rmqkafka.adapter.codec.versions import ApiKey

EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12) | st.sampled_from(["", "a" * 200, "名前"])
configs = st.lists(st.fixed_dictionaries({
    "name": texts, "value": st.none() | texts, "read_only": st.booleans(),
    "config_source": st.integers(-1, 8), "is_sensitive": st.booleans()}), max_size=4)
topics = st.lists(st.fixed_dictionaries({
    "name": texts, "topic_id": st.none() | st.uuids(), "error_code": st.sampled_from(list(ErrorCode)),
    "error_message": st.none() | texts, "num_partitions": st.integers(-1, 2**31 - 1),
    "replication_factor": st.integers(-1, 2**15 - 1), "configs": st.none() | configs}), max_size=5)


def _request(version: int) -> Request:
    return Request(api_key=ApiKey.CREATE_TOPICS, api_version=version, correlation_id=7, client_id="t",
                   body=None,  # type: ignore[arg-type]  # the encoder never looks at it
                   flexible=load_response_schema(ApiKey.CREATE_TOPICS, version).__flexible__)


def _check(version: int, throttle_ms: int, results: list[dict]) -> None:
    request = _request(version)
    expected = encode_response(request, make(response_type(request), throttle_time=throttle_ms, topics=results))
    got = b"".join(frame_parts(request, encode_create_topics_response(version, throttle_ms, results).parts))
    assert got == expected


@pytest.mark.parametrize("version", list(VERSIONS))
@EXAMPLES
@given(results=topics, throttle_ms=st.integers(0, 2**31 - 1))
def test_matches_kio(version: int, results: list[dict], throttle_ms: int) -> None:
    _check(version, throttle_ms, results)


@pytest.mark.parametrize("version", list(VERSIONS))
def test_a_shared_config_list_is_encoded_for_each_topic(version: int) -> None:
    shared = [dict(name="retention.ms", value="1000", read_only=False, config_source=5, is_sensitive=False),
              dict(name="x", value=None, read_only=True, config_source=-1, is_sensitive=True)]
    results = [dict(name=f"t{i}", topic_id=uuid.uuid4(), error_code=ErrorCode.none, error_message=None,
                    num_partitions=1, replication_factor=1, configs=shared) for i in range(3)]
    results.append(dict(name="refused", topic_id=None, error_code=ErrorCode.throttling_quota_exceeded,
                        error_message="The throttling quota has been exceeded.", num_partitions=-1,
                        replication_factor=-1, configs=None))
    _check(version, 1234, results)
