"""rmqkafka: a Kafka-protocol broker with Apache RocketMQ message semantics.

The public API::

    from rmqkafka import EmbeddedBroker

    with EmbeddedBroker() as broker:        # a real broker process, ephemeral port, temp data dir
        broker.bootstrap_servers

The layers are subpackages: :mod:`rmqkafka.adapter` (Kafka wire protocol),
:mod:`rmqkafka.rmqsemantics` (RocketMQ semantics; so far the filter expressions of subscription
views), :mod:`rmqkafka.storage` (commitlog), :mod:`rmqkafka.spark_connector` (PySpark data source),
and :mod:`rmqkafka.cli` (the ``rmqk`` command line, a Kafka admin client).

Attributes are resolved lazily (PEP 562): Spark executors import
``rmqkafka.spark_connector`` from a shipped zip that holds only this file and that package,
so importing ``rmqkafka`` itself must not pull in the broker.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "EmbeddedBroker": "rmqkafka.adapter.embedded",
    "EmbeddedBrokerError": "rmqkafka.adapter.embedded",
}

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "__version__"]

if TYPE_CHECKING:
    from rmqkafka.adapter.embedded import EmbeddedBroker, EmbeddedBrokerError


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rmqkafka' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
