"""Shared helpers of the rmqsemantics filter tests."""

from __future__ import annotations

import pytest

from rmqkafka.rmqsemantics.filters import ExpressionError
from rmqkafka.rmqsemantics.filters.sql92 import parse
from rmqkafka.rmqsemantics.filters.sql92_eval import compile_matcher, interpret


def ev(expression: str, **properties: str | None) -> bool:
    """Whether ``expression`` matches ``properties``; the compiled and the reference evaluator
    must agree."""
    tree = parse(expression)
    compiled = compile_matcher(tree)(properties)
    reference = interpret(tree)(properties)
    assert compiled is reference, (expression, properties, compiled, reference)
    return compiled


def sql_error(expression: str) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        parse(expression)
    return info.value
