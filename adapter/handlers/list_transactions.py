"""ListTransactions (66): transactional ids by state, producer id, duration (v1, KIP-994)
and id pattern (v2, KIP-1152) (kafka-transactions.sh list)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType
from ..transactions.coordinator import TxnError

API_KEY = 66


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    try:
        listing = ctx.transactions.coordinator.list(
            body.state_filters, body.producer_id_filters, getattr(body, "duration_filter", -1),
            getattr(body, "transactional_id_pattern", None),
        )
    except TxnError as exc:
        return make(response_type(request), throttle_time=0, error_code=exc.code,
                    unknown_state_filters=(), transaction_states=())
    return make(
        response_type(request), throttle_time=0, error_code=ErrorCode.none,
        unknown_state_filters=list(listing.unknown_state_filters),
        transaction_states=[
            dict(transactional_id=t.transactional_id, producer_id=t.producer_id,
                 transaction_state=t.state)
            for t in listing.transactions
            if ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)
        ],
    )
