"""The scheduling headers (rmqsemantics.parking) and messageDelayLevel's syntax."""

from __future__ import annotations

import pytest

from rmqkafka.rmqsemantics.delay_levels import DEFAULT_DELAY_LEVELS_MS, parse_delay_levels
from rmqkafka.rmqsemantics.parking import Park, scheduling_of
from rmqkafka.storage.errors import InvalidRecordError

NOW = 1_700_000_000_000
LEVELS = DEFAULT_DELAY_LEVELS_MS
DAY = 86_400_000


def decide(*headers: tuple[str, bytes | None], max_ms: int = 30 * DAY) -> Park | None:
    return scheduling_of(list(headers), NOW, LEVELS, max_ms)


def test_rocketmq_default_levels():
    assert len(LEVELS) == 18
    assert LEVELS[:4] == (1000, 5000, 10_000, 30_000)
    assert LEVELS[-1] == 2 * 3_600_000
    assert parse_delay_levels("1s 2m 3h 1d") == (1000, 120_000, 10_800_000, DAY)


@pytest.mark.parametrize("text", ["", "1x", "s", "1.5s", "-1s", "1s 2"])
def test_bad_delay_level_syntax(text):
    with pytest.raises(ValueError):
        parse_delay_levels(text)


def test_no_header_or_level_zero_is_immediate():
    assert decide(("TAGS", b"a")) is None
    assert decide(("DELAY", b"0")) is None
    assert decide(("DELAY", b"-3")) is None


@pytest.mark.parametrize("level", range(1, 19))
def test_each_level(level):
    assert decide(("DELAY", str(level).encode())) == Park(level, NOW + LEVELS[level - 1])


def test_above_the_highest_level_is_the_highest():
    assert decide(("DELAY", b"99")) == Park(18, NOW + LEVELS[-1])


@pytest.mark.parametrize("value", [b"x", b"", None, b"1.5", b"\xff"])
def test_delay_not_a_number_is_refused(value):
    with pytest.raises(InvalidRecordError, match="DELAY"):
        decide(("DELAY", value))


def test_timers():
    assert decide(("TIMER_DELAY_SEC", b"90")) == Park(None, NOW + 90_000)
    assert decide(("TIMER_DELAY_MS", b"1500")) == Park(None, NOW + 1500)
    assert decide(("TIMER_DELIVER_MS", str(NOW + 7).encode())) == Park(None, NOW + 7)


def test_timer_in_the_past_is_immediate():
    assert decide(("TIMER_DELIVER_MS", str(NOW - 5).encode())) is None
    assert decide(("TIMER_DELAY_MS", b"0")) is None
    assert decide(("TIMER_DELAY_SEC", b"-10")) is None


def test_timer_over_the_maximum_is_refused():
    assert decide(("TIMER_DELAY_SEC", str(30 * 86_400).encode())) == Park(None, NOW + 30 * DAY)
    with pytest.raises(InvalidRecordError, match="timerMaxDelaySec"):
        decide(("TIMER_DELAY_SEC", str(30 * 86_400 + 1).encode()))
    with pytest.raises(InvalidRecordError, match="timerMaxDelaySec"):
        decide(("TIMER_DELAY_MS", b"5000"), max_ms=4000)


def test_two_scheduling_headers_are_refused():
    with pytest.raises(InvalidRecordError, match="one scheduling header"):
        decide(("DELAY", b"1"), ("TIMER_DELAY_MS", b"10"))
