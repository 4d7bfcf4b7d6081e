"""Issue #8: every client reads a view exactly, against a real broker process.

Each source topic (one per compression codec, 2 partitions) is written batch by batch with
the raw client, so the layout is known: a batch whose records all match, one whose last
records do not (a gap at the end of a fetch), a run of 60 batches with no match, a batch
of a tag whose hash code collides with the view's ("BB" vs "Aa"), untagged records, and a
non-matching tail. Two views read each source: tags ``A || Aa`` and a SQL92 expression.

What every client (aiokafka, kafka-python, confluent-kafka, kcat) reads from a view must
equal the client-side filter over the source (read back with the raw client), record for
record: partition, offset, key, value, headers and timestamp; from the beginning, from the
middle of a batch and of a gap, with fetch sizes so small that every fetch ends on a batch,
and in a consumer group that commits on the view's name and resumes. Then: long polling on
a view (woken by a matching append, not by a stream of others), ListOffsets and Fetch by
topic id.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from rawkafka import (  # noqa: E402
    EARLIEST,
    GZIP,
    LATEST,
    LZ4,
    MAX_TIMESTAMP,
    NONE,
    SNAPPY,
    ZSTD,
    ErrorCode,
    KafkaRaw,
    broker_pid,
    decode_records,
    make_batch,
)
from rmqkafka.adapter.embedded import EmbeddedBroker  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KCAT = shutil.which("kcat")
CLIENTS = ("aiokafka", "kafka-python", "confluent", "kcat")
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
PARTITIONS = 2
TAG_EXPRESSION = "A || Aa"
SQL_EXPRESSION = "color IN ('red', 'blue') AND size > 3"
BASE_TS = int(time.time() * 1000) - 3_600_000
WAIT = 60.0

Header = tuple[str, "bytes | None"]
# (partition, offset, key, value, headers, timestamp): what a consumer sees of a record
Rec = tuple[int, int, "bytes | None", "bytes | None", tuple[Header, ...], int]


# -- what the views must yield: filters written here, independently of the broker's -------------


def first_header(headers: tuple[Header, ...], name: str) -> bytes | None:
    return next((value for key, value in headers if key == name), None)


def tag_view_matches(headers: tuple[Header, ...]) -> bool:
    return first_header(headers, "TAGS") in (b"A", b"Aa")


def sql_view_matches(headers: tuple[Header, ...]) -> bool:
    color, size = first_header(headers, "color"), first_header(headers, "size")
    return color in (b"red", b"blue") and size is not None and int(size) > 3


MATCHES = {"tags": tag_view_matches, "sql": sql_view_matches}


# -- the source layout --------------------------------------------------------------------------


def record(n: int, tag: str | None, color: str, size: int) -> tuple[bytes | None, bytes | None, list[Header]]:
    headers: list[Header] = [] if tag is None else [("TAGS", tag.encode())]
    headers += [("color", color.encode()), ("size", b"%d" % size), ("dup", b"first"), ("dup", b"second"),
                ("nothing", None)]
    key = None if n % 7 == 3 else b"key-%d" % n
    value = None if n % 11 == 5 else (b"value-%d " % n) * (1 + n % 3)
    return key, value, headers


def layout(partition: int) -> list[list[tuple[bytes | None, bytes | None, list[Header]]]]:
    """The batches of one source partition, in order."""
    n = iter(range(partition * 100_000, (partition + 1) * 100_000))
    batches = [
        [record(next(n), "A", "red", 5) for _ in range(10)],  # every record matches both views
        [record(next(n), tag, color, size) for tag, color, size in (  # ends with non-matching records
            ("A", "red", 9), ("B", "blue", 8), ("Aa", "green", 4), ("B", "red", 1),
            ("A", "blue", 2), ("BB", "red", 7), ("B", "green", 9), ("C", "green", 9))],
    ]
    batches += [[record(next(n), "B", "green", 6) for _ in range(20)] for _ in range(60)]  # no match
    batches += [
        [record(next(n), "BB", "yellow", 9) for _ in range(5)],  # "BB".hashCode() == "Aa".hashCode()
        [record(next(n), None, "blue", 9) for _ in range(4)],  # untagged: only the SQL view
        [record(next(n), tag, "red", size) for tag, size in (("B", 1), ("A", 4), ("C", 3), ("Aa", 8))],
    ]
    batches += [[record(next(n), "C", "green", 1) for _ in range(5)] for _ in range(3)]  # tail
    return batches


def stamps(count: int, start: int) -> list[int]:
    return [BASE_TS + start + i for i in range(count)]


@pytest.fixture(scope="module")
def view_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, flush="async") as broker:
        yield broker


@pytest.fixture
def bootstrap(view_broker: EmbeddedBroker) -> Iterator[str]:
    """The broker's address; an ERROR or a traceback it logs during the test fails it."""
    seen = len(view_broker.stderr)
    yield view_broker.bootstrap_servers
    time.sleep(0.05)
    new = view_broker.stderr[seen:]
    bad = [line for line in new.splitlines() if " ERROR " in line or "Traceback" in line]
    assert not bad, f"the broker logged errors: {bad}"


