"""A SQL92 filter's cost is bounded before it is paid: an expression longer than
MAX_LENGTH characters or deeper than MAX_DEPTH levels is refused with a clear message, and
everything within the bounds parses, prints and compiles (the parser, the canonical text
and the generated matcher recurse once per level; Python refuses source nested deeper than
200 parentheses). Before the bounds, 1,000 parentheses or 4,700 ORs raised RecursionError
and 400 NOTs a SyntaxError from the generated code, and 20,000 ORs took 3 s to parse."""

from __future__ import annotations

import pytest

from rmqkafka.rmqsemantics.filters import ExpressionError, compile_filter
from rmqkafka.rmqsemantics.filters.sql92 import MAX_DEPTH, MAX_LENGTH, depth, parse, to_text


def right_nested(joiner: str, levels: int, left: str = "x{i} > 1") -> str:
    return "".join(f"({left.format(i=i)} {joiner} " for i in range(levels)) + "a = 1" + ")" * levels


# each builds an expression whose tree is exactly n levels deep
DEEPEST = {
    # b is a property read as a condition (BoolCast of Prop: 2 levels)
    "left OR chain": lambda n: " OR ".join(["b"] * (n - 1)),
    "left AND chain": lambda n: " AND ".join(["b"] * (n - 1)),
    "right AND, nullable left": lambda n: right_nested("AND", n - 2),
    "right OR, nullable left": lambda n: right_nested("OR", n - 2),
    "NOT": lambda n: "NOT " * (n - 2) + "b",
    "negations": lambda n: "a = " + "- " * (n - 2) + "1",
    "parenthesised NOTs": lambda n: "(NOT " * (n - 2) + "b" + ")" * (n - 2),
}


@pytest.mark.parametrize("build", DEEPEST.values(), ids=DEEPEST.keys())
def test_the_deepest_accepted_expression_parses_prints_and_compiles(build):
    source = build(MAX_DEPTH)
    assert depth(parse(source)) == MAX_DEPTH
    assert parse(to_text(parse(source))) == parse(source)
    compiled = compile_filter("sql", source)
    assert compiled.matches({"a": "1", "b": "true", "x0": "2"}) in (True, False)


@pytest.mark.parametrize("build", DEEPEST.values(), ids=DEEPEST.keys())
def test_one_level_more_is_refused(build):
    with pytest.raises(ExpressionError, match=f"more than {MAX_DEPTH} levels deep"):
        compile_filter("sql", build(MAX_DEPTH + 1))


def test_redundant_parentheses_count_towards_their_own_bound():
    assert compile_filter("sql", "(" * MAX_DEPTH + "a = 1" + ")" * MAX_DEPTH).matches({"a": "1"})
    with pytest.raises(ExpressionError, match="nests parentheses more than"):
        compile_filter("sql", "(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1))


@pytest.mark.parametrize("source", [
    "(" * 1000 + "a = 1" + ")" * 1000,
    "NOT " * 3000 + "b",
    "a = " + "+" * 5000 + "1",
    " OR ".join(["a = 1"] * 1600),
], ids=["1000 parentheses", "3000 NOTs", "5000 pluses", "1600 ORs"])
@pytest.mark.timeout(10)
def test_hostile_expressions_are_refused_cleanly(source):
    with pytest.raises(ExpressionError, match="levels deep"):
        compile_filter("sql", source)


def test_an_expression_longer_than_the_bound_is_refused_before_it_is_parsed():
    with pytest.raises(ExpressionError, match=f"longer than {MAX_LENGTH} characters"):
        compile_filter("sql", "a = 1" + " " * MAX_LENGTH)
    assert compile_filter("sql", "a = 1" + " " * (MAX_LENGTH - 5)).matches({"a": "1"})


def test_a_tag_expression_longer_than_the_bound_is_refused():
    from rmqkafka.rmqsemantics.filters.tags import MAX_LENGTH as TAGS_MAX

    tags = " || ".join(f"T{i}" for i in range(TAGS_MAX))
    with pytest.raises(ExpressionError, match=f"longer than {TAGS_MAX} characters"):
        compile_filter("tags", tags)
    assert compile_filter("tags", tags[:TAGS_MAX].rsplit(" ||", 1)[0]).matches({"TAGS": "T0"})
