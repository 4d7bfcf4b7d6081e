"""ElectLeaders (43, v0-2): as the controller of a one-node Kafka cluster answers it.

Every partition has one replica, this broker, which leads it, so no election is ever
needed (Kafka's ReplicationControlManager.electLeader):

- a named partition that exists: ELECTION_NOT_NEEDED, with Kafka's default message for it;
- an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION, "No such topic as T" /
  "No such partition as T-P";
- topic_partitions null (all partitions): one entry per topic listed by Metadata, each
  without partitions, since Kafka leaves out the partitions whose election was not needed;
- election type 0 (preferred) and 1 (unclean) alike; another type is INVALID_REQUEST
  "Unknown election type N" for the whole request (v0 has no type: preferred).
- ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top level (v1+) and on
  every partition named (Kafka's ElectLeadersRequest.getErrorResponse).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 43
ELECTION_NOT_NEEDED = "Leader election not needed for topic partition."
PREFERRED, UNCLEAN = 0, 1


def _failure(request: Request, code: ErrorCode, message: str):
    named = request.body.topic_partitions or ()
    return make(
        response_type(request), throttle_time=0, error_code=code,
        replica_election_results=[
            dict(topic=t.topic, partition_result=[
                dict(partition_id=p, error_code=code, error_message=message) for p in t.partitions])
            for t in named
        ],
    )


def _elect(ctx: BrokerContext, topic: str, partition: int) -> tuple[ErrorCode, str]:
    count = _cluster_admin.partition_count(ctx, topic)
    if count is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}"
    if not 0 <= partition < count:
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {topic}-{partition}"
    return ErrorCode.election_not_needed, ELECTION_NOT_NEEDED


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if not _cluster_admin.may_on_cluster(ctx, AclOperation.ALTER):
        return _failure(request, ErrorCode.cluster_authorization_failed,
                        _cluster_admin.CLUSTER_AUTHORIZATION_FAILED)
    election_type = getattr(body, "election_type", PREFERRED)
    if election_type not in (PREFERRED, UNCLEAN):
        return _failure(request, ErrorCode.invalid_request, f"Unknown election type {election_type}")
    if body.topic_partitions is None:
        results = [dict(topic=name, partition_result=()) for name, _ in _cluster_admin.listed_partitions(ctx)]
    else:
        results = []
        for topic in body.topic_partitions:
            partitions = []
            for p in topic.partitions:
                code, message = _elect(ctx, topic.topic, p)
                partitions.append(dict(partition_id=p, error_code=code, error_message=message))
            results.append(dict(topic=topic.topic, partition_result=partitions))
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none,
                replica_election_results=results)
