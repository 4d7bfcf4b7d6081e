"""The Java conversions and comparisons under RocketMQ's filter evaluation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqkafka.rmqsemantics.filters import java
from rmqkafka.rmqsemantics.filters.java import EvaluationAborted, JInt, JLong


@pytest.mark.parametrize("text", ["0", "-0", "+7", "2147483647", "-2147483648", "007", "\u0667"])
def test_parse_int_accepts(text: str) -> None:
    assert java.parse_int(text) == int(text)


@pytest.mark.parametrize("text", ["", "+", "-", " 1", "1 ", "1_0", "1L", "1.0", "2147483648",
                                  "-2147483649", "0x1", "one", "١٢٣٤٥٦٧٨٩٠١"])
def test_parse_int_refuses(text: str) -> None:
    with pytest.raises(EvaluationAborted):
        java.parse_int(text)


def test_parse_long_range() -> None:
    assert java.parse_long("9223372036854775807") == 2**63 - 1
    assert java.parse_long("-9223372036854775808") == -(2**63)
    with pytest.raises(EvaluationAborted):
        java.parse_long("9223372036854775808")


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", 1.0), ("1.", 1.0), (".5", 0.5), ("-1.5e3", -1500.0), ("1.5E+3", 1500.0),
     ("  2.5\t", 2.5), ("\x002.5\x1f", 2.5), ("1.5f", 1.5), ("1.5D", 1.5), ("+Infinity", math.inf),
     ("-Infinity", -math.inf), ("0x1.8p1", 3.0), ("0X.8P0d", 0.5), ("1e999", math.inf)],
)
def test_parse_double_accepts(text: str, value: float) -> None:
    assert java.parse_double(text) == value


@pytest.mark.parametrize("text", ["", ".", "e5", "1e", "inf", "infinity", "nan", "NaNd",
                                  "1_0", "1,5", "\u00a01.5", "0x1.8", "1.5ff", "١.٥"])
def test_parse_double_refuses(text: str) -> None:
    with pytest.raises(EvaluationAborted):
        java.parse_double(text)


def test_parse_double_nan() -> None:
    assert math.isnan(java.parse_double("NaN"))
    assert math.isnan(java.parse_double("-NaN"))


def test_parse_boolean() -> None:
    assert java.parse_boolean("true") and java.parse_boolean("TrUe")
    assert not java.parse_boolean("yes") and not java.parse_boolean(" true")
    assert not java.parse_boolean("")


def test_double_compare_is_a_total_order() -> None:
    ordered = [-math.inf, -1.0, -0.0, 0.0, 5e-324, 1.0, math.inf, math.nan]
    for i, a in enumerate(ordered):
        for j, b in enumerate(ordered):
            assert java.double_compare(a, b) == (i > j) - (i < j), (a, b)


@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_double_compare_agrees_with_python_off_zero(a: float, b: float) -> None:
    if a == 0.0 and b == 0.0:
        return
    assert java.double_compare(a, b) == (a > b) - (a < b)


def test_compare_widens_and_converts() -> None:
    assert java.compare(JInt(1), JLong(1)) == 0
    assert java.compare(JInt(1), 1.5) == -1
    assert java.compare(2.0, JLong(1)) == 1
    assert java.compare("5", JInt(5)) == 0
    assert java.compare(JInt(5), "6") == -1
    assert java.compare("true", True) == 0
    assert java.compare(True, JInt(1)) == -1
    assert java.compare(JInt(1), True) == -1
    assert java.compare("a", "b") == -1
    with pytest.raises(EvaluationAborted):
        java.compare(True, "true")
    with pytest.raises(EvaluationAborted):
        java.compare("x", 1.5)


def test_negate_keeps_the_class() -> None:
    assert type(java.negate(JInt(5))) is JInt and java.negate(JInt(5)) == -5
    assert type(java.negate(JLong(5))) is JLong
    assert java.negate(1.5) == -1.5
    assert java.negate("5") is None and java.negate(True) is None and java.negate(None) is None


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=5e-324))
def test_double_text_reads_back(value: float) -> None:
    text = java.java_double_text(value)
    assert float(text) == value
    assert "." in text or "e" in text
