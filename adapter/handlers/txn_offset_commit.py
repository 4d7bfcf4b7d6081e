"""TxnOffsetCommit (28): a transaction's consumer offsets, staged until it commits.

KIP-447 (v3+): a request naming a generation or a member is checked against the group as
an OffsetCommit is (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), except that
a rebalance in progress does not refuse it and a group unknown here is an empty one (its
members unknown), as in Kafka; one naming neither is accepted for any group. Unknown partitions are UNKNOWN_TOPIC_OR_PARTITION, metadata too long
OFFSET_METADATA_TOO_LARGE; the transaction's own errors (INVALID_PRODUCER_ID_MAPPING,
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE when AddOffsetsToTxn was not called) are every
partition's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from rmqkafka.storage.offset_store import CommittedOffset

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType
from . import _txn

API_KEY = 28


def _group_error(ctx: BrokerContext, body) -> ErrorCode:
    if not _txn.may_write(ctx, body.transactional_id):
        return ErrorCode.transactional_id_authorization_failed
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return ErrorCode.group_authorization_failed
    return ctx.groups.check_commit(body.group_id, getattr(body, "generation_id", -1), getattr(body, "member_id", ""),
                                   getattr(body, "group_instance_id", None), transactional=True)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    error = _group_error(ctx, body)
    now = ctx.clock.now_ms()
    max_metadata = ctx.groups.settings.offset_metadata_max_bytes
    codes: dict[tuple[str, int], ErrorCode] = {}
    accepted: dict[tuple[str, int], CommittedOffset] = {}
    for topic in body.topics:
        meta = ctx.semantics.resolve(topic.name)
        count = 0 if meta is None else ctx.semantics.partition_count(meta)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            metadata = p.committed_metadata or ""
            if error is not ErrorCode.none:
                codes[key] = error
            elif not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name):
                codes[key] = ErrorCode.topic_authorization_failed
            elif not 0 <= p.partition_index < count:
                codes[key] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode()) > max_metadata:
                codes[key] = ErrorCode.offset_metadata_too_large
            else:
                codes[key] = ErrorCode.none
                accepted[key] = CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=metadata,
                    commit_timestamp_ms=now,
                )
    if accepted:
        code, _ = await _txn.run(
            ctx, ctx.transactions.coordinator.txn_offset_commit, body.transactional_id,
            body.producer_id, body.producer_epoch, body.group_id, accepted,
        )
        if code is not ErrorCode.none:
            for key in accepted:
                codes[key] = code
    topics = [
        dict(name=topic.name, partitions=[
            dict(partition_index=p.partition_index, error_code=codes[(topic.name, p.partition_index)])
            for p in topic.partitions
        ])
        for topic in body.topics
    ]
    return make(response_type(request), throttle_time=0, topics=topics)
