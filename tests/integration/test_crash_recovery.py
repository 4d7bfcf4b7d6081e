"""Crash recovery against a real broker process: kill -9 mid-stream, torn commitlog tails
written by hand, and derived data (checkpoint, consume queues) deleted.

The commitlog is the only source of truth: after any of these, every acknowledged record is
there, offsets are 0..n-1 without gaps or duplicates, and new produces continue at the high
watermark.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import threading
import time
from pathlib import Path

import pytest
from rawkafka import GZIP, LATEST, MAX_TIMESTAMP, ZSTD, ErrorCode, KafkaRaw, make_batch, wait_until
from rmqkafka.storage.checkpoint_file import DamagedCheckpointError, read_checkpoint

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(180)]

TOPIC = "crash"


def connect(broker) -> KafkaRaw:
    return KafkaRaw(broker.host, broker.port)


def segments(data_dir: Path) -> list[Path]:
    return sorted((Path(data_dir) / "commitlog").glob("*.log"))


def last_segment(data_dir: Path) -> Path:
    files = segments(data_dir)
    assert files, f"no commitlog segment in {data_dir}"
    return files[-1]


def checkpoint_covers_the_commitlog(data_dir: Path) -> bool:
    """Whether checkpoint.json's position has reached the end of the last segment (whose
    name is its first byte position)."""
    segment = last_segment(data_dir)
    end = int(segment.stem) + segment.stat().st_size
    try:
        return (read_checkpoint(Path(data_dir) / "checkpoint.json") or {}).get("position", -1) >= end
    except (OSError, DamagedCheckpointError):
        return False


# --- (a) kill -9 mid-stream


class NumberedProducer:
    """confluent-kafka, acks=all + idempotence, producing "0", "1", ... from a thread.

    Delivery callbacks record which numbers were acknowledged and at which offset.
    """

    def __init__(self, bootstrap: str, topic: str, first: int) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.next = first
        self.acked: dict[int, int] = {}  # number -> offset the broker acknowledged
        self.failed: set[int] = set()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._closed = False
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 20000,
                "request.timeout.ms": 5000,
                "socket.timeout.ms": 5000,
                "retry.backoff.ms": 50,
                "retry.backoff.max.ms": 200,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": self._on_error,
                # librdkafka's connection-refused chatter while the broker is down goes to
                # Python logging (captured by pytest) instead of the terminal.
                "logger": logging.getLogger("rdkafka"),
            }
        )
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)

    def _on_error(self, err) -> None:
        self.errors.append(str(err))

    def _on_delivery(self, err, msg) -> None:
        n = int(msg.value())
        with self._lock:
            if err is None:
                self.acked[n] = msg.offset()
            else:
                self.failed.add(n)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    value=str(self.next).encode(),
                    partition=0,
                    on_delivery=self._on_delivery,
                )
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.next += 1
            self.producer.poll(0)
            time.sleep(0.0005)

    def start(self) -> NumberedProducer:
        self._thread.start()
        return self

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        assert not self._thread.is_alive()

    def settle(self, timeout: float) -> None:
        """Let everything in flight be acknowledged or fail (flush), bounded."""
        remaining = self.producer.flush(timeout)
        if remaining:
            self.producer.purge()
            self.producer.flush(5)

    def abandon(self) -> None:
        self.producer.purge()
        self.producer.flush(5)

    def close(self) -> None:
        """Stop the thread if running and destroy the librdkafka handle (no lingering
        background threads reconnecting to a dead port)."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            self.stop()
        self.producer.purge()
        self.producer.flush(2)
        self.producer.close()


def _read_numbers(broker) -> list[int]:
    with connect(broker) as conn:
        records = conn.fetch_all(TOPIC, 0)
    assert [r.offset for r in records] == list(range(len(records))), "offsets are not 0..n-1"
    return [int(r.value) for r in records]


def _check_stream(numbers: list[int], acked: dict[int, int]) -> None:
    assert len(numbers) == len(set(numbers)), "duplicate records"
    assert numbers == sorted(numbers), "records out of order"
    position = {n: i for i, n in enumerate(numbers)}
    missing = sorted(set(acked) - set(position))
    assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:10]}"
    wrong = [(n, off, position[n]) for n, off in acked.items() if position[n] != off]
    assert not wrong, f"acknowledged at one offset, stored at another: {wrong[:10]}"


