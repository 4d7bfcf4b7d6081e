"""Spark's built-in ``kafka`` source (Java kafka-clients) reading from our broker (issue #3).

What the source does on the wire (shared/reference/clients-and-peers.md §1b): the driver uses
an AdminClient (Metadata or DescribeTopicPartitions, ListOffsets earliest/latest/by
timestamp); executors ``assign`` + ``seek`` + ``poll`` one TopicPartition each, with
``auto.offset.reset=none``, and after every poll ask ListOffsets for both ends. No group is
ever joined. With ``failOnDataLoss=true`` an offset below log-start, an OffsetOutOfRange or a
poll that neither returns records nor advances the position fails the query.

The test produces records with keys, values (including null, empty and non-UTF-8 ones),
headers (repeated keys, null values, none at all), CreateTime timestamps and a mix of
uncompressed, gzip and zstd batches to a 3-partition topic, then reads the topic back with
the batch reader (whole topic; split into more Spark partitions than Kafka partitions, which
makes executors seek into the middle of batches; explicit offsets; ``startingTimestamp``,
``startingOffsetsByTimestamp``, ``endingTimestamp``) and the streaming reader with
``trigger(availableNow=True)`` (memory sink; foreachBatch with ``maxOffsetsPerTrigger``;
restart from a checkpoint). Every row must equal what was produced, column by column.

It runs only when ``SPARK_KAFKA_JARS`` lists the jars of Spark's Kafka connector, separated by
``:`` or ``,`` (Maven coordinates; ``_2.13`` and the version must match the installed pyspark):

    org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>
    org.apache.spark:spark-token-provider-kafka-0-10_2.13:<pyspark version>
    org.apache.kafka:kafka-clients:<the version that connector depends on>
    org.apache.commons:commons-pool2:<the version that connector depends on>

kafka-clients also needs lz4-java, snappy-java and zstd-jni, which pyspark already ships in
its ``jars/`` folder. Without the variable (or without pyspark, or without Java) the module
is skipped with a reason that says what to set.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip(
    "pyspark",
    reason="pyspark is not importable; install the test extra: pip install -e '.[test]'",
)

JARS_VARIABLE = "SPARK_KAFKA_JARS"
REQUIRED_JARS = {
    "spark-sql-kafka-0-10": re.compile(r"spark-sql-kafka-0-10_[\d.]+-([\w.\-]+)\.jar$"),
    "spark-token-provider-kafka-0-10": re.compile(r"spark-token-provider-kafka-0-10_[\d.]+-([\w.\-]+)\.jar$"),
    "kafka-clients": re.compile(r"kafka-clients-[\w.\-]+\.jar$"),
    "commons-pool2": re.compile(r"commons-pool2-[\w.\-]+\.jar$"),
}

_raw_jars = os.environ.get(JARS_VARIABLE, "").strip()
if not _raw_jars:
    pytest.skip(
        f"Spark's Kafka connector jars are not available: set {JARS_VARIABLE} to the paths of "
        f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar, "
        f"spark-token-provider-kafka-0-10_2.13-{pyspark.__version__}.jar, "
        "kafka-clients-<version>.jar and commons-pool2-<version>.jar, separated by ':' or ','",
        allow_module_level=True,
    )
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip(
        "no Java runtime for Spark: put java on PATH or set JAVA_HOME",
        allow_module_level=True,
    )


def _jar_paths(raw: str) -> list[Path]:
    """The jar paths of SPARK_KAFKA_JARS; a misconfigured variable is an error, not a skip."""
    paths = [Path(p).expanduser().absolute() for p in re.split(r"[:,]", raw) if p.strip()]
    problems = [f"{p} does not exist" for p in paths if not p.is_file()]
    for name, pattern in REQUIRED_JARS.items():
        if not any(pattern.search(p.name) for p in paths):
            problems.append(f"no {name} jar")
    spark_minor = ".".join(pyspark.__version__.split(".")[:2])
    for p in paths:
        for name in ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10"):
            match = REQUIRED_JARS[name].search(p.name)
            if match and not match.group(1).startswith(spark_minor + "."):
                problems.append(f"{p.name} does not match pyspark {pyspark.__version__}")
    if problems:
        pytest.fail(
            f"{JARS_VARIABLE}={raw!r} is unusable: " + "; ".join(problems),
            pytrace=False,
        )
    return paths


JARS = _jar_paths(_raw_jars)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PARTITIONS = 3
COUNT = 240
BASE_TS = 1_700_000_000_000  # CreateTime of record i is BASE_TS + i seconds
CREATE_TIME, LOG_APPEND_TIME = 0, 1
SCHEMA = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
    "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
)
COLUMNS = [
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
]
# Options that make a broker misbehaviour fail in seconds rather than after Spark's defaults
# (120 s poll timeout, 3 offset-fetch retries 1 s apart).
FAST_FAILURE = {
    "kafkaConsumer.pollTimeoutMs": "30000",
    "fetchOffset.numRetries": "2",
    "fetchOffset.retryIntervalMs": "100",
    "kafka.request.timeout.ms": "20000",
    "kafka.default.api.timeout.ms": "30000",
}

Headers = tuple[tuple[str, bytes | None], ...] | None


@dataclass(frozen=True)
class Row:
    """One record as Spark's kafka source must present it (timestamp in epoch ms)."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    headers: Headers


