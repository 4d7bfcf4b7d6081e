"""Produce (0): validate and append each partition's batches; answer per partition.

acks=0 gets no response at all; if any partition failed, the connection is closed instead.
With ``--flush sync`` an acks=1/-1 produce is answered only after an fsync covering its
batches (shared with concurrent producers: group commit). A large compressed batch is
decompressed and checked in the store's worker threads (Semantics.append_async), so one
client's big batch does not stop the others; the store writes each partition's appends in
the order they were called, and a request calls them before it first waits, partition by
partition, so pipelined requests on one connection are appended in the order they arrived.

Topic configs applied on append (adapter/topic_configs.py): ``max.message.bytes``,
``message.timestamp.type``, ``compression.type`` with its levels (a batch with another codec
is re-encoded, as Kafka does; ``producer`` keeps every batch as sent, without a copy) and,
for CreateTime, ``message.timestamp.before/after.max.ms``: a record timestamp outside
[now - before, now + after] on the broker's clock refuses the batch with INVALID_TIMESTAMP
and one record error per such record, as Kafka's LogValidator does.

A subscription view is read-only: every partition of a produce to a view is refused with
INVALID_TOPIC_EXCEPTION (Kafka's answer to an append to an internal topic) and the message
"'V' is a view (read-only) over topic 'T'; produce to 'T'" (T named only to a caller who may
describe it), whatever the partition index.
Clients treat the code as fatal for those records (no retries). acks=0 follows the rule
above: the connection is closed.

Transactions: a control batch from a client is INVALID_RECORD; a transactional batch is
appended only for the producer id of the request's transactional id
(INVALID_PRODUCER_ID_MAPPING), the current epoch of that producer (INVALID_PRODUCER_EPOCH),
to a partition of its Ongoing transaction (INVALID_TXN_STATE), as Kafka 3.6+ verifies.

Client quotas (adapter.client_quotas): the request's bytes count against the producer's
``producer_byte_rate`` and its time against ``request_percentage`` (not for acks=0, as in
Kafka); the response carries the larger throttle time and the connection is muted for it.

Authorization (Kafka's, including the CVE-2018-17196 fix): a request carrying a
transactional batch needs a transactional id and WRITE on it, else every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE (TOPIC_AUTHORIZATION_FAILED).
Idempotent batches need only WRITE on the topic (KIP-679); their producer ids come from
InitProducerId, which checks IDEMPOTENT_WRITE.
"""

from __future__ import annotations

import datetime
import struct

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.semantics import SystemTopicError, ViewReadOnlyError
from rmqkafka.storage.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    KeylessRecordError,
    StorageFailedError,
)
from rmqkafka.storage.record_batch import CONTROL_BIT, HEADER_SIZE as _HEADER_SIZE, TRANSACTIONAL_BIT
from rmqkafka.storage.recompress import GZIP, LZ4, NONE, SNAPPY, ZSTD, Compression

from ..client_quotas import CHARGE
from ..codec import Encoded, Request, encode_produce_response
from ..context import BrokerContext
from ..errors import CloseConnection, error_code_for
from ..security.acls import AclOperation, ResourceType
from ..topic_compaction import is_compacted
from ..topic_configs import LONG_MAX, effective

API_KEY = 0
_CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
_LEVELS = {GZIP: "compression.gzip.level", LZ4: "compression.lz4.level", ZSTD: "compression.zstd.level"}
_LENGTH = struct.Struct(">i")
_PID_EPOCH = struct.Struct(">qh")
_BEFORE, _AFTER = "message.timestamp.before.max.ms", "message.timestamp.after.max.ms"


def append_options(ctx: BrokerContext, configs: dict[str, str], now_ms: int) -> dict:
    """The store.append keyword arguments that carry a topic's configs (Kafka's LogConfig)."""

    def get(name: str) -> str:
        return effective(name, configs, ctx.config, ctx.storage_config)

    options: dict = {"max_batch_bytes": int(get("max.message.bytes"))}
    if get("message.timestamp.type") == "LogAppendTime":
        options["log_append_time"] = True
    else:
        before, after = int(get(_BEFORE)), int(get(_AFTER))
        difference = configs.get("message.timestamp.difference.max.ms")
        if difference is not None:
            # Kafka 3.x's deprecated bound stands in for a bound the topic leaves unset
            if _BEFORE not in configs or before == LONG_MAX:
                before = int(difference)
            if _AFTER not in configs or after == LONG_MAX:
                after = int(difference)
        if before < LONG_MAX or after < LONG_MAX:
            options["timestamp_range"] = (now_ms - before, now_ms + after)
    if is_compacted(configs, ctx.config, ctx.storage_config):
        options["require_keys"] = True  # Kafka's LogValidator: a compacted topic needs keys
    codec = _CODECS.get(get("compression.type"))  # None for "producer"
    if codec is not None:
        level = int(get(_LEVELS[codec])) if codec in _LEVELS else None
        options["compression"] = Compression(codec, level)
    return options


def _as_datetime(ms: int | None) -> datetime.datetime | None:
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _batch_headers(records):
    """(attributes, producer id, producer epoch) of each v2 batch of a partition's record
    set, from the headers only; stops at anything malformed (the store's validation refuses
    it)."""
    view = memoryview(records)
    pos = 0
    while pos + _HEADER_SIZE <= len(view):
        (length,) = _LENGTH.unpack_from(view, pos + 8)
        if length < _HEADER_SIZE - 12 or view[pos + 16] != 2:
            return
        yield (view[pos + 22], *_PID_EPOCH.unpack_from(view, pos + 43))
        pos += 12 + length


