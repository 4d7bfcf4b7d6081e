"""SQL92 filter evaluation: RocketMQ's results, operator by operator.

Each expected value follows from RocketMQ's filter classes (ComparisonExpression,
LogicExpression, UnaryExpression, UnaryInExpression, BooleanConstantExpression) and from
ExpressionMessageFilter, which turns an exception into "no match". Every case runs through
both the compiled matcher and the reference interpreter (filter_helpers.ev).
"""

from __future__ import annotations

import pytest

from filter_helpers import ev

# --------------------------------------------------------------------------- = and <>


def test_string_equality() -> None:
    assert ev("a = 'x'", a="x")
    assert not ev("a = 'x'", a="y")
    assert not ev("a = 'x'")
    assert not ev("a = 'x'", a="X")
    assert not ev("a = '1'", a="01")  # a string literal compares as a string


def test_not_equal_is_not_of_equal() -> None:
    assert ev("a <> 'x'", a="y")
    assert not ev("a <> 'x'", a="x")
    assert not ev("a <> 'x'")  # NOT null is null


def test_equality_with_a_null_side_is_asymmetric() -> None:
    # doCreateEqual: only the right side null -> false; only the left side null -> null.
    assert not ev("'x' = a")
    assert ev("'x' <> a")
    assert ev("NOT ('x' = a)")
    assert not ev("a <> 'x'")
    # both null -> true
    assert ev("a = b")
    assert not ev("a <> b")
    assert not ev("a = b", a="1")
    assert ev("a <> b", a="1")  # NOT false
    assert not ev("a <> b", b="1")  # NOT null
    assert ev("a = b", a="1", b="1")
    assert not ev("a = b", a="1", b="01")


def test_property_compared_with_an_integer_reads_it_with_integer_value_of() -> None:
    assert ev("a = 1", a="1")
    assert ev("a = 1", a="01")
    assert ev("a = 1", a="+1")
    assert ev("a = -1", a="-1")
    assert ev("a = 1", a="\u0661")  # Character.digit reads any Unicode decimal digit
    assert not ev("a = 1", a="2")
    assert not ev("a = 1")
    for unreadable in ("1.0", " 1", "1L", "abc", "", "1_0", "2147483648"):
        assert not ev("a = 1", a=unreadable)
        assert not ev("a <> 1", a=unreadable)  # the exception is no match, NOT or not


def test_long_literals_read_the_property_with_long_value_of() -> None:
    assert ev("a = 3000000000", a="3000000000")
    assert ev("a >= 2147483648", a="2147483648")
    assert not ev("a > 2147483647", a="2147483648")  # an Integer literal: Integer.valueOf throws
    assert not ev("a > 5", a="3000000000")  # Integer.valueOf overflows: exception
    assert ev("a < 9223372036854775807", a="-9223372036854775808")
    assert not ev("a < 9223372036854775807", a="9223372036854775808")


def test_property_compared_with_a_decimal_reads_it_with_double_value_of() -> None:
    assert ev("a = 1.0", a="1")
    assert ev("a = 1.0", a="1e0")
    assert ev("a = 1.0", a=" 1.0 ")  # Double.valueOf trims
    assert ev("a = 1.0", a="1.0d")
    assert ev("a = 1.5", a="0x1.8p0")
    assert not ev("a = 1.0", a="1,0")
    assert not ev("a = 1.0", a="one")


def test_booleans() -> None:
    assert ev("a = TRUE", a="true")
    assert ev("a = TRUE", a="TRUE")
    assert not ev("a = TRUE", a="yes")
    assert ev("a = FALSE", a="yes")  # Boolean.valueOf("yes") is false
    assert not ev("a = TRUE")
    # TRUE on the left: RocketMQ casts the Boolean to String, an exception, so never a match
    assert not ev("TRUE = a", a="true")
    assert not ev("NOT (TRUE = a)", a="true")
    assert not ev("TRUE = a")
    assert ev("NOT (TRUE = a)")
    assert ev("TRUE")
    assert not ev("FALSE")
    assert not ev("NULL")
    assert not ev("NOT NULL")
    assert ev("NOT FALSE")
    assert ev("TRUE = TRUE")
    assert not ev("1 = TRUE")  # Integer vs Boolean: "less", not equal


