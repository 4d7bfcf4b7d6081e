"""The log cleaner (storage.log_cleaner, storage.compaction_cleaner) and the compaction store
it writes (storage.compaction_store), on a real MessageStore with an injected clock: the key map,
tombstone expiry, the lag rules and the dirty ratio, transactional data, reads over the
cleaned offsets, and the cleaner's files truncated, damaged or left half-written."""

from __future__ import annotations

import asyncio
import errno
import io
import os
import struct
from pathlib import Path

import pytest

from batches import make_batch
from compaction_helpers import EAGER, HOUR, T, clean, keyed, write
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.compaction_cleaner import (
    CompactionSettings,
    DirtyBatch,
    KeyMap,
    plan,
)
from rmqkafka.storage.compaction_store import SUFFIX, TMP_SUFFIX, CompactedLog
from rmqkafka.storage.txn_index import ABORT, COMMIT
from storage_helpers import append
from test_store_transactions import marker


def records(store, offset: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record read from ``offset`` (the log start)."""
    plog = store.partition(T, 0)
    start = plog.log_start_offset if offset is None else offset
    out = []
    for batch in plog.read(start, 1 << 30, True).batches:
        if batch[22] & rb.CONTROL_BIT:
            continue
        out.extend((r.offset, r.key, r.value) for r in rb.read_records(batch) if r.offset >= start)
    return out


def latest(store) -> dict[bytes, bytes | None]:
    return {k: v for _, k, v in records(store)}


@pytest.fixture
def store(stores, clock):
    s = stores.open()
    s.create_topic(T, 1, {"cleanup.policy": "compact"})
    s.cleaner.settings_for = lambda name: EAGER if name == T else None
    return s


def fill(store, clock, rounds: int = 3, keys: int = 5) -> None:
    """``rounds`` batches each writing every key, a second apart, then a sentinel batch
    (the active segment, never cleaned)."""
    write(store, clock, *[[(b"k%d" % k, b"v%d-%d" % (k, r)) for k in range(keys)] for r in range(rounds)],
          [(b"sentinel", b"s")])
    clock.advance(1000)


# -- the key map and the plan -------------------------------------------------------------
def test_key_map_short_keys_are_exact_and_long_ones_digested():
    keys = KeyMap(10)
    keys.put(b"a", 1)
    keys.put(b"a", 5)
    keys.put(b"x" * 100, 7)
    assert keys.latest(b"a") == 5 and keys.latest(b"x" * 100) == 7
    assert keys.latest(b"x" * 99) is None and len(keys) == 2
    assert len(KeyMap.digest(b"y" * 1000)) == 17 and KeyMap.digest(b"short") == b"short"
    assert keys.room_for(8) and not keys.room_for(9)


def test_the_key_map_holds_a_digest_of_a_huge_key_in_the_cleaning_path():
    """put_records and superseded (the loops a cleaning runs) keep a 1 MiB key as its
    17-byte digest: the map's memory is bounded by its capacity, whatever the keys."""
    from types import SimpleNamespace

    huge = [SimpleNamespace(key=bytes([i]) * (1 << 20), offset=i, value=b"v") for i in range(3)]
    keys = KeyMap(10)
    keys.put_records(huge + [SimpleNamespace(key=None, offset=9, value=b"v")])
    assert len(keys) == 3 and all(len(k) == 17 for k in keys._map)
    newer = [SimpleNamespace(key=bytes([1]) * (1 << 20), offset=0, value=None)]
    assert keys.superseded(newer) == [True] and keys.superseded(huge) == [False, False, False]


def _batches(timestamps: list[int], size: int = 100) -> list[DirtyBatch]:
    return [DirtyBatch(i * 10, i * 10 + 10, i * 1000, size, ts) for i, ts in enumerate(timestamps)]


def test_plan_never_cleans_the_active_segment():
    settings = CompactionSettings(segment_ms=1000, min_cleanable_dirty_ratio=0.0)
    # three segments: [0, 10) [10, 20, 30) [40): the last one is active
    batches = _batches([0, 5000, 5500, 5900, 9000])
    p = plan(batches, 0, 1 << 62, 0, settings, now_ms=100_000)
    assert (p.count, p.cleanable_end) == (4, 40)
    one_segment = plan(_batches([0, 10, 20]), 0, 1 << 62, 0, settings, now_ms=100_000)
    assert (one_segment.count, one_segment.cleanable_end) == (0, 0)


def test_plan_by_segment_bytes():
    settings = CompactionSettings(segment_bytes=250, min_cleanable_dirty_ratio=0.0)
    p = plan(_batches([0, 0, 0, 0, 0]), 0, 1 << 62, 0, settings, now_ms=1)
    assert p.count == 4  # segments [0,1] [2,3] [4]: the active one starts at batch 4


def test_plan_respects_min_compaction_lag_and_the_stable_offset():
    settings = CompactionSettings(segment_ms=1, min_compaction_lag_ms=10_000, min_cleanable_dirty_ratio=0.0)
    batches = _batches([1000, 2000, 3000, 4000, 5000])
    assert plan(batches, 0, 1 << 62, 0, settings, now_ms=12_500).count == 2  # 3000 > 12500 - 10000
    assert plan(batches, 0, 1 << 62, 0, settings, now_ms=100_000).count == 4
    assert plan(batches, 0, 25, 0, settings, now_ms=100_000).count == 2  # an open transaction at 25


def test_plan_dirty_ratio_and_max_compaction_lag():
    settings = CompactionSettings(segment_ms=1, min_cleanable_dirty_ratio=0.5, max_compaction_lag_ms=50_000)
    batches = _batches([1000, 2000, 3000])  # two cleanable, 200 dirty bytes
    p = plan(batches, 0, 1 << 62, 600, settings, now_ms=10_000)
    assert p.dirty_ratio == pytest.approx(0.25) and not p.must and not p.worth(settings)
    p = plan(batches, 0, 1 << 62, 100, settings, now_ms=10_000)
    assert p.dirty_ratio == pytest.approx(200 / 300) and p.worth(settings)
    late = plan(batches, 0, 1 << 62, 600, settings, now_ms=60_000)
    assert late.must and late.worth(settings)  # older than max.compaction.lag.ms


# -- cleaning -----------------------------------------------------------------------------
def test_cleaning_keeps_the_latest_record_per_key_and_the_offsets(store, clock):
    fill(store, clock)
    before = records(store)
    assert clean(store)
    plog = store.partition(T, 0)
    assert plog.cleaned_end == 15 and plog.commitlog_start_offset == 15
    after = records(store)
    assert [(o, k, v) for o, k, v in after if o < 15] == [(10 + k, b"k%d" % k, b"v%d-2" % k) for k in range(5)]
    assert after[-1] == (15, b"sentinel", b"s")
    assert latest(store) == {k: v for _, k, v in before}
    # a read from an offset cleaned away starts at the next batch kept; the head reads all
    assert records(store, 3)[0][0] == 10
    assert plog.read(15, 1 << 20, True).batches[0] == plog.batch_at(15)
    assert plog.next_offset == 16 and plog.log_start_offset == 0


def test_a_cleaned_batch_keeps_its_base_offset_and_last_offset_delta(store, clock):
    write(store, clock, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")], [(b"b", b"2")], [(b"z", b"z")])
    assert clean(store)
    first = store.partition(T, 0).read(0, 1 << 20, True).batches[0]
    assert (rb.base_offset_of(first), rb.next_offset_of(first)) == (0, 3)
    assert [(r.offset, r.key) for r in rb.read_records(first)] == [(0, b"a"), (2, b"c")]
    assert rb.crc_ok(first)


def test_compressed_batches_stay_compressed(store, clock):
    write(store, clock, [(b"a", b"1" * 100), (b"b", b"1" * 100)], codec=1)
    clock.advance(1000)
    write(store, clock, [(b"a", b"2")], [(b"z", b"z")])
    assert clean(store)
    first = store.partition(T, 0).read(0, 1 << 20, True).batches[0]
    assert first[22] & 0x07 == 1
    assert [(r.offset, r.key) for r in rb.read_records(first)] == [(1, b"b")]


def test_tombstones_are_kept_for_delete_retention_after_the_cleaning_that_saw_them(store, clock):
    fill(store, clock, rounds=1, keys=3)  # offsets 0-2, sentinel 3
    write(store, clock, [(b"k1", None)], [(b"other", b"o")])  # 4: a tombstone for k1; 5: active
    clock.advance(1000)
    assert clean(store)
    assert latest(store)[b"k1"] is None  # the tombstone is still there
    assert b"k1" in latest(store)
    clock.advance(HOUR - 5000)
    write(store, clock, [(b"x", b"1")], [(b"y", b"1")])
    assert clean(store)
    assert latest(store)[b"k1"] is None  # not yet an hour since first seen
    clock.advance(10_000)
    write(store, clock, [(b"w", b"1")])
    assert clean(store)
    assert b"k1" not in latest(store)  # gone
    assert latest(store)[b"k0"] == b"v0-0"


def test_keyless_records_are_dropped_by_the_cleaner(store, clock):
    append(store, T, 0, make_batch([b"no key"], timestamps=[clock.now_ms()]))
    clock.advance(1000)
    write(store, clock, [(b"a", b"1")], [(b"z", b"z")])
    assert clean(store)
    assert [k for _, k, _ in records(store)] == [b"a", b"z"]


def test_dirty_ratio_below_the_minimum_cleans_nothing_unless_forced(store, clock):
    fill(store, clock)
    lazy = CompactionSettings(segment_ms=1, min_cleanable_dirty_ratio=0.99)
    assert clean(store, settings=lazy)  # nothing clean yet: the ratio is 1
    fill(store, clock, rounds=1)
    assert not clean(store, settings=lazy)
    ratio = store.cleaner.progress[(T, 0)].dirty_ratio
    assert 0 < ratio < 0.99
    assert clean(store, settings=lazy, force=True)


def test_the_key_map_bound_cleans_in_steps(store, clock, monkeypatch):
    fill(store, clock, rounds=4, keys=5)
    monkeypatch.setattr(type(store.cleaner), "map_capacity", property(lambda self: 6))
    assert clean(store)
    first = store.partition(T, 0).cleaned_end
    assert first == 5  # one batch of 5 keys fitted; the next would overflow
    while clean(store):
        pass
    assert store.partition(T, 0).cleaned_end == 20
    assert len([o for o, _, _ in records(store) if o < 20]) == 5


def test_aborted_transactions_are_removed_and_markers_expire(store, clock):
    pid = 77
    txn = dict(producer_id=pid, producer_epoch=0, transactional=True)
    write(store, clock, [(b"a", b"aborted")], base_sequence=0, **txn)  # 0
    store.append_built(T, 0, marker(pid, 0, ABORT))  # 1
    write(store, clock, [(b"b", b"committed")], base_sequence=1, **txn)  # 2
    store.append_built(T, 0, marker(pid, 0, COMMIT))  # 3
    clock.advance(1000)
    write(store, clock, [(b"z", b"z")])  # 4: active
    assert clean(store)
    kept = store.partition(T, 0).read(0, 1 << 20, True).batches
    bases = [(rb.base_offset_of(b), bool(b[22] & rb.CONTROL_BIT)) for b in kept]
    assert bases == [(1, True), (2, False), (3, True), (4, False)]  # aborted data gone, markers kept
    # a newer value of b leaves the committed transaction empty: its marker goes after
    # delete.retention.ms, as does the abort marker
    write(store, clock, [(b"b", b"newer")])
    clock.advance(HOUR + 1000)
    write(store, clock, [(b"y", b"y")])
    assert clean(store)
    kept = store.partition(T, 0).read(0, 1 << 20, True).batches
    assert not any(b[22] & rb.CONTROL_BIT for b in kept)
    assert latest(store) == {b"b": b"newer", b"z": b"z", b"y": b"y"}


def test_an_open_transaction_is_not_cleaned(store, clock):
    pid = 5
    write(store, clock, [(b"a", b"1")])
    clock.advance(1000)
    write(store, clock, [(b"a", b"2")], producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    clock.advance(1000)
    write(store, clock, [(b"z", b"z")])
    clean(store)
    assert store.partition(T, 0).cleaned_end <= 1


# -- restarts and the cleaner's files -----------------------------------------------------
def _clean_dir(store) -> Path:
    return store.compaction_dir(store.partition(T, 0))


def test_the_compaction_store_survives_a_restart_and_unpins_the_commitlog(stores, store, clock):
    fill(store, clock)
    assert clean(store)
    want = records(store)
    stores.close(store)
    again = stores.open()
    assert records(again) == want
    assert again.partition(T, 0).commitlog_start_offset == 15


def test_retention_of_the_commitlog_below_the_cleaned_end_keeps_the_log_start(stores, clock):
    s = stores.open(segment_bytes=2048, retention_bytes=1)
    s.create_topic(T, 1, {"cleanup.policy": "compact"})
    fill(s, clock, rounds=20)
    assert clean(s)
    cleaned = s.partition(T, 0).cleaned_end
    s.apply_retention()
    plog = s.partition(T, 0)
    assert plog.log_start_offset == 0 and s.commitlog.start_position > 0
    assert {k for _, k, _ in records(s)} >= {b"k%d" % k for k in range(5)}
    stores.crash(s)
    again = stores.open()
    assert again.partition(T, 0).log_start_offset == 0 and again.partition(T, 0).cleaned_end == cleaned
    assert latest(again)[b"k3"] == b"v3-19"


def test_a_cleaning_killed_before_its_switch_is_discarded(stores, store, clock):
    fill(store, clock)
    assert clean(store)
    directory = _clean_dir(store)
    good = sorted(os.listdir(directory))
    (directory / ("00000000000000000099" + TMP_SUFFIX)).write_bytes(b"half a file")
    want = records(store)
    stores.crash(store)
    again = stores.open()
    assert sorted(os.listdir(directory)) == good
    assert records(again) == want


def test_a_kill_between_switch_and_removal_keeps_the_newest(stores, store, clock):
    fill(store, clock)
    assert clean(store)
    directory = _clean_dir(store)
    (old,) = os.listdir(directory)
    saved = (directory / old).read_bytes()
    fill(store, clock)
    assert clean(store)
    (directory / old).write_bytes(saved)  # the older file back, as if its removal was lost
    want = records(store)
    stores.crash(store)
    again = stores.open()
    assert len(os.listdir(directory)) == 1 and records(again) == want


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_compacted_file_is_set_aside(stores, store, clock, damage):
    fill(store, clock)
    assert clean(store)
    directory = _clean_dir(store)
    (name,) = os.listdir(directory)
    path = directory / name
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[:-7]
    else:
        data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    stores.crash(store)
    again = stores.open()
    assert os.listdir(directory) == [name + ".damaged"]
    plog = again.partition(T, 0)
    assert plog.compacted is None
    # the commitlog still had every batch: nothing is lost
    assert latest(again)[b"k4"] == b"v4-2" and len(records(again)) == 16
    assert CompactedLog.open(directory) is None


def test_deleting_the_topic_removes_its_compaction_store(store, clock):
    fill(store, clock)
    assert clean(store)
    directory = _clean_dir(store)
    assert any(n.endswith(SUFFIX) for n in os.listdir(directory))
    store.delete_topic(T)
    assert not directory.exists()


def test_offset_for_timestamp_over_cleaned_offsets(store, clock):
    start = clock.now_ms()
    fill(store, clock)
    assert clean(store)
    plog = store.partition(T, 0)
    assert plog.offset_for_timestamp(start)[0] == 10  # the first record kept
    assert plog.offset_for_timestamp(start + 2000)[0] == 10
    assert plog.bytes_available(0, 1 << 20) > 0



def test_partition_size_counts_the_compaction_store(stores, clock):
    """DescribeLogDirs and the console size a compacted partition from its compaction store
    below the cleaned end (the commitlog there may be gone)."""
    from types import SimpleNamespace

    from rmqkafka.adapter.handlers.describe_log_dirs import partition_size

    s = stores.open(segment_bytes=1024, retention_bytes=1)
    s.create_topic(T, 1, {"cleanup.policy": "compact"})
    fill(s, clock, rounds=20)
    assert clean(s)
    s.apply_retention()
    plog = s.partition(T, 0)
    size = partition_size(SimpleNamespace(store=s), plog)
    assert size == plog.compacted.data_bytes + len(plog.batch_at(plog.cleaned_end))


def test_a_batch_without_records_is_not_kept():
    """A stored batch whose records were all parked elsewhere on append holds none: the
    cleaner leaves a gap instead (an empty batch would stall librdkafka)."""
    from types import SimpleNamespace

    from rmqkafka.storage.batch_builder import empty_batch
    from rmqkafka.storage.compaction_cleaner import CleanResult, Plan, _Aborted, _Filter

    job = SimpleNamespace(log_start=0, settings=EAGER, now_ms=0)
    pass2 = _Filter(job, KeyMap(10), _Aborted([]), [], CleanResult(Plan(0, 0, 0, 0.0, False), []))
    batch = keyed([(b"b", b"1"), (b"c", b"1")], 0)
    assert pass2.filter(batch) == batch
    assert pass2.filter(empty_batch(batch)) is None


def test_closing_the_store_stops_a_cleaning_and_discards_its_file(store, clock):
    fill(store, clock)
    store.cleaner._cancel.set()  # what close() does first
    assert not clean(store)
    directory = _clean_dir(store)
    assert not directory.exists() or not os.listdir(directory)
    assert store.partition(T, 0).cleaned_end == 0


def test_a_long_dirty_range_is_cleaned_in_steps(store, clock, monkeypatch):
    """At most MAX_SCAN_BATCHES dirty batches are looked at per cleaning (their count is the
    producers' choice); past that cut they need not be in a closed segment."""
    from rmqkafka.storage import compaction_cleaner

    monkeypatch.setattr(compaction_cleaner, "MAX_SCAN_BATCHES", 2)
    fill(store, clock, rounds=3)
    one_segment = CompactionSettings(segment_ms=HOUR, min_cleanable_dirty_ratio=0.0)
    assert clean(store, settings=one_segment)
    assert store.partition(T, 0).cleaned_end == 10
    # the rest (the third round and the sentinel) reaches the end: one active segment
    assert not clean(store, settings=one_segment)
    assert store.partition(T, 0).cleaned_end == 10
    assert latest(store)[b"k1"] == b"v1-2"
    assert len(records(store)) == 5 + 5 + 1


def test_only_what_the_commitlog_has_fsynced_is_cleaned():
    """A batch not yet fsynced could vanish from the commitlog in an OS crash while the
    compaction store kept its offsets: it waits for the flush."""
    settings = CompactionSettings(segment_ms=1, min_cleanable_dirty_ratio=0.0)
    batches = _batches([1000, 2000, 3000, 4000])  # positions 0, 1000, 2000, 3000; 100 bytes each
    assert plan(batches, 0, 1 << 62, 0, settings, now_ms=100_000).count == 3
    assert plan(batches, 0, 1 << 62, 0, settings, now_ms=100_000, durable_position=1100).count == 2
    assert plan(batches, 0, 1 << 62, 0, settings, now_ms=100_000, durable_position=1099).count == 1


# -- a full disk and failing syncs ---------------------------------------------------------
class _FullDisk(io.FileIO):
    """A file on a full disk: every write fails with ENOSPC (a buffered writer holds the
    bytes until its flush, which then fails, and so does its close)."""

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


def _full_disk_open(path, mode="r", *args, **kwargs):
    if "w" in mode:
        return io.BufferedWriter(_FullDisk(path, "w"))
    return open(path, mode, *args, **kwargs)


def test_a_full_disk_leaves_no_temporary_file_and_serves_everything(store, clock, monkeypatch):
    """ENOSPC while the compacted file is written: the cleaning fails (retried later), its
    .tmp is gone (it would hold the space the disk lacks), and the commitlog serves all."""
    from rmqkafka.storage import compaction_store

    fill(store, clock)
    want = records(store)
    monkeypatch.setattr(compaction_store, "open", _full_disk_open, raising=False)
    assert not clean(store)
    assert store.cleaner.failures == 1 and "No space left" in store.cleaner.progress[(T, 0)].last_error
    directory = _clean_dir(store)
    assert not directory.exists() or os.listdir(directory) == []
    assert store.partition(T, 0).cleaned_end == 0 and records(store) == want
    monkeypatch.undo()
    assert clean(store)  # space again: cleaned
    assert latest(store) == {k: v for _, k, v in want}


@pytest.mark.parametrize("failing", ["fsync of the file", "fsync of the directory"])
def test_a_failed_sync_is_not_taken_for_a_switch(store, clock, monkeypatch, failing):
    """An fsync error is fatal for what it covered: the new file is not switched in (nor
    left to win at the next restart), the previous one still serves, nothing is lost, and a
    later cleaning succeeds."""
    from rmqkafka.storage import compaction_store

    fill(store, clock)
    assert clean(store)
    previous = store.partition(T, 0).compacted
    directory = _clean_dir(store)
    before = sorted(os.listdir(directory))
    fill(store, clock)
    want = records(store)

    def eio(*args):
        raise OSError(errno.EIO, "Input/output error")

    if failing == "fsync of the file":
        monkeypatch.setattr(compaction_store.os, "fsync", eio)
    else:
        monkeypatch.setattr(compaction_store, "fsync_path", eio)
    assert not clean(store)
    monkeypatch.undo()
    plog = store.partition(T, 0)
    assert store.cleaner.failures == 1 and "Input/output error" in store.cleaner.progress[(T, 0)].last_error
    assert plog.compacted is previous and plog.commitlog_start_offset == previous.end_offset
    assert sorted(os.listdir(directory)) == before
    assert records(store) == want
    assert clean(store)
    assert latest(store) == {k: v for _, k, v in want} and len(records(store)) < len(want)


# -- the compacted file's index -------------------------------------------------------------
def _compacted_file(tmp_path: Path, count: int) -> tuple[Path, list[bytes]]:
    """A compacted file of ``count`` single-record batches, base offsets 0, 3, 6, ... (gaps
    between them, as cleaning leaves), every 7th one larger than the index interval."""
    from rmqkafka.storage.compaction_store import CompactedWriter

    batches = []
    for i in range(count):
        value = b"v" * (5000 if i % 7 == 3 else 20)
        batch = keyed([(b"k%d" % i, value)], 1000)
        batches.append(struct.pack(">q", 3 * i) + batch[8:])  # the CRC does not cover the base
    writer = CompactedWriter(tmp_path, 3 * count, [])
    for batch in batches:
        writer.add(batch)
    writer.finish()
    writer.commit()
    return tmp_path, batches


def test_the_compacted_index_is_sparse_and_every_read_finds_its_batch(tmp_path):
    """The index of a compacted file holds one entry per INDEX_INTERVAL_BYTES of batches
    (Kafka's index.interval.bytes), not one per batch: a partition of many small batches,
    which its producers choose, costs memory in proportion to its bytes / 4 KiB. Every read
    still finds the batch holding an offset, or the first after it."""
    from rmqkafka.storage.compaction_store import INDEX_INTERVAL_BYTES

    directory, batches = _compacted_file(tmp_path, 3000)
    log = CompactedLog.open(directory)
    assert log.batch_count == 3000 and log.data_bytes == sum(map(len, batches))
    assert len(log.index.bases) <= log.data_bytes // INDEX_INTERVAL_BYTES + 2
    assert log.first_offset == 0 and log.end_offset == 9000
    for offset in [0, 1, 2, 3, 4, 299, 300, 301, 4500, 8996, 8997, 8998, 8999]:
        i = (offset + 2) // 3  # the batch holding the offset, or the next one
        want = batches[i] if i < len(batches) else None
        assert log.batch_at_or_after(offset) == want
        assert list(log.batches_from(offset)) == batches[i:]
        assert log.bytes_from(offset) == sum(map(len, batches[i:]))
        got, size, full = log.read(offset, 9000, 20_000, True)
        take, total = [], 0
        for b in batches[i:]:
            if total + len(b) > 20_000 and take:
                break
            take.append(b)
            total += len(b)
        assert (got, size) == (take, total) and full == (len(take) < len(batches) - i)
    got, _, _ = log.read(300, 306, 1 << 20, True)  # stops at ``stop``
    assert got == batches[100:102]
    assert log.read(301, 9000, 10, False) == ([], 0, True)
    log.close()


def test_queue_entries_that_split_a_batch_fail_the_cleaning(store, clock):
    """The cleaner reads the consume queue in its thread while retention may re-point a
    moved batch's entries on the loop: a read half way through sees the batch's offsets in
    two runs. Each run must be a whole batch, or the batch would be written twice into the
    compacted file (offsets going backwards for every consumer): such a cleaning fails and
    is tried again."""
    from rmqkafka.storage.consume_queue import ENTRY

    append(store, T, 0, keyed([(b"k%d" % k, b"v%d" % k) for k in range(5)], clock.now_ms()))
    clock.advance(1000)
    append(store, T, 0, keyed([(b"sentinel", b"s")], clock.now_ms()))
    clock.advance(1000)
    plog = store.partition(T, 0)
    position, size, code = plog.consume_queue.entry(0)
    copy = store.commitlog.append(plog.topic_id, 0, [plog.batch_at(0)])
    plog.consume_queue.rewrite(2, ENTRY.pack(copy, size, code) * 3)  # offsets 2..4 re-pointed, 0..1 not yet
    assert not clean(store)
    assert store.cleaner.failures == 1 and plog.cleaned_end == 0
    plog.consume_queue.rewrite(0, ENTRY.pack(copy, size, code) * 2)  # the re-pointing finished
    assert clean(store)
    offsets = [o for o, _, _ in records(store)]
    assert offsets == [0, 1, 2, 3, 4, 5]


def test_a_cleaning_asks_only_for_the_aborted_transactions_of_its_dirty_range(store, clock, monkeypatch):
    """The aborted transactions are listed on the loop at every pass. Those below the
    cleaned end were removed by the cleaning that covered them (and the txnindex keeps
    them until the log start passes), so only the dirty range's are asked for: a partition
    with a long history of aborts does not cost the loop all of them every 15 s."""
    pid = 77
    txn = dict(producer_id=pid, producer_epoch=0, transactional=True)
    for seq in range(3):
        append(store, T, 0, keyed([(b"a", b"aborted")], clock.now_ms(), base_sequence=seq, **txn))
        store.append_built(T, 0, marker(pid, 0, ABORT))
    clock.advance(1000)
    append(store, T, 0, keyed([(b"z", b"z")], clock.now_ms()))
    assert clean(store)
    plog = store.partition(T, 0)
    asked = []
    real = plog.txn_index.aborted_ranges
    monkeypatch.setattr(plog.txn_index, "aborted_ranges",
                        lambda start, upper: asked.append(start) or real(start, upper))
    append(store, T, 0, keyed([(b"z", b"z2")], clock.now_ms()))
    clock.advance(1000)
    append(store, T, 0, keyed([(b"y", b"y")], clock.now_ms()))
    assert clean(store)
    assert asked == [6]  # the first dirty offset, not the log start (0)
    assert latest(store) == {b"z": b"z2", b"y": b"y"}


def test_an_io_error_opening_a_compacted_file_does_not_set_it_aside(stores, store, clock, monkeypatch):
    """Only damage (a torn batch, a failed CRC) sets a compacted file aside: an I/O error
    reading it is raised (the store does not open), since setting the file aside would lose
    whatever retention has deleted from the commitlog below its end."""
    from rmqkafka.storage import compaction_store

    fill(store, clock)
    assert clean(store)
    directory = _clean_dir(store)
    names = sorted(os.listdir(directory))
    stores.crash(store)
    real_pread = os.pread

    def pread(fd, size, at):
        if at > 0 and os.readlink(f"/proc/self/fd/{fd}").endswith(SUFFIX):
            raise OSError(errno.EIO, "Input/output error")
        return real_pread(fd, size, at)

    monkeypatch.setattr(compaction_store.os, "pread", pread)
    with pytest.raises(OSError, match="Input/output error"):
        CompactedLog.open(directory)
    monkeypatch.undo()
    assert sorted(os.listdir(directory)) == names
    assert CompactedLog.open(directory) is not None


def test_a_pass_that_cleans_nothing_does_not_scan_the_dirty_range_again(store, clock, monkeypatch):
    """A partition below its min.cleanable.dirty.ratio is looked at every pass (15 s): the
    dirty batches found by the last pass are kept (they only grow at the end), so a pass
    reads only the entries appended since (100,000 dirty batches cost 2 s of the cleaner
    thread, holding the GIL, at every pass). A retention move, which re-points entries,
    makes the next pass scan again."""
    from rmqkafka.storage import compaction_cleaner

    fill(store, clock, rounds=4, keys=3)
    lazy = CompactionSettings(segment_ms=1, min_cleanable_dirty_ratio=1.0)  # dirt alone is never enough
    assert clean(store)  # the first cleaning (no clean bytes yet: ratio 1)
    fill(store, clock, rounds=4, keys=3)
    scanned = []
    real = compaction_cleaner._Reader._dirty

    def counted(self, base, nxt, position, size):
        scanned.append(base)
        return real(self, base, nxt, position, size)

    monkeypatch.setattr(compaction_cleaner._Reader, "_dirty", counted)
    assert not clean(store, settings=lazy)
    assert scanned == [13, 16, 19, 22, 25]  # (12 was found by the cleaning: the active segment then)
    scanned.clear()
    assert not clean(store, settings=lazy)
    assert scanned == []  # nothing new: nothing read
    append(store, T, 0, keyed([(b"k1", b"new")], clock.now_ms()))
    assert not clean(store, settings=lazy)
    assert len(scanned) == 1  # only the new batch
    store.retention.stats.batches_moved += 1  # what a move's re-pointing counts
    scanned.clear()
    assert not clean(store, settings=lazy)
    assert scanned == [12, 13, 16, 19, 22, 25, 26]  # every dirty batch again
    assert clean(store)  # the cached scan cleans as a fresh one would
    assert latest(store)[b"k1"] == b"new"
