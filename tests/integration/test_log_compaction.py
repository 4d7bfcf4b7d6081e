"""Log compaction (cleanup.policy=compact) against real broker processes and real clients:
after the cleaner runs, a read from the start gives the latest record per key (confluent-kafka,
kafka-python, aiokafka), tombstones until delete.retention.ms passes and then none, a
consumer at the head sees every record, and a broker killed (kill -9) while it cleans
loses nothing live. (Keyless records refused with INVALID_RECORD: test_kafka_parity.)"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from partition_reads import read_aiokafka, read_kafka_python
from rawkafka import wait_until

TIMEOUT = 60  # generous: a loaded two-core machine
EAGER = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
         "delete.retention.ms": "3000"}


@pytest.fixture
def compacting(broker_factory, tmp_path: Path):
    config = tmp_path / "server.properties"
    config.write_text("log.cleaner.backoff.ms=200\n")
    return broker_factory(config_file=config)


def create(bootstrap: str, configs: dict[str, str]) -> str:
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, config=configs)])[topic].result(TIMEOUT)
    return topic


def produce(bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": TIMEOUT * 1000})
    failed = []
    for key, value in pairs:
        producer.produce(topic, key=key, value=value, on_delivery=lambda err, msg: err and failed.append(err))
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0 and not failed


def read_confluent(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record from the start to the high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                if out and out[-1][0] >= high - 1:
                    break
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
            if msg.offset() >= high - 1:
                break
        return out
    finally:
        consumer.close()


def triples(read: Callable[..., list[Any]]) -> Callable[[str, str], list[tuple[int, bytes, bytes | None]]]:
    """(offset, key, value) of every record ``read`` (a partition_reads reader) gives from
    the start to the high watermark."""
    return lambda bootstrap, topic: [(r.offset, r.key, r.value) for r in read(bootstrap, topic, timeout=TIMEOUT)]


READERS = {"confluent": read_confluent, "kafka-python": triples(read_kafka_python), "aiokafka": triples(read_aiokafka)}


def produce_and_roll(bootstrap: str, topic: str, pairs: list[tuple[bytes, bytes | None]],
                     sentinel: bytes = b"1") -> None:
    """``pairs``, then, past segment.ms, the record ``sentinel`` under the key b"sentinel":
    its batch rolls the partition's segment, so the pairs leave the active one and may be
    cleaned."""
    produce(bootstrap, topic, pairs)
    time.sleep(0.3)
    produce(bootstrap, topic, [(b"sentinel", sentinel)])


def rounds(keys: int, count: int) -> list[tuple[bytes, bytes]]:
    return [(b"k%03d" % k, b"v%03d-%d" % (k, r)) for r in range(count) for k in range(keys)]


def wait_cleaned(bootstrap: str, topic: str, expected: int, *,
                 but: bytes | None = None) -> list[tuple[int, bytes, bytes | None]]:
    """Reads from the start until it gives ``expected`` records (the cleaner has run),
    not counting those with key ``but``."""
    seen: list = []

    def done() -> bool:
        seen[:] = read_confluent(bootstrap, topic)
        return len([k for _, k, _ in seen if k != but]) == expected

    wait_until(done, timeout=TIMEOUT, interval=0.5, message=f"{expected} records after cleaning")
    return seen


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reading_from_the_start_after_cleaning_gives_the_latest_per_key(compacting, reader):
    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, EAGER)
    produce_and_roll(bootstrap, topic, rounds(50, 4), b"last")
    wait_cleaned(bootstrap, topic, 51)
    got = READERS[reader](bootstrap, topic)
    assert len(got) == 51
    assert {k: v for _, k, v in got} == {**{b"k%03d" % k: b"v%03d-3" % k for k in range(50)}, b"sentinel": b"last"}
    # the offsets are the originals: the latest round is offsets 150-199, the sentinel 200
    assert [o for o, _, _ in got] == list(range(150, 201))


def test_tombstones_stay_for_delete_retention_then_go(compacting):
    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, EAGER)
    produce(bootstrap, topic, rounds(20, 2))
    produce_and_roll(bootstrap, topic, [(b"k%03d" % k, None) for k in range(5)])
    got = wait_cleaned(bootstrap, topic, 21)
    assert {k for _, k, v in got if v is None} == {b"k%03d" % k for k in range(5)}
    time.sleep(3.5)  # delete.retention.ms after the cleaning that saw them
    produce_and_roll(bootstrap, topic, [(b"sentinel", b"2")], b"3")
    # the 15 keys left, the cleaned sentinel "2" and the active one "3"
    got = wait_cleaned(bootstrap, topic, 17)
    assert all(v is not None for _, _, v in got)
    assert {k for _, k, _ in got} == {b"k%03d" % k for k in range(5, 20)} | {b"sentinel"}


def test_a_consumer_at_the_head_sees_every_record(compacting):
    """Records younger than min.compaction.lag.ms are not cleaned: a consumer keeping up
    sees each of them."""
    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, {**EAGER, "min.compaction.lag.ms": "600000"})
    produce_and_roll(bootstrap, topic, rounds(30, 3))
    time.sleep(1.5)  # several cleaner passes
    got = read_confluent(bootstrap, topic)
    assert [o for o, _, _ in got] == list(range(91))


def test_kill_9_while_cleaning_loses_nothing_live(compacting):
    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, {**EAGER, "delete.retention.ms": "600000"})
    keys = 2000
    pairs = rounds(keys, 20)
    random.Random(7).shuffle(pairs)
    produce_and_roll(bootstrap, topic, pairs)
    latest = {}
    for key, value in pairs:
        latest[key] = value
    compaction = compacting.data_dir / "compaction"
    caught = 0  # kills while a cleaning was writing its file
    for _ in range(3):
        # kill while a cleaning writes its file, when one is caught doing so; else after 10 s
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if compaction.exists() and any(n.endswith(".tmp") for _, _, names in os.walk(compaction)
                                           for n in names):
                caught += 1
                break
            time.sleep(0.002)
        compacting.kill()
        compacting.start()
        bootstrap = compacting.bootstrap_servers
        produce(bootstrap, topic, [(b"sentinel", b"again")])
    got = wait_cleaned(bootstrap, topic, keys, but=b"sentinel")
    assert {k: v for _, k, v in got if k != b"sentinel"} == latest
    print(f"kills during a cleaning: {caught} of 3")


def test_describe_console_and_metrics_show_the_cleaner(broker_factory, tmp_path: Path):
    import json
    import urllib.request

    from click.testing import CliRunner

    from rmqkafka.cli import main

    config = tmp_path / "server.properties"
    config.write_text("log.cleaner.backoff.ms=200\n")
    broker = broker_factory(config_file=config, args=["--metrics-port", "0"])
    bootstrap, url = broker.bootstrap_servers, broker.metrics_url
    topic = create(bootstrap, EAGER)
    produce_and_roll(bootstrap, topic, rounds(40, 3))
    wait_cleaned(bootstrap, topic, 41)
    result = CliRunner().invoke(main, ["topics", "describe", topic, "-b", bootstrap, "--metrics-url", url, "--json"],
                                catch_exceptions=False, prog_name="rmqk")
    assert result.exit_code == 0, result.output
    (doc,) = json.loads(result.stdout)
    progress = doc["partitions"][0]["cleaner"]
    assert progress["cleaned_to"] == 120 and progress["last_run_ms"] > 0 and 0 <= progress["dirty_ratio"] <= 1
    text = CliRunner().invoke(main, ["topics", "describe", topic, "-b", bootstrap, "--metrics-url", url],
                              catch_exceptions=False, prog_name="rmqk").stdout
    assert "CLEANED-TO" in text and "DIRTY-RATIO" in text
    with urllib.request.urlopen(url + "/metrics", timeout=TIMEOUT) as response:
        metrics = response.read().decode()
    values = {line.split()[0]: float(line.split()[1]) for line in metrics.splitlines()
              if line.startswith("rmqk_cleaner_") and " " in line}
    assert values["rmqk_cleaner_runs_total"] >= 1
    assert values["rmqk_cleaner_read_bytes_total"] > values["rmqk_cleaner_written_bytes_total"] > 0
    assert values["rmqk_cleaner_reclaimed_bytes_total"] > 0
    assert values[f'rmqk_cleaner_cleaned_offset{{partition="0",topic="{topic}"}}'] == 120
    with urllib.request.urlopen(url + "/api/topics", timeout=TIMEOUT) as response:
        api = json.load(response)
    assert api["cleaner"]["runs"] >= 1


def test_delete_records_is_refused_on_a_compact_only_topic(compacting):
    """As Kafka's deleteRecordsOnLeader: POLICY_VIOLATION unless cleanup.policy has delete."""
    from confluent_kafka import KafkaError, KafkaException

    bootstrap = compacting.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    compact_only = create(bootstrap, {"cleanup.policy": "compact"})
    both = create(bootstrap, {"cleanup.policy": "compact,delete"})
    for topic in (compact_only, both):
        produce(bootstrap, topic, rounds(3, 2))
    with pytest.raises(KafkaException) as refused:
        admin.delete_records([TopicPartition(compact_only, 0, 2)])[TopicPartition(compact_only, 0, 2)].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    done = admin.delete_records([TopicPartition(both, 0, 2)])[TopicPartition(both, 0, 2)].result(TIMEOUT)
    assert done.low_watermark == 2


