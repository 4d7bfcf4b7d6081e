"""The console's partition sizes (adapter.console_sizes): what sizing costs the event loop is
bounded whatever the number of partitions and of pages polling. Before, /api/topics sized
every partition on every poll (1-4 ms each: seconds of a stalled loop every 3 s per open
page once a cluster had a few thousand partitions).

The injected clock stands in for time: the fake size function advances it by what a real
one costs."""

from __future__ import annotations

import types

from rmqkafka.adapter.console_sizes import BUDGET_S, MIN_INTERVAL_S, PartitionSizes
from rmqkafka.storage.clock import ManualClock

COST_MS = 4  # one partition's size, as measured on a loaded machine
PARTITIONS = 1000


def entries(end: int = 100, count: int = PARTITIONS, logs: dict | None = None) -> list:
    logs = logs if logs is not None else {}
    out = []
    for p in range(count):
        log = logs.setdefault(p, types.SimpleNamespace(cleaned_end=0, bytes_per_offset=10))
        out.append(types.SimpleNamespace(topic="t", partition=p, start=0, end=end, log=log))
    return out


def sizer(clock: ManualClock, calls: list[int]) -> PartitionSizes:
    """PartitionSizes whose size function costs COST_MS of the clock."""

    def size_of(entry) -> int:
        clock.advance(COST_MS)
        calls.append(entry.partition)
        return (entry.end - entry.start) * entry.log.bytes_per_offset

    sizes = PartitionSizes()
    original = sizes.sizes
    sizes.sizes = lambda listed: original(listed, clock=clock, size_of=size_of)
    return sizes


def test_one_document_sizes_only_what_its_budget_allows_and_the_rest_waits() -> None:
    clock, calls = ManualClock(), []
    sizes = sizer(clock, calls)
    listed = entries()
    first = sizes.sizes(listed)
    assert 0 < len(calls) <= BUDGET_S * 1000 / COST_MS + 1  # over the budget by one call at most
    assert sum(1 for s in first if s is not None) == len(calls) and sizes.stale == PARTITIONS - len(calls)
    # a page polling again at once computes nothing: the loop's share is bounded by pages too
    clock.advance(int(MIN_INTERVAL_S * 1000) - 1 - COST_MS * len(calls))
    before = len(calls)
    assert sizes.sizes(listed) == first and len(calls) == before
    # polls later go on with the partitions never sized, until all are
    for _ in range(PARTITIONS):
        clock.advance(int(MIN_INTERVAL_S * 1000))
        if None not in sizes.sizes(listed):
            break
    assert sorted(calls) == list(range(PARTITIONS))  # each partition sized once
    assert sizes.sizes(listed) == [1000] * PARTITIONS and sizes.stale == 0


def test_a_partition_is_sized_again_only_when_it_changed_and_keeps_its_last_size_meanwhile() -> None:
    clock, calls = ManualClock(), []
    sizes = sizer(clock, calls)
    logs: dict = {}
    listed = entries(count=3, logs=logs)
    assert sizes.sizes(listed) == [1000, 1000, 1000]
    clock.advance(int(MIN_INTERVAL_S * 1000))
    assert sizes.sizes(listed) == [1000, 1000, 1000] and len(calls) == 3  # nothing changed
    grown = entries(end=200, count=3, logs=logs)
    clock.advance(int(MIN_INTERVAL_S * 1000))
    assert sizes.sizes(grown) == [2000, 2000, 2000] and len(calls) == 6
    logs[1].cleaned_end = 50  # the cleaner moved: the compaction store holds other bytes
    clock.advance(int(MIN_INTERVAL_S * 1000))
    sizes.sizes(grown)
    assert calls[6:] == [1]
    # within the interval a changed partition shows its last size, counted as stale
    assert sizes.sizes(entries(end=300, count=3, logs=logs)) == [2000, 2000, 2000] and sizes.stale == 3


def test_memory_is_one_entry_per_partition_listed_last() -> None:
    clock, calls = ManualClock(), []
    sizes = sizer(clock, calls)
    for round_ in range(5):  # topics created and deleted: each listing names other partitions
        listed = [types.SimpleNamespace(topic=f"t{round_}", partition=p, start=0, end=1,
                                        log=types.SimpleNamespace(cleaned_end=0, bytes_per_offset=1))
                  for p in range(10)]
        clock.advance(int(MIN_INTERVAL_S * 1000))
        sizes.sizes(listed)
        assert len(sizes) <= 10
    never_used = types.SimpleNamespace(topic="empty", partition=0, start=0, end=0, log=None)
    assert sizes.sizes([never_used]) == [0] and len(sizes) == 0  # nothing to size, nothing kept
