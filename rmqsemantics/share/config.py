"""One share group's settings, built once from the group's configs and the broker defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..delay_levels import DEFAULT_DELAY_LEVELS_MS
from .errors import InvalidShareConfig

READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
BACKOFF_NONE, BACKOFF_LEVELS = "none", "levels"
# RocketMQ's first retry uses delay level 3 (10 s by default): delayLevel = 3 + reconsumeTimes.
FIRST_RETRY_LEVEL = 3

# java.time.Duration.parse: PnDTnHnMn.nS, each part optional, signs allowed per part.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_iso_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 duration as java.time.Duration.parse reads it."""
    m = _DURATION.fullmatch(text) if len(text) <= 64 else None  # bounded before int() runs
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise InvalidShareConfig(f"Invalid duration format: {text!r} is not an ISO-8601 duration")
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    nanos = int((m.group(7) or "").ljust(9, "0") or 0)
    if seconds < 0 or (m.group(6) or "").startswith("-"):
        nanos = -nanos
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + nanos // 1_000_000
    if abs(ms) >= 2**63:  # a Java long of ms, as Kafka keeps it
        raise InvalidShareConfig(f"Invalid duration format: {text!r} is too long")
    return -ms if m.group(1) == "-" else ms


@dataclass(frozen=True, slots=True)
class AutoOffsetReset:
    """``share.auto.offset.reset``: where a new share-partition starts (its first SPSO)."""

    strategy: str  # "latest" | "earliest" | "by_duration"
    duration_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> AutoOffsetReset:
        low = text.strip().lower()
        if low in ("latest", "earliest"):
            return cls(low)
        if low.startswith("by_duration:"):
            ms = parse_iso_duration_ms(text.strip()[len("by_duration:"):])
            if ms < 0:
                raise InvalidShareConfig(f"Invalid value {text} for configuration "
                                         "share.auto.offset.reset: the duration must not be negative")
            return cls("by_duration", ms)
        raise InvalidShareConfig(f"Invalid value {text} for configuration share.auto.offset.reset: "
                                 "must be latest, earliest or by_duration:<ISO-8601 duration>")


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """A share group's settings. Kafka's names (group config, broker default) next to each."""

    # share.record.lock.duration.ms (group.share.record.lock.duration.ms, 30000 [1000, 3600000])
    record_lock_duration_ms: int = 30_000
    # share.delivery.count.limit (group.share.delivery.count.limit, 5 [2, 10])
    delivery_count_limit: int = 5
    # share.partition.max.record.locks (group.share.partition.max.record.locks, 2000 [100, 10000]):
    # the in-flight window SPEO - SPSO exceeds it only to finish the batch a batch-optimized
    # acquisition began (by at most partition.MAX_BATCH_OVERSHOOT records)
    max_record_locks: int = 2000
    # share.auto.offset.reset: latest (default) | earliest | by_duration:<ISO-8601>
    auto_offset_reset: AutoOffsetReset = AutoOffsetReset("latest")
    # share.isolation.level: read_uncommitted (default) | read_committed
    isolation_level: str = READ_UNCOMMITTED
    # rmq.redelivery.backoff: none (default, Kafka's behaviour) | levels (RocketMQ's retry delays)
    redelivery_backoff: str = BACKOFF_NONE
    # rmq.max.reconsume.times: RocketMQ's retry limit; when set, the delivery limit is
    # times + 1 (the first delivery is not a reconsumption). None: Kafka's limit applies.
    max_reconsume_times: int | None = None
    # rmq.retry.schedule.max.records: records waiting out a backoff kept outside the window;
    # beyond it a waiting record stays in the window (bounded memory, back-pressure)
    max_retry_records: int = 10_000
    # messageDelayLevel of rmqsemantics (SemanticsConfig.delay_levels_ms)
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS
    # share.renew.acknowledge.enable (KIP-1222; Kafka's GroupConfig default true): whether a
    # RENEW acknowledgement extends an acquisition lock, else INVALID_RECORD_STATE
    renew_acknowledge_enable: bool = True

    def __post_init__(self) -> None:
        _check_range("share.record.lock.duration.ms", self.record_lock_duration_ms, 1000, 3_600_000)
        _check_range("share.delivery.count.limit", self.delivery_count_limit, 2, 10)
        _check_range("share.partition.max.record.locks", self.max_record_locks, 100, 10_000)
        if self.isolation_level not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise InvalidShareConfig(f"Invalid value {self.isolation_level} for configuration "
                                     "share.isolation.level: String must be one of: "
                                     "read_committed, read_uncommitted")
        if self.redelivery_backoff not in (BACKOFF_NONE, BACKOFF_LEVELS):
            raise InvalidShareConfig(f"Invalid value {self.redelivery_backoff} for configuration "
                                     "rmq.redelivery.backoff: String must be one of: none, levels")
        if self.max_reconsume_times is not None:
            # RocketMQ's maxReconsumeTimes; the delivery count is a Kafka INT16
            _check_range("rmq.max.reconsume.times", self.max_reconsume_times, 0, 32_766)
        _check_range("rmq.retry.schedule.max.records", self.max_retry_records, 0, 1_000_000)
        if not self.delay_levels_ms:
            raise InvalidShareConfig("messageDelayLevel has no levels")

    @property
    def delivery_limit(self) -> int:
        """Deliveries after which a released or expired record is archived."""
        if self.max_reconsume_times is not None:
            return self.max_reconsume_times + 1
        return self.delivery_count_limit

    def retry_delay_ms(self, delivery_count: int) -> int:
        """RocketMQ's delay before delivery ``delivery_count + 1``: level 3 + attempt - 1,
        the last level once past it; 0 without ``rmq.redelivery.backoff=levels``."""
        if self.redelivery_backoff != BACKOFF_LEVELS:
            return 0
        level = FIRST_RETRY_LEVEL + max(delivery_count, 1) - 1
        return self.delay_levels_ms[min(level, len(self.delay_levels_ms)) - 1]


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidShareConfig(f"Invalid value {value} for configuration {name}: "
                                 f"Value must be in the range [{low}, {high}]")
