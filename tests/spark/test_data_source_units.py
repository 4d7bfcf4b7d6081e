"""spark_connector without a JVM: option parsing, offset arithmetic, pickling, Arrow output.

The Spark-level behaviour is in test_data_source.py; these are the pure parts (Spark's
proration for maxOffsetsPerTrigger, minPartitions splitting, the option rules and their
messages) plus the executor's range read against a real broker, which is where Arrow
batches and data-loss handling happen.
"""

from __future__ import annotations

import itertools
import pickle
from typing import ClassVar

import pytest

pytest.importorskip("pyspark", reason="pyspark is not importable; pip install -e '.[test]'")
pytest.importorskip("pyarrow", reason="pyarrow is not importable; pip install -e '.[test]'")

from rmqkafka.spark_connector import errors
from rmqkafka.spark_connector.offsets import (
    OffsetRange,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from rmqkafka.spark_connector.options import parse_read_options, parse_write_options

BS = {"kafka.bootstrap.servers": "127.0.0.1:9"}


def read_opts(streaming: bool | None = False, **options: str):
    return parse_read_options({**BS, **options}, streaming=streaming)


# --- offsets ------------------------------------------------------------------------------


def test_offsets_json_is_canonical_and_round_trips() -> None:
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 1}
    as_json = offsets_to_json(offsets)
    assert list(as_json) == ["a", "b"]
    assert list(as_json["b"]) == ["2", "10"]  # numeric order, as Spark's JsonUtils
    assert offsets_from_json(as_json) == offsets
    assert offsets_from_json('{"t": {"0": -2, "1": -1}}') == {("t", 0): -2, ("t", 1): -1}


@pytest.mark.parametrize(
    "bad",
    ['{"t": [0, 1]}', '{"t": {"x": 1}}', '{"t": {"0": "5"}}', "[1]", "{not json"],
)
def test_offsets_json_rejects_other_shapes(bad: str) -> None:
    with pytest.raises(ValueError):
        offsets_from_json(bad)


def test_rate_limit_prorates_like_spark() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    end = {("t", 0): 100, ("t", 1): 50, ("t", 2): 101}
    # sizes 100, 50, 1 (total 151); limit 30 -> 19.87 -> 19, 9.93 -> 9, 0.199 -> ceil 1
    assert rate_limit(30, start, end, {}) == {("t", 0): 19, ("t", 1): 9, ("t", 2): 101}
    # a new partition starts at its earliest offset
    assert rate_limit(10, {}, {("n", 0): 50}, {("n", 0): 40}) == {("n", 0): 50}
    assert rate_limit(4, {}, {("n", 0): 50}, {("n", 0): 40}) == {("n", 0): 44}
    # nothing new: the end unchanged
    assert rate_limit(5, {("t", 0): 7}, {("t", 0): 7}, {}) == {("t", 0): 7}


def test_split_ranges_like_spark() -> None:
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges) == ranges[:2]  # empty ranges dropped
    parts = split_ranges(ranges, min_partitions=10)
    # 100/110*10 = 9.09 -> 9 parts; 10/110*10 = 0.9 -> 1 part
    assert [(p.partition, p.start, p.end) for p in parts if p.partition == 1] == [(1, 0, 10)]
    zero = [p for p in parts if p.partition == 0]
    assert len(zero) == 9 and zero[0].start == 0 and zero[-1].end == 100
    assert all(a.end == b.start for a, b in itertools.pairwise(zero))
    assert {p.size for p in zero} <= {11, 12}
    assert split_ranges(ranges, min_partitions=2) == ranges[:2]  # already enough
    capped = split_ranges(ranges, max_records_per_partition=30)
    assert [p.size for p in capped] == [25, 25, 25, 25, 10]


# --- options ------------------------------------------------------------------------------


