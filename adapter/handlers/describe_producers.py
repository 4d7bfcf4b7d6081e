"""DescribeProducers (61): the producers of each partition, with their epoch, last
sequence, last timestamp, coordinator epoch and the first offset of their open
transaction (-1 when none), as ``kafka-transactions.sh describe-producers`` and
``find-hanging`` ask a partition's leader.

A producer is listed once it has written to the partition (idempotent producers too), and
stays listed: producer state here does not expire (Kafka's ``producer.id.expiration.ms``
drops idle idempotent producers after a day). A view answers with its source partition's
producers, as it answers with its offsets. An unknown topic or partition is
UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 61


async def handle(ctx: BrokerContext, request: Request):
    semantics = ctx.semantics
    topics = []
    for topic in request.body.topics:
        meta = semantics.resolve(topic.name)
        partitions = []
        authorized = ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name)
        for index in topic.partition_indexes:
            if not authorized:
                partitions.append(dict(partition_index=index, error_code=ErrorCode.topic_authorization_failed,
                                       error_message=None, active_producers=[]))
                continue
            if meta is None or not 0 <= index < semantics.partition_count(meta):
                partitions.append(dict(partition_index=index, error_code=ErrorCode.unknown_topic_or_partition,
                                       error_message=None, active_producers=[]))
                continue
            plog = semantics.source_partition(meta, index)
            open_txns = plog.ongoing_txns
            partitions.append(dict(
                partition_index=index, error_code=ErrorCode.none, error_message=None,
                active_producers=[
                    dict(producer_id=pid, producer_epoch=entry.epoch, last_sequence=entry.last_sequence,
                         last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                         current_txn_start_offset=open_txns.first_offset_of(pid))
                    for pid, entry in plog.producers.entries()
                ],
            ))
        topics.append(dict(name=topic.name, partitions=partitions))
    return make(response_type(request), throttle_time=0, topics=topics)
