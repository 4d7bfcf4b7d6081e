"""Issue #2: real Kafka clients against a real broker process.

aiokafka, kafka-python 3.x and confluent-kafka (librdkafka) each produce N records with keys,
values, headers and explicit timestamps under every codec, acks 0/1/all and idempotence on
and off, and consume them back exactly: from the beginning, from an offset in the middle of a
batch, and by timestamp. Around that matrix: several partitions, tiny fetch sizes (KIP-74),
out-of-order CreateTime timestamps, flush=sync, kafka-python pinned to older protocol
versions, offset-out-of-range resets, MESSAGE_TOO_LARGE; long polling (a new record reaches
a waiting consumer at once; an empty fetch waits for ``max_wait``); each client's admin API
with Kafka's error codes; LogAppendTime topics; Metadata auto-create with num.partitions; and
topic ids that survive a restart and a crash.

Every test on the shared broker also fails if the broker logged an ERROR or a traceback
while it ran (see ``_watch_log``). Latencies are printed: run with ``-s`` to see them.

Speed: one broker per module (``shared_broker``), a fresh topic per case, N = 200 records
with producer settings that put ~50 records in a batch. Consumers never join a group (the
broker has no group coordinator here): they ``assign`` and seek.

"""

from __future__ import annotations

import asyncio
import datetime
import io
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Self

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from rmqkafka.adapter.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

N = 200
MID = 137  # a record in the middle of a batch (batches hold ~50 records)
CLIENTS = ("aiokafka", "kafka-python", "confluent")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# (acks, idempotence): idempotence requires acks=all.
DELIVERY = ((0, False), (1, False), ("all", False), ("all", True))
CREATE_TIME, LOG_APPEND_TIME = "CreateTime", "LogAppendTime"
STEP_MS = 10  # timestamps of consecutive records differ by this much
WAIT = 20.0  # seconds: the most any single client operation may take
# Readers re-seek often; a client keeps one fetch in flight per connection and the broker
# answers a connection's requests in order, so a re-seek (or ListOffsets) waits for the
# long poll parked at the end of the partition. A short wait keeps the matrix fast; the
# long-poll tests below set their own.
READER_FETCH_WAIT_MS = 50

# --------------------------------------------------------------------------- records


