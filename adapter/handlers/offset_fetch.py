"""OffsetFetch (9): committed offsets of one group (v1-7) or of several (v8+).

A null topic list (v2+) asks for every partition the group has committed. Partitions
without a committed offset answer offset -1, as Kafka does. With ``require_stable`` (v7+,
KIP-447) a partition whose offset an undecided transaction staged answers
UNSTABLE_OFFSET_COMMIT (clients retry until the transaction ends).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext

API_KEY = 9


def _group_topics(ctx: BrokerContext, group_id: str, wanted, require_stable: bool = False) -> list[dict]:
    groups = ctx.groups
    if wanted is None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(groups.all_committed(group_id)):
            by_topic.setdefault(topic, []).append(partition)
        wanted = [(topic, partitions) for topic, partitions in by_topic.items()]
    topics = []
    for name, indexes in wanted:
        partitions = []
        for index in indexes:
            committed = groups.committed(group_id, name, index)
            unstable = require_stable and ctx.transactions.coordinator.has_pending_offsets(group_id, name, index)
            partitions.append(
                dict(
                    partition_index=index,
                    committed_offset=committed.offset if committed else -1,
                    committed_leader_epoch=committed.leader_epoch if committed else -1,
                    metadata=committed.metadata if committed else "",
                    error_code=ErrorCode.unstable_offset_commit if unstable else ErrorCode.none,
                )
            )
        topics.append(dict(name=name, partitions=partitions))
    return topics


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    stable = getattr(body, "require_stable", False)
    if request.api_version >= 8:
        groups = []
        for group in body.groups:
            wanted = None if group.topics is None else [(t.name, t.partition_indexes) for t in group.topics]
            groups.append(
                dict(group_id=group.group_id, topics=_group_topics(ctx, group.group_id, wanted, stable), error_code=ErrorCode.none)
            )
        return make(response_type(request), throttle_time=0, groups=groups)
    wanted = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
    return make(
        response_type(request),
        throttle_time=0,
        topics=_group_topics(ctx, body.group_id, wanted, stable),
        error_code=ErrorCode.none,
    )
