"""ListOffsets (2): earliest, latest, by timestamp and max timestamp per partition.

With isolation_level read_committed (v2+), LATEST answers the last stable offset (LSO:
below it every transaction is decided), as Kafka does, and a lookup by timestamp (or max
timestamp) that finds an offset at or past the LSO answers -1: Kafka answers only offsets
below the last fetchable one.

A timestamp below the special values (-1 .. -5) is looked up like any other, as Kafka does
(the first record stamped at or after it).

A view answers with its source partition's earliest, latest and max-timestamp offsets (its
offsets are the source's); by timestamp, with the first record of the view stamped at or
after it, or -1 when there is none (as Kafka answers when no record is that recent).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..errors import error_code_for
from ..security.acls import AclOperation, ResourceType

API_KEY = 2
LATEST = -1
READ_COMMITTED = 1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
UNKNOWN = -1


async def handle(ctx: BrokerContext, request: Request):
    semantics = ctx.semantics
    # read_committed (v2+): LATEST is the last stable offset, as in Kafka
    committed = getattr(request.body, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for topic in request.body.topics:
        meta = semantics.resolve(topic.name)
        authorized = ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        partitions = []
        for req in topic.partitions:
            entry = dict(
                partition_index=req.partition_index,
                error_code=ErrorCode.none,
                timestamp=UNKNOWN,
                offset=UNKNOWN,
                leader_epoch=0,
                old_style_offsets=(),
            )
            partitions.append(entry)
            if not authorized:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                continue
            if meta is None or not 0 <= req.partition_index < semantics.partition_count(meta):
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
                continue
            if getattr(req, "current_leader_epoch", -1) > 0:
                entry["error_code"] = ErrorCode.unknown_leader_epoch
                continue
            try:
                entry["offset"], entry["timestamp"] = _lookup(semantics, meta, req.partition_index, req.timestamp,
                                                              committed)
            except Exception as exc:
                entry["error_code"] = error_code_for(exc)
        topics.append(dict(name=topic.name, partitions=partitions))
    return make(response_type(request), throttle_time=0, topics=topics)


def _lookup(semantics, entity, partition: int, timestamp: int,
            committed: bool = False) -> tuple[int, int]:
    plog = semantics.source_partition(entity, partition)
    if timestamp == LATEST:
        return (plog.last_stable_offset if committed else plog.next_offset), UNKNOWN
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, UNKNOWN
    if timestamp == LATEST_TIERED:  # nothing is tiered: Kafka answers "no such offset"
        return UNKNOWN, UNKNOWN
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp()
    else:  # any other value, negative ones too, is searched for as Kafka does
        found = semantics.offset_for_timestamp(entity, partition, timestamp)
    if found is None or (committed and found[0] >= plog.last_stable_offset):
        return UNKNOWN, UNKNOWN  # Kafka: nothing past the last fetchable offset (the LSO)
    return found
