"""DeleteRecords (21, v0-2): move partitions' log start offsets forward.

Choices (following Kafka's Partition.deleteRecordsOnLeader / maybeIncrementLogStartOffset)
-------
- ``offset`` -1 means the high watermark. Any other negative offset, or one above the high
  watermark, is OFFSET_OUT_OF_RANGE. An offset at or below the current log start offset is
  not an error and changes nothing. ``low_watermark`` is the log start offset afterwards.
- Nothing is rewritten: the commitlog is shared by all partitions, so the bytes stay until
  retention deletes whole segments. Consume-queue files wholly below the new start are
  deleted; Fetch below it is OFFSET_OUT_OF_RANGE and ListOffsets earliest answers it.
- Durability: the answer is sent only after a checkpoint (which records every partition's
  log start offset, fsynced) has completed, so an acknowledged deletion survives kill -9.
  One checkpoint covers every partition of the request; concurrent requests each wait for
  their own (the checkpoint lock serialises them). ``timeout`` is not needed: there are no
  followers to wait for.
- A topic whose ``cleanup.policy`` lacks ``delete`` (compacted only) is refused with
  POLICY_VIOLATION, as Kafka's deleteRecordsOnLeader refuses it.
- A subscription view has no records of its own: every partition of a view is refused with
  INVALID_TOPIC_EXCEPTION, as Kafka refuses DeleteRecords on an internal topic (and as
  Produce to a view is refused). The response has no message field; delete the source's
  records instead.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType
from ..topic_configs import effective

API_KEY = 21
HIGH_WATERMARK = -1


async def handle(ctx: BrokerContext, request: Request):
    store = ctx.store
    topics = []
    moved = []
    for topic in request.body.topics:
        meta = store.topics.get(topic.name)
        is_view = meta is None and ctx.semantics.views.get(topic.name) is not None
        authorized = ctx.allowed(AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        partitions = []
        for req in topic.partitions:
            entry = dict(partition_index=req.partition_index, low_watermark=-1, error_code=ErrorCode.none)
            partitions.append(entry)
            if not authorized:
                entry["error_code"] = ErrorCode.topic_authorization_failed
                continue
            if is_view:
                entry["error_code"] = ErrorCode.invalid_topic_exception
                continue
            if meta is None or not 0 <= req.partition_index < meta.partitions:
                entry["error_code"] = ErrorCode.unknown_topic_or_partition
                continue
            if "delete" not in effective("cleanup.policy", meta.configs, ctx.config, ctx.storage_config).split(","):
                entry["error_code"] = ErrorCode.policy_violation
                continue
            plog = store.partition(topic.name, req.partition_index)
            offset = plog.next_offset if req.offset == HIGH_WATERMARK else req.offset
            if not 0 <= offset <= plog.next_offset:
                entry["error_code"] = ErrorCode.offset_out_of_range
                continue
            if offset > plog.log_start_offset:
                plog.advance_log_start(offset)
                moved.append(plog)
            entry["low_watermark"] = plog.log_start_offset
        topics.append(dict(name=topic.name, partitions=partitions))
    if moved:
        await store.checkpoint()
    return make(response_type(request), throttle_time=0, topics=topics)