class Rec(NamedTuple):
    """One record as every client reports it (headers as a tuple of (str, bytes))."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    timestamp_type: str
    partition: int = 0


def make_records(n: int = N, base_ts: int | None = None) -> list[Rec]:
    """Records with null/empty/binary keys and values, 0-3 headers, increasing timestamps.

    kafka-python refuses a record whose key *and* value are null, and header values that are
    null, so neither occurs.
    """
    if base_ts is None:
        base_ts = int(time.time() * 1000) - 3_600_000
    records = []
    for i in range(n):
        key = None if i % 10 == 3 else (b"" if i % 10 == 5 else b"key-%03d" % i)
        if i % 10 == 7:
            value = None
        elif i % 10 == 8:
            value = b""
        else:
            value = (b"value-%d-" % i) + bytes((i * 7 + j) % 256 for j in range(i % 23))
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 3 != 0:
            headers = (("idx", b"%d" % i), ("bin", bytes(range(i % 5))))
        if i % 9 == 4:
            headers += (("idx", b"repeated"), ("empty", b""))
        records.append(Rec(i, key, value, headers, base_ts + i * STEP_MS, CREATE_TIME))
    return records


def new_topic(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# --------------------------------------------------------------------------- raw protocol


def raw_request(bootstrap: str, body: Any, timeout: float = 10.0) -> Any:
    """Send one kio request entity over a fresh socket and return the decoded response."""
    host, port = bootstrap.rsplit(":", 1)
    req_cls = type(body)
    hdr_cls = req_cls.__header_schema__
    header = hdr_cls(
        request_api_key=req_cls.__api_key__,
        request_api_version=req_cls.__version__,
        correlation_id=7,
        client_id="test-clients",
    )
    buffer = io.BytesIO()
    entity_writer(hdr_cls)(buffer, header)
    entity_writer(req_cls)(buffer, body)
    payload = buffer.getvalue()
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)

        def recv_exactly(n: int) -> bytes:
            out = bytearray()
            while len(out) < n:
                chunk = sock.recv(n - len(out))
                if not chunk:
                    raise ConnectionError("broker closed the connection")
                out += chunk
            return bytes(out)

        (size,) = struct.unpack(">i", recv_exactly(4))
        data = recv_exactly(size)
    resp_cls = load_response_schema(req_cls.__api_key__, req_cls.__version__)
    _, used = entity_reader(resp_cls.__header_schema__)(data, 0)
    response, _ = entity_reader(resp_cls)(data, used)
    return response


def raw_fetch(bootstrap: str, topic: str, offset: int, max_wait_ms: int = 0, partitions: int = 1) -> Any:
    """Fetch v4 at ``offset`` of partitions 0..partitions-1; returns partition 0's response
    (all of them, in order, when ``partitions`` > 1)."""
    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic

    request = FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=tuple(
                    FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)
                    for p in range(partitions)
                ),
            ),
        ),
    )
    (response,) = raw_request(bootstrap, request, timeout=max_wait_ms / 1000 + 10).responses
    return response.partitions[0] if partitions == 1 else response.partitions


def batch_containing(bootstrap: str, topic: str, offset: int) -> tuple[int, int]:
    """(base offset, record count) of the stored batch holding ``offset`` (partition 0)."""
    partition = raw_fetch(bootstrap, topic, offset)
    assert partition.error_code == 0, partition
    records = partition.records
    assert records, f"no batch returned for offset {offset}"
    (base,) = struct.unpack_from(">q", records, 0)
    (count,) = struct.unpack_from(">i", records, 57)  # v2 batch header: records count
    return base, count


def metadata_v12(bootstrap: str, names: list[str] | None = None, ids: list[uuid.UUID] | None = None) -> Any:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    topics = [MetadataRequestTopic(topic_id=None, name=name) for name in names or ()]
    topics += [MetadataRequestTopic(topic_id=topic_id, name=None) for topic_id in ids or ()]
    return raw_request(
        bootstrap,
        MetadataRequest(
            topics=tuple(topics), allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
    )


def topic_ids(bootstrap: str, names: list[str]) -> dict[str, uuid.UUID]:
    response = metadata_v12(bootstrap, names)
    out = {}
    for topic in response.topics:
        assert topic.error_code == 0, topic
        out[topic.name] = topic.topic_id
    return out


# --------------------------------------------------------------------------- client drivers
#
# Each driver: produce(bootstrap, topic, records, codec, acks, idempotence) sends every record
# to its ``partition`` and returns the (partition, offset) pairs the producer was told (None
# for acks=0, where it is told nothing); reader(bootstrap, topic, partition=0, **config) is a
# context manager with read(start, count) -> list[Rec] and offset_for_time(ts) -> int | None.


class Driver(NamedTuple):
    produce: Callable[..., list[int] | None]
    reader: Callable[[str, str], Any]


# -- confluent-kafka -------------------------------------------------------------------------


def ck_produce(bootstrap, topic, records, codec="none", acks=1, idempotence=False, linger_ms=20):
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "acks": str(acks),
            "enable.idempotence": idempotence,
            "linger.ms": linger_ms,
            "batch.num.messages": 50,
            "message.timeout.ms": int(WAIT * 1000),
        }
    )
    reports: list[tuple[Any, int] | None] = [None] * len(records)

    def on_delivery(index: int) -> Callable[[Any, Any], None]:
        def report(err: Any, msg: Any) -> None:
            reports[index] = (err, (msg.partition(), msg.offset()))

        return report

    for i, rec in enumerate(records):
        producer.produce(
            topic,
            partition=rec.partition,
            key=rec.key,
            value=rec.value,
            headers=list(rec.headers) or None,
            timestamp=rec.timestamp,
            on_delivery=on_delivery(i),
        )
        producer.poll(0)
    assert producer.flush(WAIT) == 0, "confluent producer did not deliver everything in time"
    errors = [r[0] for r in reports if r is None or r[0] is not None]
    assert not errors, f"delivery errors: {errors[:5]}"
    return None if acks == 0 else [r[1] for r in reports]


class CKReader:
    def __init__(self, bootstrap: str, topic: str, partition: int = 0, **extra: Any) -> None:
        from confluent_kafka import Consumer

        self.topic = topic
        self.partition = partition
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"rmqk-test-{uuid.uuid4().hex[:8]}",  # required; never joined
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "fetch.wait.max.ms": READER_FETCH_WAIT_MS,
                "check.crcs": True,  # batches the broker patched (offsets, LogAppendTime) must verify
                **extra,
            }
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()

    def assign(self, start: int) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.assign([TopicPartition(self.topic, self.partition, start)])

    @staticmethod
    def convert(msg: Any) -> Rec:
        from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

        ts_type, ts = msg.timestamp()
        return Rec(
            msg.offset(),
            msg.key(),
            msg.value(),
            tuple(msg.headers() or ()),
            ts,
            LOG_APPEND_TIME if ts_type == TIMESTAMP_LOG_APPEND_TIME else CREATE_TIME,
            msg.partition(),
        )

    def read(self, start: int, count: int, timeout: float = WAIT) -> list[Rec]:
        self.assign(start)
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for msg in self.consumer.consume(count - len(out), 0.5):
                if msg.error() is not None:
                    raise AssertionError(f"consumer error: {msg.error()}")
                out.append(self.convert(msg))
        return out

    def offset_for_time(self, ts: int) -> int | None:
        from confluent_kafka import TopicPartition

        (tp,) = self.consumer.offsets_for_times([TopicPartition(self.topic, self.partition, ts)], WAIT)
        assert tp.error is None, tp.error
        return tp.offset if tp.offset >= 0 else None


# -- kafka-python ----------------------------------------------------------------------------


def kp_produce(bootstrap, topic, records, codec="none", acks=1, idempotence=False, linger_ms=20):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks=acks,
        enable_idempotence=idempotence,  # kafka-python 3 defaults to True
        linger_ms=linger_ms,
        batch_size=2600,
        request_timeout_ms=int(WAIT * 1000),
    )
    try:
        futures = [
            producer.send(
                topic,
                partition=rec.partition,
                key=rec.key,
                value=rec.value,
                headers=list(rec.headers),
                timestamp_ms=rec.timestamp,
            )
            for rec in records
        ]
        producer.flush(timeout=WAIT)
        offsets = [(md.partition, md.offset) for md in (f.get(timeout=WAIT) for f in futures)]
    finally:
        producer.close(timeout=5)
    return None if acks == 0 else offsets


class KPReader:
    def __init__(self, bootstrap: str, topic: str, partition: int = 0, **extra: Any) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.tp = TopicPartition(topic, partition)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            request_timeout_ms=int(WAIT * 1000) + 10_000,
            **{"fetch_max_wait_ms": READER_FETCH_WAIT_MS, **extra},
        )
        self.consumer.assign([self.tp])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.consumer.close()

    @staticmethod
    def convert(rec: Any) -> Rec:
        return Rec(
            rec.offset,
            rec.key,
            rec.value,
            tuple(rec.headers or ()),
            rec.timestamp,
            LOG_APPEND_TIME if rec.timestamp_type == 1 else CREATE_TIME,
            rec.partition,
        )

    def read(self, start: int, count: int, timeout: float = WAIT) -> list[Rec]:
        self.consumer.seek(self.tp, start)
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            batch = self.consumer.poll(timeout_ms=500, max_records=count - len(out))
            out.extend(self.convert(r) for r in batch.get(self.tp, ()))
        return out

    def offset_for_time(self, ts: int) -> int | None:
        found = self.consumer.offsets_for_times({self.tp: ts})[self.tp]
        return None if found is None else found.offset


# -- aiokafka --------------------------------------------------------------------------------


def aio_produce(bootstrap, topic, records, codec="none", acks=1, idempotence=False, linger_ms=20):
    from aiokafka import AIOKafkaProducer

    async def run() -> list[int]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            acks=acks,
            enable_idempotence=idempotence,
            linger_ms=linger_ms,
            max_batch_size=2600,
            request_timeout_ms=int(WAIT * 1000),
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic,
                    partition=rec.partition,
                    key=rec.key,
                    value=rec.value,
                    headers=list(rec.headers),
                    timestamp_ms=rec.timestamp,
                )
                for rec in records
            ]
            # aiokafka resolves acks=0 sends with None.
            return [(rec.partition, getattr(await f, "offset", -1)) for rec, f in zip(records, futures)]
        finally:
            await producer.stop()

    offsets = asyncio.run(asyncio.wait_for(run(), WAIT))
    return None if acks == 0 else offsets


class AIOReader:
    """An AIOKafkaConsumer driven synchronously on a private event loop."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, **extra: Any) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self.loop = asyncio.new_event_loop()
        self.tp = TopicPartition(topic, partition)

        async def start() -> Any:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=None,
                enable_auto_commit=False,
                **{"fetch_max_wait_ms": READER_FETCH_WAIT_MS, **extra},
            )
            await consumer.start()
            consumer.assign([self.tp])
            return consumer

        self.consumer = self.run(start())

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, WAIT + 5))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.run(self.consumer.stop())
        finally:
            self.loop.close()

    @staticmethod
    def convert(rec: Any) -> Rec:
        return Rec(
            rec.offset,
            rec.key,
            rec.value,
            tuple(rec.headers or ()),
            rec.timestamp,
            LOG_APPEND_TIME if rec.timestamp_type == 1 else CREATE_TIME,
            rec.partition,
        )

    def read(self, start: int, count: int, timeout: float = WAIT) -> list[Rec]:
        async def go() -> list[Rec]:
            self.consumer.seek(self.tp, start)
            out: list[Rec] = []
            deadline = time.monotonic() + timeout
            while len(out) < count and time.monotonic() < deadline:
                batch = await self.consumer.getmany(self.tp, timeout_ms=500, max_records=count - len(out))
                out.extend(self.convert(r) for r in batch.get(self.tp, ()))
            return out

        return self.run(go())

    def offset_for_time(self, ts: int) -> int | None:
        found = self.run(self.consumer.offsets_for_times({self.tp: ts}))[self.tp]
        return None if found is None else found.offset