# ---------------------------------------------------------------------------- producing


def _partition_of(i: int) -> int:
    """Uneven partition sizes (3:2:1), so per-partition mistakes do not cancel out."""
    return (0, 0, 0, 1, 1, 2)[i % 6]


def _record(
    i: int,
) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]:
    key = None if i % 11 == 0 else b"key-%d" % i
    if i % 13 == 0:
        value = None  # a tombstone
    elif i % 17 == 0:
        value = b""
    else:
        value = bytes([i % 256, 0xFF, 0x00]) + b"value-%d-" % i + b"x" * (i % 50)
    if i % 7 == 0:
        headers = None  # Spark reports a record without headers as a null array
    else:
        headers = [("h", b"%d" % i), ("unicode-é", bytes([0xFE, i % 256]))]
        if i % 5 == 0:
            headers += [("h", b"again"), ("null-value", None), ("empty", b"")]
    return key, value, headers


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = PARTITIONS,
    config: dict[str, str] | None = None,
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


def produce(bootstrap: str, topic: str, indexes: range, timestamps: bool = True) -> list[Row]:
    """Produce records ``indexes`` in three phases (no compression, gzip, zstd), each a few
    batches per partition; return the rows Spark must show, taken from delivery reports."""
    from confluent_kafka import Producer

    delivered: list[Row] = []
    errors: list[Any] = []
    third = len(indexes) // 3
    phases = [indexes[:third], indexes[third : 2 * third], indexes[2 * third :]]
    for codec, phase in zip(("none", "gzip", "zstd"), phases):
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 20,
                "batch.num.messages": 25,
            }
        )
        for i in phase:
            key, value, headers = _record(i)

            def report(
                err: Any,
                msg: Any,
                i: int = i,
                key: bytes | None = key,
                value: bytes | None = value,
                headers: list[tuple[str, bytes | None]] | None = headers,
            ) -> None:
                if err is not None:
                    errors.append(err)
                    return
                # CreateTime: the timestamp we set, so a broker that rewrote it is caught;
                # LogAppendTime: the broker's, as the produce response reported it.
                ts = BASE_TS + i * 1000 if timestamps else msg.timestamp()[1]
                delivered.append(
                    Row(
                        key,
                        value,
                        topic,
                        msg.partition(),
                        msg.offset(),
                        ts,
                        CREATE_TIME if timestamps else LOG_APPEND_TIME,
                        tuple(headers) if headers else None,
                    )
                )

            extra = {"timestamp": BASE_TS + i * 1000} if timestamps else {}
            producer.produce(
                topic,
                value=value,
                key=key,
                partition=_partition_of(i),
                headers=headers,
                on_delivery=report,
                **extra,
            )
            producer.poll(0)
        assert producer.flush(30) == 0, "records still undelivered after 30 s"
    assert not errors, f"delivery failed: {errors[:3]}"
    return delivered


