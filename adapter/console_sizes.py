"""Partition sizes for the console's topics table, at a bounded cost to the event loop.

A partition's size (DescribeLogDirs' partition_size) reads up to 256 batch headers: 1-4 ms.
Sizing every partition on every poll of every open console page held the loop for seconds
every 3 s once a cluster had a few thousand partitions (the number of partitions is what
Kafka clients create). So:

- a size is computed again only when its partition changed: another log object (deleted and
  made again), or its log start, end or cleaned end moved;
- a document computes sizes for at most ``BUDGET_S`` of the (injected) clock, and one asked
  for within ``MIN_INTERVAL_S`` of the last document that computed computes none, however
  many pages poll: sizing takes at most BUDGET_S / MIN_INTERVAL_S of the loop;
- a partition the budget did not reach shows its last size (None before its first); those
  never sized go first, then the longest waiting. ``stale`` counts them in the last document;
- memory: one entry per partition of the last listing (a deleted topic's go with it); a
  partition never used (no log) is 0 bytes and kept nowhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rmqkafka.storage.clock import Clock

from .broker_state import PartitionOffsets

BUDGET_S = 0.05
MIN_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class _Known:
    log: object  # the PartitionLog sized (identity: a topic made again has another)
    start: int
    end: int
    cleaned_end: int
    size: int
    at: float  # clock.monotonic() when sized


class PartitionSizes:
    def __init__(self) -> None:
        self._known: dict[tuple[str, int], _Known] = {}
        self._last_computed: float | None = None
        self.stale = 0  # partitions of the last document shown with an old size or none

    def __len__(self) -> int:
        return len(self._known)

    def sizes(self, entries: Sequence[PartitionOffsets], *, clock: Clock,
              size_of: Callable[[PartitionOffsets], int]) -> list[int | None]:
        """The size of each entry's partition, in order (see the module's rules)."""
        now = clock.monotonic()
        computing = self._last_computed is None or now - self._last_computed >= MIN_INTERVAL_S
        known, self._known = self._known, {}
        out: list[int | None] = []
        waiting: list[tuple[float, int, PartitionOffsets]] = []  # (sized at, index, entry)
        for index, entry in enumerate(entries):
            if entry.log is None:
                out.append(0)
                continue
            key = (entry.topic, entry.partition)
            old = known.get(key)
            if old is not None and old.log is entry.log and (old.start, old.end, old.cleaned_end) == (
                    entry.start, entry.end, entry.log.cleaned_end):
                self._known[key] = old
                out.append(old.size)
                continue
            if old is not None and old.log is entry.log:
                self._known[key] = old  # kept until sized again
            out.append(old.size if old is not None and old.log is entry.log else None)
            waiting.append((-1.0 if old is None else old.at, index, entry))
        self.stale = len(waiting)
        if computing and waiting:
            self._last_computed = now
            waiting.sort(key=lambda item: item[:2])  # never sized, then the longest waiting
            for _, index, entry in waiting:
                if clock.monotonic() - now >= BUDGET_S:
                    break
                size = size_of(entry)
                self._known[(entry.topic, entry.partition)] = _Known(
                    entry.log, entry.start, entry.end, entry.log.cleaned_end, size, clock.monotonic())
                out[index] = size
                self.stale -= 1
        return out