DRIVERS: dict[str, Driver] = {
    "aiokafka": Driver(aio_produce, AIOReader),
    "kafka-python": Driver(kp_produce, KPReader),
    "confluent": Driver(ck_produce, CKReader),
}


def ck_admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    from confluent_kafka.admin import NewTopic

    admin = ck_admin(bootstrap)  # must outlive the future: a destroyed handle fails it
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, config=config or {})], operation_timeout=WAIT
    )
    futures[name].result(WAIT)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def shared_broker() -> Iterator[EmbeddedBroker]:
    """One broker for the whole module; every test uses its own topics."""
    with EmbeddedBroker(data_dir=None, flush="async") as broker:
        yield broker


@pytest.fixture
def bootstrap(shared_broker: EmbeddedBroker) -> Iterator[str]:
    """The shared broker's address; afterwards, its new log lines are shown and any ERROR or
    traceback it logged during the test fails the test (handler bugs are answered to clients
    as UNKNOWN_SERVER_ERROR or a closed connection, which some clients just retry)."""
    yield from _watch_log(shared_broker)


def _watch_log(broker: EmbeddedBroker) -> Iterator[str]:
    seen = len(broker.stderr)
    yield broker.bootstrap_servers
    time.sleep(0.05)  # let the drain thread catch up
    new = broker.stderr[seen:]
    if new.strip():
        sys.stderr.write(f"--- broker log during this test ---\n{new}\n")
    bad = [
        line for line in new.splitlines() if " ERROR " in line or " CRITICAL " in line or "Traceback" in line
    ]
    assert not bad, f"the broker logged errors: {bad}"


# --------------------------------------------------------------------------- the matrix


def _matrix() -> list[Any]:
    params = []
    for client in CLIENTS:
        for codec in CODECS:
            for acks, idempotence in DELIVERY:
                case_id = f"{client}-{codec}-acks{acks}-{'idem' if idempotence else 'noidem'}"
                params.append(pytest.param(client, codec, acks, idempotence, id=case_id))
    return params


