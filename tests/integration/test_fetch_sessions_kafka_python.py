"""kafka-python (FetchSessionHandler, KIP-227) consuming many partitions uses incremental
fetch sessions and reads every record exactly once: across a broker restart (the sessions
are lost; kafka-python, seeing its connection drop, starts over with an INITIAL fetch naming
its old session id, which the new broker does not know and opens a new one) and with
read_committed over aborted transactions. FETCH_SESSION_ID_NOT_FOUND itself is covered with
raw frames (test_fetch_sessions.py)."""

from __future__ import annotations

import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTITIONS = 60


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("rmqk_fetch_session")}


def create(broker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS)])[topic].result(30)


def produce(broker, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def consumer(broker, topic: str, **extra):
    from kafka import KafkaConsumer, TopicPartition

    client = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                           auto_offset_reset="earliest", fetch_max_wait_ms=100, reconnect_backoff_max_ms=500,
                           request_timeout_ms=30_000, **extra)
    client.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return client


def drain(client, want: int, seen: list[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        for records in client.poll(timeout_ms=500).values():
            seen.extend(r.value for r in records)
    assert len(seen) >= want, f"read {len(seen)} of {want} records"


def test_kafka_python_uses_sessions_and_reads_each_record_once_across_a_restart(broker_factory):
    broker = broker_factory(args=["--metrics-port", "0"])
    topic = "sessions"
    create(broker, topic)
    first = [f"a{i}".encode() for i in range(3000)]
    produce(broker, topic, first)
    client = consumer(broker, topic)
    try:
        seen: list[bytes] = []
        drain(client, len(first), seen)
        metrics = scrape(broker.metrics_url)
        assert metrics["rmqk_fetch_sessions"] >= 1, metrics
        # the client leaves out of its session the partitions whose records it still buffers
        assert metrics["rmqk_fetch_session_partitions"] >= 1, metrics
        broker.restart(same_port=True)  # every session is gone
        second = [f"b{i}".encode() for i in range(3000)]
        produce(broker, topic, second)
        drain(client, len(first) + len(second), seen)
        time.sleep(1.0)  # nothing more arrives
        for records in client.poll(timeout_ms=500).values():
            seen.extend(r.value for r in records)
        assert sorted(seen) == sorted(first + second), "every record exactly once"
        assert scrape(broker.metrics_url)["rmqk_fetch_sessions"] >= 1, "the client opened a new session"
    finally:
        client.close()


def test_kafka_python_read_committed_in_a_session_skips_aborted_transactions(broker):
    topic = "sessions-txn"
    create(broker, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "sessions-txn",
                         "linger.ms": 0})
    producer.init_transactions(30)
    client = consumer(broker, topic, isolation_level="read_committed")
    try:
        seen: list[bytes] = []
        drain(client, 0, seen, timeout=2)  # the session is open before the transactions
        committed: list[bytes] = []
        for round_ in range(4):
            producer.begin_transaction()
            for p in range(PARTITIONS):
                producer.produce(topic, f"abort{round_}-{p}".encode(), partition=p)
            producer.abort_transaction(30)
            producer.begin_transaction()
            values = [f"commit{round_}-{p}".encode() for p in range(0, PARTITIONS, 3)]
            for p, value in zip(range(0, PARTITIONS, 3), values):
                producer.produce(topic, value, partition=p)
            producer.commit_transaction(30)
            committed.extend(values)
            drain(client, len(committed), seen)
        time.sleep(1.0)
        for records in client.poll(timeout_ms=500).values():
            seen.extend(r.value for r in records)
        assert sorted(seen) == sorted(committed)
    finally:
        client.close()
