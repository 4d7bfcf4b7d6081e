"""Kafka transactions end to end: real clients against a real broker process.

A transactional producer's records go to their partitions at once; EndTxn writes COMMIT or
ABORT markers; a read_committed consumer reads up to the last stable offset and drops the
aborted records, a read_uncommitted one sees everything. A second producer with the same
transactional id fences the first; a transaction past its timeout is aborted; offsets sent
with the transaction become visible when it commits; all of it survives a restart.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _admin_create(broker, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(10)


def _producer(broker, txn_id: str, **extra):
    from confluent_kafka import Producer

    config = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": txn_id,
              "linger.ms": 0}
    config.update(extra)
    producer = Producer(config)
    producer.init_transactions(30)
    return producer


def _values(broker, topic: str, isolation: str, partitions: int = 1, idle: float = 2.0,
            expect: int | None = None) -> list[bytes]:
    """Every value a consumer with this isolation level reads from the start (assign, no
    group), in order per partition, until nothing new arrives for ``idle`` seconds (or
    ``expect`` values were read)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"read-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg.value())
            last = time.monotonic()
            if expect is not None and len(out) >= expect:
                break
    finally:
        consumer.close()
    return out


def _send(producer, topic: str, values: list[str], partition: int = 0) -> None:
    for value in values:
        producer.produce(topic, value.encode(), partition=partition)
    producer.flush(10)


def _raw_lso(broker, topic: str, partition: int = 0) -> tuple[int, int]:
    """(read_committed LATEST, read_uncommitted LATEST) from ListOffsets."""
    from confluent_kafka import Consumer, IsolationLevel, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    tp = TopicPartition(topic, partition)
    answers = []
    for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        result = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level)
        answers.append(result[tp].result(10).offset)
    del Consumer
    return answers[0], answers[1]


def test_commit_and_abort_read_committed_and_uncommitted(broker):
    topic = "txn-basic"
    _admin_create(broker, topic)
    producer = _producer(broker, "tx-basic")
    producer.begin_transaction()
    _send(producer, topic, [f"a{i}" for i in range(5)])
    producer.commit_transaction(10)
    producer.begin_transaction()
    _send(producer, topic, [f"b{i}" for i in range(5)])
    producer.abort_transaction(10)
    producer.begin_transaction()
    _send(producer, topic, [f"c{i}" for i in range(5)])
    producer.commit_transaction(10)
    committed = [f"a{i}".encode() for i in range(5)] + [f"c{i}".encode() for i in range(5)]
    everything = committed[:5] + [f"b{i}".encode() for i in range(5)] + committed[5:]
    assert _values(broker, topic, "read_committed") == committed
    assert _values(broker, topic, "read_uncommitted") == everything
    # an open transaction: read_committed stops before it, ListOffsets answers the LSO
    lso_before, end_before = _raw_lso(broker, topic)
    assert lso_before == end_before  # 15 records + 3 markers
    producer.begin_transaction()
    _send(producer, topic, ["d0", "d1"])
    lso, end = _raw_lso(broker, topic)
    assert (lso, end) == (end_before, end_before + 2)
    assert _values(broker, topic, "read_committed", idle=1.0) == committed
    assert _values(broker, topic, "read_uncommitted", idle=1.0) == everything + [b"d0", b"d1"]
    producer.commit_transaction(10)
    assert _values(broker, topic, "read_committed") == committed + [b"d0", b"d1"]
    lso, end = _raw_lso(broker, topic)
    assert lso == end == end_before + 3


def test_a_second_producer_fences_the_first(broker):
    from confluent_kafka import KafkaException

    topic = "txn-fence"
    _admin_create(broker, topic)
    first = _producer(broker, "tx-fence")
    first.begin_transaction()
    _send(first, topic, ["old0"])
    second = _producer(broker, "tx-fence")  # aborts the first one's open transaction
    second.begin_transaction()
    _send(second, topic, ["new0"])
    second.commit_transaction(10)
    with pytest.raises(KafkaException) as caught:
        first.produce(topic, b"old1", partition=0)
        first.flush(5)
        first.commit_transaction(10)
    assert caught.value.args[0].fatal(), caught.value
    assert _values(broker, topic, "read_committed") == [b"new0"]


