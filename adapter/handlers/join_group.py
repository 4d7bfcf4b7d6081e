"""JoinGroup (11): join or rejoin a consumer group; answered when the rebalance completes.
Needs READ on the group (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import SESSION, BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 11


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return make(response_type(request), throttle_time=0, error_code=ErrorCode.group_authorization_failed,
                    generation_id=-1, protocol_type=None if request.api_version >= 7 else "",
                    protocol_name=None if request.api_version >= 7 else "", leader="",
                    skip_assignment=False, member_id="", members=())
    session_ms = int(body.session_timeout.total_seconds() * 1000)
    rebalance = getattr(body, "rebalance_timeout", None)
    rebalance_ms = int(rebalance.total_seconds() * 1000) if rebalance is not None else session_ms
    answer = await ctx.groups.join(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=body.protocol_type,
        protocols=[(p.name, p.metadata) for p in body.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id=request.client_id or "",
        client_host=SESSION.get().client_host,
        # v4+: a member without an id is given one and must join again with it (KIP-394).
        require_known_member_id=request.api_version >= 4,
        can_skip_assignment=request.api_version >= 9,  # KIP-814
    )
    if request.api_version < 7:  # protocol name and type became nullable only in v7
        answer["protocol_name"] = answer["protocol_name"] or ""
        answer["protocol_type"] = answer["protocol_type"] or ""
    return make(response_type(request), throttle_time=0, **answer)
