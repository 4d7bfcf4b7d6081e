"""FindCoordinator (10): this broker coordinates every group and transactional id.

v0-3 ask for one key; v4+ for a batch of keys (KIP-699). Key types: 0 group, 1 transaction.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext

API_KEY = 10
KEY_TYPES = (0, 1)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    key_type = getattr(body, "key_type", 0)
    error = ErrorCode.none if key_type in KEY_TYPES else ErrorCode.invalid_request
    node = dict(node_id=ctx.config.node_id, host=ctx.advertised_host, port=ctx.advertised_port)
    if error is not ErrorCode.none:
        node = dict(node_id=-1, host="", port=-1)
    message = None if error is ErrorCode.none else f"unsupported key type {key_type}"
    if request.api_version >= 4:
        return make(
            response_type(request),
            throttle_time=0,
            coordinators=[dict(key=key, error_code=error, error_message=message, **node) for key in body.coordinator_keys],
        )
    return make(response_type(request), throttle_time=0, error_code=error, error_message=message, **node)
