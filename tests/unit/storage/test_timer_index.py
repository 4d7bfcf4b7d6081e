from __future__ import annotations

import errno
import gc
import os
import random
import time
from pathlib import Path

import psutil
import pytest
from rmqkafka.storage import timer_index
from rmqkafka.storage.timer_index import (
    LOG_DIR,
    SLOT,
    SLOT_SIZE,
    UNIT,
    UNIT_SIZE,
    WHEEL_FILE,
    TimerIndex,
    TimerIndexLostError,
)

RS = 1_700_000_000  # a read_slot in the present era


def opened(
    directory: Path,
    *,
    read_slot: int = RS,
    log_length: int | None = None,
    wheel_slots: int = 60,
    segment_units: int = 1 << 10,
) -> TimerIndex:
    index = TimerIndex(directory, wheel_slots=wheel_slots, segment_units=segment_units)
    index.open(read_slot=read_slot, log_length=log_length)
    return index


def ms(second: int, millis: int = 0) -> int:
    return second * 1000 + millis


def segments(directory: Path) -> list[str]:
    return sorted(p.name for p in (directory / LOG_DIR).iterdir())


def wheel_slots(directory: Path) -> list[tuple[int, int, int]]:
    data = (directory / WHEEL_FILE).read_bytes()
    return [SLOT.unpack_from(data, at) for at in range(0, len(data), SLOT_SIZE)]


def test_formats():
    assert (UNIT_SIZE, SLOT_SIZE) == (32, 24)
    assert UNIT.pack(-1, 2, 3, 4) == b"\xff" * 8 + b"".join(
        i.to_bytes(8, "big") for i in (2, 3, 4)
    )


def test_add_and_entries_keep_insertion_order(tmp_path):
    index = opened(tmp_path)
    added = [(ms(RS + 5, 900), 1), (ms(RS + 5, 100), 2), (ms(RS + 5, 500), 3), (ms(RS + 5), 4)]
    for due, ref in added:
        index.add(due, ref, read_slot=RS)
    assert index.entries(RS + 5) == added  # insertion order, not due order
    assert index.entries(RS + 5) == added  # reading changes nothing
    assert list(index.iter_entries(RS + 5)) == added
    assert index.slot_count(RS + 5) == 4
    assert index.log_length == 4 * UNIT_SIZE
    index.close()


def test_several_seconds(tmp_path):
    index = opened(tmp_path)
    expected: dict[int, list[tuple[int, int]]] = {}
    rng = random.Random(7)
    for ref in range(500):
        second = RS + rng.randrange(60)
        due = ms(second, rng.randrange(1000))
        index.add(due, ref, read_slot=RS)
        expected.setdefault(second, []).append((due, ref))
    for second in range(RS - 5, RS + 65):
        assert index.entries(second) == expected.get(second, [])
        assert index.slot_count(second) == len(expected.get(second, []))
    index.close()


def test_due_in_the_past_goes_to_read_slot(tmp_path):
    index = opened(tmp_path)
    index.add(ms(RS - 100, 1), 1, read_slot=RS)
    index.add(-5, 2, read_slot=RS)
    assert index.entries(RS) == [(ms(RS - 100, 1), 1), (-5, 2)]
    assert index.entries(RS - 100) == []
    index.close()


def test_stale_slot_from_an_earlier_lap_is_ignored(tmp_path):
    index = opened(tmp_path, wheel_slots=10)
    index.add(ms(RS + 3), 1, read_slot=RS)
    assert index.entries(RS + 13) == []  # same slot, the slot holds RS + 3
    assert index.slot_count(RS + 13) == 0
    # RS + 3 processed; a unit for the next lap reuses the slot and starts a new list.
    index.add(ms(RS + 13), 2, read_slot=RS + 4)
    assert index.entries(RS + 13) == [(ms(RS + 13), 2)]
    assert index.entries(RS + 3) == []
    assert index.slot_count(RS + 3) == 0
    index.close()


