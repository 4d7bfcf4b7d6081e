"""Offsets, offset specs and offset ranges: the pure arithmetic of the source (no I/O).

Topic-partitions are ``(topic, partition)`` tuples. An offset map is
``dict[(topic, partition), offset]``; its JSON form is Spark's, as used by the built-in
Kafka source for ``startingOffsets`` / ``endingOffsets`` and in streaming checkpoints:
``{"topic": {"0": 42, "1": 7}}`` with topics sorted and partitions in numeric order, so
that equal offsets always serialise to equal JSON (Spark compares offsets as JSON).

Sentinels in the per-partition JSON form, as in Kafka's ListOffsets and Spark:
``-2`` = earliest, ``-1`` = latest.

:func:`rate_limit` and :func:`split_ranges` reproduce Spark's ``KafkaMicroBatchStream
.rateLimit`` (``maxOffsetsPerTrigger``) and ``KafkaOffsetRangeCalculator.getRanges``
(``minPartitions``; plus ``maxRecordsPerPartition``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    ``kind`` is one of ``earliest``, ``latest`` (the whole log), ``offsets`` (``offsets``
    maps topic-partitions to offsets or the -2/-1 sentinels), ``timestamp`` (``timestamp``
    in ms for every partition) or ``timestamps`` (``offsets`` maps topic-partitions to ms).
    """

    kind: str
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int | None = None

    @property
    def per_partition(self) -> OffsetMap:
        return dict(self.offsets)

    @classmethod
    def of_map(cls, kind: str, mapping: OffsetMap) -> OffsetSpec:
        return cls(kind, tuple(sorted(mapping.items())))


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[start, end)`` of one topic-partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def offsets_to_json(offsets: OffsetMap) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}``, topics sorted, partitions in numeric order."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(value: Any, what: str = "offsets") -> OffsetMap:
    """Parse Spark's ``{"t": {"0": 42}}`` form (a dict or its JSON text) into an offset map.

    ``what`` names the option in error messages. Raises ``ValueError`` on any other shape.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{what} is not valid JSON ({exc}): {value!r}") from None
    if not isinstance(value, dict):
        raise ValueError(
            f'{what} must be a JSON object like {{"topicA": {{"0": 23, "1": -1}}}}, '
            f"got {json.dumps(value)}"
        )
    result: OffsetMap = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict):
            raise ValueError(
                f'{what}: topic {topic!r} must map partition numbers to offsets, like '
                f'{{"{topic}": {{"0": 23}}}}; got {json.dumps(partitions)}'
            )
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise ValueError(
                    f"{what}: partition {partition!r} of topic {topic!r} is not a number"
                ) from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(
                    f"{what}: the value for {topic}-{number} must be an integer, "
                    f"got {json.dumps(offset)}"
                )
            result[(topic, number)] = offset
    return result


def rate_limit(
    limit: int, start: OffsetMap, end: OffsetMap, earliest_of_new: OffsetMap
) -> OffsetMap:
    """Cap ``end`` so that at most about ``limit`` records lie between ``start`` and it.

    Spark's proration: each partition gets ``limit * size / total`` records, rounded down
    except that a share below one is rounded up ("don't completely starve small
    partitions"). Partitions missing from ``start`` begin at ``earliest_of_new``.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, until in end.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and until - begin > 0:
            sizes[tp] = until - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(end)
    capped: OffsetMap = {}
    for tp, until in end.items():
        if tp not in sizes:
            capped[tp] = until
            continue
        begin = start.get(tp, earliest_of_new.get(tp, 0))
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        capped[tp] = min(until, begin + share)
    return capped


def split_ranges(
    ranges: list[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Spark partitions for ``ranges`` (empty ranges dropped).

    Without options: one per topic-partition. With ``minPartitions`` larger than the number
    of non-empty ranges: each range is split into ``max(round(size / total * minPartitions),
    1)`` near-equal parts (the last takes the rounding), as Spark does. With
    ``maxRecordsPerPartition``: every part is then split further so none exceeds it.
    """
    todo = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(todo) < min_partitions:
        total = sum(r.size for r in todo)
        todo = [
            part
            for r in todo
            for part in _divide(r, max(round(r.size / total * min_partitions), 1))
        ]
    if max_records_per_partition is not None:
        todo = [
            part
            for r in todo
            for part in _divide(r, math.ceil(r.size / max_records_per_partition))
        ]
    return todo


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out = []
    remaining = r.size
    begin = r.start
    for index in range(parts):
        this = remaining // (parts - index)
        remaining -= this
        out.append(OffsetRange(r.topic, r.partition, begin, min(begin + this, r.end)))
        begin += this
    return [p for p in out if p.size > 0]