def test_constants_compare_with_widening() -> None:
    assert ev("1 = 1.0")
    assert ev("1 = 1")
    assert ev("2147483648 > 1")
    assert ev("'x' = 'x'")
    assert ev("'1' = 1")  # Integer.valueOf('1') works, but...
    assert not ev("'x' = 1 OR TRUE")  # ...Integer.valueOf('x') throws before TRUE is reached


# --------------------------------------------------------------------------- > >= < <=


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("a > 5", "6", True), ("a > 5", "5", False), ("a > 5", "-7", False),
        ("a >= 5", "5", True), ("a >= 5", "4", False),
        ("a < 5", "4", True), ("a < 5", "5", False),
        ("a <= 5", "5", True), ("a <= 5", "6", False),
        ("a > -5", "-4", True), ("a > - -5", "4", False), ("a > +5", "6", True),
        ("5 < a", "6", True), ("5 >= a", "5", True),
        ("a > 1.5", "2", True), ("a > 1.5", "1.5", False), ("a >= 1.5", "1.5", True),
        ("a > 3.1E10", "3.1415E10", True),  # RocketMQ's ExpressionTest
        ("a > 3.14", "3.1415", True),
    ],
)
def test_relational_operators(expression: str, value: str, expected: bool) -> None:
    assert ev(expression, a=value) is expected


def test_relational_operators_need_numbers() -> None:
    for op in (">", ">=", "<", "<="):
        assert not ev(f"a {op} 5")
        assert not ev(f"NOT (a {op} 5)")  # null
        assert not ev(f"a {op} 5", a="abc")
        assert not ev(f"NOT (a {op} 5)", a="abc")
        assert not ev(f"a {op} 5", a="5.5")  # Integer.valueOf("5.5") throws
        assert not ev(f"a {op} 5 OR b = 'x'", a="abc", b="x")  # the exception wins
        assert ev(f"b = 'x' OR a {op} 5", a="abc", b="x")  # ...unless OR stops first
    assert ev("NOT (a > 5)", a="4")


def test_two_properties_compare_as_doubles() -> None:
    assert ev("a > b", a="20", b="10")  # RocketMQ's ExpressionTest
    assert not ev("a > b", a="10", b="20")
    assert ev("a > b", a="2.5", b="2")
    assert not ev("a > b", a="x", b="1")
    assert not ev("a > b", a="1")
    assert not ev("a > b", b="1")


def test_nan_and_infinity_follow_double_compare() -> None:
    # Double.compare orders NaN above everything, so "NaN > 1.5" is true in RocketMQ.
    assert ev("a > 1.5", a="NaN")
    assert ev("a >= 1.5", a="NaN")
    assert not ev("a < 1.5", a="NaN")
    assert not ev("a = 1.5", a="NaN")
    assert ev("1.5 < a", a="NaN")
    assert ev("a > 1.5", a="Infinity")
    assert not ev("a > 1.5", a="-Infinity")
    assert ev("a BETWEEN 1.5 AND 2.5", a="2")
    assert not ev("a BETWEEN 1.5 AND 2.5", a="NaN")
    assert ev("a NOT BETWEEN 1.5 AND 2.5", a="NaN")
    assert not ev("a = 1", a="NaN")  # Integer.valueOf("NaN") throws


# --------------------------------------------------------------------------- BETWEEN


@pytest.mark.parametrize(("value", "inside"), [("2", True), ("3", True), ("10", True),
                                               ("1", False), ("11", False)])
def test_between(value: str, inside: bool) -> None:
    # RocketMQ's ExpressionTest: a between 2 and 10 / a not between 2 and 10
    assert ev("a BETWEEN 2 AND 10", a=value) is inside
    assert ev("a NOT BETWEEN 2 AND 10", a=value) is not inside


def test_between_without_the_property_or_with_text() -> None:
    for expression in ("a BETWEEN 2 AND 10", "a NOT BETWEEN 2 AND 10",
                       "NOT (a BETWEEN 2 AND 10)"):
        assert not ev(expression)
        assert not ev(expression, a="abc")


