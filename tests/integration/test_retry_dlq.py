"""Retries and dead letters against a real broker process, with confluent-kafka clients.

A consumer in group g "nacks" a record by producing it as received (key, value, timestamp,
headers) to ``rmq_retry.g``. The broker parks it with ``RECONSUME_TIMES`` + 1 at delay level
3 + RECONSUME_TIMES and delivers it back to ``rmq_retry.g`` (same partition, new offset;
``REAL_TOPIC`` / ``REAL_QID`` / ``PARKED_AT`` added, each once). Once RECONSUME_TIMES has
reached the group's maximum (server.properties ``maxReconsumeTimes``, default 16; per group
the topic config ``rmq.max.reconsume.times`` of ``rmq_retry.g``), the nacked record goes to
``rmq_dlq.g`` (created by the broker, one partition) instead, with RECONSUME_TIMES + 1.

Every broker runs with levels of a few seconds at most (server.properties written here) and
``timerPrecisionMs=100`` unless a test says otherwise.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from aiokafka.record.memory_records import MemoryRecords
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
# Headers the broker sets on a retried / dead-lettered record (TIMER_OUT_MS, RocketMQ 5's
# "when it was due", is optional here and checked when present).
SYSTEM_HEADERS = ("RECONSUME_TIMES", "REAL_TOPIC", "REAL_QID", "PARKED_AT", "TIMER_OUT_MS")
EARLY_SLACK = 0.005
LATE = 1.5  # a retry arrives within this many s after it is due
WAIT = 30.0
ONE_SECOND_LEVELS = " ".join(["1s"] * 18)

Header = tuple[str, "bytes | None"]


def write_properties(tmp_path: Path, levels: Sequence[int] | None = None, **extra: str) -> Path:
    """server.properties with these level delays (seconds; default 18 x 1 s)."""
    keys = {
        "messageDelayLevel": " ".join(f"{s}s" for s in levels) if levels else ONE_SECOND_LEVELS,
        "timerPrecisionMs": "100",
    }
    keys.update({k.replace("__", "."): v for k, v in extra.items()})
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return path


def connect(broker) -> KafkaRaw:
    return KafkaRaw(broker.host, broker.port)


def rdkafka_logger() -> logging.Logger:
    return logging.getLogger("rdkafka")


def first(headers: Sequence[Header], name: str) -> bytes | None:
    return next((v for k, v in headers if k == name), None)


def named(headers: Sequence[Header], name: str) -> list[bytes | None]:
    return [v for k, v in headers if k == name]


def user_headers(headers: Sequence[Header]) -> list[Header]:
    return [(k, v) for k, v in headers if k not in SYSTEM_HEADERS]


def read_values(conn: KafkaRaw, topic: str, partition: int = 0) -> list[tuple[int, bytes | None, tuple[Header, ...]]]:
    """(offset, value, headers) of every data record, past sparse and emptied batches."""
    out = []
    offset = 0
    while True:
        entry = conn.fetch(topic, partition, offset)
        assert entry.error_code == ErrorCode.none, f"fetch {topic}-{partition}: {entry.error_code!r}"
        records = MemoryRecords(bytes(entry.records or b""))
        after = offset
        while (batch := records.next_batch()) is not None:
            if not batch.is_control_batch:
                out.extend((r.offset, r.value, tuple(r.headers)) for r in batch if r.offset >= offset)
            after = max(after, batch.next_offset)
        if after >= entry.high_watermark or after == offset:
            assert after >= entry.high_watermark, f"no progress at {topic}-{partition}@{offset}"
            return out
        offset = after


def topic_exists(broker, topic: str) -> bool:
    with connect(broker) as conn:
        (meta,) = conn.metadata([topic], allow_auto_topic_creation=False).topics
        return meta.error_code == ErrorCode.none


def wait_until(predicate, timeout: float, message: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {message}")
        time.sleep(interval)


def create_topics(broker, topics: dict[str, tuple[int, dict[str, str]]]) -> None:
    """Through confluent-kafka's AdminClient: {name: (partitions, configs)}."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "logger": rdkafka_logger()})
    futures = admin.create_topics([NewTopic(name, n, 1, config=configs) for name, (n, configs) in topics.items()],
                                  operation_timeout=10)
    for future in futures.values():
        future.result(WAIT)


