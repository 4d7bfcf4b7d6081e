"""Delay levels and timers against a real broker process, with real clients.

A record with a ``DELAY=n`` header (level n of ``messageDelayLevel``) or a timer header
(``TIMER_DELAY_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELIVER_MS``) is parked by the broker and
delivered later to its real partition as a new record (new offset): key, value, CreateTime and
headers kept, the scheduling header dropped, ``REAL_TOPIC`` / ``REAL_QID`` / ``PARKED_AT``
added. The producer's batch keeps its offsets (gaps where the parked records were).

Every broker here runs a server.properties with short levels (``1s 3s 5s`` six times: level n
waits LEVEL_SECONDS[n-1]) and ``timerPrecisionMs=100``, so no test waits for RocketMQ's real
delays. Deliveries are awaited by consuming with a deadline; arrival times are stamped by
long-polling watchers (the raw client, one thread per partition), so "never early" and
"within a bound after due" are checked against the client's clock (the broker's is the same
machine's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from aiokafka.record.memory_records import MemoryRecords
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LEVEL_SECONDS = [1, 3, 5] * 6  # level n waits LEVEL_SECONDS[n - 1] seconds
LEVELS = " ".join(f"{s}s" for s in LEVEL_SECONDS)
PRECISION_MS = 100
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
# Headers the broker adds to a delivered record. TIMER_OUT_MS (RocketMQ 5: when it was due)
# is optional here; when present it is checked.
SYSTEM_HEADERS = ("REAL_TOPIC", "REAL_QID", "PARKED_AT", "TIMER_OUT_MS")
SCHEDULING_HEADERS = ("DELAY", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS")
EARLY_SLACK = 0.005  # the broker's clock is read in whole ms
LATE_LEVEL = 1.5  # a level's record arrives within this many s after it is due
LATE_TIMER = 1.0  # a timer's record arrives within 1 s after it is due (the brief's bound)
WAIT = 30.0

Header = tuple[str, "bytes | None"]


def write_properties(tmp_path: Path, name: str = "server.properties", **extra: str) -> Path:
    """A server.properties with the short levels; ``extra`` keys use ``_`` for ``.``."""
    keys = {"messageDelayLevel": LEVELS, "timerPrecisionMs": str(PRECISION_MS)}
    keys.update({k.replace("__", "."): v for k, v in extra.items()})
    path = tmp_path / name
    path.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    return path


@pytest.fixture
def props(tmp_path: Path) -> Path:
    return write_properties(tmp_path, timerMaxDelaySec="60")


def connect(broker) -> KafkaRaw:
    return KafkaRaw(broker.host, broker.port)


# -- reading with the raw client --------------------------------------------------------------


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int

    def header(self, name: str) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)

    def headers_named(self, name: str) -> list[bytes | None]:
        return [v for k, v in self.headers if k == name]


def decode(data: bytes | None, partition: int, start: int) -> tuple[list[Rec], int]:
    """The data records at or after ``start`` in a fetch response's records, and the offset
    after the last whole batch (control batches, which cover gaps, are skipped)."""
    records = MemoryRecords(bytes(data or b""))
    out: list[Rec] = []
    offset = start
    while (batch := records.next_batch()) is not None:
        if not batch.is_control_batch:
            for r in batch:
                if r.offset >= start:
                    out.append(Rec(partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp))
        offset = max(offset, batch.next_offset)
    return out, offset


def read_partition(conn: KafkaRaw, topic: str, partition: int = 0, start: int = 0) -> tuple[list[Rec], int]:
    """Every record from ``start`` to the high watermark, advancing past every batch
    (sparse and emptied ones included), and the high watermark."""
    out: list[Rec] = []
    offset = start
    while True:
        entry = conn.fetch(topic, partition, offset)
        assert entry.error_code == ErrorCode.none, f"fetch {topic}-{partition}@{offset}: {entry.error_code!r}"
        got, after = decode(entry.records, partition, offset)
        out.extend(got)
        if offset >= entry.high_watermark:
            return out, entry.high_watermark
        assert after > offset, f"fetch {topic}-{partition}@{offset} made no progress below {entry.high_watermark}"
        offset = after


def read_topic(conn: KafkaRaw, topic: str, partitions: int) -> list[Rec]:
    return [r for p in range(partitions) for r in read_partition(conn, topic, p)[0]]


def high_watermarks(conn: KafkaRaw, topic: str, partitions: int) -> dict[int, int]:
    return {p: conn.high_watermark(topic, p) for p in range(partitions)}


def value_counts(records: Sequence[Rec]) -> Counter:
    return Counter(r.value for r in records)


class Watcher:
    """Long-polls partitions of a topic from offset 0 (one raw connection and thread per
    partition) and stamps each record with the time.time() its fetch response came back."""

    def __init__(self, broker, topic: str, partitions: int = 1) -> None:
        self.host, self.port, self.topic = broker.host, broker.port, topic
        self.arrivals: dict[bytes | None, list[tuple[float, Rec]]] = {}
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(p,), name=f"watch-{topic}-{p}", daemon=True)
            for p in range(partitions)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, partition: int) -> None:
        try:
            with KafkaRaw(self.host, self.port, timeout=10) as conn:
                offset = 0
                while not self._stop.is_set():
                    entry = conn.fetch(self.topic, partition, offset, max_wait_ms=100, min_bytes=1)
                    now = time.time()
                    if entry.error_code != ErrorCode.none:
                        raise AssertionError(f"watch fetch {self.topic}-{partition}: {entry.error_code!r}")
                    got, offset = decode(entry.records, partition, offset)
                    with self._lock:
                        for rec in got:
                            self.arrivals.setdefault(rec.value, []).append((now, rec))
        except BaseException as exc:  # noqa: BLE001  # reported by check()
            self.errors.append(exc)

    def count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.arrivals.values())

    def has(self, values: Iterator[bytes] | Sequence[bytes]) -> bool:
        with self._lock:
            return all(v in self.arrivals for v in values)

    def wait_for(self, values: Sequence[bytes], timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while not self.has(values):
            self.check()
            if time.monotonic() > deadline:
                with self._lock:
                    missing = [v for v in values if v not in self.arrivals]
                raise AssertionError(f"{len(missing)} record(s) never arrived: {missing[:10]}")
            time.sleep(0.02)

    def first(self, value: bytes) -> tuple[float, Rec]:
        with self._lock:
            return self.arrivals[value][0]

    def check(self) -> None:
        if self.errors:
            raise self.errors[0]

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self.check()


@contextlib.contextmanager
def watching(broker, topic: str, partitions: int = 1) -> Iterator[Watcher]:
    watcher = Watcher(broker, topic, partitions)
    try:
        yield watcher
    finally:
        watcher.stop()


def wait_until(predicate: Callable[[], bool], timeout: float, message: str, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {message}")
        time.sleep(interval)


def assert_due_header(rec: Rec, earliest: float, latest: float) -> None:
    """If the delivered record says when it was due (TIMER_OUT_MS), that is once, in
    [earliest, latest] (seconds), and it did not arrive before it."""
    values = rec.headers_named("TIMER_OUT_MS")
    assert len(values) <= 1, rec.headers
    if values:
        due = int(values[0]) / 1000
        assert earliest - EARLY_SLACK <= due <= latest + EARLY_SLACK, (rec.value, due, earliest, latest)


def assert_delivered_copy(rec: Rec, produced_headers: Sequence[Header], key: bytes | None, timestamp: int,
                          topic: str, partition: int, parked_in: str) -> None:
    """``rec`` is the delivered copy of a record produced with these headers/key/timestamp."""
    assert rec.key == key
    assert rec.header("PARKED_FROM") is None, "PARKED_FROM is the parked copy's, not the delivered record's"
    assert rec.timestamp == timestamp, "CreateTime not kept"
    kept = [(k, v) for k, v in produced_headers if k not in SCHEDULING_HEADERS]
    assert [(k, v) for k, v in rec.headers if k not in SYSTEM_HEADERS] == kept
    for name in SCHEDULING_HEADERS:
        assert rec.header(name) is None, f"{name} kept on delivery"
    assert rec.headers_named("REAL_TOPIC") == [topic.encode()]
    assert rec.headers_named("REAL_QID") == [str(partition).encode()]
    (parked_at,) = rec.headers_named("PARKED_AT")
    assert parked_at is not None and parked_at.decode().startswith(parked_in + "@"), parked_at


# -- 1. every level, time-scaled ---------------------------------------------------------------


def test_all_18_levels_are_honoured_in_order(broker_factory, props):
    """Records for each of the 18 levels (three requests, two partitions) arrive no earlier
    than their level's delay after the produce and within LATE_LEVEL s of it; a level keeps
    produce order; DELAY above the highest level is the highest; DELAY 0 / negative is
    immediate; the producers' batches keep their offsets, with gaps."""
    broker = broker_factory(config_file=props)
    topic = "levels"
    old = int(time.time() * 1000) - 60_000  # a CreateTime the delivery must keep
    with connect(broker) as conn:
        conn.create_topic(topic, partitions=2)

    produced: dict[bytes, dict[str, Any]] = {}  # value -> what was produced, and when

    def produce(conn: KafkaRaw, partition: int, rounds: range, tag: str) -> None:
        values, headers, keys, stamps = [], [], [], []
        for i in rounds:
            for level in range(1, 19):
                values.append(f"{tag}-L{level}-{i}".encode())
                headers.append([("TAGS", b"t%d" % level), ("DELAY", str(level).encode()), ("n", b"%d" % i)])
                keys.append(f"k{level}".encode())
                stamps.append(old + i)
        # DELAY above the highest level = level 18; DELAY 0 and negative: not delayed.
        for value, delay in ((f"{tag}-L99".encode(), b"99"), (f"{tag}-D0".encode(), b"0"),
                             (f"{tag}-Dneg".encode(), b"-2")):
            values.append(value)
            headers.append([("DELAY", delay)])
            keys.append(None)
            stamps.append(old)
        sent = time.time()
        base = conn.produce_ok(topic, partition, make_batch(values, keys=keys, headers=headers, timestamps=stamps))
        acked = time.time()
        for i, value in enumerate(values):
            delay = dict(headers[i])["DELAY"]
            level = min(int(delay), 18)
            produced[value] = {"partition": partition, "offset": base + i, "key": keys[i], "headers": headers[i],
                               "timestamp": stamps[i], "level": level if level > 0 else None,
                               "sent": sent, "acked": acked, "request": tag}

    with watching(broker, topic, partitions=2) as watcher:
        with connect(broker) as conn:
            produce(conn, 0, range(3), "a")
            produce(conn, 1, range(2), "b")
            produce(conn, 0, range(3, 4), "c")
            # What is readable at once in the produced batches' offsets: exactly the undelayed
            # records, at their acked offsets (each batch kept its offsets, with gaps).
            batch_offsets = {(p["partition"], p["offset"]) for p in produced.values()}
            now_readable = {r.value: r for r in read_topic(conn, topic, 2)
                            if (r.partition, r.offset) in batch_offsets}
        immediate = {v for v, p in produced.items() if p["level"] is None}
        assert set(now_readable) == immediate
        for value in immediate:
            rec, p = now_readable[value], produced[value]
            assert (rec.partition, rec.offset, rec.headers) == (p["partition"], p["offset"], tuple(p["headers"]))
        for request, size in (("a", 18 * 3 + 3), ("b", 18 * 2 + 3), ("c", 18 * 1 + 3)):
            offsets = sorted(p["offset"] for p in produced.values() if p["request"] == request)
            assert offsets == list(range(offsets[0], offsets[0] + size))

        delayed = sorted(v for v, p in produced.items() if p["level"] is not None)
        watcher.wait_for(delayed, timeout=max(LEVEL_SECONDS) + 10)
        watcher.check()

    late: list[str] = []
    for value in delayed:
        p = produced[value]
        arrived, rec = watcher.first(value)
        delay = LEVEL_SECONDS[p["level"] - 1]
        assert arrived >= p["sent"] + delay - EARLY_SLACK, (
            f"{value!r} (level {p['level']}, {delay} s) arrived {arrived - p['sent']:.3f} s after the produce")
        if arrived > p["acked"] + delay + LATE_LEVEL:
            late.append(f"{value!r} level {p['level']} +{arrived - p['acked']:.3f} s")
        assert rec.partition == p["partition"]
        assert_due_header(rec, p["sent"] + delay, p["acked"] + delay)
        assert (rec.partition, rec.offset) not in batch_offsets, "a delivered record must get a new offset"
        assert rec.offset > p["offset"]
        assert_delivered_copy(rec, p["headers"], p["key"], p["timestamp"], topic, p["partition"],
                              f"{SCHEDULE_TOPIC}-{p['level'] - 1}")
    assert not late, f"delivered too late: {late}"

    # Exactly once, and each level's records in produce order within their partition.
    with connect(broker) as conn:
        everything = read_topic(conn, topic, 2)
    counts = value_counts(everything)
    assert set(counts) == set(produced) and set(counts.values()) == {1}, counts.most_common(3)
    by_level: dict[tuple[int, int], list[bytes]] = {}
    for rec in sorted(everything, key=lambda r: (r.partition, r.offset)):
        p = produced[rec.value]
        if p["level"] is not None:
            by_level.setdefault((rec.partition, p["level"]), []).append(rec.value)
    for (partition, level), values in by_level.items():
        expected = [v for v, p in produced.items() if p["partition"] == partition and p["level"] == level]
        assert values == expected, f"partition {partition} level {level}: order not kept"