def test_the_spark_data_source_reads_a_cleaned_range(compacting):
    """The PySpark source's executor read (spark_connector.range_read) steps over the
    offsets cleaning removed, with no data loss reported."""
    pa = pytest.importorskip("pyarrow")
    from rmqkafka.spark_connector.offsets import OffsetRange
    from rmqkafka.spark_connector.options import ClientOptions
    from rmqkafka.spark_connector.range_read import read_range
    from rmqkafka.spark_connector.schema import arrow_schema, spark_schema

    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, EAGER)
    produce_and_roll(bootstrap, topic, rounds(25, 4))
    wait_cleaned(bootstrap, topic, 26)
    batches = list(read_range(ClientOptions(bootstrap, {}), OffsetRange(topic, 0, 0, 101),
                              arrow_schema(spark_schema(False)), include_headers=False, fail_on_data_loss=True,
                              group_id="compacted", poll_timeout_ms=10_000))
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(75, 101))
    assert table.column("value").to_pylist()[:2] == [b"v000-3", b"v001-3"]


def test_keyless_records_are_refused_by_kafka_python_and_aiokafka(compacting):
    """INVALID_RECORD, as Kafka's LogValidator answers (confluent-kafka and raw requests:
    test_kafka_parity)."""
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, {"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0)
    try:
        assert producer.send(topic, key=b"k", value=b"v").get(TIMEOUT).offset == 0
        with pytest.raises(InvalidRecordError):
            producer.send(topic, value=b"no key").get(TIMEOUT)
    finally:
        producer.close()

    async def aiokafka_refused() -> None:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError as AioKafkaError

        aio = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await aio.start()
        try:
            assert (await aio.send_and_wait(topic, key=b"k", value=b"v2")).offset == 1
            # aiokafka has no class for error 87 (INVALID_RECORD): it raises UnknownError
            with pytest.raises(AioKafkaError):
                await aio.send_and_wait(topic, value=b"no key")
            # nothing of the refused batch was stored
            assert (await aio.send_and_wait(topic, key=b"k", value=b"v3")).offset == 2
        finally:
            await aio.stop()

    asyncio.run(aiokafka_refused())


def test_transactions_on_a_compacted_topic(compacting):
    """Aborted records are removed by the cleaner, committed ones compacted like any other:
    read_uncommitted and read_committed consumers both end with the committed latest values."""
    from confluent_kafka import Consumer

    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, EAGER)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}", "linger.ms": 5})
    producer.init_transactions(TIMEOUT)
    for round_, commit in enumerate([True, False, True, False]):
        producer.begin_transaction()
        for k in range(10):
            producer.produce(topic, key=b"k%d" % k, value=b"r%d" % round_)
        producer.flush(TIMEOUT)
        if commit:
            producer.commit_transaction(TIMEOUT)
        else:
            producer.abort_transaction(TIMEOUT)
    time.sleep(0.3)
    produce(bootstrap, topic, [(b"sentinel", b"1")])

    def read(isolation: str) -> dict[bytes, bytes]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{isolation}", "enable.auto.commit": False,
                             "isolation.level": isolation, "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            seen: dict[bytes, bytes] = {}
            deadline = time.monotonic() + TIMEOUT
            while b"sentinel" not in seen and time.monotonic() < deadline:
                msg = consumer.poll(1)
                if msg is not None and not msg.error():
                    seen[msg.key()] = msg.value()
            return seen
        finally:
            consumer.close()

    def cleaned() -> bool:
        got = read_confluent(bootstrap, topic)
        return [v for _, k, v in got if k != b"sentinel"] == [b"r2"] * 10

    # read_uncommitted sees no aborted record once the cleaner removed them
    wait_until(cleaned, timeout=TIMEOUT, interval=0.5, message="aborted records removed")
    expected = {**{b"k%d" % k: b"r2" for k in range(10)}, b"sentinel": b"1"}
    assert read("read_uncommitted") == expected
    assert read("read_committed") == expected


def test_list_offsets_over_a_cleaned_topic(compacting):
    """EARLIEST stays the log start (cleaning moves no offset); a timestamp lookup lands on
    the first record kept at or after it; LATEST is the log end."""
    bootstrap = compacting.bootstrap_servers
    topic = create(bootstrap, EAGER)
    before = int(time.time() * 1000)
    produce_and_roll(bootstrap, topic, rounds(10, 3))
    wait_cleaned(bootstrap, topic, 11)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lo"})
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.get_watermark_offsets(tp, timeout=TIMEOUT) == (0, 31)
        (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, before)], timeout=TIMEOUT)
        assert found.offset == 20  # offsets 0-19 were cleaned away
    finally:
        consumer.close()