@pytest.mark.parametrize(("client", "codec", "acks", "idempotence"), _matrix())
def test_produce_consume_roundtrip(
    bootstrap: str, client: str, codec: str, acks: Any, idempotence: bool
) -> None:
    """Produce N records; consume them back exactly from 0, from mid-batch and by timestamp."""
    driver = DRIVERS[client]
    topic = new_topic(f"rt-{client}-{codec}")
    create_topic(bootstrap, topic)
    expected = make_records()

    offsets = driver.produce(bootstrap, topic, expected, codec=codec, acks=acks, idempotence=idempotence)
    if offsets is not None:
        assert offsets == [(0, i) for i in range(N)], "producer-reported (partition, offset)"

    # The broker stored several multi-record batches; pick an offset strictly inside one.
    base, count = batch_containing(bootstrap, topic, MID)
    assert count > 1, f"batch at {MID} holds one record: the producer did not batch"
    assert base <= MID < base + count
    mid = MID if base < MID else MID + 1

    with driver.reader(bootstrap, topic) as reader:
        # From the beginning: everything, exactly, in order (acks=0 included).
        got = reader.read(0, N)
        assert [r.offset for r in got] == list(range(N))
        assert got == expected

        # From the middle of a batch: the client drops the batch's leading records.
        got = reader.read(mid, N - mid)
        assert got and got[0].offset == mid, f"first record from {mid} (batch {base}+{count})"
        assert got == expected[mid:]

        # By timestamp: the first record whose timestamp >= T.
        first_ts = expected[0].timestamp
        assert reader.offset_for_time(expected[mid].timestamp) == mid
        assert reader.offset_for_time(expected[mid].timestamp - STEP_MS // 2) == mid
        assert reader.offset_for_time(expected[mid].timestamp + 1) == mid + 1
        assert reader.offset_for_time(0) == 0
        assert reader.offset_for_time(first_ts) == 0
        assert reader.offset_for_time(expected[-1].timestamp) == N - 1
        assert reader.offset_for_time(expected[-1].timestamp + 1) is None
        found = reader.offset_for_time(expected[42].timestamp - 3)
        assert reader.read(found, 5) == expected[42:47]


@pytest.mark.parametrize("client", CLIENTS)
def test_multi_partition_roundtrip(bootstrap: str, client: str) -> None:
    """Records sent to explicit partitions of a 3-partition topic: each partition numbers its
    own offsets from 0 and returns exactly its records."""
    driver = DRIVERS[client]
    topic = new_topic(f"mp-{client}")
    create_topic(bootstrap, topic, partitions=3)
    sent = [r._replace(partition=r.offset % 3) for r in make_records(90)]
    expected = {
        p: [r._replace(offset=i) for i, r in enumerate(x for x in sent if x.partition == p)] for p in range(3)
    }

    offsets = driver.produce(bootstrap, topic, sent, codec="lz4", acks="all", idempotence=True)
    assert offsets == [(r.partition, r.offset // 3) for r in sent]
    for p in range(3):
        with driver.reader(bootstrap, topic, partition=p) as reader:
            assert reader.read(0, 30) == expected[p]
            assert reader.offset_for_time(expected[p][10].timestamp) == 10


@pytest.mark.parametrize("client", CLIENTS)
def test_tiny_fetch_sizes_still_progress(bootstrap: str, client: str) -> None:
    """With max partition fetch bytes far below a batch, the first batch is still returned
    whole (KIP-74), so every client makes progress."""
    topic = new_topic(f"tiny-{client}")
    create_topic(bootstrap, topic)
    expected = make_records()
    DRIVERS[client].produce(bootstrap, topic, expected, codec="gzip", acks=1)
    tiny = {
        "confluent": {
            "max.partition.fetch.bytes": 100,
            "fetch.max.bytes": 1000,
            "message.max.bytes": 1000,
            "receive.message.max.bytes": 2000,
        },
        "kafka-python": {"max_partition_fetch_bytes": 100, "fetch_max_bytes": 100},
        "aiokafka": {"max_partition_fetch_bytes": 100, "fetch_max_bytes": 100},
    }[client]
    with DRIVERS[client].reader(bootstrap, topic, **tiny) as reader:
        assert reader.read(0, N) == expected
        assert reader.read(MID, N - MID) == expected[MID:]


@pytest.mark.parametrize("client", CLIENTS)
def test_offsets_for_times_out_of_order_timestamps(bootstrap: str, client: str) -> None:
    """CreateTime timestamps need not increase; ListOffsets still answers with the first
    offset (not the smallest timestamp) whose timestamp is >= T, inside compressed batches."""
    import random

    topic = new_topic(f"ooo-{client}")
    create_topic(bootstrap, topic)
    rnd = random.Random(20260101)
    base = int(time.time() * 1000) - 600_000
    stamps = [base + rnd.randrange(0, 5000) for _ in range(N)]
    sent = [Rec(i, b"k%d" % i, b"v%d" % i, (), ts, CREATE_TIME) for i, ts in enumerate(stamps)]
    DRIVERS[client].produce(bootstrap, topic, sent, codec="zstd", acks=1)
    queries = sorted(
        {
            base - 1,
            base,
            max(stamps),
            max(stamps) + 1,
            *stamps[:20],
            *(base + rnd.randrange(5000) for _ in range(30)),
        }
    )
    with DRIVERS[client].reader(bootstrap, topic) as reader:
        assert reader.read(0, N) == sent
        answers = {q: reader.offset_for_time(q) for q in queries}
    expected = {q: next((i for i, ts in enumerate(stamps) if ts >= q), None) for q in queries}
    assert answers == expected


@pytest.fixture(scope="module")
def sync_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, flush="sync") as broker:
        yield broker


@pytest.fixture
def sync_bootstrap(sync_broker: EmbeddedBroker) -> Iterator[str]:
    yield from _watch_log(sync_broker)


@pytest.mark.parametrize("client", CLIENTS)
def test_roundtrip_sync_flush(sync_bootstrap: str, client: str) -> None:
    """flush=sync: acks=all answers wait for fsync (group commit); the data is the same."""
    bootstrap = sync_bootstrap
    topic = new_topic(f"sync-{client}")
    create_topic(bootstrap, topic)
    expected = make_records()
    started = time.monotonic()
    offsets = DRIVERS[client].produce(
        bootstrap, topic, expected, codec="snappy", acks="all", idempotence=True
    )
    print(f"\n[flush=sync {client}] {N} records acked in {1000 * (time.monotonic() - started):.0f} ms")
    assert offsets == [(0, i) for i in range(N)]
    with DRIVERS[client].reader(bootstrap, topic) as reader:
        assert reader.read(0, N) == expected


@pytest.mark.parametrize(
    "api_version",
    [(0, 11), (1, 0), (2, 0), (2, 1), (2, 4), (3, 0)],
    ids=lambda v: "v" + ".".join(map(str, v)),
)
def test_kafka_python_older_protocol_versions(bootstrap: str, api_version: tuple[int, int]) -> None:
    """kafka-python pinned to older broker versions uses older Produce/Fetch/ListOffsets
    versions (Produce v3.., Fetch v4..): each version's encoding round-trips exactly."""
    topic = new_topic("kpv")
    create_topic(bootstrap, topic)
    expected = make_records(100)
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=api_version,
        acks=1,
        enable_idempotence=False,
        compression_type="gzip",
        linger_ms=20,
        batch_size=2000,
    )
    try:
        futures = [
            producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), timestamp_ms=r.timestamp)
            for r in expected
        ]
        assert [f.get(timeout=WAIT).offset for f in futures] == list(range(100))
    finally:
        producer.close(timeout=5)
    with KPReader(bootstrap, topic, api_version=api_version) as reader:
        assert reader.read(0, 100) == expected
        assert reader.read(37, 63) == expected[37:]
        assert reader.offset_for_time(expected[50].timestamp) == 50