class Received:
    """A message as a consumer received it, and when."""

    def __init__(self, msg: Any, arrived: float) -> None:
        self.topic, self.partition, self.offset = msg.topic(), msg.partition(), msg.offset()
        self.key, self.value = msg.key(), msg.value()
        self.headers: list[Header] = list(msg.headers() or [])
        self.timestamp = msg.timestamp()[1]
        self.arrived = arrived

    def reconsume_times(self) -> int | None:
        values = named(self.headers, "RECONSUME_TIMES")
        assert len(values) <= 1, f"RECONSUME_TIMES more than once: {self.headers}"
        return int(values[0]) if values else None


class Nacker:
    """A consumer in group ``group`` subscribed to ``source`` and ``rmq_retry.<group>``,
    and a producer that nacks what it received by producing it, as received, to the retry
    topic (confluent-kafka, idempotent)."""

    def __init__(self, broker, group: str, source: str) -> None:
        from confluent_kafka import Consumer, Producer

        self.group = group
        self.retry = f"rmq_retry.{group}"
        self.dlq = f"rmq_dlq.{group}"
        self.topics = [source, self.retry]
        self.consumer = Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "logger": rdkafka_logger(),
        })
        self.consumer.subscribe(self.topics)
        self.producer = Producer({
            "bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "acks": "all",
            "linger.ms": 0, "logger": rdkafka_logger(),
        })
        self._buffer: list[Received] = []

    def receive(self, topic: str, timeout: float = 15.0) -> Received:
        """The next message from ``topic`` (messages of the other topic are kept)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, got in enumerate(self._buffer):
                if got.topic == topic:
                    return self._buffer.pop(i)
            if time.monotonic() > deadline:
                raise AssertionError(f"group {self.group}: nothing from {topic} within {timeout:g} s")
            msg = self.consumer.poll(0.1)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            self._buffer.append(Received(msg, time.time()))

    def nack(self, got: Received, partition: int = 0, extra: Sequence[Header] = ()) -> tuple[float, float, int]:
        """Produce ``got`` as received (plus ``extra`` headers) to the retry topic; returns
        (time sent, time acknowledged, acknowledged offset)."""
        acked: list[Any] = []
        sent = time.time()
        self.producer.produce(self.retry, key=got.key, value=got.value, headers=[*got.headers, *extra],
                              timestamp=got.timestamp, partition=partition,
                              on_delivery=lambda err, msg: acked.append((err, msg.offset())))
        assert self.producer.flush(WAIT) == 0
        (err, offset), = acked
        assert err is None, err
        return sent, time.time(), offset

    def commit_and_check(self, broker) -> None:
        """Poll until the consumer's positions reach the log ends (past the emptied batches
        the nacks left in the retry topic; nothing else may arrive), commit, and check that
        the committed offsets are the log ends."""
        from confluent_kafka import TopicPartition

        with connect(broker) as conn:
            ends = {}
            for topic in self.topics:
                (meta,) = conn.metadata([topic], allow_auto_topic_creation=False).topics
                for p in meta.partitions:
                    ends[TopicPartition(topic, p.partition_index)] = conn.high_watermark(topic, p.partition_index)
        tps = [tp for tp, end in ends.items() if end > 0]
        deadline = time.monotonic() + 10
        while True:
            positions = {(tp.topic, tp.partition): tp.offset for tp in self.consumer.position(tps)}
            if all(positions[tp.topic, tp.partition] == ends[tp] for tp in tps):
                break
            assert time.monotonic() < deadline, f"positions {positions} never reached the ends {ends}"
            msg = self.consumer.poll(0.1)
            assert msg is None, f"unexpected {msg.topic()}-{msg.partition()}@{msg.offset()} {msg.value()!r}"
        self.consumer.commit(asynchronous=False)
        committed = {(tp.topic, tp.partition): tp.offset for tp in self.consumer.committed(tps, timeout=WAIT)}
        assert committed == {(tp.topic, tp.partition): ends[tp] for tp in tps}

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(5)
        self.producer.close()


def read_dlq(broker, group: str, count: int, timeout: float = 10.0) -> list[Received]:
    """The first ``count`` records of ``rmq_dlq.<group>`` (which the broker creates), read by
    a confluent consumer from the beginning."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    dlq = f"rmq_dlq.{group}"
    wait_until(lambda: topic_exists(broker, dlq), timeout, f"{dlq} to exist")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"{group}-dlq-reader",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, "logger": rdkafka_logger()})
    try:
        consumer.assign([TopicPartition(dlq, 0, OFFSET_BEGINNING)])
        out: list[Received] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                out.append(Received(msg, time.time()))
        assert len(out) == count, f"{dlq}: {len(out)} record(s), expected {count}"
        return out
    finally:
        consumer.close()


