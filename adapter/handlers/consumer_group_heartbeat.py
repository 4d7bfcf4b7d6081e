"""ConsumerGroupHeartbeat (68): join, stay in, reconcile with and leave a consumer-protocol
group (KIP-848; adapter/groups/consumer_coordinator.py).

Authorization as Kafka 4's KafkaApis: READ on the group (GROUP_AUTHORIZATION_FAILED), then
DESCRIBE on every subscribed topic name (TOPIC_AUTHORIZATION_FAILED, before the group is
touched). A regular expression only matches topics the member may DESCRIBE; on a
subscription view both checks include its source (``BrokerContext.allowed``).
"""

from __future__ import annotations

from functools import partial

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import SESSION, BrokerContext
from ..features import consumer_protocol_enabled
from ..groups.consumer_coordinator import HeartbeatRequest
from ..security.acls import AclOperation, ResourceType

API_KEY = 68


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not consumer_protocol_enabled(ctx.store.features):
        return _error(request, ErrorCode.unsupported_version)
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _error(request, ErrorCode.group_authorization_failed)
    names = body.subscribed_topic_names
    if names and not all(ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in set(names)):
        return _error(request, ErrorCode.topic_authorization_failed)
    session = SESSION.get()
    owned = None
    if body.topic_partitions is not None:
        owned = {}
        for tp in body.topic_partitions:
            owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    rebalance_timeout_ms = int(body.rebalance_timeout.total_seconds() * 1000)
    answer = ctx.groups.consumer.heartbeat(
        HeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_names=None if body.subscribed_topic_names is None else tuple(body.subscribed_topic_names),
            subscribed_regex=getattr(body, "subscribed_topic_regex", None),
            server_assignor=body.server_assignor,
            owned=owned,
            may_describe=partial(ctx.allowed_to, session, AclOperation.DESCRIBE, ResourceType.TOPIC),
        ),
        client_id=request.client_id or "",
        client_host=session.client_host,
        api_version=request.api_version,
    )
    if answer.error is not ErrorCode.none:
        return _error(request, answer.error, answer.message)
    assignment = None
    if answer.assignment is not None:
        assignment = dict(topic_partitions=[
            dict(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(answer.assignment.items(), key=lambda item: str(item[0]))
        ])
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none, error_message=None,
                member_id=answer.member_id, member_epoch=answer.member_epoch,
                heartbeat_interval=answer.heartbeat_interval_ms, assignment=assignment)


def _error(request: Request, code: ErrorCode, message: str | None = None):
    return make(response_type(request), throttle_time=0, error_code=code, error_message=message,
                member_id=None, member_epoch=0, heartbeat_interval=0, assignment=None)
