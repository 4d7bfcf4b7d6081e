"""SQL92 filter syntax: tokens, literals, keywords, precedence, canonical text, errors."""

from __future__ import annotations

import pytest

from filter_helpers import ev, sql_error
from rmqkafka.rmqsemantics.filters.java import JInt, JLong
from rmqkafka.rmqsemantics.filters.sql92 import (
    And,
    Between,
    BoolCast,
    Compare,
    Const,
    In,
    IsNull,
    Match,
    Neg,
    Not,
    Or,
    Prop,
    parse,
    to_text,
    tokenize,
)

# --------------------------------------------------------------------------- literals


@pytest.mark.parametrize(
    ("literal", "kind", "value"),
    [
        ("0", "int", 0), ("5", "int", 5), ("5L", "int", 5), ("5l", "int", 5),
        ("2147483647", "int", 2**31 - 1), ("2147483648", "long", 2**31),
        ("9223372036854775807", "long", 2**63 - 1), ("9223372036854775807L", "long", 2**63 - 1),
        ("1.5", "double", 1.5), ("1.", "double", 1.0), (".5", "double", 0.5),
        ("1e3", "double", 1000.0), ("1E+3", "double", 1000.0), ("1.5e-3", "double", 0.0015),
        ("007.5", "double", 7.5), ("4.9E-324", "double", 5e-324),
        ("'x'", "string", "x"), ("''", "string", ""), ("'it''s'", "string", "it's"),
        ("''''", "string", "'"), ("'a\nb'", "string", "a\nb"), ("'ü €'", "string", "ü €"),
        ("TRUE", "bool", True), ("false", "bool", False), ("Null", "null", None),
    ],
)
def test_literals(literal: str, kind: str, value: object) -> None:
    tree = parse(f"a = {literal}" if kind != "null" else f"{literal} IS NULL")
    const = tree.right if isinstance(tree, Compare) else tree.operand
    assert const == Const(kind, value)
    assert type(const.value) is {"int": JInt, "long": JLong, "double": float, "string": str,
                                 "bool": bool, "null": type(None)}[kind]


@pytest.mark.parametrize(
    ("literal", "message"),
    [
        ("9223372036854775808", "9223372036854775808 does not fit in a Java long"),
        ("0.0", "0.0 is below the smallest positive double"),
        ("1e-400", "1e-400 is below the smallest positive double"),
        ("1e400", "1e400 is larger than the largest double"),
        ("0L", "expected an operator or the end of the expression but found 'L'"),
        ("1.5f", "expected an operator or the end of the expression but found 'f'"),
        ("0x10", "expected an operator or the end of the expression but found 'x10'"),
        ("'x", "this string is never closed"),
        ('"x"', "unexpected character '\"'"),
    ],
)
def test_bad_literals(literal: str, message: str) -> None:
    error = sql_error(f"a = {literal}")
    assert message in str(error)


def test_string_escape_round_trip() -> None:
    assert ev("a = 'it''s'", a="it's")
    assert ev("a = ''", a="")
    assert to_text(parse("a = 'it''s'")) == "a = 'it''s'"


# --------------------------------------------------------------------------- tokens


def test_keywords_are_case_insensitive() -> None:
    expression = "a is not null And b In ('x') oR c between 1 AnD 2 AND d NOT contains 'q'"
    assert parse(expression) == parse(expression.upper().replace("'X'", "'x'").replace("'Q'", "'q'")
                                      .replace("A IS", "a IS").replace("B IN", "b IN")
                                      .replace("C BETWEEN", "c BETWEEN").replace("D NOT", "d NOT"))
    assert ev("a startsWith 'x' and b EndsWith 'y'", a="xa", b="by")
    assert ev("true AND True")


def test_identifiers() -> None:
    assert parse("$a_1 = 'x'") == Compare("=", Prop("$a_1"), Const("string", "x"))
    assert parse("ORDER = 'x'").left == Prop("ORDER")  # longer than the keyword OR
    assert parse("notes = 'x'").left == Prop("notes")
    assert parse("in1 = 'x'").left == Prop("in1")
    assert "unexpected character '.'" in str(sql_error("a.b = 'x'"))
    assert "unexpected character 'é'" in str(sql_error("é = 'x'"))
    error = sql_error("in = 'x'")
    assert "expected a property, a literal or '(' but found 'in'" in str(error)


def test_blanks_and_comments() -> None:
    tree = parse("a = 'x'")
    for text in ("a='x'", " \t\r\n\fa\n=\n'x'\n", "a = 'x' -- trailing comment",
                 "a -- here\n= 'x'", "a /* inline */ = /**/'x'", "/* a\n b */ a = 'x'"):
        assert parse(text) == tree, text
    assert "this /* comment is never closed" in str(sql_error("a = 'x' /* open"))
    assert "unexpected character '\\x0b'" in str(sql_error("a =\v'x'"))


