"""``rmqkafka.client.RetryingConsumer`` end to end against a real broker process.

The broker runs with short delay levels (``messageDelayLevel``: levels 1..16 are 1 s, 17 is
10 min, 18 is 1 h; ``timerPrecisionMs=100``), so a retry (level 3 + RECONSUME_TIMES) comes
back after about a second. Checked: a record that fails twice and then succeeds (what the
consumer sees each time, the origin headers, committed offsets); a record that always fails
goes to ``rmq_dlq.<group>`` after the group's maximum (``rmq.max.reconsume.times``) with its
origin headers, and ``rmqk dlq list`` shows it; a retry that came back while no consumer was
running is consumed although ``auto.offset.reset`` is ``latest``; ``nack(delay_level=)``;
``ack`` without ``commit`` is committed by ``close``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LEVELS = " ".join(["1s"] * 16 + ["10m", "1h"])


@pytest.fixture
def bootstrap(broker_factory: Callable[..., Any], tmp_path: Path) -> str:
    config = tmp_path / "server.properties"
    config.write_text(f"messageDelayLevel={LEVELS}\ntimerPrecisionMs=100\n")
    return broker_factory(config_file=config).bootstrap_servers


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # referenced while waiting: a destroyed client fails its futures
    client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(10)


def produce(bootstrap: str, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None = None,
            timestamp: int | None = None) -> tuple[int, int]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    report: list[Any] = []
    producer.produce(topic, value=value, key=key, headers=headers, on_delivery=lambda e, m: report.append((e, m)),
                     **({"timestamp": timestamp} if timestamp is not None else {}))
    producer.flush(10)
    [(err, msg)] = report
    assert err is None, err
    return msg.partition(), msg.offset()


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    client = admin(bootstrap)
    result = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def poll_until(consumer: Any, done: Callable[[], bool], handle: Callable[[Any], None], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        msg = consumer.poll(0.2)
        if msg is not None:
            handle(msg)


def headers_of(msg: Any) -> dict[str, bytes | None]:
    return dict(msg.headers() or [])


PROTOCOLS = pytest.mark.parametrize("protocol", ["classic", "consumer"])  # group.protocol (KIP-848)


@PROTOCOLS
def test_fails_twice_then_succeeds(bootstrap: str, protocol: str) -> None:
    from rmqkafka.client import RetryingConsumer, origin_topic, reconsume_times

    create_topic(bootstrap, "orders", partitions=2)
    stamp = int(time.time() * 1000) - 10_000
    partition, offset = produce(bootstrap, "orders", b"order-1", b'{"id": 1}', [("trace", b"t")], timestamp=stamp)
    seen: list[Any] = []

    def handle(msg: Any) -> None:
        seen.append(msg)
        if len(seen) < 3:
            consumer.nack(msg)
        else:
            consumer.commit(msg)

    with RetryingConsumer(bootstrap, "billing", ["orders"],
                          **{"auto.offset.reset": "earliest", "group.protocol": protocol}) as consumer:
        assert consumer.retry_topic == "rmq_retry.billing" and consumer.dlq_topic == "rmq_dlq.billing"
        poll_until(consumer, lambda: len(seen) >= 3, handle)
        assert consumer.poll(1.5) is None  # nothing else comes back

    assert [(m.topic(), reconsume_times(m)) for m in seen] == [("orders", 0), ("rmq_retry.billing", 1), ("rmq_retry.billing", 2)]
    assert all(origin_topic(m) == "orders" for m in seen)
    for m in seen:
        assert (m.key(), m.value(), m.timestamp()) == (b"order-1", b'{"id": 1}', (1, stamp))
    assert headers_of(seen[0]) == {"trace": b"t"}
    origin = {"ORIGIN_TOPIC": b"orders", "ORIGIN_PARTITION": str(partition).encode(), "ORIGIN_OFFSET": str(offset).encode()}
    for retried in seen[1:]:
        h = headers_of(retried)
        assert {k: h[k] for k in origin} == origin and h["trace"] == b"t"
        assert h["REAL_TOPIC"] == b"rmq_retry.billing"
    # the retry topic was created with one partition; every record handled is committed
    assert len(admin(bootstrap).list_topics("rmq_retry.billing", timeout=5).topics["rmq_retry.billing"].partitions) == 1
    offsets = committed(bootstrap, "billing")
    assert offsets[("orders", partition)] == offset + 1
    assert offsets[("rmq_retry.billing", 0)] == seen[2].offset() + 1
    assert "rmq_dlq.billing" not in admin(bootstrap).list_topics(timeout=5).topics


def test_dead_letter_after_the_maximum(bootstrap: str) -> None:
    from rmqkafka.client import RetryingConsumer, reconsume_times

    create_topic(bootstrap, "orders")
    create_topic(bootstrap, "rmq_retry.billing", config={"rmq.max.reconsume.times": "2"})
    partition, offset = produce(bootstrap, "orders", b"order-9", b"poison")
    seen: list[Any] = []

    def handle(msg: Any) -> None:
        seen.append(msg)
        consumer.nack(msg)

    with RetryingConsumer(bootstrap, "billing", "orders", **{"auto.offset.reset": "earliest"}) as consumer:
        poll_until(consumer, lambda: len(seen) >= 3, handle)
        assert consumer.poll(1.5) is None  # the third nack went to the DLQ, not back
    assert [reconsume_times(m) for m in seen] == [0, 1, 2]

    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "log_level": 0})
    reader.assign([TopicPartition("rmq_dlq.billing", 0, 0)])
    dead = None
    deadline = time.monotonic() + 10
    while dead is None and time.monotonic() < deadline:
        msg = reader.poll(0.2)
        dead = msg if msg is not None and msg.error() is None else None
    reader.close()
    assert dead is not None
    h = headers_of(dead)
    assert (dead.key(), dead.value(), dead.timestamp()) == (b"order-9", b"poison", seen[0].timestamp())
    assert h["RECONSUME_TIMES"] == b"3"
    assert (h["ORIGIN_TOPIC"], h["ORIGIN_PARTITION"], h["ORIGIN_OFFSET"]) == (b"orders", str(partition).encode(), str(offset).encode())

    from rmqkafka.cli import main

    result = CliRunner().invoke(main, ["dlq", "list", "billing", "--json", "-b", bootstrap], catch_exceptions=False)
    [listed] = json.loads(result.stdout)
    assert (listed["key"], listed["reconsume_times"], listed["origin_topic"], listed["origin_offset"]) == ("order-9", 3, "orders", offset)


@PROTOCOLS
def test_retry_that_came_back_while_no_consumer_ran(bootstrap: str, protocol: str) -> None:
    """A group without a committed offset on its retry topic starts there at the beginning."""
    from rmqkafka.client import RetryingConsumer, reconsume_times

    create_topic(bootstrap, "orders")
    create_topic(bootstrap, "rmq_retry.billing")
    produce(bootstrap, "rmq_retry.billing", b"order-3", b"v", [("ORIGIN_TOPIC", b"orders")])  # a nack, then a crash
    produce(bootstrap, "orders", b"old", b"before the consumer")  # auto.offset.reset=latest skips this
    time.sleep(1.5)  # the retry is back in rmq_retry.billing
    seen: list[Any] = []
    with RetryingConsumer(bootstrap, "billing", ["orders"], **{"group.protocol": protocol}) as consumer:  # latest
        poll_until(consumer, lambda: bool(seen), lambda m: (seen.append(m), consumer.ack(m)))
        assert consumer.poll(1.0) is None
    assert [(m.topic(), m.key(), reconsume_times(m)) for m in seen] == [("rmq_retry.billing", b"order-3", 1)]
    assert committed(bootstrap, "billing")[("rmq_retry.billing", 0)] == seen[0].offset() + 1  # ack, committed by close


def test_nack_with_a_delay_level(bootstrap: str) -> None:
    from rmqkafka.client import DELAY, RetryingConsumer

    create_topic(bootstrap, "orders")
    produce(bootstrap, "orders", b"k", b"v")
    seen: list[Any] = []
    with RetryingConsumer(bootstrap, "billing", ["orders"], **{"auto.offset.reset": "earliest"}) as consumer:
        poll_until(consumer, lambda: bool(seen), lambda m: (seen.append(m), consumer.nack(m, delay_level=18)))
        with pytest.raises(ValueError, match="delay_level"):
            consumer.nack(seen[0], delay_level=0)
        assert consumer.poll(1.5) is None  # waits an hour at level 18
    assert DELAY not in headers_of(seen[0])

    from rmqkafka.cli import main

    result = CliRunner().invoke(main, ["delays", "--json", "-b", bootstrap], catch_exceptions=False)
    levels = json.loads(result.stdout)["levels"]
    assert {lv["level"]: lv["depth"] for lv in levels if lv["depth"]} == {18: 1}


def test_commit_commits_acked_records_only(bootstrap: str) -> None:
    from rmqkafka.client import RetryingConsumer

    create_topic(bootstrap, "orders")
    for i in range(3):
        produce(bootstrap, "orders", f"k{i}".encode(), b"v")
    seen: list[Any] = []
    with RetryingConsumer(bootstrap, "billing", ["orders"], **{"auto.offset.reset": "earliest"}) as consumer:
        poll_until(consumer, lambda: len(seen) >= 3, seen.append)
        consumer.commit()  # nothing acked yet: nothing to commit, no error
        consumer.ack(seen[0])
        consumer.commit()
        assert committed(bootstrap, "billing") == {("orders", 0): seen[0].offset() + 1}
    assert committed(bootstrap, "billing") == {("orders", 0): seen[0].offset() + 1}  # close commits no more


def test_constructor_checks() -> None:
    from rmqkafka.client import RetryingConsumer

    with pytest.raises(ValueError, match="group must not be empty"):
        RetryingConsumer("127.0.0.1:1", "", ["orders"])
    with pytest.raises(ValueError, match="differs from group"):
        RetryingConsumer("127.0.0.1:1", "g", ["orders"], **{"group.id": "other"})
    with pytest.raises(ValueError, match="at least one topic"):
        RetryingConsumer("127.0.0.1:1", "g", ["rmq_retry.g"])
