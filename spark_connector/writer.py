"""Writes: ``df.write.format("rmqkafka").mode("append")`` and ``writeStream``, like the
built-in Kafka sink.

Columns (by name; others are ignored, as by Spark's sink):

=============  ==========================================  ==========================
column         type                                        required
=============  ==========================================  ==========================
value          string or binary (string is written UTF-8)  yes
key            string or binary                            no (null key)
headers        array<struct<key:string,value:binary>>      no
topic          string                                      unless option ``topic``
partition      int                                         no (the partitioner picks)
=============  ==========================================  ==========================

As with Spark's sink, the ``topic`` option, when given, overrides the topic column.
Delivery is at least once (``acks=all``, idempotent producer): a task that fails and is
retried writes its rows again, and ``abort`` cannot take written records back.

Each task returns a :class:`KafkaCommitMessage` with its row count per topic; ``commit``
(which Spark runs in a Python worker of the driver) logs the totals.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from .client import Writer
from .errors import KafkaOptionError
from .options import WriteOptions

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql.types import StructType

log = logging.getLogger("spark_connector")


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: total rows and rows per topic."""

    count: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)


def validate_columns(schema: StructType, opts: WriteOptions) -> None:
    """Spark's ``KafkaWriter.validateQuery``: raise a clear error for a bad DataFrame."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructType,
    )

    fields = {f.name: f.dataType for f in schema.fields}
    text_or_bytes = (StringType, BinaryType)
    if "value" not in fields:
        raise KafkaOptionError(
            "required column 'value' not found: a Kafka write needs a string or binary "
            f"'value' column (the DataFrame has {', '.join(fields) or 'no columns'})"
        )
    if not isinstance(fields["value"], text_or_bytes):
        raise KafkaOptionError(
            f"column 'value' must be string or binary, not {fields['value'].simpleString()}"
        )
    if "key" in fields and not isinstance(fields["key"], text_or_bytes):
        raise KafkaOptionError(
            f"column 'key' must be string or binary, not {fields['key'].simpleString()}"
        )
    if opts.topic is None and "topic" not in fields:
        raise KafkaOptionError(
            "no topic to write to: set option 'topic' or add a string column 'topic'"
        )
    if opts.topic is None and not isinstance(fields["topic"], StringType):
        raise KafkaOptionError(
            f"column 'topic' must be string, not {fields['topic'].simpleString()}"
        )
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise KafkaOptionError(
            f"column 'partition' must be int, not {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
            and isinstance(h.elementType.fields[0].dataType, StringType)
            and isinstance(h.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise KafkaOptionError(
                "column 'headers' must be array<struct<key:string,value:binary>>, not "
                f"{h.simpleString()}"
            )


def write_batches(opts: WriteOptions, batches: Iterator[pyarrow.RecordBatch]) -> KafkaCommitMessage:
    """The executor side: produce every row of ``batches``; raise if any delivery failed."""
    writer = Writer(opts.client)
    for batch in batches:
        names = batch.schema.names
        n = batch.num_rows
        values = _bytes_column(batch, "value")
        keys = _bytes_column(batch, "key") if "key" in names else [None] * n
        if opts.topic is not None:
            topics: list[Any] = [opts.topic] * n
        else:
            topics = batch.column("topic").to_pylist()
        partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
        headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
        for topic, key, value, hdrs, partition in zip(topics, keys, values, headers, partitions):
            if topic is None:
                raise KafkaOptionError(
                    "a row has a null 'topic'; set option 'topic' or fill the column"
                )
            writer.send(
                topic,
                key,
                value,
                [(h["key"], h["value"]) for h in hdrs] if hdrs else None,
                partition,
            )
    writer.finish()
    return KafkaCommitMessage(writer.count, dict(writer.per_topic))


def _bytes_column(batch: pyarrow.RecordBatch, name: str) -> list[bytes | None]:
    import pyarrow as pa

    column = batch.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())  # UTF-8 bytes, as Spark's sink writes strings
    return column.to_pylist()


def _totals(messages: list[Any]) -> KafkaCommitMessage:
    total = KafkaCommitMessage()
    for m in messages:
        if isinstance(m, KafkaCommitMessage):
            total.count += m.count
            for topic, count in m.per_topic.items():
                total.per_topic[topic] = total.per_topic.get(topic, 0) + count
    return total


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: one producer per task."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        validate_columns(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> KafkaCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = _totals(messages)
        log.info("rmqkafka wrote %d records %s", total.count, total.per_topic)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total = _totals(messages)
        log.warning(
            "rmqkafka write aborted; %d records already written by finished tasks stay in "
            "Kafka (the sink is at-least-once)", total.count,
        )


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream``: one producer per task and micro-batch."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        validate_columns(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> KafkaCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = _totals(messages)
        log.info("rmqkafka micro-batch %d wrote %d records %s", batchId, total.count,
                 total.per_topic)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "rmqkafka micro-batch %d aborted; records already written stay in Kafka "
            "(at-least-once)", batchId,
        )
