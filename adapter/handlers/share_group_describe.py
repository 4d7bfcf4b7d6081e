"""ShareGroupDescribe (77): state, epochs, assignor and members (with their subscriptions and
assignments) of share groups. As Kafka 4's KafkaApis.handleShareGroupDescribe: DESCRIBE on each
group (GROUP_AUTHORIZATION_FAILED); a group whose members are assigned a topic the caller may
not DESCRIBE is TOPIC_AUTHORIZATION_FAILED without its members (a view's source counts); an
empty id is INVALID_GROUP_ID, an unknown one GROUP_ID_NOT_FOUND, and so is one of a classic or
consumer group.

Per-partition record counts (in flight, acknowledged) are not part of this API: they belong
to the share-partition side (DescribeShareGroupOffsets and the console)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import acl_operations
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..groups.share_coordinator import ShareGroupCoordinator
from ..groups.share_group import ShareMember
from ..security.acls import AclOperation, ResourceType

API_KEY = 77
HIDDEN_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


async def handle(ctx: BrokerContext, request: Request):
    share = ctx.groups.share
    with_operations = request.body.include_authorized_operations
    described = []
    for group_id in request.body.group_ids:
        empty = dict(group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                     members=(), authorized_operations=acl_operations.NOT_PROVIDED)
        if not group_id:
            described.append(dict(empty, error_code=ErrorCode.invalid_group_id))
            continue
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append(dict(empty, error_code=ErrorCode.group_authorization_failed))
            continue
        group = share.groups.get(group_id)
        if group is None or group.dead:
            known = ctx.groups.state_of(group_id) is not None
            message = f"Group {group_id} is not a share group." if known else f"Group {group_id} not found."
            described.append(dict(empty, error_code=ErrorCode.group_id_not_found, error_message=message))
            continue
        members = [_member(share, m) for m in group.members.values()]
        topics = {tp["topic_name"] for m in members for tp in m["assignment"]["topic_partitions"]}
        if not all(ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in topics):
            described.append(dict(empty, error_code=ErrorCode.topic_authorization_failed,
                                  error_message=HIDDEN_TOPICS))
            continue
        described.append(dict(
            error_code=ErrorCode.none, group_id=group_id, group_state=group.state.value,
            group_epoch=group.epoch, assignment_epoch=group.assignment_epoch, assignor_name=share.assignor_name,
            members=members,
            authorized_operations=acl_operations.authorized(ctx, with_operations, ResourceType.GROUP, group_id),
        ))
    return make(response_type(request), throttle_time=0, groups=described)


def _member(share: ShareGroupCoordinator, member: ShareMember) -> dict:
    listed = []
    for topic_id, partitions in member.assigned.items():
        name = share.topic_name(topic_id)
        if name is not None and partitions:  # a deleted topic leaves at the next heartbeat
            listed.append(dict(topic_id=topic_id, topic_name=name, partitions=sorted(partitions)))
    return dict(
        member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.epoch,
        client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_names),
        assignment=dict(topic_partitions=sorted(listed, key=lambda t: t["topic_name"])),
    )
