"""The entry point of the broker: one compiled filter for a subscription view."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Literal

from . import sql92
from .sql92_eval import compile_matcher
from .tags import parse_tags

FilterKind = Literal["tags", "sql"]
TAGS = "TAGS"  # the property (Kafka header) that carries a record's tag
Headers = Iterable[tuple[str, "bytes | None"]]


class RecordFilter:
    """A tag or SQL92 expression compiled once, then applied to many records.

    * ``matches_code(code)``: the cheap first test on the tag hash code that the consume
      queue holds; true for every code when ``codes`` is None (``*`` and SQL filters, which
      read other headers).
    * ``matches(properties)``: the exact test on a record's properties (header name ->
      decoded value or None, see :func:`header_properties`).
    * ``matches_headers(headers)``: the same from a record's raw Kafka headers
      (``(name, bytes | None)`` pairs), decoding only the ``names`` the filter reads.
    * ``text``: the expression in canonical form, for display; compiling ``text`` again
      gives the same filter.
    """

    __slots__ = ("codes", "expression", "kind", "matches", "matches_headers", "names", "text")

    def __init__(self, kind: FilterKind, expression: str, text: str, codes: frozenset[int] | None,
                 names: frozenset[str], matches: Callable[[Mapping[str, str | None]], bool],
                 matches_headers: Callable[[Headers], bool]) -> None:
        self.kind = kind
        self.expression = expression
        self.text = text
        self.codes = codes
        self.names = names
        self.matches = matches
        self.matches_headers = matches_headers

    def matches_code(self, code: int) -> bool:
        codes = self.codes
        return codes is None or code in codes

    def __repr__(self) -> str:
        return f"RecordFilter({self.kind!r}, {self.text!r})"


def compile_filter(kind: FilterKind, expression: str | None) -> RecordFilter:
    """Compile a view's expression, or raise :class:`ExpressionError` with a message for users."""
    source = expression or ""
    if kind == "tags":
        compiled = parse_tags(expression)
        tags = compiled.tags
        if tags is None:
            return RecordFilter(kind, source, compiled.text, None, frozenset(), _everything,
                                _everything)

        def matches(properties: Mapping[str, str | None]) -> bool:
            return properties.get(TAGS) in tags

        def matches_headers(headers: Headers) -> bool:
            for key, value in headers:
                if key == TAGS:  # the first one, as for the consume queue's code
                    return value is not None and value.decode("utf-8", "replace") in tags
            return False

        return RecordFilter(kind, source, compiled.text, compiled.codes, frozenset((TAGS,)),
                            matches, matches_headers)
    if kind == "sql":
        tree = sql92.parse(source)
        names = sql92.property_names(tree)
        matcher = compile_matcher(tree)

        def sql_matches_headers(headers: Headers) -> bool:
            return matcher(header_properties(headers, names))

        return RecordFilter(kind, source, sql92.to_text(tree), None, names, matcher,
                            sql_matches_headers)
    raise ValueError(f"filter kind must be 'tags' or 'sql', not {kind!r}")


def _everything(record: object) -> bool:
    return True


def header_properties(headers: Headers, names: Collection[str] | None = None) -> dict[str, str | None]:
    """A record's Kafka headers as the properties a filter reads (only ``names`` if given).

    Values are decoded as UTF-8 with U+FFFD for invalid bytes (as the consume queue's tag code
    is computed); a header with a null value is an absent property. When a header name occurs
    more than once, the first occurrence counts: the consume queue's tag code is computed from
    the first TAGS header (rmqkafka.storage.record_batch.header_values), and the exact tag test
    must see the same value. (Kafka's own accessor, Headers.lastHeader, would take the last.)
    """
    properties: dict[str, str | None] = {}
    for key, value in headers:
        if key not in properties and (names is None or key in names):
            properties[key] = None if value is None else value.decode("utf-8", "replace")
    return properties
