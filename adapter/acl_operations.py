"""Authorized-operation bit fields: what the caller may do on a resource, bit ``n`` for
AclOperation code ``n``.

Metadata, DescribeCluster, DescribeTopicPartitions and DescribeGroups carry them when the
request asks (-2**31 means "not asked for"). Each bit is the authorizer's answer for one of
the operations the resource type supports (Kafka's AclEntry.supportedOperations); without an
authorizer that is every one of them, as in Kafka. Group operations are the 3.x set: this
broker has no group configs, so DESCRIBE_CONFIGS / ALTER_CONFIGS (Kafka 4.0) would advertise
something it cannot do.
"""

from __future__ import annotations

from .context import BrokerContext
from .security.acls import AclOperation as _Op
from .security.acls import ResourceType

NOT_PROVIDED = -(2**31)

SUPPORTED = {
    ResourceType.TOPIC: (_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER,
                         _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS),
    ResourceType.GROUP: (_Op.READ, _Op.DESCRIBE, _Op.DELETE),
    ResourceType.CLUSTER: (_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS,
                           _Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE),
}


def authorized(ctx: BrokerContext, requested: bool, resource_type: ResourceType, name: str) -> int:
    """The field's value: the operations allowed on the resource, if the request asked."""
    if not requested:
        return NOT_PROVIDED
    return sum(1 << op for op in SUPPORTED[resource_type] if ctx.allowed(op, resource_type, name))
