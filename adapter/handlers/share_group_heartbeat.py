"""ShareGroupHeartbeat (76): join, stay in and leave a share group (KIP-932;
adapter/groups/share_coordinator.py).

Authorization as Kafka 4's KafkaApis.handleShareGroupHeartbeatRequest: READ on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic name
(TOPIC_AUTHORIZATION_FAILED, before the group is touched); on a subscription view the check
includes its source (``BrokerContext.allowed``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request
from ..context import SESSION, BrokerContext
from ..groups.share_coordinator import ShareHeartbeatRequest
from ..security.acls import AclOperation, ResourceType
from . import _heartbeats

API_KEY = 76


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _heartbeats.refused(request, ErrorCode.group_authorization_failed)
    names = body.subscribed_topic_names
    if names and not all(ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in set(names)):
        return _heartbeats.refused(request, ErrorCode.topic_authorization_failed)
    answer = ctx.groups.share.heartbeat(
        ShareHeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            rack_id=body.rack_id,
            subscribed_names=None if names is None else tuple(names),
        ),
        client_id=request.client_id or "",
        client_host=SESSION.get().client_host,
    )
    return _heartbeats.answered(request, answer, drop_empty_topics=True)
