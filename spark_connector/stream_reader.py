"""Streaming reads: ``spark.readStream.format("rmqkafka")`` (``DataSourceStreamReader``).

Offsets are Spark's JSON form ``{"topic": {"0": 42}}``, the same as the built-in source's
checkpoints. Per micro-batch Spark calls :meth:`latestOffset` (which re-lists topics, so
``subscribePattern`` picks up topics created later, and applies ``maxOffsetsPerTrigger``
proportionally across partitions as Spark's ``rateLimit`` does), then :meth:`partitions`
on the driver and ``read()`` on the executors. ``Trigger.AvailableNow`` is supported
(:meth:`prepareForTriggerAvailableNow` fixes the target offsets; rate limits still split
the backlog into several micro-batches).

``failOnDataLoss`` on the driver, as Spark's ``KafkaMicroBatchStream.planInputPartitions``:
a partition that appears with an earliest offset other than 0, a partition that vanished,
and an end offset before its start are data loss. Offsets deleted before an executor reads
them are detected there.

Spark creates this reader twice: in a long-lived planner process (initialOffset,
latestOffset, partitions, commit, stop; it keeps its AdminClient between calls) and once
more to pickle ``read`` for the executors, so the constructor does no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .client import DATA_LOSS_HINT, Metadata, random_group_id
from .errors import DataLossError
from .offsets import OffsetMap, offsets_from_json, offsets_to_json, rate_limit
from .options import ReadOptions
from .planning import resolve, topic_partitions
from .reader import input_partitions, isolation, plan_ranges, read_partition

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

log = logging.getLogger("spark_connector")


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader of one query."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.group_id = opts.group_id or random_group_id(opts.group_id_prefix)
        self._meta: Metadata | None = None
        self._target: OffsetMap | None = None  # Trigger.AvailableNow: offsets to stop at
        self._latest: OffsetMap | None = None  # last fetched latest offsets (for reporting)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_meta"] = None
        return state

    @property
    def meta(self) -> Metadata:
        if self._meta is None:
            self._meta = Metadata(self.opts.client, isolation(self.opts))
        return self._meta

    # --- offsets -----------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Where a new query starts: ``startingOffsets`` (default latest) or a timestamp."""
        tps = topic_partitions(self.opts, self.meta)
        start = resolve(
            self.opts.starting, tps, self.meta, option="startingOffsets", opts=self.opts,
            is_start=True,
        )
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._fetch_latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        latest = dict(self._target) if self._target is not None else self._fetch_latest()
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            latest = rate_limit(limit.max_rows, begin, latest, self.meta.earliest(new))
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def _fetch_latest(self) -> OffsetMap:
        tps = topic_partitions(self.opts, self.meta, strict=False)
        self._latest = self.meta.latest(tps)
        return dict(self._latest)

    # --- planning and reading -----------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin = offsets_from_json(start)
        until = offsets_from_json(end)
        new = sorted(tp for tp in until if tp not in begin)
        if new:
            earliest = self.meta.earliest(new)
            for tp in new:
                if earliest[tp] != 0:
                    self._data_loss(
                        f"added partition {tp[0]}-{tp[1]} starts from offset {earliest[tp]} "
                        "instead of 0; its first records were deleted before the query saw "
                        "them."
                    )
                begin[tp] = earliest[tp]
        gone = sorted(tp for tp in begin if tp not in until)
        if gone:
            self._data_loss(
                "partitions "
                + ", ".join(f"{t}-{p}" for t, p in gone)
                + " are gone (topic deleted or shrunk); records after the last processed "
                "offsets were not read."
            )
        return input_partitions(self.opts, self.meta, plan_ranges(self.opts, begin, until))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, self.schema, partition, self.group_id + "-executor")

    def commit(self, end: dict) -> None:
        """Nothing to do: like Spark's source, offsets live in the checkpoint, not in Kafka."""

    def stop(self) -> None:
        if self._meta is not None:
            self._meta.close()
            self._meta = None

    def _data_loss(self, what: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(f"{what} {DATA_LOSS_HINT}")
        log.warning("failOnDataLoss=false, continuing: %s", what)
