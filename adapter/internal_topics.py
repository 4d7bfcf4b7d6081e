"""Kafka's internal topics, ``__consumer_offsets`` and ``__transaction_state``, as clients see them.

Both are presented as Kafka presents them: listed by an all-topics Metadata once in use,
flagged ``is_internal`` (so ``exclude.internal.topics`` works in every client), described by
name, and refused to producers (INVALID_TOPIC_EXCEPTION) and to DeleteTopics.

``__consumer_offsets`` is only presented: committed offsets live in the offset store
(``storage.offset_store``), not in its partitions, which stay empty. It is created, with
``offsets.topic.num.partitions`` partitions and Kafka's topic configs, when a group first
looks for its coordinator or a client asks for it by name, as Kafka creates it.
``__transaction_state`` is the transaction coordinator's own log (one partition, its own
record format) and is listed once a transactional id has used it.
"""

from __future__ import annotations

import logging

from rmqkafka.rmqsemantics.semantics import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPICS
from rmqkafka.storage.topics import TopicMeta

from .context import BrokerContext

log = logging.getLogger(__name__)

# Kafka's GroupCoordinatorConfig: the offsets topic is compacted, 100 MiB segments.
CONSUMER_OFFSETS_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
    "segment.bytes": "104857600",
}


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_TOPICS


def ensure_consumer_offsets(ctx: BrokerContext) -> TopicMeta | None:
    """``__consumer_offsets``, created on first use; None (logged) if it cannot be made, which
    costs a client nothing but its listing."""
    meta = ctx.store.topics.get(CONSUMER_OFFSETS_TOPIC)
    if meta is not None:
        return meta
    try:
        return ctx.store.create_topic(CONSUMER_OFFSETS_TOPIC, ctx.config.offsets_topic_num_partitions,
                                      dict(CONSUMER_OFFSETS_CONFIGS))
    except Exception as exc:  # a partition limit below offsets.topic.num.partitions, a full disk
        log.warning("cannot create %s: %s", CONSUMER_OFFSETS_TOPIC, exc)
        return None