def test_transaction_timeout_aborts(broker):
    from confluent_kafka import KafkaException

    topic = "txn-timeout"
    _admin_create(broker, topic)
    producer = _producer(broker, "tx-timeout", **{"transaction.timeout.ms": 1500})
    producer.begin_transaction()
    _send(producer, topic, ["late0", "late1"])
    time.sleep(4)
    lso, end = _raw_lso(broker, topic)
    assert lso == end  # aborted by the broker: the marker is written
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)
    assert _values(broker, topic, "read_committed", idle=1.0) == []
    assert _values(broker, topic, "read_uncommitted", idle=1.0) == [b"late0", b"late1"]
    # another producer with the same id goes on
    again = _producer(broker, "tx-timeout")
    again.begin_transaction()
    _send(again, topic, ["ok"])
    again.commit_transaction(10)
    assert _values(broker, topic, "read_committed") == [b"ok"]


def test_consume_transform_produce(broker):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    source, sink, group = "ctp-in", "ctp-out", "ctp-group"
    _admin_create(broker, source)
    _admin_create(broker, sink)
    plain = _producer(broker, "tx-feed")
    plain.begin_transaction()
    _send(plain, source, [f"m{i}" for i in range(10)])
    plain.commit_transaction(10)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([source])
    copier = _producer(broker, "tx-copier")
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    assert len(got) == 10
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def committed_offset() -> int:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(source, 0)])], require_stable=False)
        return futures[group].result(10).topic_partitions[0].offset

    # first batch: aborted, its offsets must not appear
    copier.begin_transaction()
    for msg in got[:5]:
        copier.produce(sink, msg.value().upper(), partition=0)
    copier.send_offsets_to_transaction([TopicPartition(source, 0, got[4].offset() + 1)],
                                       consumer.consumer_group_metadata(), 10)
    assert committed_offset() < 0
    copier.abort_transaction(10)
    assert committed_offset() < 0
    copier.begin_transaction()
    for msg in got:
        copier.produce(sink, msg.value().upper(), partition=0)
    copier.send_offsets_to_transaction([TopicPartition(source, 0, got[-1].offset() + 1)],
                                       consumer.consumer_group_metadata(), 10)
    assert committed_offset() < 0
    copier.commit_transaction(10)
    assert committed_offset() == got[-1].offset() + 1
    consumer.close()
    assert _values(broker, sink, "read_committed") == [f"M{i}".encode() for i in range(10)]


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_markers_and_lso_survive_a_restart(broker_factory, how):
    broker = broker_factory()
    topic = "txn-restart"
    _admin_create(broker, topic)
    producer = _producer(broker, "tx-restart", **{"transaction.timeout.ms": 3000})
    producer.begin_transaction()
    _send(producer, topic, ["a"])
    producer.commit_transaction(10)
    producer.begin_transaction()
    _send(producer, topic, ["b"])
    producer.abort_transaction(10)
    producer.begin_transaction()
    _send(producer, topic, ["open"])
    lso, end = _raw_lso(broker, topic)
    assert lso < end
    if how == "kill":
        broker.kill()
        broker.restart(same_port=True)
    else:
        broker.restart(same_port=True)
    lso_after, end_after = _raw_lso(broker, topic)
    assert (lso_after, end_after) == (lso, end)  # the open transaction is still open
    assert _values(broker, topic, "read_committed", idle=1.0) == [b"a"]
    # it times out (its clock started before the restart) and is aborted
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _raw_lso(broker, topic)[0] != _raw_lso(broker, topic)[1]:
        time.sleep(0.5)
    lso, end = _raw_lso(broker, topic)
    assert lso == end
    assert _values(broker, topic, "read_committed", idle=1.0) == [b"a"]
    assert _values(broker, topic, "read_uncommitted", idle=1.0) == [b"a", b"b", b"open"]
    again = _producer(broker, "tx-restart")
    again.begin_transaction()
    _send(again, topic, ["c"])
    again.commit_transaction(10)
    assert _values(broker, topic, "read_committed") == [b"a", b"c"]


