"""Batch reads: ``spark.read.format("rmqkafka")`` — ``partitions()`` on the driver,
``read(partition)`` on the executors.

``partitions()`` resolves ``startingOffsets`` / ``endingOffsets`` (or the timestamp forms)
to concrete offsets once, with ListOffsets, so every task of the query reads a fixed range
``[start, end)``; ``minPartitions`` / ``maxRecordsPerPartition`` split large ranges.
``read()`` yields ``pyarrow.RecordBatch`` es (see :func:`rmqkafka.spark_connector.client.read_range`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .client import Metadata, random_group_id
from .errors import DataLossError
from .offsets import OffsetMap, OffsetRange, split_ranges
from .options import ReadOptions
from .planning import resolve, topic_partitions
from .range_read import read_range
from .views import ensure_views

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

log = logging.getLogger("spark_connector")


class KafkaInputPartition(InputPartition):
    """One Spark task: one :class:`OffsetRange` of one topic-partition, fetched from
    ``read_topic``: the topic itself, or the view that filters it (``tags`` / ``filter``)."""

    def __init__(self, rng: OffsetRange, read_topic: str | None = None) -> None:
        super().__init__(rng)
        self.range = rng
        self.read_topic = read_topic or rng.topic

    def __repr__(self) -> str:
        r = self.range
        via = f" via {self.read_topic}" if self.read_topic != r.topic else ""
        return f"KafkaInputPartition({r.topic}-{r.partition} [{r.start}, {r.end}){via})"


def input_partitions(opts: ReadOptions, meta: Metadata, ranges: list[OffsetRange]) -> list[InputPartition]:
    """One task per range; with a filter option, each reads the view of its topic (made now
    if it does not exist yet, see views.py)."""
    views: dict[str, str] = {}
    if opts.view is not None and ranges:
        views = ensure_views(meta.admin(), {r.topic for r in ranges}, opts.view,
                             opts.client.request_timeout_ms / 1000)
    return [KafkaInputPartition(r, views.get(r.topic)) for r in ranges]


def isolation(opts: ReadOptions) -> str:
    level = opts.client.kafka.get("isolation.level", "read_uncommitted")
    return "read_committed" if level == "read_committed" else "read_uncommitted"


def plan_ranges(opts: ReadOptions, start: OffsetMap, end: OffsetMap) -> list[OffsetRange]:
    """Offset ranges for the partitions in both maps; an end before its start is data loss."""
    ranges = []
    for tp in sorted(end):
        if tp not in start:
            continue
        if end[tp] < start[tp]:
            what = (
                f"{tp[0]}-{tp[1]}: the end offset {end[tp]} is before the start offset "
                f"{start[tp]} (the partition was recreated or truncated)."
            )
            if opts.fail_on_data_loss:
                from .client import DATA_LOSS_HINT

                raise DataLossError(f"{what} {DATA_LOSS_HINT}")
            log.warning("failOnDataLoss=false, skipping: %s", what)
            continue
        ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
    return split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)


def read_partition(opts: ReadOptions, schema: StructType, partition: Any, group_id: str):
    """The executor side of both readers (a module function: nothing stateful is captured)."""
    from .schema import arrow_schema

    rng = getattr(partition, "range", None)
    if rng is None:  # Spark adds one empty InputPartition when there are none
        return iter(())
    return read_range(
        opts.client,
        rng,
        arrow_schema(schema),
        read_topic=partition.read_topic,
        include_headers=opts.include_headers,
        fail_on_data_loss=opts.fail_on_data_loss,
        group_id=group_id,
        poll_timeout_ms=opts.poll_timeout_ms,
        isolation=isolation(opts),
    )


class KafkaBatchReader(DataSourceReader):
    """The reader of one batch query (pickled to the executors with its options only)."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.group_id = opts.group_id or random_group_id(opts.group_id_prefix)

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        meta = Metadata(opts.client, isolation(opts))
        try:
            tps = topic_partitions(opts, meta)
            start = resolve(
                opts.starting, tps, meta, option="startingOffsets", opts=opts, is_start=True
            )
            assert opts.ending is not None
            end = resolve(opts.ending, tps, meta, option="endingOffsets", opts=opts,
                          is_start=False)
            ranges = plan_ranges(opts, start, end)
            log.info("rmqkafka batch read of %s: %d Spark partitions",
                     opts.describe_subscription(), len(ranges))
            return input_partitions(opts, meta, ranges)
        finally:
            meta.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, self.schema, partition, self.group_id + "-executor")
