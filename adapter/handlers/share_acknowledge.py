"""ShareAcknowledge (79), v1-v2: a share group member's acknowledgements without a fetch
(KIP-932; Kafka's KafkaApis.handleShareAcknowledgeRequest).

The request as a whole (group and member id, READ on the group), then the share session
(epoch 0 is INVALID_SHARE_SESSION_EPOCH, -1 acknowledges and closes the session, any other
must match: adapter.share.sessions), then each partition's acknowledgements, its outcome in
the partition's ErrorCode (INVALID_RECORD_STATE for records this member has not acquired,
UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED; INVALID_REQUEST for a RENEW in v1 or without
IsRenewAck: _share.acknowledge). v2 answers AcquisitionLockTimeoutMs.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..share.sessions import ShareSessionError
from . import _share

API_KEY = 79


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    cls = response_type(request)
    refusal, message = _share.request_refusal(ctx, body.group_id, body.member_id)
    if refusal is not ErrorCode.none:
        return _whole(cls, refusal, message)
    shares = _share.manager(ctx)
    group_id, member_id = body.group_id, body.member_id
    try:
        closing = shares.sessions.acknowledge_update(group_id, member_id, body.share_session_epoch)
    except ShareSessionError as exc:
        return _whole(cls, _share.session_code(exc), str(exc))
    renew_ack = getattr(body, "is_renew_ack", False)  # v2 on
    responses = []
    for topic in body.topics:
        meta, refused = _share.topic_refusal(ctx, topic.topic_id)
        partitions = []
        for p in topic.partitions:
            code, message = refused, None
            if meta is not None:
                code, message = _share.acknowledge(ctx, group_id, member_id, meta, p.partition_index,
                                                   p.acknowledgement_batches, request.api_version, renew_ack)
            partitions.append(dict(partition_index=p.partition_index, error_code=code, error_message=message,
                                   current_leader=_share.NO_LEADER))
        responses.append(dict(topic_id=topic.topic_id, partitions=partitions))
    if closing:
        shares.session_closed(group_id, member_id)
    await _share.durable(ctx)
    return make(cls, throttle_time=0, error_code=ErrorCode.none,
                acquisition_lock_timeout=shares.settings_for(group_id).record_lock_duration_ms,
                responses=responses, node_endpoints=())


def _whole(cls, code: ErrorCode, message: str | None):
    return make(cls, throttle_time=0, error_code=code, error_message=message, responses=(), node_endpoints=())