# -- 2. mixed batches, idempotent producers, every client --------------------------------------

MIXED_LEVEL = 3  # 5 s: time enough to check what is readable before any delivery
MIXED_DELAY = LEVEL_SECONDS[MIXED_LEVEL - 1]
MIXED_TIMER_MS = MIXED_DELAY * 1000


@dataclass(frozen=True)
class Msg:
    partition: int
    key: bytes
    value: bytes
    headers: tuple[Header, ...]
    delayed: bool


def mixed_batches(client: str) -> list[list[Msg]]:
    """Batches in produce order: mixed ones (immediate records, a level, a timer), a batch
    whose every record is delayed in the middle of partition 1 and one at the end of
    partition 0 (each partition's log then ends with an emptied batch)."""
    n = iter(range(1000))

    def msg(partition: int, kind: str) -> Msg:
        i = next(n)
        headers: list[Header] = [("TAGS", b"x"), ("n", str(i).encode())]
        if kind == "level":
            headers.append(("DELAY", str(MIXED_LEVEL).encode()))
        elif kind == "timer":
            headers.append(("TIMER_DELAY_MS", str(MIXED_TIMER_MS).encode()))
        return Msg(partition, f"k{i}".encode(), f"{client}-{i}-{kind}".encode(), tuple(headers), kind != "now")

    return [
        [msg(0, k) for k in ("now", "level", "now", "timer", "now", "level", "level")],
        [msg(1, k) for k in ("now", "now")],
        [msg(1, k) for k in ("level", "level", "timer", "level")],  # every record delayed
        [msg(0, k) for k in ("now", "level", "now")],
        [msg(1, k) for k in ("now", "timer", "now")],
        [msg(1, k) for k in ("level", "timer")],  # every record delayed, last in partition 1
        [msg(0, k) for k in ("timer", "level", "level")],  # every record delayed, last in partition 0
    ]


