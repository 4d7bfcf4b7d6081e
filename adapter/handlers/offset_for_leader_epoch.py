"""OffsetForLeaderEpoch (23, v2-4): the end offset of a leader epoch, for truncation checks.

Choices
-------
Every partition of this single-replica broker has had one leader, epoch 0, since it was
created: Metadata reports leader epoch 0 and stored batches carry partitionLeaderEpoch 0. So
the broker's epoch cache is the single entry "epoch 0 starts at the log start offset", and
the answers follow Kafka's ``LeaderEpochFileCache.endOffsetFor`` for that cache:

- ``leader_epoch`` 0 (the current epoch) -> epoch 0, end offset = log end offset = high
  watermark. This is what the Java consumer sends after fetching (it validates its position
  with the epoch of the last batch it saw, 0) or after a seek with a committed offset's
  epoch; every position it can hold is <= the high watermark, so it never sees truncation.
- ``leader_epoch`` -1 (UNDEFINED) and epochs above 0 -> epoch -1 / end offset -1, error
  NONE: Kafka's "no such epoch" (a client remembering epoch 5 from another cluster is told
  its history is unknown, and resets or raises LogTruncation as its policy says).
- ``leader_epoch`` below -1 (only a broken client sends it): Kafka answers the requested
  epoch with the start offset of the first epoch above it, i.e. the log start offset.

``current_leader_epoch`` fences stale clients as Kafka's ``Partition.getLocalLog`` does:
-1 means "not given"; above 0 -> UNKNOWN_LEADER_EPOCH (the client knows a newer leader than
we are); below -1 -> FENCED_LEADER_EPOCH (older than ours). Unknown topics and partitions
-> UNKNOWN_TOPIC_OR_PARTITION. A subscription view answers as its source topic does (its
offsets are its source's).

``replica_id`` (v3+; -1 consumer, -2 debugging tool, >= 0 follower broker) changes nothing:
Kafka uses it for no decision since it always answers from the leader (v2 has no field and
means a consumer). There are no followers here, so a broker id is answered like a consumer.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from rmqkafka.storage.topics import TopicMeta

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType

API_KEY = 23
LEADER_EPOCH = 0
UNDEFINED = -1


def end_offset_for(epoch: int, log_start: int, log_end: int) -> tuple[int, int]:
    """(leader epoch, end offset) for a requested epoch, given our one-epoch history."""
    if epoch == LEADER_EPOCH:
        return LEADER_EPOCH, log_end
    if epoch < UNDEFINED:
        return epoch, log_start
    return UNDEFINED, UNDEFINED


def fencing_error(current_leader_epoch: int) -> ErrorCode:
    if current_leader_epoch == UNDEFINED or current_leader_epoch == LEADER_EPOCH:
        return ErrorCode.none
    if current_leader_epoch > LEADER_EPOCH:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.fenced_leader_epoch


async def handle(ctx: BrokerContext, request: Request):
    store = ctx.store
    topics = []
    for topic in request.body.topics:
        meta = ctx.semantics.resolve(topic.topic)
        source = meta if meta is None or isinstance(meta, TopicMeta) else ctx.semantics.source_of(meta)
        partitions = []
        for req in topic.partitions:
            entry = dict(
                error_code=ErrorCode.none,
                partition=req.partition,
                leader_epoch=UNDEFINED,
                end_offset=UNDEFINED,
            )
            partitions.append(entry)
            if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic):
                entry["error_code"] = ErrorCode.topic_authorization_failed
                continue
            if source is None or not 0 <= req.partition < source.partitions:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
                continue
            entry["error_code"] = fencing_error(req.current_leader_epoch)
            if entry["error_code"] != ErrorCode.none:
                continue
            plog = store.partition(source.name, req.partition)
            entry["leader_epoch"], entry["end_offset"] = end_offset_for(
                req.leader_epoch, plog.log_start_offset, plog.next_offset
            )
        topics.append(dict(topic=topic.topic, partitions=partitions))
    return make(response_type(request), throttle_time=0, topics=topics)
