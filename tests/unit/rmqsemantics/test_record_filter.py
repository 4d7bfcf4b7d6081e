"""compile_filter / RecordFilter / header_properties: the entry point the broker uses."""

from __future__ import annotations

import pytest

from rmqkafka.rmqsemantics.filters import (
    TAGS,
    ExpressionError,
    RecordFilter,
    compile_filter,
    header_properties,
)


def test_sql_filter() -> None:
    view = compile_filter("sql", "TAGS in ('a','b') and price > 100")
    assert isinstance(view, RecordFilter)
    assert view.kind == "sql"
    assert view.expression == "TAGS in ('a','b') and price > 100"
    assert view.text == "TAGS IN ('a', 'b') AND price > 100"
    assert view.codes is None
    assert view.matches_code(0) and view.matches_code(-5)  # SQL reads other headers
    assert view.matches({"TAGS": "a", "price": "150"})
    assert not view.matches({"TAGS": "a", "price": "50"})
    assert not view.matches({"TAGS": "c", "price": "150"})
    assert "'sql'" in repr(view)


def test_tag_filter() -> None:
    view = compile_filter("tags", " TagA || TagB ")
    assert view.kind == "tags" and view.text == "TagA || TagB"
    assert view.matches({TAGS: "TagB"})
    assert not view.matches({TAGS: "TagC"})


def test_text_compiles_to_the_same_filter() -> None:
    for kind, expression in (("sql", "not (a = 1) or b is null"), ("tags", "B||A|| B")):
        first = compile_filter(kind, expression)  # type: ignore[arg-type]
        again = compile_filter(kind, first.text)  # type: ignore[arg-type]
        assert again.text == first.text
        assert again.codes == first.codes


def test_errors() -> None:
    with pytest.raises(ExpressionError, match=r"^invalid SQL92 expression at column 1: expected"):
        compile_filter("sql", "")
    with pytest.raises(ExpressionError, match="column 7"):
        compile_filter("sql", "a = 1 b")
    with pytest.raises(ValueError, match="'tags' or 'sql'"):
        compile_filter("regex", "x")  # type: ignore[arg-type]


def test_expression_error_attributes() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_filter("sql", "a > 'x'")
    error = info.value
    assert isinstance(error, ValueError)
    assert (error.kind, error.expression, error.position, error.line, error.column) == (
        "SQL92", "a > 'x'", 4, 1, 5)
    assert error.detail == "'x' cannot be compared with >: only numbers and properties can"


def test_header_properties() -> None:
    headers = [("TAGS", b"TagA"), ("k", None), ("bad", b"\xff\xfe"), ("TAGS", b"TagB"),
               ("n", b"\xe8\xae\xa2\xe5\x8d\x95")]
    properties = header_properties(headers)
    # the first TAGS header counts, as for the consume queue's tag code
    assert properties == {"TAGS": "TagA", "k": None, "bad": "\ufffd\ufffd", "n": "订单"}
    view = compile_filter("sql", "k IS NULL AND TAGS = 'TagA' AND n = '订单'")
    assert view.matches(properties)
    assert header_properties([]) == {}
    assert header_properties(headers, {"TAGS", "n", "absent"}) == {"TAGS": "TagA", "n": "订单"}


def test_matches_headers() -> None:
    headers = [("KEYS", b"k"), ("TAGS", b"Aa"), ("price", b"150"), ("TAGS", b"BB")]
    tags = compile_filter("tags", "Aa")
    assert tags.names == {"TAGS"}
    assert tags.matches_headers(headers)
    assert not compile_filter("tags", "BB").matches_headers(headers)  # the first TAGS counts
    assert not tags.matches_headers([("KEYS", b"k")])
    assert not tags.matches_headers([("TAGS", None)])
    assert compile_filter("tags", "*").matches_headers([])
    assert compile_filter("tags", "*").names == frozenset()
    sql = compile_filter("sql", "TAGS = 'Aa' AND price > 100 AND KEYS IS NOT NULL OR z = 'q'")
    assert sql.names == {"TAGS", "price", "KEYS", "z"}
    assert sql.matches_headers(headers)
    assert not sql.matches_headers(headers[:2])
    assert not compile_filter("sql", "price > 100").matches_headers([("price", b"\xff")])
