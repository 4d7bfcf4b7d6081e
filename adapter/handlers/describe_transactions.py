"""DescribeTransactions (65): the state of transactional ids (kafka-transactions.sh
describe). A transaction not started has start time -1, as in Kafka."""

from __future__ import annotations

import dataclasses
import datetime

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 65
_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


async def handle(ctx: BrokerContext, request: Request):
    states = []
    for d in ctx.transactions.coordinator.describe(request.body.transactional_ids):
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, d.transactional_id):
            d = dataclasses.replace(d, error_code=ErrorCode.transactional_id_authorization_failed)
        if d.error_code:  # Kafka leaves an error entry's other fields at their defaults: 0
            states.append(dict(error_code=d.error_code, transactional_id=d.transactional_id,
                               transaction_state="", transaction_timeout=datetime.timedelta(0),
                               transaction_start_time=_EPOCH, producer_id=0, producer_epoch=0,
                               topics=[]))
            continue
        states.append(dict(
            error_code=d.error_code,
            transactional_id=d.transactional_id,
            transaction_state=d.state,
            transaction_timeout=datetime.timedelta(milliseconds=d.timeout_ms),
            # -1 when no transaction has started, as Kafka answers
            transaction_start_time=datetime.datetime.fromtimestamp(d.start_time_ms / 1000, tz=datetime.UTC),
            producer_id=d.producer_id,
            producer_epoch=d.producer_epoch,
            topics=[dict(topic=topic, partitions=list(ps)) for topic, ps in d.topics],
        ))
    return make(response_type(request), throttle_time=0, transaction_states=states)