def test_tokens_take_the_longest_match() -> None:
    kinds = [t.kind for t in tokenize("a<>1 b<=2 c>=3 d<4 1.5e3 5e2 .5 1. 12L")]
    assert kinds == ["ID", "<>", "INTEGER", "ID", "<=", "INTEGER", "ID", ">=", "INTEGER", "ID",
                     "<", "INTEGER", "DECIMAL", "DECIMAL", "DECIMAL", "DECIMAL", "INTEGER", "EOF"]


# --------------------------------------------------------------------------- structure


def test_every_operator_parses_to_its_node() -> None:
    a, b = Prop("a"), Prop("b")
    one, x = Const("int", JInt(1)), Const("string", "x")
    cases = {
        "a = 1": Compare("=", a, one),
        "a <> 1": Compare("<>", a, one),
        "a > 1": Compare(">", a, one),
        "a >= 1": Compare(">=", a, one),
        "a < 1": Compare("<", a, one),
        "a <= 1": Compare("<=", a, one),
        "a BETWEEN 1 AND 2": Between(a, one, Const("int", JInt(2)), False),
        "a NOT BETWEEN 1 AND 2": Between(a, one, Const("int", JInt(2)), True),
        "a IN ('x', 'y')": In(a, ("x", "y"), False),
        "a NOT IN ('x')": In(a, ("x",), True),
        "a CONTAINS 'x'": Match("CONTAINS", a, "x", False),
        "a NOT CONTAINS 'x'": Match("CONTAINS", a, "x", True),
        "a STARTSWITH 'x'": Match("STARTSWITH", a, "x", False),
        "a NOT STARTSWITH 'x'": Match("STARTSWITH", a, "x", True),
        "a ENDSWITH 'x'": Match("ENDSWITH", a, "x", False),
        "a NOT ENDSWITH 'x'": Match("ENDSWITH", a, "x", True),
        "a IS NULL": IsNull(a, False),
        "a IS NOT NULL": IsNull(a, True),
        "a = 'x' AND b = 'x'": And(Compare("=", a, x), Compare("=", b, x)),
        "a = 'x' OR b = 'x'": Or(Compare("=", a, x), Compare("=", b, x)),
        "NOT a": Not(BoolCast(a)),
        "a": BoolCast(a),
        "-a = 1": Compare("=", Neg(a), one),
        "+a = 1": Compare("=", a, one),
    }
    for text, tree in cases.items():
        assert parse(text) == tree, text


def test_precedence() -> None:
    a, b, c = (Compare("=", Prop(n), Const("string", "x")) for n in "abc")
    assert parse("a = 'x' OR b = 'x' AND c = 'x'") == Or(a, And(b, c))
    assert parse("a = 'x' AND b = 'x' OR c = 'x'") == Or(And(a, b), c)
    assert parse("(a = 'x' OR b = 'x') AND c = 'x'") == And(Or(a, b), c)
    assert parse("NOT a = 'x' AND b = 'x'") == And(
        Compare("=", Not(BoolCast(Prop("a"))), Const("string", "x")), b)
    assert parse("NOT (a = 'x') AND b = 'x'") == And(Not(a), b)
    assert parse("a = 'x' OR b = 'x' OR c = 'x'") == Or(Or(a, b), c)
    # comparisons bind tighter than equality: a = (b > 1)
    assert parse("a = b > 1") == Compare("=", Prop("a"), Compare(">", Prop("b"), Const("int", JInt(1))))