def test_defaults_follow_spark() -> None:
    batch = read_opts(subscribe="a, b")
    assert batch.subscribe == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = read_opts(True, subscribePattern="ord.*")
    assert stream.starting.kind == "latest" and stream.ending is None
    assign = read_opts(assign='{"t": [1, 0], "u": [3]}', startingOffsets='{"t": {"0": -2}}')
    assert assign.assign == (("t", 0), ("t", 1), ("u", 3))
    # case-insensitive option names, Spark's timestamp precedence
    ts = read_opts(SUBSCRIBE="t", startingtimestamp="5", startingOffsets="earliest")
    assert (ts.starting.kind, ts.starting.timestamp) == ("timestamp", 5)


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "t", "assign": '{"t":[0]}'}, False, "exactly one of"),
        ({}, False, "exactly one of"),
        ({"assign": "{t: [0]}"}, False, "'assign' is not valid JSON"),
        ({"assign": '{"t": 0}'}, False, "topic -> partition list"),
        ({"subscribe": "t", "startingOffsets": "beginning"}, False, "'earliest', 'latest' or JSON"),
        ({"subscribe": "t", "startingOffsets": "{bad"}, False, "not valid JSON"),
        ({"subscribe": "t", "startingOffsets": "latest"}, False, "not valid for batch"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}, False, "-1 (latest)"),
        ({"subscribe": "t", "endingOffsets": "earliest"}, False, "not valid for batch"),
        ({"subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}, False, "-2 (earliest)"),
        ({"subscribe": "t", "endingOffsets": "latest"}, True, "not valid in streaming"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, False, "is invalid"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "positive integer"),
        ({"subscribe": "t", "minPartitions": "x"}, False, "positive integer"),
        ({"subscribe": "t", "failOnDataLoss": "yes"}, False, "'true' or 'false'"),
        ({"subscribe": "t", "startingTimestamp": "yesterday"}, False, "milliseconds"),
        ({"subscribePattern": "("}, False, "regular expression"),
        ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, False, "startingOffsets"),
        ({"subscribe": "t", "kafka.value.deserializer": "x"}, False, "not supported"),
        ({"subscribe": "t", "tags": "A", "filter": "a > 1"}, False, "exclude each other"),
        ({"subscribe": "t", "filter": "  "}, True, "option 'filter' is empty"),
        ({"subscribe": "t", "minOffsetsPerTrigger": "10"}, True, "not implemented"),
    ],
)
def test_bad_options_are_named(options: dict, streaming: bool, message: str) -> None:
    with pytest.raises(errors.KafkaOptionError, match=None) as caught:
        read_opts(streaming, **options)
    assert message in str(caught.value)


def test_bootstrap_servers_required_and_checked() -> None:
    with pytest.raises(errors.KafkaOptionError, match="kafka.bootstrap.servers"):
        parse_read_options({"subscribe": "t"}, streaming=False)
    with pytest.raises(errors.KafkaOptionError, match="not host:port"):
        parse_read_options({"kafka.bootstrap.servers": "localhost", "subscribe": "t"},
                           streaming=False)


def test_kafka_passthrough() -> None:
    opts = read_opts(
        subscribe="t",
        **{
            "kafka.client.id": "c1",
            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule'
            ' required username="u" password="p\\"w";',
        },
    )
    assert opts.client.kafka == {"client.id": "c1", "sasl.username": "u", "sasl.password": 'p\\"w'}
    write = parse_write_options({**BS, "topic": "out", "kafka.linger.ms": "20"})
    assert (write.topic, write.client.kafka) == ("out", {"linger.ms": "20"})
    with pytest.raises(errors.KafkaOptionError, match="key.serializer"):
        parse_write_options({**BS, "kafka.key.serializer": "x"})


# --- pickling -----------------------------------------------------------------------------


