"""The broker's share-group defaults (Kafka's ``group.share.*`` names) and one group's
settings: its group configs over those defaults, as a ShareGroupSettings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rmqkafka.rmqsemantics.delay_levels import DEFAULT_DELAY_LEVELS_MS
from rmqkafka.rmqsemantics.share.config import AutoOffsetReset, ShareGroupSettings


@dataclass(frozen=True, slots=True)
class ShareBrokerDefaults:
    """Kafka's ShareGroupConfig broker keys; a group config overrides the first three."""

    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    max_share_sessions: int = 2000  # group.share.max.share.sessions
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS  # messageDelayLevel


def group_settings(overrides: Mapping[str, str], defaults: ShareBrokerDefaults) -> ShareGroupSettings:
    """A share group's settings. The overrides were validated when they were stored
    (adapter.group_configs), so this only parses them."""
    reconsume = overrides.get("rmq.max.reconsume.times")
    return ShareGroupSettings(
        record_lock_duration_ms=int(overrides.get("share.record.lock.duration.ms", defaults.record_lock_duration_ms)),
        delivery_count_limit=int(overrides.get("share.delivery.count.limit", defaults.delivery_count_limit)),
        max_record_locks=int(overrides.get("share.partition.max.record.locks", defaults.partition_max_record_locks)),
        auto_offset_reset=AutoOffsetReset.parse(overrides.get("share.auto.offset.reset", "latest")),
        isolation_level=overrides.get("share.isolation.level", "read_uncommitted"),
        redelivery_backoff=overrides.get("rmq.redelivery.backoff", "none"),
        max_reconsume_times=None if reconsume is None else int(reconsume),
        delay_levels_ms=defaults.delay_levels_ms,
        renew_acknowledge_enable=overrides.get("share.renew.acknowledge.enable", "true").strip().lower() == "true",
    )


@dataclass(frozen=True, slots=True)
class DeadLetterTarget:
    """KIP-1191's group configs: ``errors.deadletterqueue.topic.name`` ("" = none) and
    ``errors.deadletterqueue.copy.record.enable``."""

    topic: str = ""
    copy_record: bool = False


def dead_letter_target(overrides: Mapping[str, str]) -> DeadLetterTarget:
    return DeadLetterTarget(overrides.get("errors.deadletterqueue.topic.name", ""),
                            overrides.get("errors.deadletterqueue.copy.record.enable", "false").strip().lower() == "true")
