"""The executor's job: the records ``[start, end)`` of one topic-partition as Arrow batches.

One confluent-kafka consumer per Spark task: ``assign`` at ``start`` (no group join, no
commits), ``consume`` up to 10,000 messages at a time, and turn each call's messages into
one ``pyarrow.RecordBatch`` with column-wise ``map`` calls rather than a per-record Python
loop (the loop body is most of an executor's CPU time).

Where a read ends: at the first record at or above ``end``, after the record ``end - 1``,
or at the end-of-log event when the log ends at or after ``end``. Offsets inside the range
that hold no record (compaction, transaction markers, a filtered view) are gaps, not data
loss. Fetches return whole batches, so records below ``start`` are dropped.

Data loss (``failOnDataLoss``): ``start`` below the log start (OFFSET_OUT_OF_RANGE), a log
that now ends before ``end``, or a partition that no longer exists. With
``failOnDataLoss=true`` it raises :class:`DataLossError`; otherwise it logs a warning and
reads what is left of the range.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Iterator
from itertools import repeat
from operator import is_not
from typing import TYPE_CHECKING, Any

from .client import DATA_LOSS_HINT, base_config, make_client, probe, with_passthrough
from .errors import BrokerUnreachableError, DataLossError, KafkaClientError
from .offsets import OffsetRange
from .options import ClientOptions

if TYPE_CHECKING:
    import pyarrow

log = logging.getLogger("spark_connector")

CONSUME_BATCH = 10_000  # messages per consume() call = rows per Arrow batch at most


def consumer_config(
    client: ClientOptions, group_id: str, prefetch: int, isolation: str
) -> dict[str, Any]:
    config = base_config(client)
    config.update(
        {
            "group.id": group_id,  # a label only: the consumer assigns, never joins or commits
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,  # the end-of-log event bounds a read at the log end
            "auto.offset.reset": "error",  # an out-of-range offset is reported, not skipped
            "isolation.level": isolation,
            # Prefetch the range (bounded by queued.max.messages.kbytes, 64 MiB): the default
            # of 100k messages stalls the Python side between fetches.
            "queued.min.messages": max(1000, min(prefetch, 1_000_000)),
        }
    )
    return with_passthrough(config, client)


def read_range(
    client: ClientOptions,
    rng: OffsetRange,
    schema: pyarrow.Schema,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    group_id: str,
    poll_timeout_ms: int,
    isolation: str = "read_uncommitted",
    read_topic: str | None = None,
) -> Iterator[pyarrow.RecordBatch]:
    """Yield the records with offsets in ``[rng.start, rng.end)`` (see the module doc),
    fetched from ``read_topic`` (a view of ``rng.topic``: same offsets) when given; rows
    carry ``rng.topic``."""
    from confluent_kafka import Consumer, Message, TopicPartition

    if rng.size <= 0:
        return
    probe(client)
    client_errors: list[str] = []
    config = consumer_config(client, group_id, rng.size, isolation)
    config["error_cb"] = lambda err: client_errors.append(err.str())
    consumer = make_client(Consumer, config)
    topic = read_topic or rng.topic
    where = f"{topic}-{rng.partition}"
    position = rng.start  # the next offset still needed
    get_error, get_offset = Message.error, Message.offset
    try:
        consumer.assign([TopicPartition(topic, rng.partition, position)])
        last_progress = time.monotonic()
        while position < rng.end:
            messages = consumer.consume(min(CONSUME_BATCH, rng.end - position), 1.0)
            if not messages:
                if (time.monotonic() - last_progress) * 1000 > poll_timeout_ms:
                    raise BrokerUnreachableError(
                        f"no records for offset {position} of {where} within "
                        f"kafkaConsumer.pollTimeoutMs={poll_timeout_ms}"
                        + (f" (last client error: {client_errors[-1]})" if client_errors else "")
                    )
                continue
            last_progress = time.monotonic()
            errors = list(map(get_error, messages))
            flags = list(map(is_not, errors, repeat(None)))  # C-level: KafkaError == None raises
            failed = flags.index(True) if True in flags else None
            data = messages if failed is None else messages[:failed]
            offsets: list[int] = list(map(get_offset, data))  # type: ignore[arg-type]
            low = bisect_left(offsets, position)  # the head of a batch that starts before
            high = bisect_left(offsets, rng.end)  # records at or beyond the end
            past_end = high < len(offsets)
            if low or past_end:
                data, offsets = data[low:high], offsets[low:high]
            if offsets:
                position = offsets[-1] + 1
                yield _batch(schema, rng, data, offsets, include_headers)
            if past_end or position >= rng.end:
                break  # a record at or past the end: the range is complete
            if failed is not None:
                error, message = errors[failed], messages[failed]
                position, done = _on_error(
                    consumer, client, rng, topic, position, error, message, fail_on_data_loss
                )
                if done:
                    break
    finally:
        consumer.close()


def _on_error(
    consumer: Any, client: ClientOptions, rng: OffsetRange, topic: str, position: int,
    error: Any, message: Any, fail: bool,
) -> tuple[int, bool]:
    """Handle an error event on ``topic`` (``rng.topic`` or its view): ``(next position,
    whether the read is over)``."""
    from confluent_kafka import KafkaError, TopicPartition

    where = f"{topic}-{rng.partition}"
    code = error.code()
    if code == KafkaError._PARTITION_EOF:
        if message.offset() >= rng.end:
            return position, True  # the rest of the range is a gap at the log end
        _data_loss(
            fail,
            f"{where} ends at offset {message.offset()}, before the end {rng.end} of the "
            f"range this task must read [{rng.start}, {rng.end}): offsets were truncated.",
        )
        return position, True
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, rng.partition), timeout=client.request_timeout_ms / 1000
        )
        _data_loss(
            fail,
            f"offset {position} of {where} is out of range: the partition now holds "
            f"[{low}, {high}); this task must read [{rng.start}, {rng.end}).",
        )
        if position < low < rng.end and high > low:
            consumer.assign([TopicPartition(topic, rng.partition, low)])
            return low, False
        return position, True
    if code in (
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC
    ):
        _data_loss(
            fail,
            f"{where} no longer exists (the topic was deleted or shrunk) while this task had "
            f"to read [{rng.start}, {rng.end}).",
        )
        return position, True
    raise KafkaClientError(f"reading {where} at offset {position}: {error.str()}")


def _data_loss(fail: bool, what: str) -> None:
    if fail:
        raise DataLossError(f"{what} {DATA_LOSS_HINT}")
    log.warning("failOnDataLoss=false, skipping: %s", what)


def _batch(
    schema: pyarrow.Schema,
    rng: OffsetRange,
    data: list[Any],
    offsets: list[int],
    include_headers: bool,
) -> pyarrow.RecordBatch:
    import pyarrow as pa
    import pyarrow.compute as pc
    from confluent_kafka import Message

    n = len(offsets)
    stamps = list(map(Message.timestamp, data))  # (type, ms) pairs
    # librdkafka's timestamp types are 0 none, 1 create, 2 log-append; Kafka's ids are 1 less
    pairs = pa.array(stamps, pa.struct([("t", pa.int32()), ("ms", pa.int64())]))
    columns = [
        pa.array(list(map(Message.key, data)), pa.binary()),
        pa.array(list(map(Message.value, data)), pa.binary()),
        pa.array([rng.topic] * n, pa.string()),
        pa.array([rng.partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pairs.field("ms").cast(pa.timestamp("ms", tz="UTC")).cast(schema.field("timestamp").type),
        pc.subtract(pairs.field("t"), pa.scalar(1, pa.int32())),
    ]
    if include_headers:
        columns.append(pa.array(list(map(Message.headers, data)), schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