@pytest.mark.parametrize("client", CLIENTS)
def test_out_of_range_offset_resets(bootstrap: str, client: str) -> None:
    """A position past the end gets OFFSET_OUT_OF_RANGE; auto.offset.reset=earliest then
    restarts every client at offset 0."""
    topic = new_topic(f"oor-{client}")
    create_topic(bootstrap, topic)
    expected = make_records(20)
    DRIVERS[client].produce(bootstrap, topic, expected, acks=1)
    reset = {"confluent": {"auto.offset.reset": "earliest"}}.get(client, {"auto_offset_reset": "earliest"})
    with DRIVERS[client].reader(bootstrap, topic, **reset) as reader:
        assert reader.read(500, 20) == expected
    partition = raw_fetch(bootstrap, topic, 500)
    assert (partition.error_code, partition.high_watermark) == (1, 20)  # OFFSET_OUT_OF_RANGE


def test_produce_acks_report_log_append_time(bootstrap: str) -> None:
    """On a LogAppendTime topic the Produce response carries the broker's time, and clients
    report it as the record's timestamp."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Producer
    from kafka import KafkaProducer

    topic = new_topic("lat-ack")
    create_topic(bootstrap, topic, config={"message.timestamp.type": LOG_APPEND_TIME})
    before = int(time.time() * 1000)
    kp = KafkaProducer(bootstrap_servers=bootstrap, acks=1, enable_idempotence=False)
    try:
        kp_meta = kp.send(topic, b"v", timestamp_ms=1000).get(timeout=WAIT)
    finally:
        kp.close(timeout=5)
    reports: list[Any] = []
    ck = Producer({"bootstrap.servers": bootstrap})
    ck.produce(
        topic, b"v", timestamp=1000, on_delivery=lambda err, msg: reports.append((err, msg.timestamp()))
    )
    assert ck.flush(WAIT) == 0
    after = int(time.time() * 1000)
    assert before - 2000 <= kp_meta.timestamp <= after + 2000
    ((err, (ts_type, ts)),) = reports
    assert err is None and ts_type == TIMESTAMP_LOG_APPEND_TIME and before - 2000 <= ts <= after + 2000


def test_record_too_large_is_refused(bootstrap: str) -> None:
    """A batch over message.max.bytes gets MESSAGE_TOO_LARGE (10), not a closed connection."""
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    topic = new_topic("big")
    create_topic(bootstrap, topic)
    big = b"x" * 1_500_000  # over the default 1048588
    errors: list[Any] = []
    ck = Producer(
        {"bootstrap.servers": bootstrap, "message.max.bytes": 3_000_000, "compression.type": "none"}
    )
    ck.produce(topic, big, on_delivery=lambda err, msg: errors.append(err))
    assert ck.flush(WAIT) == 0
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]

    kp = KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, enable_idempotence=False, max_request_size=3_000_000
    )
    try:
        with pytest.raises(MessageSizeTooLargeError):
            kp.send(topic, big).get(timeout=WAIT)
        # The connection survived: the next record goes through.
        assert kp.send(topic, b"small").get(timeout=WAIT).offset == 0
    finally:
        kp.close(timeout=5)


# --------------------------------------------------------------------------- long polling

LONG_WAIT_MS = 3000  # long enough that a broker which only sleeps out max_wait fails the 1 s bound
PROMPT_S = 1.0


def _report_latency(client: str, acked: float, arrived: float, sent: float) -> None:
    print(
        f"\n[long-poll {client}] produce (incl. producer start)->ack {1000 * (acked - sent):.1f} ms, "
        f"ack->consumer {1000 * (arrived - acked):.1f} ms, send->consumer {1000 * (arrived - sent):.1f} ms"
    )


def _threaded_long_poll(client: str, bootstrap: str, topic: str, poll_once: Callable[[], list[Rec]]) -> None:
    """Run ``poll_once`` in a thread until a record comes; produce one record meanwhile."""
    arrived: dict[str, Any] = {}
    stop = threading.Event()

    def consume() -> None:
        deadline = time.monotonic() + WAIT
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                got = poll_once()
                if got:
                    arrived["at"] = time.monotonic()
                    arrived["records"] = got
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which fails
            arrived["error"] = exc

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    time.sleep(0.8)  # the consumer is now parked in a long-poll fetch on the empty partition
    assert "records" not in arrived and "error" not in arrived, arrived
    sent = time.monotonic()
    DRIVERS[client].produce(
        bootstrap, topic, [Rec(0, b"k", b"wake up", (), int(time.time() * 1000), CREATE_TIME)], linger_ms=0
    )
    acked = time.monotonic()
    thread.join(WAIT)
    stop.set()
    assert "error" not in arrived, arrived.get("error")
    assert "records" in arrived, "the consumer never received the record"
    assert [(r.offset, r.value) for r in arrived["records"]] == [(0, b"wake up")]
    _report_latency(client, acked, arrived["at"], sent)
    assert arrived["at"] - acked < PROMPT_S, (
        f"record reached the consumer {arrived['at'] - acked:.3f} s after the ack"
    )


def test_long_poll_confluent(bootstrap: str) -> None:
    topic = new_topic("lp-ck")
    create_topic(bootstrap, topic)
    with CKReader(bootstrap, topic, **{"fetch.wait.max.ms": LONG_WAIT_MS}) as reader:
        reader.assign(0)

        def poll_once() -> list[Rec]:
            msg = reader.consumer.poll(0.2)
            if msg is None:
                return []
            assert msg.error() is None, msg.error()
            return [reader.convert(msg)]

        _threaded_long_poll("confluent", bootstrap, topic, poll_once)


def test_long_poll_kafka_python(bootstrap: str) -> None:
    topic = new_topic("lp-kp")
    create_topic(bootstrap, topic)
    with KPReader(bootstrap, topic, fetch_max_wait_ms=LONG_WAIT_MS) as reader:
        reader.consumer.seek(reader.tp, 0)

        def poll_once() -> list[Rec]:
            batch = reader.consumer.poll(timeout_ms=200)
            return [reader.convert(r) for r in batch.get(reader.tp, ())]

        _threaded_long_poll("kafka-python", bootstrap, topic, poll_once)


def test_long_poll_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = new_topic("lp-aio")
    create_topic(bootstrap, topic)

    async def run() -> tuple[float, float, float, Any]:
        tp = TopicPartition(topic, 0)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=LONG_WAIT_MS,
        )
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
        await consumer.start()
        await producer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            waiter = asyncio.ensure_future(consumer.getone(tp))
            await asyncio.sleep(0.8)
            assert not waiter.done(), "a record arrived on an empty partition"
            sent = time.monotonic()
            await producer.send_and_wait(topic, b"wake up", key=b"k")
            acked = time.monotonic()
            record = await asyncio.wait_for(waiter, WAIT)
            return sent, acked, time.monotonic(), record
        finally:
            await producer.stop()
            await consumer.stop()

    sent, acked, arrived, record = asyncio.run(asyncio.wait_for(run(), WAIT + 10))
    assert (record.offset, record.value) == (0, b"wake up")
    _report_latency("aiokafka", acked, arrived, sent)
    assert arrived - acked < PROMPT_S


def test_empty_fetch_waits_for_max_wait_raw(bootstrap: str) -> None:
    """A Fetch on an empty partition is answered after max_wait, not at once."""
    topic = new_topic("lp-raw")
    create_topic(bootstrap, topic)
    for max_wait_ms in (0, 300):
        started = time.monotonic()
        partition = raw_fetch(bootstrap, topic, 0, max_wait_ms=max_wait_ms)
        elapsed = time.monotonic() - started
        print(f"\n[empty fetch] max_wait {max_wait_ms} ms answered after {1000 * elapsed:.1f} ms")
        assert partition.error_code == 0 and partition.records in (b"", None)
        assert partition.high_watermark == 0
        assert elapsed >= max_wait_ms / 1000 - 0.05
        assert elapsed < max_wait_ms / 1000 + 0.7


def test_long_poll_woken_by_any_requested_partition(bootstrap: str) -> None:
    """A Fetch parked on partitions 0..2 is answered as soon as partition 2 gets a record."""
    topic = new_topic("lp-multi")
    create_topic(bootstrap, topic, partitions=3)
    result: dict[str, Any] = {}

    def fetch() -> None:
        try:
            result["partitions"] = raw_fetch(bootstrap, topic, 0, max_wait_ms=LONG_WAIT_MS, partitions=3)
            result["at"] = time.monotonic()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which fails
            result["error"] = exc

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    time.sleep(0.5)
    assert not result, "an empty fetch was answered before max_wait"
    ck_produce(
        bootstrap, topic, [Rec(0, b"k", b"wake", (), int(time.time() * 1000), CREATE_TIME, 2)], linger_ms=0
    )
    acked = time.monotonic()
    thread.join(WAIT)
    assert "error" not in result, result.get("error")
    print(f"\n[long-poll raw 3 partitions] ack->response {1000 * (result['at'] - acked):.1f} ms")
    assert result["at"] - acked < PROMPT_S
    assert [bool(p.records) for p in result["partitions"]] == [False, False, True]
    assert [p.high_watermark for p in result["partitions"]] == [0, 0, 1]


def test_empty_fetch_waits_for_max_wait_kafka_python(bootstrap: str) -> None:
    """kafka-python with fetch_max_wait_ms=300 on an empty partition: fetches take ~300 ms.

    Timing one ``poll(timeout_ms=...)`` says nothing (poll blocks for its timeout either way),
    so this reads the consumer's own fetch-latency metric instead: a broker that answered
    empty fetches at once would show a latency near 0 and a high fetch rate.
    """
    topic = new_topic("lp-kp-empty")
    create_topic(bootstrap, topic)
    with KPReader(bootstrap, topic, fetch_max_wait_ms=300) as reader:
        reader.consumer.seek(reader.tp, 0)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            assert reader.consumer.poll(timeout_ms=200) == {}
        metrics = reader.consumer.metrics()["consumer-fetch-manager-metrics"]
    print(
        f"\n[kafka-python empty partition] fetch-latency-avg {metrics['fetch-latency-avg']:.1f} ms, "
        f"fetch-rate {metrics['fetch-rate']:.2f}/s"
    )
    assert metrics["fetch-latency-avg"] >= 250
    assert metrics["fetch-latency-max"] < 1000


# --------------------------------------------------------------------------- admin: confluent


def _ck_error(future: Any) -> Any:
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        future.result(WAIT)
    return info.value.args[0]


def test_admin_confluent(bootstrap: str) -> None:
    from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

    admin = ck_admin(bootstrap)
    name = new_topic("adm-ck")
    spec = NewTopic(name, num_partitions=3, config={"message.timestamp.type": LOG_APPEND_TIME})

    # validate_only: accepted, nothing created. (Existence is checked with a raw Metadata
    # request: librdkafka's list_topics(topic=...) asks the broker to auto-create.)
    assert admin.create_topics([spec], validate_only=True)[name].result(WAIT) is None
    assert not _exists(bootstrap, name)

    assert admin.create_topics([spec], operation_timeout=WAIT)[name].result(WAIT) is None
    listed = admin.list_topics(topic=name, timeout=WAIT).topics[name]
    assert listed.error is None
    assert sorted(listed.partitions) == [0, 1, 2]
    assert all(p.leader == 0 and p.replicas == [0] and p.isrs == [0] for p in listed.partitions.values())

    topic_res = ConfigResource("topic", name)
    configs = admin.describe_configs([topic_res])[topic_res].result(WAIT)
    assert configs["message.timestamp.type"].value == LOG_APPEND_TIME
    assert not configs["message.timestamp.type"].is_default
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default

    broker_res = ConfigResource("broker", "0")
    broker_configs = admin.describe_configs([broker_res])[broker_res].result(WAIT)
    assert broker_configs["num.partitions"].value == "1"
    assert broker_configs["advertised.listeners"].value == f"PLAINTEXT://{bootstrap}"

    assert (
        admin.create_partitions([NewPartitions(name, 5)], operation_timeout=WAIT)[name].result(WAIT) is None
    )
    assert sorted(admin.list_topics(topic=name, timeout=WAIT).topics[name].partitions) == [0, 1, 2, 3, 4]

    assert admin.delete_topics([name], operation_timeout=WAIT)[name].result(WAIT) is None
    assert not _exists(bootstrap, name)


def test_admin_confluent_list_all_topics(bootstrap: str) -> None:
    name = new_topic("adm-ck-all")
    create_topic(bootstrap, name)
    topics = ck_admin(bootstrap).list_topics(timeout=5).topics
    assert name in topics


ERROR_CASES = {
    # case: (what to try, Kafka error name)
    "topic_exists": "TOPIC_ALREADY_EXISTS",
    "invalid_name": "INVALID_TOPIC_EXCEPTION",
    "replication_factor": "INVALID_REPLICATION_FACTOR",
    "unknown_config": "INVALID_CONFIG",
    "fewer_partitions": "INVALID_PARTITIONS",
}
ERROR_CODES = {
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_TOPIC_EXCEPTION": 17,
    "INVALID_REPLICATION_FACTOR": 38,
    "INVALID_CONFIG": 40,
    "INVALID_PARTITIONS": 37,
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_admin_errors_confluent(bootstrap: str, case: str) -> None:
    from confluent_kafka.admin import NewPartitions, NewTopic

    admin = ck_admin(bootstrap)
    existing = new_topic("adm-ck-err")
    create_topic(bootstrap, existing, partitions=3)
    if case == "topic_exists":
        future = admin.create_topics([NewTopic(existing, 1)])[existing]
    elif case == "invalid_name":
        future = admin.create_topics([NewTopic("bad name!", 1)])["bad name!"]
    elif case == "replication_factor":
        name = new_topic("rf3")
        future = admin.create_topics([NewTopic(name, 1, replication_factor=3)])[name]
    elif case == "unknown_config":
        name = new_topic("cfg")
        future = admin.create_topics([NewTopic(name, 1, config={"no.such.config": "1"})])[name]
    else:
        future = admin.create_partitions([NewPartitions(existing, 2)])[existing]
    error = _ck_error(future)
    assert error.code() == ERROR_CODES[ERROR_CASES[case]], (error.code(), error.name(), error.str())
    # Nothing was created or changed by the failed request.
    assert _partition_count(bootstrap, existing) == 3
    if case in ("replication_factor", "unknown_config"):
        assert not _exists(bootstrap, name)


# --------------------------------------------------------------------------- admin: kafka-python


def kp_admin(bootstrap: str) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(WAIT * 1000))


def _exists(bootstrap: str, name: str) -> bool:
    (topic,) = metadata_v12(bootstrap, [name]).topics  # allow_auto_topic_creation=False
    assert topic.error_code in (0, 3), topic  # 3 = UNKNOWN_TOPIC_OR_PARTITION
    return topic.error_code == 0


def _partition_count(bootstrap: str, name: str) -> int:
    (topic,) = metadata_v12(bootstrap, [name]).topics
    assert topic.error_code == 0, topic
    return len(topic.partitions)


def test_admin_kafka_python(bootstrap: str) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic

    admin = kp_admin(bootstrap)
    try:
        name = new_topic("adm-kp")
        spec = NewTopic(name, 3, 1, topic_configs={"message.timestamp.type": LOG_APPEND_TIME})

        admin.create_topics([spec], validate_only=True)
        assert name not in admin.list_topics()

        created = admin.create_topics([spec])
        (result,) = created["topics"]
        assert (result["error_code"], result["num_partitions"], result["replication_factor"]) == (0, 3, 1)
        assert result["configs"]["message.timestamp.type"]["value"] == LOG_APPEND_TIME
        topic_id = uuid.UUID(str(result["topic_id"]))
        assert topic_id.int != 0
        assert topic_ids(bootstrap, [name]) == {name: topic_id}
        assert name in admin.list_topics()
        assert _partition_count(bootstrap, name) == 3

        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all"
        )
        topic_configs = described["topic"][name]
        assert topic_configs["message.timestamp.type"]["value"] == LOG_APPEND_TIME
        assert topic_configs["message.timestamp.type"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic_configs["cleanup.policy"]["value"] == "delete"

        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
        )
        broker_configs = described["broker"]["0"]
        assert broker_configs["num.partitions"]["value"] == "1"
        assert broker_configs["auto.create.topics.enable"]["value"] == "true"

        admin.create_partitions({name: NewPartitions(5)})
        assert _partition_count(bootstrap, name) == 5

        admin.delete_topics([name])
        assert name not in admin.list_topics()

        # The name can be reused; the new topic has a new id.
        created = admin.create_topics([NewTopic(name, 1, 1)])
        new_id = uuid.UUID(str(created["topics"][0]["topic_id"]))
        assert new_id.int != 0 and new_id != topic_id
        assert _partition_count(bootstrap, name) == 1
    finally:
        admin.close()


def test_admin_aiokafka(bootstrap: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import TopicAlreadyExistsError

    name = new_topic("adm-aio")

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(WAIT * 1000))
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(name, 2, 1, topic_configs={"message.timestamp.type": LOG_APPEND_TIME})]
            )
            assert name in await admin.list_topics()
            (described,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
            (resource,) = described.resources
            entries = {entry[0]: entry[1] for entry in resource[4]}  # (name, value, ...)
            assert entries["message.timestamp.type"] == LOG_APPEND_TIME
            (described,) = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])
            entries = {entry[0]: entry[1] for entry in described.resources[0][4]}
            assert entries["num.partitions"] == "1"
            response = await admin.create_topics([NewTopic(name, 1, 1)])
            assert response.topic_errors[0][1] == TopicAlreadyExistsError.errno
            await admin.create_partitions({name: NewPartitions(4)})
            (topic,) = await admin.describe_topics([name])
            assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2, 3]
            await admin.delete_topics([name])
            assert name not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(run(), WAIT * 2))


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_admin_errors_kafka_python(bootstrap: str, case: str) -> None:
    from kafka import errors
    from kafka.admin import NewPartitions, NewTopic

    expected = {
        "topic_exists": errors.TopicAlreadyExistsError,
        "invalid_name": errors.InvalidTopicError,
        "replication_factor": errors.InvalidReplicationFactorError,
        "unknown_config": errors.InvalidConfigurationError,
        "fewer_partitions": errors.InvalidPartitionsError,
    }[case]
    assert expected.errno == ERROR_CODES[ERROR_CASES[case]]
    existing = new_topic("adm-kp-err")
    create_topic(bootstrap, existing, partitions=3)
    admin = kp_admin(bootstrap)
    try:
        with pytest.raises(expected):
            if case == "topic_exists":
                admin.create_topics([NewTopic(existing, 1, 1)])
            elif case == "invalid_name":
                admin.create_topics([NewTopic("bad name!", 1, 1)])
            elif case == "replication_factor":
                admin.create_topics([NewTopic(new_topic("rf3"), 1, 3)])
            elif case == "unknown_config":
                admin.create_topics([NewTopic(new_topic("cfg"), 1, 1, topic_configs={"no.such.config": "1"})])
            else:
                admin.create_partitions({existing: NewPartitions(2)})
    finally:
        admin.close()
    assert _partition_count(bootstrap, existing) == 3


# --------------------------------------------------------------------------- LogAppendTime


@pytest.mark.parametrize("client", CLIENTS)
def test_log_append_time_topic(bootstrap: str, client: str) -> None:
    """Records come back stamped with the broker's clock, whatever the producer said."""
    topic = new_topic(f"lat-{client}")
    create_topic(bootstrap, topic, config={"message.timestamp.type": LOG_APPEND_TIME})
    old = int(time.time() * 1000) - 86_400_000
    sent = make_records(20, base_ts=old)
    before = int(time.time() * 1000)
    DRIVERS[client].produce(bootstrap, topic, sent, acks="all")
    after = int(time.time() * 1000)

    with DRIVERS[client].reader(bootstrap, topic) as reader:
        got = reader.read(0, len(sent))
        assert [r.offset for r in got] == list(range(len(sent)))
        assert {r.timestamp_type for r in got} == {LOG_APPEND_TIME}
        for r in got:
            assert before - 2000 <= r.timestamp <= after + 2000, (r.timestamp, before, after)
        # Everything but the timestamp is what was sent.
        assert [r[:4] for r in got] == [r[:4] for r in sent]
        # The time index follows the broker's timestamps, not the producer's.
        assert reader.offset_for_time(old) == 0
        assert reader.offset_for_time(after + 60_000) is None


