"""Per-topic configs: every name a Kafka 3.9 / 4.x broker accepts, with Kafka's types,
defaults and validation (Kafka's LogConfig and ConfigDef).

A value is parsed the way Kafka parses its type (trimmed; LIST split on commas; numbers in
range of INT / LONG) and stored in Kafka's canonical form ("TRUE " is stored as "true"), then
checked by the config's validator. A bad value or an unknown name is INVALID_CONFIG with
Kafka's message ("Invalid value X for configuration Y: why", "Unknown topic config name: Y").

Only some configs mean something on a single-node broker with one shared commitlog; each
spec's ``applied`` and documentation say which and, for the others, why they are only stored
and reported. The 3.x names Kafka 4.0 removed (message.format.version,
message.downconversion.enable, message.timestamp.difference.max.ms) are accepted so that
3.x tools keep working. More configs can be added with :func:`register`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from rmqkafka.rmqsemantics.scheduler import MAX_RECONSUME_CONFIG, RETRY_PREFIX
from rmqkafka.rmqsemantics.semantics import CONSUMER_OFFSETS_TOPIC, SYSTEM_TOPICS
from rmqkafka.storage.config import StorageConfig

from .config import AdapterConfig

LONG_MAX = 2**63 - 1
# The broker's own topics that hold records: the log cleaner never compacts them (records
# in their own formats, some without keys), so a cleanup.policy with "compact" there would
# only stop retention and let them grow without bound. (__consumer_offsets is presented
# compacted, as Kafka creates it; its partitions stay empty: offsets live in the offset store.)
NEVER_COMPACTED = SYSTEM_TOPICS - {CONSUMER_OFFSETS_TOPIC}
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


class InvalidConfig(ValueError):
    pass


Default = Callable[[AdapterConfig, StorageConfig], str]


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    name: str
    kind: str  # Kafka's ConfigType names: BOOLEAN STRING INT SHORT LONG DOUBLE LIST
    default: Default
    validate: Callable[[str], str]  # canonical value, or raises InvalidConfig(why)
    doc: str
    applied: bool  # whether this broker acts on the value (the doc says how, or why not)
    synonym: str | None = None  # the server.properties key the default comes from, if any


# --- Kafka's types (ConfigDef.parseType) -------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble, less hexadecimal floats
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_RANGES = {"SHORT": 2**15, "INT": 2**31, "LONG": 2**63}


def _parse(kind: str, raw: str) -> str:
    value = raw.strip()
    if kind == "BOOLEAN":
        if value.lower() not in ("true", "false"):
            raise InvalidConfig("Expected value to be either true or false")
        return value.lower()
    if kind in _RANGES:
        bound = _RANGES[kind]
        if not _INTEGER.fullmatch(value) or not -bound <= int(value) < bound:
            raise InvalidConfig(f"Not a number of type {kind}")
        return str(int(value))
    if kind == "DOUBLE":
        if not _DOUBLE.fullmatch(value):
            raise InvalidConfig("Not a number of type DOUBLE")
        return repr(float(value.rstrip("fFdD")))
    if kind == "LIST":
        return ",".join(re.split(r"\s*,\s*", value)) if value else ""
    return value  # STRING


def _items(value: str) -> list[str]:
    return value.split(",") if value else []


# --- Kafka's validators ------------------------------------------------------------------

Check = Callable[[str], None]


def at_least(minimum: int) -> Check:
    def check(value: str) -> None:
        if float(value) < minimum:
            raise InvalidConfig(f"Value must be at least {minimum}")

    return check


def between(minimum: int, maximum: int) -> Check:
    def check(value: str) -> None:
        at_least(minimum)(value)
        if float(value) > maximum:
            raise InvalidConfig(f"Value must be no more than {maximum}")

    return check


def one_of(*allowed: str) -> Check:
    """Kafka's ValidString.in (case-sensitive)."""

    def check(value: str) -> None:
        if value not in allowed:
            raise InvalidConfig(f"String must be one of: {', '.join(allowed)}")

    return check


