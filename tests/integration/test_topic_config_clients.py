"""Issue 7: every Kafka topic config is accepted, validated as Kafka does, stored and
reported; compression.type re-encodes batches on append; message.timestamp.before/after.max.ms
refuse out-of-range CreateTime records with INVALID_TIMESTAMP.

Driven through a real broker process with confluent-kafka's and kafka-python's clients and,
for the bytes on the wire, the raw client (rawkafka).
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from crc32c import crc32c
from rawkafka import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    ErrorCode,
    KafkaRaw,
    make_batch,
    start_broker,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WAIT = 20.0
DESCRIBE_CONFIGS, CREATE_TOPICS = 32, 19
TOPIC_RESOURCE = 2
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "LONG": 5, "DOUBLE": 6, "LIST": 7}
TOPIC_CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
LONG_MAX = str(2**63 - 1)

# A value other than the default for every topic config, and what the broker stores for it.
EVERY_CONFIG = {
    "cleanup.policy": ("compact, delete", "compact,delete"),
    "compression.gzip.level": ("9", "9"),
    "compression.lz4.level": ("12", "12"),
    "compression.type": ("zstd", "zstd"),
    "compression.zstd.level": ("-5", "-5"),
    "delete.retention.ms": ("1000", "1000"),
    "file.delete.delay.ms": ("1", "1"),
    "flush.messages": ("1", "1"),
    "flush.ms": ("10", "10"),
    "follower.replication.throttled.replicas": ("0:0", "0:0"),
    "index.interval.bytes": ("100", "100"),
    "leader.replication.throttled.replicas": ("*", "*"),
    "local.retention.bytes": ("-1", "-1"),
    "local.retention.ms": ("-1", "-1"),
    "max.compaction.lag.ms": ("100000", "100000"),
    "max.message.bytes": ("2000000", "2000000"),
    "message.downconversion.enable": ("FALSE", "false"),
    "message.format.version": ("2.8", "2.8"),
    "message.timestamp.after.max.ms": ("86400000", "86400000"),
    "message.timestamp.before.max.ms": ("86400000", "86400000"),
    "message.timestamp.difference.max.ms": ("172800000", "172800000"),
    "message.timestamp.type": ("CreateTime", "CreateTime"),
    "min.cleanable.dirty.ratio": ("0.75", "0.75"),
    "min.compaction.lag.ms": ("10", "10"),
    "min.insync.replicas": ("1", "1"),
    "preallocate": ("true", "true"),
    "remote.log.copy.disable": ("true", "true"),
    "remote.log.delete.on.disable": ("true", "true"),
    "remote.storage.enable": ("false", "false"),
    "retention.bytes": ("1000000", "1000000"),
    "retention.ms": ("3600000", "3600000"),
    "segment.bytes": ("1048576", "1048576"),
    "segment.index.bytes": ("4096", "4096"),
    "segment.jitter.ms": ("5", "5"),
    "segment.ms": ("60000", "60000"),
    "unclean.leader.election.enable": ("true", "true"),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with start_broker(tmp_path_factory.mktemp("topic-configs") / "data") as b:
        yield b


@pytest.fixture
def conn(broker):
    with KafkaRaw(broker.host, broker.port) as c:
        yield c


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def new_name(prefix: str = "tc") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def topic_with(conn: KafkaRaw, **configs: str) -> str:
    name = new_name()
    conn.create_topic(name, configs={k.replace("_", "."): v for k, v in configs.items()})
    return name


def described(admin: AdminClient, topic: str) -> dict:
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(WAIT)


def now_ms() -> int:
    return int(time.time() * 1000)


def stored_batches(data: bytes) -> list[bytes]:
    """The whole batches of a Fetch response's records, as stored."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if pos + size > len(data):
            break
        out.append(data[pos : pos + size])
        pos += size
    return out


def codecs_stored(conn: KafkaRaw, topic: str) -> list[int]:
    batches = stored_batches(conn.fetch(topic, 0, 0).records or b"")
    for batch in batches:
        assert struct.unpack_from(">I", batch, 17)[0] == crc32c(batch[21:])
    return [struct.unpack_from(">h", b, 21)[0] & 0x07 for b in batches]


# --- accepted, stored, reported --------------------------------------------------------------