def test_roll_beyond_the_window_keeps_due(tmp_path):
    index = opened(tmp_path, wheel_slots=10)
    index.add(ms(RS + 25, 7), 1, read_slot=RS)
    index.add(ms(RS + 9, 1), 2, read_slot=RS)
    assert index.entries(RS + 9) == [(ms(RS + 25, 7), 1), (ms(RS + 9, 1), 2)]
    assert index.entries(RS + 25) == []
    # Processing RS + 9 re-adds the roll, which now falls in the window.
    index.add(ms(RS + 25, 7), 1, read_slot=RS + 20)
    assert index.entries(RS + 25) == [(ms(RS + 25, 7), 1)]
    index.close()


def test_decreasing_read_slot_cannot_overwrite_a_later_lap(tmp_path):
    index = opened(tmp_path, wheel_slots=10)
    index.add(ms(RS + 12), 1, read_slot=RS + 10)
    with pytest.raises(ValueError, match="later second"):
        index.add(ms(RS + 2), 2, read_slot=RS)
    assert index.entries(RS + 12) == [(ms(RS + 12), 1)]
    index.close()


def test_wheel_is_sparse(tmp_path):
    index = opened(tmp_path, wheel_slots=7 * 86400)
    index.add(ms(RS + 86400), 1, read_slot=RS)
    stat = (tmp_path / WHEEL_FILE).stat()
    assert stat.st_size == 7 * 86400 * SLOT_SIZE
    assert stat.st_blocks * 512 < 64 * 1024
    index.close()


def fill(index: TimerIndex, count: int, *, seed: int, read_slot: int = RS, span: int = 60):
    """Adds ``count`` units; returns second -> [(due, ref)] in insertion order."""
    rng = random.Random(seed)
    expected: dict[int, list[tuple[int, int]]] = {}
    for _ in range(count):
        second = read_slot + rng.randrange(span)
        due, ref = ms(second, rng.randrange(1000)), rng.getrandbits(63)
        index.add(due, ref, read_slot=read_slot)
        expected.setdefault(second, []).append((due, ref))
    return expected


def assert_holds(index: TimerIndex, expected: dict[int, list[tuple[int, int]]], span: int = 60):
    for second in range(RS, RS + span):
        assert index.entries(second) == expected.get(second, []), second
        assert index.slot_count(second) == len(expected.get(second, []))


def test_clean_reopen_keeps_everything(tmp_path):
    index = opened(tmp_path)
    expected = fill(index, 300, seed=1)
    length = index.log_length
    index.close()
    index = opened(tmp_path)
    assert index.log_length == length
    assert_holds(index, expected)
    index.add(ms(RS + 1, 1), 42, read_slot=RS)  # lists continue where they were
    expected.setdefault(RS + 1, []).append((ms(RS + 1, 1), 42))
    assert_holds(index, expected)
    index.close()


def test_reopen_with_shorter_log_length_truncates_and_rebuilds(tmp_path):
    index = opened(tmp_path)
    expected = fill(index, 200, seed=2)
    checkpoint = index.log_length
    index.add(ms(RS + 59), 1, read_slot=RS)  # a second only after the checkpoint
    index.add(ms(RS + 3), 2, read_slot=RS)  # newest unit of a slot that had units
    assert expected[RS + 3]
    fill(index, 100, seed=3)
    index.close()

    index = opened(tmp_path, log_length=checkpoint)
    assert index.log_length == checkpoint
    assert (tmp_path / LOG_DIR / "00000000000000000000.tl").stat().st_size == checkpoint
    assert_holds(index, expected)
    # New units go at the checkpoint and chain onto the rebuilt lists.
    index.add(ms(RS + 3, 5), 3, read_slot=RS)
    expected[RS + 3].append((ms(RS + 3, 5), 3))
    assert index.log_length == checkpoint + UNIT_SIZE
    assert_holds(index, expected)
    index.close()


