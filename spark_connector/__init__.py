"""PySpark side of rmqkafka: a Python data source (Spark 4 ``pyspark.sql.datasource`` API).

    import rmqkafka.spark_connector as spark_connector
    spark_connector.register(spark)          # once per SparkSession
    df = (spark.read.format("rmqkafka")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())

The short name is ``rmqkafka``, not ``kafka``: Spark's built-in sources win name clashes.
Options, schema and semantics follow Spark's built-in Kafka source; see
docs/getting-started/spark.md for the option table and what is not (yet) supported.

Modules: :mod:`.options` (parsing), :mod:`.offsets` (offset maps, ranges, rate limit,
splitting), :mod:`.planning` (driver-side offset resolution), :mod:`.reader` (batch),
:mod:`.stream_reader` (streaming), :mod:`.writer` (batch and streaming sink),
:mod:`.client` (confluent-kafka wrapper), :mod:`.schema`, :mod:`.errors`.
Executors need this package importable (installed, or shipped with ``addPyFile``).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .errors import (
    BrokerUnreachableError,
    DataLossError,
    KafkaClientError,
    KafkaOptionError,
    KafkaSourceError,
    UnknownTopicError,
    UnsupportedOptionError,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHORT_NAME = "rmqkafka"

__all__ = [
    "SHORT_NAME",
    "BrokerUnreachableError",
    "DataLossError",
    "KafkaClientError",
    "KafkaOptionError",
    "KafkaSourceError",
    "UnknownTopicError",
    "UnsupportedOptionError",
    "register",
    "use_this_python_for_workers",
]


def register(spark: SparkSession) -> str:
    """Register the data source with ``spark`` under ``rmqkafka``; returns that name."""
    from .source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    return KafkaDataSource.name()


def use_this_python_for_workers() -> str:
    """Make Spark's Python workers run this interpreter, unless ``PYSPARK_PYTHON`` is set.

    Without it Spark starts workers with ``python3`` from PATH, which from a virtual environment
    that was not activated lacks pyarrow and this package (every read then fails inside the
    workers with ``No module named ...``). For local masters, and clusters whose workers share
    this machine's paths. Call it before the SparkSession starts; returns the workers' python.
    """
    return os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