def check_contiguous(rows: list[Row]) -> None:
    """Each partition's offsets are 0..n-1 (the fixture's precondition, not the test)."""
    for p in range(PARTITIONS):
        offsets = sorted(r.offset for r in rows if r.partition == p)
        assert offsets == list(range(len(offsets))), f"partition {p} offsets {offsets[:10]}..."


# ---------------------------------------------------------------------------- Spark side


def to_rows(records: list[Any]) -> list[Row]:
    """Collected Spark rows (with an extra ``ts_ms`` column) -> Row, sorted by (partition, offset)."""
    out = []
    for r in records:
        headers = (
            None
            if r["headers"] is None
            else tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"])
        )
        out.append(
            Row(
                None if r["key"] is None else bytes(r["key"]),
                None if r["value"] is None else bytes(r["value"]),
                r["topic"],
                r["partition"],
                r["offset"],
                r["ts_ms"],
                r["timestampType"],
                headers,
            )
        )
    return sorted(out, key=lambda row: (row.topic, row.partition, row.offset))


def collect(df: Any) -> list[Row]:
    from pyspark.sql import functions as F

    return to_rows(df.withColumn("ts_ms", F.expr("unix_millis(timestamp)")).collect())


def by_position(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda row: (row.topic, row.partition, row.offset))


def assert_rows_equal(actual: list[Row], expected: list[Row]) -> None:
    expected = by_position(expected)
    assert len(actual) == len(expected), f"{len(actual)} rows read, {len(expected)} expected"
    for got, want in zip(actual, expected):
        assert got == want, f"row differs:\n  read     {got}\n  produced {want}"


def assert_schema(df: Any) -> None:
    assert df.columns == COLUMNS
    assert df.schema.simpleString() == SCHEMA


def reader(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    """``spark.read`` for ``topic`` with failOnDataLoss and headers on, plus ``options``."""
    r = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
    )
    for name, value in {**FAST_FAILURE, **options}.items():
        r = r.option(name, value)
    return r


def stream_reader(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    r = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
    )
    for name, value in {**FAST_FAILURE, **options}.items():
        r = r.option(name, value)
    return r


def run_available_now(writer: Any, timeout: float = 240) -> Any:
    query = writer.trigger(availableNow=True).start()
    try:
        finished = query.awaitTermination(timeout)
        assert finished, f"availableNow query still running after {timeout} s: {query.status}"
        assert query.exception() is None, query.exception()
    finally:
        if query.isActive:
            query.stop()
    return query


def offsets_from(rows: list[Row], partition: int, timestamp: int) -> int | None:
    """Kafka's ListOffsets by timestamp: the first offset whose timestamp >= ``timestamp``."""
    for row in by_position(rows):
        if row.partition == partition and row.timestamp >= timestamp:
            return row.offset
    return None


def rows_from(
    rows: list[Row],
    starts: dict[int, int | None],
    ends: dict[int, int | None] | None = None,
) -> list[Row]:
    """Rows with starts[p] <= offset < ends[p] (None start = nothing; None end = the end)."""
    ends = ends or {}
    return [
        r
        for r in rows
        if starts[r.partition] is not None
        and r.offset >= starts[r.partition]
        and (ends.get(r.partition) is None or r.offset < ends[r.partition])
    ]


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    from rmqkafka.adapter.embedded import EmbeddedBroker

    broker = EmbeddedBroker()
    with broker:
        yield broker.bootstrap_servers
    if broker.stderr:
        print(f"--- broker stderr ---\n{broker.stderr}")