def check_retried(got: Received, original: Received, times: int, level: int, retry_topic: str,
                  partition: int, sent: float, acked: float, delay: float, nack_offset: int) -> None:
    """``got`` is ``original`` back from the retry topic after a nack with RECONSUME_TIMES
    ``times - 1``: parked at ``level`` for ``delay`` s."""
    assert (got.topic, got.partition) == (retry_topic, partition)
    assert (got.key, got.value, got.timestamp) == (original.key, original.value, original.timestamp)
    assert got.reconsume_times() == times
    assert user_headers(got.headers) == user_headers(original.headers)
    assert named(got.headers, "REAL_TOPIC") == [retry_topic.encode()]
    assert named(got.headers, "REAL_QID") == [str(partition).encode()]
    (parked_at,) = named(got.headers, "PARKED_AT")
    assert parked_at is not None and parked_at.decode().startswith(f"{SCHEDULE_TOPIC}-{level - 1}@"), parked_at
    assert got.offset > nack_offset, "a retried record is a new record after the nack"
    assert not named(got.headers, "PARKED_FROM"), got.headers
    check_due_header(got, sent + delay, acked + delay)
    assert got.arrived >= sent + delay - EARLY_SLACK, f"retry {times} early: {got.arrived - sent:.3f} s"
    assert got.arrived <= acked + delay + LATE, f"retry {times} late: {got.arrived - acked:.3f} s after the nack"


def check_dead(got: Received, original: Received, times: int, group: str, sent: float) -> None:
    """``got`` is ``original`` in the group's DLQ, nacked with RECONSUME_TIMES ``times - 1``."""
    assert (got.topic, got.partition) == (f"rmq_dlq.{group}", 0)
    assert (got.key, got.value, got.timestamp) == (original.key, original.value, original.timestamp)
    assert got.reconsume_times() == times
    assert user_headers(got.headers) == user_headers(original.headers)
    assert named(got.headers, "REAL_TOPIC") == [f"rmq_dlq.{group}".encode()]
    assert named(got.headers, "REAL_QID") == [b"0"]
    (parked_at,) = named(got.headers, "PARKED_AT")
    assert parked_at is not None and parked_at.decode().startswith(f"{TIMER_TOPIC}-0@"), parked_at
    assert got.arrived - sent < 1.0 + LATE, f"dead letter took {got.arrived - sent:.2f} s"
    assert not named(got.headers, "PARKED_FROM"), got.headers
    check_due_header(got, sent, got.arrived)


def check_due_header(got: Received, earliest: float, latest: float) -> None:
    """TIMER_OUT_MS, if the broker sets it: once, in [earliest, latest], not after arrival."""
    values = named(got.headers, "TIMER_OUT_MS")
    assert len(values) <= 1, got.headers
    if values:
        due = int(values[0]) / 1000
        assert earliest - EARLY_SLACK <= due <= latest + EARLY_SLACK, (due, earliest, latest)
        assert due <= got.arrived + EARLY_SLACK


def produce_original(broker, topic: str, partition: int = 0, others: int = 0) -> int:
    """The record the tests nack (after ``others`` unrelated ones); returns its offset."""
    with connect(broker) as conn:
        values = [b"other-%d" % i for i in range(others)] + [b"payload"]
        headers = [[("n", b"%d" % i)] for i in range(others)] + [
            [("TAGS", b"TagA"), ("KEYS", b"order-1"), ("custom", b"\x00\x01"), ("empty", None)]]
        keys = [None] * others + [b"order-1"]
        stamps = [int(time.time() * 1000) - 60_000] * len(values)
        return conn.produce_ok(topic, partition, make_batch(values, keys=keys, headers=headers,
                                                            timestamps=stamps)) + others