# --------------------------------------------------------------------------- auto-create, ids


@pytest.mark.parametrize("client", CLIENTS)
def test_metadata_auto_create(bootstrap: str, client: str) -> None:
    """Producing to an unknown topic creates it with num.partitions partitions and an id."""
    from confluent_kafka.admin import ConfigResource

    admin = ck_admin(bootstrap)
    topic = new_topic(f"auto-{client}")
    (missing,) = metadata_v12(bootstrap, [topic]).topics
    assert missing.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION; allow_auto_topic_creation=False

    records = make_records(3)
    offsets = DRIVERS[client].produce(bootstrap, topic, records, acks=1)
    assert offsets == [(0, 0), (0, 1), (0, 2)]

    broker_res = ConfigResource("broker", "0")
    num_partitions = int(
        admin.describe_configs([broker_res])[broker_res].result(WAIT)["num.partitions"].value
    )
    assert _partition_count(bootstrap, topic) == num_partitions

    ids = topic_ids(bootstrap, [topic])
    assert ids[topic].int != 0
    (by_id,) = metadata_v12(bootstrap, ids=[ids[topic]]).topics
    assert (by_id.error_code, by_id.name, by_id.topic_id) == (0, topic, ids[topic])

    with DRIVERS[client].reader(bootstrap, topic) as reader:
        assert reader.read(0, 3) == records


