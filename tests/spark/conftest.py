"""Spark's Python workers run the interpreter running these tests (unless PYSPARK_PYTHON is set):
``python3`` on PATH may be one without pyarrow or this package, e.g. when the suite runs with a
virtual environment's python that was not activated.

``broker`` here is one EmbeddedBroker per test module (in its own temporary data directory),
not tests/conftest.py's one per test: a Spark test's cost is its JVM and session, and the
modules' tests use topics of their own."""

from collections.abc import Iterator
from typing import Any

import pytest

from rmqkafka.spark_connector import use_this_python_for_workers

use_this_python_for_workers()


@pytest.fixture(scope="module")
def broker() -> Iterator[Any]:
    from rmqkafka.adapter.embedded import EmbeddedBroker

    with EmbeddedBroker() as instance:
        yield instance
