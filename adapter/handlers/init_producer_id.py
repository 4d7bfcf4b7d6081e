"""InitProducerId (22): producer ids for idempotent (and transactional-id) producers.

Without a transactional id every call gets a fresh producer id at epoch 0, unless the client
asks to bump the epoch of its current id (KIP-360), which fences its older epoch. A
transactional id keeps its producer id across calls and restarts; each call bumps the epoch.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from rmqkafka.storage.producer_ids import MAX_EPOCH

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext

API_KEY = 22


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    ids = ctx.store.producer_ids
    current_id = getattr(body, "producer_id", -1)
    current_epoch = getattr(body, "producer_epoch", -1)
    if body.transactional_id:
        producer_id, epoch = ids.for_transactional_id(body.transactional_id)
    elif current_id >= 0 and 0 <= current_epoch < MAX_EPOCH:
        producer_id, epoch = current_id, current_epoch + 1
    else:
        producer_id, epoch = ids.allocate(), 0
    return make(
        response_type(request),
        throttle_time=0,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
