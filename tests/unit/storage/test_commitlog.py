from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

from batches import flip, make_batch
from rmqkafka.storage.commitlog import ENTRY_HEADER_SIZE, CommitLog, Entry

TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000aa")
OTHER = uuid.UUID("00000000-0000-0000-0000-0000000000bb")


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    return tmp_path / "commitlog"


def open_log(logdir: Path, segment_bytes: int = 400) -> CommitLog:
    return CommitLog(logdir, segment_bytes)


def fill(log: CommitLog, n: int, size: int = 3) -> list[tuple[int, bytes]]:
    out = []
    for i in range(n):
        batch = make_batch([b"v%03d" % i] * size)
        out.append((log.append(TOPIC if i % 2 == 0 else OTHER, i % 3, [batch]), batch))
    return out


def collect(log: CommitLog, position: int) -> list[Entry]:
    got: list[Entry] = []
    log.recover(position, got.append)
    return got


def test_append_and_read_across_segment_rolls(logdir):
    log = open_log(logdir)
    written = fill(log, 20)
    assert len(log.segments) > 3
    for position, batch in written:
        assert log.read(position, len(batch)) == batch
    entries = list(log.entries(0))
    assert [(e.position, e.batch) for e in entries] == written
    assert [(e.topic_id, e.partition) for e in entries] == [
        (TOPIC if i % 2 == 0 else OTHER, i % 3) for i in range(20)
    ]
    log.close()


@pytest.mark.parametrize("value_size", [10, 40_000], ids=["one read", "batch read apart"])
def test_read_checked_returns_the_batch_and_refuses_damage(logdir, value_size):
    log = open_log(logdir, segment_bytes=1 << 20)
    batch = make_batch([b"x" * value_size] * 2)
    position = log.append(TOPIC, 1, [batch])
    assert log.read_checked(position, len(batch), TOPIC, 1) == batch
    assert log.read_checked(position, len(batch), TOPIC, 2) is None  # another partition's entry
    assert log.read_checked(position, len(batch) - 1, TOPIC, 1) is None  # another size
    assert log.read_checked(position, len(batch) + 1, TOPIC, 1) is None  # past the end
    fd = log.segments[-1].fd
    for at in (5, len(batch) - 3):  # in the CRC-covered head of the entry, in the records
        os.pwrite(fd, flip(batch, at)[at:at + 1], position + at)
        assert log.read_checked(position, len(batch), TOPIC, 1) is None
        os.pwrite(fd, batch[at:at + 1], position + at)
    assert log.read_checked(position, len(batch), TOPIC, 1) == batch
    log.close()


def test_positions_contiguous_and_segment_names(logdir):
    log = open_log(logdir)
    written = fill(log, 20)
    segments = log.segments
    assert segments[0].base_position == 0
    for prev, seg in zip(segments, segments[1:]):
        assert seg.base_position == prev.end_position
    for seg in segments:
        assert re.fullmatch(r"\d{20}\.log", seg.path.name)
        assert int(seg.path.name[:20]) == seg.base_position
        assert seg.path.stat().st_size == seg.size
        assert seg.size <= 400
    # Each entry starts right where the previous one ended, unless a segment was rolled.
    bases = {s.base_position for s in segments}
    for (p1, b1), (p2, _) in zip(written, written[1:]):
        assert p2 == p1 + len(b1) + ENTRY_HEADER_SIZE or p2 - ENTRY_HEADER_SIZE in bases
    assert log.end_position == segments[-1].end_position
    assert log.size_bytes() == sum(s.size for s in segments)
    assert sorted(os.listdir(logdir)) == [s.path.name for s in segments]
    log.close()


def test_entries_never_span_segments(logdir):
    log = open_log(logdir)
    written = fill(log, 20)
    segments = log.segments
    for position, batch in written:
        (seg,) = [s for s in segments if s.base_position <= position < s.end_position]
        assert position + len(batch) <= seg.end_position


def test_entry_larger_than_a_segment_gets_its_own(logdir):
    log = open_log(logdir, segment_bytes=200)
    small = make_batch(1)
    big = make_batch([b"x" * 500])
    p1 = log.append(TOPIC, 0, [small])
    p2 = log.append(TOPIC, 0, [big])
    p3 = log.append(TOPIC, 0, [small])
    assert len(log.segments) == 3
    assert log.read(p2, len(big)) == big
    assert [e.position for e in log.entries(0)] == [p1, p2, p3]


