"""bench.text_table: the header lines up with its rows, derived columns and separators."""

from __future__ import annotations

import pytest

from bench.text_table import SEPARATOR, Table

TABLE = Table.of(("n", "4d", "n"), ("rate/s", "8.1f", "rate"), SEPARATOR,
                 ("sum", "5.0f", lambda r: r["a"] + r["b"]))


def test_header_and_rows_line_up():
    row = {"n": 12, "rate": 3.14159, "a": 2, "b": 40.4}
    assert TABLE.header() == "   n   rate/s |   sum"
    assert TABLE.line(row) == "  12      3.1 |    42"
    assert len(TABLE.header()) == len(TABLE.line(row))


def test_print_writes_the_header_only_when_asked(capsys):
    rows = [{"n": 1, "rate": 1.0, "a": 0, "b": 1}, {"n": 2, "rate": 2.0, "a": 1, "b": 1}]
    TABLE.print(rows[:1])
    TABLE.print(rows[1:], header=False)
    assert capsys.readouterr().out.splitlines() == [TABLE.header(), TABLE.line(rows[0]), TABLE.line(rows[1])]


def test_a_format_without_a_width_is_refused():
    with pytest.raises(AssertionError, match="width"):
        Table.of(("n", "d", "n")).header()
