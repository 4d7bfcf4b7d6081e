"""RocketMQ transaction messages against a real broker process, over the plain Kafka
protocol (rawkafka and confluent-kafka, no client library): half messages are invisible to
fetches, views and ListOffsets until committed; a produce response names where the half
message reserved its offset; ends are refused with INVALID_RECORD when nothing is pending;
a committed message with a delay waits from the commit; and under kill -9 in the middle of
a stream of halves and ends, every committed message is visible exactly once and no
rolled-back one ever is.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter

import pytest
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LATEST, MAX_TIMESTAMP = -1, -3


def half_headers(key: str, group: str = "g", *extra: tuple[str, bytes]) -> list[tuple[str, bytes]]:
    return [("TRAN_MSG", b"true"), ("PGROUP", group.encode()), ("UNIQ_KEY", key.encode()), *extra]


def end_headers(key: str, decision: str = "COMMIT", group: str = "g") -> list[tuple[str, bytes]]:
    return [("TRAN_END", decision.encode()), ("PGROUP", group.encode()), ("UNIQ_KEY", key.encode())]


def status(broker) -> dict:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource("topic", "RMQ_SYS_TRANS_HALF_TOPIC")
    return json.loads(admin.describe_configs([resource])[resource].result(10)["rmq.transaction.half.status"].value)


def visible(broker, topic: str, partition: int = 0) -> list:
    """Every record a consumer reads from the start of the partition to its end, as
    (offset, key, value, timestamp, headers)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"v-{uuid.uuid4()}",
                         "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out = []
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return out
            out.append((msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], dict(msg.headers() or [])))
    finally:
        consumer.close()
    raise AssertionError(f"{topic}-{partition} not read to its end in 20 s")


def test_half_messages_are_invisible_until_committed(broker):
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("orders", partitions=1)
        conn.create_topic("orders-a", -1, {"rmq.view.source": "orders", "rmq.view.tags": "A"})
        stamp = int(time.time() * 1000) - 60_000
        assert conn.produce_ok("orders", 0, make_batch([b"plain"], timestamps=[stamp - 1])) == 0
        entry = conn.produce("orders", 0, make_batch(
            [b"half"], timestamps=[stamp], keys=[b"k"], headers=[half_headers("A", "g", ("TAGS", b"A"))]))
        # the produce response: the offset the half message reserved in its partition, a gap
        # that never holds a record (the committed message gets a new offset)
        assert (entry.error_code, entry.base_offset) == (ErrorCode.none, 1)
        assert [v for _, _, v, _, _ in visible(broker, "orders")] == [b"plain"]
        assert visible(broker, "orders-a") == []
        assert conn.list_offsets("orders", 0, stamp).offset == -1  # by timestamp: not the half
        assert conn.list_offsets("orders", 0, MAX_TIMESTAMP).offset == 0
        assert conn.list_offsets("orders", 0, LATEST).offset == 2
        assert status(broker)["pending"] == 1

        end = conn.produce("orders", 0, make_batch([None], headers=[end_headers("A")]))
        assert (end.error_code, end.base_offset) == (ErrorCode.none, 2)
        records = visible(broker, "orders")
        assert [r[:4] for r in records] == [(0, None, b"plain", stamp - 1), (3, b"k", b"half", stamp)]
        headers = records[1][4]
        assert "TRAN_MSG" not in headers and headers["UNIQ_KEY"] == b"A" and headers["TAGS"] == b"A"
        assert [v for _, _, v, _, _ in visible(broker, "orders-a")] == [b"half"]
        assert conn.list_offsets("orders", 0, stamp).offset == 3
        assert status(broker)["pending"] == 0


