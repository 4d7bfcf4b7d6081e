"""adapter/topic_configs.py: every Kafka topic config name, Kafka's parsing, validation and
messages; config sources; and how the Produce handler turns configs into append options."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from rmqkafka.adapter.config import AdapterConfig
from rmqkafka.adapter.handlers.produce import append_options
from rmqkafka.adapter.topic_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    LONG_MAX,
    RETRY_SPECS,
    SPECS,
    STATIC_BROKER_CONFIG,
    ConfigSpec,
    InvalidConfig,
    effective,
    register,
    source_of,
    synonyms_of,
    specs_for,
    validate_topic_configs,
)
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.recompress import GZIP, LZ4, NONE, SNAPPY, ZSTD, Compression

# Kafka 3.9's LogConfig names; 4.x has the same less the three 3.x-only ones marked.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy": "LIST",
    "compression.gzip.level": "INT",
    "compression.lz4.level": "INT",
    "compression.type": "STRING",
    "compression.zstd.level": "INT",
    "delete.retention.ms": "LONG",
    "file.delete.delay.ms": "LONG",
    "flush.messages": "LONG",
    "flush.ms": "LONG",
    "follower.replication.throttled.replicas": "LIST",
    "index.interval.bytes": "INT",
    "leader.replication.throttled.replicas": "LIST",
    "local.retention.bytes": "LONG",
    "local.retention.ms": "LONG",
    "max.compaction.lag.ms": "LONG",
    "max.message.bytes": "INT",
    "message.downconversion.enable": "BOOLEAN",  # 3.x
    "message.format.version": "STRING",  # 3.x
    "message.timestamp.after.max.ms": "LONG",
    "message.timestamp.before.max.ms": "LONG",
    "message.timestamp.difference.max.ms": "LONG",  # 3.x
    "message.timestamp.type": "STRING",
    "min.cleanable.dirty.ratio": "DOUBLE",
    "min.compaction.lag.ms": "LONG",
    "min.insync.replicas": "INT",
    "preallocate": "BOOLEAN",
    "remote.log.copy.disable": "BOOLEAN",
    "remote.log.delete.on.disable": "BOOLEAN",
    "remote.storage.enable": "BOOLEAN",
    "retention.bytes": "LONG",
    "retention.ms": "LONG",
    "segment.bytes": "INT",
    "segment.index.bytes": "INT",
    "segment.jitter.ms": "LONG",
    "segment.ms": "LONG",
    "unclean.leader.election.enable": "BOOLEAN",
}

# Kafka's defaults where no broker setting of ours stands in.
KAFKA_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": str(LONG_MAX),
    "flush.ms": str(LONG_MAX),
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": str(LONG_MAX),
    "max.message.bytes": "1048588",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": str(LONG_MAX),
    "message.timestamp.difference.max.ms": str(LONG_MAX),
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
}

A = AdapterConfig()
S = StorageConfig(data_dir=Path("/nonexistent"))


def test_every_kafka_topic_config_is_known_with_its_type():
    assert {name: spec.kind for name, spec in SPECS.items()} == KAFKA_TOPIC_CONFIGS


def test_rocketmq_topic_configs_only_on_retry_topics():
    assert "rmq.max.reconsume.times" not in SPECS
    assert effective("rmq.max.reconsume.times", {}, A, S) == "-1"
    assert "rmq.max.reconsume.times" in specs_for("rmq_retry.g")
    assert "rmq.max.reconsume.times" not in specs_for("orders")
    assert validate_topic_configs({"rmq.max.reconsume.times": "3"}, "rmq_retry.g") == {"rmq.max.reconsume.times": "3"}
    with pytest.raises(InvalidConfig, match="-2"):
        validate_topic_configs({"rmq.max.reconsume.times": "-2"}, "rmq_retry.g")
    with pytest.raises(InvalidConfig, match="only to retry topics"):
        validate_topic_configs({"rmq.max.reconsume.times": "3"}, "orders")


@pytest.mark.parametrize("name", sorted(KAFKA_TOPIC_CONFIGS))
def test_default_is_kafkas_and_valid(name):
    default = effective(name, {}, A, S)
    assert default == KAFKA_DEFAULTS[name]
    assert validate_topic_configs({name: default}) == {name: default}


@pytest.mark.parametrize("name", sorted(KAFKA_TOPIC_CONFIGS))
def test_documentation_says_whether_it_is_applied(name):
    spec = SPECS[name]
    if spec.applied:
        assert "Applied" in spec.doc
    else:
        assert "Stored and reported only" in spec.doc or "Only false is accepted" in spec.doc


@pytest.mark.parametrize(
    ("name", "given", "stored"),
    [
        ("preallocate", " TRUE ", "true"),
        ("unclean.leader.election.enable", "False", "false"),
        ("retention.ms", " +42 ", "42"),
        ("retention.bytes", "-5", "-5"),  # retention.bytes has no lower bound
        ("retention.ms", "-1", "-1"),
        ("cleanup.policy", "compact , delete", "compact,delete"),
        ("cleanup.policy", "compact", "compact"),
        ("cleanup.policy", "", ""),  # an empty list is valid (ValidList.in)
        ("cleanup.policy", "delete,delete", "delete,delete"),
        ("min.cleanable.dirty.ratio", ".25", "0.25"),
        ("min.cleanable.dirty.ratio", "1", "1.0"),
        ("min.cleanable.dirty.ratio", "5e-1", "0.5"),
        ("compression.type", "zstd", "zstd"),
        ("compression.type", " uncompressed ", "uncompressed"),
        ("compression.gzip.level", "-1", "-1"),
        ("compression.gzip.level", "9", "9"),
        ("compression.lz4.level", "17", "17"),
        ("compression.zstd.level", "-131072", "-131072"),
        ("compression.zstd.level", "22", "22"),
        ("segment.bytes", "1048576", "1048576"),
        ("max.message.bytes", "0", "0"),
        ("max.message.bytes", str(2**31 - 1), str(2**31 - 1)),
        ("flush.messages", str(LONG_MAX), str(LONG_MAX)),
        ("flush.ms", "0", "0"),
        ("leader.replication.throttled.replicas", "*", "*"),
        ("follower.replication.throttled.replicas", "0:0, 1:0", "0:0,1:0"),
        ("local.retention.ms", "-2", "-2"),
        ("message.format.version", "2.8", "2.8"),
        ("message.format.version", "0.10.2-IV0", "0.10.2-IV0"),
        ("message.format.version", "3.0-IV1", "3.0-IV1"),
        ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
        ("remote.storage.enable", "false", "false"),
    ],
)
def test_values_are_stored_in_kafkas_canonical_form(name, given, stored):
    assert validate_topic_configs({name: given}) == {name: stored}


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("retention.ms", "-7", "Value must be at least -1"),
        ("retention.ms", "soon", "Not a number of type LONG"),
        ("retention.ms", "1_000", "Not a number of type LONG"),
        ("retention.ms", str(2**63), "Not a number of type LONG"),
        ("max.message.bytes", str(2**31), "Not a number of type INT"),
        ("max.message.bytes", "-1", "Value must be at least 0"),
        ("segment.bytes", "4096", "Value must be at least 1048576"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("segment.index.bytes", "3", "Value must be at least 4"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("delete.retention.ms", "-1", "Value must be at least 0"),
        ("max.compaction.lag.ms", "0", "Value must be at least 1"),
        ("local.retention.bytes", "-3", "Value must be at least -2"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("cleanup.policy", "compact,shred", "String must be one of: compact, delete"),
        ("cleanup.policy", "delete,", "String must be one of: compact, delete"),
        ("cleanup.policy", "Delete", "String must be one of: compact, delete"),
        (
            "compression.type", "none",
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("message.timestamp.type", "Whenever", "String must be one of: CreateTime, LogAppendTime"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("compression.gzip.level", "10", "Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "0", "Value must be at least 1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("compression.zstd.level", "23", "Value must be no more than 22"),
        ("compression.zstd.level", "-131073", "Value must be at least -131072"),
        ("message.timestamp.after.max.ms", "-1", "Value must be at least 0"),
        ("message.timestamp.before.max.ms", "-1", "Value must be at least 0"),
        ("message.timestamp.difference.max.ms", "-1", "Value must be at least 0"),
        (
            "leader.replication.throttled.replicas", "0:x",
            ("leader.replication.throttled.replicas must be the literal '*' or a list of "
            "replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
        ),
        ("message.format.version", "9.9", "Version 9.9 is not a valid version"),
        (
            "remote.storage.enable", "true",
            ("Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."),
        ),
    ],
)
def test_bad_values_are_refused_in_kafkas_words(name, value, why):
    with pytest.raises(InvalidConfig) as info:
        validate_topic_configs({"retention.ms": "1", name: value})
    assert str(info.value) == f"Invalid value {value} for configuration {name}: {why}"


def test_unknown_names_are_refused():
    with pytest.raises(InvalidConfig, match="^Unknown topic config name: no.such.config$"):
        validate_topic_configs({"no.such.config": "1"})


def test_compaction_lags_are_checked_together():
    assert validate_topic_configs({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "5"})
    with pytest.raises(InvalidConfig) as info:
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert str(info.value) == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )


def test_null_values_mean_no_override():
    assert validate_topic_configs({"retention.ms": None, "flush.ms": "5"}) == {"flush.ms": "5"}


def test_the_table_is_extensible():
    spec = ConfigSpec("rmq.test.only", "STRING", lambda a, s: "x", lambda v: v, "Test.", True)
    register(spec)
    try:
        assert validate_topic_configs({"rmq.test.only": "y"}) == {"rmq.test.only": "y"}
        with pytest.raises(ValueError, match="already defined"):
            register(spec)
    finally:
        del SPECS["rmq.test.only"]


# --- sources and synonyms -------------------------------------------------------------------


def test_sources_follow_kafka():
    assert source_of("flush.ms", {"flush.ms": "5"}, A, S) == DYNAMIC_TOPIC_CONFIG
    assert source_of("flush.ms", {}, A, S) == DEFAULT_CONFIG
    assert source_of("retention.ms", {}, A, S) == DEFAULT_CONFIG
    tuned = StorageConfig(data_dir=S.data_dir, retention_ms=1000)
    assert source_of("retention.ms", {}, A, tuned) == STATIC_BROKER_CONFIG
    assert effective("retention.ms", {}, A, tuned) == "1000"
    zstd_broker = AdapterConfig(compression_type="zstd")
    assert effective("compression.type", {}, zstd_broker, S) == "zstd"
    assert source_of("compression.type", {}, zstd_broker, S) == STATIC_BROKER_CONFIG


def test_synonyms_list_the_override_then_the_broker_setting():
    tuned = StorageConfig(data_dir=S.data_dir, retention_ms=1000)
    assert synonyms_of("retention.ms", {"retention.ms": "5"}, A, tuned) == [
        ("retention.ms", "5", DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "1000", STATIC_BROKER_CONFIG),
    ]
    assert synonyms_of("max.message.bytes", {}, A, S) == [
        ("message.max.bytes", "1048588", DEFAULT_CONFIG)
    ]
    assert synonyms_of("flush.ms", {}, A, S) == []


# --- what Produce makes of them ---------------------------------------------------------------

NOW = 1_700_000_000_000


def options(configs, adapter=A):
    ctx = types.SimpleNamespace(config=adapter, storage_config=S)
    return append_options(ctx, validate_topic_configs(configs), NOW)


def test_defaults_store_as_sent_with_kafkas_one_hour_future_bound():
    assert options({}) == {"max_batch_bytes": 1048588, "timestamp_range": (NOW - LONG_MAX, NOW + 3_600_000)}


def test_no_bounds_no_check():
    assert "timestamp_range" not in options({"message.timestamp.after.max.ms": str(LONG_MAX)})


@pytest.mark.parametrize(
    ("configs", "expected"),
    [
        ({"compression.type": "uncompressed"}, Compression(NONE)),
        ({"compression.type": "gzip"}, Compression(GZIP, -1)),
        ({"compression.type": "gzip", "compression.gzip.level": "9"}, Compression(GZIP, 9)),
        ({"compression.type": "snappy"}, Compression(SNAPPY)),
        ({"compression.type": "lz4", "compression.lz4.level": "1"}, Compression(LZ4, 1)),
        ({"compression.type": "zstd"}, Compression(ZSTD, 3)),
        ({"compression.type": "zstd", "compression.gzip.level": "1"}, Compression(ZSTD, 3)),
        ({"compression.type": "producer"}, None),
    ],
)
def test_compression(configs, expected):
    assert options(configs).get("compression") == expected


def test_broker_compression_type_is_the_default():
    assert options({}, AdapterConfig(compression_type="lz4"))["compression"] == Compression(LZ4, 9)
    assert "compression" not in options({"compression.type": "producer"}, AdapterConfig(compression_type="lz4"))


def test_log_append_time_has_no_timestamp_bounds():
    got = options({"message.timestamp.type": "LogAppendTime", "message.timestamp.after.max.ms": "0"})
    assert got == {"max_batch_bytes": 1048588, "log_append_time": True}


@pytest.mark.parametrize(
    ("configs", "before", "after"),
    [
        ({"message.timestamp.before.max.ms": "10", "message.timestamp.after.max.ms": "20"}, 10, 20),
        # Kafka 3.x: the deprecated difference stands in for the bounds the topic leaves unset
        ({"message.timestamp.difference.max.ms": "30"}, 30, 30),
        ({"message.timestamp.difference.max.ms": "30", "message.timestamp.before.max.ms": "5"}, 5, 30),
        (
            {"message.timestamp.difference.max.ms": "30", "message.timestamp.after.max.ms": str(LONG_MAX)},
            30, 30,
        ),
    ],
)
def test_timestamp_bounds(configs, before, after):
    assert options(configs)["timestamp_range"] == (NOW - before, NOW + after)


_TYPE_RANGES = {"SHORT": (-(2**15), 2**15 - 1), "INT": (-(2**31), 2**31 - 1), "LONG": (-(2**63), 2**63 - 1)}


@pytest.mark.parametrize(
    "spec", [s for s in (*SPECS.values(), *RETRY_SPECS.values()) if s.kind in _TYPE_RANGES],
    ids=lambda s: s.name)
def test_every_numeric_topic_config_is_bounded_by_its_kafka_type(spec):
    """Issue 20: no topic config (CreateTopics, AlterConfigs, IncrementalAlterConfigs) takes a
    number outside its Kafka type, which would overflow where the value is applied."""
    low, high = _TYPE_RANGES[spec.kind]
    topic = "rmq_retry.g"
    for value in (str(high + 1), str(low - 1)):
        with pytest.raises(InvalidConfig) as info:
            validate_topic_configs({spec.name: value}, topic)
        why = f"Not a number of type {spec.kind}"
        assert str(info.value) == f"Invalid value {value} for configuration {spec.name}: {why}"