def test_aiokafka_transactions(broker):
    from aiokafka import AIOKafkaProducer

    topic = "txn-aiokafka"
    _admin_create(broker, topic)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="tx-aio")
        await asyncio.wait_for(producer.start(), 30)
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait(topic, f"x{i}".encode(), partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"dropped", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(topic, b"y", partition=0)
        finally:
            await producer.stop()

    asyncio.run(run())
    assert _values(broker, topic, "read_committed") == [b"x0", b"x1", b"x2", b"y"]
    assert _values(broker, topic, "read_uncommitted") == [b"x0", b"x1", b"x2", b"dropped", b"y"]

    from aiokafka import AIOKafkaConsumer, TopicPartition as AioTP

    async def read() -> list[bytes]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                    isolation_level="read_committed", auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([AioTP(topic, 0)])
            out: list[bytes] = []
            deadline = time.monotonic() + 10
            while len(out) < 4 and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for msgs in batch.values():
                    out.extend(m.value for m in msgs)
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(read()) == [b"x0", b"x1", b"x2", b"y"]


def test_kafka_python_transactions(broker):
    from kafka import KafkaProducer

    if not hasattr(KafkaProducer, "init_transactions"):
        pytest.skip("this kafka-python has no transactional producer")
    topic = "txn-kafka-python"
    _admin_create(broker, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="tx-kp")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"p0", partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"gone", partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close(timeout=5)
    assert _values(broker, topic, "read_committed") == [b"p0"]
    assert _values(broker, topic, "read_uncommitted") == [b"p0", b"gone"]


def test_rmqk_consume_isolation(broker):
    from click.testing import CliRunner

    from rmqkafka.cli import main

    topic = "txn-cli"
    _admin_create(broker, topic)
    producer = _producer(broker, "tx-cli")
    producer.begin_transaction()
    _send(producer, topic, ["kept"])
    producer.commit_transaction(10)
    producer.begin_transaction()
    _send(producer, topic, ["dropped"])
    producer.abort_transaction(10)

    def consume(*extra: str) -> list[str]:
        result = CliRunner().invoke(main, ["consume", topic, "-b", broker.bootstrap_servers, "-o", "beginning",
                                           "--exit-at-end", *extra], catch_exceptions=False, prog_name="rmqk")
        assert result.exit_code == 0, result.output
        return result.stdout.split()

    assert consume() == ["kept"]
    assert consume("--isolation", "read_committed") == ["kept"]
    assert consume("--isolation", "read_uncommitted") == ["kept", "dropped"]


def test_aiokafka_send_offsets_to_transaction(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as AioTP

    source, sink, group = "aio-in", "aio-out", "aio-group"
    _admin_create(broker, source)
    _admin_create(broker, sink)
    feed = _producer(broker, "tx-aio-feed")
    feed.begin_transaction()
    _send(feed, source, ["s0", "s1", "s2"])
    feed.commit_transaction(10)

    async def run() -> int | None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id="tx-aio-ctp")
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                    isolation_level="read_committed", auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await producer.start()
        await consumer.start()
        try:
            consumer.assign([AioTP(source, 0)])
            got = []
            deadline = time.monotonic() + 15
            while len(got) < 3 and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(msgs)
            assert len(got) == 3
            async with producer.transaction():
                for msg in got:
                    await producer.send_and_wait(sink, msg.value.upper(), partition=0)
                await producer.send_offsets_to_transaction({AioTP(source, 0): got[-1].offset + 1}, group)
            return await consumer.committed(AioTP(source, 0))
        finally:
            await consumer.stop()
            await producer.stop()

    committed = asyncio.run(run())
    assert committed == 3  # the last record (offset 2) + 1
    assert _values(broker, sink, "read_committed") == [b"S0", b"S1", b"S2"]


def test_aborted_transactions_across_segment_rolls(broker_factory, tmp_path):
    """Two transactional producers interleave on small commitlog segments (4 KiB), so
    transactions start in one segment and end several later, aborted ones overlapping
    committed ones. read_committed readers, from the start and from offsets inside aborted
    transactions, get exactly the committed records in order, before and after kill -9."""
    from confluent_kafka import Consumer, TopicPartition

    config = tmp_path / "server.properties"
    config.write_text("internal.segment.bytes=4096\n")  # Kafka's test-only segment size
    broker = broker_factory(config_file=config)
    topic = "txn-rolls"
    _admin_create(broker, topic, partitions=2)
    a = _producer(broker, "tx-rolls-a")
    b = _producer(broker, "tx-rolls-b")
    committed: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}  # (offset, value)
    pad = "x" * 200
    for round_ in range(8):
        a.begin_transaction()
        b.begin_transaction()
        sent: dict[str, list[tuple[int, int, bytes]]] = {"a": [], "b": []}
        for i in range(12):
            for name, producer in (("a", a), ("b", b)):
                value = f"{name}{round_}-{i}-{pad}".encode()
                producer.produce(topic, value, partition=i % 2, on_delivery=lambda err, msg, name=name, sent=sent: (
                    sent[name].append((msg.partition(), msg.offset(), msg.value())) if err is None else None))
            a.flush(10)
            b.flush(10)
        # a aborts every other round, b every third; the committing one ends last half the time
        abort_a, abort_b = round_ % 2 == 0, round_ % 3 == 0
        ends = [(a, abort_a, "a"), (b, abort_b, "b")]
        for producer, abort, name in ends if round_ % 4 < 2 else reversed(ends):
            if abort:
                producer.abort_transaction(10)
            else:
                producer.commit_transaction(10)
                for partition, offset, value in sent[name]:
                    committed[partition].append((offset, value))
    assert len(sent["a"]) == len(sent["b"]) == 12
    expected = {p: [v for _, v in sorted(records)] for p, records in committed.items()}
    segments = sorted((broker.data_dir / "commitlog").glob("*.log"))
    assert len(segments) > 10, segments

    def read_committed(partition: int, start: int) -> list[bytes]:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rolls",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "fetch.max.bytes": 2048, "message.max.bytes": 1000,
                             "max.partition.fetch.bytes": 1024})
        consumer.assign([TopicPartition(topic, partition, start)])
        out: list[bytes] = []
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    out.append((msg.offset(), msg.value()))
                if consumer.position([TopicPartition(topic, partition)])[0].offset >= high:
                    break
        finally:
            consumer.close()
        return out

    def check() -> None:
        for partition in (0, 1):
            got = read_committed(partition, 0)
            assert [v for _, v in got] == expected[partition]
            # start inside the aborted and committed transactions too: the records of
            # committed ones from there on, and no aborted record
            offsets = [o for o, _ in got]
            for start in (3, 17, 40, 77, 101):
                tail = [v for o, v in got if o >= start]
                assert [v for _, v in read_committed(partition, start)] == tail, (partition, start)
            assert len(set(offsets)) == len(offsets)

    check()
    broker.kill()
    broker.restart(same_port=True)
    check()


