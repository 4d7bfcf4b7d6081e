"""confluent-kafka 2.16's ShareConsumer (librdkafka's share consumer) against a broker process:
records delivered, acknowledged and redelivered end to end (issue 23). Membership
(ShareGroupHeartbeat) and delivery (ShareFetch, ShareAcknowledge) together.

- implicit acknowledgement: two consumers on one partition read every record once between
  them; closed and replaced, nothing is read again;
- explicit acknowledgement: RELEASE redelivers (delivery count raised), REJECT archives,
  ACCEPT is final; commit_sync carries the acknowledgements.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from rawkafka import ErrorCode, KafkaRaw

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WAIT = 90.0
CONFIG = ("group.share.min.record.lock.duration.ms=1000\n"
          "group.share.heartbeat.interval.ms=1000\n"
          "group.share.min.heartbeat.interval.ms=1000\n")


@pytest.fixture
def broker(broker_factory, tmp_path: Path):
    config = tmp_path / "server.properties"
    config.write_text(CONFIG)
    return broker_factory(config_file=config)


def group_configs(bootstrap: str, group: str, **configs: str) -> None:
    with KafkaRaw.connect(bootstrap) as raw:
        response = raw.request(44, 1, validate_only=False, resources=[dict(
            resource_type=32, resource_name=group,
            configs=[dict(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()])])
        assert response.responses[0].error_code == ErrorCode.none, response.responses[0].error_message


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic(topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(30) == 0


def consumer(bootstrap: str, group: str, name: str, mode: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                          "share.acknowledgement.mode": mode})


def records(c: ShareConsumer, timeout: float = 0.5) -> list:
    return [m for m in c.poll(timeout) if m.error() is None]


def test_implicit_acknowledgement_two_consumers_read_every_record_once(broker):
    bootstrap = broker.bootstrap_servers
    values = [b"r%03d" % i for i in range(200)]
    produce(bootstrap, "sc-implicit", values)
    group_configs(bootstrap, "sc-g1", share_auto_offset_reset="earliest")
    consumers = [consumer(bootstrap, "sc-g1", f"c{i}", "implicit") for i in range(2)]
    seen: dict[bytes, int] = {}
    by_consumer = [0, 0]
    try:
        for c in consumers:
            c.subscribe(["sc-implicit"])
        deadline = time.monotonic() + WAIT
        while len(seen) < len(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in records(c, 0.2):
                    seen[m.value()] = seen.get(m.value(), 0) + 1
                    by_consumer[i] += 1
        for c in consumers:  # the last records' acknowledgements go with the next poll or the close
            c.poll(0.2)
    finally:
        for c in consumers:
            c.close()
    assert set(seen) == set(values) and all(n == 1 for n in seen.values()), "every record once"
    # a new consumer of the group finds nothing left: every delivery was acknowledged
    late = consumer(bootstrap, "sc-g1", "late", "implicit")
    try:
        late.subscribe(["sc-implicit"])
        again = []
        end = time.monotonic() + 8
        while time.monotonic() < end:
            again += records(late, 0.5)
        assert again == []
    finally:
        late.close()


def test_whole_batches_reach_a_poll_and_three_consumers_of_one_partition_read_each_record_once(broker):
    """Kafka's batch-optimized acquisition with librdkafka's producer batches (thousands of
    records): a ShareFetch carries whole batches, more than librdkafka's MaxRecords (500), and
    the ShareConsumer hands them to one poll; consumers sharing the partition, accepting
    each poll with commit_sync, still read every record exactly once."""
    bootstrap = broker.bootstrap_servers
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic("sc-batches", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200})
    total = 20_000
    for i in range(total):
        producer.produce("sc-batches", b"b%05d" % i, partition=0)
    assert producer.flush(30) == 0
    group_configs(bootstrap, "sc-g4", share_auto_offset_reset="earliest")
    consumers = [consumer(bootstrap, "sc-g4", f"c{i}", "explicit") for i in range(3)]
    seen: dict[bytes, int] = {}
    largest = 0
    try:
        for c in consumers:
            c.subscribe(["sc-batches"])
        deadline = time.monotonic() + WAIT
        while len(seen) < total and time.monotonic() < deadline:
            for c in consumers:
                got = records(c, 0.2)
                largest = max(largest, len(got))
                for m in got:
                    seen[m.value()] = seen.get(m.value(), 0) + 1
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if got:
                    c.commit_sync()
    finally:
        for c in consumers:
            c.close()
    assert len(seen) == total and all(n == 1 for n in seen.values()), "every record exactly once"
    assert largest > 500, f"a poll got {largest} records at most: batches were cut at MaxRecords"


def test_explicit_acknowledgement_release_reject_accept(broker):
    bootstrap = broker.bootstrap_servers
    produce(bootstrap, "sc-explicit", [b"accept", b"release", b"reject"])
    group_configs(bootstrap, "sc-g2", share_auto_offset_reset="earliest")
    c = consumer(bootstrap, "sc-g2", "explicit", "explicit")
    try:
        c.subscribe(["sc-explicit"])
        first: list = []
        deadline = time.monotonic() + WAIT
        while len(first) < 3 and time.monotonic() < deadline:
            got = records(c)
            for m in got:
                kind = {b"accept": AcknowledgeType.ACCEPT, b"release": AcknowledgeType.RELEASE,
                        b"reject": AcknowledgeType.REJECT}[m.value()]
                c.acknowledge(m, kind)
            first += got
        assert sorted(m.value() for m in first) == [b"accept", b"reject", b"release"]
        c.commit_sync()
        redelivered: list = []
        deadline = time.monotonic() + WAIT
        while not redelivered and time.monotonic() < deadline:
            redelivered = records(c)
            for m in redelivered:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        assert [m.value() for m in redelivered] == [b"release"], "only the released record comes back"
        c.commit_sync()
        end = time.monotonic() + 5
        while time.monotonic() < end:
            assert records(c) == [], "accepted and rejected records are done"
    finally:
        c.close()
    with KafkaRaw.connect(bootstrap) as raw:
        row = raw.request(90, 1, groups=[dict(group_id="sc-g2", topics=[dict(topic_name="sc-explicit",
                                                                           partitions=[0])])]
                          ).groups[0].topics[0].partitions[0]
        assert (row.start_offset, row.lag) == (3, 0)


def test_rocketmq_retries_with_backoff_then_the_dead_letter_topic(broker_factory, tmp_path: Path):
    config = tmp_path / "rmq.properties"
    config.write_text(CONFIG + "messageDelayLevel=1s 1s 2s 1h\n")  # the first retry waits level 3: 2 s
    broker = broker_factory(config_file=config)
    bootstrap = broker.bootstrap_servers
    produce(bootstrap, "sc-rmq", [b"good-0", b"poison", b"good-1"])
    group_configs(bootstrap, "sc-g3", share_auto_offset_reset="earliest", rmq_redelivery_backoff="levels",
                  rmq_max_reconsume_times="1")
    c = consumer(bootstrap, "sc-g3", "rmq", "explicit")
    poison_seen: list[float] = []
    good: list[bytes] = []
    try:
        c.subscribe(["sc-rmq"])
        deadline = time.monotonic() + WAIT
        while (len(poison_seen) < 2 or len(good) < 2) and time.monotonic() < deadline:
            for m in records(c):
                if m.value() == b"poison":
                    poison_seen.append(time.monotonic())
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    good.append(m.value())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
        assert sorted(good) == [b"good-0", b"good-1"]
        assert len(poison_seen) == 2, "delivered twice: once plus rmq.max.reconsume.times"
        assert poison_seen[1] - poison_seen[0] >= 1.9, "the retry waited RocketMQ's delay"
        end = time.monotonic() + 4
        while time.monotonic() < end:
            assert records(c) == [], "no third delivery"
    finally:
        c.close()
    with KafkaRaw.connect(bootstrap) as raw:
        (dead,) = raw.fetch_all("rmq_dlq.sc-g3", 0)
        headers = dict(dead.headers)
        assert dead.value == b"poison" and headers["ORIGIN_TOPIC"] == b"sc-rmq"
        assert headers["ORIGIN_OFFSET"] == b"1" and headers["DLQ_REASON"] == b"exhausted"