# -- 1. nack, retry, nack again ----------------------------------------------------------------


def test_nacked_record_comes_back_with_reconsume_times(broker_factory, tmp_path):
    """Nack -> back on rmq_retry.g with RECONSUME_TIMES=1 after level 3's delay; nack that ->
    RECONSUME_TIMES=2 after level 4's; nack -> 3 after level 5's. The consumer commits the
    log ends of both topics."""
    levels = [1, 1, 2, 4, 1] + [1] * 13  # level 3: 2 s, level 4: 4 s, level 5: 1 s
    broker = broker_factory(config_file=write_properties(tmp_path, levels))
    with connect(broker) as conn:
        conn.create_topic("orders")
        conn.create_topic("rmq_retry.g")
    produce_original(broker, "orders")
    nacker = Nacker(broker, "g", "orders")
    try:
        original = nacker.receive("orders")
        assert original.value == b"payload"
        got = original
        for times in (1, 2, 3):
            level = 3 + times - 1
            sent, acked, offset = nacker.nack(got)
            got = nacker.receive(nacker.retry, timeout=levels[level - 1] + 10)
            check_retried(got, original, times, level, nacker.retry, 0, sent, acked, levels[level - 1], offset)
        nacker.commit_and_check(broker)
    finally:
        nacker.close()
    with connect(broker) as conn:
        retried = read_values(conn, "rmq_retry.g")
        assert conn.high_watermark("rmq_retry.g") == 6  # three nacks (emptied) and three deliveries
    assert [(first(h, "RECONSUME_TIMES"), v) for _, v, h in retried] == [(b"1", b"payload"), (b"2", b"payload"),
                                                                          (b"3", b"payload")]
    assert not topic_exists(broker, "rmq_dlq.g")


# -- 2. dead letters ---------------------------------------------------------------------------


def test_dead_letter_after_16_nacks_by_default(broker_factory, tmp_path):
    """Default maxReconsumeTimes (16): 16 nacks come back with RECONSUME_TIMES 1..16; the
    17th nack (RECONSUME_TIMES=16) lands in rmq_dlq.g with RECONSUME_TIMES=17, and nothing
    more in the retry topic."""
    broker = broker_factory(config_file=write_properties(tmp_path))
    with connect(broker) as conn:
        conn.create_topic("orders")
        conn.create_topic("rmq_retry.g")
    produce_original(broker, "orders")
    nacker = Nacker(broker, "g", "orders")
    try:
        original = got = nacker.receive("orders")
        for times in range(1, 17):
            sent, acked, offset = nacker.nack(got)
            got = nacker.receive(nacker.retry, timeout=10)
            check_retried(got, original, times, min(3 + times - 1, 18), nacker.retry, 0, sent, acked, 1, offset)
        assert not topic_exists(broker, nacker.dlq)
        sent, _, _ = nacker.nack(got)
        (dead,) = read_dlq(broker, "g", 1)
        check_dead(dead, original, 17, "g", sent)
        nacker.commit_and_check(broker)
    finally:
        nacker.close()
    with connect(broker) as conn:
        retried = read_values(conn, "rmq_retry.g")
        assert [first(h, "RECONSUME_TIMES") for _, _, h in retried] == [b"%d" % i for i in range(1, 17)]
        assert [v for _, v, _ in read_values(conn, "rmq_dlq.g")] == [b"payload"]


