"""ShareGroupHeartbeat (76): join, stay in and leave a share group (KIP-932;
adapter/groups/share_coordinator.py).

Authorization as Kafka 4's KafkaApis.handleShareGroupHeartbeatRequest: READ on the group
(GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed topic name
(TOPIC_AUTHORIZATION_FAILED, before the group is touched); on a subscription view the check
includes its source (``BrokerContext.allowed``).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import SESSION, BrokerContext
from ..groups.share_coordinator import ShareHeartbeatRequest
from ..security.acls import AclOperation, ResourceType

API_KEY = 76


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _error(request, ErrorCode.group_authorization_failed)
    names = body.subscribed_topic_names
    if names and not all(ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in set(names)):
        return _error(request, ErrorCode.topic_authorization_failed)
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
    if answer.error is not ErrorCode.none:
        return _error(request, answer.error, answer.message)
    assignment = None
    if answer.assignment is not None:
        assignment = dict(topic_partitions=[
            dict(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(answer.assignment.items(), key=lambda item: str(item[0]))
            if partitions
        ])
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none, error_message=None,
                member_id=answer.member_id, member_epoch=answer.member_epoch,
                heartbeat_interval=answer.heartbeat_interval_ms, assignment=assignment)


def _error(request: Request, code: ErrorCode, message: str | None = None):
    return make(response_type(request), throttle_time=0, error_code=code, error_message=message,
                member_id=None, member_epoch=0, heartbeat_interval=0, assignment=None)
