"""LeaveGroup (13): one member (v0-2) or a batch of members by id or instance id (v3+).
Needs READ on the group (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 13


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    groups = ctx.groups
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return make(response_type(request), throttle_time=0, error_code=ErrorCode.group_authorization_failed,
                    members=())
    if request.api_version < 3:
        error = groups.leave(body.group_id, body.member_id, None)
        return make(response_type(request), throttle_time=0, error_code=error, members=())
    members = []
    for m in body.members:
        members.append(
            dict(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error_code=groups.leave(body.group_id, m.member_id, m.group_instance_id),
            )
        )
    top = ErrorCode.none
    if body.group_id not in groups.groups and groups.consumer.member_count(body.group_id) is None:
        top = ErrorCode.unknown_member_id
    return make(response_type(request), throttle_time=0, error_code=top, members=members)
