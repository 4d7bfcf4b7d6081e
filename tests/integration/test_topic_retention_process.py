"""Issue 25, per-topic retention, against a real broker process and real clients: a 1-hour
topic and a 1-second topic sharing the commitlog (the short one's log start follows its
retention, the long one keeps everything, the commitlog's space comes back), retention.bytes,
a dynamic change, kill -9 while retention runs, and a full disk."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from partition_reads import at_least, read_aiokafka, read_kafka_python
from rawkafka import EARLIEST, ErrorCode, KafkaRaw, make_batch, wait_until
from rmqkafka.storage.checkpoint_file import read_checkpoint

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HOUR_MS = 3_600_000
PROPERTIES = "internal.segment.bytes=16384\nlog.retention.check.interval.ms=300\n"


def start(broker_factory, tmp_path: Path, **options):
    config = tmp_path / "server.properties"
    config.write_text(PROPERTIES)
    return broker_factory(config_file=config, **options)


def commitlog_bytes(broker) -> int:
    """Bytes of the commitlog's segment files; one that retention deletes between the
    listing and its stat counts nothing (it failed the full-disk test once)."""
    total = 0
    for path in (Path(broker.data_dir) / "commitlog").glob("*.log"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


def checkpointed_log_starts(broker) -> list[int]:
    try:
        checkpoint = read_checkpoint(Path(broker.data_dir) / "checkpoint.json") or {}
    except OSError:  # being replaced
        return []
    return list(checkpoint.get("log_start", {}).values())


def earliest(k: KafkaRaw, topic: str, partition: int = 0) -> int:
    entry = k.list_offsets(topic, partition, EARLIEST)
    assert entry.error_code == ErrorCode.none
    return entry.offset


def produce_both(bootstrap: str, rounds: int) -> list[bytes]:
    """confluent-kafka: interleaved records of "long" (small) and "short" (large)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    errors: list = []
    long_values = [b"long-%04d" % i for i in range(rounds)]
    for i in range(rounds):
        producer.produce("long", long_values[i], partition=0, on_delivery=lambda e, m: e and errors.append(e))
        producer.produce("short", b"s" * 300, partition=0, on_delivery=lambda e, m: e and errors.append(e))
        if i % 50 == 0:
            producer.flush(60)
    assert producer.flush(60) == 0 and not errors
    return long_values