# Each client: produce(bootstrap, topic, batches) -> {value: (partition, offset)} with
# idempotence on (one flush per batch, so each list is one produce batch), and readers.


def confluent_produce(bootstrap: str, topic: str, batches: list[list[Msg]]) -> dict[bytes, tuple[int, int]]:
    from confluent_kafka import Producer

    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    producer = Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 50, "compression.type": "lz4", "logger": logging.getLogger("rdkafka"),
    })
    for batch in batches:
        for m in batch:
            producer.produce(topic, value=m.value, key=m.key, headers=list(m.headers),
                             partition=m.partition, on_delivery=on_delivery)
        assert producer.flush(WAIT) == 0
    producer.close()
    assert not errors, errors
    return acked


def kafka_python_produce(bootstrap: str, topic: str, batches: list[list[Msg]]) -> dict[bytes, tuple[int, int]]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                             linger_ms=50, compression_type="gzip")
    acked: dict[bytes, tuple[int, int]] = {}
    try:
        for batch in batches:
            futures = [(m.value, producer.send(topic, value=m.value, key=m.key, headers=list(m.headers),
                                               partition=m.partition)) for m in batch]
            producer.flush(timeout=WAIT)
            for value, future in futures:
                md = future.get(timeout=WAIT)
                acked[value] = (md.partition, md.offset)
    finally:
        producer.close(timeout=5)
    return acked


