"""Java value semantics that RocketMQ's SQL92 filter evaluation depends on.

RocketMQ evaluates filter expressions over Java objects: message properties are ``String``s,
integer literals are ``Integer`` (or ``Long`` beyond the int range), decimal literals are
``Double``, TRUE/FALSE are ``Boolean``. Comparing two values of different classes converts one
side with ``Integer.valueOf``/``Long.valueOf``/``Double.valueOf``/``Boolean.valueOf``
(ComparisonExpression.__compare), and a string that does not parse makes the whole
evaluation fail, which the broker counts as "no match". This module models those classes with
Python values:

=================  ==========================================
Java               here
=================  ==========================================
``String``         ``str``
``Boolean``        ``bool``
``Integer``        :class:`JInt` (an ``int``)
``Long``           :class:`JLong` (an ``int``)
``Double``         ``float``
``null``           ``None``
=================  ==========================================

Every conversion failure raises :class:`EvaluationAborted`.
"""

from __future__ import annotations

import math
import re

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
DOUBLE_MIN_POSITIVE = 5e-324  # Double.MIN_VALUE, printed by Java as 4.9E-324


class EvaluationAborted(Exception):
    """A Java exception during evaluation: RocketMQ's filter then reports "no match"."""


class JInt(int):
    """A ``java.lang.Integer`` value."""

    __slots__ = ()


class JLong(int):
    """A ``java.lang.Long`` value."""

    __slots__ = ()


NUMBER_TYPES = (JInt, JLong, float)

# String.trim(): every char <= U+0020 at either end, and nothing else (not U+00A0, not U+3000).
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))
# Integer.parseInt / Long.parseLong: sign, then decimal digits (Character.digit accepts any
# Unicode Nd digit, as Python's \d and int() do); no spaces, no underscores, no suffix.
_JAVA_INTEGER = re.compile(r"[+-]?\d+")
# Double.valueOf after trim(): NaN, Infinity, decimal with optional exponent and f/F/d/D
# suffix (ASCII digits only), or a hexadecimal float with its mandatory binary exponent.
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_JAVA_HEX_DOUBLE = re.compile(
    r"([+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)


def java_trim(text: str) -> str:
    """``String.trim()``."""
    return text.strip(_JAVA_TRIM)


def parse_int(text: str) -> int:
    """``Integer.valueOf(text)``, or EvaluationAborted (NumberFormatException)."""
    # str.isdecimal() is exactly "every char is a Unicode Nd digit", as \d+ (and no sign)
    if (text.isdecimal() or _JAVA_INTEGER.fullmatch(text)) and INT_MIN <= (value := int(text)) <= INT_MAX:
        return value
    raise EvaluationAborted(f"Integer.valueOf({text!r})")


def parse_long(text: str) -> int:
    """``Long.valueOf(text)``, or EvaluationAborted (NumberFormatException)."""
    if (text.isdecimal() or _JAVA_INTEGER.fullmatch(text)) and LONG_MIN <= (value := int(text)) <= LONG_MAX:
        return value
    raise EvaluationAborted(f"Long.valueOf({text!r})")


def parse_double(text: str) -> float:
    """``Double.valueOf(text)``, or EvaluationAborted (NumberFormatException)."""
    if text.isdigit() and text.isascii():  # the common case, without a regular expression
        return float(text)
    body = java_trim(text)
    if _JAVA_DOUBLE.fullmatch(body):
        if body[-1] in "fFdD":
            body = body[:-1]
        return float(body)
    hexa = _JAVA_HEX_DOUBLE.fullmatch(body)
    if hexa:
        return float.fromhex(hexa.group(1))
    raise EvaluationAborted(f"Double.valueOf({text!r})")


def parse_boolean(text: str) -> bool:
    """``Boolean.valueOf(text)``: true exactly when ``"true".equalsIgnoreCase(text)``."""
    return len(text) == 4 and text.isascii() and text.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """``Double.compare``: a total order with -0.0 < 0.0 and NaN above +Infinity (NaN == NaN)."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b:
        if a == 0.0:
            sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
            return (sa > sb) - (sa < sb)
        return 0
    a_nan, b_nan = math.isnan(a), math.isnan(b)
    return (a_nan > b_nan) - (a_nan < b_nan)


def compare(lv: object, rv: object) -> int:
    """ComparisonExpression.__compare(lv, rv, convertStringExpressions=true) for non-null values.

    Values of different classes are converted first: a number and a string parse the string
    as the number's class, a Boolean and a string parse the string with Boolean.valueOf (but
    only when the string is on the left: with the Boolean on the left RocketMQ casts the
    Boolean to String and fails), numbers widen (Integer < Long < Double); any other pair of
    classes compares as -1 ("less").
    """
    lc, rc = type(lv), type(rv)
    if lc is not rc:
        if lc is bool:
            if rc is str:
                raise EvaluationAborted("ClassCastException: Boolean is not a String")
            return -1
        if lc is JInt or lc is JLong:
            if rc is JInt or rc is JLong:
                pass
            elif rc is float:
                lv = float(lv)  # type: ignore[arg-type]
            elif rc is str:
                rv = parse_int(rv) if lc is JInt else parse_long(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is float:
            if rc is JInt or rc is JLong:
                rv = float(rv)  # type: ignore[arg-type]
            elif rc is str:
                rv = parse_double(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is str:
            if rc is bool:
                lv = parse_boolean(lv)  # type: ignore[arg-type]
            elif rc is JInt:
                lv = parse_int(lv)  # type: ignore[arg-type]
            elif rc is JLong:
                lv = parse_long(lv)  # type: ignore[arg-type]
            elif rc is float:
                lv = parse_double(lv)  # type: ignore[arg-type]
            else:
                return -1
        else:
            return -1
    if type(lv) is float:
        return double_compare(lv, rv)  # type: ignore[arg-type]
    # Integer/Long/Boolean/String compareTo; only the sign is used. (String.compareTo orders
    # UTF-16 units, but strings are only ever compared here for equality: >, <, ... convert
    # two strings to doubles before they get here.)
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def negate(value: object) -> object:
    """UnaryExpression.createNegate's evaluate: numbers change sign, anything else is null."""
    kind = type(value)
    if kind is JInt or kind is JLong:
        return kind(-value)  # type: ignore[operator]
    if kind is float:
        return -value  # type: ignore[operator]
    return None


def java_double_text(value: float) -> str:
    """A decimal literal for ``value`` that RocketMQ's grammar reads back as the same double."""
    text = repr(value)
    return text if ("." in text or "e" in text) else text + ".0"
