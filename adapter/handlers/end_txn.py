"""EndTxn (26): commit or abort the producer's transaction. Answered once the decision,
the markers written to every partition of the transaction and (on commit) its offsets are
in the log (durable with flush=sync). v5 (Transactions V2) is not advertised."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from . import _txn

API_KEY = 26


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not _txn.may_write(ctx, body.transactional_id):
        return make(response_type(request), throttle_time=0,
                    error_code=ErrorCode.transactional_id_authorization_failed)
    code, _ = await _txn.run(
        ctx, ctx.transactions.coordinator.end_txn, body.transactional_id, body.producer_id,
        body.producer_epoch, body.committed,
        legacy_epoch_error=_txn.legacy_epoch_error(API_KEY, request.api_version),
    )
    return make(response_type(request), throttle_time=0, error_code=code)
