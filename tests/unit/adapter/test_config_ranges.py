"""Every integer key of server.properties is range-checked when the config is built (issue 20).

The expected ranges are written out here, not read from the code: Kafka's where Kafka has the
key (its ConfigDef type and validator), RocketMQ's where RocketMQ has it (a Java int is
2^31-1), ours where neither bounds it and a value would cost an unbounded allocation or
overflow a wire field or a 64-bit time. Both ends are accepted, one past either end is
refused with one line naming the key and the value.
"""

from __future__ import annotations

import pytest

from rmqkafka.adapter.properties import ConfigError, KNOWN_KEYS, build_config, parse_properties

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

# key: (lowest accepted, highest accepted)
RANGES = {
    # Kafka: SocketServerConfigs, ServerConfigs, ServerLogConfigs/LogConfig, GroupCoordinatorConfig,
    # TransactionStateManagerConfigs, BrokerSecurityConfigs, KRaftConfigs
    "sasl.server.max.receive.size": (1, INT_MAX),
    "num.partitions": (1, INT_MAX),
    "message.max.bytes": (0, INT_MAX),
    "socket.request.max.bytes": (1, INT_MAX),
    "connections.max.idle.ms": (1, LONG_MAX),
    "max.connections": (0, INT_MAX),
    "max.connections.per.ip": (0, INT_MAX),
    "fetch.max.bytes": (1024, INT_MAX),
    "max.incremental.fetch.session.cache.slots": (0, INT_MAX),
    "min.incremental.fetch.session.eviction.ms": (0, INT_MAX),
    "incremental.fetch.session.cache.max.partitions": (0, INT_MAX),
    "log.segment.bytes": (1024 * 1024, INT_MAX),
    "log.retention.ms": (-1, LONG_MAX),
    "log.retention.minutes": (-1, INT_MAX),
    "log.retention.hours": (-1, INT_MAX),
    "log.retention.bytes": (-1, LONG_MAX),
    "log.retention.check.interval.ms": (1, LONG_MAX),
    "log.cleaner.backoff.ms": (0, LONG_MAX),
    "log.cleaner.dedupe.buffer.size": (1 << 20, LONG_MAX),
    "node.id": (0, INT_MAX),
    "broker.id": (0, INT_MAX),
    "log.flush.interval.ms": (1, LONG_MAX),
    "offsets.retention.minutes": (1, INT_MAX),
    "group.initial.rebalance.delay.ms": (0, INT_MAX),
    "group.min.session.timeout.ms": (1, INT_MAX),
    "group.max.session.timeout.ms": (1, INT_MAX),
    "group.max.size": (1, INT_MAX),
    "offset.metadata.max.bytes": (0, INT_MAX),
    "transaction.max.timeout.ms": (1, INT_MAX),
    "transactional.id.expiration.ms": (1, INT_MAX),
    "offsets.topic.num.partitions": (1, INT_MAX),
    "controller.quota.window.num": (1, INT_MAX),
    "controller.quota.window.size.seconds": (1, INT_MAX),
    "quota.window.num": (1, INT_MAX),
    "quota.window.size.seconds": (1, INT_MAX),
    "controller.mutation.rate": (-1, INT_MAX),  # ours: -1 = unlimited (0 refused on its own)
    "connection.failed.authentication.delay.ms": (0, INT_MAX),
    "connections.max.reauth.ms": (0, LONG_MAX),
    # Kafka's test-only override of log.segment.bytes (LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG)
    "internal.segment.bytes": (1024, INT_MAX),
    # ours
    "request.read.timeout.ms": (1, LONG_MAX),
    "response.buffer.max.bytes": (1, LONG_MAX),
    "max.partitions.per.topic": (1, INT_MAX),
    "max.partitions": (1, INT_MAX),
    "log.dir.reserve.bytes": (0, 1 << 30),
    "metrics.port": (0, 65535),
    "group.consumer.regex.refresh.interval.ms": (10_000, INT_MAX),  # Kafka: atLeast(10 * 1000)
    # RocketMQ: MessageStoreConfig, BrokerConfig (ints and longs)
    "timerMaxDelaySec": (1, INT_MAX),
    "timerPrecisionMs": (1, 60_000),
    "timerRollWindowSlot": (2, 7 * 86_400 * 10),
    "maxReconsumeTimes": (0, INT_MAX),
    "transactionCheckInterval": (1, LONG_MAX),
    "transactionTimeOut": (0, LONG_MAX),
    "transactionCheckMax": (0, INT_MAX),
    "group.share.max.size": (1, 1000),
    # Kafka's ShareGroupConfig
    "group.share.delivery.count.limit": (2, 10),
    "group.share.partition.max.record.locks": (100, 10_000),
}

# keys whose range also depends on other keys (Kafka's GroupCoordinatorConfig relations,
# tested in test_properties.py): only one past either end is checked here
RELATED = {
    f"group.{kind}.{suffix}": (1, INT_MAX) for kind in ("consumer", "share") for suffix in (
        "session.timeout.ms", "min.session.timeout.ms", "max.session.timeout.ms", "heartbeat.interval.ms",
        "min.heartbeat.interval.ms", "max.heartbeat.interval.ms")
} | {"group.consumer.max.size": (1, INT_MAX), "group.share.max.share.sessions": (1, INT_MAX)} | {
    f"group.share.{suffix}": (1000, 3_600_000) for suffix in (
        "record.lock.duration.ms", "min.record.lock.duration.ms", "max.record.lock.duration.ms")
}

