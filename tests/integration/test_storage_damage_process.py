"""Issue 12 storage items against a real broker process: a commitlog segment damaged in the
middle of the chain, and a topics.json with a partition count far over the limits.

* A middle segment cut to half while the broker was stopped: the broker starts, every
  record outside the damaged range is fetched at its original offset, the lost offsets are
  skipped (a fetch moves past them), no segment file is deleted and produces continue after
  the last offset ever handed out.
* A consume-queue file overwritten with random bytes while the broker was stopped: consumers
  of confluent-kafka and kafka-python read every record at its offset without a restart (the
  read meeting the damage gets KAFKA_STORAGE_ERROR, which they retry, while the broker
  rebuilds the damaged entries from the commitlog).
* 100,000 partitions in topics.json (an older version or a hand edit): the broker starts in
  well under the startup timeout with a handful of descriptors, and a produce and a fetch on
  one partition work.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from pathlib import Path

import pytest
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def connect(broker) -> KafkaRaw:
    return KafkaRaw(broker.host, broker.port)


def segments(data_dir: Path) -> list[Path]:
    return sorted((Path(data_dir) / "commitlog").glob("*.log"))


def test_a_middle_segment_cut_to_half_loses_only_its_records(broker_factory, tmp_path: Path):
    config = tmp_path / "server.properties"
    config.write_text("internal.segment.bytes=4096\n")  # Kafka's test-only segment size
    broker = broker_factory(config_file=config)
    with connect(broker) as k:
        k.create_topic("dmg", 1)
        values = {}
        for i in range(120):
            offset = k.produce_ok("dmg", 0, make_batch([b"v%03d" % i]))
            values[offset] = b"v%03d" % i
    broker.stop()
    files = segments(broker.data_dir)
    assert len(files) >= 4
    victim = files[1]
    later = {f: f.stat().st_size for f in files[2:-1]}
    last_size = files[-1].stat().st_size
    os.truncate(victim, victim.stat().st_size // 2)

    broker.start()
    with connect(broker) as k:
        got = {r.offset: r.value for r in k.fetch_all("dmg", 0)}
        assert got, "nothing fetched"
        assert set(got) < set(values) and all(got[o] == values[o] for o in got)
        first_lost = min(set(values) - set(got))
        assert all(o in got for o in values if o > max(set(values) - set(got)))  # all later ones
        assert all(o in got for o in values if o < first_lost)
        assert k.produce_ok("dmg", 0, make_batch([b"after"])) == 120
    assert {f: f.stat().st_size for f in files[2:-1]} == later  # nothing cut or deleted
    assert files[-1].stat().st_size > last_size  # (the produce after)
    assert "lost" in broker.stderr and victim.name in broker.stderr


def test_a_damaged_consume_queue_is_repaired_while_clients_consume(broker_factory):
    broker = broker_factory()
    with connect(broker) as k:
        k.create_topic("dq", 1)
        for i in range(200):
            k.produce_ok("dq", 0, make_batch([b"v%03d" % i]))
    broker.stop()
    [queue] = (Path(broker.data_dir) / "consumequeue").rglob("*.cq")
    data = bytearray(queue.read_bytes())
    data[50 * 20:120 * 20] = random.Random(7).randbytes(70 * 20)
    queue.write_bytes(bytes(data))
    broker.start()
    expected = [(i, b"v%03d" % i) for i in range(200)]

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"{broker.host}:{broker.port}", "group.id": "dq-c",
                         "enable.auto.commit": False, "fetch.error.backoff.ms": 50})
    consumer.assign([TopicPartition("dq", 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 200 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append((message.offset(), message.value()))
    consumer.close()
    assert got == expected

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=f"{broker.host}:{broker.port}", enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    consumer.assign([KTopicPartition("dq", 0)])
    consumer.seek(KTopicPartition("dq", 0), 0)
    assert [(m.offset, m.value) for m in consumer] == expected
    consumer.close()
    assert "rebuilt from the commitlog" in broker.stderr
    assert not (Path(broker.data_dir) / "rebuild_indexes").exists()


def test_a_topics_json_with_100000_partitions_starts(broker_factory, tmp_path: Path):
    data_dir = tmp_path / "big"
    data_dir.mkdir()
    (data_dir / "topics.json").write_text(json.dumps(
        {"big": {"id": str(uuid.uuid4()), "partitions": 100_000, "configs": {}}}))
    started = time.monotonic()
    broker = broker_factory(data_dir=data_dir)
    elapsed = time.monotonic() - started
    assert elapsed < 30, f"start took {elapsed:.1f} s"
    with connect(broker) as k:
        assert k.produce_ok("big", 54_321, make_batch([b"hello"])) == 0
        assert [r.value for r in k.fetch_all("big", 54_321)] == [b"hello"]
        entry = k.fetch("big", 99_999, 0)
        assert entry.error_code == ErrorCode.none and entry.high_watermark == 0
    fds = len(os.listdir(f"/proc/{broker.pid}/fd"))
    assert fds < 200, f"{fds} descriptors open"


@pytest.mark.parametrize("damage", ["a flipped byte", "cut short", "zeros"])
def test_a_damaged_checkpoint_loses_no_record(broker_factory, damage):
    """checkpoint.json damaged while the broker was stopped: it starts, says so in one line,
    rebuilds from the commitlog, and a confluent-kafka consumer reads every record at its
    offset; produces continue after the last one."""
    broker = broker_factory()
    expected = {0: [], 1: []}
    with connect(broker) as k:
        k.create_topic("cp", 2)
        for i in range(60):
            p = i % 2
            offset = k.produce_ok("cp", p, make_batch([b"v%03d" % i, b"w%03d" % i]))
            expected[p] += [(offset, b"v%03d" % i), (offset + 1, b"w%03d" % i)]
    broker.stop()
    path = Path(broker.data_dir) / "checkpoint.json"
    raw = bytearray(path.read_bytes())
    assert raw.startswith(b"rmqkafka-checkpoint 2 ")
    if damage == "a flipped byte":
        raw[len(raw) // 2] ^= 0x04
    elif damage == "cut short":
        del raw[len(raw) * 2 // 3:]
    else:
        raw = bytearray(len(raw))
    path.write_bytes(bytes(raw))
    broker.start()

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"{broker.host}:{broker.port}", "group.id": "cp-c",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("cp", 0, 0), TopicPartition("cp", 1, 0)])
    got, deadline = {0: [], 1: []}, time.monotonic() + 60
    while sum(map(len, got.values())) < 120 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got[message.partition()].append((message.offset(), message.value()))
    consumer.close()
    assert got == expected
    with connect(broker) as k:
        assert k.produce_ok("cp", 0, make_batch([b"after"])) == 60
    lines = [line for line in broker.stderr.splitlines() if "checkpoint.json is damaged" in line]
    assert len(lines) == 1, broker.stderr