def test_kill_9_mid_stream_three_times(broker_factory):
    broker = broker_factory(flush="sync")
    with connect(broker) as conn:
        conn.create_topic(TOPIC)
    acked: dict[int, int] = {}
    first = 0
    producers: list[NumberedProducer] = []
    try:
        for round_no in range(3):
            producer = NumberedProducer(broker.bootstrap_servers, TOPIC, first).start()
            producers.append(producer)
            target = 300
            deadline = time.monotonic() + 20
            while producer.acked_count() < target and time.monotonic() < deadline:
                time.sleep(0.01)
            assert producer.acked_count() >= target, (
                f"round {round_no}: producer stuck, {producer.errors}"
            )

            old_port = broker.port
            broker.kill()  # while the producer thread keeps sending
            time.sleep(0.3)
            try:
                broker.restart(same_port=True)
            except Exception:  # the port was taken meanwhile: a new one will do
                broker.restart()

            if broker.port == old_port:
                # The same producer reconnects, retries what was in flight (the broker must
                # recognise batches it stored before the crash: no duplicates) and goes on.
                time.sleep(0.5)
                producer.stop()
                producer.settle(30)
            else:
                producer.stop()
                producer.abandon()
            producer.close()
            acked.update(producer.acked)
            first = producer.next

            numbers = _read_numbers(broker)
            _check_stream(numbers, acked)
            assert len(numbers) >= len(acked)

        # New produces continue at the high watermark.
        with connect(broker) as conn:
            hw = conn.high_watermark(TOPIC)
        assert hw == len(_read_numbers(broker))
        tail = NumberedProducer(broker.bootstrap_servers, TOPIC, first)
        producers.append(tail)
        for _ in range(20):
            tail.producer.produce(
                TOPIC, value=str(tail.next).encode(), partition=0, on_delivery=tail._on_delivery
            )
            tail.next += 1
        assert tail.producer.flush(20) == 0
        assert not tail.failed
        assert sorted(tail.acked.values()) == list(range(hw, hw + 20))
        acked.update(tail.acked)
        _check_stream(_read_numbers(broker), acked)
    finally:
        for producer in producers:
            producer.close()


# --- (b) torn tails


def _produce_reference(conn: KafkaRaw, partitions: int = 2) -> dict[int, list[bytes]]:
    """A few batches per partition, mixed codecs; returns the values per partition."""
    conn.create_topic(TOPIC, partitions=partitions)
    expected: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    codecs = [0, GZIP, ZSTD]
    for i in range(6):
        p = i % partitions
        vals = [b"p%d-b%d-r%d" % (p, i, j) for j in range(3 + i)]
        assert conn.produce_ok(TOPIC, p, make_batch(vals, compression=codecs[i % 3])) == len(
            expected[p]
        )
        expected[p].extend(vals)
    return expected


def _check_reference(conn: KafkaRaw, expected: dict[int, list[bytes]]) -> None:
    for p, vals in expected.items():
        records = conn.fetch_all(TOPIC, p)
        assert [r.value for r in records] == vals, f"partition {p} differs"
        assert [r.offset for r in records] == list(range(len(vals)))
        assert conn.high_watermark(TOPIC, p) == len(vals)


def _first_entry(segment: Path) -> bytes:
    data = segment.read_bytes()
    (size,) = struct.unpack_from(">i", data, 0)
    assert 0 < size <= len(data)
    return data[:size]


