from __future__ import annotations

from pathlib import Path

from rmqkafka.storage.time_index import ENTRY_SIZE, NO_TIMESTAMP, TimeIndex


def build(path: Path) -> TimeIndex:
    """Batches (max timestamp, base offset), not monotonic in time."""
    index = TimeIndex(path)
    for max_ts, base in [(100, 0), (50, 3), (200, 5), (150, 9), (200, 12), (300, 14), (10, 20)]:
        index.maybe_append(max_ts, base)
    return index


def test_only_running_maximum_is_recorded(tmp_path):
    index = build(tmp_path / "ti")
    assert (tmp_path / "ti").stat().st_size == 3 * ENTRY_SIZE  # (100,0) (200,5) (300,14)
    assert (index.max_timestamp, index.max_timestamp_offset) == (300, 14)
    index.close()


def test_lookup_with_non_monotonic_timestamps(tmp_path):
    index = build(tmp_path / "ti")
    assert index.lookup(-5) == 0
    assert index.lookup(50) == 0  # batch 0 (max 100) is the first that may hold ts >= 50
    assert index.lookup(100) == 0
    assert index.lookup(101) == 5  # batches at 3 (max 50) cannot
    assert index.lookup(150) == 5
    assert index.lookup(200) == 5
    assert index.lookup(201) == 14
    assert index.lookup(300) == 14
    assert index.lookup(301) is None
    index.close()


def test_empty_index(tmp_path):
    index = TimeIndex(tmp_path / "ti")
    assert index.lookup(0) is None
    assert (index.max_timestamp, index.max_timestamp_offset) == (NO_TIMESTAMP, -1)
    index.maybe_append(NO_TIMESTAMP, 0)  # batches without timestamps add nothing
    assert index.lookup(-10) is None
    index.close()


def test_truncate_to(tmp_path):
    index = build(tmp_path / "ti")
    index.truncate_to(14)
    assert (index.max_timestamp, index.max_timestamp_offset) == (200, 5)
    assert index.lookup(201) is None
    index.truncate_to(100)  # nothing at or after 100
    assert index.lookup(150) == 5
    index.maybe_append(180, 15)  # below the running max: not recorded
    index.maybe_append(250, 16)
    assert index.lookup(201) == 16
    index.truncate_to(0)
    assert index.lookup(0) is None
    assert (index.max_timestamp, index.max_timestamp_offset) == (NO_TIMESTAMP, -1)
    assert (tmp_path / "ti").stat().st_size == 0
    index.close()


def test_reopen(tmp_path):
    index = build(tmp_path / "ti")
    index.close()
    index = TimeIndex(tmp_path / "ti")
    assert (index.max_timestamp, index.max_timestamp_offset) == (300, 14)
    assert index.lookup(101) == 5
    index.maybe_append(250, 30)  # still below the recovered maximum
    assert index.lookup(301) is None
    index.close()


def test_torn_trailing_entry_dropped_on_open(tmp_path):
    index = build(tmp_path / "ti")
    index.close()
    with open(tmp_path / "ti", "ab") as f:
        f.write(b"\x7f" * 9)
    index = TimeIndex(tmp_path / "ti")
    assert (tmp_path / "ti").stat().st_size == 3 * ENTRY_SIZE
    assert index.max_timestamp == 300
    index.maybe_append(400, 40)
    assert index.lookup(301) == 40
    index.close()


def test_dirty_fds(tmp_path):
    index = TimeIndex(tmp_path / "ti")
    assert index.take_dirty_fds() == []
    index.maybe_append(5, 0)
    assert len(index.take_dirty_fds()) == 1
    assert index.take_dirty_fds() == []
    index.maybe_append(6, 1)
    index.flush()
    assert index.take_dirty_fds() == []
    index.close()
