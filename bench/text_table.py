"""A benchmark's text table, printed a row at a time as its points are measured.

A table is its columns: each a title, a format spec that starts with the column's width
(``"9.1f"``, ``"10d"``) and the row key it shows, or a function of the row (a dict) for a
figure derived from several keys. A ``"|"`` among the columns separates groups of them.
Titles are right-aligned to their column's width, so a header and its rows line up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

SEPARATOR = "|"
Column = tuple[str, str, str | Callable[[dict], Any]]


@dataclass(frozen=True)
class Table:
    columns: tuple[Column | str, ...]

    @classmethod
    def of(cls, *columns: Column | str) -> Table:
        return cls(columns)

    def header(self) -> str:
        return " ".join(c if c == SEPARATOR else f"{c[0]:>{_width(c[1])}}" for c in self.columns)

    def line(self, row: dict) -> str:
        return " ".join(c if c == SEPARATOR else format(_value(c, row), c[1]) for c in self.columns)

    def print(self, rows: Iterable[dict], header: bool = True) -> None:
        """``rows`` after the header (``header``: the first rows of a run)."""
        if header:
            print(self.header())
        for row in rows:
            print(self.line(row), flush=True)


def _width(spec: str) -> int:
    match = re.match(r"\d+", spec)
    assert match, f"a column's format starts with its width: {spec!r}"
    return int(match.group())


def _value(column: Column, row: dict) -> Any:
    _, _, value = column
    return row[value] if isinstance(value, str) else value(row)
