"""A commitlog segment damaged in the middle of the chain (issue 12: a middle segment cut to
half made 2,315 records unreadable; with no checkpoint, recovery cut the log there and
deleted the two later segments, 8,065 records lost). Recovery never deletes or cuts a
segment that has later ones: it skips the damaged byte range, resyncs at the next valid
entry (or the next segment), keeps and indexes everything after it, and logs at ERROR
which bytes and which offsets were lost. The lost offsets read as covering batches (no
records: a consumer moves past them, as past a compacted gap); every other record keeps
its offset."""

from __future__ import annotations

import logging
import os

import pytest
from batches import make_batch, values_of
from rmqkafka.storage.errors import CorruptIndexError
from storage_helpers import append

SEGMENT = 4096


def fill(store, batches: int = 120) -> dict[tuple[int, int], tuple[bytes, int]]:
    """Interleaved batches of two partitions over several segments; returns
    {(partition, offset): (value, commitlog position of its batch)}."""
    store.create_topic("t", 2, {})
    written = {}
    for i in range(batches):
        p = i % 2
        r = append(store, "t", p, make_batch([b"v%d-%d" % (i, k) for k in range(3)]))
        position = store.partition("t", p).consume_queue.entry(r.base_offset)[0]
        for k in range(3):
            written[(p, r.base_offset + k)] = (b"v%d-%d" % (i, k), position)
    return written


def read_everything(store, p: int) -> dict[int, bytes]:
    """Every record from the log start to the end, one read at a time as a consumer would
    (each read must move forward: a loop that does not is a consumer stuck forever)."""
    plog = store.partition("t", p)
    offset, seen = plog.log_start_offset, {}
    while offset < plog.next_offset:
        batches = plog.read(offset, 300, True).batches
        assert batches
        for batch in batches:
            following = int.from_bytes(batch[:8], "big") + int.from_bytes(batch[23:27], "big") + 1
            assert following > offset
            offset = following
        seen.update(dict(values_of([b for b in batches if not b[22] & 0x20])))  # not control
    return seen


def damage(path, how: str) -> tuple[int, int]:
    """Damage a segment file; returns the byte range (in the file) that was touched."""
    data = bytearray(path.read_bytes())
    half = len(data) // 2
    if how == "half":
        path.write_bytes(bytes(data[:half]))
        return half, len(data)
    data[half:half + 100] = os.urandom(100)
    path.write_bytes(bytes(data))
    return half, half + 100


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "no-checkpoint"])
@pytest.mark.parametrize("how", ["half", "random"])
def test_a_damaged_middle_segment_loses_only_its_damaged_range(stores, caplog, how, checkpoint):
    store = stores.open(segment_bytes=SEGMENT)
    written = fill(store)
    segments = store.commitlog.segments
    assert len(segments) >= 4
    victim = segments[1]
    later = [(s.path, s.size) for s in segments[2:]]
    ends = {p: store.partition("t", p).next_offset for p in (0, 1)}
    if checkpoint:
        stores.close(store)
    else:
        stores.crash(store)
        (stores.data_dir / "checkpoint.json").unlink()
    damage(victim.path, how)

    caplog.set_level(logging.INFO)
    store = stores.open()
    # With a checkpoint and a clean stop, random bytes are met only by a read; it is refused
    # (never served as something else) and the next start rebuilds the indexes.
    for p in (0, 1):
        plog = store.partition("t", p)
        for offset in range(plog.log_start_offset, plog.next_offset):
            try:
                plog.read(offset, 1, True)
            except CorruptIndexError:
                pass
    stores.close(store)
    store = stores.open()

    assert [(s.path, s.size) for s in store.commitlog.segments[2:]] == later  # nothing cut
    for p in (0, 1):
        seen = read_everything(store, p)
        for (wp, offset), (value, position) in written.items():
            if wp != p:
                continue
            if position < victim.base_position or position >= victim.end_position:
                assert seen.get(offset) == value, (p, offset)
        assert store.partition("t", p).next_offset == ends[p]
        assert set(seen) <= {o for (wp, o) in written if wp == p}
    in_victim = {key for key, (_, position) in written.items()
                 if victim.base_position <= position < victim.end_position}
    missing = {(p, o) for p in (0, 1) for o in {o for (wp, o) in written if wp == p} - set(read_everything(store, p))}
    assert missing and missing <= in_victim  # only records of the damaged segment are lost
    errors = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert victim.path.name in errors
    assert "lost" in errors
    # a produce continues after the last offset ever handed out: no offset is reused
    assert append(store, "t", 0, make_batch([b"after"])).base_offset == ends[0]
    before = {p: read_everything(store, p) for p in (0, 1)}
    stores.close(store)
    caplog.clear()
    store = stores.open()  # the damage is known now: no second rebuild, same answers
    assert "rebuilding" not in caplog.text
    assert {p: read_everything(store, p) for p in (0, 1)} == before


def test_damage_found_by_recovery_is_reported_with_offsets(stores, caplog):
    store = stores.open(segment_bytes=SEGMENT)
    written = fill(store)
    victim = store.commitlog.segments[1]
    stores.crash(store)
    (stores.data_dir / "checkpoint.json").unlink()
    damage(victim.path, "half")
    caplog.set_level(logging.ERROR)
    store = stores.open()
    lost = sorted(o for (p, o), (_, position) in written.items()
                  if p == 0 and victim.base_position <= position < victim.end_position
                  and o not in read_everything(store, 0))
    assert lost
    errors = " ".join(r.getMessage() for r in caplog.records)
    assert f"t-0: offsets {lost[0]}..{lost[-1]}" in errors


def test_damage_inside_the_last_segment_is_skipped_not_cut(stores, caplog):
    """Only a torn tail (nothing valid after it) is cut; valid entries after damaged bytes in
    the active segment stay, at their offsets."""
    store = stores.open(segment_bytes=1 << 20)
    written = fill(store, 40)
    [segment] = store.commitlog.segments
    size = segment.size
    stores.crash(store)
    data = bytearray(segment.path.read_bytes())
    data[size // 2:size // 2 + 50] = bytes(50)
    segment.path.write_bytes(bytes(data))
    caplog.set_level(logging.ERROR)
    store = stores.open()
    assert store.commitlog.end_position == size
    for p in (0, 1):
        seen = read_everything(store, p)
        kept = {o: v for (wp, o), (v, _) in written.items() if wp == p and o in seen}
        assert kept == seen
        assert max(seen) == max(o for (wp, o) in written if wp == p)  # the last batch survived
    assert "damaged" in caplog.text


@pytest.mark.parametrize("chunk", [5, 37, 4096])
def test_the_resync_reads_the_segment_in_chunks(stores, caplog, monkeypatch, chunk):
    """The next entry after a damaged range is looked for with pread, a chunk at a time (a
    mapping would turn a disk's EIO into SIGBUS): an entry whose magic lies across two
    chunks is found as well."""
    from rmqkafka.storage import commitlog

    monkeypatch.setattr(commitlog, "_RESYNC_CHUNK", chunk)
    test_a_damaged_middle_segment_loses_only_its_damaged_range(stores, caplog, "random", False)
