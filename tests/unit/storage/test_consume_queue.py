from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqkafka.storage.consume_queue import ENTRY, ENTRY_SIZE, ConsumeQueue

PER_FILE = 4


@pytest.fixture
def cqdir(tmp_path: Path) -> Path:
    return tmp_path / "cq"


def files(cqdir: Path) -> list[str]:
    return sorted(p.name for p in cqdir.iterdir())


def fill(cq: ConsumeQueue, batches: int, per_batch: int = 3) -> list[tuple[int, int, int]]:
    """Appends batches at positions 1000, 2000, ...; returns every expected entry."""
    expected = []
    for i in range(batches):
        position, size = 1000 * (i + 1), 100 + i
        codes = [i * 10 + j for j in range(per_batch)] if i % 2 else None
        cq.append(per_batch, position, size, codes)
        expected += [(position, size, codes[j] if codes else 0) for j in range(per_batch)]
    return expected


def test_entry_format_is_20_bytes():
    assert ENTRY_SIZE == 20
    assert ENTRY.pack(1, 2, -3) == (1).to_bytes(8, "big") + (2).to_bytes(4, "big") + (
        -3
    ).to_bytes(8, "big", signed=True)


def test_append_and_entry(cqdir):
    cq = ConsumeQueue(cqdir, 1000)
    expected = fill(cq, 5)
    assert cq.next_offset == 15
    assert [cq.entry(o) for o in range(15)] == expected
    cq.append(2, 9000, 77, [-(2**31), 2**31 - 1])  # negative Java hash codes survive
    assert cq.entry(15) == (9000, 77, -(2**31))
    assert cq.entry(16) == (9000, 77, 2**31 - 1)
    cq.close()