@pytest.fixture(scope="module")
def topic(bootstrap: str) -> tuple[str, list[Row]]:
    name = f"spark-src-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name)
    rows = produce(bootstrap, name, range(COUNT))
    assert len(rows) == COUNT
    check_contiguous(rows)
    return name, rows


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None and _can_load_kafka_source(existing):
        yield existing  # a session made elsewhere that already has the connector: reuse it
        return
    # Jars reach the driver's class path only when the JVM starts: a JVM started earlier in
    # this process by a session without them (another test module) cannot load the source.
    late = (
        f"this process's JVM was started by an earlier SparkSession without {JARS_VARIABLE}; "
        "a JVM cannot add jars later: run this module in its own pytest process (or first), or "
        f"add {JARS_VARIABLE} to spark.jars where that session is built"
    )
    if existing is not None:
        pytest.fail(late, pytrace=False)
    jvm_was_running = SparkContext._gateway is not None
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rmqk-builtin-kafka-source")
        .config("spark.api.mode", "classic")
        .config("spark.jars", ",".join(str(p) for p in JARS))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    if not _can_load_kafka_source(session):
        session.stop()
        pytest.fail(
            late
            if jvm_was_running
            else f"Spark cannot load the kafka source from {JARS_VARIABLE}={_raw_jars!r}",
            pytrace=False,
        )
    try:
        yield session
    finally:
        session.stop()


def _can_load_kafka_source(session: Any) -> bool:
    from py4j.protocol import Py4JError

    try:
        jvm = session.sparkContext._jvm
        jvm.org.apache.spark.util.Utils.classForName(
            "org.apache.spark.sql.kafka010.KafkaSourceProvider", True, False
        )
        return True
    except Py4JError:  # ClassNotFoundException, wrapped
        return False


# ---------------------------------------------------------------------------- batch


@pytest.mark.parametrize("min_partitions", [None, 9], ids=["one-task-per-partition", "minPartitions-9"])
def test_batch_reads_every_record(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]], min_partitions: int | None
) -> None:
    """earliest..latest, failOnDataLoss, includeHeaders; with minPartitions=9 each Kafka
    partition is split into ~3 offset ranges, so executors start and stop mid-batch."""
    name, rows = topic
    options = {"startingOffsets": "earliest", "endingOffsets": "latest"}
    if min_partitions:
        options["minPartitions"] = str(min_partitions)
    df = reader(spark, bootstrap, name, **options).load()
    assert_schema(df)
    if min_partitions:
        assert df.rdd.getNumPartitions() >= 6, df.rdd.getNumPartitions()
    actual = collect(df)
    assert_rows_equal(actual, rows)
    assert {r.timestamp_type for r in actual} == {CREATE_TIME}


def test_batch_without_headers_has_seven_columns(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]]
) -> None:
    name, rows = topic
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", name)
        .option("failOnDataLoss", "true")
        .load()
    )
    assert df.columns == COLUMNS[:-1]
    assert df.count() == len(rows)


def test_batch_explicit_offsets_with_assign(spark: Any, bootstrap: str, topic: tuple[str, list[Row]]) -> None:
    """``assign`` plus JSON offsets: -2 = earliest, -1 = latest, ending offsets exclusive."""
    name, rows = topic
    starting = {name: {"0": 7, "1": -2, "2": 3}}
    ending = {name: {"0": 50, "1": -1, "2": 4}}
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({name: [0, 1, 2]}))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("failOnDataLoss", "true")
        .option("includeHeaders", "true")
    )
    for option, value in FAST_FAILURE.items():
        df = df.option(option, value)
    expected = rows_from(rows, {0: 7, 1: 0, 2: 3}, {0: 50, 1: None, 2: 4})
    assert_rows_equal(collect(df.load()), expected)


