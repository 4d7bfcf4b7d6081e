"""The ``rmqkafka`` PySpark data source, end to end: real PySpark (``local[2]``) against a
real broker process.

One SparkSession and one broker serve the whole module (a JVM start costs ~10 s); every
test uses its own topics. Records are produced with confluent-kafka with keys (including
null, empty and non-UTF-8 ones), values (including null), headers (none, repeated keys,
null values), explicit CreateTime timestamps and a mix of uncompressed, gzip and zstd
batches, and every row read back is compared column by column with what the producer's
delivery reports say was written.

Streaming queries use ``foreachBatch`` to see each micro-batch, and
``trigger(availableNow=True)`` so they end on their own.
"""

from __future__ import annotations

import shutil
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is not importable; install the test extra: pip install -e '.[test]'"
)
pytest.importorskip("pyarrow", reason="pyarrow is not importable; pip install -e '.[test]'")
if shutil.which("java") is None:
    import os

    if not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime for Spark: put java on PATH or set JAVA_HOME",
                    allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

BASE_TS = 1_700_000_000_000
FORMAT = "rmqkafka"
HEADERLESS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    ts: int  # ms
    ts_type: int
    headers: tuple[tuple[str, bytes | None], ...] | None


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import rmqkafka.spark_connector as spark_connector

    session = (
        SparkSession.builder.master("local[2]")
        .appName("rmqkafka-data-source-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    assert spark_connector.register(session) == "rmqkafka"
    yield session
    session.stop()


@pytest.fixture(scope="module")
def admin(broker: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture
def topic(admin: Any) -> Callable[..., str]:
    """``topic(partitions=3, config=None, name=None)`` creates a fresh topic."""

    def make(partitions: int = 3, config: dict | None = None, name: str | None = None) -> str:
        from confluent_kafka.admin import NewTopic

        name = name or f"t-{uuid.uuid4().hex[:10]}"
        admin.create_topics([NewTopic(name, partitions, config=config or {})])[name].result()
        return name

    return make


# --- producing and reading ------------------------------------------------------------------


def _key(i: int) -> bytes | None:
    if i % 7 == 0:
        return None
    if i % 11 == 0:
        return b""
    return b"k%d\xff" % i


def _value(i: int) -> bytes | None:
    return None if i % 13 == 5 else b"value-%d-" % i + bytes(range(i % 5))


def _headers(i: int) -> list[tuple[str, bytes | None]] | None:
    return [None, [("a", b"1"), ("a", b"2")], [("n", None), ("u", "ü".encode())]][i % 3]


def produce(
    bootstrap: str, topic: str, count: int, *, partitions: int = 3, first: int = 0,
    ts: Callable[[int], int] = lambda i: BASE_TS + i * 1000,
) -> list[Rec]:
    """Produce records ``first .. first+count-1`` round-robin over partitions, a third each
    uncompressed / gzip / zstd; returns them as delivered (with offsets)."""
    from confluent_kafka import Producer

    delivered: list[Rec] = []
    failures: list[str] = []
    thirds = [range(first, first + count)[k::3] for k in range(3)]
    for codec, indexes in zip(("none", "gzip", "zstd"), thirds):
        producer = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20}
        )

        def report(err: Any, msg: Any, i: int) -> None:
            if err is not None:
                failures.append(str(err))
                return
            hdrs = _headers(i)  # delivery reports do not carry headers
            delivered.append(
                Rec(msg.key(), msg.value(), msg.topic(), msg.partition(), msg.offset(),
                    msg.timestamp()[1], msg.timestamp()[0] - 1,
                    tuple(hdrs) if hdrs else None)
            )

        for i in indexes:
            producer.produce(topic, key=_key(i), value=_value(i), partition=i % partitions,
                             headers=_headers(i), timestamp=ts(i),
                             on_delivery=lambda err, msg, i=i: report(err, msg, i))
        producer.flush(30)
    assert not failures, failures
    assert len(delivered) == count
    return sorted(delivered, key=lambda r: (r.topic, r.partition, r.offset))


def to_recs(rows: list[Any], headers: bool = True) -> list[Rec]:
    out = []
    for r in rows:
        hdrs = r["headers"] if headers else None
        out.append(
            Rec(
                None if r["key"] is None else bytes(r["key"]),
                None if r["value"] is None else bytes(r["value"]),
                r["topic"], r["partition"], r["offset"], r["ts_ms"], r["timestampType"],
                tuple((h["key"], None if h["value"] is None else bytes(h["value"]))
                      for h in hdrs) if hdrs else None,
            )
        )
    return sorted(out, key=lambda r: (r.topic, r.partition, r.offset))


def select_all(df: Any) -> Any:
    """Every column, with the timestamp also as epoch milliseconds (time-zone free)."""
    return df.selectExpr("*", "unix_millis(timestamp) AS ts_ms")


def reader(spark: Any, broker: Any, **options: str) -> Any:
    r = spark.read.format(FORMAT).option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def stream_reader(spark: Any, broker: Any, **options: str) -> Any:
    r = spark.readStream.format(FORMAT).option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r


def run_available_now(df: Any, checkpoint: Path) -> list[list[Rec]]:
    """Run a streaming query to the end with availableNow; the non-empty micro-batches."""
    batches: dict[int, list[Rec]] = {}
    headers = "headers" in df.columns

    def collect(batch_df: Any, batch_id: int) -> None:
        batches[batch_id] = to_recs(select_all(batch_df).collect(), headers)

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert not query.isActive, "the availableNow query did not finish"
    if query.exception() is not None:
        raise query.exception()
    return [batches[i] for i in sorted(batches) if batches[i]]


def flat(batches: list[list[Rec]]) -> list[Rec]:
    return sorted((r for b in batches for r in b), key=lambda r: (r.topic, r.partition, r.offset))


def spark_error(call: Callable[[], Any]) -> str:
    """Run ``call``, which must fail; the text of Spark's error."""
    with pytest.raises(Exception) as caught:
        call()
    return str(caught.value)


# --- batch reads ----------------------------------------------------------------------------


def test_batch_read_equals_what_was_produced(spark: Any, broker: Any, topic: Any) -> None:
    name = topic(3)
    produced = produce(broker.bootstrap_servers, name, 300)
    df = reader(spark, broker, subscribe=name, includeHeaders="true").load()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert to_recs(select_all(df).collect()) == produced
    # without includeHeaders: exactly the seven built-in columns
    plain = reader(spark, broker, subscribe=name).load()
    assert plain.columns == HEADERLESS
    assert to_recs(select_all(plain).collect(), headers=False) == [
        Rec(r.key, r.value, r.topic, r.partition, r.offset, r.ts, r.ts_type, None)
        for r in produced
    ]


def test_batch_read_by_offsets(spark: Any, broker: Any, topic: Any) -> None:
    name = topic(3)
    produced = produce(broker.bootstrap_servers, name, 90)  # 30 per partition
    df = reader(
        spark, broker, subscribe=name, includeHeaders="true",
        startingOffsets=f'{{"{name}": {{"0": 5, "1": -2, "2": 29}}}}',
        endingOffsets=f'{{"{name}": {{"0": 17, "1": -1, "2": 30}}}}',
    ).load()
    bounds = {0: (5, 17), 1: (0, 30), 2: (29, 30)}
    expected = [r for r in produced if bounds[r.partition][0] <= r.offset < bounds[r.partition][1]]
    assert to_recs(select_all(df).collect()) == expected
    # assign reads only the named partitions
    assigned = reader(spark, broker, assign=f'{{"{name}": [2]}}', includeHeaders="true").load()
    assert to_recs(select_all(assigned).collect()) == [r for r in produced if r.partition == 2]


def test_batch_read_by_timestamp(spark: Any, broker: Any, topic: Any) -> None:
    name = topic(3)
    produced = produce(broker.bootstrap_servers, name, 60)  # record i at BASE_TS + i s
    cut = BASE_TS + 40_000
    df = reader(spark, broker, subscribe=name, includeHeaders="true",
                startingTimestamp=str(cut)).load()
    assert to_recs(select_all(df).collect()) == [r for r in produced if r.ts >= cut]
    per_partition = reader(
        spark, broker, subscribe=name, includeHeaders="true",
        startingOffsetsByTimestamp=f'{{"{name}": {{"0": {BASE_TS}, "1": {cut}, "2": {cut}}}}}',
        endingTimestamp=str(BASE_TS + 50_000),
    ).load()
    expected = [
        r for r in produced
        if (r.partition == 0 or r.ts >= cut) and r.ts < BASE_TS + 50_000
    ]
    assert to_recs(select_all(per_partition).collect()) == expected
    # no record at or after the timestamp: Spark's default strategy is an error
    message = spark_error(
        lambda: reader(spark, broker, subscribe=name,
                       startingTimestamp=str(BASE_TS + 10**9)).load().collect()
    )
    assert "no record at or after the timestamp" in message
    late = reader(spark, broker, subscribe=name, startingTimestamp=str(BASE_TS + 10**9),
                  startingOffsetsByTimestampStrategy="latest").load()
    assert late.count() == 0


def test_log_append_time(spark: Any, broker: Any, topic: Any) -> None:
    name = topic(1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produced = produce(broker.bootstrap_servers, name, 6, partitions=1)
    after = int(time.time() * 1000)
    rows = to_recs(select_all(reader(spark, broker, subscribe=name).load()).collect(), False)
    assert [r.offset for r in rows] == [r.offset for r in produced]
    assert {r.ts_type for r in rows} == {1}
    assert all(before - 1000 <= r.ts <= after + 1000 for r in rows)


def test_min_partitions_splits_ranges(spark: Any, broker: Any, topic: Any) -> None:
    name = topic(3)
    produced = produce(broker.bootstrap_servers, name, 300)
    df = reader(spark, broker, subscribe=name, includeHeaders="true", minPartitions="9").load()
    assert df.rdd.getNumPartitions() == 9
    assert to_recs(select_all(df).collect()) == produced
    per_task = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert sorted(per_task) == [33, 33, 33, 33, 33, 33, 34, 34, 34]
    assert reader(spark, broker, subscribe=name).load().rdd.getNumPartitions() == 3


# --- streaming reads ------------------------------------------------------------------------


def test_stream_available_now(spark: Any, broker: Any, topic: Any, tmp_path: Path) -> None:
    name = topic(3)
    produced = produce(broker.bootstrap_servers, name, 150)
    df = stream_reader(spark, broker, subscribe=name, includeHeaders="true",
                       startingOffsets="earliest").load()
    batches = run_available_now(df, tmp_path / "ck")
    assert len(batches) == 1
    assert flat(batches) == produced


def test_stream_max_offsets_per_trigger(spark: Any, broker: Any, topic: Any,
                                        tmp_path: Path) -> None:
    name = topic(3)
    produced = produce(broker.bootstrap_servers, name, 120)  # 40 per partition
    df = stream_reader(spark, broker, subscribe=name, includeHeaders="true",
                       startingOffsets="earliest", maxOffsetsPerTrigger="30").load()
    batches = run_available_now(df, tmp_path / "ck")
    # 30 per trigger, prorated over 3 equal partitions: 10 from each, 4 micro-batches
    assert [len(b) for b in batches] == [30, 30, 30, 30]
    for b in batches:
        assert sorted(r.partition for r in b) == [0] * 10 + [1] * 10 + [2] * 10
    assert flat(batches) == produced  # no gaps, no duplicates


def test_stream_restart_from_checkpoint(spark: Any, broker: Any, topic: Any,
                                        tmp_path: Path) -> None:
    name = topic(3)
    bs = broker.bootstrap_servers
    old = produce(bs, name, 30)
    checkpoint = tmp_path / "ck"

    def run() -> list[Rec]:
        df = stream_reader(spark, broker, subscribe=name, includeHeaders="true",
                           maxOffsetsPerTrigger="25").load()  # startingOffsets: latest
        return flat(run_available_now(df, checkpoint))

    assert run() == []  # streaming starts at latest by default: old records are skipped
    first = produce(bs, name, 45, first=30)
    assert run() == first
    second = produce(bs, name, 60, first=75)
    assert run() == second  # continues where the checkpoint ended: no gaps, no duplicates
    everything = to_recs(select_all(reader(spark, broker, subscribe=name,
                                           includeHeaders="true").load()).collect())
    assert everything == sorted(old + first + second,
                                key=lambda r: (r.topic, r.partition, r.offset))


def test_subscribe_pattern_picks_up_a_topic_created_later(
    spark: Any, broker: Any, topic: Any, tmp_path: Path
) -> None:
    prefix = f"pat{uuid.uuid4().hex[:6]}"
    bs = broker.bootstrap_servers
    first = produce(bs, topic(2, name=f"{prefix}-a"), 20, partitions=2)
    topic(1, name=f"other{prefix}")  # does not match the pattern (full match)
    produce(bs, f"other{prefix}", 5, partitions=1)
    seen: list[Rec] = []

    def collect(batch_df: Any, batch_id: int) -> None:
        seen.extend(to_recs(select_all(batch_df).collect()))

    query = (
        stream_reader(spark, broker, subscribePattern=f"{prefix}-.*", includeHeaders="true",
                      startingOffsets="earliest")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        _wait_for(lambda: len(seen) >= 20, query)
        later = produce(bs, topic(3, name=f"{prefix}-b"), 30)  # created after the start
        more = produce(bs, f"{prefix}-a", 10, partitions=2, first=20)
        _wait_for(lambda: len(seen) >= 60, query)
    finally:
        query.stop()
    key = lambda r: (r.topic, r.partition, r.offset)
    assert sorted(seen, key=key) == sorted(first + later + more, key=key)


def _wait_for(condition: Callable[[], bool], query: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if query.exception() is not None:
            raise query.exception()
        assert time.monotonic() < deadline, "timed out waiting for the streaming query"
        time.sleep(0.2)


# --- writes ---------------------------------------------------------------------------------


def test_batch_write_round_trips(spark: Any, broker: Any, topic: Any) -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    out = topic(3)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType([
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(header)),
        StructField("partition", IntegerType()),
    ])
    rows = [
        (None if i % 10 == 0 else f"key-{i}", None if i == 7 else b"v\x00%d" % i,
         [("h", b"%d" % i), ("e", None)] if i % 2 else None, i % 3)
        for i in range(50)
    ]
    spark.createDataFrame(rows, schema).write.format(FORMAT).option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    ).option("topic", out).mode("append").save()
    back = reader(spark, broker, subscribe=out, includeHeaders="true").load().collect()
    got = sorted(
        [
            (r["key"], r["value"], [tuple(h) for h in r["headers"]] if r["headers"] else None,
             r["partition"])
            for r in back
        ],
        key=repr,
    )
    expected = sorted(
        [
            (None if k is None else k.encode(), v, list(h) if h else None, p)
            for k, v, h, p in rows
        ],
        key=repr,
    )
    assert len(back) == 50 and got == expected
    by_partition: dict[int, list[int]] = {}
    for r in back:
        by_partition.setdefault(r["partition"], []).append(r["offset"])
    assert all(sorted(o) == list(range(len(o))) for o in by_partition.values())


def test_topic_column_routes_rows(spark: Any, broker: Any, topic: Any) -> None:
    a, b = topic(1), topic(1)
    df = spark.createDataFrame(
        [(a if i % 2 else b, f"v{i}") for i in range(20)], "topic string, value string"
    )
    df.write.format(FORMAT).option("kafka.bootstrap.servers", broker.bootstrap_servers).mode(
        "append"
    ).save()
    for name, parity in ((a, 1), (b, 0)):
        values = reader(spark, broker, subscribe=name).load().selectExpr(
            "CAST(value AS STRING) v").collect()
        assert sorted(r.v for r in values) == sorted(f"v{i}" for i in range(20) if i % 2 == parity)


def test_write_stream_round_trips(spark: Any, broker: Any, topic: Any, tmp_path: Path) -> None:
    """Kafka -> Kafka with availableNow (exact), and the rate source -> Kafka."""
    source, sink = topic(3), topic(2)
    produced = produce(broker.bootstrap_servers, source, 90)
    query = (
        stream_reader(spark, broker, subscribe=source, startingOffsets="earliest",
                      includeHeaders="true")
        .load()
        .selectExpr("key", "value", "headers")
        .writeStream.format(FORMAT)
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ck1"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = to_recs(select_all(reader(spark, broker, subscribe=sink,
                                       includeHeaders="true").load()).collect())
    assert sorted([(r.key, r.value, r.headers) for r in copied], key=repr) == sorted(
        [(r.key, r.value, r.headers) for r in produced], key=repr
    )

    rated = topic(1)
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", "200")
        .option("numPartitions", "1").load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format(FORMAT)
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", rated)
        .option("checkpointLocation", str(tmp_path / "ck2"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        _wait_for(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 100, query)
    finally:
        query.stop()
    values = sorted(
        int(r.v) for r in reader(spark, broker, subscribe=rated).load()
        .selectExpr("CAST(value AS STRING) v").collect()
    )
    assert len(values) >= 100 and values == list(range(len(values)))


def test_write_errors(spark: Any, broker: Any, topic: Any) -> None:
    bs = broker.bootstrap_servers
    no_value = spark.createDataFrame([("k",)], "key string")
    message = spark_error(lambda: no_value.write.format(FORMAT).option(
        "kafka.bootstrap.servers", bs).option("topic", "x").mode("append").save())
    assert "required column 'value' not found" in message
    no_topic = spark.createDataFrame([("v",)], "value string")
    message = spark_error(lambda: no_topic.write.format(FORMAT).option(
        "kafka.bootstrap.servers", bs).mode("append").save())
    assert "no topic to write to" in message
    message = spark_error(lambda: no_topic.write.format(FORMAT).option(
        "kafka.bootstrap.servers", bs).option("topic", "x").mode("overwrite").save())
    assert "'overwrite' is not allowed" in message


# --- tags and filter: reads through broker-side views ------------------------------------


def produce_tagged(bootstrap: str, topic: str, count: int, partitions: int = 2) -> list[tuple]:
    """Records with a TAGS header (A, B, C, none) and a numeric header ``n``; one batch mixes
    tags, so views return whole, re-encoded and emptied batches. Returns (partition, offset,
    tag, n, value) per record."""
    from confluent_kafka import Producer

    delivered: list[tuple] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    for i in range(count):
        tag = ["A", "B", "C", None][i % 4]
        headers = [("n", str(i).encode())] + ([("TAGS", tag.encode())] if tag else [])
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions, headers=headers,
                         on_delivery=lambda err, msg, tag=tag, i=i: delivered.append(
                             (msg.partition(), msg.offset(), tag, i, msg.value())))
    producer.flush(30)
    assert len(delivered) == count
    return sorted(delivered)


def _rows(df: Any) -> list[tuple]:
    rows = df.select("topic", "partition", "offset", "value").collect()
    return sorted((r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in rows)


def test_tags_and_filter_read_through_broker_views(spark: Any, broker: Any, topic: Any, admin: Any) -> None:
    name = topic(2)
    records = produce_tagged(broker.bootstrap_servers, name, 400)
    want_tags = sorted((name, p, o, v) for p, o, tag, _, v in records if tag in ("A", "C"))
    want_sql = sorted((name, p, o, v) for p, o, tag, n, v in records if tag == "B" and n >= 200)
    assert _rows(reader(spark, broker, subscribe=name, tags="A || C").load()) == want_tags
    assert _rows(reader(spark, broker, subscribe=name, filter="TAGS = 'B' AND n >= 200").load()) == want_sql
    # the views are the broker's (one per topic and expression, shared by later queries)
    views = [t for t in admin.list_topics(timeout=10).topics if t.startswith("rmqview-")]
    assert len(views) >= 2
    # a bad expression is the broker's error, with its position
    message = spark_error(lambda: reader(spark, broker, subscribe=name, filter="n >").load().collect())
    assert "option 'filter'" in message and "column" in message


def test_tags_in_a_streaming_query(spark: Any, broker: Any, topic: Any, tmp_path: Path) -> None:
    name = topic(2)
    records = produce_tagged(broker.bootstrap_servers, name, 200)
    df = stream_reader(spark, broker, subscribe=name, tags="B", startingOffsets="earliest",
                       maxOffsetsPerTrigger="60").load()
    got = flat(run_available_now(df, tmp_path / "checkpoint"))
    assert sorted((r.partition, r.offset) for r in got) == sorted(
        (p, o) for p, o, tag, _, _ in records if tag == "B"
    )
    assert {r.topic for r in got} == {name}


def test_delayed_and_timed_records_read_like_any_records(spark: Any, broker: Any, topic: Any) -> None:
    """Records produced with DELAY / TIMER_DELAY_MS leave gaps in their batch's offsets and
    appear later at new offsets: the data source reads them like any records, and the gaps
    are not data loss (failOnDataLoss is on by default)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    name = topic(1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50,
                         "enable.idempotence": True})
    for i in range(30):
        headers = [("DELAY", b"1")] if i % 3 == 1 else [("TIMER_DELAY_MS", b"1200")] if i % 3 == 2 else []
        producer.produce(name, b"v%d" % i, partition=0, headers=headers)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"{name}-wait",
                         "enable.auto.commit": False})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the log end once all 20 parked records are delivered
        if consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10)[1] >= 50:
            break
        time.sleep(0.2)
    consumer.close()
    rows = reader(spark, broker, subscribe=name, includeHeaders="true").load().collect()
    assert sorted(bytes(r["value"]) for r in rows) == sorted(b"v%d" % i for i in range(30))
    immediate = sorted(r["offset"] for r in rows if int(bytes(r["value"])[1:]) % 3 == 0)
    assert immediate == list(range(0, 30, 3))  # their produced offsets: the others left gaps
    later = [r for r in rows if int(bytes(r["value"])[1:]) % 3]
    assert min(r["offset"] for r in later) >= 30
    for row in later:
        names = [h["key"] for h in row["headers"]]
        assert "PARKED_AT" in names and "DELAY" not in names and "TIMER_DELAY_MS" not in names


def _transactions(bootstrap: str, name: str, txn_id: str, rounds: range) -> tuple[list[bytes], list[bytes], Any]:
    """Transactions of 10 records over 2 partitions: round r commits unless r % 3 == 1; then
    one more transaction left open. (committed values, aborted values, producer)"""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(30)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for r in rounds:
        producer.begin_transaction()
        values = [b"%s-%d-%d" % (txn_id.encode(), r, i) for i in range(10)]
        for i, value in enumerate(values):
            producer.produce(name, value, partition=i % 2)
        producer.flush(30)  # abort_transaction purges what is not sent yet
        if r % 3 == 1:
            producer.abort_transaction(30)
            aborted += values
        else:
            producer.commit_transaction(30)
            committed += values
    return committed, aborted, producer


def test_read_committed_batch_and_stream(spark: Any, broker: Any, topic: Any, tmp_path: Path) -> None:
    """kafka.isolation.level=read_committed: batch and streaming reads see committed records
    only, end at the last stable offset while a transaction is open, and pick up its records
    once it commits; read_uncommitted sees every data record (markers never)."""
    name = topic(2)
    committed, aborted, producer = _transactions(broker.bootstrap_servers, name, f"{name}-tx", range(6))
    producer.begin_transaction()
    pending = [b"pending-%d" % i for i in range(6)]
    for i, value in enumerate(pending):
        producer.produce(name, value, partition=i % 2)
    producer.flush(30)

    def values(df: Any) -> list[bytes]:
        return sorted(bytes(r["value"]) for r in df.collect())

    rc = {"kafka.isolation.level": "read_committed"}
    assert values(reader(spark, broker, subscribe=name, **rc).load()) == sorted(committed)
    assert values(reader(spark, broker, subscribe=name).load()) == sorted(committed + aborted + pending)
    checkpoint = tmp_path / "rc"
    first = flat(run_available_now(stream_reader(spark, broker, subscribe=name, startingOffsets="earliest", **rc).load(),
                                   checkpoint))
    assert sorted(r.value for r in first) == sorted(committed)

    producer.commit_transaction(30)
    assert values(reader(spark, broker, subscribe=name, **rc).load()) == sorted(committed + pending)
    second = flat(run_available_now(stream_reader(spark, broker, subscribe=name, **rc).load(), checkpoint))
    assert sorted(r.value for r in second) == sorted(pending)


def test_half_messages_are_invisible_until_committed(spark: Any, broker: Any, topic: Any) -> None:
    """RocketMQ half messages (TRAN_MSG): a batch read sees neither them nor gaps as data
    loss; once committed each is read once, at its new offset."""
    from confluent_kafka import Producer

    name = topic(1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True})
    for i in range(10):
        headers = [("TRAN_MSG", b"true"), ("PGROUP", b"g"), ("UNIQ_KEY", b"H%d" % i)] if i % 2 else []
        producer.produce(name, b"v%d" % i, partition=0, headers=headers)
    assert producer.flush(30) == 0

    def values() -> list[bytes]:
        return sorted(bytes(r["value"]) for r in reader(spark, broker, subscribe=name).load().collect())

    assert values() == [b"v0", b"v2", b"v4", b"v6", b"v8"]
    for i in (1, 3):
        producer.produce(name, b"", partition=0, headers=[("TRAN_END", b"COMMIT"), ("PGROUP", b"g"),
                                                          ("UNIQ_KEY", b"H%d" % i)])
    assert producer.flush(30) == 0
    assert values() == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v6", b"v8"]


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one of the options"),
        ({"assign": "{a: [0]}"}, "option 'assign' is not valid JSON"),
        ({"subscribe": "a", "startingOffsets": "beginning"},
         "option 'startingOffsets' must be 'earliest', 'latest' or JSON"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": x}}'}, "is not valid JSON"),
        ({"subscribe": "a", "tags": "TagA", "filter": "price > 10"}, "exclude each other"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "latest"},
         "'kafka.auto.offset.reset' is not supported"),
    ],
)
def test_bad_options_fail_at_load(spark: Any, broker: Any, options: dict, message: str) -> None:
    assert message in spark_error(lambda: reader(spark, broker, **options).load())
    assert message in spark_error(lambda: stream_reader(spark, broker, **options).load())


def test_mode_specific_option_errors(spark: Any, broker: Any, topic: Any) -> None:
    name = topic(1)
    assert "not valid for batch queries" in spark_error(
        lambda: reader(spark, broker, subscribe=name, startingOffsets="latest").load().collect()
    )
    message = spark_error(
        lambda: stream_reader(spark, broker, subscribe=name, endingOffsets="latest").load()
        .writeStream.format("memory").queryName("never").start().awaitTermination(30)
    )
    assert "'endingOffsets' is not valid in streaming queries" in message
    assert "fixed schema" in spark_error(
        lambda: spark.read.format(FORMAT).schema("value string")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", name).load().collect()
    )
    assert "librdkafka" in spark_error(
        lambda: reader(spark, broker, subscribe=name,
                       **{"kafka.no.such.setting": "1"}).load().collect()
    )
    assert "must give one for every topic-partition" in spark_error(
        lambda: reader(spark, broker, subscribe=name,
                       startingOffsets=f'{{"{name}": {{}}}}').load().collect()
    )


def test_unknown_topic_and_partition(spark: Any, broker: Any, topic: Any) -> None:
    message = spark_error(lambda: reader(spark, broker, subscribe="no-such-topic").load().collect())
    assert "UnknownTopicError" in message and "no-such-topic" in message
    name = topic(2)
    message = spark_error(
        lambda: reader(spark, broker, assign=f'{{"{name}": [0, 5]}}').load().collect()
    )
    assert f"{name}-5 (topic has 2 partitions)" in message


def test_unreachable_broker_fails_within_seconds(spark: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    began = time.monotonic()
    message = spark_error(
        lambda: spark.read.format(FORMAT).option("kafka.bootstrap.servers", f"127.0.0.1:{port}")
        .option("subscribe", "t").load().collect()
    )
    assert time.monotonic() - began < 15
    assert "BrokerUnreachableError" in message and f"127.0.0.1:{port}" in message


def test_fail_on_data_loss(spark: Any, broker: Any, topic: Any, admin: Any,
                           tmp_path: Path) -> None:
    from confluent_kafka import TopicPartition

    name = topic(1)
    bs = broker.bootstrap_servers
    produced = produce(bs, name, 40, partitions=1)

    # streaming: read up to offset 40 into a checkpoint
    def stream(fail: str, checkpoint: Path) -> list[Rec]:
        df = stream_reader(spark, broker, subscribe=name, includeHeaders="true",
                           startingOffsets="earliest", failOnDataLoss=fail).load()
        return flat(run_available_now(df, checkpoint))

    assert stream("true", tmp_path / "ck-true") == produced
    shutil.copytree(tmp_path / "ck-true", tmp_path / "ck-false")
    more = produce(bs, name, 20, partitions=1, first=40)  # offsets 40..59
    tp = TopicPartition(name, 0, 50)
    admin.delete_records([tp])[tp].result()  # 40..49 are gone before the query saw them

    # batch: a requested start below the log start
    start_at_0 = f'{{"{name}": {{"0": 0}}}}'
    message = spark_error(
        lambda: reader(spark, broker, subscribe=name, startingOffsets=start_at_0).load().collect()
    )
    assert "DataLossError" in message and "earliest available offset is 50" in message
    assert "failOnDataLoss" in message
    rows = reader(spark, broker, subscribe=name, startingOffsets=start_at_0,
                  failOnDataLoss="false").load().select("offset").collect()
    assert sorted(r.offset for r in rows) == list(range(50, 60))

    # streaming restart: the executor finds offset 40 out of range
    message = spark_error(lambda: stream("true", tmp_path / "ck-true"))
    assert "DataLossError" in message and "out of range" in message
    assert stream("false", tmp_path / "ck-false") == more[10:]


def test_deleted_topic_is_data_loss_in_streaming(spark: Any, broker: Any, topic: Any,
                                                 admin: Any, tmp_path: Path) -> None:
    prefix = f"del{uuid.uuid4().hex[:6]}"
    keep, drop = topic(1, name=f"{prefix}-keep"), topic(1, name=f"{prefix}-drop")
    bs = broker.bootstrap_servers
    produce(bs, keep, 5, partitions=1)
    produce(bs, drop, 5, partitions=1)

    def stream(fail: str, checkpoint: Path) -> list[Rec]:
        df = stream_reader(spark, broker, subscribePattern=f"{prefix}-.*", includeHeaders="true",
                           startingOffsets="earliest", failOnDataLoss=fail).load()
        return flat(run_available_now(df, checkpoint))

    assert len(stream("true", tmp_path / "a")) == 10
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    admin.delete_topics([drop])[drop].result()
    later = produce(bs, keep, 5, partitions=1, first=5)
    message = spark_error(lambda: stream("true", tmp_path / "a"))
    assert "DataLossError" in message and f"{drop}-0 are gone" in message
    assert stream("false", tmp_path / "b") == later
