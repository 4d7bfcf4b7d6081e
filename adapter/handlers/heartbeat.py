"""Heartbeat (12): keeps a member's session; REBALANCE_IN_PROGRESS asks it to rejoin."""

from __future__ import annotations

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext

API_KEY = 12


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    error = ctx.groups.heartbeat(
        body.group_id, body.generation_id, body.member_id, getattr(body, "group_instance_id", None)
    )
    return make(response_type(request), throttle_time=0, error_code=error)