class Source:
    """A source topic written with one codec, its two views and what each must yield."""

    def __init__(self, bootstrap: str, codec: str) -> None:
        self.bootstrap = bootstrap
        self.codec = codec
        self.topic = f"src-{codec}-{uuid.uuid4().hex[:6]}"
        self.views = {"tags": f"{self.topic}.tags", "sql": f"{self.topic}.sql"}
        with KafkaRaw.connect(bootstrap) as raw:
            raw.create_topic(self.topic, PARTITIONS)
            raw.create_topic(self.views["tags"], -1,
                             {"rmq.view.source": self.topic, "rmq.view.tags": TAG_EXPRESSION})
            raw.create_topic(self.views["sql"], -1,
                             {"rmq.view.source": self.topic, "rmq.view.sql": SQL_EXPRESSION})
        self.add({p: layout(p) for p in range(PARTITIONS)})

    def add(self, batches: dict[int, list[list[tuple[bytes | None, bytes | None, list[Header]]]]]) -> None:
        """Append ``batches`` to each partition, then read the whole source back."""
        with KafkaRaw.connect(self.bootstrap) as raw:
            for p, partition_batches in batches.items():
                written = raw.high_watermark(self.topic, p)
                for batch in partition_batches:
                    keys, values, headers = zip(*batch)
                    raw.produce_ok(self.topic, p, make_batch(
                        list(values), keys=list(keys), headers=list(headers),
                        compression=CODECS[self.codec], timestamps=stamps(len(batch), written)))
                    written += len(batch)
            self.source: list[Rec] = []
            self.ends: dict[int, int] = {}
            for p in range(PARTITIONS):
                self.source += [(p, r.offset, r.key, r.value, r.headers, r.timestamp)
                                for r in raw.fetch_all(self.topic, p)]
                self.ends[p] = raw.high_watermark(self.topic, p)

    def expected(self, kind: str, starts: dict[int, int] | None = None) -> list[Rec]:
        starts = starts or {}
        return [r for r in self.source if r[1] >= starts.get(r[0], 0) and MATCHES[kind](r[4])]


_sources: dict[tuple[str, str], Source] = {}


def source_for(bootstrap: str, codec: str) -> Source:
    if (bootstrap, codec) not in _sources:
        _sources[(bootstrap, codec)] = Source(bootstrap, codec)
    return _sources[(bootstrap, codec)]


# -- the clients --------------------------------------------------------------------------------


def read_aiokafka(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int],
                  **config: Any) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> list[Rec]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **config)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in starts]
            consumer.assign(tps)
            for tp in tps:
                consumer.seek(tp, starts[tp.partition])
            out: list[Rec] = []
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                fetched = await consumer.getmany(timeout_ms=300)
                for records in fetched.values():
                    out += [(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                            for r in records]
                if all([await consumer.position(tp) >= ends[tp.partition] for tp in tps]):
                    return out
            raise AssertionError(f"aiokafka did not reach the end of {topic}: {len(out)} records")
        finally:
            await consumer.stop()

    return asyncio.run(go())


def read_kafka_python(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int],
                      **config: Any) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **config)
    try:
        tps = [TopicPartition(topic, p) for p in starts]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, starts[tp.partition])
        out: list[Rec] = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                out += [(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                        for r in records]
            if all(consumer.position(tp) >= ends[tp.partition] for tp in tps):
                return out
        raise AssertionError(f"kafka-python did not reach the end of {topic}: {len(out)} records")
    finally:
        consumer.close()


def confluent_record(message: Any) -> Rec:
    return (message.partition(), message.offset(), message.key(), message.value(),
            tuple(message.headers() or ()), message.timestamp()[1])


def read_confluent(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int],
                   **config: Any) -> list[Rec]:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True, **config})
    try:
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in starts.items()])
        out: list[Rec] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + WAIT
        while len(at_end) < len(starts) and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.3):
                error = message.error()
                if error is None:
                    out.append(confluent_record(message))
                elif error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= ends[message.partition()]:
                        at_end.add(message.partition())
                else:
                    raise AssertionError(f"confluent-kafka: {error}")
        assert len(at_end) == len(starts), f"confluent-kafka did not reach the end of {topic}"
        return out
    finally:
        consumer.close()