def aiokafka_produce(bootstrap: str, topic: str, batches: list[list[Msg]]) -> dict[bytes, tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    async def run() -> dict[bytes, tuple[int, int]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
        await producer.start()
        acked: dict[bytes, tuple[int, int]] = {}
        try:
            for batch in batches:
                builder = producer.create_batch()
                for m in batch:
                    assert builder.append(key=m.key, value=m.value, timestamp=None, headers=list(m.headers))
                md = await (await producer.send_batch(builder, topic, partition=batch[0].partition))
                for i, m in enumerate(batch):  # one batch: consecutive offsets from its base
                    acked[m.value] = (md.partition, md.offset + i)
        finally:
            await producer.stop()
        return acked

    return asyncio.run(asyncio.wait_for(run(), WAIT))


def confluent_consume(bootstrap: str, topic: str, ends: dict[int, int], want: set[bytes] | None,
                      group: str | None) -> tuple[list[Rec], dict[int, int], dict[int, int] | None]:
    """Read ``topic`` (assigned from 0, or in ``group``) until every partition's position
    reaches ``ends`` and every value of ``want`` was seen; then (group) commit. Returns the
    records, the positions and the committed offsets (group only)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group or "unused", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100, "logger": logging.getLogger("rdkafka"),
    })
    tps = [TopicPartition(topic, p) for p in ends]
    try:
        if group is None:
            consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        else:
            consumer.subscribe([topic])
        out: list[Rec] = []
        positions: dict[int, int] = {}
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.2):
                assert msg.error() is None, msg.error()
                out.append(Rec(msg.partition(), msg.offset(), msg.key(), msg.value(),
                               tuple(msg.headers() or ()), msg.timestamp()[1]))
            if consumer.assignment():
                positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
            seen = {r.value for r in out}
            if all(positions.get(p, -1) >= end for p, end in ends.items()) and (want is None or want <= seen):
                break
        committed = None
        if group is not None:
            consumer.commit(asynchronous=False)
            committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=WAIT)}
        return out, positions, committed
    finally:
        consumer.close()


def kafka_python_consume(bootstrap: str, topic: str, ends: dict[int, int], want: set[bytes] | None,
                         group: str | None) -> tuple[list[Rec], dict[int, int], dict[int, int] | None]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    tps = {p: TopicPartition(topic, p) for p in ends}
    try:
        if group is None:
            consumer.assign(list(tps.values()))
            consumer.seek_to_beginning()
        else:
            consumer.subscribe([topic])
        out: list[Rec] = []
        positions: dict[int, int] = {}
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                out.extend(Rec(tp.partition, r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp)
                           for r in records)
            assigned = consumer.assignment()
            if assigned and set(tps.values()) <= assigned:
                positions = {p: consumer.position(tp) for p, tp in tps.items()}
            seen = {r.value for r in out}
            if all(positions.get(p, -1) >= end for p, end in ends.items()) and (want is None or want <= seen):
                break
        committed = None
        if group is not None:
            consumer.commit()
            committed = {p: consumer.committed(tp) for p, tp in tps.items()}
        return out, positions, committed
    finally:
        consumer.close()


def aiokafka_consume(bootstrap: str, topic: str, ends: dict[int, int], want: set[bytes] | None,
                     group: str | None) -> tuple[list[Rec], dict[int, int], dict[int, int] | None]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await consumer.start()
        tps = {p: TopicPartition(topic, p) for p in ends}
        try:
            if group is None:
                consumer.assign(list(tps.values()))
                await consumer.seek_to_beginning()
            else:
                consumer.subscribe([topic])
            out: list[Rec] = []
            positions: dict[int, int] = {}
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    out.extend(Rec(tp.partition, r.offset, r.key, r.value, tuple(r.headers or ()),
                                   r.timestamp) for r in records)
                assigned = consumer.assignment()
                if assigned and set(tps.values()) <= assigned:
                    positions = {p: await consumer.position(tp) for p, tp in tps.items()}
                seen = {r.value for r in out}
                if all(positions.get(p, -1) >= end for p, end in ends.items()) and (want is None or want <= seen):
                    break
            committed = None
            if group is not None:
                await consumer.commit()
                committed = {p: await consumer.committed(tp) for p, tp in tps.items()}
            return out, positions, committed
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), WAIT + 10))


CLIENTS = {
    "confluent": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
}


@pytest.mark.parametrize("client", list(CLIENTS))
def test_mixed_batches_with_idempotent_producers(broker_factory, props, client):
    """Idempotent producers send batches mixing immediate, level and timer records, and
    batches whose every record is delayed (one last in each partition). The acked offsets
    are the batches' own; the immediate records are readable at once at those offsets, and a
    reader's position reaches the log end past the emptied batches; the delayed ones arrive
    later, exactly once, at new offsets; a consumer group reads everything and commits the
    log end."""
    produce, consume = CLIENTS[client]
    broker = broker_factory(config_file=props)
    topic = f"mixed-{client}"
    with connect(broker) as conn:
        conn.create_topic(topic, partitions=2)
    batches = mixed_batches(client)
    msgs = {m.value: m for batch in batches for m in batch}
    started = time.monotonic()
    acked = produce(broker.bootstrap_servers, topic, batches)

    assert set(acked) == set(msgs)
    for p in (0, 1):  # every record of a partition was acked at its own offset: 0..n-1
        offsets = sorted(off for part, off in acked.values() if part == p)
        assert offsets == list(range(len(offsets))), f"partition {p}: acked offsets {offsets}"
    for batch in batches:  # a batch keeps its offsets, parked records included
        offsets = [acked[m.value][1] for m in batch]
        assert offsets == list(range(offsets[0], offsets[0] + len(batch)))
    with connect(broker) as conn:
        ends = high_watermarks(conn, topic, 2)
    assert ends == {p: sum(1 for m in msgs.values() if m.partition == p) for p in (0, 1)}

    # At once: only the immediate records, at their acked offsets; positions reach the end.
    immediate = {v for v, m in msgs.items() if not m.delayed}
    records, positions, _ = consume(broker.bootstrap_servers, topic, ends, None, None)
    elapsed = time.monotonic() - started
    assert elapsed < MIXED_DELAY, f"too slow to look before the delivery ({elapsed:.1f} s); rerun"
    assert {r.value: (r.partition, r.offset) for r in records} == {v: acked[v] for v in immediate}
    assert len(records) == len(immediate), "duplicates"
    assert positions == ends, "the reader did not advance past the emptied batches"
    for r in records:
        assert r.headers == msgs[r.value].headers and r.key == msgs[r.value].key

    # Later: a group reads everything exactly once and commits the log end.
    records, positions, committed = consume(broker.bootstrap_servers, topic, ends, set(msgs), f"g-{client}")
    counts = value_counts(records)
    assert set(counts) == set(msgs), f"missing: {set(msgs) - set(counts)}"
    assert set(counts.values()) == {1}, f"duplicates: {counts.most_common(3)}"
    with connect(broker) as conn:
        final = high_watermarks(conn, topic, 2)
        stored = read_topic(conn, topic, 2)
    assert value_counts(stored) == counts
    assert final == {p: ends[p] + sum(1 for m in msgs.values() if m.partition == p and m.delayed) for p in (0, 1)}
    assert positions == final and committed == final, (positions, committed, final)
    for r in records:
        m = msgs[r.value]
        assert r.partition == m.partition and r.key == m.key
        if m.delayed:
            assert r.offset >= ends[r.partition], "a delivered record gets a new offset"
            kept = [(k, v) for k, v in m.headers if k not in SCHEDULING_HEADERS]
            assert [(k, v) for k, v in r.headers if k not in SYSTEM_HEADERS] == kept
            assert dict(r.headers)["REAL_TOPIC"] == topic.encode()
            assert dict(r.headers)["REAL_QID"] == str(m.partition).encode()
        else:
            assert (r.partition, r.offset) == acked[r.value]


# -- 3. timers ---------------------------------------------------------------------------------


def test_timers_are_delivered_on_time(broker_factory, props):
    """TIMER_DELAY_MS / TIMER_DELAY_SEC / TIMER_DELIVER_MS: never before due, within 1 s
    after; a timer due now or in the past is readable at once, at its acked offset."""
    broker = broker_factory(config_file=props)
    topic = "timers"
    with connect(broker) as conn:
        conn.create_topic(topic)
    now_ms = int(time.time() * 1000)
    # (value, header, header value, due relative to the produce (s) or absolute epoch ms)
    relative = [
        (b"ms-700", "TIMER_DELAY_MS", 700),
        (b"ms-1234", "TIMER_DELAY_MS", 1234),
        (b"ms-2999", "TIMER_DELAY_MS", 2999),
        (b"sec-1", "TIMER_DELAY_SEC", 1),
        (b"sec-2", "TIMER_DELAY_SEC", 2),
    ]
    absolute = [(b"at-1800", now_ms + 1800), (b"at-2550", now_ms + 2550)]
    past = [
        (b"past-at", "TIMER_DELIVER_MS", str(now_ms - 5000).encode()),
        (b"past-ms-0", "TIMER_DELAY_MS", b"0"),
        (b"past-sec-neg", "TIMER_DELAY_SEC", b"-3"),
        (b"plain", "TAGS", b"x"),
    ]
    values = [v for v, _, _ in relative] + [v for v, _ in absolute] + [v for v, _, _ in past]
    headers = ([[(h, str(x).encode())] for _, h, x in relative]
               + [[("TIMER_DELIVER_MS", str(at).encode())] for _, at in absolute]
               + [[(h, x)] for _, h, x in past])
    with watching(broker, topic) as watcher, connect(broker) as conn:
        sent = time.time()
        base = conn.produce_ok(topic, 0, make_batch(values, headers=headers))
        acked = time.time()
        at_once, end = read_partition(conn, topic)
        assert end == len(values)
        assert [(r.offset, r.value) for r in at_once] == [(base + values.index(v), v) for v, _, _ in past]
        for r in at_once:
            assert r.header("PARKED_AT") is None  # not parked: stored as produced
        timed = [v for v, _, _ in relative] + [v for v, _ in absolute]
        watcher.wait_for(timed, timeout=10)
    problems = []
    for value, header, amount in relative:
        arrived, rec = watcher.first(value)
        delay = amount / 1000 if header == "TIMER_DELAY_MS" else amount
        if arrived < sent + delay - EARLY_SLACK:
            problems.append(f"{value!r} early by {sent + delay - arrived:.3f} s")
        if arrived > acked + delay + LATE_TIMER:
            problems.append(f"{value!r} late by {arrived - acked - delay:.3f} s")
        assert_delivered_copy(rec, [(header, str(amount).encode())], None, rec.timestamp, topic, 0, f"{TIMER_TOPIC}-0")
        assert_due_header(rec, sent + delay, acked + delay)
    for value, at in absolute:
        arrived, rec = watcher.first(value)
        assert_due_header(rec, at / 1000, at / 1000)
        if arrived < at / 1000 - EARLY_SLACK:
            problems.append(f"{value!r} early by {at / 1000 - arrived:.3f} s")
        if arrived > at / 1000 + LATE_TIMER:
            problems.append(f"{value!r} late by {arrived - at / 1000:.3f} s")
        assert rec.offset >= len(values)
    assert not problems, problems
    with connect(broker) as conn:
        assert set(value_counts(read_partition(conn, topic)[0]).values()) == {1}


def test_bad_scheduling_headers_are_refused(broker_factory, props):
    """A timer beyond timerMaxDelaySec (60 s here), a DELAY or timer that is not a whole
    number, two scheduling headers: INVALID_RECORD (87), the whole request refused, nothing
    stored or parked. A timer of exactly timerMaxDelaySec is accepted."""
    from confluent_kafka import KafkaError, Producer

    broker = broker_factory(config_file=props)
    topic = "refused"
    now_ms = int(time.time() * 1000)
    bad = [
        [("TIMER_DELAY_SEC", b"61")],
        [("TIMER_DELAY_MS", b"60001")],
        [("TIMER_DELAY_MS", b"3600000")],
        [("TIMER_DELIVER_MS", str(now_ms + 120_000).encode())],
        [("DELAY", b"x")],
        [("DELAY", b"1.5")],
        [("DELAY", b"")],
        [("TIMER_DELAY_MS", b"soon")],
        [("DELAY", b"1"), ("TIMER_DELAY_MS", b"100")],
    ]
    with connect(broker) as conn:
        conn.create_topic(topic)
        before = {t: high_watermarks(conn, t, n) for t, n in ((SCHEDULE_TOPIC, 18), (TIMER_TOPIC, 1))}
        for headers in bad:
            # The bad record in a batch with a good immediate and a good delayed one.
            batch = make_batch([b"good", b"bad", b"later"], headers=[[], headers, [("DELAY", b"1")]])
            entry = conn.produce(topic, 0, batch)
            assert entry.error_code == ErrorCode.invalid_record, (headers, entry)
            assert int(entry.error_code) == 87
            assert entry.error_message, "the error should say which header is wrong"
        assert conn.high_watermark(topic) == 0
        after = {t: high_watermarks(conn, t, n) for t, n in ((SCHEDULE_TOPIC, 18), (TIMER_TOPIC, 1))}
        assert after == before, "a refused request parked records"

        # confluent-kafka reports the same code.
        errors: list[Any] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retries": 0,
                             "logger": logging.getLogger("rdkafka")})
        producer.produce(topic, value=b"too-far", partition=0, headers=[("TIMER_DELAY_SEC", b"3600")],
                         on_delivery=lambda err, msg: errors.append(err))
        producer.produce(topic, value=b"nan", partition=0, headers=[("DELAY", b"soon")],
                         on_delivery=lambda err, msg: errors.append(err))
        assert producer.flush(WAIT) == 0
        producer.close()
        assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_RECORD] * 2
        assert conn.high_watermark(topic) == 0

        # Exactly the maximum is fine (parked, not readable now).
        assert conn.produce_ok(topic, 0, make_batch([b"max"], headers=[[("TIMER_DELAY_SEC", b"60")]])) == 0
        assert read_partition(conn, topic) == ([], 1)
        assert conn.high_watermark(TIMER_TOPIC) == before[TIMER_TOPIC][0] + 1


@pytest.mark.parametrize("crash", [False, True], ids=["running", "kill-9"])
def test_timers_beyond_the_wheel_window(broker_factory, tmp_path, crash):
    """timerRollWindowSlot=10 (a 1 s wheel at 100 ms precision): longer timers wait in the
    window's last slot and are parked again, several times; each is delivered once, on time
    (kill-9: the broker is killed after some re-parks and deliveries and restarted)."""
    broker = broker_factory(config_file=write_properties(tmp_path, timerRollWindowSlot="10"))
    topic = "rolled"
    with connect(broker) as conn:
        conn.create_topic(topic)
    delays_ms = [400, 1500, 2300, 3100, 3900]
    values = [f"t{d}".encode() for d in delays_ms]
    restarted = 0.0
    with connect(broker) as conn:
        sent = time.time()
        conn.produce_ok(topic, 0, make_batch(values, headers=[[("TIMER_DELAY_MS", str(d).encode())] for d in delays_ms]))
        acked = time.time()
    if crash:
        time.sleep(max(0.0, sent + 1.7 - time.time()))  # two delivered, the others re-parked
        broker.kill()
        broker.start()
        restarted = time.time()
    with watching(broker, topic) as watcher, connect(broker) as conn:
        watcher.wait_for(values, timeout=10)
        # A last short timer: the wheel has passed every slot before it once it arrives.
        conn.produce_ok(topic, 0, make_batch([b"sentinel"], headers=[[("TIMER_DELAY_MS", b"300")]]))
        watcher.wait_for([b"sentinel"], timeout=5)
        stored = read_partition(conn, topic)[0]
        # The long timers were parked again (copies in the timer topic), more than once.
        assert conn.high_watermark(TIMER_TOPIC) >= len(values) + 1 + 5
    problems = []
    for value, d in zip(values, delays_ms):
        arrived, rec = watcher.first(value)
        if crash and d < 1700:
            continue  # delivered before the kill: the watcher only saw it afterwards
        if arrived < sent + d / 1000 - EARLY_SLACK:
            problems.append(f"{value!r} early by {sent + d / 1000 - arrived:.3f} s")
        if arrived > max(acked + d / 1000, restarted) + LATE_TIMER:
            problems.append(f"{value!r} late by {arrived - acked - d / 1000:.3f} s")
        assert rec.headers_named("REAL_TOPIC") == [topic.encode()]
        assert len(rec.headers_named("PARKED_AT")) == 1
    assert not problems, problems
    counts = value_counts(stored)
    assert counts == Counter({v: 1 for v in [*values, b"sentinel"]}), counts


# -- 4. restart --------------------------------------------------------------------------------


def test_pending_timers_and_levels_survive_a_clean_restart(broker_factory, props):
    """Delivered records stay delivered, pending timers and level records are delivered once
    after a clean stop and a start on the same data directory: those that fell due while
    the broker was down at once, the others when due, never early."""
    broker = broker_factory(config_file=props)
    topic = "restart"
    with connect(broker) as conn:
        conn.create_topic(topic, partitions=2)
    with watching(broker, topic, 2) as watcher, connect(broker) as conn:
        conn.produce_ok(topic, 0, make_batch([b"early-timer", b"early-level"],
                                             headers=[[("TIMER_DELAY_MS", b"300")], [("DELAY", b"1")]]))
        watcher.wait_for([b"early-timer", b"early-level"], timeout=5)

    pending: dict[bytes, list[Header]] = {
        b"down-timer": [("TIMER_DELAY_MS", b"400")],  # due while the broker is down
        b"down-level": [("DELAY", b"1")],  # 1 s: due while down
        b"later-timer-ms": [("TIMER_DELAY_MS", b"3000")],
        b"later-timer-sec": [("TIMER_DELAY_SEC", b"3")],
        b"later-level": [("DELAY", b"2")],  # 3 s
    }
    with connect(broker) as conn:
        sent = time.time()
        conn.produce_ok(topic, 1, make_batch(list(pending)[:3], headers=list(pending.values())[:3]))
        at_ms = int(sent * 1000) + 3500
        conn.produce_ok(topic, 0, make_batch([*list(pending)[3:], b"later-timer-at"],
                                             headers=[*list(pending.values())[3:],
                                                      [("TIMER_DELIVER_MS", str(at_ms).encode())]]))
    pending[b"later-timer-at"] = []
    assert broker.stop() == 0
    time.sleep(max(0.0, sent + 1.2 - time.time()))  # let the short ones fall due while down
    broker.start()
    restarted = time.time()
    with watching(broker, topic, 2) as watcher, connect(broker) as conn:
        watcher.wait_for(list(pending), timeout=10)
        # Sentinels: the wheel and level 1 / 2 have passed everything before them when they arrive.
        conn.produce_ok(topic, 0, make_batch([b"s-timer", b"s-level1", b"s-level2"],
                                             headers=[[("TIMER_DELAY_MS", b"200")], [("DELAY", b"1")],
                                                      [("DELAY", b"2")]]))
        watcher.wait_for([b"s-timer", b"s-level1", b"s-level2"], timeout=10)
        stored = read_topic(conn, topic, 2)
    for value in (b"down-timer", b"down-level"):
        arrived, _ = watcher.first(value)
        assert arrived - restarted < 1.0, f"{value!r} due while down came {arrived - restarted:.2f} s after the start"
    for value, delay in ((b"later-timer-ms", 3.0), (b"later-timer-sec", 3.0), (b"later-level", 3.0),
                         (b"later-timer-at", 3.5)):
        arrived, _ = watcher.first(value)
        assert arrived >= sent + delay - EARLY_SLACK, f"{value!r} early"
        assert arrived <= max(sent + delay, restarted) + LATE_LEVEL, f"{value!r} late"
    counts = value_counts(stored)
    expected = {b"early-timer", b"early-level", *pending, b"s-timer", b"s-level1", b"s-level2"}
    assert set(counts) == expected and set(counts.values()) == {1}, counts


# -- 5. kill -9 during delivery ----------------------------------------------------------------

KILL_RECORDS = 2000  # delayed records, and as many timers
KILL_TIMER_SPREAD_MS = 8000  # timers due 0.5-8.5 s after they are sent: later than the levels' 5 s
KILL_ATTEMPTS = 3  # setups, when a loaded machine let every record fall due before the first kill
DUE_SLACK = 0.5  # s: the timer wheel's 100 ms slots and the whole ms of the broker's clock


@pytest.mark.crash
@pytest.mark.timeout(120 * KILL_ATTEMPTS)
@pytest.mark.parametrize("flush", ["sync", "async"])
def test_kill_9_during_delivery_delivers_everything_once(broker_factory, props, flush):
    """2,000 level records (levels 1-3: 1 s, 3 s, 5 s, produced over ~1 s) and 2,000 timers
    (0.5-8.5 s), all acknowledged; the broker is killed twice while delivering them and
    restarted on the same data directory. In the end every record is there exactly once.

    "While delivering": the first kill comes once a fifth is delivered, and before the last
    record was due (each record's due time is at least when it was sent plus its delay, so
    one sent later than the kill minus its delay cannot have been delivered at the kill).
    Measured at the kill, not after the restart: a broker restarted late delivers at once
    everything that fell due meanwhile, which says nothing of when it was killed. On a machine
    so loaded that everything fell due before the first kill, the setup is run again on a new
    topic (each attempt's records are still checked for exactly once)."""
    broker = broker_factory(config_file=props, flush=flush)
    for attempt in range(KILL_ATTEMPTS):
        pending = _kill_twice_and_check(broker, f"kill9-{attempt}")
        if pending:
            return
    pytest.fail(f"in {KILL_ATTEMPTS} attempts the first kill came after every record was due; nothing tested")


def _kill_twice_and_check(broker, topic: str) -> int:
    """One attempt on a new topic; returns how many delayed records were not yet due at the
    first kill."""
    from confluent_kafka import Producer

    with connect(broker) as conn:
        conn.create_topic(topic, partitions=2)
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "logger": logging.getLogger("rdkafka")})
    immediate: list[bytes] = []
    due_at: list[float] = []  # a lower bound of each delayed record's due time (time.time())
    chunks = 10
    for chunk in range(chunks):  # spread over ~1 s, so deliveries are spread too
        for i in range(chunk, KILL_RECORDS, chunks):
            sent = time.time()  # the broker receives it later, and counts its delay from then
            level = 1 + i % 3
            producer.produce(topic, value=b"L%d" % i, partition=i % 2, headers=[("DELAY", b"%d" % level)],
                             on_delivery=on_delivery)
            delay = 500 + (i * KILL_TIMER_SPREAD_MS) // KILL_RECORDS
            producer.produce(topic, value=b"T%d" % i, partition=(i + 1) % 2,
                             headers=[("TIMER_DELAY_MS", b"%d" % delay)], on_delivery=on_delivery)
            due_at += [sent + LEVEL_SECONDS[level - 1], sent + delay / 1000]
            if i % 20 == 0:
                immediate.append(b"N%d" % i)
                producer.produce(topic, value=immediate[-1], partition=i % 2, on_delivery=on_delivery)
        producer.poll(0)
        time.sleep(0.1)
    assert producer.flush(WAIT) == 0
    producer.close()
    assert not errors, errors[:5]
    expected = {v for v in acked}
    assert len(expected) == 2 * KILL_RECORDS + len(immediate)
    with connect(broker) as conn:  # the first timers may be delivered already
        assert sum(high_watermarks(conn, topic, 2).values()) >= len(expected)
    delayed_total = 2 * KILL_RECORDS

    def delivered() -> int:
        with connect(broker) as conn:
            return sum(high_watermarks(conn, topic, 2).values()) - len(expected)

    def delivered_at_least(fraction: float) -> int:
        deadline = time.monotonic() + 30
        while (seen := delivered()) < fraction * delayed_total:
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after 30 s waiting for {fraction:.0%} delivered ({seen})")
            time.sleep(0.01)
        return seen

    killed = []  # (delivered when last seen before the kill, not yet due at the kill)
    for fraction in (0.2, 0.6):  # kill mid-delivery: some delivered, some not
        seen = delivered_at_least(fraction)
        not_due = sum(due > time.time() + DUE_SLACK for due in due_at)
        broker.kill()
        broker.start()
        killed.append((seen, not_due))
    print(f"{topic}: (delivered, not yet due) at the kills: {killed} of {delayed_total}")

    def arrived(values: set[bytes]) -> Callable[[], bool]:
        def check() -> bool:
            with connect(broker) as conn:
                return set(value_counts(read_topic(conn, topic, 2))) >= values
        return check

    wait_until(arrived(expected), 30, "every record delivered", 0.2)
    # Sentinels: once they arrive, level 1 and the wheel have passed everything before them
    # (levels 2 and 3 are in order and their last records have arrived).
    with connect(broker) as conn:
        conn.produce_ok(topic, 0, make_batch([b"s-level", b"s-timer"],
                                             headers=[[("DELAY", b"1")], [("TIMER_DELAY_MS", b"200")]]))
    wait_until(arrived({b"s-level", b"s-timer"}), 10, "the sentinels", 0.1)
    with connect(broker) as conn:
        stored = read_topic(conn, topic, 2)
    counts = value_counts(stored)
    missing = expected - set(counts)
    duplicated = [v for v, n in counts.items() if n > 1]
    assert not missing, f"{len(missing)} records lost, e.g. {sorted(missing)[:10]}"
    assert not duplicated, f"{len(duplicated)} records delivered twice, e.g. {sorted(duplicated)[:10]}"
    assert set(counts) == expected | {b"s-level", b"s-timer"}
    for rec in stored:  # immediate records where they were acked; delayed ones after their batch
        if rec.value in expected:
            if rec.value.startswith(b"N"):
                assert (rec.partition, rec.offset) == acked[rec.value]
            else:
                assert rec.partition == acked[rec.value][0]
                assert rec.offset > acked[rec.value][1]
    return killed[0][1]


# -- 6. views ----------------------------------------------------------------------------------


def test_views_see_delayed_records_when_delivered(broker_factory, props):
    """A tag view and a SQL view over a topic: a delayed record matching the view appears in
    it when delivered (a consumer long-polling the view is woken by the delivery), and not
    before; non-matching delayed records never appear."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    broker = broker_factory(config_file=props)
    with connect(broker) as conn:
        conn.create_topic("orders")
        conn.create_topic("orders.a", -1, {"rmq.view.source": "orders", "rmq.view.tags": "A"})
        conn.create_topic("orders.red", -1, {"rmq.view.source": "orders", "rmq.view.sql": "color = 'red'"})
        records = [
            (b"now-A", [("TAGS", b"A"), ("color", b"blue")]),
            (b"level-A", [("TAGS", b"A"), ("color", b"red"), ("DELAY", b"1")]),
            (b"level-B", [("TAGS", b"B"), ("color", b"red"), ("DELAY", b"1")]),
            (b"timer-A", [("TAGS", b"A"), ("color", b"green"), ("TIMER_DELAY_MS", b"1500")]),
            (b"timer-C", [("TAGS", b"C"), ("TIMER_DELAY_MS", b"1500")]),
            (b"now-B", [("TAGS", b"B")]),
        ]

    async def read_view(view: str, want: int) -> list[tuple[float, Any]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None,
                                    enable_auto_commit=False, fetch_max_wait_ms=5000)
        await consumer.start()
        try:
            tp = TopicPartition(view, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got: list[tuple[float, Any]] = []
            deadline = time.monotonic() + 10
            while len(got) < want and time.monotonic() < deadline:
                for r in (await consumer.getmany(tp, timeout_ms=1000)).get(tp, ()):
                    got.append((time.time(), r))
            return got
        finally:
            await consumer.stop()

    async def run():
        with connect(broker) as conn:
            sent = time.time()
            conn.produce_ok("orders", 0, make_batch([v for v, _ in records], headers=[h for _, h in records]))
        return sent, await asyncio.gather(read_view("orders.a", 3), read_view("orders.red", 2))

    sent, (tagged, red) = asyncio.run(asyncio.wait_for(run(), 30))
    assert [r.value for _, r in tagged] == [b"now-A", b"level-A", b"timer-A"]
    assert [r.value for _, r in red] == [b"level-A", b"level-B"]
    assert tagged[0][1].offset == 0
    for arrived, rec in [*tagged[1:], *red]:
        due = 1.0 if rec.value.startswith(b"level") else 1.5
        assert arrived >= sent + due - EARLY_SLACK, f"{rec.value!r} early"
        # fetch_max_wait_ms is 5 s: arriving within ~1 s of due means the delivery woke the poll.
        assert arrived <= sent + due + LATE_LEVEL, f"{rec.value!r} {arrived - sent - due:.2f} s late"
        assert rec.offset >= len(records)
        assert dict(rec.headers)["REAL_TOPIC"] == b"orders"
    with connect(broker) as conn:  # and the views hold nothing else, after every delivery
        assert [r.value for r in read_partition(conn, "orders.a")[0]] == [b"now-A", b"level-A", b"timer-A"]
        assert [r.value for r in read_partition(conn, "orders.red")[0]] == [b"level-A", b"level-B"]


# -- 7. system topics --------------------------------------------------------------------------


def test_system_topics_are_read_only_and_unlisted(broker_factory, props):
    """Producing to SCHEDULE_TOPIC_XXXX or rmq_sys_wheel_timer is INVALID_TOPIC_EXCEPTION (17);
    Metadata for all topics leaves them out, Metadata by name answers them (18 level
    partitions, 1 timer partition) and they can be fetched by name; they cannot be deleted."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    broker = broker_factory(config_file=props)
    with connect(broker) as conn:
        conn.create_topic("user")
        for system in (SCHEDULE_TOPIC, TIMER_TOPIC):
            before = conn.high_watermark(system)
            entry = conn.produce(system, 0, make_batch([b"sneaky"], headers=[[("REAL_TOPIC", b"user"), ("REAL_QID", b"0")]]))
            assert entry.error_code == ErrorCode.invalid_topic_exception, (system, entry)
            assert int(entry.error_code) == 17
            assert conn.high_watermark(system) == before

        listed = {t.name for t in conn.metadata(None).topics}
        assert "user" in listed
        assert not listed & {SCHEDULE_TOPIC, TIMER_TOPIC}, listed
        named = conn.metadata([SCHEDULE_TOPIC, TIMER_TOPIC], allow_auto_topic_creation=False)
        assert {t.name: (t.error_code, len(t.partitions)) for t in named.topics} == {
            SCHEDULE_TOPIC: (ErrorCode.none, 18), TIMER_TOPIC: (ErrorCode.none, 1)}

        # The parked copies are readable by name: level 2 is partition 1.
        conn.produce_ok("user", 0, make_batch([b"parked", b"timed"], keys=[b"k", None],
                                              headers=[[("DELAY", b"2")], [("TIMER_DELAY_MS", b"2000")]]))
        (parked,), _ = read_partition(conn, SCHEDULE_TOPIC, 1)
        assert (parked.key, parked.value, parked.header("DELAY")) == (b"k", b"parked", b"2")
        assert parked.headers_named("REAL_TOPIC") == [b"user"] and parked.headers_named("REAL_QID") == [b"0"]
        timers, _ = read_partition(conn, TIMER_TOPIC, 0)
        assert [r.value for r in timers] == [b"timed"]
        assert timers[0].headers_named("REAL_TOPIC") == [b"user"]

    # Real clients: confluent's delivery fails with the same code; its listing leaves them out.
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0,
                         "logger": logging.getLogger("rdkafka")})
    producer.produce(SCHEDULE_TOPIC, value=b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(WAIT) == 0
    producer.close()
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_EXCEPTION]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topics = admin.list_topics(timeout=WAIT).topics
    assert "user" in topics and SCHEDULE_TOPIC not in topics and TIMER_TOPIC not in topics
    by_name = admin.list_topics(topic=SCHEDULE_TOPIC, timeout=WAIT).topics
    assert len(by_name[SCHEDULE_TOPIC].partitions) == 18
    for system in (SCHEDULE_TOPIC, TIMER_TOPIC):
        with pytest.raises(KafkaException) as refused:
            admin.delete_topics([system], operation_timeout=10)[system].result(WAIT)
        assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    with connect(broker) as conn:
        named = conn.metadata([SCHEDULE_TOPIC, TIMER_TOPIC], allow_auto_topic_creation=False)
        assert all(t.error_code == ErrorCode.none for t in named.topics)


