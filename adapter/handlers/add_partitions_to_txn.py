"""AddPartitionsToTxn (24), the client versions (v0-3): partitions join the producer's
transaction before it produces to them.

v4+ (broker-to-broker batches, KIP-890) is not advertised. Every partition must exist (a
missing one is UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as
Kafka answers); an error of the transaction (fenced epoch, wrong state) is every partition's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.semantics import SYSTEM_TOPICS

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType
from . import _txn

API_KEY = 24


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    wanted = [(t.name, tuple(t.partitions)) for t in body.v3_and_below_topics]
    if not _txn.may_write(ctx, body.v3_and_below_transactional_id):
        return _answer(request, wanted, lambda name, p: ErrorCode.transactional_id_authorization_failed)
    refused = {name for name, _ in wanted if not ctx.allowed(AclOperation.WRITE, ResourceType.TOPIC, name)}
    if refused:  # as Kafka: the others are not attempted
        return _answer(request, wanted, lambda name, p: ErrorCode.topic_authorization_failed
                       if name in refused else ErrorCode.operation_not_attempted)
    unknown = set()
    for name, partitions in wanted:
        meta = ctx.store.topics.get(name) if name not in SYSTEM_TOPICS else None
        for p in partitions:
            if meta is None or not 0 <= p < meta.partitions:
                unknown.add((name, p))
    if unknown:
        codes = {(name, p): ErrorCode.unknown_topic_or_partition if (name, p) in unknown
                 else ErrorCode.operation_not_attempted
                 for name, partitions in wanted for p in partitions}
    else:
        code, _ = await _txn.run(
            ctx, ctx.transactions.coordinator.add_partitions, body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
            [(name, p) for name, partitions in wanted for p in partitions],
            legacy_epoch_error=_txn.legacy_epoch_error(API_KEY, request.api_version),
        )
        codes = {(name, p): code for name, partitions in wanted for p in partitions}
    return _answer(request, wanted, lambda name, p: codes[(name, p)])


def _answer(request: Request, wanted, code_of):
    results = [
        dict(name=name, results_by_partition=[
            dict(partition_index=p, partition_error_code=code_of(name, p)) for p in partitions
        ])
        for name, partitions in wanted
    ]
    return make(response_type(request), throttle_time=0, results_by_topic_v3_and_below=results)
