"""AlterReplicaLogDirs (34, v1-2): as a Kafka broker with one log directory answers it
(Kafka's ReplicaManager.alterReplicaLogDirs).

The one log directory is the data directory, by the absolute path DescribeLogDirs reports;
moving a replica into it is moving it where it is: NONE, and nothing changes. Otherwise:

- a path that is not the log directory: LOG_DIR_NOT_FOUND (checked first, as Kafka does);
- a topic name too long for Kafka's "<topic>-<partition>.<uuid>-future" directory name
  (over 255 characters): INVALID_TOPIC_EXCEPTION;
- an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION.
- ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition.

A partition named in two directories is answered once, for the last one (Kafka keys the
request by partition).
"""

from __future__ import annotations

import os

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 34
_FUTURE_DIR_EXTRA = len(".") + 32 + len("-future")  # Kafka's future replica directory suffix


def log_dir(ctx: BrokerContext) -> str:
    """The log directory, as DescribeLogDirs names it."""
    return os.path.abspath(ctx.storage_config.data_dir)


def _alter(ctx: BrokerContext, path: str, topic: str, partition: int) -> ErrorCode:
    if path != log_dir(ctx):
        return ErrorCode.log_dir_not_found
    if len(f"{topic}-{partition}") + _FUTURE_DIR_EXTRA > 255:
        return ErrorCode.invalid_topic_exception
    count = _cluster_admin.partition_count(ctx, topic)
    if count is None or not 0 <= partition < count:
        return ErrorCode.unknown_topic_or_partition
    return ErrorCode.none


async def handle(ctx: BrokerContext, request: Request):
    allowed = _cluster_admin.may_on_cluster(ctx, AclOperation.ALTER)
    wanted: dict[tuple[str, int], str] = {}
    for directory in request.body.dirs:
        for topic in directory.topics:
            for p in topic.partitions:
                wanted[(topic.name, p)] = directory.path
    by_topic: dict[str, list[dict]] = {}
    for (topic, p), path in wanted.items():
        code = _alter(ctx, path, topic, p) if allowed else ErrorCode.cluster_authorization_failed
        by_topic.setdefault(topic, []).append(dict(partition_index=p, error_code=code))
    return make(response_type(request), throttle_time=0,
                results=[dict(topic_name=t, partitions=ps) for t, ps in by_topic.items()])