def test_a_one_hour_and_a_one_second_topic_share_the_log(broker_factory, tmp_path):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    broker = start(broker_factory, tmp_path)
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic("long", 1, 1, config={"retention.ms": str(HOUR_MS)}),
        NewTopic("short", 1, 1, config={"retention.ms": "1000"}),
    ])
    for f in futures.values():
        f.result(30)
    long_values = produce_both(bootstrap, 600)
    produced = commitlog_bytes(broker)
    with KafkaRaw(broker.host, broker.port) as k:
        wait_until(lambda: earliest(k, "short") == 600, timeout=60, message="the short topic's log start")
        # the space comes back once the long topic's batches are moved out of the old segments
        wait_until(lambda: commitlog_bytes(broker) < produced // 2, timeout=60, message="space reclaimed")
        assert earliest(k, "long") == 0
        refused = k.fetch("short", 0, 0)
        assert refused.error_code == ErrorCode.offset_out_of_range
        assert [r.value for r in k.fetch_all("long", 0)] == long_values
    read = read_kafka_python(bootstrap, "long", at_least(600), auto_offset_reset="earliest")
    assert [r.value for r in read] == long_values

    # the short topic's log start (once checkpointed) and the moves survive kill -9
    wait_until(lambda: 600 in checkpointed_log_starts(broker), timeout=60, message="the log start checkpointed")
    broker.kill()
    broker.start()
    bootstrap = broker.bootstrap_servers
    with KafkaRaw(broker.host, broker.port) as k:
        assert earliest(k, "short") == 600
        assert [r.value for r in k.fetch_all("long", 0)] == long_values

    # a dynamic change takes effect at the next check
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", "long", incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)
    time.sleep(1.1)  # the records are now older than the new second
    with KafkaRaw(broker.host, broker.port) as k:
        wait_until(lambda: earliest(k, "long") == 600, timeout=60, message="the new retention.ms applied")


def test_retention_bytes_and_unlimited(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    with KafkaRaw(broker.host, broker.port) as k:
        k.create_topic("sized", 1, {"retention.bytes": "4000"})
        k.create_topic("forever", 1, {"retention.ms": "-1"})
        k.create_topic("gone", 1, {"retention.ms": "0"})
        sizes = []
        for i in range(60):
            batch = make_batch([b"%04d" % i + b"x" * 200])
            sizes.append(len(batch))
            k.produce_ok("sized", 0, batch)
            k.produce_ok("forever", 0, make_batch([b"f%04d" % i]))
            k.produce_ok("gone", 0, make_batch([b"g" * 400]))

        def sized_start() -> int:
            return earliest(k, "sized")

        wait_until(lambda: sized_start() > 0 and earliest(k, "gone") == 60, timeout=60, message="retention")
        start_offset = sized_start()
        kept = sum(sizes[start_offset:])
        assert kept >= 4000 and kept - sizes[start_offset] < 4000  # the fewest whole batches holding 4000
        assert [r.value for r in k.fetch_all("sized", 0, start_offset)] == [
            b"%04d" % i + b"x" * 200 for i in range(start_offset, 60)]
        assert [r.value for r in k.fetch_all("forever", 0)] == [b"f%04d" % i for i in range(60)]
        # aiokafka asked to read from offset 0: past the log start it is answered
        # OFFSET_OUT_OF_RANGE and resets to the earliest offset, as against Kafka
        read = read_aiokafka(broker.bootstrap_servers, "sized", at_least(60 - start_offset), start=0,
                             auto_offset_reset="earliest")
        assert [r.value for r in read] == [b"%04d" % i + b"x" * 200 for i in range(start_offset, 60)]
        # DescribeLogDirs counts the bytes from the log start on
        result = k.request(35, 4, topics=[dict(topic=t, partitions=[0]) for t in ("sized", "gone")]).results[0]
        reported = {t.name: t.partitions[0].partition_size for t in result.topics}
        assert reported == {"sized": kept, "gone": 0}
        # DeleteRecords keeps working beside retention, and ListOffsets follows both
        response = k.request(21, 2, topics=[dict(name="forever", partitions=[dict(partition_index=0, offset=10)])],
                             timeout=10_000)
        assert response.topics[0].partitions[0].low_watermark == 10
        assert earliest(k, "forever") == 10


def test_kill_9_while_retention_moves_and_deletes(broker_factory, tmp_path):
    """Retention runs every 300 ms while records keep coming; the broker is killed at
    random points of its runs, three times: every acknowledged record of the long topic is
    still there, once, in order."""
    broker = start(broker_factory, tmp_path, flush="sync")
    with KafkaRaw(broker.host, broker.port) as k:
        k.create_topic("long", 1, {"retention.ms": str(HOUR_MS)})
        k.create_topic("short", 1, {"retention.ms": "1"})
    acknowledged: list[bytes] = []
    for round_ in range(3):
        with KafkaRaw(broker.host, broker.port) as k:
            deadline = time.monotonic() + 2.0 + round_ * 0.37
            i = 0
            while time.monotonic() < deadline:
                value = b"r%d-%05d" % (round_, i)
                k.produce_ok("long", 0, make_batch([value]))
                acknowledged.append(value)
                k.produce_ok("short", 0, make_batch([b"s" * 500] * 3))
                i += 1
        broker.kill()
        broker.start()
        with KafkaRaw(broker.host, broker.port) as k:
            assert [r.value for r in k.fetch_all("long", 0)] == acknowledged
    with KafkaRaw(broker.host, broker.port) as k:
        wait_until(lambda: earliest(k, "short") == k.high_watermark("short"), timeout=60,
                   message="the short topic emptied")
        assert [r.value for r in k.fetch_all("long", 0)] == acknowledged


def test_a_full_disk_while_retention_moves(broker_factory, small_fs):
    """The short topic's records expire 3 s after they are written, once the disk is full:
    retention cannot move the long topic's batches (no room) nor checkpoint; nothing
    acknowledged is lost, the broker keeps serving, and retention finishes once there is room."""
    config = small_fs.path / "server.properties"
    config.write_text(PROPERTIES + "log.dir.reserve.bytes=1048576\n")
    broker = broker_factory(data_dir=small_fs.path / "data", flush="sync", config_file=config)
    with KafkaRaw(broker.host, broker.port) as k:
        k.create_topic("long", 1, {"retention.ms": str(HOUR_MS)})
        k.create_topic("short", 1, {"retention.ms": "1"})
        acknowledged = []
        expires = int(time.time() * 1000) + 3000
        for i in range(300):
            k.produce_ok("long", 0, make_batch([b"l%04d" % i]))
            acknowledged.append(b"l%04d" % i)
            k.produce_ok("short", 0, make_batch([b"s" * 1000], timestamps=[expires]))
        small_fs.fill()
        time.sleep(5)  # several retention runs on the full disk
        assert broker.running
        assert [r.value for r in k.fetch_all("long", 0)] == acknowledged
        small_fs.free()
        wait_until(lambda: earliest(k, "short") == 300 and commitlog_bytes(broker) < 200_000, timeout=60,
                   message="the short topic's log start, space reclaimed")
        # a log start is durable once a checkpoint recorded it (as for DeleteRecords)
        wait_until(lambda: 300 in checkpointed_log_starts(broker), timeout=60, message="the log start checkpointed")
    assert "could not move" in broker.stderr
    broker.kill()
    broker.start()
    with KafkaRaw(broker.host, broker.port) as k:
        assert [r.value for r in k.fetch_all("long", 0)] == acknowledged
        assert earliest(k, "short") == 300