def test_rebuilt_wheel_equals_the_one_add_wrote(tmp_path):
    index = opened(tmp_path, wheel_slots=300)
    fill(index, 5000, seed=4, span=300)
    length = index.log_length
    index.close()
    written = wheel_slots(tmp_path)
    index = opened(tmp_path, wheel_slots=300, log_length=length)
    index.close()
    rebuilt = wheel_slots(tmp_path)
    assert [s for s in rebuilt if s[2]] == [s for s in written if s[2]]
    assert all(count for _, _, count in written)  # every slot was used: a full comparison


def test_rebuild_drops_processed_seconds(tmp_path):
    index = opened(tmp_path, wheel_slots=10)
    index.add(ms(RS + 1), 1, read_slot=RS)
    index.add(ms(RS + 5), 2, read_slot=RS)
    length = index.log_length
    index.close()
    index = opened(tmp_path, wheel_slots=10, read_slot=RS + 2, log_length=length)
    assert index.entries(RS + 1) == []
    assert index.entries(RS + 5) == [(ms(RS + 5), 2)]
    index.close()


def test_log_shorter_than_log_length_is_lost(tmp_path):
    index = opened(tmp_path)
    fill(index, 10, seed=5)
    length = index.log_length
    index.close()
    with pytest.raises(TimerIndexLostError):
        opened(tmp_path, log_length=length + UNIT_SIZE)
    with pytest.raises(TimerIndexLostError):
        opened(tmp_path / "empty", log_length=UNIT_SIZE)
    # Nothing was cut: the files still open as they were.
    index = opened(tmp_path, log_length=length)
    assert index.log_length == length
    index.close()


def test_read_slot_older_than_the_checkpoint_is_lost(tmp_path):
    index = opened(tmp_path, wheel_slots=10)
    index.add(ms(RS + 15), 1, read_slot=RS + 10)
    length = index.log_length
    index.close()
    with pytest.raises(TimerIndexLostError, match="does not fit"):
        opened(tmp_path, wheel_slots=10, read_slot=RS, log_length=length)


def test_garbage_wheel_is_rebuilt_from_the_log(tmp_path):
    index = opened(tmp_path)
    expected = fill(index, 300, seed=6)
    length = index.log_length
    index.close()
    wheel = tmp_path / WHEEL_FILE
    rng = random.Random(8)
    garbage = bytearray(rng.randbytes(wheel.stat().st_size))
    for second in range(RS, RS + 60):  # slots that claim their second, with garbage pointers
        SLOT.pack_into(garbage, (second % 60) * SLOT_SIZE, second, rng.getrandbits(40), 3)
    wheel.write_bytes(garbage)
    index = opened(tmp_path, log_length=length)
    assert_holds(index, expected)
    index.close()


def test_garbage_wheel_trusted_after_a_clean_shutdown_is_detected(tmp_path):
    index = opened(tmp_path)
    index.add(ms(RS + 1), 1, read_slot=RS)
    index.close()
    with open(tmp_path / WHEEL_FILE, "r+b") as f:
        f.seek(((RS + 1) % 60) * SLOT_SIZE)
        f.write(SLOT.pack(RS + 1, 0, 2))  # claims one unit more than the list holds
    index = opened(tmp_path)
    with pytest.raises(TimerIndexLostError):
        index.entries(RS + 1)
    index.close()


def test_torn_trailing_partial_unit_is_dropped(tmp_path):
    index = opened(tmp_path)
    expected = fill(index, 20, seed=9)
    length = index.log_length
    index.close()
    with open(tmp_path / LOG_DIR / "00000000000000000000.tl", "ab") as f:
        f.write(b"\x07" * 13)
    index = opened(tmp_path)
    assert index.log_length == length
    assert_holds(index, expected)
    index.add(ms(RS), 1, read_slot=RS)
    expected.setdefault(RS, []).append((ms(RS), 1))
    assert_holds(index, expected)
    index.close()


