"""OffsetFetch (9): committed offsets of one group (v1-7) or of several (v8+).

A null topic list (v2+) asks for every partition the group has committed. Partitions
without a committed offset answer offset -1, as Kafka does. With ``require_stable`` (v7+,
KIP-447) a partition whose offset an undecided transaction staged answers
UNSTABLE_OFFSET_COMMIT (clients retry until the transaction ends). From v9 a member of a
consumer-protocol group names itself and its epoch: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH.

Authorization, as in Kafka: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED, on each
partition before v2), then DESCRIBE on each topic: asked for by name it is
TOPIC_AUTHORIZATION_FAILED, and when every partition is asked for it is left out.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 9


def _group_topics(ctx: BrokerContext, group_id: str, wanted, require_stable: bool = False,
                  group_error: ErrorCode = ErrorCode.none) -> list[dict]:
    groups = ctx.groups

    def may_describe(topic: str) -> bool:
        return ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    if wanted is None:
        by_topic: dict[str, list[int]] = {}
        if group_error is ErrorCode.none:
            for topic, partition in sorted(groups.all_committed(group_id)):
                by_topic.setdefault(topic, []).append(partition)
        wanted = [(topic, partitions) for topic, partitions in by_topic.items() if may_describe(topic)]
    topics = []
    for name, indexes in wanted:
        partitions = []
        refusal = group_error if group_error is not ErrorCode.none else (
            ErrorCode.none if may_describe(name) else ErrorCode.topic_authorization_failed)
        if refusal is not ErrorCode.none:
            topics.append(dict(name=name, partitions=[
                dict(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                     error_code=refusal) for i in indexes]))
            continue
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
            if not _may_describe_group(ctx, group.group_id):
                groups.append(dict(group_id=group.group_id, topics=(), error_code=ErrorCode.group_authorization_failed))
                continue
            # A share group has no committed offsets; v9+ (KIP-848): a consumer-protocol
            # member fetches at its current epoch.
            fenced = ctx.groups.check_fetch(group.group_id, getattr(group, "member_id", None),
                                                     getattr(group, "member_epoch", -1))
            if fenced is not ErrorCode.none:
                groups.append(dict(group_id=group.group_id, topics=(), error_code=fenced))
                continue
            wanted = None if group.topics is None else [(t.name, t.partition_indexes) for t in group.topics]
            groups.append(
                dict(group_id=group.group_id, topics=_group_topics(ctx, group.group_id, wanted, stable), error_code=ErrorCode.none)
            )
        return make(response_type(request), throttle_time=0, groups=groups)
    wanted = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
    group_error = ErrorCode.none
    if not _may_describe_group(ctx, body.group_id):
        group_error = ErrorCode.group_authorization_failed
    elif ctx.groups.check_fetch(body.group_id, None, -1) is not ErrorCode.none:
        group_error = ErrorCode.group_id_not_found  # a share group's id
    if group_error is not ErrorCode.none and request.api_version >= 2:
        wanted = []  # the top-level error says it; v1 has only partition errors
    return make(
        response_type(request),
        throttle_time=0,
        topics=_group_topics(ctx, body.group_id, wanted, stable, group_error),
        error_code=group_error,
    )


def _may_describe_group(ctx: BrokerContext, group_id: str) -> bool:
    return ctx.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
