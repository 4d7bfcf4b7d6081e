"""Which records of a produced batch are parked, and until when: the scheduling headers.

A record is delivered later when it carries one of RocketMQ's scheduling properties as a
header (values are decimal ASCII, as RocketMQ's string properties are):

``DELAY``             delay level n: 1..levels; 0, negative or absent = none; above the
                      highest level = the highest (RocketMQ's rule)
``TIMER_DELIVER_MS``  deliver at this epoch millisecond
``TIMER_DELAY_MS``    deliver this many ms after the broker received it
``TIMER_DELAY_SEC``   deliver this many seconds after the broker received it

At most one of them per record. A timer more than ``timerMaxDelaySec`` ahead, or any value
that is not a whole number, refuses the produce (INVALID_RECORD, with a message naming the
header). A timer due now or in the past is not parked: the record stays in its batch and is
readable at once.
"""

from __future__ import annotations

from typing import NamedTuple

from rmqkafka.storage.errors import InvalidRecordError

DELAY = "DELAY"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
SCHEDULING_HEADERS = (DELAY, TIMER_DELIVER_MS, TIMER_DELAY_MS, TIMER_DELAY_SEC)
_NAMES = frozenset(SCHEDULING_HEADERS)


class Park(NamedTuple):
    """Where a record waits: delay ``level`` (1-based), or the timer wheel when None. (A
    tuple: one is made per parked record of a produced batch.)"""

    level: int | None
    due_ms: int


def scheduling_of(headers: list[tuple[str, bytes | None]], now_ms: int, levels_ms: tuple[int, ...],
                  timer_max_delay_ms: int) -> Park | None:
    """The Park for a record with these headers received at ``now_ms``, or None (deliver
    now). Raises InvalidRecordError for a value the rules above refuse."""
    name = raw = None
    for key, value in headers:
        if key in _NAMES:
            if name is not None:
                raise InvalidRecordError(f"a record may carry one scheduling header, not {name} and {key}")
            name, raw = key, value
    if name is None:
        return None
    value = _whole_number(name, raw)
    if name == DELAY:
        if value <= 0:
            return None
        level = min(value, len(levels_ms))
        return Park(level, now_ms + levels_ms[level - 1])
    due = value if name == TIMER_DELIVER_MS else now_ms + value * (1000 if name == TIMER_DELAY_SEC else 1)
    if due > now_ms + timer_max_delay_ms:
        raise InvalidRecordError(
            f"{name}={value} asks for a delay of {(due - now_ms) // 1000} s; timerMaxDelaySec is "
            f"{timer_max_delay_ms // 1000}"
        )
    if due <= now_ms:
        return None
    return Park(None, due)


def _whole_number(name: str, raw: bytes | None) -> int:
    try:
        return int(raw)  # type: ignore[arg-type]  # bytes of ASCII digits, sign, spaces
    except (TypeError, ValueError):
        text = (raw or b"").decode("ascii", "replace")
        raise InvalidRecordError(f"header {name}={text!r} is not a whole number") from None
