"""SyncGroup (14): the leader hands in assignments; every member gets its own. Needs READ
on the group (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 14


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return make(response_type(request), throttle_time=0, error_code=ErrorCode.group_authorization_failed,
                    protocol_type=None, protocol_name=None, assignment=b"")
    error, assignment, protocol_type, protocol_name = await ctx.groups.sync(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in body.assignments},
    )
    return make(
        response_type(request),
        throttle_time=0,
        error_code=error,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    )
