"""InitProducerId (22): producer ids for idempotent producers.

Without a transactional id every call gets a fresh producer id at epoch 0, unless the client
asks to bump the epoch of its current id (KIP-360), which fences its older epoch.

With a transactional id the transaction coordinator answers (adapter/transactions): an
empty id is INVALID_REQUEST, a transaction timeout outside
``0 < timeout <= transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT; a new id gets
a new producer id at epoch 0, a known one its epoch bumped (fencing the older producer and
aborting its open transaction first: CONCURRENT_TRANSACTIONS, which clients retry).
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode
from rmqkafka.storage.producer_ids import MAX_EPOCH

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from . import _txn

API_KEY = 22


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if body.transactional_id is not None:
        if not _txn.may_write(ctx, body.transactional_id):
            return _answer(request, ErrorCode.transactional_id_authorization_failed, -1, -1)
        timeout_ms = body.transaction_timeout // datetime.timedelta(milliseconds=1)
        code, result = await _txn.run(
            ctx, ctx.transactions.coordinator.init_producer_id, body.transactional_id, timeout_ms,
            getattr(body, "producer_id", -1), getattr(body, "producer_epoch", -1),
            legacy_epoch_error=_txn.legacy_epoch_error(API_KEY, request.api_version),
        )
        if code is not ErrorCode.none:
            return _answer(request, code, -1, -1)
        return _answer(request, code, result.producer_id, result.producer_epoch)
    if not (ctx.allowed(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
            or ctx.allowed_on_some(AclOperation.WRITE, ResourceType.TOPIC)):
        # KIP-679: WRITE on any topic is enough for an idempotent producer
        return _answer(request, ErrorCode.cluster_authorization_failed, -1, -1)
    current_id = getattr(body, "producer_id", -1)
    current_epoch = getattr(body, "producer_epoch", -1)
    if current_id >= 0 and 0 <= current_epoch < MAX_EPOCH:
        producer_id, epoch = current_id, current_epoch + 1
    else:
        producer_id, epoch = ctx.store.producer_ids.allocate(), 0
    return _answer(request, ErrorCode.none, producer_id, epoch)


def _answer(request: Request, code: ErrorCode, producer_id: int, epoch: int):
    return make(response_type(request), throttle_time=0, error_code=code, producer_id=producer_id,
                producer_epoch=epoch)