def test_max_reconsume_times_per_group_and_server(broker_factory, tmp_path):
    """server.properties maxReconsumeTimes=1 applies to a group without the topic config;
    rmq.max.reconsume.times on rmq_retry.<group> (set through the admin API) overrides it, 0
    included (the first nack is a dead letter). Retries come back to the partition they were
    nacked to; the DLQ has one partition."""
    broker = broker_factory(config_file=write_properties(tmp_path, maxReconsumeTimes="1"))
    create_topics(broker, {
        "orders": (1, {}),
        "rmq_retry.two": (2, {"rmq.max.reconsume.times": "2"}),
        "rmq_retry.one": (1, {}),
        "rmq_retry.zero": (1, {"rmq.max.reconsume.times": "0"}),
    })
    produce_original(broker, "orders")
    for group, limit, partition in (("two", 2, 1), ("one", 1, 0), ("zero", 0, 0)):
        nacker = Nacker(broker, group, "orders")
        try:
            original = got = nacker.receive("orders")
            for times in range(1, limit + 1):
                sent, acked, offset = nacker.nack(got, partition=partition)
                got = nacker.receive(nacker.retry, timeout=10)
                check_retried(got, original, times, 3 + times - 1, nacker.retry, partition, sent, acked, 1, offset)
            sent, _, _ = nacker.nack(got, partition=partition)
            (dead,) = read_dlq(broker, group, 1)
            check_dead(dead, original, limit + 1, group, sent)
            nacker.commit_and_check(broker)
        finally:
            nacker.close()
        with connect(broker) as conn:
            (meta,) = conn.metadata([f"rmq_dlq.{group}"], allow_auto_topic_creation=False).topics
            assert len(meta.partitions) == 1
            retried = read_values(conn, f"rmq_retry.{group}", partition)
            assert [first(h, "RECONSUME_TIMES") for _, _, h in retried] == [b"%d" % i for i in range(1, limit + 1)]


def test_origin_headers_survive_into_the_dlq(broker_factory, tmp_path):
    """ORIGIN_TOPIC / ORIGIN_PARTITION / ORIGIN_OFFSET set by the nacking client on its first
    nack are carried, unchanged and once each, through the retries into the DLQ, with the
    original key, value, CreateTime and headers."""
    broker = broker_factory(config_file=write_properties(tmp_path))
    create_topics(broker, {"orders": (2, {}), "rmq_retry.origin": (1, {"rmq.max.reconsume.times": "2"})})
    offset = produce_original(broker, "orders", partition=1, others=2)
    origin = [("ORIGIN_TOPIC", b"orders"), ("ORIGIN_PARTITION", b"1"), ("ORIGIN_OFFSET", str(offset).encode())]
    nacker = Nacker(broker, "origin", "orders")
    try:
        got = nacker.receive("orders")
        while got.value != b"payload":
            got = nacker.receive("orders")
        original = got
        assert (original.partition, original.offset) == (1, offset)
        nacker.nack(got, extra=origin)
        for times in (1, 2):
            got = nacker.receive(nacker.retry, timeout=10)
            assert got.reconsume_times() == times
            for name, value in origin:
                assert named(got.headers, name) == [value]
            if times < 2:
                nacker.nack(got)
        sent, _, _ = nacker.nack(got)  # RECONSUME_TIMES=2: the limit
        (dead,) = read_dlq(broker, "origin", 1)
    finally:
        nacker.close()
    assert dead.reconsume_times() == 3
    for name, value in origin:
        assert named(dead.headers, name) == [value], (name, dead.headers)
    assert user_headers(dead.headers) == [*user_headers(original.headers), *origin]
    assert (dead.key, dead.value, dead.timestamp) == (original.key, original.value, original.timestamp)
    assert dead.arrived - sent < 1.0 + LATE


# -- 3. crashes --------------------------------------------------------------------------------


@pytest.mark.crash
def test_pending_retries_survive_kill_9(broker_factory, tmp_path):
    """Nacked records already delivered back stay delivered once; nacks acknowledged just
    before a kill -9 come back once after the restart."""
    broker = broker_factory(config_file=write_properties(tmp_path))
    with connect(broker) as conn:
        conn.create_topic("rmq_retry.k")
        first_wave = [b"a%d" % i for i in range(50)]
        conn.produce_ok("rmq_retry.k", 0, make_batch(first_wave))
        wait_until(lambda: len(read_values(conn, "rmq_retry.k")) == 50, 10, "the first wave back")
        second_wave = [b"b%d" % i for i in range(50)]
        for i in range(0, 50, 10):  # five requests
            conn.produce_ok("rmq_retry.k", 0, make_batch(second_wave[i:i + 10]))
    broker.kill()
    broker.start()
    with connect(broker) as conn:
        # A sentinel on the same level (3): once back, everything nacked before it is back.
        conn.produce_ok("rmq_retry.k", 0, make_batch([b"sentinel"]))
        wait_until(lambda: b"sentinel" in [v for _, v, _ in read_values(conn, "rmq_retry.k")], 10, "the sentinel")
        back = read_values(conn, "rmq_retry.k")
    counts = Counter(v for _, v, _ in back)
    assert counts == Counter({v: 1 for v in [*first_wave, *second_wave, b"sentinel"]}), (
        f"missing {sorted(set(first_wave + second_wave) - set(counts))[:5]}, "
        f"twice {[v for v, n in counts.items() if n > 1][:5]}")
    assert {first(h, "RECONSUME_TIMES") for _, _, h in back} == {b"1"}