# --------------------------------------------------------------------------- canonical text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("a='x'", "a = 'x'"),
        ("a is not null and a='hello'", "a IS NOT NULL AND a = 'hello'"),
        ("a = 1 or (b = 2 and c = 3)", "a = 1 OR b = 2 AND c = 3"),
        ("(a = 1 or b = 2) and c = 3", "(a = 1 OR b = 2) AND c = 3"),
        ("a = 1 or (b = 2 or c = 3)", "a = 1 OR (b = 2 OR c = 3)"),
        ("not (a = 1)", "NOT (a = 1)"),
        ("not a = 1", "(NOT a) = 1"),
        ("not not a", "NOT (NOT a)"),
        ("a > - -5", "a > - -5"),
        ("a > -(-5)", "a > - -5"),
        ("a between +1 and 2L", "a BETWEEN 1 AND 2"),
        ("a in('x','it''s')", "a IN ('x', 'it''s')"),
        ("a not contains 'q'", "a NOT CONTAINS 'q'"),
        ("a > 1.50", "a > 1.5"),
        ("a > 1e300", "a > 1e+300"),
        ("a > 1.", "a > 1.0"),
        ("TAGS = 'x' -- comment", "TAGS = 'x'"),
    ],
)
def test_canonical_text(text: str, canonical: str) -> None:
    tree = parse(text)
    assert to_text(tree) == canonical
    assert parse(canonical) == tree
    assert to_text(parse(canonical)) == canonical


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("", 1, "expected a property, a literal or '(' but found the end of the expression"),
        ("a = ", 5, "expected a property, a literal or '(' but found the end of the expression"),
        ("a == 1", 4, "expected a property, a literal or '(' but found '='"),
        ("a != 1", 3, "unexpected character '!'"),
        ("a = 'x", 5, "this string is never closed"),
        ("(a = 1", 7, "expected ')' to close the '(' at column 1 but found the end of the expression"),
        ("a = 1)", 6, "expected an operator or the end of the expression but found ')'"),
        ("a = 1 b = 2", 7, "expected an operator or the end of the expression but found 'b'"),
        ("a LIKE 'x%'", 3, "expected an operator or the end of the expression but found 'LIKE'"),
        ("a + 1 = 2", 3, "expected an operator or the end of the expression but found '+'"),
        ("a NOT LIKE 'x'", 7,
         "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT but found 'LIKE'"),
        ("a IN 'x'", 6, "expected '(' after IN but found 'x'"),
        ("a IN ()", 7, "expected a 'string' literal in the IN list but found ')'"),
        ("a IN (1)", 7, "expected a 'string' literal in the IN list but found '1'"),
        ("a IN ('x' 'y')", 11, "expected ',' or ')' in the IN list but found 'y'"),
        ("a IN ('x',)", 11, "expected a 'string' literal after ',' but found ')'"),
        ("a CONTAINS b", 12, "expected a 'string' literal after CONTAINS but found 'b'"),
        ("a BETWEEN 1 OR 2", 13, "expected AND between the bounds of BETWEEN but found 'OR'"),
        ("a IS 5", 6, "expected NULL or NOT NULL after IS but found '5'"),
        ("a IS NOT 5", 10, "expected NULL but found '5'"),
        ("a > 'x'", 5, "'x' cannot be compared with >: only numbers and properties can"),
        ("TRUE < a", 1, "TRUE cannot be compared with <: only numbers and properties can"),
        ("a >= NULL", 6, "NULL cannot be compared with >=: only numbers and properties can"),
        ("(a > 1) > 2", 2, "a > 1 is a condition and cannot be compared with >"),
        ("a BETWEEN 'a' AND 'b'", 11, "'a' cannot be compared with BETWEEN"),
        ("a NOT BETWEEN 1 AND TRUE", 21, "TRUE cannot be compared with NOT BETWEEN"),
        ("NOT a BETWEEN 1 AND 2", 1, "NOT a is a condition and cannot be compared with BETWEEN"),
        ("a BETWEEN 10 AND 1", 11, "BETWEEN 10 AND 1: the lower bound is greater than the upper"),
        ("a BETWEEN 1.5 AND 1", 11, "BETWEEN 1.5 AND 1: the lower bound is greater"),
        ("a = NULL", 5, "NULL cannot be compared with =: use IS NULL or IS NOT NULL"),
        ("NULL <> a", 1, "NULL cannot be compared with <>"),
        ("TRUE = 1", 1, "TRUE cannot be compared with 1"),
        ("FALSE = 'x'", 1, "FALSE cannot be compared with 'x'"),
        ("'x' IN ('x')", 1, "IN needs a property on its left, not 'x'"),
        ("NOT a IN ('x')", 1, "IN needs a property on its left, not NOT a"),
        ("1", 1, "1 is not a condition (a filter must be a condition)"),
        ("'x'", 1, "'x' is not a condition (a filter must be a condition)"),
        ("-a", 1, "-a is not a condition (a filter must be a condition)"),
        ("a AND 'x'", 7, "'x' is not a condition (AND joins conditions)"),
        ("5 OR a", 1, "5 is not a condition (OR joins conditions)"),
        ("NOT 5", 5, "5 is not a condition (NOT needs a condition)"),
    ],
)
def test_errors_say_where_and_what(text: str, column: int, message: str) -> None:
    error = sql_error(text)
    assert error.column == column, str(error)
    assert message in str(error)
    assert str(error).startswith(f"invalid SQL92 expression at column {column}: ")


def test_error_on_a_later_line_gives_line_and_column() -> None:
    error = sql_error("a = 'x'\n  AND b =")
    assert (error.line, error.column) == (2, 10)
    assert str(error).startswith("invalid SQL92 expression at line 2, column 10: expected")


def test_a_long_token_is_shortened_in_the_message() -> None:
    error = sql_error("a = 1 " + "b" * 100)
    assert "found 'bbbbbbbbbbbbbbbbbbbbb...'" in str(error)
