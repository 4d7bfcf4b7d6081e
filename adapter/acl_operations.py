"""Authorized-operation bit fields, as Kafka answers them when no authorizer is configured.

Metadata, DescribeCluster, DescribeTopicPartitions and DescribeGroups may carry the ACL
operations the caller is allowed on a resource: bit ``n`` set = AclOperation code ``n``
granted. Without an authorizer Kafka grants every operation the resource type supports
(AclEntry.supportedOperations), and -2**31 means "not asked for". Group operations are the
3.x set: this broker has no group configs, so DESCRIBE_CONFIGS / ALTER_CONFIGS (Kafka 4.0)
would advertise something it cannot do.
"""

from __future__ import annotations

import enum

NOT_PROVIDED = -(2**31)


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def _bits(*operations: AclOperation) -> int:
    return sum(1 << op for op in set(operations))


_op = AclOperation
TOPIC = _bits(_op.READ, _op.WRITE, _op.CREATE, _op.DESCRIBE, _op.DELETE, _op.ALTER,
              _op.DESCRIBE_CONFIGS, _op.ALTER_CONFIGS)
GROUP = _bits(_op.READ, _op.DESCRIBE, _op.DELETE)
CLUSTER = _bits(_op.CREATE, _op.CLUSTER_ACTION, _op.DESCRIBE_CONFIGS, _op.ALTER_CONFIGS,
                _op.IDEMPOTENT_WRITE, _op.ALTER, _op.DESCRIBE)


def authorized(requested: bool, operations: int) -> int:
    """The field's value: the resource's operations when the request asked for them."""
    return operations if requested else NOT_PROVIDED