def test_batch_starting_and_ending_timestamp(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]]
) -> None:
    """startingTimestamp / endingTimestamp (global): ListOffsets by timestamp per partition;
    the start is inclusive, the end exclusive; a timestamp between two records picks the later."""
    name, rows = topic
    start = BASE_TS + 60 * 1000 + 500  # between records 60 and 61
    end = BASE_TS + 180 * 1000  # exactly record 180's timestamp
    df = reader(spark, bootstrap, name, startingTimestamp=str(start), endingTimestamp=str(end)).load()
    assert_schema(df)
    starts = {p: offsets_from(rows, p, start) for p in range(PARTITIONS)}
    ends = {p: offsets_from(rows, p, end) for p in range(PARTITIONS)}
    expected = rows_from(rows, starts, ends)
    assert expected and len(expected) < len(rows)
    assert {r.timestamp for r in expected} == {BASE_TS + i * 1000 for i in range(61, 180)}
    assert_rows_equal(collect(df), expected)


def test_batch_starting_offsets_by_timestamp(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]]
) -> None:
    """Per-partition timestamps: before everything, exactly a record's timestamp, and between two."""
    name, rows = topic
    p1 = by_position([r for r in rows if r.partition == 1])
    p2 = by_position([r for r in rows if r.partition == 2])
    stamps = {"0": BASE_TS - 10_000, "1": p1[9].timestamp, "2": p2[5].timestamp - 1}
    df = reader(spark, bootstrap, name, startingOffsetsByTimestamp=json.dumps({name: stamps})).load()
    assert_rows_equal(collect(df), rows_from(rows, {0: 0, 1: 9, 2: 5}))


def test_batch_starting_timestamp_past_the_end(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]]
) -> None:
    """No offset for a timestamp after every record: strategy "latest" reads nothing from that
    partition; the default strategy "error" fails the query."""
    name, rows = topic
    future = BASE_TS + 10 * COUNT * 1000
    stamps = {name: {"0": future, "1": BASE_TS, "2": future}}
    df = reader(
        spark,
        bootstrap,
        name,
        startingOffsetsByTimestamp=json.dumps(stamps),
        startingOffsetsByTimestampStrategy="latest",
    ).load()
    assert_rows_equal(collect(df), [r for r in rows if r.partition == 1])
    with pytest.raises(Exception, match="No offset matched"):
        reader(spark, bootstrap, name, startingOffsetsByTimestamp=json.dumps(stamps)).load().collect()


def test_batch_log_append_time_topic(spark: Any, bootstrap: str) -> None:
    """A LogAppendTime topic: timestampType 1 and the broker's clock in the timestamp column."""
    name = f"spark-lat-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    rows = produce(bootstrap, name, range(30), timestamps=False)
    after = int(time.time() * 1000)
    actual = collect(reader(spark, bootstrap, name).load())
    assert [r.offset for r in actual] == [r.offset for r in by_position(rows)]
    assert {r.timestamp_type for r in actual} == {LOG_APPEND_TIME}
    assert all(before - 1000 <= r.timestamp <= after + 1000 for r in actual), [r.timestamp for r in actual]

    def strip(rs: list[Row]) -> list[tuple[Any, ...]]:
        return [(r.key, r.value, r.partition, r.offset, r.headers) for r in rs]

    assert strip(actual) == strip(by_position(rows))


# ---------------------------------------------------------------------------- streaming