def _torn_tail(kind: str, segment: Path) -> bytes:
    if kind == "garbage":
        return os.urandom(777)
    if kind == "half_entry":
        entry = _first_entry(segment)
        return entry[: len(entry) // 2]
    if kind == "header_only":
        return _first_entry(segment)[:32]
    if kind == "bad_crc_entry":
        entry = bytearray(_first_entry(segment))
        entry[-3] ^= 0xFF  # inside the records: the batch CRC32C no longer matches
        return bytes(entry)
    if kind == "zeros":  # a preallocated / zero-filled tail
        return b"\x00" * 4096
    raise AssertionError(kind)


@pytest.mark.parametrize("stop", ["kill", "clean"])
@pytest.mark.parametrize("kind", ["garbage", "half_entry", "header_only", "bad_crc_entry", "zeros"])
def test_torn_tail_is_truncated(broker, kind, stop):
    with connect(broker) as conn:
        expected = _produce_reference(conn)
    if stop == "kill":
        broker.kill()
    else:
        broker.stop()
    segment = last_segment(broker.data_dir)
    good_size = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(_torn_tail(kind, segment))
    assert segment.stat().st_size > good_size

    broker.restart()
    assert segment.stat().st_size == good_size, "the torn tail was not truncated"
    with connect(broker) as conn:
        _check_reference(conn, expected)
        for p in expected:
            value = b"after-%d" % p
            assert conn.produce_ok(TOPIC, p, make_batch([value])) == len(expected[p])
            expected[p].append(value)
        _check_reference(conn, expected)

    # And once more, so the truncation and what follows it are durable.
    broker.kill()
    broker.restart()
    with connect(broker) as conn:
        _check_reference(conn, expected)


def _entries(segment: Path) -> list[tuple[int, int, int, int]]:
    """(start, size, partition, records) of every commitlog entry in ``segment``.

    Entry layout (storage/commitlog.py): int32 entry size, int32 magic, uint32 header CRC,
    16-byte topic id, int32 partition, then the v2 batch (records count at batch byte 57).
    """
    data = segment.read_bytes()
    out = []
    pos = 0
    while pos + 32 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        if size <= 0 or pos + size > len(data):
            break
        (partition,) = struct.unpack_from(">i", data, pos + 28)
        (records,) = struct.unpack_from(">i", data, pos + 32 + 57)
        out.append((pos, size, partition, records))
        pos += size
    return out


def _produce_many(conn: KafkaRaw, batches: int) -> dict[int, list[bytes]]:
    conn.create_topic(TOPIC, partitions=2)
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    for i in range(batches):
        p = i % 2
        vals = [b"b%d-r%d-" % (i, j) + b"x" * 40 for j in range(3)]
        assert conn.produce_ok(TOPIC, p, make_batch(vals, compression=[0, GZIP][i % 2])) == len(
            expected[p]
        )
        expected[p].extend(vals)
    return expected


@pytest.mark.parametrize(
    "where", ["garbage_in_last", "half_entry_in_new_segment", "empty_new_segment"]
)
def test_torn_tail_in_a_multi_segment_log(broker_factory, tmp_path, where):
    """internal.segment.bytes=2048 (Kafka's test-only segment size): the log spans several segment files; the tear is in the last
    one, or is a segment the broker had just rolled to when it died."""
    config = tmp_path / "server.properties"
    config.write_text("internal.segment.bytes=2048\n")
    broker = broker_factory(config_file=config)
    with connect(broker) as conn:
        expected = _produce_many(conn, 40)
    files = segments(broker.data_dir)
    assert len(files) >= 3, "the test needs several segments"
    sizes = {f.name: f.stat().st_size for f in files}
    broker.kill()

    last = files[-1]
    end = int(last.name[: -len(".log")]) + last.stat().st_size
    rolled = last.parent / f"{end:020d}.log"
    if where == "garbage_in_last":
        with open(last, "ab") as f:
            f.write(os.urandom(500))
    elif where == "half_entry_in_new_segment":
        entry = _first_entry(files[0])
        rolled.write_bytes(entry[: len(entry) // 2])
    else:
        rolled.write_bytes(b"")

    broker.restart()
    after = {f.name: f.stat().st_size for f in segments(broker.data_dir)}
    assert {name: size for name, size in after.items() if size} == sizes
    with connect(broker) as conn:
        _check_reference(conn, expected)
        for i in range(10):  # enough to roll into new segments again
            p = i % 2
            value = b"after-%d" % i + b"y" * 200
            assert conn.produce_ok(TOPIC, p, make_batch([value])) == len(expected[p])
            expected[p].append(value)
        _check_reference(conn, expected)
    broker.kill()
    broker.restart()
    with connect(broker) as conn:
        _check_reference(conn, expected)


@pytest.mark.parametrize("stop", ["kill", "clean"])
def test_last_entry_cut_short_below_the_checkpoint(broker, stop):
    """The last entry loses its final bytes after a checkpoint already covered it (a disk
    that lost an acknowledged write, a data directory copied while the broker ran). The
    commitlog is the only source of truth: that batch is gone, its partition ends before
    it, the torn bytes are truncated, and new records continue at the new end - readable,
    without a hole of offsets that point at nothing."""
    with connect(broker) as conn:
        expected = _produce_reference(conn)
    # a slept 2.5 s was not always a checkpoint on a loaded machine
    wait_until(lambda: checkpoint_covers_the_commitlog(broker.data_dir), timeout=30,
               message="a checkpoint covering the whole commitlog")
    if stop == "kill":
        broker.kill()
    else:
        broker.stop()
    segment = last_segment(broker.data_dir)
    start, size, partition, records = _entries(segment)[-1]
    assert start + size == segment.stat().st_size
    os.truncate(segment, start + size - 10)
    expected[partition] = expected[partition][:-records]

    broker.restart()
    assert segment.stat().st_size == start, "the cut entry was not truncated"
    with connect(broker) as conn:
        _check_reference(conn, expected)
        for p in expected:
            value = b"after-%d" % p
            assert conn.produce_ok(TOPIC, p, make_batch([value])) == len(expected[p])
            expected[p].append(value)
        _check_reference(conn, expected)


# --- (c) rebuild from the commitlog


def _snapshot_answers(
    conn: KafkaRaw, expected: dict[int, list[bytes]], timestamps: list[int]
) -> dict:
    answers = {}
    for p in expected:
        for ts in [*timestamps, MAX_TIMESTAMP, LATEST]:
            entry = conn.list_offsets(TOPIC, p, ts)
            assert entry.error_code == ErrorCode.none
            answers[(p, ts)] = (entry.offset, entry.timestamp)
    return answers


def _produce_timestamped(
    conn: KafkaRaw,
) -> tuple[dict[int, list[bytes]], list[int], tuple[int, int]]:
    """Two partitions with non-monotonic CreateTime timestamps, plus an idempotent producer."""
    conn.create_topic(TOPIC, partitions=2)
    base = 1_700_000_000_000
    expected: dict[int, list[bytes]] = {0: [], 1: []}
    layouts = [[5, 1, 3], [2, 9, 4], [7, 6], [8, 10, 0]]
    for i, offsets in enumerate(layouts):
        p = i % 2
        vals = [b"ts-%d-%d" % (i, j) for j in range(len(offsets))]
        conn.produce_ok(
            TOPIC,
            p,
            make_batch(
                vals, timestamps=[base + 1000 * o for o in offsets], compression=[0, GZIP][i % 2]
            ),
        )
        expected[p].extend(vals)
    pid = conn.init_producer_id().producer_id
    idem = make_batch(
        [b"idem-0", b"idem-1"],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        timestamps=[base, base],
    )
    conn.produce_ok(TOPIC, 0, idem)
    expected[0].extend([b"idem-0", b"idem-1"])
    timestamps = [base + 1000 * t - 500 for t in range(0, 12)]
    return expected, timestamps, (pid, len(expected[0]) - 2)


@pytest.mark.parametrize(
    "stop, remove",
    [
        ("kill", ("checkpoint.json", "consumequeue")),
        ("clean", ("checkpoint.json", "consumequeue")),
        ("kill", ("checkpoint.json",)),
        ("kill", ("consumequeue",)),
        ("clean", ("consumequeue",)),
    ],
)
def test_rebuild_from_the_commitlog_alone(broker, stop, remove):
    with connect(broker) as conn:
        expected, timestamps, (pid, idem_offset) = _produce_timestamped(conn)
        before = _snapshot_answers(conn, expected, timestamps)
        time.sleep(1.5)  # let a checkpoint cover what was produced
    if stop == "kill":
        broker.kill()
    else:
        broker.stop()
    data_dir = Path(broker.data_dir)
    for name in remove:
        path = data_dir / name
        assert path.exists(), f"{path} missing before the test removed it"
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()

    broker.restart()
    with connect(broker) as conn:
        _check_reference(conn, expected)
        assert _snapshot_answers(conn, expected, timestamps) == before
        # The idempotent producer's state is derived from the commitlog as well.
        retry = make_batch(
            [b"idem-0", b"idem-1"], producer_id=pid, producer_epoch=0, base_sequence=0
        )
        again = conn.produce(TOPIC, 0, retry)
        assert (again.error_code, again.base_offset) == (ErrorCode.none, idem_offset)
        nxt = make_batch([b"idem-2"], producer_id=pid, producer_epoch=0, base_sequence=2)
        assert conn.produce_ok(TOPIC, 0, nxt) == len(expected[0])
        expected[0].append(b"idem-2")
        assert conn.produce_ok(TOPIC, 1, make_batch([b"plain"])) == len(expected[1])
        expected[1].append(b"plain")
        _check_reference(conn, expected)

    broker.kill()
    broker.restart()
    with connect(broker) as conn:
        _check_reference(conn, expected)


# --- (d) damaged metadata files


def _consume_all(broker, topic: str, partitions: int, expect: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record, read with confluent-kafka from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"check-{topic}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expect and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("damage", ["truncated", "random bytes", "deleted"])
def test_damaged_topics_and_views_json_cost_no_acked_record(broker_factory, damage):
    """Issue 20: after a kill -9, topics.json damaged (and its .prev too) made the broker
    fall back to .prev: the topic created last and its acknowledged records were gone, and
    re-creating it started at offset 0 over orphaned records. The journals (topics.journal,
    views.journal) are second current copies: every topic is back with its id, partitions,
    configs and records at their offsets, a deleted topic stays deleted, views too."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    wanted = [NewTopic("a", 2, 1), NewTopic("gone", 1, 1), NewTopic("c", 3, 1, config={"retention.ms": "86400000"}),
              NewTopic("a-view", -1, -1, config={"rmq.view.source": "a", "rmq.view.tags": "*"}),
              NewTopic("c-view", -1, -1, config={"rmq.view.source": "c", "rmq.view.tags": "*"})]
    for name in ("a", "gone", "a-view", "c", "c-view"):
        admin.create_topics([t for t in wanted if t.topic == name])[name].result(15)
    admin.delete_topics(["gone"])["gone"].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for i in range(3000):
        producer.produce("c", f"c{i}".encode(), partition=i % 3)
        if i % 10 == 0:
            producer.produce("a", f"a{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    with connect(broker) as conn:
        ids = {t.name: t.topic_id for t in conn.metadata(["a", "c"]).topics}
    broker.kill()

    data = Path(broker.data_dir)
    for name in ("topics.json", "topics.json.prev", "views.json", "views.json.prev"):
        path = data / name
        if not path.exists():  # topics.json is rewritten at most once per flush interval
            assert name.endswith(".prev"), name
            continue
        if damage == "truncated":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        elif damage == "random bytes":
            path.write_bytes(os.urandom(300))
        else:
            path.unlink()
    broker.start()
    assert "rebuilt from" in broker.stderr

    with connect(broker) as conn:
        meta = {t.name: t for t in conn.metadata(["a", "c", "c-view", "gone"], allow_auto_topic_creation=False).topics}
        assert meta["gone"].error_code == ErrorCode.unknown_topic_or_partition
        assert {n: (meta[n].topic_id, len(meta[n].partitions)) for n in ("a", "c")} == {
            "a": (ids["a"], 2), "c": (ids["c"], 3)}
        assert meta["c-view"].error_code == ErrorCode.none and len(meta["c-view"].partitions) == 3
        again = conn.create_topics({"c": 3}).topics[0]
        assert again.error_code == ErrorCode.topic_already_exists
        assert conn.high_watermark("c", 0) == 1000
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # the new port
    described = admin.describe_configs([ConfigResource("topic", "c")])
    configs = next(iter(described.values())).result(15)
    assert configs["retention.ms"].value == "86400000"
    got = _consume_all(broker, "c", 3, 3000)
    assert sorted(got) == sorted((i % 3, i // 3, f"c{i}".encode()) for i in range(3000))
    assert len(_consume_all(broker, "a", 2, 300)) == 300
    assert len(_consume_all(broker, "c-view", 3, 3000)) == 3000


def test_a_broker_with_every_copy_of_topics_damaged_does_not_start(broker_factory):
    """With topics.json, its .prev and the journal all damaged, the broker refuses to start
    with one line naming the file (exit status 2)."""
    broker = broker_factory()
    with connect(broker) as conn:
        conn.create_topic("kept", partitions=1)
        conn.create_topic("newest", partitions=1)
    broker.stop()
    data = Path(broker.data_dir)
    (data / "topics.json").write_text("{")
    (data / "topics.json.prev").write_text("[")
    (data / "topics.journal").write_bytes(b"garbage\n")
    from rmqkafka.adapter.embedded import EmbeddedBrokerError

    with pytest.raises(EmbeddedBrokerError):
        broker.start()
    assert broker.returncode == 2
    assert "rmqk: error: " in broker.stderr and "topics.json is damaged" in broker.stderr