def read_kcat(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int],
              **config: Any) -> list[Rec]:
    out: list[Rec] = []
    settings = [arg for key, value in config.items() for arg in ("-X", f"{key}={value}")]
    for p, offset in starts.items():
        done = subprocess.run(
            [KCAT, "-b", bootstrap, "-C", "-t", topic, "-p", str(p), "-o", str(offset), "-e", "-J", "-q",
             *settings],
            capture_output=True, timeout=WAIT, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        out += [kcat_record(json.loads(line)) for line in done.stdout.splitlines() if line.strip()]
    return out


def kcat_record(entry: dict) -> Rec:
    pairs = entry.get("headers") or []
    headers = tuple((pairs[i], None if pairs[i + 1] is None else pairs[i + 1].encode())
                    for i in range(0, len(pairs), 2))

    def raw(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    return (entry["partition"], entry["offset"], raw(entry["key"]), raw(entry["payload"]), headers, entry["ts"])


READERS: dict[str, Callable[..., list[Rec]]] = {
    "aiokafka": read_aiokafka,
    "kafka-python": read_kafka_python,
    "confluent": read_confluent,
    "kcat": read_kcat,
}
TINY_FETCHES = {  # every fetch returns one batch (KIP-74) and what covering batches fit
    "aiokafka": {"max_partition_fetch_bytes": 100, "fetch_max_bytes": 100},
    "kafka-python": {"max_partition_fetch_bytes": 100, "fetch_max_bytes": 100},
    "confluent": {"max.partition.fetch.bytes": 100, "fetch.max.bytes": 1000, "message.max.bytes": 1000,
                  "receive.message.max.bytes": 2000},
    "kcat": {"max.partition.fetch.bytes": 100, "fetch.max.bytes": 1000, "message.max.bytes": 1000,
             "receive.message.max.bytes": 2000},
}


def needs(client: str) -> None:
    if client == "kcat" and KCAT is None:
        pytest.skip("kcat is not on PATH")


def by_position(records: list[Rec]) -> list[Rec]:
    return sorted(records, key=lambda r: (r[0], r[1]))


# -- reading views exactly --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["tags", "sql"])
@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("client", CLIENTS)
def test_every_client_reads_a_view_exactly(bootstrap: str, client: str, codec: str, kind: str) -> None:
    needs(client)
    src = source_for(bootstrap, codec)
    starts = {p: 0 for p in range(PARTITIONS)}
    got = READERS[client](bootstrap, src.views[kind], starts, src.ends)
    assert by_position(got) == src.expected(kind)


@pytest.mark.parametrize("kind", ["tags", "sql"])
@pytest.mark.parametrize("client", CLIENTS)
def test_from_the_middle_of_a_batch_and_of_a_gap(bootstrap: str, client: str, kind: str) -> None:
    needs(client)
    src = source_for(bootstrap, "lz4")
    starts = {0: 13, 1: 500}  # inside the mixed batch [10, 18); inside the run of no match
    got = READERS[client](bootstrap, src.views[kind], starts, src.ends)
    assert by_position(got) == src.expected(kind, starts)


@pytest.mark.parametrize("client", CLIENTS)
def test_tiny_fetches_end_on_every_batch(bootstrap: str, client: str) -> None:
    """Every fetch returns one batch: fetches end after a batch whose last records do not
    match, after a gap, and on the collision batch."""
    needs(client)
    src = source_for(bootstrap, "gzip")
    starts = {p: 0 for p in range(PARTITIONS)}
    for kind in ("tags", "sql"):
        got = READERS[client](bootstrap, src.views[kind], starts, src.ends, **TINY_FETCHES[client])
        assert by_position(got) == src.expected(kind)


READ_COMMITTED = {
    "aiokafka": {"isolation_level": "read_committed"},
    "kafka-python": {"isolation_level": "read_committed"},
    "confluent": {"isolation.level": "read_committed"},
    "kcat": {"isolation.level": "read_committed"},
}


@pytest.mark.parametrize("client", CLIENTS)
def test_read_committed_consumers_pass_the_covering_batches(bootstrap: str, client: str) -> None:
    """A covering batch is a control batch (a COMMIT marker without a producer id):
    read_committed consumers, which inspect control batches, skip it too."""
    needs(client)
    src = source_for(bootstrap, "zstd")
    starts = {p: 0 for p in range(PARTITIONS)}
    got = READERS[client](bootstrap, src.views["tags"], starts, src.ends, **READ_COMMITTED[client])
    assert by_position(got) == src.expected("tags")


# -- consumer groups: commit on the view's name, resume ---------------------------------------------


def group_aiokafka(bootstrap: str, view: str, group: str, count: int | None, ends: dict[int, int]) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> list[Rec]:
        consumer = AIOKafkaConsumer(view, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            out: list[Rec] = []
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                want = None if count is None else count - len(out)
                fetched = await consumer.getmany(timeout_ms=300, max_records=want)
                for records in fetched.values():
                    out += [(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                            for r in records]
                if count is not None and len(out) >= count:
                    break
                tps = [TopicPartition(view, p) for p in ends]
                if count is None and consumer.assignment() and all(
                        [await consumer.position(tp) >= ends[tp.partition] for tp in tps]):
                    break
            await consumer.commit()
            return out
        finally:
            await consumer.stop()

    return asyncio.run(go())


def group_kafka_python(bootstrap: str, view: str, group: str, count: int | None, ends: dict[int, int]) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(view, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        out: list[Rec] = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            want = 500 if count is None else count - len(out)
            for records in consumer.poll(timeout_ms=300, max_records=want).values():
                out += [(r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                        for r in records]
            if count is not None and len(out) >= count:
                break
            if count is None and consumer.assignment() and all(
                    consumer.position(TopicPartition(view, p)) >= ends[p] for p in ends):
                break
        consumer.commit()
        return out
    finally:
        consumer.close()


def group_confluent(bootstrap: str, view: str, group: str, count: int | None, ends: dict[int, int]) -> list[Rec]:
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.subscribe([view])
    try:
        out: list[Rec] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is None:
                continue
            if message.error() is None:
                out.append(confluent_record(message))
                if count is not None and len(out) >= count:
                    break
            elif message.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
                if count is None and len(at_end) == len(ends):
                    break
            else:
                raise AssertionError(f"confluent-kafka: {message.error()}")
        consumer.commit(asynchronous=False)
        return out
    finally:
        consumer.close()


def group_kcat(bootstrap: str, view: str, group: str, count: int | None, ends: dict[int, int]) -> list[Rec]:
    limit = ["-c", str(count)] if count is not None else []
    done = subprocess.run(
        [KCAT, "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-J", "-q", *limit, view],
        capture_output=True, timeout=WAIT, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return [kcat_record(json.loads(line)) for line in done.stdout.splitlines() if line.strip()]


GROUP_READERS = {
    "aiokafka": group_aiokafka,
    "kafka-python": group_kafka_python,
    "confluent": group_confluent,
    "kcat": group_kcat,
}


@pytest.mark.parametrize("client", CLIENTS)
def test_consumer_group_commits_on_the_view_and_resumes(bootstrap: str, client: str) -> None:
    """A group reads part of a view and commits (kcat reads it all: it may consume past
    ``-c`` before it exits), then the source grows and the group resumes from its commits."""
    needs(client)
    src = Source(bootstrap, "snappy")
    view = src.views["tags"]
    group = f"views-{client}-{uuid.uuid4().hex[:6]}"
    first = GROUP_READERS[client](bootstrap, view, group, None if client == "kcat" else 7, src.ends)
    assert len(first) >= 7
    with KafkaRaw.connect(bootstrap) as raw:
        committed = raw.request(9, 5, group_id=group, topics=[dict(name=view, partition_indexes=[0, 1])])
    offsets = {p.partition_index: p.committed_offset for t in committed.topics for p in t.partitions}
    assert any(offset > 0 for offset in offsets.values()), offsets
    more = [[record(900_000 + i, tag, "red", 5) for i, tag in enumerate(("A", "B", "Aa", "C"))],
            [record(900_010 + i, "B", "red", 5) for i in range(30)]]
    src.add({p: more for p in range(PARTITIONS)})
    rest = GROUP_READERS[client](bootstrap, view, group, None, src.ends)
    assert by_position(first + rest) == src.expected("tags")


# -- long polling -------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def test_a_waiting_view_fetch_is_woken_by_a_matching_append_only(bootstrap: str, view_broker: EmbeddedBroker) -> None:
    topic = f"busy-{uuid.uuid4().hex[:6]}"
    view = f"{topic}.only-a"
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic(topic, 1)
        raw.create_topic(view, -1, {"rmq.view.source": topic, "rmq.view.tags": "A"})
        # a backlog of 200k non-matching records between the fetch offset and the log end:
        # a waiter that re-read the view on every append would scan it again each time
        for _ in range(20):
            raw.produce_ok(topic, 0, make_batch([b"x"] * 10_000, headers=[[("TAGS", b"B")]] * 10_000))
    pid = broker_pid(view_broker)
    answer: dict[str, Any] = {}

    def fetch() -> None:
        with KafkaRaw.connect(bootstrap, timeout=30) as waiting:
            began = time.monotonic()
            answer["entry"] = waiting.fetch(view, 0, 0, max_wait_ms=20_000, min_bytes=1)
            answer["at"] = time.monotonic()
            answer["waited"] = answer["at"] - began

    waiter = threading.Thread(target=fetch)
    with KafkaRaw.connect(bootstrap) as producer:
        waiter.start()
        time.sleep(0.5)  # the fetch is parked
        before = cpu_seconds(pid)
        for i in range(100):  # a busy source: 100 appends the view filters out
            producer.produce_ok(topic, 0, make_batch([b"y%d" % i], headers=[[("TAGS", b"B")]]))
            time.sleep(0.01)
        spent = cpu_seconds(pid) - before
        assert waiter.is_alive(), "a non-matching append woke the view's fetch"
        sent = time.monotonic()
        offset = producer.produce_ok(topic, 0, make_batch([b"match"], headers=[[("TAGS", b"A")]]))
        waiter.join(10)
    assert not waiter.is_alive()
    assert answer["at"] - sent < 1.0, "the matching append did not wake the fetch promptly"
    records = decode_records(answer["entry"].records)
    assert [(r.offset, r.value) for r in records] == [(offset, b"match")]
    # 100 appends cost the broker a few ms each; re-reading 200k entries on each would not
    assert spent < 0.6, f"the broker spent {spent:.2f} s of CPU on 100 non-matching appends"


def test_a_view_consumer_waits_through_a_busy_source(bootstrap: str) -> None:
    """confluent-kafka on a view whose source gets a stream of other records: it sees the
    matching one as soon as it is produced, and nothing else (no error either)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"stream-{uuid.uuid4().hex[:6]}"
    view = f"{topic}.only-a"
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic(topic, 1)
        raw.create_topic(view, -1, {"rmq.view.source": topic, "rmq.view.tags": "A"})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stream", "fetch.wait.max.ms": 100,
                         "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    try:
        consumer.assign([TopicPartition(view, 0, 0)])
        seen: list[Any] = []
        sent_at = 0.0
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:  # 40 fetches answered with gaps at most
            producer.produce(topic, b"other", headers=[("TAGS", b"B")])
            producer.poll(0)
            message = consumer.poll(0.05)
            if message is not None:
                seen.append(message)
        producer.produce(topic, b"wanted", headers=[("TAGS", b"A")])
        producer.flush(5)
        sent_at = time.monotonic()
        while not any(m.error() is None for m in seen) and time.monotonic() < sent_at + 5:
            message = consumer.poll(0.05)
            if message is not None:
                seen.append(message)
        assert [m.error() for m in seen if m.error() is not None] == []
        assert [m.value() for m in seen] == [b"wanted"]
        assert time.monotonic() - sent_at < 1.0
        (position,) = consumer.position([TopicPartition(view, 0)])
        assert position.offset == seen[0].offset() + 1
    finally:
        consumer.close()


def test_a_sql_view_fetch_answers_at_its_scan_bound_without_waiting(bootstrap: str) -> None:
    """Issue 24: a long-polling fetch on a SQL view whose source holds more non-matching
    bytes than one read scans (view_reader.SCAN_BYTES) is answered as soon as the read
    stops on its bound, with a covering batch and no records, not after max_wait; the
    consumer's next fetches go on from there and reach the match."""
    from rmqkafka.rmqsemantics.view_reader import SCAN_BYTES

    topic = f"scanned-{uuid.uuid4().hex[:6]}"
    view = f"{topic}.r3"
    rows = 10_000
    with KafkaRaw.connect(bootstrap, timeout=30) as raw:
        raw.create_topic(topic, 1)
        raw.create_topic(view, -1, {"rmq.view.source": topic, "rmq.view.sql": "region = 'r3'"})
        batch = make_batch([b"x" * 20] * rows, headers=[[("region", b"r1")]] * rows)
        for _ in range(2 * SCAN_BYTES // len(batch) + 2):
            raw.produce_ok(topic, 0, batch)
        match = raw.produce_ok(topic, 0, make_batch([b"match"], headers=[[("region", b"r3")]]))
        began = time.monotonic()
        entry = raw.fetch(view, 0, 0, max_wait_ms=20_000, min_bytes=1)
        waited = time.monotonic() - began
        assert entry.error_code == ErrorCode.none
        assert waited < 10, f"answered after {waited:.1f} s: it waited for max_wait"
        assert decode_records(entry.records) == []  # a gap: only a covering batch
        offset, fetches, found = 0, 0, []
        while not found and fetches < 20:
            entry = raw.fetch(view, 0, offset, max_wait_ms=20_000, min_bytes=1)
            fetches += 1
            found = [r for r in decode_records(entry.records) if r.offset >= offset]
            offset = max(offset, _next_offset_of(entry.records))
        assert [(r.offset, r.value) for r in found] == [(match, b"match")]
        assert fetches >= 2  # the source is more than one read's bound


def _next_offset_of(records: bytes) -> int:
    """The offset after the last batch of a fetch answer (covering batches included)."""
    pos, nxt = 0, 0
    while pos + 12 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big")
        length = int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        nxt = base + int.from_bytes(records[pos + 23 : pos + 27], "big") + 1
        pos += 12 + length
    return nxt


# -- ListOffsets and Fetch by id ------------------------------------------------------------------


def test_list_offsets_on_a_view(bootstrap: str) -> None:
    src = source_for(bootstrap, "none")
    view = src.views["tags"]
    with KafkaRaw.connect(bootstrap) as raw:
        for p in range(PARTITIONS):
            for special in (EARLIEST, LATEST, MAX_TIMESTAMP):
                mine, theirs = raw.list_offsets(view, p, special), raw.list_offsets(src.topic, p, special)
                assert (mine.error_code, mine.offset, mine.timestamp) == (
                    theirs.error_code, theirs.offset, theirs.timestamp)
            wanted = src.expected("tags")
            for ts in (BASE_TS, BASE_TS + 15, BASE_TS + 40, BASE_TS + 1247, BASE_TS + 1_000_000):
                first = next(((r[1], r[5]) for r in wanted if r[0] == p and r[5] >= ts), (-1, -1))
                entry = raw.list_offsets(view, p, ts)
                assert (entry.error_code, entry.offset, entry.timestamp) == (ErrorCode.none, *first), ts


def test_fetch_a_view_by_topic_id_and_out_of_range(bootstrap: str) -> None:
    src = source_for(bootstrap, "none")
    view = src.views["tags"]
    with KafkaRaw.connect(bootstrap) as raw:
        (entry,) = raw.metadata([view]).topics
        assert entry.error_code == ErrorCode.none
        by_id = raw.fetch("", 0, 0, version=13, topic_id=entry.topic_id)
        by_name = raw.fetch(view, 0, 0, version=12)
        assert by_id.error_code == ErrorCode.none and by_id.records == by_name.records
        assert by_id.high_watermark == src.ends[0]
        unknown = raw.fetch("", 0, 0, version=13, topic_id=uuid.uuid4())
        assert unknown.error_code == ErrorCode.unknown_topic_id
        beyond = raw.fetch(view, 0, src.ends[0] + 1)
        assert beyond.error_code == ErrorCode.offset_out_of_range
        assert beyond.high_watermark == src.ends[0]
        assert raw.fetch(view, PARTITIONS, 0).error_code == ErrorCode.unknown_topic_or_partition