# keys whose value is not one integer (or not a number at all)
NOT_INTEGERS = {
    "log.cleaner.enable",
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "controller.listener.names", "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.users.file",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password", "ssl.truststore.location",
    "ssl.truststore.type", "ssl.client.auth", "ssl.enabled.protocols", "authorizer.class.name",
    "super.users", "allow.everyone.if.no.acl.found", "log.dirs", "log.dir",
    "auto.create.topics.enable", "compression.type", "flush.policy", "flushDiskType",
    "enablePropertyFilter", "messageDelayLevel", "metrics.host", "metrics.allowed.hosts", "group.consumer.assignors",
    "group.consumer.migration.policy",
}


def build(text: str):
    return build_config(parse_properties(text), environ={})


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        build(text)
    return str(info.value)


def test_every_integer_key_has_a_range_here():
    """A key added to KNOWN_KEYS must be added to this table (or NOT_INTEGERS) with its range."""
    assert set(RANGES) | set(RELATED) | NOT_INTEGERS >= KNOWN_KEYS, sorted(
        KNOWN_KEYS - set(RANGES) - set(RELATED) - NOT_INTEGERS)


# a key whose lowest value needs another key lowered too
COMPANIONS = {
    "group.max.session.timeout.ms": "group.min.session.timeout.ms=1\n",
    # the delay must stay below the idle timeout
    "connection.failed.authentication.delay.ms": f"connections.max.idle.ms={LONG_MAX}\n",
}


@pytest.mark.parametrize("key", sorted(RANGES))
def test_both_ends_are_accepted(key):
    low, high = RANGES[key]
    for value in (low, high):
        build(f"{key}={value}\n" + COMPANIONS.get(key, ""))


@pytest.mark.parametrize("key", sorted(RANGES | RELATED))
@pytest.mark.parametrize("side", ["below", "above"])
def test_one_past_either_end_is_refused_naming_the_key(key, side):
    low, high = (RANGES | RELATED)[key]
    value = low - 1 if side == "below" else high + 1
    message = error_of(f"{key}={value}\n")
    assert "\n" not in message
    assert message.startswith(f"config: invalid value '{value}' for {key}: must be in [{low}, {high}] (")
    assert message.endswith(")"), "the reason says whose range it is"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("node.id=3000000000", "must be in [0, 2147483647] (Kafka's range"),
        ("timerRollWindowSlot=10000000000", "must be in [2, 6048000]"),
        ("timerRollWindowSlot=1000000000000", "must be in [2, 6048000]"),
        ("timerMaxDelaySec=9223372036854775807", "must be in [1, 2147483647]"),
        ("log.segment.bytes=200", "must be in [1048576, 2147483647] (Kafka's range"),
        ("broker.id=99999999999999999999999", "must be in [0, 2147483647]"),
    ],
)
def test_the_issues_values_are_refused(text, reason):
    key = text.split("=")[0]
    message = error_of(text)
    assert f"for {key}: " in message and reason in message


# --------------------------------------------------------------------------- messageDelayLevel

LONGEST_LEVEL = "2147483647s"  # RocketMQ's timerMaxDelaySec range: a Java int of seconds


@pytest.mark.parametrize(
    "levels",
    [
        "1s 1000000000000000d",  # the issue's: 8.64e22 ms overflows a 64-bit time
        "2147483648s",
        "35791395m",
        "596524h",
        "24856d",
        "1s 99999999999999999999999999999999999999999999999999d",
    ],
)
def test_a_delay_level_longer_than_a_java_int_of_seconds_is_refused(levels):
    message = error_of(f"messageDelayLevel={levels}")
    assert message.startswith(f"config: invalid value {levels!r} for messageDelayLevel: ")
    assert "at most 2147483647s" in message


def test_the_longest_delay_level_is_accepted():
    config = build(f"messageDelayLevel=1s {LONGEST_LEVEL} 24855d")
    assert config.semantics.delay_levels_ms == (1000, 2147483647000, 24855 * 86_400_000)


def test_more_delay_levels_than_the_schedule_topic_may_have_partitions_is_refused():
    """Each level is a partition of SCHEDULE_TOPIC_XXXX: more levels than
    max.partitions.per.topic would fail the broker's start with a traceback."""
    build("max.partitions.per.topic=3\nmessageDelayLevel=1s 2s 3s")
    message = error_of("max.partitions.per.topic=3\nmessageDelayLevel=1s 2s 3s 4s")
    assert "for messageDelayLevel: " in message and "4 levels" in message
    assert "max.partitions.per.topic (3)" in message
    assert "max.partitions.per.topic (1000)" in error_of("messageDelayLevel=" + " ".join(["1s"] * 1001))


def test_group_session_timeouts_must_not_be_inverted():
    build("group.min.session.timeout.ms=5000\ngroup.max.session.timeout.ms=5000")
    message = error_of("group.min.session.timeout.ms=5000\ngroup.max.session.timeout.ms=4999")
    assert "for group.max.session.timeout.ms: " in message
    assert "group.min.session.timeout.ms (5000)" in message


# --------------------------------------------------------------------------- the flags


@pytest.mark.parametrize(("flag", "value"), [("port", -1), ("port", 65536), ("metrics_port", 65536)])
def test_port_flags_are_range_checked_in_the_same_words(flag, value):
    with pytest.raises(ConfigError) as info:
        build_config({}, environ={}, **{flag: value})
    option = "--" + flag.replace("_", "-")
    assert str(info.value).startswith(f"invalid value '{value}' for {option}: must be in [0, 65535]")


def test_internal_segment_bytes_overrides_log_segment_bytes_which_is_still_checked():
    config = build("internal.segment.bytes=2048\nlog.segment.bytes=1048576")
    assert config.storage.segment_bytes == 2048
    assert "for log.segment.bytes: " in error_of("internal.segment.bytes=2048\nlog.segment.bytes=200")
