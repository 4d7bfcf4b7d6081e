"""DescribeLogDirs (35, v1-4): the one log directory and the size of each partition in it.

Choices
-------
- One log dir: the data directory (absolute path), error NONE; v4 adds the volume's total
  and usable bytes (``os.statvfs``: blocks and blocks available to unprivileged users, as
  Java's FileStore.getTotalSpace / getUsableSpace). v3+ has a top-level error code: NONE.
- ``topics`` null means every partition; named topics/partitions that do not exist are left
  out, and a topic with no partition left is omitted, as Kafka does.
- ``offset_lag`` 0 (the log end offset is the high watermark) and ``is_future_key`` false
  (no AlterReplicaLogDirs).
- ``partition_size`` -- partitions share one commitlog, so no file holds one partition.
  The size reported is the bytes of the record batches from the one holding the log start
  offset to the log end (the commitlog's own per-entry headers and batches of other
  partitions excluded; bytes of deleted records still waiting for retention excluded too).
  It is exact for partitions of up to EXACT_LIMIT (4096) offsets: distinct batches summed
  from the consume queue, one sequential read of 20 bytes per offset. Above that it is an
  estimate: SAMPLES (256) evenly spaced offsets, each contributing its batch's bytes per
  offset (size / offsets the batch spans, from the batch header), scaled to the partition's
  offset count -- exact when all batches have the same bytes per offset, and an unbiased
  estimate otherwise. Either way about 1-2 ms per partition, whatever its length, so a
  describe of every partition never stalls the event loop for long. A compacted partition's
  cleaned offsets count as the bytes its compaction store holds (storage.compaction_store).
- What a describe costs is what the partitions hold: a partition never used (not built by
  the store) is 0 bytes and is not built for the describe, and the loop is given up every
  ``YIELD_EVERY`` partitions, so describing 100,000 declared partitions neither keeps them in
  memory nor holds up the other clients for its whole length.
"""

from __future__ import annotations

import asyncio
import os
from operator import itemgetter

from kio.schema.errors import ErrorCode
from rmqkafka.storage import record_batch
from rmqkafka.storage.consume_queue import ENTRY

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 35
EXACT_LIMIT = 4096
SAMPLES = 256
YIELD_EVERY = 32  # partitions sized per turn of the event loop (each up to 1-2 ms)
_POSITION_AND_SIZE = itemgetter(0, 1)


def partition_size(ctx: BrokerContext, plog) -> int:
    # a compacted partition's cleaned offsets are its compaction store's bytes (the
    # commitlog below them may be gone)
    cleaned = plog.compacted.data_bytes if plog.compacted is not None else 0
    return cleaned + _log_size(ctx, plog, max(plog.log_start_offset, plog.cleaned_end), plog.next_offset)


def _log_size(ctx: BrokerContext, plog, start: int, end: int) -> int:
    count = end - start
    if count <= 0:
        return 0
    if count <= EXACT_LIMIT:
        return _exact_size(plog.consume_queue, start, end)
    per_offset, sampled = 0.0, 0
    for i in range(SAMPLES):
        position, size, _ = plog.consume_queue.entry(start + count * i // SAMPLES)
        if size == 0:  # a lost offset (damaged commitlog range) holds no bytes
            continue
        head = ctx.store.commitlog.read(position, record_batch.HEADER_SIZE)
        per_offset += size / (record_batch.next_offset_of(head) - record_batch.base_offset_of(head))
        sampled += 1
    return round(per_offset / sampled * count) if sampled else 0


def _exact_size(queue, start: int, end: int) -> int:
    total, previous, offset = 0, None, start
    while offset < end:
        raw = queue.entries(offset, end - offset)
        if not raw:
            break
        sizes = dict(map(_POSITION_AND_SIZE, ENTRY.iter_unpack(raw)))  # positions -> batch size
        sizes.pop(previous, None)  # the batch continued from the previous file
        total += sum(sizes.values())
        previous = ENTRY.unpack_from(raw, len(raw) - ENTRY.size)[0]
        offset += len(raw) // ENTRY.size
    return total


def _volume(path: str) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx: BrokerContext, request: Request):
    store = ctx.store
    if not ctx.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return make(response_type(request), throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    results=())
    if request.body.topics is None:
        wanted = {meta.name: range(meta.partitions) for meta in store.topics.all()}
    else:
        wanted = {}
        for topic in request.body.topics:
            wanted.setdefault(topic.topic, set()).update(topic.partitions)
    topics = []
    sized = 0
    for name, indexes in sorted(wanted.items()):
        partitions = []
        for p in sorted(indexes):
            if sized == YIELD_EVERY:
                sized = 0
                await asyncio.sleep(0)  # a describe of every partition does not hold up the others
            meta = store.topics.get(name)  # again after each yield: it may be gone meanwhile
            if meta is None or not 0 <= p < meta.partitions:
                continue
            sized += 1
            plog = store.built_partition(name, p)  # None: never used, nothing in it
            partitions.append(dict(partition_index=p, partition_size=0 if plog is None else partition_size(ctx, plog),
                                   offset_lag=0, is_future_key=False))
        if partitions:
            topics.append(dict(name=name, partitions=partitions))
    log_dir = os.path.abspath(ctx.storage_config.data_dir)
    total, usable = _volume(log_dir)
    result = dict(
        error_code=ErrorCode.none,
        log_dir=log_dir,
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
    )
    return make(response_type(request), throttle_time=0, error_code=ErrorCode.none, results=[result])
