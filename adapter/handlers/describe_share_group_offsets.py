"""DescribeShareGroupOffsets (90), v0-v1: each share-partition's start offset (SPSO) and, from
v1 (KIP-1226), its lag: the records between SPSO and the high watermark not yet acknowledged
or archived.

Per group DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for that group); Topics null
asks for every topic the group has share-partitions of. Per topic DESCRIBE on the topic (else
TOPIC_AUTHORIZATION_FAILED on its partitions), an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a
partition without a share state answers start offset -1 and lag -1, as Kafka does.
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType
from . import _share

API_KEY = 90
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx: BrokerContext, request: Request):
    shares = _share.manager(ctx)
    groups = []
    for group in request.body.groups:
        if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
            groups.append(dict(group_id=group.group_id, topics=(), error_code=ErrorCode.group_authorization_failed))
            continue
        if group.topics is None:
            wanted: dict[str, list[int] | None] = {}
            for _, topic, partition in shares.partitions_of(group.group_id):
                wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in group.topics}
        topics = []
        for name, partitions in wanted.items():
            meta, code = _share.named_topic(ctx, name, AclOperation.DESCRIBE)
            rows = []
            for p in partitions:
                start, lag, row_code = -1, -1, code
                if code is ErrorCode.none:
                    if 0 <= p < ctx.semantics.partition_count(meta):
                        start, lag = shares.start_and_lag((group.group_id, name, p), meta)
                    else:
                        row_code = ErrorCode.unknown_topic_or_partition
                rows.append(dict(partition_index=p, start_offset=start, leader_epoch=-1 if start < 0 else 0,
                                 lag=lag, error_code=row_code))
            topics.append(dict(topic_name=name, topic_id=ctx.semantics.id_of(meta) if code is ErrorCode.none else ZERO_UUID,
                               partitions=rows))
        groups.append(dict(group_id=group.group_id, topics=topics, error_code=ErrorCode.none))
    return make(response_type(request), throttle_time=0, groups=groups)
