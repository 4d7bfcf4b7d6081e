"""Spark's Python workers run the interpreter running these tests (unless PYSPARK_PYTHON is set):
``python3`` on PATH may be one without pyarrow or this package, e.g. when the suite runs with a
virtual environment's python that was not activated."""

from rmqkafka.spark_connector import use_this_python_for_workers

use_this_python_for_workers()