def _request_refusal(ctx: BrokerContext, body) -> ErrorCode | None:
    """The error for every partition when the request carries transactional batches its
    client may not write (Kafka checks this before anything else)."""
    transactional = any(
        attrs & TRANSACTIONAL_BIT
        for topic in body.topic_data for data in topic.partition_data if data.records is not None
        for attrs, _, _ in _batch_headers(data.records)
    )
    if not transactional:
        return None
    txn_id = body.transactional_id
    if txn_id is None or not ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return ErrorCode.transactional_id_authorization_failed
    return None


def _transaction_check(ctx: BrokerContext, topic: str, partition: int, records,
                       transactional_id: str | None) -> tuple[ErrorCode, str] | None:
    """(error, message) refusing a partition's record set on transactional grounds: a
    control batch (only the broker writes markers: INVALID_RECORD, as Kafka's LogValidator
    answers), or a transactional batch the coordinator does not expect here (see
    TransactionCoordinator.verify_produce)."""
    checked = None
    for attrs, producer_id, epoch in _batch_headers(records):
        if attrs & CONTROL_BIT:
            return ErrorCode.invalid_record, "Clients are not allowed to write control records"
        if attrs & TRANSACTIONAL_BIT and checked != (producer_id, epoch):
            code = ctx.transactions.coordinator.verify_produce(producer_id, epoch, (topic, partition),
                                                               transactional_id)
            if code is not ErrorCode.none:
                return code, (f"producer {producer_id} epoch {epoch}: transactional produce to "
                              f"{topic}-{partition} refused ({code.name})")
            checked = (producer_id, epoch)
    return None


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    store = ctx.store
    durable_at = 0
    responses = []
    now_ms = ctx.clock.now_ms()
    request_refusal = _request_refusal(ctx, body)
    for topic in body.topic_data:
        refused: Exception | ErrorCode | None = request_refusal
        if refused is None and not ctx.allowed(AclOperation.WRITE, ResourceType.TOPIC, topic.name):
            refused = ErrorCode.topic_authorization_failed
        meta = None
        if refused is None:
            try:
                meta = ctx.semantics.topic_for_append(topic.name)
            except ViewReadOnlyError as exc:
                view = ctx.semantics.views.get(topic.name)
                hidden = view is not None and not ctx.may_see_source(view)
                refused = ViewReadOnlyError(f"{topic.name!r} is a view (read-only); produce to its source topic") \
                    if hidden else exc
            except SystemTopicError as exc:
                refused = exc
        options = None if meta is None else append_options(ctx, meta.configs, now_ms)
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
            if refused is not None or meta is None or not 0 <= data.index < meta.partitions:
                if isinstance(refused, ErrorCode):
                    result["error_code"] = refused
                elif refused is not None:
                    result["error_code"] = error_code_for(refused)
                    result["error_message"] = str(refused)
                else:
                    result["error_code"] = ErrorCode.unknown_topic_or_partition
                partitions.append(result)
                continue
            refusal = None if data.records is None else _transaction_check(
                ctx, topic.name, data.index, data.records, body.transactional_id)
            if refusal is not None:
                result["error_code"], result["error_message"] = refusal
                partitions.append(result)
                continue
            try:
                if data.records is None:
                    raise InvalidRecordError("a produce request partition carries no records")
                appended = await ctx.semantics.append_async(meta, data.index, data.records, **options)
            except Exception as exc:
                result["error_code"] = error_code_for(exc)
                result["error_message"] = str(exc) or None
                if isinstance(exc, (InvalidTimestampError, KeylessRecordError)):
                    result["record_errors"] = [
                        dict(batch_index=i, batch_index_error_message=why) for i, why in exc.record_errors
                    ]
            else:
                durable_at = max(durable_at, appended.end_position)
                result["base_offset"] = appended.base_offset
                result["log_append_time"] = _as_datetime(appended.log_append_time_ms)
                result["log_start_offset"] = store.partition(topic.name, data.index).log_start_offset
            partitions.append(result)
        responses.append(dict(name=topic.name, partition_responses=partitions))
    charge = CHARGE.get()
    throttle_ms = 0 if charge is None else ctx.client_quotas.charge_produce(charge, body.acks)
    if body.acks == 0:
        failed = [p for t in responses for p in t["partition_responses"] if p["error_code"]]
        if failed:
            # No response may be sent, so closing is how the producer learns (as in Kafka).
            raise CloseConnection(f"acks=0 produce failed: {failed[0]['error_code'].name}")
        return None
    if ctx.storage_config.flush == "sync" and durable_at:
        try:
            await store.wait_durable(durable_at)
        except StorageFailedError as exc:
            _none_acknowledged(responses, exc)
    return Encoded(encode_produce_response(request.api_version, responses, throttle_ms))


def _none_acknowledged(responses: list[dict], failure: StorageFailedError) -> None:
    """The fsync these appends waited for failed: no partition of the request is
    acknowledged (the failure's KAFKA_STORAGE_ERROR replaces the offsets)."""
    for topic in responses:
        for result in topic["partition_responses"]:
            if result["error_code"] is ErrorCode.none:
                result.update(error_code=error_code_for(failure), error_message=str(failure),
                              base_offset=-1, log_append_time=None, log_start_offset=-1)

