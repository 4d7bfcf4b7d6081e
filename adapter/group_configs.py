"""Group configs (Kafka's KIP-848 GroupConfig): per-group overrides of the broker's
group.consumer.* and share settings, set with IncrementalAlterConfigs / AlterConfigs on
resource type GROUP (32) and shown by DescribeConfigs.

Names, types and checks follow Kafka's GroupConfig.validate: an unknown name is INVALID_CONFIG
("Unknown group config name: X"); values are parsed as their type; the consumer and share
timeouts must lie within the broker's group.consumer.min|max.* and group.share.min|max.*
(the record lock duration within group.share.min|max.record.lock.duration.ms) and a session
timeout must exceed its heartbeat interval, checked on the group's whole set (overrides over
defaults).
The share and rmq.* keys are checked by rmqsemantics.share.config (the share-partition core
that will read them). A group id needs no group to exist yet, as in Kafka.

``GroupConfigStore`` keeps them in the data directory as a JournaledMap (``group_configs.json``
and ``group_configs.journal``); a store without a data directory (unit tests) keeps them in
memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rmqkafka.rmqsemantics.share.config import AutoOffsetReset, ShareGroupSettings
from rmqkafka.rmqsemantics.share.errors import InvalidShareConfig
from rmqkafka.storage.journaled_map import JournaledMap

from .config import AdapterConfig
from .topic_configs import InvalidConfig

FILE_NAME = "group_configs.json"
DYNAMIC_GROUP_CONFIG = 8  # DescribeConfigs config source


@dataclass(frozen=True, slots=True)
class GroupConfigSpec:
    kind: str  # DescribeConfigs type: INT or STRING
    default: Callable[[AdapterConfig], str | None]
    doc: str


def _const(value: str | None) -> Callable[[AdapterConfig], str | None]:
    return lambda config: value


SPECS: dict[str, GroupConfigSpec] = {
    "consumer.session.timeout.ms": GroupConfigSpec(
        "INT", lambda c: str(c.group_consumer_session_timeout_ms),
        "The timeout to detect client failures when using the consumer group protocol."),
    "consumer.heartbeat.interval.ms": GroupConfigSpec(
        "INT", lambda c: str(c.group_consumer_heartbeat_interval_ms),
        "The heartbeat interval given to the members of a consumer group."),
    "share.session.timeout.ms": GroupConfigSpec(
        "INT", lambda c: str(c.group_share_session_timeout_ms),
        "The timeout to detect client failures when using the share group protocol."),
    "share.heartbeat.interval.ms": GroupConfigSpec(
        "INT", lambda c: str(c.group_share_heartbeat_interval_ms),
        "The heartbeat interval given to the members of a share group."),
    "share.record.lock.duration.ms": GroupConfigSpec(
        "INT", lambda c: str(c.group_share_record_lock_duration_ms),
        "The record acquisition lock duration in milliseconds for share groups."),
    "share.delivery.count.limit": GroupConfigSpec(
        "INT", lambda c: str(c.group_share_delivery_count_limit),
        "The maximum number of delivery attempts for a record delivered to a share group."),
    "share.partition.max.record.locks": GroupConfigSpec(
        "INT", lambda c: str(c.group_share_partition_max_record_locks),
        "Share-group record lock limit per share-partition."),
    "share.auto.offset.reset": GroupConfigSpec(
        "STRING", _const("latest"), "The strategy to initialize the share-partition start offset."),
    "share.isolation.level": GroupConfigSpec(
        "STRING", _const(ShareGroupSettings().isolation_level),
        "Controls how to read records written transactionally (read_committed or read_uncommitted)."),
    "share.renew.acknowledge.enable": GroupConfigSpec(
        "BOOLEAN", _const("true"), "Whether the renew acknowledge type is enabled for the share group."),
    "errors.deadletterqueue.topic.name": GroupConfigSpec(
        "STRING", _const(""),
        "KIP-1191: the topic a share group's rejected or exhausted records are written to (empty: none)."),
    "errors.deadletterqueue.copy.record.enable": GroupConfigSpec(
        "BOOLEAN", _const("false"),
        "KIP-1191: whether dead letters carry the record's key and value (else headers only)."),
    "rmq.redelivery.backoff": GroupConfigSpec(
        "STRING", _const(ShareGroupSettings().redelivery_backoff),
        "none: a released record is redelivered at once (Kafka); levels: after RocketMQ's retry delays."),
    "rmq.max.reconsume.times": GroupConfigSpec(
        "INT", _const(None),
        "RocketMQ's maxReconsumeTimes: when set, the share group's delivery limit is this plus one."),
}


# The least value an INT group config parses to (else 1). RocketMQ's maxReconsumeTimes=0 is
# legal: no retry, a failed record goes straight to the dead-letter topic (delivery limit 1).
_INT_MINIMA = {"share.record.lock.duration.ms": 1000, "rmq.max.reconsume.times": 0}


def _int(name: str, text: str, at_least: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise InvalidConfig(f"Invalid value {text} for configuration {name}: Not a number of type INT") from None
    if not -2**31 <= value < 2**31:
        raise InvalidConfig(f"Invalid value {text} for configuration {name}: Not a number of type INT")
    if value < at_least:
        raise InvalidConfig(f"Invalid value {value} for configuration {name}: Value must be at least {at_least}")
    return value


def _within(name: str, value: int, low: int, high: int, low_name: str, high_name: str) -> None:
    if value < low:
        raise InvalidConfig(f"{name} must be greater than or equal to {low_name}")
    if value > high:
        raise InvalidConfig(f"{name} must be less than or equal to {high_name}")


def validate_group_configs(overrides: Mapping[str, str | None], config: AdapterConfig) -> dict[str, str]:
    """The overrides to store (a None value: no override), or InvalidConfig with Kafka's
    message. The whole set is checked, overrides over the broker's defaults."""
    stored = {name: value for name, value in overrides.items() if value is not None}
    for name in stored:
        if name not in SPECS:
            raise InvalidConfig(f"Unknown group config name: {name}")
    merged = {name: stored.get(name, spec.default(config)) for name, spec in SPECS.items()}
    ints = {name: _int(name, merged[name], _INT_MINIMA.get(name, 1))
            for name, spec in SPECS.items() if spec.kind == "INT" and merged[name] is not None}
    c = config
    _within("consumer.heartbeat.interval.ms", ints["consumer.heartbeat.interval.ms"],
            c.group_consumer_min_heartbeat_interval_ms, c.group_consumer_max_heartbeat_interval_ms,
            "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms")
    _within("consumer.session.timeout.ms", ints["consumer.session.timeout.ms"],
            c.group_consumer_min_session_timeout_ms, c.group_consumer_max_session_timeout_ms,
            "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms")
    _within("share.heartbeat.interval.ms", ints["share.heartbeat.interval.ms"],
            c.group_share_min_heartbeat_interval_ms, c.group_share_max_heartbeat_interval_ms,
            "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")
    _within("share.session.timeout.ms", ints["share.session.timeout.ms"],
            c.group_share_min_session_timeout_ms, c.group_share_max_session_timeout_ms,
            "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")
    _within("share.record.lock.duration.ms", ints["share.record.lock.duration.ms"],
            c.group_share_min_record_lock_duration_ms, c.group_share_max_record_lock_duration_ms,
            "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms")
    if ints["consumer.session.timeout.ms"] <= ints["consumer.heartbeat.interval.ms"]:
        raise InvalidConfig("consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
    if ints["share.session.timeout.ms"] <= ints["share.heartbeat.interval.ms"]:
        raise InvalidConfig("share.session.timeout.ms must be greater than share.heartbeat.interval.ms")
    dlq = merged["errors.deadletterqueue.topic.name"] or ""
    if len(dlq) > 249 or (dlq and not all(c.isascii() and (c.isalnum() or c in "._-") for c in dlq)):
        raise InvalidConfig(f"Invalid value {dlq} for configuration errors.deadletterqueue.topic.name: "
                            "not a legal topic name")
    for name in ("errors.deadletterqueue.copy.record.enable", "share.renew.acknowledge.enable"):
        if merged[name].strip().lower() not in ("true", "false"):
            raise InvalidConfig(f"Invalid value {merged[name]} for configuration {name}: "
                                "Expected value to be either true or false")
    try:
        AutoOffsetReset.parse(merged["share.auto.offset.reset"])
        ShareGroupSettings(
            record_lock_duration_ms=ints["share.record.lock.duration.ms"],
            delivery_count_limit=ints["share.delivery.count.limit"],
            max_record_locks=ints["share.partition.max.record.locks"],
            isolation_level=merged["share.isolation.level"],
            redelivery_backoff=merged["rmq.redelivery.backoff"],
            max_reconsume_times=ints.get("rmq.max.reconsume.times"),
        )
    except InvalidShareConfig as exc:
        raise InvalidConfig(str(exc)) from None
    return stored


class GroupConfigStore:
    """Every group's config overrides, durable in ``<data dir>/group_configs.json`` and its
    journal ``group_configs.journal`` (storage.journaled_map: the format, crash and damage
    behaviour). An entry's name is ``g/`` + the group id (a group id may be anything, the
    map's own ``#seq`` too); its object is {config name: value}. A change appends one journal
    record; the snapshot is rewritten at most once per ``snapshot_interval_ms`` (and on
    ``close``), so a client altering many groups' configs costs O(change), not O(every group)."""

    def __init__(self, data_dir: Path | None, snapshot_interval_ms: int = 1000,
                 now_ms: Callable[[], int] | None = None) -> None:
        self._map = None if data_dir is None else JournaledMap(
            Path(data_dir) / FILE_NAME, _check, snapshot_interval_ms=snapshot_interval_ms, now_ms=now_ms)
        self._groups: dict[str, dict[str, str]] = {} if self._map is None else {
            name[len(_PREFIX):]: dict(configs) for name, configs in self._map.entries.items()}

    def get(self, group_id: str) -> dict[str, str]:
        return dict(self._groups.get(group_id, {}))

    def groups(self) -> list[str]:
        """The group ids that have configs (ListConfigResources lists them)."""
        return sorted(self._groups)

    def set(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Store ``configs`` as the group's whole set of overrides (none: forget the group);
        durable when this returns (OSError, nothing changed, when it could not be written)."""
        if dict(configs) == self._groups.get(group_id, {}):
            return
        if self._map is not None:
            if configs:
                self._map.commit({_PREFIX + group_id: dict(configs)})
            else:
                self._map.commit({}, [_PREFIX + group_id])
        if configs:
            self._groups[group_id] = dict(configs)
        else:
            self._groups.pop(group_id, None)

    def drop(self, group_id: str) -> None:
        self.set(group_id, {})

    def close(self) -> None:
        """Bring the snapshot up to date with the journal."""
        if self._map is not None:
            self._map.write_snapshot_if_stale()

    def consumer_timeouts(self, group_id: str, config: AdapterConfig) -> tuple[int, int]:
        """(session timeout, heartbeat interval) in ms for a consumer group's members."""
        own = self._groups.get(group_id, {})
        return (int(own.get("consumer.session.timeout.ms", config.group_consumer_session_timeout_ms)),
                int(own.get("consumer.heartbeat.interval.ms", config.group_consumer_heartbeat_interval_ms)))

    def share_timeouts(self, group_id: str, config: AdapterConfig) -> tuple[int, int]:
        """(session timeout, heartbeat interval) in ms for a share group's members."""
        own = self._groups.get(group_id, {})
        return (int(own.get("share.session.timeout.ms", config.group_share_session_timeout_ms)),
                int(own.get("share.heartbeat.interval.ms", config.group_share_heartbeat_interval_ms)))


_PREFIX = "g/"


def _check(name: str, configs: dict) -> None:
    if not name.startswith(_PREFIX) or not all(isinstance(v, str) for v in configs.values()):
        raise ValueError(f"not a group config entry: {name!r}")