# -- 8. sizes: a segment's worth of due records ------------------------------------------------

SEGMENT_BYTES = 1 << 20


def test_due_records_larger_than_a_segment_are_delivered(broker_factory, tmp_path):
    """log.segment.bytes=1 MiB; four produce requests of 250 x 1 KB level-1 records, which fall
    due together (the broker is stopped past their due time, then started), and an unrelated
    timer on another topic: everything is delivered once, in batches that fit a segment."""
    broker = broker_factory(config_file=write_properties(tmp_path, log__segment__bytes=str(SEGMENT_BYTES)))
    values = [b"%04d" % i + b"x" * 1000 for i in range(1000)]
    with connect(broker) as conn:
        conn.create_topic("big")
        conn.create_topic("other")
        sent = time.time()
        for i in range(0, 1000, 250):
            conn.produce_ok("big", 0, make_batch(values[i:i + 250], headers=[[("DELAY", b"1")]] * 250))
        conn.produce_ok("other", 0, make_batch([b"timer"], headers=[[("TIMER_DELAY_MS", b"500")]]))
    assert broker.stop() == 0
    time.sleep(max(0.0, sent + 1.3 - time.time()))  # all of them due before the start
    broker.start()
    with connect(broker) as conn:
        try:
            wait_until(lambda: conn.high_watermark("big") == 2000 and conn.high_watermark("other") == 2, 8,
                       "the deliveries")
        finally:
            stalled = "scheduled delivery failed" in broker.stderr
        counts = value_counts(read_partition(conn, "big")[0])
        assert counts == Counter({v: 1 for v in values})
        assert [r.value for r in read_partition(conn, "other")[0]] == [b"timer"]
    assert not stalled


def test_a_refused_request_delivers_none_of_its_parked_records(broker_factory, tmp_path):
    """A batch of one level-1 record and 7,000 level-2 records, whose level-2 parked copy does
    not fit a 1 MiB segment: a request is appended whole or not at all, so either it is
    refused and nothing of it is ever delivered, or every record is delivered once."""
    broker = broker_factory(config_file=write_properties(tmp_path, log__segment__bytes=str(SEGMENT_BYTES)))
    n = 7000
    values = [b"first"] + [b"%05d" % i + b"y" * 75 for i in range(n)]
    batch = make_batch(values, headers=[[("DELAY", b"1")]] + [[("DELAY", b"2")]] * n)
    assert len(batch) < SEGMENT_BYTES
    with connect(broker) as conn:
        conn.create_topic("atomic")
        entry = conn.produce("atomic", 0, batch)
        refused = entry.error_code != ErrorCode.none
        time.sleep(LEVEL_SECONDS[1] + 1.0)  # past both levels' delays: what will come has come
        stored = read_partition(conn, "atomic")[0]
    if refused:
        assert [r.value for r in stored] == [], f"refused ({entry.error_code!r}) yet delivered"
    else:
        assert value_counts(stored) == Counter({v: 1 for v in values})
