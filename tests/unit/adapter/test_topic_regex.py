"""Regular expressions a client sends (ConsumerGroupHeartbeat's SubscribedTopicRegex) are
RE2J patterns: matched in time linear in the name, whatever the pattern, so a hostile
pattern cannot hold the event loop; RE2J's syntax is accepted and what it refuses is
refused with Kafka's message."""

from __future__ import annotations

import pytest

from rmqkafka.adapter.groups.topic_regex import InvalidRegex, compile_subscription, matching


@pytest.mark.timeout(20)
def test_a_pattern_that_backtracks_exponentially_in_re_matches_in_linear_time():
    # Python's re takes 15 s for 26 characters here and doubles with each one more
    assert matching("(a+)+b", ["a" * 249, "a" * 248 + "b"]) == {"a" * 248 + "b"}
    assert matching("(a|aa)*c", ["a" * 249]) == set()


@pytest.mark.parametrize("pattern, name", [
    ("[[:alpha:]]+", "orders"),  # POSIX classes are RE2J syntax
    (r"\Qa.b\E", "a.b"),
    (r"(?i)ORDERS", "orders"),
    (r"\p{L}+", "orders"),
    (r"orders\z", "orders"),
    (r"(?P<x>o)rders", "orders"),
])
def test_re2j_syntax_is_accepted(pattern, name):
    assert matching(pattern, [name, "other-" + name]) == {name}


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=x)", "(?<=x)y", "a++", "(?>a)", "(", r"a\Z"])
def test_what_re2j_refuses_is_refused_with_kafkas_message(pattern):
    with pytest.raises(InvalidRegex) as refused:
        compile_subscription(pattern)
    assert str(refused.value).startswith(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: ")
    assert str(refused.value).endswith(".")


def test_a_pattern_longer_than_the_bound_is_refused_before_it_is_compiled():
    with pytest.raises(InvalidRegex, match="longer than"):
        compile_subscription("a" * 5000)



def test_a_refused_pattern_is_compiled_once_however_often_it_is_sent(monkeypatch: pytest.MonkeyPatch):
    """RE2 gives up on a program over its memory bound only after building it: 1,000
    ``\\pL`` took 0.3-0.7 s of the event loop. Before, refusals were not cached, so a client
    sending the same pattern in every heartbeat (or ListTransactions) paid that each time."""
    from rmqkafka.adapter import re2j_patterns

    compiles = []
    real = re2j_patterns.re2.compile
    monkeypatch.setattr(re2j_patterns.re2, "compile", lambda *args: compiles.append(args[0]) or real(*args))
    heavy = "\\pL" * 1000 + "#refused-once"
    for _ in range(3):
        with pytest.raises(InvalidRegex, match="pattern too large"):
            compile_subscription(heavy)
    assert compiles == [heavy]


def test_what_one_pattern_may_cost_is_bounded():
    """A client chooses the pattern, so what it costs is bounded before it is paid: RE2's
    memory bound per pattern (its program and its DFA caches) is 2 MiB, not RE2's default of
    8 MiB, and at most 64 patterns are kept compiled. Before, [\\p{L}\\p{N}]{1,249} compiled to
    334,000 instructions (0.56 s of the loop), and 256 distinct patterns of about 3 MiB each
    (their DFA caches after matching) stayed cached: 800 MiB a client could make the broker hold."""
    from rmqkafka.adapter import re2j_patterns

    for heavy in ("[\\p{L}\\p{N}]{1,249}#a", "\\pL{249}#b"):
        with pytest.raises(InvalidRegex, match="pattern too large"):
            compile_subscription(heavy)
    # what a subscription plausibly asks for still compiles
    for usual in ("\\pL{1,60}", ".{1,249}", "(?i)[a-z0-9._-]{1,249}", "|".join(f"topic-{i}" for i in range(400))):
        assert compile_subscription(usual).fullmatch("topic-7" if "|" in usual else "abc")
    assert re2j_patterns._compiled.cache_info().maxsize == 64
