"""Produce (0): validate and append each partition's batches; answer per partition.

acks=0 gets no response at all; if any partition failed, the connection is closed instead.
With ``--flush sync`` an acks=1/-1 produce is answered only after an fsync covering its
batches (shared with concurrent producers: group commit). The appends happen before this
coroutine first awaits, so pipelined requests on one connection are appended in the order
they arrived.
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from rmqkafka.storage.errors import InvalidRecordError

from ..codec import Encoded, Request, encode_produce_response
from ..context import BrokerContext
from ..errors import CloseConnection, error_code_for
from ..topic_configs import effective

API_KEY = 0


def _as_datetime(ms: int | None) -> datetime.datetime | None:
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    store = ctx.store
    durable_at = 0
    responses = []
    for topic in body.topic_data:
        meta = store.topics.get(topic.name)
        partitions = []
        for data in topic.partition_data:
            result = dict(
                index=data.index,
                error_code=ErrorCode.none,
                base_offset=-1,
                log_append_time=None,
                log_start_offset=-1,
                record_errors=(),
                error_message=None,
            )
            if meta is None or not 0 <= data.index < meta.partitions:
                result["error_code"] = ErrorCode.unknown_topic_or_partition
                partitions.append(result)
                continue
            try:
                if data.records is None:
                    raise InvalidRecordError("a produce request partition carries no records")
                max_bytes = int(effective("max.message.bytes", meta.configs, ctx.config, ctx.storage_config))
                log_append = (
                    effective("message.timestamp.type", meta.configs, ctx.config, ctx.storage_config)
                    == "LogAppendTime"
                )
                appended = store.append(
                    topic.name, data.index, data.records, max_batch_bytes=max_bytes, log_append_time=log_append
                )
            except Exception as exc:
                result["error_code"] = error_code_for(exc)
                result["error_message"] = str(exc) or None
            else:
                durable_at = max(durable_at, appended.end_position)
                result["base_offset"] = appended.base_offset
                result["log_append_time"] = _as_datetime(appended.log_append_time_ms)
                result["log_start_offset"] = store.partition(topic.name, data.index).log_start_offset
            partitions.append(result)
        responses.append(dict(name=topic.name, partition_responses=partitions))
    if body.acks == 0:
        failed = [p for t in responses for p in t["partition_responses"] if p["error_code"]]
        if failed:
            # No response may be sent, so closing is how the producer learns (as in Kafka).
            raise CloseConnection(f"acks=0 produce failed: {failed[0]['error_code'].name}")
        return None
    if ctx.storage_config.flush == "sync" and durable_at:
        await store.wait_durable(durable_at)
    return Encoded(encode_produce_response(request.api_version, responses))

