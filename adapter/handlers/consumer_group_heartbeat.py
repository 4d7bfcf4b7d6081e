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

from ..codec import Request
from ..context import SESSION, BrokerContext
from ..features import consumer_protocol_enabled
from ..groups.consumer_coordinator import HeartbeatRequest
from ..security.acls import AclOperation, ResourceType
from . import _heartbeats

API_KEY = 68


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not consumer_protocol_enabled(ctx.store.features):
        return _heartbeats.refused(request, ErrorCode.unsupported_version)
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _heartbeats.refused(request, ErrorCode.group_authorization_failed)
    names = body.subscribed_topic_names
    if names and not all(ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in set(names)):
        return _heartbeats.refused(request, ErrorCode.topic_authorization_failed)
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
    return _heartbeats.answered(request, answer, drop_empty_topics=False)
