"""DescribeTopicPartitions (75, v0): paginated topic descriptions (KIP-966).

The Java AdminClient (3.7+) sends this for ``describeTopics(names)`` and falls back to
Metadata only on UNSUPPORTED_VERSION; Spark's driver uses it through that call.

Choices (following Kafka's DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse)
-------
- An empty topic list means every topic; unknown topics are then simply absent. Named
  topics that do not exist get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an
  illegal name) with the zero topic id, and use up none of the partition limit.
- Topics are answered in name order, from the cursor's topic on (names sorting before it
  are skipped), and the cursor's topic starts at the cursor's partition. A named-topic
  request whose list lacks the cursor's topic, or a negative cursor partition, is
  INVALID_REQUEST for every requested topic (the response has no top-level error).
- ``response_partition_limit`` caps the partitions in the response, clamped to 1..2000
  (Kafka's max.request.partition.size.limit default; at least 1 so a client paging with a
  zero limit still makes progress). When a topic does not fit, its first partitions are
  returned and ``next_cursor`` names the next partition; when the limit is used up exactly
  at a topic boundary, ``next_cursor`` is the next topic at partition 0. No cursor means done.
- Subscription views are described like topics, as Metadata does: their own id, the
  partitions their source topic has now.
- Partitions: leader = this node, leader epoch 0, replicas = ISR = [this node], no offline
  replicas, empty ELR and last-known ELR (single replica: nothing is ever eligible beyond
  the ISR). ``topic_authorized_operations`` is what the caller may do on a described topic
  (the request has no flag for it; Kafka always fills it in), -2**31 for a topic answered
  with an error.
- Authorization: DESCRIBE on the topic. Listing every topic skips the others; a named
  topic without it is TOPIC_AUTHORIZATION_FAILED, whether it exists or not.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from .. import acl_operations
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..internal_topics import is_internal
from ..security.acls import AclOperation, ResourceType
from ..topic_names import invalid_reason

API_KEY = 75
MAX_PARTITION_LIMIT = 2000
ZERO_UUID = uuid.UUID(int=0)


def _topic(ctx: BrokerContext, name: str, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID,
           partitions=()) -> dict:
    return dict(
        error_code=code,
        name=name,
        topic_id=topic_id,
        is_internal=is_internal(name),
        partitions=partitions,
        topic_authorized_operations=acl_operations.authorized(ctx, not code, ResourceType.TOPIC, name),
    )


def _partition(node: int, index: int) -> dict:
    return dict(
        error_code=ErrorCode.none,
        partition_index=index,
        leader_id=node,
        leader_epoch=0,
        replica_nodes=(node,),
        isr_nodes=(node,),
        eligible_leader_replicas=(),
        last_known_elr=(),
        offline_replicas=(),
    )


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    cls = response_type(request)
    cursor = body.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    every_topic = not body.topics
    if every_topic:
        names = {meta.name for meta in ctx.semantics.listed() if meta.name >= start_name}
    else:
        names = {t.name for t in body.topics if t.name >= start_name}
    if cursor is not None and (cursor.partition_index < 0 or (not every_topic and start_name not in names)):
        return make(
            cls, throttle_time=0, topics=[_topic(ctx, t.name, ErrorCode.invalid_request) for t in body.topics]
        )
    remaining = max(1, min(MAX_PARTITION_LIMIT, body.response_partition_limit))
    topics: list[dict] = []
    next_cursor = None
    for name in sorted(names):
        if remaining == 0:
            next_cursor = dict(topic_name=name, partition_index=0)
            break
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not every_topic:
                topics.append(_topic(ctx, name, ErrorCode.topic_authorization_failed))
            continue
        meta = ctx.semantics.resolve(name)
        if meta is None:
            if not every_topic:
                invalid = invalid_reason(name) is not None
                code = ErrorCode.invalid_topic_exception if invalid else ErrorCode.unknown_topic_or_partition
                topics.append(_topic(ctx, name, code))
            continue
        first = cursor.partition_index if cursor is not None and name == start_name else 0
        count = ctx.semantics.partition_count(meta)
        upper = min(count, first + remaining)
        partitions = [_partition(ctx.config.node_id, p) for p in range(first, upper)]
        topics.append(_topic(ctx, name, ErrorCode.none, ctx.semantics.id_of(meta), partitions))
        if upper < count:
            next_cursor = dict(topic_name=name, partition_index=upper)
            break
        remaining -= len(partitions)
    return make(cls, throttle_time=0, topics=topics, next_cursor=next_cursor)