def test_metadata_auto_create_uses_num_partitions(
    broker_factory: Callable[..., EmbeddedBroker], tmp_path: Any
) -> None:
    """With num.partitions=3 in server.properties, every client's auto-created topic has 3."""
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=3\n")
    broker = broker_factory(config_file=properties)
    bootstrap = broker.bootstrap_servers
    for client in CLIENTS:
        topic = new_topic(f"auto3-{client}")
        records = [r._replace(partition=2) for r in make_records(3)]
        assert DRIVERS[client].produce(bootstrap, topic, records, acks=1) == [(2, 0), (2, 1), (2, 2)]
        assert _partition_count(bootstrap, topic) == 3


def test_topic_ids_stable_across_restart(broker_factory: Callable[..., EmbeddedBroker]) -> None:
    """Topic ids (Metadata v12) are non-zero, distinct and the same after restart and crash."""
    broker = broker_factory(flush="sync")
    bootstrap = broker.bootstrap_servers
    auto, created = new_topic("ids-auto"), new_topic("ids-created")
    assert ck_produce(bootstrap, auto, make_records(5), acks="all") == [(0, i) for i in range(5)]
    create_topic(bootstrap, created, partitions=2)
    before = topic_ids(bootstrap, [auto, created])
    assert all(i.int != 0 for i in before.values())
    assert len(set(before.values())) == 2

    broker.restart()  # clean stop, start
    assert topic_ids(broker.bootstrap_servers, [auto, created]) == before

    broker.kill()  # crash: recovery must not invent new ids
    broker.restart()
    bootstrap = broker.bootstrap_servers
    assert topic_ids(bootstrap, [auto, created]) == before
    assert _partition_count(bootstrap, created) == 2
    with CKReader(bootstrap, auto) as reader:
        assert [r.offset for r in reader.read(0, 5)] == list(range(5))
