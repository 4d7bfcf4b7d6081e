"""Issue 20: topic metadata under a flood. A CreateTopics of thousands of topics is one
metadata write off the event loop (other clients are served meanwhile), and CreateTopics,
CreatePartitions and DeleteTopics are held to the controller mutation quota the way Kafka
answers it (KIP-599): THROTTLING_QUOTA_EXCEEDED (89) and a throttle time from the versions
that know the error, a wait before older versions are served."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from rawkafka import ApiKey, ErrorCode, KafkaRaw

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for bench/

from bench.create_topics_flood import create_frame, producer_while_flooding, send_and_time, topic_codes

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CREATE_PARTITIONS = 37
QUOTA_MESSAGE = "The throttling quota has been exceeded."


def _broker(broker_factory, tmp_path: Path, **props: str):
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return broker_factory(config_file=config)


def test_creating_4000_topics_does_not_hold_up_other_clients(broker_factory, tmp_path):
    """Each created topic rewrote and fsynced topics.json on the event loop: 4,000 topics in
    one request took 27 s, and every other client waited that long."""
    broker = _broker(broker_factory, tmp_path, **{"controller.mutation.rate": "-1"})
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("steady")
        frame = create_frame([f"many-{i}" for i in range(4000)])
        stop = threading.Event()
        producer, times = producer_while_flooding(broker, "steady", stop)
        time.sleep(0.3)
        seconds, payload = send_and_time(conn, frame, timeout=120)
        time.sleep(0.3)
        stop.set()
        producer.join(60)
    codes = topic_codes(payload)
    assert codes == [ErrorCode.none] * 4000
    assert not times.errors and len(times.latencies) > 5
    assert times.slowest < 1.5, f"another client waited {times.slowest:.2f} s (the request took {seconds:.2f} s)"
    assert seconds < 20
    with KafkaRaw(broker.host, broker.port) as conn:
        listed = {t.name for t in conn.metadata(None).topics}
    assert {f"many-{i}" for i in range(4000)} <= listed
    broker.kill()  # answered means durable: all 4,000 are there after a crash
    broker.start()
    with KafkaRaw(broker.host, broker.port) as conn:
        assert {f"many-{i}" for i in range(4000)} <= {t.name for t in conn.metadata(None).topics}


def _create(conn, names: list[str], version: int, partitions: int = 1):
    return conn.request(ApiKey.CREATE_TOPICS, version, topics=[
        dict(name=n, num_partitions=partitions, replication_factor=1, assignments=(), configs=()) for n in names],
        timeout=10_000, validate_only=False)


def test_the_mutation_quota_is_answered_as_kafka_does(broker_factory, tmp_path):
    # one partition a second, burst 1 x 20 x 1 = 20: a debt of one partition lasts a second
    broker = _broker(broker_factory, tmp_path, **{"controller.mutation.rate": "1", "controller.quota.window.num": "20"})
    fresh = (f"x{i}" for i in range(1000))

    def exhaust(conn) -> None:
        """Take the bucket below zero again (at most a topic or two get through)."""
        assert ErrorCode.throttling_quota_exceeded in {t.error_code for t in _create(conn, [next(fresh) for _ in range(3)], 7).topics}

    with KafkaRaw(broker.host, broker.port) as conn:
        # v7 (strict): the topics met once the bucket is empty are refused, with a throttle time
        response = _create(conn, [f"q{i}" for i in range(30)], 7)
        codes = [t.error_code for t in response.topics]
        created = codes.count(ErrorCode.none)
        assert 20 <= created <= 22, codes  # the burst, plus what refilled meanwhile
        assert codes[:created] == [ErrorCode.none] * created
        refused = response.topics[created:]
        assert {t.error_code for t in refused} == {ErrorCode.throttling_quota_exceeded}
        assert {t.error_message for t in refused} == {QUOTA_MESSAGE}
        assert response.throttle_time.total_seconds() > 0
        listed = {t.name for t in conn.metadata(None).topics}
        assert {f"q{i}" for i in range(created)} <= listed and not {t.name for t in refused} & listed

        # CreatePartitions v3 and DeleteTopics v6 are held to the same bucket
        exhaust(conn)
        grown = conn.request(CREATE_PARTITIONS, 3, topics=[dict(name="q0", count=5, assignments=None)],
                             timeout=10_000, validate_only=False)
        assert grown.results[0].error_code == ErrorCode.throttling_quota_exceeded
        assert grown.results[0].error_message == QUOTA_MESSAGE
        assert grown.throttle_time.total_seconds() > 0
        exhaust(conn)
        deleted = conn.request(ApiKey.DELETE_TOPICS, 6, topics=[dict(name="q1", topic_id=None)], timeout=10_000)
        assert deleted.responses[0].error_code == ErrorCode.throttling_quota_exceeded
        assert deleted.throttle_time.total_seconds() > 0

        # v4 (permissive: the error is unknown to it) waits for the quota, then is served
        exhaust(conn)
        began = time.monotonic()
        late = _create(conn, ["late-a", "late-b"], 4)
        waited = time.monotonic() - began
        assert [t.error_code for t in late.topics] == [ErrorCode.none, ErrorCode.none]
        assert waited >= 0.2, waited

        # once the bucket has refilled, strict requests go through again
        time.sleep(3.5)
        deleted = conn.request(ApiKey.DELETE_TOPICS, 6, topics=[dict(name="q1", topic_id=None)], timeout=10_000)
        assert deleted.responses[0].error_code == ErrorCode.none
        time.sleep(1.5)
        grown = conn.request(CREATE_PARTITIONS, 3, topics=[dict(name="q0", count=2, assignments=None)],
                             timeout=10_000, validate_only=False)
        assert grown.results[0].error_code == ErrorCode.none
        meta = {t.name: t for t in conn.metadata(["q0", "q1"], allow_auto_topic_creation=False).topics}
        assert len(meta["q0"].partitions) == 2
        assert meta["q1"].error_code == ErrorCode.unknown_topic_or_partition


def test_many_topics_deleted_and_grown_in_one_request(broker_factory, tmp_path):
    """DeleteTopics and CreatePartitions of many topics: one metadata write each, durable
    when answered (checked with a kill -9)."""
    broker = _broker(broker_factory, tmp_path, **{"controller.mutation.rate": "-1"})
    names = [f"d{i}" for i in range(1000)]
    with KafkaRaw(broker.host, broker.port) as conn:
        assert set(topic_codes(send_and_time(conn, create_frame(names))[1])) == {ErrorCode.none}
        grown = conn.request(CREATE_PARTITIONS, 3, topics=[
            dict(name=n, count=2, assignments=None) for n in names[:500]], timeout=10_000, validate_only=False)
        assert {r.error_code for r in grown.results} == {ErrorCode.none}
        deleted = conn.request(ApiKey.DELETE_TOPICS, 6, topics=[dict(name=n, topic_id=None) for n in names[500:]],
                               timeout=30_000)
        assert {r.error_code for r in deleted.responses} == {ErrorCode.none}
    broker.kill()
    broker.start()
    with KafkaRaw(broker.host, broker.port) as conn:
        listed = {t.name: len(t.partitions) for t in conn.metadata(None).topics}
    assert {n: listed.get(n) for n in names[:500]} == {n: 2 for n in names[:500]}
    assert not set(names[500:]) & set(listed)