def test_create_with_every_config_and_describe(conn, admin):
    name = new_name()
    spec = NewTopic(name, 1, 1, config={k: given for k, (given, _) in EVERY_CONFIG.items()})
    assert admin.create_topics([spec], validate_only=True)[name].result(WAIT) is None
    assert admin.create_topics([spec])[name].result(WAIT) is None
    configs = described(admin, name)
    assert set(configs) == set(EVERY_CONFIG)
    for key, (_, stored) in EVERY_CONFIG.items():
        entry = configs[key]
        assert (entry.value, entry.source) == (stored, ConfigSource.DYNAMIC_TOPIC_CONFIG.value), key
        assert not entry.is_sensitive and not entry.is_read_only


def test_defaults_are_reported_as_defaults(conn, admin):
    configs = described(admin, topic_with(conn))
    assert len(configs) == len(EVERY_CONFIG)
    assert all(e.source == ConfigSource.DEFAULT_CONFIG.value for e in configs.values())
    assert configs["compression.type"].value == "producer"
    assert configs["message.timestamp.after.max.ms"].value == "3600000"
    assert configs["min.cleanable.dirty.ratio"].value == "0.5"
    assert configs["flush.ms"].value == LONG_MAX


def test_describe_configs_types_documentation_and_synonyms(conn):
    topic = topic_with(conn, retention_ms="5000")
    response = conn.request(
        DESCRIBE_CONFIGS,
        4,
        resources=[dict(resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=None)],
        include_synonyms=True,
        include_documentation=True,
    )
    (result,) = response.results
    entries = {c.name: c for c in result.configs}
    assert set(entries) == set(EVERY_CONFIG)
    from rmqkafka.adapter.topic_configs import SPECS

    for name, entry in entries.items():
        assert entry.config_type == CONFIG_TYPES[SPECS[name].kind], name
        assert entry.documentation == SPECS[name].doc, name
        assert not entry.is_sensitive and not entry.read_only
    assert "Stored and reported only" in entries["segment.index.bytes"].documentation
    assert "Applied" in entries["delete.retention.ms"].documentation
    assert "Applied" in entries["compression.type"].documentation
    assert [(s.name, s.value, s.source) for s in entries["retention.ms"].synonyms] == [
        ("retention.ms", "5000", 1),
        ("log.retention.ms", "604800000", 5),
    ]


def test_create_topics_response_carries_every_config(conn):
    name = new_name()
    response = conn.create_topics({name: 1}, configs={"flush.ms": "7", "cleanup.policy": "compact"})
    (topic,) = response.topics
    assert topic.error_code == ErrorCode.none
    configs = {c.name: (c.value, c.config_source) for c in topic.configs}
    assert set(configs) == set(EVERY_CONFIG)
    assert configs["flush.ms"] == ("7", 1)
    assert configs["cleanup.policy"] == ("compact", 1)
    assert configs["delete.retention.ms"] == ("86400000", 5)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("delete.retention.ms", "-1", "Invalid value -1 for configuration delete.retention.ms: Value must be at least 0"),
        ("flush.ms", "often", "Invalid value often for configuration flush.ms: Not a number of type LONG"),
        (
            "min.cleanable.dirty.ratio", "2",
            "Invalid value 2 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            "compression.type", "brotli",
            ("Invalid value brotli for configuration compression.type: String must be one of: "
            "uncompressed, zstd, lz4, snappy, gzip, producer"),
        ),
        (
            "compression.zstd.level", "99",
            "Invalid value 99 for configuration compression.zstd.level: Value must be no more than 22",
        ),
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ],
)
def test_bad_values_are_refused_with_kafkas_message(conn, admin, name, value, message):
    topic = new_name()
    response = conn.create_topics({topic: 1}, configs={name: value}, validate_only=True)
    (result,) = response.topics
    assert (result.error_code, result.error_message) == (ErrorCode.invalid_config, message)
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic(topic, 1, 1, config={name: value})])[topic].result(WAIT)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert message in info.value.args[0].str()
    assert conn.metadata([topic], allow_auto_topic_creation=False).topics[0].error_code == (
        ErrorCode.unknown_topic_or_partition
    )


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_and_incremental_alter(conn, admin):
    topic = topic_with(conn)
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("delete.retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("flush.messages", "10", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("compression.type", "lz4", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    assert admin.incremental_alter_configs([resource])[resource].result(WAIT) is None
    configs = described(admin, topic)
    assert {k: configs[k].value for k in ("delete.retention.ms", "flush.messages", "cleanup.policy", "compression.type")} == {
        "delete.retention.ms": "1000",
        "flush.messages": "10",
        "cleanup.policy": "delete,compact",
        "compression.type": "lz4",
    }
    legacy = ConfigResource("topic", topic, set_config={"flush.ms": "99", "segment.jitter.ms": "3"})
    assert admin.alter_configs([legacy])[legacy].result(WAIT) is None
    overrides = {k: e.value for k, e in described(admin, topic).items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert overrides == {"flush.ms": "99", "segment.jitter.ms": "3"}  # AlterConfigs replaces all
    bad = ConfigResource("topic", topic, set_config={"min.compaction.lag.ms": "9", "max.compaction.lag.ms": "1"})
    with pytest.raises(KafkaException) as info:
        admin.alter_configs([bad])[bad].result(WAIT)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "conflict topic config setting min.compaction.lag.ms (9) > max.compaction.lag.ms (1)" in info.value.args[0].str()


def test_kafka_python_admin_round_trip(broker, conn):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType
    from kafka.admin import NewTopic as KpTopic

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        name = new_name()
        client.create_topics([KpTopic(name, 1, 1, topic_configs={"compression.type": "gzip", "flush.ms": "5"})])
        described_ = client.describe_configs([KpResource(ConfigResourceType.TOPIC, name)], config_filter="all")
        values = {k: v["value"] for k, v in described_["topic"][name].items()}
    finally:
        client.close()
    assert values["compression.type"] == "gzip" and values["flush.ms"] == "5"
    assert len(values) == len(EVERY_CONFIG)


# --- compression.type ------------------------------------------------------------------------


def client_records(n: int) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]], int]]:
    base = now_ms() - 60_000
    return [
        (
            None if i % 7 == 0 else b"key-%d" % i,
            b"value-%d " % i + b"x" * (i % 50),
            [("h", b"%d" % i)] if i % 3 else [],
            base + i,
        )
        for i in range(n)
    ]