def test_every_class_pickles() -> None:
    from pyspark.sql.datasource import CaseInsensitiveDict

    from rmqkafka.spark_connector.reader import KafkaBatchReader, KafkaInputPartition
    from rmqkafka.spark_connector.schema import spark_schema
    from rmqkafka.spark_connector.source import KafkaDataSource
    from rmqkafka.spark_connector.stream_reader import KafkaStreamReader
    from rmqkafka.spark_connector.writer import (
        KafkaBatchWriter,
        KafkaCommitMessage,
        KafkaStreamWriter,
    )

    options = CaseInsensitiveDict({**BS, "subscribe": "t", "topic": "t"})
    source = KafkaDataSource(options)
    schema = spark_schema(False)
    stream = KafkaStreamReader(read_opts(True, subscribe="t"), schema)
    _ = stream.meta  # a driver-side client handle must not travel
    objects = [
        source,
        KafkaBatchReader(read_opts(subscribe="t"), schema),
        stream,
        KafkaInputPartition(OffsetRange("t", 0, 1, 2)),
        KafkaBatchWriter(parse_write_options(options), _value_schema()),
        KafkaStreamWriter(parse_write_options(options), _value_schema()),
        KafkaCommitMessage(3, {"t": 3}),
    ]
    for obj in objects:
        copy = pickle.loads(pickle.dumps(obj))
        assert type(copy) is type(obj)
    assert pickle.loads(pickle.dumps(stream))._meta is None


def _value_schema():
    from pyspark.sql.types import BinaryType, StructField, StructType

    return StructType([StructField("value", BinaryType())])


# --- the executor's read, against a real broker -------------------------------------------


