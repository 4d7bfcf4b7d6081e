"""Heartbeat (12): keeps a member's session; REBALANCE_IN_PROGRESS asks it to rejoin. Needs
READ on the group (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 12


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        error = ctx.groups.heartbeat(
            body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None)
        )
    return make(response_type(request), throttle_time=0, error_code=error)
