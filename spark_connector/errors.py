"""Exceptions the data source raises, each with a message a Spark user can act on.

Spark shows a Python data source's exception as the last line of a ``PythonException`` or
``AnalysisException`` (``[PYTHON_DATA_SOURCE_ERROR] ... rmqkafka.spark_connector.errors.X: message``),
so every message names the option or the topic-partition and says what to change.
"""

from __future__ import annotations


class KafkaSourceError(Exception):
    """Base class of every error raised by the ``rmqkafka`` data source."""


class KafkaOptionError(KafkaSourceError, ValueError):
    """An option is missing, has a bad value, or conflicts with another option."""


class UnsupportedOptionError(KafkaOptionError):
    """An option this data source does not (yet) implement."""


class BrokerUnreachableError(KafkaSourceError, ConnectionError):
    """No broker in ``kafka.bootstrap.servers`` accepted a connection or answered in time."""


class UnknownTopicError(KafkaSourceError, LookupError):
    """A topic or partition named by ``subscribe`` / ``assign`` / the offsets does not exist."""


class DataLossError(KafkaSourceError):
    """Offsets the query needs are gone (deleted, out of range, or a partition vanished).

    Raised only with ``failOnDataLoss=true`` (the default); with ``false`` the source skips
    the missing offsets and logs a warning instead.
    """


class KafkaClientError(KafkaSourceError):
    """The Kafka client reported an error that has no more specific class here."""

