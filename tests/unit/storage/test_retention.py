from __future__ import annotations

import os

import pytest

from batches import make_batch, values_of
from rmqkafka.storage.errors import OffsetOutOfRangeError
from storage_helpers import append, read_all

HOUR = 3_600_000


def populate(store, batches: int = 30) -> dict[int, list[tuple[int, int]]]:
    """Appends to two partitions of "t", uneven; returns (base offset, position) per batch."""
    store.create_topic("t", 2, {})
    layout: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
    for i in range(batches):
        p = 0 if i % 3 else 1
        r = append(store, "t", p, make_batch([b"%03d" % i] * 2, timestamps=[1000 + i] * 2))
        position = store.partition("t", p).consume_queue.entry(r.base_offset)[0]
        layout[p].append((r.base_offset, position))
    return layout


def expected_log_start(store, layout, p: int) -> int:
    start = store.commitlog.start_position
    surviving = [base for base, position in layout[p] if position >= start]
    return surviving[0] if surviving else store.partition("t", p).next_offset


def check_partitions(store, layout) -> None:
    for p in (0, 1):
        plog = store.partition("t", p)
        log_start = expected_log_start(store, layout, p)
        assert plog.log_start_offset == log_start
        if log_start > 0:
            with pytest.raises(OffsetOutOfRangeError) as e:
                plog.read(log_start - 1, 1 << 20, True)
            assert e.value.log_start_offset == log_start
        got = plog.read(log_start, 1 << 20, True)
        assert got.log_start_offset == log_start
        assert [o for o, _ in values_of(got.batches)] == list(range(log_start, plog.next_offset))


def set_mtimes(store, clock, ages_ms: list[int]) -> None:
    for segment, age in zip(store.commitlog.segments, ages_ms):
        t = (clock.now_ms() - age) / 1000
        os.utime(segment.path, (t, t))


def test_retention_by_size(stores):
    store = stores.open(segment_bytes=600, retention_ms=None, consume_queue_entries_per_file=4)
    layout = populate(store)
    segments = store.commitlog.segments
    assert len(segments) >= 6
    total = store.commitlog.size_bytes()
    limit = total - segments[0].size - segments[1].size - 1  # room for all but two and a bit
    stores.config_kw["retention_bytes"] = limit
    stores.close(store)
    store = stores.open()
    assert store.apply_retention() == 2
    assert store.commitlog.start_position == segments[2].base_position
    assert not segments[0].path.exists() and not segments[1].path.exists()
    assert store.commitlog.size_bytes() >= limit
    assert store.apply_retention() == 0
    check_partitions(store, layout)


def test_retention_deletes_whole_segments_only(stores):
    store = stores.open(segment_bytes=600, retention_ms=None)
    layout = populate(store)
    before = [(s.base_position, s.size) for s in store.commitlog.segments]
    size = store.commitlog.size_bytes()
    stores.close(store)
    # Kafka's rule: a segment goes only if what remains still holds retention.bytes.
    store = stores.open(retention_bytes=size - before[0][1] + 1)
    assert store.apply_retention() == 0
    stores.close(store)
    store = stores.open(retention_bytes=size - before[0][1])
    assert store.apply_retention() == 1
    after = [(s.base_position, s.size) for s in store.commitlog.segments]
    assert after == before[1:]  # the rest untouched, byte for byte
    check_partitions(store, layout)


def test_retention_never_deletes_the_active_segment(stores):
    store = stores.open(segment_bytes=600, retention_ms=None, retention_bytes=0)
    layout = populate(store)
    active = store.commitlog.segments[-1]
    deleted = store.apply_retention()
    assert deleted > 0
    assert store.commitlog.segments == [active]
    assert store.apply_retention() == 0
    check_partitions(store, layout)


def test_partition_whose_data_is_all_gone(stores, clock):
    store = stores.open(segment_bytes=600, retention_ms=None, retention_bytes=0)
    store.create_topic("gone", 1, {})
    append(store, "gone", 0, make_batch(3, timestamps=[10, 20, 30]))
    append(store, "gone", 0, make_batch(2, timestamps=[40, 50]))
    populate(store)  # pushes "gone" out of the active segment
    store.apply_retention()
    plog = store.partition("gone", 0)
    assert plog.log_start_offset == plog.next_offset == 5
    assert plog.read(5, 1 << 20, True).batches == []
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(4, 1 << 20, True)
    assert plog.offset_for_timestamp(0) is None
    assert plog.offset_for_timestamp(45) is None
    assert plog.max_timestamp() is None
    assert plog.bytes_available(5, 100) == 0
    assert append(store, "gone", 0, make_batch(1, timestamps=[60])).base_offset == 5
    assert plog.offset_for_timestamp(0) == (5, 60)


