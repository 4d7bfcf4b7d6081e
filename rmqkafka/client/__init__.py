"""Client-side helpers for rmqkafka's RocketMQ semantics, over confluent-kafka.

::

    from rmqkafka.client import RetryingConsumer

:class:`RetryingConsumer` consumes a group's topics plus its retry topic
``rmq_retry.<group>`` and nacks records into it; the broker delays them (RocketMQ's retry
levels) and moves a record retried too often to ``rmq_dlq.<group>``. See
:mod:`rmqkafka.client.retry` for the rules and the offset semantics.

The transactional producer (RocketMQ's ``TransactionMQProducer``) is
:class:`TransactionProducer`: half messages, their commit or rollback after the local
transaction, and answers to the broker's back-checks; see
:mod:`rmqkafka.client.transaction_producer`.

Importing this package does not import confluent-kafka (that happens when a consumer is
created), nor the broker.
"""

from __future__ import annotations

from rmqkafka.client.retry import (
    DELAY,
    DLQ_PREFIX,
    ORIGIN_OFFSET,
    ORIGIN_PARTITION,
    ORIGIN_TOPIC,
    RECONSUME_TIMES,
    RETRY_PREFIX,
    NackError,
    RetryingConsumer,
    dlq_topic,
    header,
    origin_topic,
    reconsume_times,
    retry_topic,
)
from rmqkafka.client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionMessage,
    TransactionOutcome,
    TransactionProducer,
    TransactionSendError,
    TransactionSendResult,
    check_topic,
)

__all__ = [
    "DELAY",
    "DLQ_PREFIX",
    "ORIGIN_OFFSET",
    "ORIGIN_PARTITION",
    "ORIGIN_TOPIC",
    "RECONSUME_TIMES",
    "RETRY_PREFIX",
    "LocalTransactionState",
    "NackError",
    "RetryingConsumer",
    "TransactionListener",
    "TransactionMessage",
    "TransactionOutcome",
    "TransactionProducer",
    "TransactionSendError",
    "TransactionSendResult",
    "check_topic",
    "dlq_topic",
    "header",
    "origin_topic",
    "reconsume_times",
    "retry_topic",
]