def test_the_status_lists_the_oldest_hundred(broker):
    """Its JSON must fit a DescribeConfigs value of the versions before v4 (32767 bytes)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
    for i in range(300):
        producer.produce("many", b"v", headers=half_headers(f"key-{i:04d}-{'x' * 40}"))
    assert producer.flush(10) == 0
    listed = status(broker)
    assert listed["pending"] == 300
    assert [e["uniq_key"][:8] for e in listed["oldest"]] == [f"key-{i:04d}" for i in range(100)]


def test_ends_that_find_nothing_pending_are_refused(broker):
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("t", partitions=1)
        conn.produce_ok("t", 0, make_batch([b"v"], headers=[half_headers("A")]))
        conn.produce_ok("t", 0, make_batch([None], headers=[end_headers("A", "ROLLBACK")]))
        for headers in (end_headers("A"), end_headers("A", "ROLLBACK"), end_headers("never")):
            entry = conn.produce("t", 0, make_batch([b"x", None], headers=[[], headers]))
            assert entry.error_code == ErrorCode.invalid_record
            assert "UNIQ_KEY" in entry.error_message
        refused = conn.produce("t", 0, make_batch([b"x"], headers=[[("TRAN_MSG", b"true"), ("PGROUP", b"g")]]))
        assert refused.error_code == ErrorCode.invalid_record
        assert refused.error_message.endswith("needs the headers PGROUP and UNIQ_KEY")
        assert visible(broker, "t") == []  # nothing of the refused requests was written
        assert conn.list_offsets("t", 0, LATEST).offset == 2


def test_a_committed_message_with_a_delay_waits_from_the_commit(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    producer.produce("delayed", b"later", headers=half_headers("D", "g", ("DELAY", b"2")))  # level 2: 5 s
    producer.flush(10)
    time.sleep(1)
    committed_at = time.monotonic()
    producer.produce("delayed", b"", headers=end_headers("D"))
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "d", "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition("delayed", 0, 0)])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                waited = time.monotonic() - committed_at
                assert msg.value() == b"later"
                assert 4.5 <= waited < 8, waited
                assert "DELAY" not in dict(msg.headers())
                break
        else:
            pytest.fail("the delayed committed message was never delivered")
    finally:
        consumer.close()


def test_kill_9_in_the_middle_of_halves_and_ends(broker_factory, tmp_path):
    """A producer streams half messages and their ends (2 of 3 committed) while the broker
    is killed with kill -9. Afterwards every end not acknowledged is sent again (a refusal
    means it had happened); then every committed message is visible exactly once, no
    rolled-back one, and nothing is pending."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    config = tmp_path / "server.properties"
    config.write_text("transactionCheckInterval=600000\n")
    broker = broker_factory(config_file=config)
    topic = "crashy"
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic(topic, partitions=2)
    decision = {i: "ROLLBACK" if i % 3 == 0 else "COMMIT" for i in range(100_000)}
    halves_acked: set[int] = set()
    ends_acked: set[int] = set()
    stop = threading.Event()
    lock = threading.Lock()

    def stream() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                             "linger.ms": 2, "message.timeout.ms": 3000, "log_level": 0})

        def on_end(err, msg, i):
            if err is None:
                with lock:
                    ends_acked.add(i)

        def on_half(err, msg, i):
            if err is None:
                with lock:
                    halves_acked.add(i)
                producer.produce(topic, b"", partition=i % 2, headers=end_headers(f"K{i}", decision[i]),
                                 on_delivery=lambda e, m: on_end(e, m, i))

        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, b"v%d" % i, partition=i % 2, headers=half_headers(f"K{i}"),
                                 on_delivery=lambda e, m, i=i: on_half(e, m, i))
                i += 1
            except BufferError:
                pass
            producer.poll(0.001 if i % 50 == 0 else 0)
        producer.flush(5)

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while len(ends_acked) < 2000:
        assert time.monotonic() < deadline, f"only {len(ends_acked)} ends acknowledged"
        time.sleep(0.05)
    broker.kill()
    time.sleep(0.5)
    stop.set()
    thread.join(20)
    broker.restart(same_port=True)

    # every half acknowledged gets its end again; one not acknowledged may be pending too
    # (written, then the process died before it answered): it is rolled back. An end the
    # broker had carried out without its producer hearing so (the process died first, or the
    # delivery timed out under load) is refused with INVALID_RECORD, and a refusal refuses
    # the whole batch it came in: each refused end is sent again on its own, where a
    # refusal means it had happened (the status check below proves it is not pending).
    with lock:
        sent = set(halves_acked)
        resend = {i: decision[i] for i in sent - ends_acked}

    def send_ends(ends: dict[int, str], one_per_batch: bool = False) -> dict[int, str]:
        # Not idempotent: librdkafka's idempotent producer drains and resets its producer id
        # after each refused batch, which left 9,000 ends unsent after 60 s under load. A
        # retry of a lost answer is then refused as "already ended", which is fine here: the
        # status check below has the last word.
        alone = {"batch.num.messages": 1, "max.in.flight": 1000, "linger.ms": 0}
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": False,
                             **(alone if one_per_batch else {})})
        refused: dict[int, str] = {}

        def report(err, i):
            if err is not None:
                refused[i] = str(err)

        for i, what in ends.items():
            producer.produce(topic, b"", partition=0, headers=end_headers(f"K{i}", what),
                             on_delivery=lambda err, msg, i=i: report(err, i))
        assert producer.flush(120) == 0
        return refused

    refused = send_ends(resend)
    refused_alone = send_ends({i: resend[i] for i in refused}, one_per_batch=True)
    assert all("INVALID_RECORD" in why for why in refused_alone.values()), refused_alone
    unacked_halves: set[int] = set()
    # the status lists the oldest 100 pending at a time; a kill while the broker is slow to
    # answer leaves thousands of halves written but not acknowledged (1,484 in one CI run)
    for _ in range(1000):
        listed = {int(e["uniq_key"][1:]) for e in status(broker)["oldest"]}
        if not listed:
            break
        assert not listed & sent, sorted(listed & sent)[:10]
        unacked_halves |= listed
        assert not send_ends({i: "ROLLBACK" for i in listed})
    final = status(broker)
    print(f"halves acknowledged {len(sent)}, ends acknowledged {len(ends_acked)}, ends sent again "
          f"{len(resend)} ({len(refused)} refused in a batch, {len(refused_alone)} alone), "
          f"unacknowledged halves found pending {len(unacked_halves)}; status {final}")
    assert final["pending"] == 0, final

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"v-{uuid.uuid4()}",
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    seen: Counter = Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < 2 and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            seen[int(dict(msg.headers())["UNIQ_KEY"][1:])] += 1
    consumer.close()
    assert len(at_end) == 2
    duplicates = [i for i, n in seen.items() if n > 1]
    assert not duplicates, duplicates[:10]
    visible_rollbacks = [i for i in seen if decision[i] == "ROLLBACK" or i in unacked_halves]
    assert not visible_rollbacks, visible_rollbacks[:10]
    committed = {i for i in sent if decision[i] == "COMMIT"}
    missing = sorted(committed - set(seen))
    assert not missing, (len(missing), missing[:10])
    assert len(ends_acked) >= 2000


