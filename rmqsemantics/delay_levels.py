"""RocketMQ's delay levels: ``messageDelayLevel = 1s 5s 10s 30s 1m 2m ... 2h``.

Level n (1-based) delays a record by the n-th duration. The syntax is RocketMQ's: durations
separated by spaces, each a whole number followed by one of the units s, m, h, d.
"""

from __future__ import annotations

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# The longest delay anything may ask for: RocketMQ's timerMaxDelaySec is a Java int of
# seconds (about 68 years). Delivery times are 64-bit ms; a longer delay could overflow them.
LONGEST_DELAY_SEC = 2**31 - 1


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The delays in ms of ``text``'s levels; ValueError naming the bad part otherwise."""
    levels = []
    for part in text.split():
        number, unit = part[:-1], part[-1:]
        if unit not in _UNIT_MS or not number.isdigit():
            raise ValueError(f"{part!r} is not a delay: a whole number followed by s, m, h or d")
        delay_ms = int(number) * _UNIT_MS[unit]
        if delay_ms > LONGEST_DELAY_SEC * 1000:
            raise ValueError(f"{part!r} is too long: at most {LONGEST_DELAY_SEC}s, the range of "
                             "RocketMQ's timerMaxDelaySec (a Java int of seconds)")
        levels.append(delay_ms)
    if not levels:
        raise ValueError("no delay levels")
    return tuple(levels)


DEFAULT_DELAY_LEVELS_MS = parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL)