def test_entries_raw_stop_at_file_end_and_next_offset(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    expected = fill(cq, 3)  # 9 entries: files 0, 4, 8
    raw = cq.entries(1, 100)
    assert [ENTRY.unpack_from(raw, i) for i in range(0, len(raw), ENTRY_SIZE)] == expected[1:4]
    assert len(cq.entries(0, 2)) == 2 * ENTRY_SIZE
    raw = cq.entries(8, 100)
    assert len(raw) == ENTRY_SIZE  # only offset 8 exists
    assert cq.entries(9, 100) == b""
    assert cq.entries(20, 100) == b""


def test_file_rollover(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    expected = fill(cq, 5)  # 15 entries; batches straddle files
    assert files(cqdir) == [f"{b:020d}.cq" for b in (0, 4, 8, 12)]
    assert (cqdir / f"{0:020d}.cq").stat().st_size == PER_FILE * ENTRY_SIZE
    assert (cqdir / f"{12:020d}.cq").stat().st_size == 3 * ENTRY_SIZE
    assert [cq.entry(o) for o in range(15)] == expected
    # One batch spanning more than a whole file
    cq.append(10, 50_000, 5, None)
    assert cq.next_offset == 25
    assert all(cq.entry(o) == (50_000, 5, 0) for o in range(15, 25))
    cq.close()


def test_exactly_full_file_then_reopen(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    cq.append(8, 10, 1, None)
    assert files(cqdir) == [f"{0:020d}.cq", f"{4:020d}.cq"]
    cq.close()
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert cq.next_offset == 8
    cq.append(1, 20, 1, None)
    assert cq.entry(8) == (20, 1, 0)
    cq.close()


def test_reopen_recovers_next_and_min_offset(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    expected = fill(cq, 5)
    cq.close()
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert cq.next_offset == 15 and cq.min_offset == 0
    assert [cq.entry(o) for o in range(15)] == expected
    cq.close()


def test_torn_trailing_entry_dropped_on_open(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    expected = fill(cq, 2)  # 6 entries: files 0 (4) and 4 (2)
    cq.close()
    last = cqdir / f"{4:020d}.cq"
    with open(last, "ab") as f:
        f.write(b"\x01" * 7)
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert cq.next_offset == 6
    assert last.stat().st_size == 2 * ENTRY_SIZE
    assert [cq.entry(o) for o in range(6)] == expected
    cq.append(1, 5000, 9, None)
    assert cq.entry(6) == (5000, 9, 0)
    cq.close()


def test_truncate_to(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    expected = fill(cq, 5)  # 15 entries
    cq.truncate_to(20)  # beyond the end: nothing
    assert cq.next_offset == 15
    cq.truncate_to(6)
    assert cq.next_offset == 6
    assert files(cqdir) == [f"{0:020d}.cq", f"{4:020d}.cq"]
    assert (cqdir / f"{4:020d}.cq").stat().st_size == 2 * ENTRY_SIZE
    assert [cq.entry(o) for o in range(6)] == expected[:6]
    cq.append(1, 99_999, 1, None)
    assert cq.entry(6) == (99_999, 1, 0)
    cq.close()
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert cq.next_offset == 7
    cq.close()


def test_truncate_to_a_file_boundary(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    fill(cq, 5)
    cq.truncate_to(8)
    assert cq.next_offset == 8
    assert f"{12:020d}.cq" not in files(cqdir)
    cq.close()
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert cq.next_offset == 8
    cq.close()


def test_truncate_to_zero(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    fill(cq, 5)
    cq.truncate_to(0)
    assert cq.next_offset == 0
    cq.close()
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert cq.next_offset == 0
    cq.append(2, 7, 7, None)
    assert cq.entry(1) == (7, 7, 0)
    cq.close()


def test_first_offset_at_position_and_truncate_from_position(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    expected = fill(cq, 5)  # batch i at 1000*(i+1), 3 records each
    assert cq.first_offset_at_position(0) == 0
    assert cq.first_offset_at_position(1000) == 0
    assert cq.first_offset_at_position(1001) == 3
    assert cq.first_offset_at_position(3000) == 6
    assert cq.first_offset_at_position(5001) == 15
    cq.truncate_from_position(3500)  # batches at 4000 and 5000 go
    assert cq.next_offset == 9
    assert [cq.entry(o) for o in range(9)] == expected[:9]
    cq.truncate_from_position(3000)
    assert cq.next_offset == 6
    cq.truncate_from_position(99_999)
    assert cq.next_offset == 6
    cq.close()


def test_delete_before_keeps_the_newest_file(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    fill(cq, 5)  # files 0, 4, 8, 12
    cq.delete_before(5)  # file 0 holds only offsets < 5
    assert files(cqdir) == [f"{b:020d}.cq" for b in (4, 8, 12)]
    assert cq.min_offset == 4
    cq.delete_before(100)  # everything is older, but the newest file stays
    assert files(cqdir) == [f"{12:020d}.cq"]
    assert cq.min_offset == 12
    assert cq.next_offset == 15
    cq.close()
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert (cq.min_offset, cq.next_offset) == (12, 15)
    assert cq.entry(14)[0] == 5000
    cq.append(1, 6000, 1, None)
    assert cq.entry(15) == (6000, 1, 0)
    cq.close()


def test_delete_before_a_full_newest_file(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    cq.append(8, 1, 1, None)
    cq.delete_before(8)
    assert files(cqdir) == [f"{4:020d}.cq"]
    cq.close()
    cq = ConsumeQueue(cqdir, PER_FILE)
    assert (cq.min_offset, cq.next_offset) == (4, 8)
    cq.close()


def test_truncate_below_min_offset_stops_at_min(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    fill(cq, 5)
    cq.delete_before(8)
    cq.truncate_to(2)
    assert cq.next_offset == cq.min_offset == 8
    cq.close()


def test_dirty_tracking(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    fill(cq, 2)  # files 0 and 4
    assert len(cq.take_dirty_fds()) == 2
    assert cq.take_dirty_fds() == []
    cq.append(1, 1, 1, None)
    (fd,) = cq.take_dirty_fds()
    os.fdatasync(fd)
    cq.append(1, 1, 1, None)
    cq.flush()
    assert cq.take_dirty_fds() == []
    cq.close()


def test_destroy_removes_the_directory(cqdir):
    cq = ConsumeQueue(cqdir, PER_FILE)
    fill(cq, 2)
    cq.destroy()
    assert not cqdir.exists()