def test_streaming_available_now_memory_sink(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]], tmp_path: Path
) -> None:
    name, rows = topic
    df = stream_reader(spark, bootstrap, name).load()
    assert df.isStreaming
    assert_schema(df)
    sink = f"kafka_mem_{uuid.uuid4().hex[:8]}"
    run_available_now(
        df.writeStream.format("memory")
        .queryName(sink)
        .outputMode("append")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    assert_rows_equal(collect(spark.table(sink)), rows)


def test_streaming_available_now_in_chunks_foreach_batch(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]], tmp_path: Path
) -> None:
    """maxOffsetsPerTrigger splits the availableNow run into several micro-batches whose union
    is the topic, with no record twice; collected with foreachBatch."""
    name, rows = topic
    limit = COUNT // 4
    batches: dict[int, list[Row]] = {}

    def collect_batch(batch_df: Any, batch_id: int) -> None:
        batches[batch_id] = collect(batch_df)

    df = stream_reader(spark, bootstrap, name, maxOffsetsPerTrigger=str(limit)).load()
    run_available_now(
        df.writeStream.foreachBatch(collect_batch).option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    non_empty = [b for b in batches.values() if b]
    assert len(non_empty) >= COUNT // limit, {k: len(v) for k, v in batches.items()}
    # Spark prorates the limit over partitions and rounds a share below 1 up.
    assert all(len(b) <= limit + PARTITIONS for b in non_empty), {k: len(v) for k, v in batches.items()}
    assert_rows_equal(by_position([r for b in batches.values() for r in b]), rows)


def test_streaming_resumes_from_checkpoint(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    """A second availableNow run on the same checkpoint reads exactly the records produced since."""
    name = f"spark-resume-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name)
    first = produce(bootstrap, name, range(60))
    checkpoint = str(tmp_path / "checkpoint")

    def run() -> list[Row]:
        got: list[Row] = []
        df = stream_reader(spark, bootstrap, name).load()
        run_available_now(
            df.writeStream.foreachBatch(lambda b, _id: got.extend(collect(b))).option(
                "checkpointLocation", checkpoint
            )
        )
        return by_position(got)

    assert_rows_equal(run(), first)
    second = produce(bootstrap, name, range(60, 100))
    assert_rows_equal(run(), second)
    assert_rows_equal(run(), [])


# ---------------------------------------------------------------------------- views


def _first_h(row: Row) -> int | None:
    """The record's first ``h`` header as a number (what a SQL view's property ``h`` is)."""
    for key, value in row.headers or ():
        if key == "h":
            return int(value) if value is not None and value.isdigit() else None
    return None


def test_batch_and_streaming_read_a_view(
    spark: Any, bootstrap: str, topic: tuple[str, list[Row]], tmp_path: Path
) -> None:
    """A SQL view (a read-only topic the broker filters) read by the built-in source with
    failOnDataLoss=true: the offsets a view leaves out are gaps above log start, which Spark
    treats as invisible records, not as data loss."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name, rows = topic
    view = f"{name}-view"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"rmq.view.source": name, "rmq.view.sql": "h >= 30 AND h < 200"}
    admin.create_topics([NewTopic(view, -1, config=config)])[view].result(15)
    expected = [
        dataclasses.replace(r, topic=view) for r in rows if (h := _first_h(r)) is not None and 30 <= h < 200
    ]
    assert expected and len(expected) < len(rows)
    batch = reader(spark, bootstrap, view, startingOffsets="earliest", endingOffsets="latest").load()
    assert_rows_equal(collect(batch), expected)

    sink = f"kafka_view_{uuid.uuid4().hex[:8]}"
    run_available_now(
        stream_reader(spark, bootstrap, view, maxOffsetsPerTrigger=str(COUNT // 3)).load()
        .writeStream.format("memory")
        .queryName(sink)
        .outputMode("append")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    assert_rows_equal(collect(spark.table(sink)), expected)


def test_batch_reads_delayed_and_timed_records(spark: Any, bootstrap: str) -> None:
    """Records produced with DELAY / TIMER_DELAY_MS leave gaps in their batch's offsets and
    are delivered later at new offsets; with failOnDataLoss=true the built-in source reads
    every record once (the gaps are invisible records, not data loss)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    name = f"spark-delayed-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "enable.idempotence": True})
    for i in range(60):
        headers = [("DELAY", b"1")] if i % 3 == 1 else [("TIMER_DELAY_MS", b"1200")] if i % 3 == 2 else []
        producer.produce(name, b"v%d" % i, partition=0, headers=headers)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{name}-wait"})
    deadline = time.monotonic() + 30
    while consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10)[1] < 100:
        assert time.monotonic() < deadline, "the 40 parked records were not delivered in 30 s"
        time.sleep(0.2)
    consumer.close()
    rows = reader(spark, bootstrap, name, startingOffsets="earliest", endingOffsets="latest").load().collect()
    assert sorted(bytes(r["value"]) for r in rows) == sorted(b"v%d" % i for i in range(60))
    assert sorted(r["offset"] for r in rows if int(bytes(r["value"])[1:]) % 3 == 0) == list(range(0, 60, 3))


def test_read_committed_batch_and_stream(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    """kafka.isolation.level=read_committed with failOnDataLoss=true: the Java consumer skips
    aborted records and markers; batch and streaming reads end at the last stable offset
    while a transaction is open and read its records once it commits; read_uncommitted sees
    every data record."""
    from confluent_kafka import Producer

    name = f"spark-txn-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{name}-tx", "linger.ms": 5})
    producer.init_transactions(30)
    committed: list[bytes] = []
    everything: list[bytes] = []
    for r in range(6):
        producer.begin_transaction()
        values = [b"%d-%d" % (r, i) for i in range(10)]
        for i, value in enumerate(values):
            producer.produce(name, value, partition=i % 2)
        producer.flush(30)  # abort_transaction purges what is not sent yet
        everything += values
        if r % 3 == 1:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    producer.begin_transaction()
    pending = [b"pending-%d" % i for i in range(6)]
    for i, value in enumerate(pending):
        producer.produce(name, value, partition=i % 2)
    producer.flush(30)

    def values(df: Any) -> list[bytes]:
        return sorted(bytes(r["value"]) for r in df.collect())

    rc = {"kafka.isolation.level": "read_committed"}
    batch = {"startingOffsets": "earliest", "endingOffsets": "latest"}
    assert values(reader(spark, bootstrap, name, **batch, **rc).load()) == sorted(committed)
    assert values(reader(spark, bootstrap, name, **batch).load()) == sorted(everything + pending)

    got: list[bytes] = []
    checkpoint = str(tmp_path / "checkpoint")

    def run() -> list[bytes]:
        got.clear()
        run_available_now(
            stream_reader(spark, bootstrap, name, **rc).load()
            .writeStream.foreachBatch(lambda b, _id: got.extend(bytes(r["value"]) for r in b.collect()))
            .option("checkpointLocation", checkpoint)
        )
        return sorted(got)

    assert run() == sorted(committed)
    producer.commit_transaction(30)
    assert values(reader(spark, bootstrap, name, **batch, **rc).load()) == sorted(committed + pending)
    assert run() == sorted(pending)


def test_half_messages_are_invisible_until_committed(spark: Any, bootstrap: str) -> None:
    """RocketMQ half messages (TRAN_MSG) with failOnDataLoss=true: their offsets are gaps,
    not data loss; once committed each is read once, at its new offset."""
    from confluent_kafka import Producer

    name = f"spark-half-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(10):
        headers = [("TRAN_MSG", b"true"), ("PGROUP", b"g"), ("UNIQ_KEY", b"H%d" % i)] if i % 2 else []
        producer.produce(name, b"v%d" % i, partition=0, headers=headers)
    assert producer.flush(30) == 0

    def values() -> list[bytes]:
        df = reader(spark, bootstrap, name, startingOffsets="earliest", endingOffsets="latest").load()
        return sorted(bytes(r["value"]) for r in df.collect())

    assert values() == [b"v0", b"v2", b"v4", b"v6", b"v8"]
    for i in (1, 3):
        producer.produce(name, b"", partition=0, headers=[("TRAN_END", b"COMMIT"), ("PGROUP", b"g"),
                                                          ("UNIQ_KEY", b"H%d" % i)])
    assert producer.flush(30) == 0
    assert values() == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v6", b"v8"]
