"""OffsetDelete (47): drop committed offsets of some partitions of a group.

Refused per partition (GROUP_SUBSCRIBED_TO_TOPIC) while the group has members subscribed to
the topic (by name or, in a consumer-protocol group, by a regular expression), as Kafka does.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..groups.subscription import subscribed_topics
from ..security.acls import AclOperation, ResourceType

API_KEY = 47


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    coordinator = ctx.groups
    if not ctx.allowed(AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return make(response_type(request), throttle_time=0, error_code=ErrorCode.group_authorization_failed,
                    topics=())
    if coordinator.state_of(body.group_id) is None or coordinator.group_type(body.group_id) == "share":
        # a share group has no committed offsets (Kafka's ShareGroup.validateOffsetDelete)
        return make(response_type(request), throttle_time=0, error_code=ErrorCode.group_id_not_found, topics=())
    group = coordinator.groups.get(body.group_id)
    subscribed: set[str] = set()
    if group is not None and group.protocol_type == "consumer":
        for member in group.members.values():
            subscribed |= subscribed_topics(member.metadata_for(group.protocol_name or ""))
    subscribed |= coordinator.consumer.subscribed_topics(body.group_id)
    deletable = []
    topics = []
    for topic in body.topics:
        code = ErrorCode.group_subscribed_to_topic if topic.name in subscribed else ErrorCode.none
        if not ctx.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name):
            code = ErrorCode.topic_authorization_failed
        if code is ErrorCode.none and ctx.semantics.resolve(topic.name) is None:  # topic or view
            code = ErrorCode.unknown_topic_or_partition
        partitions = []
        for p in topic.partitions:
            partitions.append(dict(partition_index=p.partition_index, error_code=code))
            if code is ErrorCode.none:
                deletable.append((topic.name, p.partition_index))
        topics.append(dict(name=topic.name, partitions=partitions))
    if deletable:
        ctx.store.offsets.delete_offsets(body.group_id, deletable)
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none, topics=topics)
