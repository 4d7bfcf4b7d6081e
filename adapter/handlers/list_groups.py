"""ListGroups (16): every group with members or committed offsets (v4 state filter)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext

API_KEY = 16
CLASSIC = "classic"


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(body, "types_filter", ()) or ()}
    coordinator = ctx.groups
    listed = []
    for group_id in coordinator.known_group_ids():
        state = coordinator.state_of(group_id)
        if state is None or (states and state.value.lower() not in states):
            continue
        if types and CLASSIC not in types:
            continue
        group = coordinator.groups.get(group_id)
        listed.append(
            dict(
                group_id=group_id,
                protocol_type=(group.protocol_type if group else None) or "",
                group_state=state.value,
                group_type=CLASSIC,
            )
        )
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none, groups=listed)
