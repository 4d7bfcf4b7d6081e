"""DescribeGroups (15): state, protocol and members (with assignments) of each group."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..groups.group import GroupState

API_KEY = 15
NO_OPERATIONS = -2147483648


async def handle(ctx: BrokerContext, request: Request):
    coordinator = ctx.groups
    results = []
    for group_id in request.body.groups:
        group = coordinator.groups.get(group_id)
        state = coordinator.state_of(group_id)
        entry = dict(
            error_code=ErrorCode.none,
            group_id=group_id,
            group_state=(state or GroupState.DEAD).value,
            protocol_type=(group.protocol_type if group else None) or "",
            protocol_data=(group.protocol_name if group else None) or "",
            members=[],
            authorized_operations=NO_OPERATIONS,
        )
        if group is not None and group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            entry["members"] = [
                dict(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata_for(group.protocol_name or ""),
                    member_assignment=m.assignment,
                )
                for m in group.members.values()
            ]
        elif group is not None:
            entry["members"] = [
                dict(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                     client_host=m.client_host, member_metadata=b"", member_assignment=b"")
                for m in group.members.values()
            ]
        results.append(entry)
    return make(response_type(request), throttle_time=0, groups=results)
