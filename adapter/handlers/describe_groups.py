"""DescribeGroups (15): state, protocol and members (with assignments) of each group.

A consumer-protocol or share group is described as Kafka 4 does for these versions (v0-5;
v6 would answer GROUP_ID_NOT_FOUND): state Dead, no members; ConsumerGroupDescribe (69) and
ShareGroupDescribe (77) describe them.

Needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group, nothing else
about it shown). Authorized operations (v3+, when asked for) are what the caller may do on
the group (adapter/acl_operations.py)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import acl_operations
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..groups.group import GroupState
from ..security.acls import AclOperation, ResourceType

API_KEY = 15


async def handle(ctx: BrokerContext, request: Request):
    coordinator = ctx.groups
    with_operations = getattr(request.body, "include_authorized_operations", False)
    results = []
    for group_id in request.body.groups:
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            results.append(dict(error_code=ErrorCode.group_authorization_failed, group_id=group_id,
                                group_state="", protocol_type="", protocol_data="", members=(),
                                authorized_operations=acl_operations.NOT_PROVIDED))
            continue
        if coordinator.group_type(group_id) in ("consumer", "share"):
            results.append(dict(error_code=ErrorCode.none, group_id=group_id, group_state=GroupState.DEAD.value,
                                protocol_type="", protocol_data="", members=(),
                                authorized_operations=acl_operations.NOT_PROVIDED))
            continue
        group = coordinator.groups.get(group_id)
        state = coordinator.state_of(group_id)
        entry = dict(
            error_code=ErrorCode.none,
            group_id=group_id,
            group_state=(state or GroupState.DEAD).value,
            protocol_type=(group.protocol_type if group else None) or "",
            protocol_data=(group.protocol_name if group else None) or "",
            members=[],
            authorized_operations=acl_operations.authorized(ctx, with_operations, ResourceType.GROUP, group_id),
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
