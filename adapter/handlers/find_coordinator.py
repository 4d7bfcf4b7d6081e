"""FindCoordinator (10): this broker coordinates every group and transactional id.

v0-3 ask for one key; v4+ for a batch of keys (KIP-699). Key types: 0 group, 1 transaction.
Each key needs DESCRIBE on its group (GROUP_AUTHORIZATION_FAILED) or transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as in Kafka. A group's lookup creates the internal
topic ``__consumer_offsets`` (adapter/internal_topics.py), as Kafka's does.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..internal_topics import ensure_consumer_offsets
from ..security.acls import AclOperation, ResourceType

API_KEY = 10
KEY_TYPES = (0, 1)


_RESOURCES = {
    0: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
    1: (ResourceType.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed),
}


def _answer(ctx: BrokerContext, key_type: int, key: str) -> dict:
    if key_type not in _RESOURCES:
        error, message = ErrorCode.invalid_request, f"unsupported key type {key_type}"
    elif not ctx.allowed(AclOperation.DESCRIBE, _RESOURCES[key_type][0], key):
        error, message = _RESOURCES[key_type][1], None
    else:
        if key_type == 0:
            ensure_consumer_offsets(ctx)
        return dict(error_code=ErrorCode.none, error_message=None, node_id=ctx.config.node_id,
                    host=ctx.advertised_host, port=ctx.advertised_port)
    return dict(error_code=error, error_message=message, node_id=-1, host="", port=-1)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    key_type = getattr(body, "key_type", 0)
    if request.api_version >= 4:
        return make(
            response_type(request),
            throttle_time=0,
            coordinators=[dict(key=key, **_answer(ctx, key_type, key)) for key in body.coordinator_keys],
        )
    return make(response_type(request), throttle_time=0, **_answer(ctx, key_type, body.key))