def test_offset_for_timestamp_skips_deleted_batches(stores):
    store = stores.open(segment_bytes=600, retention_ms=None)
    layout = populate(store)
    size = store.commitlog.size_bytes()
    stores.close(store)
    store = stores.open(retention_bytes=size // 2)
    assert store.apply_retention() > 0
    for p in (0, 1):
        plog = store.partition("t", p)
        found = plog.offset_for_timestamp(0)
        assert found is not None and found[0] == plog.log_start_offset
    check_partitions(store, layout)


def test_retention_by_time(stores, clock):
    store = stores.open(segment_bytes=600, retention_ms=HOUR)
    layout = populate(store)
    n = len(store.commitlog.segments)
    ages = [3 * HOUR, 2 * HOUR, 2 * HOUR] + [0] * (n - 3)
    set_mtimes(store, clock, ages)
    assert store.apply_retention() == 3
    check_partitions(store, layout)
    assert store.apply_retention() == 0
    clock.advance(HOUR // 2)
    assert store.apply_retention() == 0
    clock.advance(HOUR)  # now every remaining segment is 1.5 h old
    assert store.apply_retention() == n - 4  # all but the active one
    assert len(store.commitlog.segments) == 1
    check_partitions(store, layout)


def test_time_retention_stops_at_the_first_young_segment(stores, clock):
    store = stores.open(segment_bytes=600, retention_ms=HOUR)
    populate(store)
    n = len(store.commitlog.segments)
    set_mtimes(store, clock, [2 * HOUR, 0, 2 * HOUR] + [0] * (n - 3))
    assert store.apply_retention() == 1  # oldest first; whole segments in order


def test_consume_queue_files_follow(stores):
    store = stores.open(segment_bytes=600, retention_ms=None, consume_queue_entries_per_file=4)
    layout = populate(store)
    plog = store.partition("t", 0)
    files_before = sorted(plog.directory.glob("*.cq"))
    stores.close(store)
    store = stores.open(retention_bytes=0)
    store.apply_retention()
    plog = store.partition("t", 0)
    files_after = sorted(plog.directory.glob("*.cq"))
    assert len(files_after) < len(files_before)
    first = int(files_after[0].name[:20])
    assert first <= plog.log_start_offset < first + 4 or plog.log_start_offset == plog.next_offset
    check_partitions(store, layout)


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_retention_survives_a_reopen(stores, how):
    store = stores.open(segment_bytes=600, retention_ms=None, consume_queue_entries_per_file=4)
    layout = populate(store)
    stores.close(store)
    store = stores.open(retention_bytes=1500)
    assert store.apply_retention() > 0
    starts = {p: store.partition("t", p).log_start_offset for p in (0, 1)}
    start_position = store.commitlog.start_position
    assert min(starts.values()) > 0
    (stores.close if how == "clean" else stores.crash)(store)
    store = stores.open(retention_bytes=None)
    assert store.commitlog.start_position == start_position
    assert {p: store.partition("t", p).log_start_offset for p in (0, 1)} == starts
    check_partitions(store, layout)
    for p in (0, 1):
        next_offset = store.partition("t", p).next_offset
        assert append(store, "t", p, make_batch(1)).base_offset == next_offset


def test_retention_then_crash_with_a_checkpoint_older_than_the_deletion(stores):
    store = stores.open(segment_bytes=600, retention_ms=None)
    layout = populate(store, 15)
    # The checkpoint (written at open) predates these appends and the deletion.
    for i in range(15):
        append(store, "t", i % 2, make_batch([b"late%d" % i]))
    stores.crash(store)
    store = stores.open()
    stores.crash(store)
    store = stores.open(retention_bytes=0)
    store.apply_retention()
    stores.crash(store)
    store = stores.open(retention_bytes=None)
    for p in (0, 1):
        plog = store.partition("t", p)
        assert plog.log_start_offset <= plog.next_offset
        got = read_all(store, "t", p)
        offsets = [o for o, _ in values_of(got)]
        assert offsets == list(range(plog.log_start_offset, plog.next_offset))
    # populate() writes two records per batch, then 8 and 7 single-record batches followed
    assert store.partition("t", 0).next_offset == 2 * len(layout[0]) + 8
    assert store.partition("t", 1).next_offset == 2 * len(layout[1]) + 7
