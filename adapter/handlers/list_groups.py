"""ListGroups (16): every group with members or committed offsets (v4 state filter, v5 type
filter: "classic", "consumer" or "share", case-insensitive as Kafka's GroupType.parse).
Consumer-protocol groups are listed with protocol type "consumer" and Kafka's states for them
(Empty, Assigning, Reconciling, Stable); share groups with protocol type "share" and states
Empty or Stable.

As in Kafka, DESCRIBE on the cluster lists every group; without it, the groups the caller
may DESCRIBE."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..groups.share_group import PROTOCOL_TYPE as SHARE_PROTOCOL_TYPE
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 16


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
        group_type = coordinator.group_type(group_id)
        if types and group_type not in types:
            continue
        if group_type == "consumer":
            protocol_type = "consumer"
        elif group_type == "share":
            protocol_type = SHARE_PROTOCOL_TYPE
        else:
            group = coordinator.groups.get(group_id)
            protocol_type = (group.protocol_type if group else None) or ""
        listed.append(
            dict(group_id=group_id, protocol_type=protocol_type, group_state=state.value, group_type=group_type)
        )
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none, groups=listed)