@pytest.fixture(scope="module")
def loaded_broker():
    """A broker with topic ``r`` (1 partition): 300 records in batches of several codecs."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from rmqkafka.adapter.embedded import EmbeddedBroker

    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("r", 1)])["r"].result()
        for codec in ("none", "gzip", "zstd"):
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                                 "compression.type": codec, "linger.ms": 50})
            for i in range(100):
                producer.produce("r", key=b"%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
            producer.flush()
        yield broker, admin


def _read(broker, start: int, end: int, fail: bool = True, headers: bool = True, kafka: dict | None = None):
    from rmqkafka.spark_connector.options import ClientOptions
    from rmqkafka.spark_connector.range_read import read_range
    from rmqkafka.spark_connector.schema import arrow_schema, spark_schema

    return list(
        read_range(
            ClientOptions(broker.bootstrap_servers, dict(kafka or {})),
            OffsetRange("r", 0, start, end),
            arrow_schema(spark_schema(headers)),
            include_headers=headers,
            fail_on_data_loss=fail,
            group_id="units",
            poll_timeout_ms=10_000,
        )
    )


def test_read_range_yields_arrow_batches_of_exactly_the_range(loaded_broker) -> None:
    import pyarrow as pa

    from rmqkafka.spark_connector.schema import arrow_schema, spark_schema

    broker, _ = loaded_broker
    batches = _read(broker, 37, 251)  # starts and ends inside compressed batches
    assert batches and all(isinstance(b, pa.RecordBatch) for b in batches)
    assert all(b.schema.equals(arrow_schema(spark_schema(True))) for b in batches)
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(37, 251))
    assert table.column("key").to_pylist() == [b"%d" % (i % 100) for i in range(37, 251)]
    assert set(table.column("timestampType").to_pylist()) == {0}
    assert table.column("headers").to_pylist()[0] == [{"key": "h", "value": b"x"}]
    assert _read(broker, 5, 5) == []
    no_headers = pa.Table.from_batches(_read(broker, 0, 300, headers=False))
    assert no_headers.num_rows == 300 and "headers" not in no_headers.schema.names


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_read_range_with_either_group_protocol(loaded_broker, protocol) -> None:
    """The executor assigns its range and never joins a group, so ``kafka.group.protocol``
    (KIP-848's ``consumer`` included) changes nothing it reads."""
    import pyarrow as pa

    broker, _ = loaded_broker
    table = pa.Table.from_batches(_read(broker, 10, 60, kafka={"group.protocol": protocol}))
    assert table.column("offset").to_pylist() == list(range(10, 60))


def test_read_range_data_loss(loaded_broker) -> None:
    import pyarrow as pa
    from confluent_kafka import TopicPartition

    broker, admin = loaded_broker
    with pytest.raises(errors.DataLossError, match="ends at offset 300"):
        _read(broker, 290, 310)  # the log ends before the range does
    skipped = pa.Table.from_batches(_read(broker, 290, 310, fail=False))
    assert skipped.column("offset").to_pylist() == list(range(290, 300))
    admin.delete_records([TopicPartition("r", 0, 120)])[TopicPartition("r", 0, 120)].result()
    with pytest.raises(errors.DataLossError, match=r"out of range: the partition now holds \[120, 300\)"):
        _read(broker, 100, 130)
    rest = pa.Table.from_batches(_read(broker, 100, 130, fail=False))
    assert rest.column("offset").to_pylist() == list(range(120, 130))
    assert _read(broker, 100, 110, fail=False) == []


def test_unreachable_broker_fails_fast() -> None:
    import socket
    import time

    from rmqkafka.spark_connector.client import Metadata
    from rmqkafka.spark_connector.options import ClientOptions

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    began = time.monotonic()
    with pytest.raises(errors.BrokerUnreachableError, match="cannot connect"):
        Metadata(ClientOptions(f"127.0.0.1:{port}")).topics()
    assert time.monotonic() - began < 3


# --- gaps: offsets without records are not data loss --------------------------------------


class _FakeConsumer:
    """A scripted partition for read_range: record ``batches`` (lists of offsets) and a log
    end ``hwm``. Like a broker, it returns whole batches, so the first may start before the
    requested offset, and an end-of-log event at ``hwm``."""

    batches: ClassVar[list[list[int]]] = []
    hwm: ClassVar[int] = 0

    def __init__(self, config: dict) -> None:
        self.pending: list = []

    def assign(self, tps: list) -> None:
        from confluent_kafka import KafkaError, Message

        position = tps[0].offset
        out = []
        for batch in self.batches:
            if batch[-1] >= position:
                out += [Message(topic="g", partition=0, offset=o, key=b"%d" % o, value=b"v",
                                timestamp=(1, o)) for o in batch]
        out.append(Message(topic="g", partition=0, offset=self.hwm,
                           error=KafkaError(KafkaError._PARTITION_EOF)))
        self.pending = out

    def consume(self, num: int, timeout: float) -> list:
        out, self.pending = self.pending[:num], self.pending[num:]
        return out

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("batches", "hwm", "start", "end", "expected"),
    [
        ([[0, 1, 2, 3, 4], [8, 9]], 10, 3, 7, [3, 4]),  # a gap inside the range
        ([[0, 1, 2, 3, 4], [8, 9]], 10, 5, 8, []),  # the whole range is a gap
        ([[0, 1, 2, 3, 4]], 8, 3, 8, [3, 4]),  # a gap at the log end (e.g. txn markers)
        ([[0, 1, 2], [3, 4, 5, 6]], 7, 4, 6, [4, 5]),  # starts and ends inside batches
    ],
)
def test_gaps_are_not_data_loss(monkeypatch, batches, hwm, start, end, expected) -> None:
    import confluent_kafka
    import pyarrow as pa

    from rmqkafka.spark_connector import range_read
    from rmqkafka.spark_connector.options import ClientOptions
    from rmqkafka.spark_connector.schema import arrow_schema, spark_schema

    monkeypatch.setattr(_FakeConsumer, "batches", batches)
    monkeypatch.setattr(_FakeConsumer, "hwm", hwm)
    monkeypatch.setattr(confluent_kafka, "Consumer", _FakeConsumer)
    monkeypatch.setattr(range_read, "probe", lambda client: None)

    def read(fail: bool = True) -> list[int]:
        got = range_read.read_range(
            ClientOptions("127.0.0.1:9"), OffsetRange("g", 0, start, end),
            arrow_schema(spark_schema(False)), include_headers=False,
            fail_on_data_loss=fail, group_id="g", poll_timeout_ms=1000,
        )
        return [o for b in got for o in pa.Table.from_batches([b]).column("offset").to_pylist()]

    assert read() == expected
    # the same log ending before the range does is data loss
    monkeypatch.setattr(_FakeConsumer, "hwm", start)
    monkeypatch.setattr(_FakeConsumer, "batches", [b for b in batches if b[-1] < start] or [[0]])
    with pytest.raises(errors.DataLossError, match=f"ends at offset {start}"):
        read()
    assert read(fail=False) == []
