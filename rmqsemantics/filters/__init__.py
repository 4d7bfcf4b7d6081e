"""Subscription-view filters: RocketMQ tag expressions and SQL92 expressions over headers.

Pure and sans-IO: an expression is compiled once (:func:`compile_filter`) into a
:class:`RecordFilter`, which then answers for any number of records from the record's tag
hash code and its headers (:func:`header_properties`). Modules:

* :mod:`.tags` - ``*`` / ``TagA || TagB`` (RocketMQ's FilterAPI rules);
* :mod:`.sql92` - the SQL92 grammar of RocketMQ's SelectorParser.jj: tokens, parser, syntax
  tree, canonical text;
* :mod:`.sql92_eval` - RocketMQ's evaluation rules, as a reference interpreter and as the
  code generator that filters records;
* :mod:`.java` - the Java conversions and comparisons those rules rest on.
"""

from __future__ import annotations

from .errors import ExpressionError
from .record_filter import (
    TAGS,
    FilterKind,
    RecordFilter,
    compile_filter,
    header_properties,
)

__all__ = ["TAGS", "ExpressionError", "FilterKind", "RecordFilter", "compile_filter",
           "header_properties"]
