"""CreatePartitions (37): grow a topic's partition count (validate_only supported).

A subscription view has its source's partitions (it grows when the source grows), so growing
a view is refused with INVALID_PARTITIONS, Kafka's code for a partition count that cannot be
applied, and a message naming the source to grow instead.

The topics of a request grow with one metadata write (MessageStore.add_partitions_to); the
new partitions count against the controller mutation quota as in Kafka
(adapter.mutation_quota: THROTTLING_QUOTA_EXCEEDED from v3 on, a wait before older versions
are served).
"""

from __future__ import annotations

from collections import Counter

from kio.schema.errors import ErrorCode
from rmqkafka.storage.errors import InvalidPartitionCountError, UnknownTopicError

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import InvalidReplicaAssignment, error_code_for
from ..mutation_quota import charge, wait_for_quota
from ..security.acls import AclOperation, ResourceType

API_KEY = 37
STRICT_SINCE = 3  # versions that know THROTTLING_QUOTA_EXCEEDED (KIP-599)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    store = ctx.store
    strict = request.api_version >= STRICT_SINCE
    quota = ctx.mutation_quotas()
    if not strict and not body.validate_only:
        await wait_for_quota(quota)
    throttle_ms = 0
    results = []
    growing: list[tuple[dict, str, int]] = []
    added = 0  # partitions this request adds before the topic at hand
    counts = Counter(topic.name for topic in body.topics)
    for topic in body.topics:
        result = dict(name=topic.name, error_code=ErrorCode.none, error_message=None)
        results.append(result)
        if counts[topic.name] > 1:  # Kafka's answer to a name given twice
            result["error_code"] = ErrorCode.invalid_request
            result["error_message"] = "Duplicate topic in request."
            continue
        if not ctx.allowed(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            result["error_code"] = ErrorCode.topic_authorization_failed
            continue
        try:
            meta = store.topics.get(topic.name)
            view = ctx.semantics.views.get(topic.name) if meta is None else None
            if view is not None:
                raise InvalidPartitionCountError(
                    f"{topic.name!r} is a view over topic {view.source!r}: a view has its source's "
                    f"partitions; grow {view.source!r} instead" if ctx.may_see_source(view) else
                    f"{topic.name!r} is a view: a view has its source's partitions; grow its source instead"
                )
            if meta is None:
                raise UnknownTopicError(f"topic {topic.name!r} does not exist")
            if topic.count <= meta.partitions:
                raise InvalidPartitionCountError(
                    f"topic {topic.name!r} has {meta.partitions} partitions; the new count must be larger"
                )
            for assignment in topic.assignments or ():
                if list(assignment.broker_ids) != [ctx.config.node_id]:
                    raise InvalidReplicaAssignment(
                        f"this is a single broker (node {ctx.config.node_id}); got {list(assignment.broker_ids)}"
                    )
            if topic.assignments is not None and len(topic.assignments) != topic.count - meta.partitions:
                raise InvalidReplicaAssignment("one assignment is needed per new partition")
            store.check_partition_limits(topic.name, topic.count, meta.partitions, added)
        except Exception as exc:
            result["error_code"] = error_code_for(exc)
            result["error_message"] = str(exc) or None
            continue
        if body.validate_only:
            continue
        new = topic.count - meta.partitions
        throttled = charge(quota, new, strict, result)
        if throttled:
            throttle_ms = max(throttle_ms, throttled)
            continue
        growing.append((result, topic.name, topic.count))
        added += new
    if growing:
        outcomes = await store.add_partitions_to([(name, count) for _, name, count in growing])
        for (result, _, _), outcome in zip(growing, outcomes):
            if isinstance(outcome, Exception):
                result["error_code"] = error_code_for(outcome)
                result["error_message"] = str(outcome) or None
    return make(response_type(request), throttle_time=throttle_ms, results=results)
