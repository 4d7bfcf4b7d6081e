"""DeleteGroups (42): remove groups without members, with their committed offsets."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 42


async def handle(ctx: BrokerContext, request: Request):
    results = [
        dict(group_id=group_id, error_code=ctx.groups.delete(group_id)
             if ctx.allowed(AclOperation.DELETE, ResourceType.GROUP, group_id)
             else ErrorCode.group_authorization_failed)
        for group_id in request.body.groups_names
    ]
    return make(response_type(request), throttle_time=0, results=results)