def test_segments_roll_and_processed_ones_are_deleted(tmp_path):
    index = opened(tmp_path, segment_units=4)
    for i in range(10):  # seconds RS .. RS + 9, four units a segment
        index.add(ms(RS + i), i, read_slot=RS)
    seg = 4 * UNIT_SIZE
    assert segments(tmp_path) == [f"{p:020d}.tl" for p in (0, seg, 2 * seg)]
    assert index.delete_processed(RS + 3) == 0  # the first segment still holds RS + 3
    assert index.delete_processed(RS + 4) == 1
    assert segments(tmp_path) == [f"{p:020d}.tl" for p in (seg, 2 * seg)]
    assert index.log_start == seg
    assert index.log_length == 10 * UNIT_SIZE  # positions stay global
    assert index.entries(RS + 5) == [(ms(RS + 5), 5)]
    assert index.delete_processed(RS + 100) == 1  # never the newest segment
    assert segments(tmp_path) == [f"{2 * seg:020d}.tl"]
    index.close()

    # The per-segment max unit_slot is recomputed on open, clean or after a crash.
    index = opened(tmp_path, read_slot=RS + 8, segment_units=4)
    assert index.log_start == 2 * seg
    assert index.entries(RS + 9) == [(ms(RS + 9), 9)]
    for i in range(10, 14):  # fills segment 2 (seconds up to RS + 11), starts segment 3
        index.add(ms(RS + i), i, read_slot=RS + 8)
    assert index.delete_processed(RS + 11) == 0
    index.close()
    index = opened(tmp_path, read_slot=RS + 8, segment_units=4, log_length=14 * UNIT_SIZE)
    assert index.delete_processed(RS + 11) == 0
    assert index.delete_processed(RS + 12) == 1
    assert index.log_start == 3 * seg
    assert index.entries(RS + 13) == [(ms(RS + 13), 13)]
    index.close()


def test_delete_processed_keeps_the_log_contiguous(tmp_path):
    index = opened(tmp_path, segment_units=2)
    for i, second in enumerate([RS, RS, RS + 50, RS + 1, RS + 2, RS + 3, RS + 4]):
        index.add(ms(second), i, read_slot=RS)
    # Segment 1 holds a pending unit: segment 2, all processed, stays behind it.
    assert index.delete_processed(RS + 10) == 1
    assert index.log_start == 2 * UNIT_SIZE
    assert index.entries(RS + 50) == [(ms(RS + 50), 2)]
    index.close()


def test_reopen_at_a_segment_boundary(tmp_path):
    index = opened(tmp_path, segment_units=4)
    for i in range(9):
        index.add(ms(RS + 1), i, read_slot=RS)
    index.close()
    index = opened(tmp_path, segment_units=4, log_length=8 * UNIT_SIZE)
    assert index.log_length == 8 * UNIT_SIZE
    assert index.entries(RS + 1) == [(ms(RS + 1), i) for i in range(8)]
    index.add(ms(RS + 1), 8, read_slot=RS)
    assert index.entries(RS + 1) == [(ms(RS + 1), i) for i in range(9)]
    index.close()


def test_interrupted_deletion_leftover_is_dropped(tmp_path):
    """Deletion goes oldest first; an OS crash may keep only a newer segment's unlink."""
    index = opened(tmp_path, segment_units=2)
    for i in range(8):
        index.add(ms(RS + i), i, read_slot=RS)
    index.close()
    seg = 2 * UNIT_SIZE
    (tmp_path / LOG_DIR / f"{seg:020d}.tl").unlink()  # segment 0 left behind
    index = opened(tmp_path, read_slot=RS + 4, segment_units=2, log_length=8 * UNIT_SIZE)
    assert index.log_start == 2 * seg
    assert segments(tmp_path) == [f"{p:020d}.tl" for p in (2 * seg, 3 * seg)]
    assert index.entries(RS + 5) == [(ms(RS + 5), 5)]
    index.close()


def test_gap_before_pending_units_is_lost(tmp_path):
    index = opened(tmp_path, segment_units=2)
    for i in range(8):
        index.add(ms(RS + i), i, read_slot=RS)
    index.close()
    (tmp_path / LOG_DIR / f"{2 * UNIT_SIZE:020d}.tl").unlink()
    with pytest.raises(TimerIndexLostError):
        opened(tmp_path, read_slot=RS, segment_units=2)


