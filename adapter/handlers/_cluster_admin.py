"""Shared by the handlers of the one-node cluster admin APIs (ElectLeaders, the partition
reassignments, AlterReplicaLogDirs, DescribeQuorum, UpdateFeatures, ListConfigResources,
WriteTxnMarkers): what a partition is here, and the check of an operation on the cluster."""

from __future__ import annotations

from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

CLUSTER_AUTHORIZATION_FAILED = "Cluster authorization failed."


def may_on_cluster(ctx: BrokerContext, operation: AclOperation) -> bool:
    return ctx.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def partition_count(ctx: BrokerContext, topic: str) -> int | None:
    """How many partitions the topic or view has (what Metadata lists), None if none."""
    entity = ctx.semantics.resolve(topic)
    return None if entity is None else ctx.semantics.partition_count(entity)


def listed_partitions(ctx: BrokerContext) -> list[tuple[str, int]]:
    """(name, partition count) of every topic and view Metadata lists, by name."""
    return [(e.name, ctx.semantics.partition_count(e)) for e in ctx.semantics.listed()]
