"""DescribeQuorum (55, v0-2): this node as the single voter and leader of the metadata log
``__cluster_metadata`` partition 0, as a one-node KRaft cluster with a static quorum
(kraft.version 0) answers it (Kafka's KafkaRaftClient / LeaderState.describeQuorum).

What is reported, since this broker has no Raft log:

- leader = the one voter = ``node.id``, leader epoch 1 (elected once, never again);
- high watermark = the voter's log end offset = finalized features epoch + 1: the
  metadata this broker versions is its feature levels (ApiVersions reports the same
  epoch), so the offset moves exactly when UpdateFeatures changes them;
- last fetch and last caught-up timestamps: now, as Kafka reports its own replica;
  no observers; replica directory id zero (static voters have none);
- v2 ``nodes``: this node with one endpoint, the listener the request came in on (its
  advertised host and port, named by its security protocol). There is no separate
  controller listener: DescribeCluster also names this broker as the controller.

Errors, with the shapes of Kafka's DescribeQuorumRequest error responses: any topic other
than exactly ``__cluster_metadata`` partition 0 gets UNKNOWN_TOPIC_OR_PARTITION on every
partition asked for (the other fields left at their zero defaults); DESCRIBE on the cluster
is needed, else CLUSTER_AUTHORIZATION_FAILED at the top level, no message, no topics.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 55
METADATA_TOPIC = "__cluster_metadata"
LEADER_EPOCH = 1


def _valid(topics) -> bool:
    return (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC
            and len(topics[0].partitions) == 1 and topics[0].partitions[0].partition_index == 0)


async def handle(ctx: BrokerContext, request: Request):
    cls = response_type(request)
    topics = request.body.topics
    if not _cluster_admin.may_on_cluster(ctx, AclOperation.DESCRIBE):
        return make(cls, error_code=ErrorCode.cluster_authorization_failed, error_message=None, topics=(),
                    nodes=())
    if not _valid(topics):
        return make(cls, error_code=ErrorCode.none, error_message=None, nodes=(), topics=[
            dict(topic_name=t.topic_name, partitions=[
                dict(partition_index=p.partition_index, error_code=ErrorCode.unknown_topic_or_partition,
                     error_message=None, leader_id=0, leader_epoch=0, high_watermark=0,
                     current_voters=(), observers=())
                for p in t.partitions])
            for t in topics])
    node_id = ctx.config.node_id
    end = ctx.store.features.epoch + 1
    now = ctx.clock.now_ms()
    voter = dict(replica_id=node_id, replica_directory_id=uuid.UUID(int=0), log_end_offset=end,
                 last_fetch_timestamp=now, last_caught_up_timestamp=now)
    partition = dict(partition_index=0, error_code=ErrorCode.none, error_message=None, leader_id=node_id,
                     leader_epoch=LEADER_EPOCH, high_watermark=end, current_voters=[voter], observers=())
    node = dict(node_id=node_id, listeners=[
        dict(name=ctx.listener_protocol, host=ctx.advertised_host, port=ctx.advertised_port)])
    return make(cls, error_code=ErrorCode.none, error_message=None,
                topics=[dict(topic_name=METADATA_TOPIC, partitions=[partition])], nodes=[node])