def test_checkpoint_before_the_log_start_is_lost(tmp_path):
    index = opened(tmp_path, segment_units=2)
    for i in range(6):
        index.add(ms(RS + i), i, read_slot=RS)
    assert index.delete_processed(RS + 4) == 2
    index.close()
    with pytest.raises(TimerIndexLostError):
        opened(tmp_path, segment_units=2, log_length=2 * UNIT_SIZE)


def test_dirty_fds(tmp_path):
    index = opened(tmp_path, segment_units=2)
    index.take_dirty_fds()
    index.add(ms(RS), 1, read_slot=RS)
    first = index.take_dirty_fds()
    assert len(first) == 3  # the new segment, the wheel, the log directory
    assert index.take_dirty_fds() == []
    index.add(ms(RS), 2, read_slot=RS)
    assert len(index.take_dirty_fds()) == 2  # the segment and the wheel
    for fd in first:
        os.fstat(fd)  # still open
    index.add(ms(RS), 3, read_slot=RS)
    index.flush()
    assert index.take_dirty_fds() == []
    index.close()


def test_short_write_raises(tmp_path, monkeypatch):
    index = opened(tmp_path)
    monkeypatch.setattr(timer_index.os, "pwrite", lambda fd, data, offset: len(data) - 1)
    with pytest.raises(OSError, match="short write"):
        index.add(ms(RS), 1, read_slot=RS)
    monkeypatch.undo()
    index.close()


def test_rebuild_of_200k_units_is_fast(tmp_path):
    wheel_slots = 7 * 86400
    index = opened(tmp_path, wheel_slots=wheel_slots, segment_units=1 << 16)
    rng = random.Random(10)
    for first in range(0, 200_000, 1000):  # as the broker adds them: a produced batch at a time
        index.add_many([(ms(RS) + rng.randrange(30 * 86400 * 1000), ref) for ref in range(first, first + 1000)],
                       read_slot=RS)
    length = index.log_length
    probe = [(s, index.slot_count(s)) for s in range(RS, RS + 1000)]
    last = index.entries(RS + wheel_slots - 1)
    index.close()

    started = time.perf_counter()
    index = opened(tmp_path, wheel_slots=wheel_slots, segment_units=1 << 16, log_length=length)
    elapsed = time.perf_counter() - started
    print(f"rebuilt the wheel from 200,000 units in {elapsed:.3f} s")
    assert elapsed < 10
    assert [(s, index.slot_count(s)) for s in range(RS, RS + 1000)] == probe
    assert index.entries(RS + wheel_slots - 1) == last
    assert len(last) > 100_000  # the rolls of the last three weeks
    index.close()


def test_memory_does_not_grow_with_pending_timers(tmp_path):
    process = psutil.Process()
    index = opened(tmp_path, wheel_slots=3600)
    gc.collect()
    before = process.memory_info().rss
    for first in range(0, 1_000_000, 1000):  # as the broker adds them: a produced batch at a time
        # 30 days of dues, most of them rolls into the last slot of the hour-long wheel
        index.add_many([(ms(RS) + (ref * 2_592_001) % (30 * 86400 * 1000), ref) for ref in range(first, first + 1000)],
                       read_slot=RS)
    grown = process.memory_info().rss - before
    length = index.log_length
    index.close()
    started = time.perf_counter()
    index = opened(tmp_path, wheel_slots=3600, log_length=length)
    print(
        f"RSS grew {grown / 2**20:.1f} MiB adding 1,000,000 units; "
        f"rebuilt in {time.perf_counter() - started:.3f} s"
    )
    assert grown < 32 * 2**20
    assert sum(index.slot_count(s) for s in range(RS, RS + 3600)) == 1_000_000
    index.close()


def test_wheel_of_another_size_is_rebuilt_and_segments_of_another_size_refused(tmp_path):
    index = opened(tmp_path, wheel_slots=60)
    expected = fill(index, 100, seed=11)
    index.close()
    index = opened(tmp_path, wheel_slots=90)  # a clean shutdown, but the wheel cannot be used
    assert (tmp_path / WHEEL_FILE).stat().st_size == 90 * SLOT_SIZE
    assert_holds(index, expected)
    index.close()
    with pytest.raises(ValueError, match="segment_units"):
        opened(tmp_path, wheel_slots=90, segment_units=3)


