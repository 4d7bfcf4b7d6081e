"""OffsetCommit (8): durable committed offsets, fenced by the group's generation.

Offsets may be committed on topics and on subscription views (a view's offsets are its
source's; the group commits on the view's name, and deleting the view drops them).

Authorization, as in Kafka: READ on the group (GROUP_AUTHORIZATION_FAILED for every
partition), then READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from rmqkafka.storage.offset_store import CommittedOffset

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 8


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    generation = getattr(body, "generation_id_or_member_epoch", getattr(body, "generation_id", -1))
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error = ctx.groups.check_commit(
            body.group_id, generation, body.member_id, getattr(body, "group_instance_id", None),
            api_version=request.api_version,
        )
    now = ctx.clock.now_ms()
    max_metadata = ctx.groups.settings.offset_metadata_max_bytes
    accepted: dict[tuple[str, int], CommittedOffset] = {}
    topics = []
    for topic in body.topics:
        meta = ctx.semantics.resolve(topic.name)
        count = 0 if meta is None else ctx.semantics.partition_count(meta)
        topic_error = error
        if error is ErrorCode.none and not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name):
            topic_error = ErrorCode.topic_authorization_failed
        partitions = []
        for p in topic.partitions:
            code = topic_error
            if code is ErrorCode.none:
                metadata = p.committed_metadata or ""
                if not 0 <= p.partition_index < count:
                    code = ErrorCode.unknown_topic_or_partition
                elif len(metadata.encode()) > max_metadata:
                    code = ErrorCode.offset_metadata_too_large
                else:
                    accepted[(topic.name, p.partition_index)] = CommittedOffset(
                        offset=p.committed_offset,
                        leader_epoch=getattr(p, "committed_leader_epoch", -1),
                        metadata=metadata,
                        commit_timestamp_ms=now,
                    )
            partitions.append(dict(partition_index=p.partition_index, error_code=code))
        topics.append(dict(name=topic.name, partitions=partitions))
    if accepted:
        await ctx.groups.commit(body.group_id, accepted)
    return make(response_type(request), throttle_time=0, topics=topics)
