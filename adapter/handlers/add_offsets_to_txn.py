"""AddOffsetsToTxn (25): a consumer group's offsets join the producer's transaction (its
TxnOffsetCommit offsets are applied if the transaction commits)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType
from . import _txn

API_KEY = 25


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not _txn.may_write(ctx, body.transactional_id):
        return make(response_type(request), throttle_time=0,
                    error_code=ErrorCode.transactional_id_authorization_failed)
    if not ctx.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return make(response_type(request), throttle_time=0, error_code=ErrorCode.group_authorization_failed)
    code, _ = await _txn.run(
        ctx, ctx.transactions.coordinator.add_offsets, body.transactional_id, body.producer_id,
        body.producer_epoch, body.group_id,
        legacy_epoch_error=_txn.legacy_epoch_error(API_KEY, request.api_version),
    )
    return make(response_type(request), throttle_time=0, error_code=code)