def _align_to_timer_slot(precision_ms: int, within_ms: int = 200) -> None:
    """Wait for the start of a timer slot, so that a dead letter due now waits for the end
    of its slot (about ``precision_ms``) before the broker delivers it."""
    while int(time.time() * 1000) % precision_ms > within_ms:
        time.sleep(0.01)


@pytest.mark.crash
def test_dead_letter_acknowledged_before_kill_9_is_delivered(broker_factory, tmp_path):
    """A nack at the group's limit, acknowledged, then kill -9 before the dead letter is
    delivered (timerPrecisionMs=2000 holds it up to 2 s; no checkpoint in between, so the
    restart replays the park): after the restart it must still reach rmq_dlq.g.

    Regression: the first scheduler matched replayed parks with the next batch by REAL_TOPIC,
    and a dead letter's (rmq_dlq.g) is not its batch's (rmq_retry.g): it was cancelled."""
    precision = 2000
    broker = broker_factory(config_file=write_properties(
        tmp_path, timerPrecisionMs=str(precision), log__flush__interval__ms="60000"))
    create_topics(broker, {"rmq_retry.g": (1, {"rmq.max.reconsume.times": "0"})})
    with connect(broker) as conn:
        _align_to_timer_slot(precision)
        conn.produce_ok("rmq_retry.g", 0, make_batch([b"dead"], headers=[[("RECONSUME_TIMES", b"0")]]))
        assert not topic_exists(broker, "rmq_dlq.g") or conn.high_watermark("rmq_dlq.g") == 0, "delivered already"
    broker.kill()
    broker.start()
    (dead,) = read_dlq(broker, "g", 1, timeout=3 * precision / 1000 + 5)
    assert (dead.value, dead.reconsume_times()) == (b"dead", 1)


@pytest.mark.crash
def test_retry_and_dead_letter_in_one_batch_survive_kill_9(broker_factory, tmp_path):
    """One nack batch holding a retry (RECONSUME_TIMES=0) and a dead letter (at the limit
    1), acknowledged, then kill -9 before either is delivered: after the restart the retry
    comes back with RECONSUME_TIMES=1 and the dead letter reaches the DLQ with 2."""
    precision = 2000
    broker = broker_factory(config_file=write_properties(
        tmp_path, timerPrecisionMs=str(precision), log__flush__interval__ms="60000"))
    create_topics(broker, {"rmq_retry.m": (1, {"rmq.max.reconsume.times": "1"})})
    with connect(broker) as conn:
        _align_to_timer_slot(precision)
        conn.produce_ok("rmq_retry.m", 0, make_batch([b"retry", b"dead"],
                                                     headers=[[("RECONSUME_TIMES", b"0")], [("RECONSUME_TIMES", b"1")]]))
        assert not topic_exists(broker, "rmq_dlq.m") or conn.high_watermark("rmq_dlq.m") == 0, "delivered already"
        assert conn.high_watermark("rmq_retry.m") == 2, "the retry was delivered already"
    broker.kill()
    broker.start()
    with connect(broker) as conn:
        deadline = time.monotonic() + 6
        back: list = []
        while not back and time.monotonic() < deadline:
            back = read_values(conn, "rmq_retry.m")
            time.sleep(0.1)
    assert [(v, first(h, "RECONSUME_TIMES")) for _, v, h in back] == [(b"retry", b"1")]
    (dead,) = read_dlq(broker, "m", 1, timeout=5)
    assert (dead.value, dead.reconsume_times()) == (b"dead", 2)