def test_between_bounds_of_different_types_convert_separately() -> None:
    assert ev("a BETWEEN 1 AND 2.5", a="2")
    assert not ev("a BETWEEN 1 AND 2.5", a="2.2")  # Integer.valueOf("2.2") for ">= 1" throws
    assert ev("a BETWEEN 1.5 AND 3", a="2")  # 2 >= 1.5 as doubles, 2 <= 3 as integers
    assert ev("a BETWEEN b AND c", a="2", b="1", c="3")
    assert not ev("a BETWEEN b AND c", a="2", b="1")


def test_unchecked_between_bounds() -> None:
    # RocketMQ checks low <= high only for two plain literals, and not for NOT BETWEEN.
    assert not ev("a BETWEEN -5 AND -10", a="-7")
    assert ev("a NOT BETWEEN 10 AND 1", a="5")


# --------------------------------------------------------------------------- IN


def test_in() -> None:
    # RocketMQ's ExpressionTest: a in ('3', '4', '5')
    for value in ("3", "4", "5"):
        assert ev("a IN ('3', '4', '5')", a=value)
        assert not ev("a NOT IN ('3', '4', '5')", a=value)
    assert not ev("a IN ('3', '4', '5')", a="8")
    assert ev("a NOT IN ('3', '4', '5')", a="8")
    assert not ev("a IN ('3')", a="03")  # strings, no number conversion
    assert not ev("a IN ('3')")
    assert not ev("a NOT IN ('3')")
    assert not ev("NOT (a IN ('3'))")
    assert ev("a IN ('x', 'y', 'z', 'w', 'v', 'it''s')", a="it's")


# --------------------------------------------------------------------------- CONTAINS ...


@pytest.mark.parametrize(
    ("op", "hit", "miss"),
    [("CONTAINS", "abcd", "abd"), ("STARTSWITH", "bcd", "abc"), ("ENDSWITH", "abc", "bcd")],
)
def test_string_tests(op: str, hit: str, miss: str) -> None:
    assert ev(f"a {op} 'bc'", a=hit)
    assert not ev(f"a {op} 'bc'", a=miss)
    assert not ev(f"a NOT {op} 'bc'", a=hit)
    assert ev(f"a NOT {op} 'bc'", a=miss)
    # without the property both forms are false (never null), so NOT (...) is true
    assert not ev(f"a {op} 'bc'")
    assert not ev(f"a NOT {op} 'bc'")
    assert ev(f"NOT (a {op} 'bc')")
    assert ev(f"NOT (a NOT {op} 'bc')")
    # an empty search string is false for both forms
    assert not ev(f"a {op} ''", a="x")
    assert not ev(f"a NOT {op} ''", a="x")
    # the left side must be a string
    assert ev(f"'abcd' {op} 'bc'") is ev(f"a {op} 'bc'", a="abcd")
    assert not ev(f"(a = 'x') {op} 'bc'", a="x")


def test_case_sensitive_string_tests() -> None:
    assert not ev("a CONTAINS 'BC'", a="abcd")


# --------------------------------------------------------------------------- IS NULL


def test_is_null() -> None:
    assert ev("a IS NULL")
    assert not ev("a IS NULL", a="2")
    assert ev("a IS NOT NULL", a="2")
    assert not ev("a IS NOT NULL")
    assert ev("a IS NOT NULL", a="")
    assert ev("a IS NULL", a=None)  # a header without a value is an absent property
    assert ev("(a = 'x') IS NULL")
    assert not ev("(a = 'x') IS NULL", a="y")
    assert not ev("1 IS NULL")


def test_rocketmq_expression_test_cases() -> None:
    # ExpressionTest: equalExpression, nullOrExpression, booleanExpression, stringHasString
    assert ev("a is not null and a='hello'", a="hello")
    assert not ev("a is not null and a='hello'")
    assert ev("a is null OR a='hello'")
    assert ev("a is null OR a='hello'", a="hello")
    assert not ev("a is null OR a='hello'", a="abc")
    assert ev("a=TRUE OR b=FALSE", a="true", b="false")
    assert not ev("a=TRUE OR b=FALSE", a="false", b="true")
    assert ev("TAGS is not null and TAGS='''''tag'''''", TAGS="''tag''")
    assert ev("a=3 and b<>4 And c>5 AND d<=4", a="3", b="5", c="6", d="1")
    assert not ev("a=3 and b<>4 And c>5 AND d<=4", a="4", b="5", c="6", d="1")
    assert ev("a=3 or b<>4 Or c>5 OR d<=4", a="4", b="4", c="3", d="2")
    assert not ev("a=3 or b<>4 Or c>5 OR d<=4", a="4", b="4", c="3", d="10")