def test_append_in_parts(logdir):
    log = open_log(logdir)
    batch = make_batch(3)
    position = log.append(TOPIC, 0, [batch[:17], memoryview(batch)[17:]])
    assert log.read(position, len(batch)) == batch
    (entry,) = log.entries(0)
    assert entry.batch == batch


def test_reopen(logdir):
    log = open_log(logdir)
    written = fill(log, 15)
    end, names = log.end_position, [s.path.name for s in log.segments]
    log.close()
    log = open_log(logdir)
    assert log.end_position == end
    assert [s.path.name for s in log.segments] == names
    assert [(e.position, e.batch) for e in log.entries(0)] == written
    more = fill(log, 5)
    assert more[0][0] >= end + ENTRY_HEADER_SIZE
    assert [(e.position, e.batch) for e in log.entries(0)] == written + more
    log.close()


def _garbage(tail: bytes):
    def write(log: CommitLog, written) -> None:
        with open(log.segments[-1].path, "ab") as f:
            f.write(tail)

    return write


def _half_entry(log: CommitLog, written) -> None:
    # A whole entry written elsewhere, then copied halfway into the active segment.
    _, batch = written[-1]
    scratch = CommitLog(log.segments[-1].path.parent.parent / "scratch", 1 << 20)
    scratch.append(TOPIC, 0, [batch])
    whole = scratch.read(0, scratch.end_position)
    scratch.close()
    with open(log.segments[-1].path, "ab") as f:
        f.write(whole[: len(whole) // 2])


@pytest.mark.parametrize(
    "damage",
    [
        _garbage(b"\x00" * 100),
        _garbage(os.urandom(200)),
        _garbage(b"\x00\x00\x01\x00"),
        _garbage(b"\x00\x00\x00\x40RMK1"),  # a plausible size and magic, then nothing
        _half_entry,
    ],
    ids=["zeros", "random", "short", "header-only", "half-entry"],
)
def test_recover_truncates_torn_tail_exactly(logdir, damage):
    log = open_log(logdir)
    written = fill(log, 12)
    valid_end = log.end_position
    damage(log, written)
    log.close()

    log = open_log(logdir)
    assert log.end_position > valid_end
    from_position = written[7][0] - ENTRY_HEADER_SIZE  # an entry boundary
    got = collect(log, from_position)
    assert [(e.position, e.batch) for e in got] == written[7:]
    assert log.end_position == valid_end
    assert log.segments[-1].path.stat().st_size == log.segments[-1].size
    # Appending continues right after the last valid entry.
    position = log.append(TOPIC, 0, [make_batch(1)])
    assert position == valid_end + ENTRY_HEADER_SIZE
    log.close()


@pytest.mark.parametrize("where", ["batch-crc-field", "batch-body", "entry-header", "entry-magic",
                                   "entry-size"])
def test_recover_truncates_at_a_damaged_last_entry(logdir, where):
    log = open_log(logdir, segment_bytes=1 << 20)
    written = fill(log, 6)
    last_pos, last_batch = written[-1]
    entry_start = last_pos - ENTRY_HEADER_SIZE
    at = {
        "batch-crc-field": last_pos + 18,
        "batch-body": last_pos + len(last_batch) - 3,
        "entry-header": entry_start + 14,  # topic id, covered by the header CRC
        "entry-magic": entry_start + 5,
        "entry-size": entry_start + 3,
    }[where]
    path = log.segments[-1].path
    log.close()
    path.write_bytes(flip(path.read_bytes(), at))

    log = open_log(logdir, segment_bytes=1 << 20)
    got = collect(log, 0)
    assert [(e.position, e.batch) for e in got] == written[:-1]
    assert log.end_position == entry_start
    log.close()


def test_recover_from_a_later_position_dispatches_only_what_follows(logdir):
    log = open_log(logdir)
    written = fill(log, 10)
    got = collect(log, written[4][0] - ENTRY_HEADER_SIZE)
    assert [e.batch for e in got] == [b for _, b in written[4:]]
    assert collect(log, log.end_position) == []
    assert log.end_position == written[-1][0] + len(written[-1][1])


def test_recover_from_a_segment_boundary(logdir):
    log = open_log(logdir)
    written = fill(log, 10)
    boundary = log.segments[2].base_position
    got = collect(log, boundary)
    assert got[0].position == boundary + ENTRY_HEADER_SIZE
    assert [e.batch for e in got] == [b for p, b in written if p > boundary]


def test_corrupt_entry_in_the_middle_is_skipped_and_later_segments_kept(logdir):
    """Issue 12 (this used to keep only the longest valid prefix, deleting later segments):
    only the damaged entry is lost; recovery resyncs at the next valid entry, reports the
    skipped range and never cuts or deletes a segment that has later ones."""
    log = open_log(logdir)
    written = fill(log, 20)
    names = sorted(os.listdir(logdir))
    victim_pos, victim = written[5]
    (seg,) = [s for s in log.segments if s.base_position <= victim_pos < s.end_position]
    assert seg is not log.segments[-1]
    local = victim_pos - seg.base_position + 30
    path = seg.path
    end = log.end_position
    log.close()
    path.write_bytes(flip(path.read_bytes(), local))

    log = open_log(logdir)
    got: list[Entry] = []
    damage: list = []
    log.recover(0, got.append, damage.append)
    assert [e.batch for e in got] == [b for i, (_, b) in enumerate(written) if i != 5]
    [d] = damage
    assert (d.segment, d.start, d.end) == (path, victim_pos - ENTRY_HEADER_SIZE, victim_pos + len(victim))
    assert log.end_position == end
    assert sorted(os.listdir(logdir)) == names
    log.close()
    log = open_log(logdir)
    assert [e.batch for e in log.entries(0)] == [b for i, (_, b) in enumerate(written) if i != 5]
    log.close()


def test_a_segment_cut_short_in_the_middle_resumes_at_the_next_segment(logdir):
    log = open_log(logdir)
    written = fill(log, 20)
    seg = log.segments[1]
    names = sorted(os.listdir(logdir))
    log.close()
    os.truncate(seg.path, seg.size // 2)

    log = open_log(logdir)
    assert [(g.start, g.end) for g in log.gaps()] == [(seg.base_position + seg.size // 2, seg.end_position)]
    got: list[Entry] = []
    damage: list = []
    log.recover(0, got.append, damage.append)
    [d] = damage
    assert [e.batch for e in got] == [b for p, b in written if not d.start < p + len(b) <= d.end]
    assert seg.base_position <= d.start <= seg.base_position + seg.size // 2 and d.end == seg.end_position
    assert sorted(os.listdir(logdir)) == names
    log.close()


def test_truncate_to_a_segment_boundary_removes_later_segments(logdir):
    log = open_log(logdir)
    fill(log, 20)
    boundary = log.segments[2].base_position
    log.truncate(boundary)
    assert log.end_position == boundary
    assert len(log.segments) == 2
    position = log.append(TOPIC, 0, [make_batch(1)])
    assert position > boundary
    assert [s.base_position for s in log.segments][-1] == boundary
    assert list(log.entries(boundary))[0].position == position


def test_delete_oldest_segment_never_deletes_the_active_one(logdir):
    log = open_log(logdir)
    assert log.delete_oldest_segment() is None
    written = fill(log, 12)
    n = len(log.segments)
    first = log.segments[0]
    removed = log.delete_oldest_segment()
    assert removed.base_position == first.base_position
    assert not first.path.exists()
    assert log.start_position == log.segments[0].base_position > 0
    with pytest.raises(ValueError):
        log.read(written[0][0], len(written[0][1]))
    for _ in range(n):
        log.delete_oldest_segment()
    assert len(log.segments) == 1
    assert log.delete_oldest_segment() is None
    last_pos, last = written[-1]
    assert log.read(last_pos, len(last)) == last
    log.close()
    log = open_log(logdir)
    assert len(log.segments) == 1 and log.start_position > 0
    assert [e.batch for e in log.entries(0)][-1] == last
    # recover() from a position before the start begins at the start
    assert [e.batch for e in collect(log, 0)][-1] == last


def test_flush_bookkeeping(logdir):
    log = open_log(logdir)
    assert log.unflushed() == ([], 0)
    fill(log, 3)
    fds, end = log.unflushed()
    assert fds == [log.segments[-1].fd] and end == log.end_position
    log.mark_flushed(end)
    assert log.unflushed()[0] == []
    assert log.flush() == end
    fill(log, 3)
    assert log.flush() == log.end_position
    assert log.unflushed()[0] == []


def test_reopen_treats_the_active_segment_as_unflushed(logdir):
    """After a process crash the tail may exist only in the page cache; the first flush
    after opening must cover it before anything claims it durable."""
    log = open_log(logdir)
    fill(log, 20)
    log.close()
    log = open_log(logdir)
    fds, end = log.unflushed()
    assert log.segments[-1].fd in fds
    assert end == log.end_position
    assert log.segments[0].fd not in fds  # closed segments were synced when rolled
    log.close()