def test_fifteen_unanswered_checks_then_rollback(broker_factory, tmp_path):
    """RocketMQ's default transactionCheckMax (15), time-scaled: a check every 150 ms. The
    group's check topic gets exactly 15 requests for the message, numbered 1..15, then the
    broker rolls it back and it is never visible."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    config = tmp_path / "server.properties"
    config.write_text("transactionCheckInterval=150\ntransactionTimeOut=100\n")
    broker = broker_factory(config_file=config)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("silent", b"v", key=b"k", headers=half_headers("S", "quiet", ("x", b"1")))
    assert producer.flush(10) == 0
    deadline = time.monotonic() + 30
    while status(broker)["rolled_back_unchecked"] < 1:
        assert time.monotonic() < deadline, status(broker)
        time.sleep(0.2)
    final = status(broker)
    assert (final["pending"], final["checks_sent"], final["transaction_check_max"]) == (0, 15, 15)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "c", "enable.partition.eof": True})
    consumer.assign([TopicPartition("rmq_trans_check.quiet", p, 0) for p in range(4)])
    checks, at_end = [], set()
    while len(at_end) < 4:
        msg = consumer.poll(5)
        assert msg is not None
        if msg.error() is not None:
            assert msg.error().code() == KafkaError._PARTITION_EOF
            at_end.add(msg.partition())
            continue
        checks.append(msg)
    consumer.close()
    assert [int(dict(m.headers())["TRANSACTION_CHECK_TIMES"]) for m in checks] == list(range(1, 16))
    assert all((m.key(), m.value(), dict(m.headers())["x"], dict(m.headers())["UNIQ_KEY"]) == (b"k", b"v", b"1", b"S")
               for m in checks)
    assert len({m.partition() for m in checks}) == 1
    assert visible(broker, "silent") == []


def test_a_check_immunity_past_int64_is_accepted_and_survives_kill_9(broker):
    """CHECK_IMMUNITY_TIME_IN_SECONDS is the producer's: 30 nines is a time past int64 (the
    pending table's column). Its produce failed after the half was written, and a restart
    that replayed that half failed whole: one record kept the broker from starting."""
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("t", partitions=1)
        immune = ("CHECK_IMMUNITY_TIME_IN_SECONDS", b"9" * 30)
        assert conn.produce_ok("t", 0, make_batch([b"a", b"b"], headers=[half_headers("A", "g", immune),
                                                                         half_headers("B")])) == 0
    assert status(broker)["pending"] == 2
    broker.kill()
    broker.restart(same_port=True)
    assert status(broker)["pending"] == 2
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.produce_ok("t", 0, make_batch([None, None], headers=[end_headers("A"), end_headers("B")]))
    assert [v for _, _, v, _, _ in visible(broker, "t")] == [b"a", b"b"]
    assert status(broker)["pending"] == 0