# --------------------------------------------------------------------------- logic


def test_three_valued_logic() -> None:
    assert ev("a = 'x' OR b = 'y'", b="y")  # null OR true
    assert not ev("a = 'x' OR b = 'y'", b="z")  # null OR false = null
    assert not ev("NOT (a = 'x' OR b = 'y')", b="z")
    assert not ev("a = 'x' AND b = 'y'", b="y")  # null AND true = null
    assert ev("NOT (a = 'x' AND b = 'y')", b="z")  # null AND false = false
    assert not ev("NOT (a = 'x' AND b = 'y')", b="y")
    assert not ev("NOT (a = 1)")  # NOT null


def test_a_property_as_a_condition() -> None:
    # asBooleanExpression casts a property: null without it, else false (a String is no Boolean)
    assert not ev("a", a="true")
    assert not ev("a")
    assert ev("NOT a", a="true")
    assert not ev("NOT a")
    assert ev("NOT a OR b", a="x")
    assert not ev("a AND b", a="true", b="true")


def test_not_binds_tighter_than_comparisons() -> None:
    # NOT a = 1 is (NOT a) = 1: a Boolean compared with an Integer, never equal.
    for value in ("1", "0", "true", None):
        assert not ev("NOT a = 1", a=value)
        assert not ev("NOT a = 'x'", a=value)  # Boolean vs String: exception or null
    assert ev("NOT (a = 1)", a="0")
    # NOT a IS NULL is (NOT a) IS NULL, true exactly when a is absent
    assert ev("NOT a IS NULL")
    assert not ev("NOT a IS NULL", a="x")


def test_precedence_and_before_or() -> None:
    assert ev("a = '1' OR b = '2' AND c = '3'", a="1")
    assert not ev("a = '1' OR b = '2' AND c = '3'", b="2")
    assert ev("(a = '1' OR b = '2') AND c = '3'", b="2", c="3")
    assert ev("NOT a = '1' OR b = '2'", b="2")


def test_or_short_circuit_skips_an_exception_and_and_does_too() -> None:
    assert ev("a = 'x' OR b > 1", a="x", b="zz")
    assert not ev("b > 1 OR a = 'x'", a="x", b="zz")
    assert not ev("a = 'y' AND b > 1", a="x", b="zz")
    assert ev("NOT (a = 'y' AND b > 1)", a="x", b="zz")  # AND stops at false...
    assert not ev("NOT (a = 'x' AND b > 1)", a="x", b="zz")
    # ...but not at null: the right side still runs, and its exception ends everything
    assert not ev("(c = 'y' AND b > 1) OR TRUE", b="zz")
    assert ev("(c = 'y' AND b > 1) OR TRUE", b="2")
    assert not ev("(c = 'y' OR b > 1) OR TRUE", b="zz")


def test_unary_minus_on_a_property_is_null() -> None:
    assert not ev("-a = -1", a="1")
    assert ev("-a IS NULL", a="1")
    assert ev("a = - -1", a="1")


def test_property_names_are_case_sensitive_and_tags_is_a_property() -> None:
    assert not ev("A = 'x'", a="x")
    assert ev("TAGS = 'TagA'", TAGS="TagA")
    assert not ev("tags = 'TagA'", TAGS="TagA")
    assert ev("$a_1 = 'x' AND _b = 'y'", **{"$a_1": "x", "_b": "y"})


# --------------------------------------------------------------------------- generated code


def test_generated_code_stays_direct() -> None:
    from rmqkafka.rmqsemantics.filters.sql92 import parse
    from rmqkafka.rmqsemantics.filters.sql92_eval import generated_source

    tags = generated_source(parse("TAGS IN ('a', 'b')"))
    assert "try:" not in tags and "g('TAGS') in {'a', 'b',}" in tags
    assert "try:" not in generated_source(parse("a = 'x' AND b IS NULL OR c CONTAINS 'q'"))
    numeric = generated_source(parse("a > 5"))
    assert "try:" in numeric and "_pint" in numeric and "_eq" not in numeric
    assert "_pdbl" in generated_source(parse("a BETWEEN 1.5 AND 2.5"))