def kp_produce(bootstrap: str, topic: str, records, codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20, acks="all", batch_size=4096
    )
    try:
        for key, value, headers, ts in records:
            producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=ts, partition=0)
        producer.flush(WAIT)
    finally:
        producer.close()


def ck_produce(bootstrap: str, topic: str, records, codec: str, **extra) -> list:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20, "batch.num.messages": 50, **extra}
    )
    errors: list = []
    for key, value, headers, ts in records:
        producer.produce(
            topic, key=key, value=value, headers=headers or None, timestamp=ts, partition=0,
            on_delivery=lambda err, msg: errors.append(err) if err is not None else None,
        )
        producer.poll(0)
    assert producer.flush(WAIT) == 0
    return errors


def ck_read(bootstrap: str, topic: str, count: int) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": new_name("g"), "enable.auto.commit": False, "check.crcs": True}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple] = []
        deadline = time.monotonic() + WAIT
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(count - len(out), 0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), msg.key(), msg.value(), list(msg.headers() or []), msg.timestamp()[1]))
        return out
    finally:
        consumer.close()


def kp_read(bootstrap: str, topic: str, count: int) -> list[tuple]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, check_crcs=True)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[tuple] = []
        deadline = time.monotonic() + WAIT
        while len(out) < count and time.monotonic() < deadline:
            for msgs in consumer.poll(500).values():
                out.extend((m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in msgs)
        return out
    finally:
        consumer.close()


def expected(records) -> list[tuple]:
    return [(i, k, v, list(h), ts) for i, (k, v, h, ts) in enumerate(records)]


@pytest.mark.parametrize("producer", ["kafka-python", "confluent"])
def test_zstd_topic_recompresses_gzip_batches(broker, conn, producer):
    topic = topic_with(conn, compression_type="zstd", compression_zstd_level="10")
    records = client_records(300)
    if producer == "kafka-python":
        kp_produce(broker.bootstrap_servers, topic, records, "gzip")
    else:
        assert ck_produce(broker.bootstrap_servers, topic, records, "gzip") == []
    codecs = codecs_stored(conn, topic)
    assert len(codecs) > 1 and set(codecs) == {ZSTD}
    want = expected(records)
    assert [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in conn.fetch_all(topic, 0)] == want
    assert ck_read(broker.bootstrap_servers, topic, len(records)) == want
    assert kp_read(broker.bootstrap_servers, topic, len(records)) == want


@pytest.mark.parametrize("codec", ["lz4", "snappy", "zstd"])
def test_uncompressed_topic_stores_batches_uncompressed(broker, conn, codec):
    topic = topic_with(conn, compression_type="uncompressed")
    records = client_records(120)
    assert ck_produce(broker.bootstrap_servers, topic, records, codec) == []
    assert set(codecs_stored(conn, topic)) == {NONE}
    assert ck_read(broker.bootstrap_servers, topic, len(records)) == expected(records)


@pytest.mark.parametrize("target", list(TOPIC_CODECS))
def test_every_source_codec_into_every_topic_codec(broker, conn, target):
    """Raw batches of every codec into a topic of each codec: what is stored has the topic's
    codec, and librdkafka (CRC checked) and kafka-python read exactly what was sent."""
    topic = topic_with(conn, compression_type=target)
    sent = []
    for source in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        values = [b"%d-%d " % (source, i) + b"y" * 200 for i in range(20)]
        keys = [None if i % 2 else b"k%d" % i for i in range(20)]
        headers = [[("src", b"%d" % source)] for _ in range(20)]
        conn.produce_ok(topic, 0, make_batch(values, compression=source, keys=keys, headers=headers))
        sent += list(zip(keys, values))
    assert set(codecs_stored(conn, topic)) == {TOPIC_CODECS[target]}
    got = ck_read(broker.bootstrap_servers, topic, len(sent))
    assert [(k, v) for _, k, v, _, _ in got] == sent
    assert [(k, v) for _, k, v, _, _ in kp_read(broker.bootstrap_servers, topic, len(sent))] == sent


def test_producer_topic_keeps_every_codec(conn):
    topic = topic_with(conn)
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        conn.produce_ok(topic, 0, make_batch(3, compression=codec))
    assert codecs_stored(conn, topic) == [NONE, GZIP, SNAPPY, LZ4, ZSTD]


def test_idempotent_producer_to_recompressing_topic(broker, conn):
    topic = topic_with(conn, compression_type="lz4")
    records = client_records(2000)
    errors = ck_produce(broker.bootstrap_servers, topic, records, "gzip", **{"enable.idempotence": True, "acks": "all"})
    assert errors == []
    assert set(codecs_stored(conn, topic)) == {LZ4}
    got = ck_read(broker.bootstrap_servers, topic, len(records))
    assert got == expected(records)  # every record once, in order


def test_idempotent_retry_of_a_recompressed_batch_is_a_duplicate(conn):
    topic = topic_with(conn, compression_type="zstd")
    pid = conn.init_producer_id().producer_id
    first = make_batch(3, compression=GZIP, producer_id=pid, producer_epoch=0, base_sequence=0)
    assert conn.produce_ok(topic, 0, first) == 0
    assert conn.produce_ok(topic, 0, first) == 0  # the retry is answered with the first offset
    skipped = make_batch(1, compression=GZIP, producer_id=pid, producer_epoch=0, base_sequence=5)
    assert conn.produce(topic, 0, skipped).error_code == ErrorCode.out_of_order_sequence_number
    assert conn.produce_ok(topic, 0, make_batch(2, producer_id=pid, producer_epoch=0, base_sequence=3)) == 3
    batches = stored_batches(conn.fetch(topic, 0, 0).records)
    assert [struct.unpack_from(">qhi", b, 43) for b in batches] == [(pid, 0, 0), (pid, 0, 3)]
    assert [r.offset for r in conn.fetch_all(topic, 0)] == [0, 1, 2, 3, 4]


def test_max_message_bytes_applies_to_the_batch_as_received_and_as_stored(conn):
    roomy = make_batch([b"z" * 20_000], compression=GZIP)  # ~100 bytes sent, 20 KB uncompressed
    topic = topic_with(conn, compression_type="uncompressed", max_message_bytes="10000")
    entry = conn.produce(topic, 0, roomy)
    assert entry.error_code == ErrorCode.message_too_large
    assert "after recompression to none" in entry.error_message
    topic = topic_with(conn, compression_type="zstd", max_message_bytes="10000")
    entry = conn.produce(topic, 0, make_batch([b"z" * 20_000]))  # would fit once compressed
    assert entry.error_code == ErrorCode.message_too_large
    assert conn.produce_ok(topic, 0, roomy) == 0


def test_broker_compression_type_is_the_topic_default(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("compression.type=snappy\n")
    b = broker_factory(config_file=config)
    with KafkaRaw(b.host, b.port) as c:
        topic = topic_with(c)
        c.produce_ok(topic, 0, make_batch(3, compression=GZIP))
        assert codecs_stored(c, topic) == [SNAPPY]
        producer_topic = topic_with(c, compression_type="producer")
        c.produce_ok(producer_topic, 0, make_batch(3, compression=GZIP))
        assert codecs_stored(c, producer_topic) == [GZIP]
    entry = described(AdminClient({"bootstrap.servers": b.bootstrap_servers}), topic)["compression.type"]
    assert (entry.value, entry.source) == ("snappy", ConfigSource.STATIC_BROKER_CONFIG.value)
    with KafkaRaw(b.host, b.port) as c:  # a dynamic broker config changes the default at once (issue 21)
        response = c.request(44, 1, validate_only=False, resources=[dict(
            resource_type=4, resource_name="0", configs=[dict(name="compression.type", config_operation=0, value="lz4")])])
        assert response.responses[0].error_code == ErrorCode.none
        c.produce_ok(topic, 0, make_batch(3, compression=GZIP))
        assert codecs_stored(c, topic) == [SNAPPY, LZ4]
    entry = described(AdminClient({"bootstrap.servers": b.bootstrap_servers}), topic)["compression.type"]
    assert (entry.value, entry.source) == ("lz4", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


# --- timestamps ------------------------------------------------------------------------------


def test_timestamps_outside_the_bounds_are_refused(conn):
    topic = topic_with(conn, message_timestamp_before_max_ms="60000", message_timestamp_after_max_ms="60000")
    now = now_ms()
    bad = make_batch(3, timestamps=[now, now - 3_600_000, now + 3_600_000])
    entry = conn.produce(topic, 0, bad)
    assert entry.error_code == ErrorCode.invalid_timestamp
    assert entry.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in entry.record_errors] == [1, 2]
    message = entry.record_errors[0].batch_index_error_message
    assert message.startswith(f"Timestamp {now - 3_600_000} of message with offset 1 is out of range. ")
    low, high = map(int, message.split("within [")[1].rstrip("]").split(", "))
    assert high - low == 120_000 and abs(low + 60_000 - now) < 30_000
    assert conn.high_watermark(topic) == 0
    # A request is appended whole or not at all; good batches alone go in.
    assert conn.produce(topic, 0, make_batch(1, timestamps=[now]) + bad).error_code == ErrorCode.invalid_timestamp
    assert conn.produce_ok(topic, 0, make_batch(2, timestamps=[now, now - 30_000])) == 0
    # Records without a timestamp (-1) are exempt, as in Kafka.
    assert conn.produce_ok(topic, 0, make_batch(1, timestamps=[-1])) == 2
    # Older Produce versions have no record errors, but the same error code.
    assert conn.produce(topic, 0, bad, version=7).error_code == ErrorCode.invalid_timestamp


def test_default_refuses_timestamps_more_than_an_hour_ahead(conn):
    topic = topic_with(conn)
    now = now_ms()
    assert conn.produce(topic, 0, make_batch(1, timestamps=[now + 2 * 3_600_000])).error_code == (
        ErrorCode.invalid_timestamp
    )
    assert conn.produce_ok(topic, 0, make_batch(2, timestamps=[now + 60_000, 1])) == 0  # the past is fine


def test_log_append_time_ignores_the_bounds(conn):
    topic = topic_with(conn, message_timestamp_type="LogAppendTime", message_timestamp_after_max_ms="0")
    entry = conn.produce(topic, 0, make_batch(1, timestamps=[now_ms() + 10 * 3_600_000]))
    assert entry.error_code == ErrorCode.none and entry.log_append_time is not None


def test_difference_max_ms_stands_in_for_unset_bounds(conn):
    topic = topic_with(conn, message_timestamp_difference_max_ms="60000")
    now = now_ms()
    assert conn.produce(topic, 0, make_batch(1, timestamps=[now - 3_600_000])).error_code == ErrorCode.invalid_timestamp
    assert conn.produce(topic, 0, make_batch(1, timestamps=[now + 600_000])).error_code == ErrorCode.invalid_timestamp
    assert conn.produce_ok(topic, 0, make_batch(1, timestamps=[now - 1000])) == 0


def test_clients_see_invalid_timestamp(broker, conn):
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError

    topic = topic_with(conn, message_timestamp_before_max_ms="1000")
    old = now_ms() - 3_600_000
    errors = ck_produce(broker.bootstrap_servers, topic, [(b"k", b"v", [], old)], "none", retries=0)
    assert [e.code() for e in errors] == [KafkaError.INVALID_TIMESTAMP]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0)
    try:
        with pytest.raises(InvalidTimestampError):
            producer.send(topic, b"v", timestamp_ms=old, partition=0).get(timeout=WAIT)
    finally:
        producer.close()
    assert conn.high_watermark(topic) == 0
