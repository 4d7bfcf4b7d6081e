"""DescribeGroups (15): state, protocol and members (with assignments) of each group.

Authorized operations (v3+, when asked for) are every group operation, as Kafka answers
without an authorizer (adapter/acl_operations.py)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import acl_operations
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..groups.group import GroupState

API_KEY = 15


async def handle(ctx: BrokerContext, request: Request):
    coordinator = ctx.groups
    operations = acl_operations.authorized(
        getattr(request.body, "include_authorized_operations", False), acl_operations.GROUP
    )
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
            authorized_operations=operations,
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
