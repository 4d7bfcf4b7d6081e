"""Committed consumer-group offsets (rmqkafka.storage.offset_store) and their MessageStore integration.

A process crash is simulated by copying the offsets directory while the store is open (what
a killed process leaves is what it wrote: the page cache survives it) and opening the copy;
a crash in the middle of a compaction by copying the directory from inside it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rmqkafka.storage.offset_store as os_module
import rmqkafka.storage.store as store_module
from storage_helpers import file_ids
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.errors import UnknownTopicError
from rmqkafka.storage.offset_store import (
    COMMIT,
    DELETE_GROUP,
    JOURNAL,
    RECORD_HEADER_SIZE,
    SNAPSHOT,
    CommittedOffset,
    OffsetStore,
    apply_op,
    encode_record,
    parse_snapshot,
    read_journal,
)

T0 = 1_700_000_000_000


def co(offset: int, ts: int = T0, epoch: int = -1, meta: str = "") -> CommittedOffset:
    return CommittedOffset(offset, epoch, meta, ts)


def open_store(directory: Path, **kw) -> OffsetStore:
    store = OffsetStore(directory, **kw)
    store.open()
    return store


def state_of(store: OffsetStore) -> dict:
    return {g: store.group_offsets(g) for g in store.groups()}


def crash_copy(src: Path, dst: Path) -> Path:
    """The directory as a killed process would leave it (the store stays open)."""
    shutil.copytree(src, dst)
    return dst


def journal_size(directory: Path) -> int:
    return (directory / JOURNAL).stat().st_size


# -- basics ------------------------------------------------------------------------------------
def test_commit_fetch_overwrite(tmp_path):
    store = open_store(tmp_path / "o")
    assert store.fetch("g", "t", 0) is None and store.groups() == []
    store.commit("g", {("t", 0): co(5, meta="m"), ("t", 1): co(7, epoch=3)})
    assert store.fetch("g", "t", 0) == CommittedOffset(5, -1, "m", T0)
    assert store.fetch("g", "t", 1) == CommittedOffset(7, 3, "", T0)
    assert store.fetch("g", "t", 2) is None and store.fetch("other", "t", 0) is None
    store.commit("g", {("t", 0): co(9, ts=T0 + 1)})  # overwrite one, keep the other
    assert store.group_offsets("g") == {("t", 0): co(9, ts=T0 + 1), ("t", 1): co(7, epoch=3)}
    # group_offsets is a copy
    store.group_offsets("g").clear()
    assert len(store.group_offsets("g")) == 2
    assert store.group_offsets("nope") == {}
    store.commit("g", {})  # nothing to write
    assert store.last_seq == 2
    store.close()


def test_many_groups_and_unicode(tmp_path):
    store = open_store(tmp_path / "o")
    for i in range(300):
        store.commit(f"grp-{i}", {(f"t{i % 7}", i % 5): co(i, meta="é✓" * (i % 3))})
    store.commit("", {("tópic", 0): co(1, meta="x" * 5000)})
    expected = state_of(store)
    assert len(store.groups()) == 301 and store.groups() == sorted(store.groups())
    store.close()
    assert state_of(open_store(tmp_path / "o")) == expected


def test_deletions(tmp_path):
    store = open_store(tmp_path / "o")
    store.commit("a", {("t", 0): co(1), ("t", 1): co(2), ("u", 0): co(3)})
    store.commit("b", {("t", 0): co(4), ("v", 0): co(5)})
    store.commit("c", {("t", 2): co(6)})
    store.delete_offsets("a", [("t", 1), ("zzz", 9), ("t", 1)])
    assert store.group_offsets("a") == {("t", 0): co(1), ("u", 0): co(3)}
    store.delete_topic("t")
    assert store.group_offsets("a") == {("u", 0): co(3)}
    assert store.group_offsets("b") == {("v", 0): co(5)}
    assert store.groups() == ["a", "b"]  # c had only t: gone
    store.delete_group("a")
    assert store.groups() == ["b"]
    store.delete_offsets("b", [("v", 0)])
    assert store.groups() == []
    # Deleting what is not there writes nothing.
    seq, size = store.last_seq, journal_size(tmp_path / "o")
    store.delete_group("a")
    store.delete_offsets("b", [("v", 0)])
    store.delete_offsets("nope", [("t", 0)])
    store.delete_topic("t")
    assert (store.last_seq, journal_size(tmp_path / "o")) == (seq, size)
    store.commit("a", {("t", 0): co(8)})  # a deleted group can commit again
    expected = state_of(store)
    store.close()
    assert state_of(open_store(tmp_path / "o")) == expected == {"a": {("t", 0): co(8)}}


@pytest.mark.parametrize(
    "offsets",
    [
        {("t", -1): co(1)},
        {("t", 1 << 31): co(1)},
        {(1, 0): co(1)},
        {("t", 0, 1): co(1)},
        {"t": co(1)},
        {("t", 0): 5},
        {("t", 0): co(1 << 63)},
        {("t", 0): CommittedOffset(1, 1 << 31, "", T0)},
        {("t", 0): CommittedOffset(1, -1, None, T0)},  # type: ignore[arg-type]
        {("t", 0): CommittedOffset(1.5, -1, "", T0)},  # type: ignore[arg-type]
        {("t", 0): co(1, meta="\ud800")},  # lone surrogate: not UTF-8
        {("ok", 0): co(1), ("t\ud800", 0): co(1)},  # one bad entry: nothing written
    ],
)
def test_invalid_commits_write_nothing(tmp_path, offsets):
    store = open_store(tmp_path / "o")
    with pytest.raises((TypeError, ValueError)):
        store.commit("g", offsets)
    with pytest.raises(TypeError):
        store.commit(None, {("t", 0): co(1)})  # type: ignore[arg-type]
    assert store.groups() == [] and store.last_seq == 0
    assert journal_size(tmp_path / "o") == 0


def test_closed_store_refuses_writes(tmp_path):
    store = open_store(tmp_path / "o")
    store.close()
    store.close()  # idempotent
    with pytest.raises(RuntimeError):
        store.commit("g", {("t", 0): co(1)})
    with pytest.raises(RuntimeError):
        store.compact()
    store.open()
    with pytest.raises(RuntimeError):
        store.open()
    store.close()


# -- reopening ---------------------------------------------------------------------------------
def test_reopen_after_close(tmp_path):
    store = open_store(tmp_path / "o")
    store.commit("g", {("t", 0): co(1), ("t", 1): co(2)})
    store.delete_offsets("g", [("t", 1)])
    store.commit("h", {("u", 3): co(3, epoch=9, meta="meta")})
    store.flush()
    expected = state_of(store)
    store.close()
    again = open_store(tmp_path / "o")
    assert state_of(again) == expected
    assert again.last_seq == 3
    again.commit("g", {("t", 5): co(5)})  # seqs continue
    assert again.last_seq == 4
    again.close()
    assert open_store(tmp_path / "o").fetch("g", "t", 5) == co(5)


def test_reopen_after_a_crash(tmp_path):
    store = open_store(tmp_path / "o")
    store.commit("g", {("t", 0): co(1)})
    store.flush()
    store.commit("g", {("t", 0): co(2)})  # written, never fsynced: a process kill keeps it
    store.delete_topic("x")
    store.commit("h", {("x", 0): co(3)})
    store.delete_topic("x")
    crashed = open_store(crash_copy(tmp_path / "o", tmp_path / "c"))
    assert state_of(crashed) == state_of(store) == {"g": {("t", 0): co(2)}}
    # What was replayed may live only in the page cache: the first flush covers it.
    assert crashed.unflushed_fds()[0] and crashed.flushed_seq < crashed.last_seq
    assert crashed.flush() == crashed.last_seq
    assert crashed.unflushed_fds()[0] == []
    store.close()
    crashed.close()


def test_first_open_creates_files_and_an_empty_state(tmp_path):
    store = open_store(tmp_path / "deep" / "o")
    assert (tmp_path / "deep" / "o" / JOURNAL).exists()
    assert not (tmp_path / "deep" / "o" / SNAPSHOT).exists()
    assert store.unflushed_fds() == ([], 0) and store.flush() == 0
    store.close()


# -- torn and damaged journals ----------------------------------------------------------------
def _three_commits(directory: Path) -> tuple[OffsetStore, list[int]]:
    store = open_store(directory)
    ends = []
    for i in range(3):
        store.commit(f"g{i}", {("t", i): co(i + 10, meta="m" * i)})
        ends.append(journal_size(directory))
    return store, ends


def _cut_mid_record(path: Path, ends: list[int]) -> None:
    os.truncate(path, ends[1] + (ends[2] - ends[1]) // 2)


def _cut_mid_header(path: Path, ends: list[int]) -> None:
    os.truncate(path, ends[1] + 5)


def _flip_last_record_byte(path: Path, ends: list[int]) -> None:
    data = bytearray(path.read_bytes())
    data[ends[2] - 3] ^= 0x40  # inside the metadata string: only the CRC notices
    path.write_bytes(bytes(data))


def _flip_last_record_size(path: Path, ends: list[int]) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, ends[1], 10_000)
    path.write_bytes(bytes(data))


def _append_garbage(path: Path, ends: list[int]) -> None:
    with open(path, "r+b") as f:
        f.truncate(ends[1])
        f.seek(0, 2)
        f.write(os.urandom(3) + b"\x00" * 40 + b"RMO1garbage")


def _append_zeros(path: Path, ends: list[int]) -> None:
    with open(path, "r+b") as f:
        f.truncate(ends[1])
        f.seek(0, 2)
        f.write(b"\x00" * 4096)  # what an OS crash can leave after an extending write


def _replay_an_older_record(path: Path, ends: list[int]) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: ends[1]] + data[: ends[0]])  # a valid record, but seq goes back


@pytest.mark.parametrize(
    "damage",
    [
        _cut_mid_record,
        _cut_mid_header,
        _flip_last_record_byte,
        _flip_last_record_size,
        _append_garbage,
        _append_zeros,
        _replay_an_older_record,
    ],
)
def test_torn_or_damaged_tail_is_dropped(tmp_path, caplog, damage):
    directory = tmp_path / "o"
    store, ends = _three_commits(directory)
    store.close()
    damage(directory / JOURNAL, ends)
    with caplog.at_level(logging.WARNING, logger="rmqkafka.storage.offset_store"):
        store = open_store(directory)
    assert any("torn or damaged tail" in r.getMessage() for r in caplog.records)
    assert store.groups() == ["g0", "g1"]
    assert store.fetch("g0", "t", 0) == co(10) and store.fetch("g1", "t", 1) == co(11, meta="m")
    assert journal_size(directory) == ends[1]
    store.commit("g9", {("t", 9): co(99)})  # new commits continue after the cut
    assert store.last_seq == 3
    store.close()
    store = open_store(directory)
    assert store.groups() == ["g0", "g1", "g9"] and store.fetch("g9", "t", 9) == co(99)
    store.close()


def test_damage_in_the_middle_keeps_the_longest_valid_prefix(tmp_path):
    directory = tmp_path / "o"
    store, ends = _three_commits(directory)
    store.delete_group("g0")  # a later record whose loss would resurrect g0 if it were applied
    store.close()
    data = bytearray((directory / JOURNAL).read_bytes())
    data[ends[0] + 14] ^= 1  # seq field of the second record
    (directory / JOURNAL).write_bytes(bytes(data))
    store = open_store(directory)
    assert state_of(store) == {"g0": {("t", 0): co(10)}}
    assert journal_size(directory) == ends[0]
    store.close()


def test_a_record_with_a_valid_crc_but_a_bad_body_is_damage(tmp_path):
    directory = tmp_path / "o"
    store, ends = _three_commits(directory)
    store.close()
    from crc32c import crc32c

    tail = struct.pack(">qb", 4, COMMIT) + b"\x00\x00\x00\x01g\x7f\xff\xff\xff"  # count too big
    record = struct.pack(">iiI", 12 + len(tail), 0x524D4F31, crc32c(tail)) + tail
    unknown_type = struct.pack(">qb", 5, 42) + b"\x00\x00\x00\x01g"
    with open(directory / JOURNAL, "ab") as f:
        f.write(record)
        f.write(struct.pack(">iiI", 12 + len(unknown_type), 0x524D4F31, crc32c(unknown_type)))
        f.write(unknown_type)
    store = open_store(directory)
    assert store.groups() == ["g0", "g1", "g2"] and journal_size(directory) == ends[2]
    store.close()


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe", b"[]", b'{"version": 2, "seq": 1, "groups": {}}',
     b'{"version": 1, "seq": -1, "groups": {}}', b'{"version": 1, "seq": 3}',
     b'{"version": 1, "seq": 3, "groups": {"g": [["t", 0, 1, -1, "", "x"]]}}',
     b'{"version": 1, "seq": 3, "groups": {"g": [["t", 0, 1]]}}'],
)
def test_unreadable_snapshot_is_moved_aside_and_the_journal_replayed(tmp_path, caplog, content):
    directory = tmp_path / "o"
    store = open_store(directory)
    store.commit("g", {("t", 0): co(1)})
    store.close()
    (directory / SNAPSHOT).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="rmqkafka.storage.offset_store"):
        store = open_store(directory)
    assert any("unreadable offsets snapshot" in r.getMessage() for r in caplog.records)
    assert (directory / (SNAPSHOT + ".corrupt")).read_bytes() == content
    assert not (directory / SNAPSHOT).exists()
    assert state_of(store) == {"g": {("t", 0): co(1)}}
    store.commit("g", {("t", 1): co(2)})
    store.compact()
    store.close()
    assert state_of(open_store(directory)) == {"g": {("t", 0): co(1), ("t", 1): co(2)}}


def test_write_failure_applies_nothing(tmp_path, monkeypatch):
    directory = tmp_path / "o"
    store = open_store(directory)
    store.commit("g", {("t", 0): co(1)})
    size = journal_size(directory)
    real = os.pwrite

    def half_then_fail(fd, data, at):
        if at == size and len(data) > 10:
            real(fd, bytes(data[:10]), at)
            return 10
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os_module.os, "pwrite", half_then_fail)
    with pytest.raises(OSError):
        store.commit("g", {("t", 0): co(2)})
    monkeypatch.undo()
    assert store.fetch("g", "t", 0) == co(1) and store.last_seq == 1
    assert journal_size(directory) == size  # the partial record was cut off
    store.commit("g", {("t", 0): co(3)})
    store.close()
    store = open_store(directory)
    assert store.fetch("g", "t", 0) == co(3) and store.last_seq == 2
    store.close()


# -- compaction --------------------------------------------------------------------------------
def test_compaction_snapshots_and_truncates(tmp_path):
    directory = tmp_path / "o"
    store = open_store(directory, max_journal_records=5)
    for i in range(4):
        store.commit("g", {("t", i): co(i)})
    assert store.compactions == 0 and not (directory / SNAPSHOT).exists()
    store.commit("g", {("t", 4): co(4)})  # the fifth record
    assert store.compactions == 1 and journal_size(directory) == 0
    snap = json.loads((directory / SNAPSHOT).read_text())
    assert snap["seq"] == 5 and len(snap["groups"]["g"]) == 5
    assert store.flushed_seq == 5  # the snapshot made everything durable
    store.delete_topic("t")
    store.commit("h", {("u", 0): co(1)})
    assert store.last_seq == 7
    store.close()
    store = open_store(directory, max_journal_records=5)
    assert state_of(store) == {"h": {("u", 0): co(1)}} and store.last_seq == 7
    store.close()


def test_compaction_by_bytes_and_the_snapshot_size_guard(tmp_path):
    directory = tmp_path / "o"
    store = open_store(directory, max_journal_bytes=2000, max_journal_records=10**9)
    for i in range(50):
        store.commit(f"g{i}", {("t", 0): co(i, meta="x" * 40)})
    first = store.compactions
    assert first >= 1
    # The state's snapshot is now larger than the byte threshold: the journal must grow to
    # the snapshot's size before the next compaction (amortised cost).
    snapshot_bytes = (directory / SNAPSHOT).stat().st_size
    assert snapshot_bytes > 2000
    while store.compactions == first:
        before = journal_size(directory)
        store.commit("g0", {("t", 0): co(1, meta="x" * 40)})
    assert before < snapshot_bytes <= before + 200
    store.close()


def test_failed_compaction_keeps_the_commit_and_retries(tmp_path, monkeypatch, caplog):
    directory = tmp_path / "o"
    store = open_store(directory, max_journal_records=50)
    real = os_module.write_json_atomically
    calls = []

    def full(path, data):
        calls.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os_module, "write_json_atomically", full)
    with caplog.at_level(logging.ERROR, logger="rmqkafka.storage.offset_store"):
        for i in range(50):
            store.commit("g", {("t", i): co(i)})  # the 50th triggers a failing compaction
    assert len(calls) == 1 and store.fetch("g", "t", 49) == co(49)
    assert "offsets compaction failed" in caplog.text
    for i in range(4):  # backs off (a tenth of the threshold): no retry on every commit
        store.commit("g", {("t", 50 + i): co(i)})
    assert len(calls) == 1
    store.commit("g", {("t", 0): co(0)})
    assert len(calls) == 2
    monkeypatch.setattr(os_module, "write_json_atomically", real)
    while store.compactions == 0:
        store.commit("g", {("t", 0): co(0)})
    assert journal_size(directory) == 0
    expected = state_of(store)
    store.close()
    assert state_of(open_store(directory)) == expected


def _replay_ignoring_seq(directory: Path) -> tuple[dict, dict]:
    """(snapshot state, snapshot state with the whole journal applied, seqs ignored)."""
    _, snapshot = parse_snapshot(json.loads((directory / SNAPSHOT).read_text()))
    replayed = {g: dict(o) for g, o in snapshot.items()}
    records, _ = read_journal((directory / JOURNAL).read_bytes())
    for _, op in records:
        apply_op(replayed, op)
    return snapshot, replayed


def test_crash_between_snapshot_and_truncation(tmp_path, monkeypatch):
    directory = tmp_path / "o"
    store = open_store(directory, max_journal_records=6)
    real = os_module.write_json_atomically
    copies: list[Path] = []

    def and_crash(path, data):
        real(path, data)
        copies.append(crash_copy(directory, tmp_path / f"crash{len(copies)}"))

    monkeypatch.setattr(os_module, "write_json_atomically", and_crash)
    store.commit("a", {("t", 0): co(1), ("t", 1): co(1)})
    store.commit("b", {("t", 0): co(2)})
    store.delete_group("a")
    store.commit("a", {("t", 0): co(3)})  # after its own deletion: the order matters
    store.commit("c", {("t", 0): co(3), ("u", 0): co(3)})
    store.delete_topic("t")  # the sixth record: compaction, interrupted in the copy
    assert len(copies) == 1
    expected = state_of(store)
    assert expected == {"c": {("u", 0): co(3)}}
    crashed = copies[0]
    assert journal_size(crashed) > 0  # the old journal is still there
    # Replaying the old journal over the newer snapshot gives the same state...
    snapshot, replayed = _replay_ignoring_seq(crashed)
    assert snapshot == replayed == expected
    # ...and open() skips it anyway (seq), then finishes the truncation.
    reopened = open_store(crashed, max_journal_records=6)
    assert state_of(reopened) == expected and reopened.last_seq == 6
    assert journal_size(crashed) == 0
    reopened.commit("d", {("t", 0): co(4)})
    assert reopened.last_seq == 7
    reopened.close()
    assert open_store(crashed).fetch("d", "t", 0) == co(4)
    store.close()


def test_truncation_that_fails_after_the_snapshot_is_harmless(tmp_path, monkeypatch):
    directory = tmp_path / "o"
    store = open_store(directory)
    for i in range(3):
        store.commit("g", {("t", 0): co(i)})
    real = os.ftruncate

    def failing(fd, length):
        if length == 0:
            raise OSError(5, "I/O error")
        real(fd, length)

    monkeypatch.setattr(os_module.os, "ftruncate", failing)
    with pytest.raises(OSError):
        store.compact()
    monkeypatch.undo()
    assert json.loads((directory / SNAPSHOT).read_text())["seq"] == 3
    assert journal_size(directory) > 0
    store.delete_group("g")  # appended after the stale records, with a newer seq
    store.commit("h", {("t", 0): co(7)})
    expected = state_of(store)
    crashed = open_store(crash_copy(directory, tmp_path / "c"))
    assert state_of(crashed) == expected == {"h": {("t", 0): co(7)}}
    crashed.close()
    store.close()


# -- property test: random operations against a dict model -------------------------------------
GROUPS = ["g0", "g1", "g2"]
TOPICS = ["t0", "t1"]
RETENTION = 1000

keys = st.tuples(st.sampled_from(TOPICS), st.integers(0, 2))
operations = st.one_of(
    st.tuples(
        st.just("commit"),
        st.sampled_from(GROUPS),
        st.dictionaries(keys, st.tuples(st.integers(-1, 1 << 40), st.integers(-1, 5),
                                        st.sampled_from(["", "m", "ü" * 20])), max_size=4),
    ),
    st.tuples(st.just("delete_group"), st.sampled_from(GROUPS)),
    st.tuples(st.just("delete_offsets"), st.sampled_from(GROUPS), st.lists(keys, max_size=4)),
    st.tuples(st.just("delete_topic"), st.sampled_from(TOPICS)),
    st.tuples(st.just("advance"), st.integers(0, 600)),
    st.tuples(st.just("expire"), st.sets(st.sampled_from(GROUPS))),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("crash")),
)

compaction_crashes_seen = [0]


def _model_view(model: dict) -> dict:
    return {g: {k: CommittedOffset(*v) for k, v in offs.items()} for g, offs in model.items() if offs}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operations, min_size=15, max_size=80), max_records=st.integers(1, 8))
def test_random_operations_against_a_model(ops, max_records):
    with tempfile.TemporaryDirectory() as tmp:
        _run_model(Path(tmp), ops, max_records)


def _run_model(tmp: Path, ops: list, max_records: int) -> None:
    clock = ManualClock(T0)
    model: dict[str, dict[tuple[str, int], tuple]] = {}
    directory = tmp / "o"
    kw = {"max_journal_records": max_records, "max_journal_bytes": 1500}
    generation = [0]

    def fresh_dir() -> Path:
        generation[0] += 1
        return tmp / f"o{generation[0]}"

    real = os_module.write_json_atomically
    current: list[OffsetStore] = []

    def and_check_a_crash_here(path, data):
        real(path, data)
        # A crash right after the snapshot, before the journal is truncated. (The store's
        # own state is checked against the model after every operation; one expire call
        # writes several records and may compact between them.)
        copy = crash_copy(path.parent, fresh_dir())
        expected = state_of(current[0])
        snapshot, replayed = _replay_ignoring_seq(copy)
        assert snapshot == replayed == expected
        recovered = open_store(copy, **kw)
        assert state_of(recovered) == expected
        recovered.close()
        compaction_crashes_seen[0] += 1

    os_module.write_json_atomically = and_check_a_crash_here
    try:
        store = open_store(directory, **kw)
        current[:] = [store]
        for op in ops:
            kind = op[0]
            # The model changes first, so a compaction inside the call sees the new state.
            if kind == "commit":
                _, group, offs = op
                if offs:
                    model.setdefault(group, {}).update(
                        {k: (o, e, m, clock.now_ms()) for k, (o, e, m) in offs.items()}
                    )
                store.commit(group, {k: CommittedOffset(o, e, m, clock.now_ms())
                                     for k, (o, e, m) in offs.items()})
            elif kind == "delete_group":
                model.pop(op[1], None)
                store.delete_group(op[1])
            elif kind == "delete_offsets":
                for k in op[2]:
                    model.get(op[1], {}).pop(k, None)
                store.delete_offsets(op[1], op[2])
            elif kind == "delete_topic":
                for offs in model.values():
                    for k in [k for k in offs if k[0] == op[1]]:
                        del offs[k]
                store.delete_topic(op[1])
            elif kind == "advance":
                clock.advance(op[1])
            elif kind == "expire":
                now, keep = clock.now_ms(), op[1]
                emptied = []
                for group, offs in sorted(model.items()):
                    if group in keep or not offs:
                        continue
                    for k in [k for k, v in offs.items() if now - v[3] >= RETENTION]:
                        del offs[k]
                    if not offs:
                        emptied.append(group)
                assert store.expire(now, RETENTION, keep) == emptied
            elif kind == "reopen":
                store.close()
                store = open_store(directory, **kw)
            elif kind == "crash":
                copy = crash_copy(directory, fresh_dir())
                store.close()
                directory = copy
                store = open_store(directory, **kw)
            current[:] = [store]
            model = {g: offs for g, offs in model.items() if offs}
            assert state_of(store) == _model_view(model)
        copy = crash_copy(directory, fresh_dir())
        store.close()
        assert state_of(open_store(copy, **kw)) == _model_view(model)
    finally:
        os_module.write_json_atomically = real


def test_model_run_crosses_the_compaction_threshold_repeatedly():
    # Guards against thresholds in the property test that never let it compact.
    ops = [("commit", f"g{i % 3}", {("t0", i % 3): (i, 0, "")}) for i in range(60)]
    ops += [("delete_topic", "t0"), ("crash",), ("expire", set())]
    with tempfile.TemporaryDirectory() as tmp:
        before = compaction_crashes_seen[0]
        _run_model(Path(tmp), ops, 4)
        assert compaction_crashes_seen[0] - before >= 5


# -- expiry -----------------------------------------------------------------------------------
def test_expire_with_a_manual_clock(tmp_path):
    clock = ManualClock(T0)
    retention = 7 * 24 * 3600 * 1000
    store = open_store(tmp_path / "o")
    old = co(1, ts=clock.now_ms())
    store.commit("live", {("t", 0): old})
    store.commit("partial", {("t", 0): old, ("t", 1): old})
    store.commit("dead", {("t", 0): old, ("u", 0): old})
    clock.advance(retention - 10)
    newer = co(2, ts=clock.now_ms())
    store.commit("partial", {("t", 1): newer})
    assert store.expire(clock.now_ms(), retention, keep={"live"}) == []
    clock.advance(10)  # exactly the retention since the first commits: expired (Kafka's >=)
    assert store.expire(clock.now_ms(), retention, keep={"live"}) == ["dead"]
    assert store.groups() == ["live", "partial"]
    assert store.group_offsets("partial") == {("t", 1): newer}
    assert store.group_offsets("live") == {("t", 0): old}  # has members: never expires
    clock.advance(retention)
    assert store.expire(clock.now_ms(), retention, keep=set()) == ["live", "partial"]
    assert store.groups() == []
    assert store.expire(clock.now_ms(), retention, keep=set()) == []
    store.close()
    assert open_store(tmp_path / "o").groups() == []


def test_expiry_is_journalled_as_explicit_deletions(tmp_path):
    store = open_store(tmp_path / "o")
    store.commit("g", {("t", 0): co(1, ts=0), ("t", 1): co(1, ts=500)})
    store.commit("h", {("t", 0): co(1, ts=0)})
    store.expire(1000, 1000, set())
    records, _ = read_journal((tmp_path / "o" / JOURNAL).read_bytes())
    assert [op for _, op in records[2:]] == [(3, "g", [("t", 0)]), (DELETE_GROUP, "h")]
    store.close()


def test_encode_record_round_trip():
    op = (COMMIT, "g", {("t", 0): co(1, meta="ü"), ("u", 2): co(-1, epoch=7), ("t", 3): co(4)})
    record = encode_record(9, op)
    records, end = read_journal(record)
    assert records == [(9, op)] and end == len(record) > RECORD_HEADER_SIZE


# -- MessageStore integration ------------------------------------------------------------------
def crash(stores, store) -> None:
    stores.crash(store)
    store.offsets.close()  # closing writes nothing; only the descriptor goes


@pytest.fixture
def fsyncs(monkeypatch):
    calls: list[list[int]] = []
    real = store_module._fdatasync_all

    def counting(fds):
        calls.append(file_ids(fds))
        real(fds)

    monkeypatch.setattr(store_module, "_fdatasync_all", counting)
    return calls


async def test_sync_commit_offsets_waits_for_an_fsync_covering_it(stores, monkeypatch):
    store = stores.open(flush="sync", flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    gate = asyncio.Event()
    rounds: list[list[int]] = []
    real = store_module._fdatasync_all
    loop = asyncio.get_running_loop()

    def slow(fds):
        rounds.append(file_ids(fds))
        asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(5)
        real(fds)

    monkeypatch.setattr(store_module, "_fdatasync_all", slow)
    from batches import make_batch
    from storage_helpers import append

    produced = append(store, "t", 0, make_batch(1))
    waiters = [
        asyncio.ensure_future(store.commit_offsets("g1", {("t", 0): co(1)})),
        asyncio.ensure_future(store.commit_offsets("g2", {("t", 0): co(2)})),
        asyncio.ensure_future(store.wait_durable(produced.end_position)),
    ]
    while not rounds:
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiters)  # not before the fsync completes
    # ...but the records are written already: a killed process would keep them.
    assert store.offsets.fetch("g2", "t", 0) == co(2)
    late = asyncio.ensure_future(store.commit_offsets("g3", {("t", 0): co(3)}))
    gate.set()
    await asyncio.wait_for(asyncio.gather(*waiters, late), 5)
    # One shared fsync for the produce and both commits; the late commit needed another.
    assert rounds[0] == file_ids([store.commitlog.segments[-1].fd, store.offsets._fd])
    assert rounds[1:] == [file_ids([store.offsets._fd])]
    assert store.offsets.flushed_seq == store.offsets.last_seq == 3
    await stores.aclose(store)


async def test_sync_commit_offsets_before_start_fsyncs_by_itself(stores, fsyncs):
    store = stores.open(flush="sync")
    await store.commit_offsets("g", {("t", 0): co(1)})
    assert fsyncs == [file_ids([store.offsets._fd])]
    assert store.offsets.flushed_seq == 1
    stores.close(store)


async def test_async_commit_offsets_is_fsynced_by_the_checkpoint(stores, fsyncs):
    store = stores.open(flush="async", flush_interval_ms=3_600_000)
    await store.start()
    await asyncio.wait_for(store.commit_offsets("g", {("t", 0): co(1)}), 5)
    assert fsyncs == [] and store.offsets.flushed_seq == 0
    await store.checkpoint()
    assert file_ids([store.offsets._fd])[0] in fsyncs[0]
    assert store.offsets.flushed_seq == 1
    await store.checkpoint()  # nothing new: the journal is not fsynced again
    assert file_ids([store.offsets._fd])[0] not in fsyncs[1]
    await stores.aclose(store)


async def test_close_releases_offset_waiters(stores, monkeypatch):
    store = stores.open(flush="sync", flush_interval_ms=3_600_000)
    await store.start()
    for task in store._tasks:  # no group-commit loop: only close() can settle the waiter
        task.cancel()
    await asyncio.gather(*store._tasks, return_exceptions=True)
    store._tasks = []
    waiter = asyncio.ensure_future(store.commit_offsets("g", {("t", 0): co(1)}))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await stores.aclose(store)
    await asyncio.wait_for(waiter, 5)  # close() fsynced the journal: success
    store = stores.open()
    assert store.offsets.fetch("g", "t", 0) == co(1)


async def test_delete_topic_drops_its_offsets(stores):
    store = stores.open()
    store.create_topic("t", 2, {})
    store.create_topic("u", 1, {})
    await store.commit_offsets("g", {("t", 0): co(1), ("t", 1): co(2), ("u", 0): co(3)})
    await store.commit_offsets("h", {("t", 1): co(4)})
    store.delete_topic("t")
    assert store.offsets.group_offsets("g") == {("u", 0): co(3)}
    assert store.offsets.groups() == ["g"]
    assert store.offsets.flushed_seq == store.offsets.last_seq  # durable before the topic goes
    with pytest.raises(UnknownTopicError):
        store.delete_topic("t")
    crash(stores, store)
    store = stores.open()
    assert store.offsets.groups() == ["g"] and store.topics.get("t") is None
    store.create_topic("t", 2, {})  # recreated: no stale offsets
    assert store.offsets.fetch("g", "t", 0) is None


async def test_offsets_survive_a_message_store_crash(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    await store.commit_offsets("g", {("t", 0): co(5, meta="m")})
    store.offsets.delete_offsets("g", [("t", 0)])
    await store.commit_offsets("g", {("t", 0): co(6)})
    await store.commit_offsets("h", {("t", 0): co(7)})
    crash(stores, store)
    store = stores.open()
    assert not store.clean_start
    assert state_of(store.offsets) == {"g": {("t", 0): co(6)}, "h": {("t", 0): co(7)}}
    # open() fsynced what the killed process left in the page cache
    assert store.offsets.flushed_seq == store.offsets.last_seq
    stores.close(store)
    store = stores.open()
    assert store.clean_start and store.offsets.fetch("h", "t", 0) == co(7)
    assert store.config.offsets_retention_ms == 7 * 24 * 3600 * 1000
    retention = store.config.offsets_retention_ms
    assert store.offsets.expire(store.clock.now_ms() + retention, retention, {"g"}) == ["h"]
    stores.close(store)
