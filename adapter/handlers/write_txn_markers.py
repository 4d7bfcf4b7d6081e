"""WriteTxnMarkers (27, v1-2): write COMMIT/ABORT markers to partitions of this broker, as
a Kafka partition leader does for its transaction coordinator. What clients send it for:
the Java admin's abortTransaction (``kafka-transactions.sh abort``) ends a hanging
transaction with an ABORT marker for the producer id and epoch DescribeProducers reported.

Per partition (Kafka's KafkaApis.handleWriteTxnMarkersRequest and the producer state's
checks on a coordinator's marker):

- an unknown topic or partition, a view (it holds no records of its own) or a system topic
  (only the broker writes there; AddPartitionsToTxn refuses them too):
  UNKNOWN_TOPIC_OR_PARTITION;
- a producer epoch older than the partition's last one for the producer:
  INVALID_PRODUCER_EPOCH; a coordinator epoch older than the one of its last marker:
  TRANSACTION_COORDINATOR_FENCED;
- otherwise the marker is appended (the partition's open transaction of that producer
  ends, an ABORT is indexed for read_committed consumers, the LSO moves on) and, with
  flush=sync, made durable before the answer. A failed write is KAFKA_STORAGE_ERROR.

A partition named twice in one marker is written and answered once, as Kafka keys them.
CLUSTER_ACTION on the cluster is required, else every partition named gets
CLUSTER_AUTHORIZATION_FAILED. The v2 transaction_version field is accepted; markers are
checked with Transactions V1 rules (transaction.version 2 is not supported).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.semantics import SYSTEM_TOPICS

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 27


def _write(ctx: BrokerContext, marker, topic: str, partition: int) -> ErrorCode:
    meta = ctx.store.topics.get(topic) if topic not in SYSTEM_TOPICS else None
    if meta is None or not 0 <= partition < meta.partitions:
        return ErrorCode.unknown_topic_or_partition
    try:
        ctx.transactions.write_marker(topic, partition, marker.producer_id, marker.producer_epoch,
                                      marker.transaction_result, marker.coordinator_epoch)
    except Exception as exc:
        return error_code_for(exc)
    return ErrorCode.none


async def handle(ctx: BrokerContext, request: Request):
    allowed = _cluster_admin.may_on_cluster(ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for marker in request.body.markers:
        # Kafka keys a marker's partitions by partition: one append and one answer each
        named: dict[str, dict[int, None]] = {}
        for topic in marker.topics:
            named.setdefault(topic.name, {}).update(dict.fromkeys(topic.partition_indexes))
        topics = []
        for name, partitions in named.items():
            topics.append(dict(name=name, partitions=[
                dict(partition_index=p,
                     error_code=_write(ctx, marker, name, p) if allowed else ErrorCode.cluster_authorization_failed)
                for p in partitions
            ]))
        results.append(dict(producer_id=marker.producer_id, topics=topics))
    if allowed:
        await ctx.transactions.durable()
    return make(response_type(request), markers=results)
