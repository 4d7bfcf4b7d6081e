"""Regular-expression subscriptions (ConsumerGroupHeartbeat v1 SubscribedTopicRegex):
RE2J patterns matched against whole topic names (adapter.re2j_patterns), refused with
INVALID_REGULAR_EXPRESSION and Kafka's message when RE2J would refuse them.
"""

from __future__ import annotations

from rmqkafka.adapter.re2j_patterns import MAX_PATTERN_LENGTH, PatternError, compile_pattern


class InvalidRegex(ValueError):
    pass


def compile_subscription(pattern: str):
    """The compiled pattern; raises InvalidRegex with Kafka's message."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidRegex(f"SubscribedTopicRegex is longer than {MAX_PATTERN_LENGTH} characters.")
    try:
        return compile_pattern(pattern)
    except PatternError as exc:
        raise InvalidRegex(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {exc}.") from None


def matching(pattern: str, names: list[str]) -> set[str]:
    compiled = compile_subscription(pattern)
    return {name for name in names if compiled.fullmatch(name)}
