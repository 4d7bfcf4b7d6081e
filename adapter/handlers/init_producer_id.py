"""InitProducerId (22): producer ids for idempotent producers.

Without a transactional id every call gets a fresh producer id at epoch 0, unless the client
asks to bump the epoch of its current id (KIP-360), which fences its older epoch.

With a transactional id Kafka's checks come first, in Kafka's order: an empty id is
INVALID_REQUEST, a transaction timeout outside ``0 < timeout <= transaction.max.timeout.ms``
is INVALID_TRANSACTION_TIMEOUT. Then the request is refused with INVALID_REQUEST: the
transaction APIs (AddPartitionsToTxn, EndTxn, ...) do not exist yet, and a producer that got
an id would only fail later, against a missing API, after retrying for seconds. No client
retries INVALID_REQUEST, so a transactional producer fails at ``initTransactions``.
"""

from __future__ import annotations

import datetime
import logging

from kio.schema.errors import ErrorCode

from rmqkafka.storage.producer_ids import MAX_EPOCH

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext

API_KEY = 22

log = logging.getLogger(__name__)


def _transactional_error(ctx: BrokerContext, transactional_id: str, timeout: datetime.timedelta) -> ErrorCode:
    timeout_ms = timeout // datetime.timedelta(milliseconds=1)
    if not transactional_id:
        return ErrorCode.invalid_request
    if not 0 < timeout_ms <= ctx.config.transaction_max_timeout_ms:
        return ErrorCode.invalid_transaction_timeout
    log.warning("InitProducerId for transactional id %r refused: transactions are not supported yet",
                transactional_id)
    return ErrorCode.invalid_request


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if body.transactional_id is not None:
        code = _transactional_error(ctx, body.transactional_id, body.transaction_timeout)
        return _answer(request, code, -1, -1)
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
