"""ListGroups (16): every group with members or committed offsets (v4 state filter).

As in Kafka, DESCRIBE on the cluster lists every group; without it, the groups the caller
may DESCRIBE."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 16
CLASSIC = "classic"


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", ()) or ()}
    types = {t.lower() for t in getattr(body, "types_filter", ()) or ()}
    coordinator = ctx.groups
    listed = []
    every = ctx.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)
    for group_id in coordinator.known_group_ids():
        if not every and not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            continue
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