def _describe_txn(broker, txn_id: str):
    from rawkafka import ErrorCode, KafkaRaw

    with KafkaRaw(broker.host, broker.port) as conn:
        state = conn.request(65, 0, transactional_ids=[txn_id]).transaction_states[0]
    assert state.error_code == ErrorCode.none, state
    return state


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_describe_transactions_keeps_start_times_across_a_restart(broker_factory, how):
    """DescribeTransactions reports a completed transaction's start time (Kafka's
    TransactionLog value keeps ``transaction_start_timestamp_ms``), not the restart's."""
    broker = broker_factory()
    topic = "txn-start-time"
    _admin_create(broker, topic)
    producer = _producer(broker, "tx-start-time")
    producer.begin_transaction()
    _send(producer, topic, ["a"])
    producer.commit_transaction(10)
    before = _describe_txn(broker, "tx-start-time")
    assert before.transaction_state == "CompleteCommit"
    started = before.transaction_start_time.timestamp()
    assert abs(time.time() - started) < 60
    # the restart must come visibly later than the start (a second on the broker's clock)
    while time.time() - started < 1.5:
        time.sleep(0.1)
    if how == "kill":
        broker.kill()
    broker.restart(same_port=True)
    after = _describe_txn(broker, "tx-start-time")
    assert after.transaction_state == "CompleteCommit"
    assert after.transaction_start_time == before.transaction_start_time
    assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch)


def test_describe_transactions_keeps_the_start_time_of_one_aborted_after_a_restart(broker_factory):
    """A transaction open at a kill -9 and aborted by its timeout after the restart keeps the
    start time it had before the kill."""
    broker = broker_factory()
    topic = "txn-start-abort"
    _admin_create(broker, topic)
    producer = _producer(broker, "tx-start-abort", **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    _send(producer, topic, ["open"])
    before = _describe_txn(broker, "tx-start-abort")
    assert before.transaction_state == "Ongoing"
    broker.kill()
    time.sleep(1.5)
    broker.restart(same_port=True)
    deadline = time.monotonic() + 30
    while (after := _describe_txn(broker, "tx-start-abort")).transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline, after
        time.sleep(0.2)
    assert after.transaction_start_time == before.transaction_start_time
