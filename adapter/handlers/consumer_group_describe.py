"""ConsumerGroupDescribe (69): state, epochs, assignor and members (with their current and
target assignments) of consumer-protocol groups; an unknown id, or one of a classic or share group, is
GROUP_ID_NOT_FOUND as in Kafka.

Authorization is Kafka 4's (KafkaApis.handleConsumerGroupDescribe): DESCRIBE on each group,
else GROUP_AUTHORIZATION_FAILED (those rows come first, as Kafka adds them before the
coordinator's); and a group whose members' assignments or target assignments name a topic
the caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED with no members, so that
topic names and ownership stay hidden. Subscriptions are not checked: Kafka does not either
(a member's subscribed names are shown when every assigned topic is describable)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import acl_operations
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..features import consumer_protocol_enabled
from ..groups.consumer_group import ConsumerProtocolGroup
from ..groups.reconciliation import TopicPartitions
from ..security.acls import AclOperation, ResourceType

API_KEY = 69
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # v1 MemberType (classic: a member of an upgraded group)


async def handle(ctx: BrokerContext, request: Request):
    consumer = ctx.groups.consumer
    with_operations = request.body.include_authorized_operations
    refused, described = [], []
    enabled = consumer_protocol_enabled(ctx.store.features)
    for group_id in request.body.group_ids:
        empty = _error_row(group_id)
        if not enabled:
            refused.append(dict(empty, error_code=ErrorCode.unsupported_version))
            continue
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            refused.append(dict(empty, error_code=ErrorCode.group_authorization_failed))
            continue
        group = consumer.groups.get(group_id)
        if group is None or group.dead:
            other_type = ctx.groups.is_classic(group_id) or ctx.groups.share.has_group(group_id)
            message = f"Group {group_id} is not a consumer group." if other_type else f"Group {group_id} not found."
            described.append(dict(empty, error_code=ErrorCode.group_id_not_found, error_message=message))
            continue
        members = [_member(consumer, group, m) for m in group.members.values()]
        if not all(ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in _assigned_topics(members)):
            described.append(dict(empty, error_code=ErrorCode.topic_authorization_failed,
                                  error_message=UNDESCRIBABLE_TOPICS))
            continue
        described.append(dict(
            error_code=ErrorCode.none, group_id=group_id, group_state=group.state.value,
            group_epoch=group.epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name or consumer.settings.assignors[0],
            members=members,
            authorized_operations=acl_operations.authorized(ctx, with_operations, ResourceType.GROUP, group_id),
        ))
    return make(response_type(request), throttle_time=0, groups=refused + described)


UNDESCRIBABLE_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _error_row(group_id: str) -> dict:
    return dict(group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                members=(), authorized_operations=acl_operations.NOT_PROVIDED)


def _assigned_topics(members: list[dict]) -> set[str]:
    """Topic names in the members' assignments and target assignments."""
    return {topic["topic_name"] for m in members for assignment in (m["assignment"], m["target_assignment"])
            for topic in assignment["topic_partitions"]}


def _member(consumer, group: ConsumerProtocolGroup, member) -> dict:
    return dict(
        member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
        member_epoch=member.epoch, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_names), subscribed_topic_regex=member.subscribed_regex,
        assignment=_assignment(consumer, member.assigned),
        target_assignment=_assignment(consumer, group.target.get(member.member_id, {})),
        member_type=CLASSIC_MEMBER if member.classic is not None else CONSUMER_MEMBER,
    )


def _assignment(consumer, partitions: TopicPartitions) -> dict:
    listed = []
    for topic_id, ps in partitions.items():
        name = consumer.topic_name(topic_id)
        if name is not None:  # a deleted topic leaves the assignment at the next heartbeat
            listed.append(dict(topic_id=topic_id, topic_name=name, partitions=sorted(ps)))
    return dict(topic_partitions=sorted(listed, key=lambda t: t["topic_name"]))
