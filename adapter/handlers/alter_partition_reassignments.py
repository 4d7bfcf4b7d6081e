"""AlterPartitionReassignments (45, v0-1): as the controller of a one-node Kafka cluster
answers it (Kafka's ReplicationControlManager.alterPartitionReassignment).

Each partition has one replica, this broker, and nothing is ever being reassigned:

- unknown topic: UNKNOWN_TOPIC_OR_PARTITION "Unable to find a topic named T."; unknown
  partition: "Unable to find partition T:P.";
- replicas null (cancel): NO_REASSIGNMENT_IN_PROGRESS with Kafka's default message;
- a target list: validated as a manual assignment (empty, a broker other than this one,
  a broker twice: INVALID_REPLICA_ASSIGNMENT with Kafka's messages); the only valid one is
  [this broker], the current assignment, so it succeeds and changes nothing;
- ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top level and on every
  partition named (Kafka's AlterPartitionReassignmentsRequest.getErrorResponse).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 45
NO_REASSIGNMENT_IN_PROGRESS = "No partition reassignment is in progress."


def _check_target(replicas: tuple[int, ...], node_id: int) -> tuple[ErrorCode, str | None]:
    if not replicas:
        return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker in sorted(replicas):  # Kafka reports the lowest offending broker id
        if broker != node_id:
            return (ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes broker {broker}, but no such broker is registered.")
        if broker == previous:
            return (ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes the broker {broker} more than once.")
        previous = broker
    return ErrorCode.none, None


def _alter(ctx: BrokerContext, topic: str, partition) -> tuple[ErrorCode, str | None]:
    count = _cluster_admin.partition_count(ctx, topic)
    if count is None:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
    if not 0 <= partition.partition_index < count:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {topic}:{partition.partition_index}."
    if partition.replicas is None:
        return ErrorCode.no_reassignment_in_progress, NO_REASSIGNMENT_IN_PROGRESS
    return _check_target(partition.replicas, ctx.config.node_id)


async def handle(ctx: BrokerContext, request: Request):
    topics = request.body.topics
    allowed = _cluster_admin.may_on_cluster(ctx, AclOperation.ALTER)
    denied = (ErrorCode.cluster_authorization_failed, _cluster_admin.CLUSTER_AUTHORIZATION_FAILED)
    responses = []
    for topic in topics:
        partitions = []
        for partition in topic.partitions:
            code, message = _alter(ctx, topic.name, partition) if allowed else denied
            partitions.append(dict(partition_index=partition.partition_index, error_code=code, error_message=message))
        responses.append(dict(name=topic.name, partitions=partitions))
    code, message = (ErrorCode.none, None) if allowed else denied
    return make(response_type(request), throttle_time=0, error_code=code, error_message=message,
                allow_replication_factor_change=getattr(request.body, "allow_replication_factor_change", True),
                responses=responses)