def test_add_many_writes_what_add_writes(tmp_path):
    items = [(1_000 * (i % 7) + i, i) for i in range(50)] + [(10**9, 99)]
    one, many = TimerIndex(tmp_path / "one", wheel_slots=20, segment_units=16), TimerIndex(
        tmp_path / "many", wheel_slots=20, segment_units=16
    )
    one.open(read_slot=0, log_length=None)
    many.open(read_slot=0, log_length=None)
    for due, ref in items:
        one.add(due, ref, read_slot=0)
    many.add_many(items[:13], read_slot=0)
    many.add_many(items[13:], read_slot=0)
    assert many.log_length == one.log_length
    for slot in range(20):
        assert many.entries(slot) == one.entries(slot)
    one.close()
    many.close()
    for name in ("wheel",):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "many" / name).read_bytes()


def test_add_many_with_epoch_times_and_a_precision(tmp_path):
    """Epoch-millisecond due times at 100 ms slots, several per slot, some beyond the window."""
    t0 = 1_700_000_000_000
    read = t0 // 100
    index = TimerIndex(tmp_path / "i", wheel_slots=50, precision_ms=100)
    index.open(read_slot=read, log_length=None)
    dues = [250, 1000, 199, 1234, 100, 1, 120, 60_000]
    index.add_many([(t0 + d, ref) for ref, d in enumerate(dues)], read_slot=read)
    expected: dict[int, list[tuple[int, int]]] = {}
    for ref, d in enumerate(dues):
        expected.setdefault(min(read + d // 100, read + 49), []).append((t0 + d, ref))
    assert {s: index.entries(s) for s in range(read, read + 50) if index.entries(s)} == expected
    index.close()


def test_a_refused_add_leaves_the_index_as_it_was(tmp_path, monkeypatch):
    """A full disk met half-way through an add (the units' second segment): the units it
    wrote are taken back, the new segment is gone, no slot was written, and the next add
    and a reopen find the index as it was (storage.timer_index, "Full disk")."""
    index = opened(tmp_path, segment_units=2)
    index.add(ms(RS + 1), 1, read_slot=RS)
    length, files = index.log_length, segments(tmp_path)
    real = os.pwrite

    def full_after_one(fd, data, offset, calls=[]):  # noqa: B006 - counts the calls
        calls.append(fd)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(timer_index.os, "pwrite", full_after_one)
    with pytest.raises(OSError) as refused:
        index.add_many([(ms(RS + 2), 2), (ms(RS + 3), 3), (ms(RS + 3), 4)], read_slot=RS)
    monkeypatch.undo()
    assert refused.value.errno == errno.ENOSPC
    assert (index.log_length, segments(tmp_path)) == (length, files)
    assert [index.slot_count(RS + s) for s in (1, 2, 3)] == [1, 0, 0]
    index.add(ms(RS + 2), 5, read_slot=RS)
    assert index.entries(RS + 2) == [(ms(RS + 2), 5)]
    index.close()
    index = opened(tmp_path, segment_units=2, log_length=length + UNIT_SIZE)  # as after a crash
    assert [index.entries(RS + s) for s in (1, 2, 3)] == [[(ms(RS + 1), 1)], [(ms(RS + 2), 5)], []]
    index.close()


def test_a_batch_of_timers_in_slots_of_their_own_reads_and_writes_the_wheel_a_page_at_a_time(tmp_path, monkeypatch):
    index = opened(tmp_path, wheel_slots=100_000)
    index.add(ms(RS + 7), 99, read_slot=RS)  # a slot that already holds a unit, inside the span
    calls = {"pread": 0, "pwrite": 0}
    for name in calls:
        real = getattr(os, name)

        def counted(*args, name=name, real=real):
            calls[name] += 1
            return real(*args)

        monkeypatch.setattr(timer_index.os, name, counted)
    # 1,000 timers, one per second from RS + 1: 24,000 bytes of wheel, 6 or 7 pages
    added = [(ms(RS + 1 + i, 5), i) for i in range(1000)]
    index.add_many(added, read_slot=RS)
    assert calls["pread"] <= 7 and calls["pwrite"] <= 8  # 7 wheel pages + the log's one write
    monkeypatch.undo()
    for due, ref in added[:20] + added[-20:]:
        second = due // 1000
        expected = [(ms(RS + 7), 99), (due, ref)] if second == RS + 7 else [(due, ref)]
        assert index.entries(second) == expected
    index.close()
    reopened = opened(tmp_path, wheel_slots=100_000)  # the files say the same after a clean stop
    assert reopened.entries(RS + 7) == [(ms(RS + 7), 99), (ms(RS + 7, 5), 6)]
    assert reopened.entries(RS + 1000) == [(ms(RS + 1000, 5), 999)]
    reopened.close()


def test_a_rebuild_replaces_the_wheel_file_and_frees_the_old_one_off_the_callers_thread(tmp_path):
    """After a crash the wheel is rebuilt. Truncating the old file in place freed its blocks
    on the opening thread: a wheel filled over weeks holds an extent per page allocated as
    slots were first used (8,747 for 300,000 timers), and that ftruncate took 9.7-11 s on an
    ext4 mounted with discard, all of it before the broker was ready after a kill -9."""
    index = opened(tmp_path)
    expected = fill(index, 300, seed=21)
    length = index.log_length
    index.close()
    before = (tmp_path / WHEEL_FILE).stat()
    (tmp_path / (WHEEL_FILE + ".new")).write_bytes(b"left by a crash in the middle of a rebuild")

    released: list[int] = []
    index = TimerIndex(tmp_path, wheel_slots=60, segment_units=1 << 10, release_fd=released.append)
    index.open(read_slot=RS, log_length=length)
    after = (tmp_path / WHEEL_FILE).stat()
    assert after.st_ino != before.st_ino  # a new file, not the old one truncated
    assert len(released) == 1  # the old file's descriptor, for the caller to close
    assert os.fstat(released[0]).st_ino == before.st_ino and os.fstat(released[0]).st_nlink == 0
    os.close(released[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_DIR, WHEEL_FILE]
    assert after.st_size == 60 * SLOT_SIZE
    assert_holds(index, expected)
    index.close()
    index = opened(tmp_path)  # and what it wrote is the wheel a clean start trusts
    assert_holds(index, expected)
    index.close()


def test_the_old_wheel_is_closed_by_default(tmp_path):
    index = opened(tmp_path)
    fill(index, 50, seed=22)
    length = index.log_length
    index.close()
    process = psutil.Process()
    index = opened(tmp_path, log_length=length)
    wheel = str(tmp_path / WHEEL_FILE)
    deadline = time.monotonic() + 60
    while [f for f in process.open_files() if f.path.startswith(wheel) and f.path != wheel]:
        assert time.monotonic() < deadline, "the replaced wheel was never closed"
        time.sleep(0.01)
    index.close()


def test_a_rebuild_without_room_for_a_second_wheel_rewrites_the_old_one(tmp_path, monkeypatch):
    index = opened(tmp_path)
    expected = fill(index, 300, seed=23)
    length = index.log_length
    index.close()
    before = (tmp_path / WHEEL_FILE).stat().st_ino
    write = timer_index._pwrite

    def no_room_for_the_new_wheel(fd, data, offset):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(WHEEL_FILE + ".new"):
            raise OSError(errno.ENOSPC, "No space left on device")
        write(fd, data, offset)

    monkeypatch.setattr(timer_index, "_pwrite", no_room_for_the_new_wheel)
    index = opened(tmp_path, log_length=length)
    assert (tmp_path / WHEEL_FILE).stat().st_ino == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_DIR, WHEEL_FILE]
    assert_holds(index, expected)
    index.close()
