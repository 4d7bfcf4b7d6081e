"""The semantics layer's one configuration object, built once at start-up from server.properties."""

from __future__ import annotations

from dataclasses import dataclass

from .delay_levels import DEFAULT_DELAY_LEVELS_MS

DAY_SECONDS = 86_400


@dataclass(frozen=True, slots=True)
class SemanticsConfig:
    """RocketMQ settings, under RocketMQ's key names where RocketMQ has them."""

    # enablePropertyFilter: SQL92 views. RocketMQ's default is false (its brokers evaluate SQL
    # only when asked to); here filtering is the point of the broker, so it is on by default.
    enable_property_filter: bool = True
    tag_header: str = "TAGS"  # the record header holding a record's tag (RocketMQ's TAGS property)
    # messageDelayLevel: the delay of each level, level 1 first (RocketMQ's 18 by default).
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS
    # timerMaxDelaySec: the longest timer a record may ask for (RocketMQ 5's key; 30 days here,
    # where RocketMQ defaults to 3).
    timer_max_delay_sec: int = 30 * DAY_SECONDS
    # timerPrecisionMs: the timing wheel's slot width (RocketMQ 5's key). A timer is delivered
    # once its whole slot is due: never early, at most this much late (plus delivery time).
    timer_precision_ms: int = 100
    # timerRollWindowSlot (RocketMQ 5's key, in slots): the wheel's window; a timer due later
    # waits in the window's last slot and is then parked again (a new copy in the commitlog,
    # so commitlog retention longer than the window never removes a waiting timer). Two days.
    timer_wheel_slots: int = 2 * DAY_SECONDS * 10
    # maxReconsumeTimes: retries before a nacked record goes to the group's dead-letter topic;
    # a group overrides it with the topic config rmq.max.reconsume.times on rmq_retry.<group>.
    max_reconsume_times: int = 16
    # RocketMQ transaction messages (half messages), RocketMQ 5's keys and defaults, in ms:
    # transactionCheckInterval: how often the check service looks for undecided half messages;
    # transactionTimeOut: how old a half message must be before its producer group is asked
    # (a message's CHECK_IMMUNITY_TIME_IN_SECONDS header raises it for that message);
    # transactionCheckMax: checks before an undecided half message is rolled back.
    transaction_check_interval_ms: int = 30_000
    transaction_timeout_ms: int = 6_000
    transaction_check_max: int = 15