def list_of(*allowed: str) -> Check:
    """Kafka's ValidList.in: each item one of ``allowed``; an empty list is valid."""

    def check(value: str) -> None:
        for item in _items(value):
            if item not in allowed:
                raise InvalidConfig(f"String must be one of: {', '.join(allowed)}")

    return check


def _gzip_level(value: str) -> None:
    # Java's Deflater: 1 (fastest) .. 9 (best), or -1 for zlib's default
    if int(value) != -1 and not 1 <= int(value) <= 9:
        raise InvalidConfig("Value must be between 1 and 9 or equal to -1")


def _throttled_replicas(name: str) -> Check:
    def check(value: str) -> None:
        items = [item.strip() for item in value.split(",")]
        if value.strip() != "*" and not all(re.fullmatch(r"([0-9]+:[0-9]+)?", i) for i in items):
            raise InvalidConfig(
                f"{name} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )

    return check


_METADATA_VERSION = re.compile(
    r"(0\.(8\.[0-2]|9\.0|10\.[0-2]|11\.0)|1\.[01]|2\.[0-8]|3\.[0-9])(\.[0-9]+)*(-IV[0-9]+)?"
)


def _message_format_version(value: str) -> None:
    if not _METADATA_VERSION.fullmatch(value):
        raise InvalidConfig(f"Version {value} is not a valid version")


def _no_tiered_storage(value: str) -> None:
    if value == "true":
        # Kafka's answer when remote.log.storage.system.enable is false, as it is here
        raise InvalidConfig(
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )


# --- the table -----------------------------------------------------------------------------

SPECS: dict[str, ConfigSpec] = {}


def register(spec: ConfigSpec) -> ConfigSpec:
    """Add a config to the table (names are unique)."""
    if spec.name in SPECS:
        raise ValueError(f"topic config {spec.name!r} is already defined")
    SPECS[spec.name] = spec
    return spec


def _define(
    name: str,
    kind: str,
    default: str | Default,
    check: Check | None,
    doc: str,
    *,
    applied: bool = False,
    synonym: str | None = None,
) -> None:
    def validate(raw: str) -> str:
        value = _parse(kind, raw)
        if check is not None:
            check(value)
        return value

    register(ConfigSpec(name, kind, _fixed(default), validate, doc, applied, synonym))


def _fixed(default: str | Default) -> Default:
    if callable(default):
        return default
    return lambda a, s: default


def _retention_ms(_: AdapterConfig, s: StorageConfig) -> str:
    return str(-1 if s.retention_ms is None else s.retention_ms)


def _retention_bytes(_: AdapterConfig, s: StorageConfig) -> str:
    return str(-1 if s.retention_bytes is None else s.retention_bytes)


_COMMITLOG = "all topics share one commitlog"
_COMPACTION = ("Applied to compacted topics (cleanup.policy with 'compact'): see "
               "storage.compaction_cleaner.")
_ONE_REPLICA = "Stored and reported only: this is a single broker with one replica per partition."
_NO_TIERED = "Stored and reported only: there is no tiered (remote) storage here."

_define(
    "cleanup.policy", "LIST", "delete", list_of("compact", "delete"),
    "A list of 'delete' and/or 'compact'. Applied: with 'compact' the log cleaner keeps the "
    "latest record per key (storage.compaction_cleaner) and records without a key are "
    "refused (INVALID_RECORD); 'delete': retention.ms / retention.bytes move the log start "
    "(storage.retention); without 'delete' retention removes nothing.",
    applied=True,
)
_define(
    "compression.type", "STRING", lambda a, s: a.compression_type,
    one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "Applied: the codec batches are stored with. 'producer' keeps the producer's codec; "
    "otherwise a batch with another codec is re-encoded with this one on append "
    "('uncompressed' stores it uncompressed).",
    applied=True, synonym="compression.type",
)
_define(
    "compression.gzip.level", "INT", "-1", _gzip_level,
    "Applied: the gzip level (1-9, -1 = default) when the broker compresses with gzip.",
    applied=True,
)
_define(
    "compression.lz4.level", "INT", "9", between(1, 17),
    "Applied: the lz4 level when the broker compresses with lz4.", applied=True,
)
_define(
    "compression.zstd.level", "INT", "3", between(-131072, 22),
    "Applied: the zstd level when the broker compresses with zstd.", applied=True,
)
_define(
    "delete.retention.ms", "LONG", "86400000", at_least(0),
    "How long delete tombstones (and transaction markers) of compacted topics are kept "
    f"after the cleaning that first saw them. {_COMPACTION}",
    applied=True,
)
_define(
    "file.delete.delay.ms", "LONG", "60000", at_least(0),
    "The wait before a deleted segment file is removed. Stored and reported only: "
    f"{_COMMITLOG}, whose segments retention deletes at once.",
)
_define(
    "flush.messages", "LONG", str(LONG_MAX), at_least(1),
    "fsync after this many messages. Stored and reported only: the flush policy is "
    "broker-wide (flush.policy, log.flush.interval.ms) because all topics share one commitlog.",
)
_define(
    "flush.ms", "LONG", str(LONG_MAX), at_least(0),
    "fsync after this many ms. Stored and reported only: the flush policy is broker-wide "
    "(flush.policy, log.flush.interval.ms) because all topics share one commitlog.",
)
_define(
    "follower.replication.throttled.replicas", "LIST", "",
    _throttled_replicas("follower.replication.throttled.replicas"),
    f"Replicas throttled on the follower side. {_ONE_REPLICA}",
)
_define(
    "index.interval.bytes", "INT", "4096", at_least(0),
    "Bytes between offset index entries. Stored and reported only: every batch is indexed "
    "in the partition's consume queue.",
)
_define(
    "leader.replication.throttled.replicas", "LIST", "",
    _throttled_replicas("leader.replication.throttled.replicas"),
    f"Replicas throttled on the leader side. {_ONE_REPLICA}",
)
_define(
    "local.retention.bytes", "LONG", "-2", at_least(-2),
    f"Local retention of tiered topics (-2 = retention.bytes). {_NO_TIERED}",
)
_define(
    "local.retention.ms", "LONG", "-2", at_least(-2),
    f"Local retention of tiered topics (-2 = retention.ms). {_NO_TIERED}",
)
_define(
    "max.compaction.lag.ms", "LONG", str(LONG_MAX), at_least(1),
    "The longest a record stays ineligible for compaction: a partition whose first dirty "
    "batch is older is cleaned whatever its dirty ratio, and its segments roll at least "
    f"this often. {_COMPACTION}",
    applied=True,
)
_define(
    "max.message.bytes", "INT", lambda a, s: str(a.message_max_bytes), at_least(0),
    "Applied: the largest record batch this topic accepts, as received and as stored "
    "(after recompression); MESSAGE_TOO_LARGE above it.",
    applied=True, synonym="message.max.bytes",
)
_define(
    "message.downconversion.enable", "BOOLEAN", "true", None,
    "Kafka 3.x only: down-conversion for old consumers. Stored and reported only: this "
    "broker serves only v2 record batches (Fetch v4 and later).",
)
_define(
    "message.format.version", "STRING", "3.0-IV1", _message_format_version,
    "Kafka 3.x only (ignored there since 3.0). Stored and reported only: batches are always "
    "stored as v2.",
)
_define(
    "message.timestamp.after.max.ms", "LONG", "3600000", at_least(0),
    "Applied: with CreateTime, a batch with a record timestamp more than this many ms after "
    "the broker's clock is refused (INVALID_TIMESTAMP).",
    applied=True,
)
_define(
    "message.timestamp.before.max.ms", "LONG", str(LONG_MAX), at_least(0),
    "Applied: with CreateTime, a batch with a record timestamp more than this many ms before "
    "the broker's clock is refused (INVALID_TIMESTAMP).",
    applied=True,
)
_define(
    "message.timestamp.difference.max.ms", "LONG", str(LONG_MAX), at_least(0),
    "Kafka 3.x only, deprecated. Applied when set on the topic: a bound "
    "(message.timestamp.before/after.max.ms) the topic leaves unset or at Long.MAX_VALUE "
    "takes this value, as in 3.x.",
    applied=True,
)
_define(
    "message.timestamp.type", "STRING", "CreateTime", one_of("CreateTime", "LogAppendTime"),
    "Applied: CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append.",
    applied=True,
)
_define(
    "min.cleanable.dirty.ratio", "DOUBLE", "0.5", between(0, 1),
    "How dirty a log must be (dirty bytes / all bytes) before the cleaner compacts it. "
    f"{_COMPACTION}",
    applied=True,
)
_define(
    "min.compaction.lag.ms", "LONG", "0", at_least(0),
    f"The shortest a record stays uncompacted. {_COMPACTION}",
    applied=True,
)
_define(
    "min.insync.replicas", "INT", "1", at_least(1),
    f"Replicas an acks=all write needs. {_ONE_REPLICA}",
)
_define(
    "preallocate", "BOOLEAN", "false", None,
    f"Preallocate segment files. Stored and reported only: {_COMMITLOG}.",
)
_define(
    "remote.log.copy.disable", "BOOLEAN", "false", None,
    f"Stop copying segments to remote storage. {_NO_TIERED}",
)
_define(
    "remote.log.delete.on.disable", "BOOLEAN", "false", None,
    f"Delete remote data when tiered storage is turned off. {_NO_TIERED}",
)
_define(
    "remote.storage.enable", "BOOLEAN", "false", _no_tiered_storage,
    "Tiered storage. Only false is accepted: tiered storage is disabled in this broker.",
)
_define(
    "retention.bytes", "LONG", _retention_bytes, None,
    "Applied: each partition keeps the fewest newest whole batches that still hold this many "
    "bytes (-1 = unlimited). A topic that sets neither retention.* follows the broker's "
    "log.retention.* for the shared commitlog's segments (see docs/operations/retention.md).",
    applied=True, synonym="log.retention.bytes",
)
_define(
    "retention.ms", "LONG", _retention_ms, at_least(-1),
    "Applied: a batch is deleted once its newest timestamp is older than this and every older "
    "batch of its partition is (-1 = unlimited). A topic that sets neither retention.* follows "
    "the broker's log.retention.* for the shared commitlog's segments (see "
    "docs/operations/retention.md).",
    applied=True, synonym="log.retention.ms",
)
_define(
    "segment.bytes", "INT", lambda a, s: str(s.segment_bytes), at_least(1024 * 1024),
    "Applied to compacted topics: the size of the partition's own segments the cleaner works "
    "in (the active one is never cleaned). The commitlog's segment size is log.segment.bytes "
    f"because {_COMMITLOG}.",
    applied=True,
    synonym="log.segment.bytes",
)
_define(
    "segment.index.bytes", "INT", str(10 * 1024 * 1024), at_least(4),
    "The offset index size. Stored and reported only: the consume queue is the index here.",
)
_define(
    "segment.jitter.ms", "LONG", "0", at_least(0),
    f"Random jitter of segment rolls. Stored and reported only: {_COMMITLOG}.",
)
_define(
    "segment.ms", "LONG", str(7 * 24 * 3600 * 1000), at_least(1),
    "Roll a segment after this long. Applied to compacted topics: when the partition's own "
    "segments the cleaner works in roll (the active one is never cleaned). The commitlog is "
    f"rolled by size because {_COMMITLOG}.",
    applied=True,
)
_define(
    "unclean.leader.election.enable", "BOOLEAN", "false", None,
    f"Elect an out-of-sync replica as leader. {_ONE_REPLICA}",
)


# --- RocketMQ's: only on the topics they concern ---------------------------------------------

RETRY_SPECS = {
    spec.name: spec
    for spec in [
        ConfigSpec(
            MAX_RECONSUME_CONFIG, "INT", _fixed("-1"), lambda raw: _checked("INT", raw, at_least(-1)),
            "How many times a record of this group is retried before it goes to rmq_dlq.<group> "
            "(RocketMQ's maxReconsumeTimes); -1: the broker's maxReconsumeTimes.",
            True,
        )
    ]
}


def specs_for(topic: str) -> dict[str, ConfigSpec]:
    """The configs topic ``topic`` has: every topic's (SPECS), and on a retry topic
    ``rmq_retry.<group>`` the group's retry settings too."""
    return {**SPECS, **RETRY_SPECS} if topic.startswith(RETRY_PREFIX) else SPECS


def spec_of(name: str) -> ConfigSpec:
    """The spec of a config any topic may have (KeyError for an unknown name)."""
    spec = SPECS.get(name) or RETRY_SPECS.get(name)
    if spec is None:
        raise KeyError(name)
    return spec


def _checked(kind: str, raw: str, check: Check) -> str:
    value = _parse(kind, raw)
    check(value)
    return value


# --- validation and effective values -------------------------------------------------------


def validate_topic_configs(configs: dict[str, str | None], topic: str = "") -> dict[str, str]:
    """Check names and values for topic ``topic``; returns the configs to store, in canonical
    form (None values are dropped: they mean "no override")."""
    out: dict[str, str] = {}
    specs = specs_for(topic)
    for name, value in configs.items():
        spec = specs.get(name)
        if spec is None:
            if name in RETRY_SPECS:
                raise InvalidConfig(f"{name} applies only to retry topics ({RETRY_PREFIX}<group>)")
            raise InvalidConfig(f"Unknown topic config name: {name}")
        if value is None:
            continue
        try:
            out[name] = spec.validate(value)
        except InvalidConfig as e:
            raise InvalidConfig(f"Invalid value {value} for configuration {name}: {e}") from None
    _check_together(out)
    _check_system_topic(out, topic)
    return out


def _check_system_topic(configs: dict[str, str], topic: str) -> None:
    """Kafka lets its internal topics be configured like any other, because its cleaner
    compacts them; this broker's system topics are never compacted (NEVER_COMPACTED), so a
    policy naming "compact" is refused there rather than silently stopping retention."""
    policy = configs.get("cleanup.policy")
    if topic in NEVER_COMPACTED and policy is not None and "compact" in policy.split(","):
        raise InvalidConfig(
            f"Invalid value {policy} for configuration cleanup.policy: topic {topic} is a system topic of "
            "this broker, which the log cleaner never compacts; it keeps the delete policy"
        )


def _check_together(configs: dict[str, str]) -> None:
    """Kafka's checks across configs (LogConfig.validateValues)."""
    low = int(configs.get("min.compaction.lag.ms", "0"))
    high = int(configs.get("max.compaction.lag.ms", str(LONG_MAX)))
    if low > high:
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )


def effective(name: str, overrides: dict[str, str], a: AdapterConfig, s: StorageConfig) -> str:
    value = overrides.get(name)
    return value if value is not None else spec_of(name).default(a, s)


class BrokerLevels(Protocol):
    """Where a broker setting's value comes from (adapter.broker_configs.BrokerConfigs)."""

    def synonyms(self, name: str) -> list[tuple[str, str | None, int]]: ...


def source_of(name: str, overrides: dict[str, str], a: AdapterConfig, s: StorageConfig,
              broker: BrokerLevels | None = None) -> int:
    """Kafka's config source: the topic override, else the source of the broker setting it
    inherits (``broker`` knows: dynamic, static or default), else the default. Without
    ``broker``, a broker setting that differs from the built-in default counts as static."""
    if name in overrides:
        return DYNAMIC_TOPIC_CONFIG
    spec = spec_of(name)
    if spec.synonym and broker is not None:
        levels = broker.synonyms(spec.synonym)
        return levels[0][2] if levels else DEFAULT_CONFIG
    if spec.synonym and spec.default(a, s) != spec.default(AdapterConfig(), StorageConfig(s.data_dir)):
        return STATIC_BROKER_CONFIG
    return DEFAULT_CONFIG


def synonyms_of(
    name: str, overrides: dict[str, str], a: AdapterConfig, s: StorageConfig, broker: BrokerLevels | None = None
) -> list[tuple[str, str | None, int]]:
    """(name, value, source) in Kafka's order: the topic override, then the broker setting
    (with ``broker``: every level that sets it, highest first)."""
    out: list[tuple[str, str | None, int]] = []
    if name in overrides:
        out.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
    spec = spec_of(name)
    if spec.synonym and broker is not None:
        out += broker.synonyms(spec.synonym)
    elif spec.synonym:
        out.append((spec.synonym, spec.default(a, s), source_of(name, {}, a, s)))
    return out
