"""Crash recovery: a MessageStore dropped without close(), then reopened on the same directory.

A crash is simulated by closing the old store's file descriptors without flushing, without a
checkpoint and without the clean-shutdown marker (storage_helpers.StoreFactory.crash): what
was written stays (as after a killed process, whose writes live in the page cache), and
damage is added by hand where a test needs a torn tail.
"""

from __future__ import annotations

import os
import random

import pytest

from batches import GZIP, flip, idempotent, make_batch, values_of
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.checkpoint_file import read_checkpoint
from rmqkafka.storage.commitlog import ENTRY_HEADER_SIZE
from rmqkafka.storage.errors import OutOfOrderSequenceError
from rmqkafka.storage.tag_code import java_string_hash
from storage_helpers import append, read_all, sync_checkpoint


def vals(n: int, prefix: str) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def contents(store, topic="t", p=0):
    return values_of(read_all(store, topic, p))


async def started(stores, **kw):
    store = stores.open(flush_interval_ms=3_600_000, **kw)
    await store.start()
    return store


async def test_checkpoint_older_than_the_tail(stores):
    store = await started(stores, segment_bytes=600)
    store.create_topic("t", 2, {})
    expected = {0: [], 1: []}
    for i in range(6):
        append(store, "t", i % 2, make_batch(vals(2, f"pre{i}-")))
        expected[i % 2] += vals(2, f"pre{i}-")
    await store.checkpoint()
    checkpoint = read_checkpoint(stores.data_dir / "checkpoint.json")["position"]
    segments_at_checkpoint = len(store.commitlog.segments)
    for i in range(12):  # after the checkpoint, rolling segments
        append(store, "t", i % 2, make_batch(vals(3, f"post{i}-"), codec=GZIP if i % 3 else 0))
        expected[i % 2] += vals(3, f"post{i}-")
    assert len(store.commitlog.segments) > segments_at_checkpoint
    end = store.commitlog.end_position
    stores.crash(store)

    store = stores.open()
    assert not store.clean_start
    assert store.recovered_entries == 12
    assert store.commitlog.end_position == end
    new_checkpoint = read_checkpoint(stores.data_dir / "checkpoint.json")["position"]
    assert new_checkpoint == end > checkpoint
    for p in (0, 1):
        got = contents(store, "t", p)
        assert got == list(enumerate(expected[p]))  # no gaps, no duplicates
        plog = store.partition("t", p)
        assert plog.next_offset == len(expected[p])
        assert append(store, "t", p, make_batch(1)).base_offset == len(expected[p])


def test_crash_without_any_checkpoint_after_open(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    for i in range(5):
        append(store, "t", 0, make_batch(vals(2, f"{i}-")))
    stores.crash(store)
    store = stores.open()
    assert store.recovered_entries == 5
    assert [v for _, v in contents(store)] == [v for i in range(5) for v in vals(2, f"{i}-")]


def test_crash_twice_in_a_row(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(3))
    stores.crash(store)
    store = stores.open()
    append(store, "t", 0, make_batch(2))
    stores.crash(store)
    store = stores.open()
    assert [o for o, _ in contents(store)] == [0, 1, 2, 3, 4]


async def test_idempotent_duplicate_across_a_crash(stores):
    store = await started(stores)
    store.create_topic("t", 1, {})
    batches = [idempotent(2, 21, 0, seq) for seq in range(0, 12, 2)]
    append(store, "t", 0, batches[0])
    await store.checkpoint()  # the producer snapshot knows only the first batch
    for b in batches[1:]:
        append(store, "t", 0, b)
    stores.crash(store)

    store = stores.open()
    for i in range(1, 6):  # retries of batches written after the checkpoint
        r = append(store, "t", 0, batches[i])
        assert (r.duplicate, r.base_offset) == (True, 2 * i)
    with pytest.raises(OutOfOrderSequenceError):
        append(store, "t", 0, idempotent(1, 21, 0, 13))
    assert append(store, "t", 0, idempotent(1, 21, 0, 12)).base_offset == 12
    assert store.partition("t", 0).next_offset == 13


def test_idempotent_state_rebuilt_without_any_checkpoint(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    b = idempotent(1, 3, 0, 0)
    append(store, "t", 0, b)
    stores.crash(store)
    (stores.data_dir / "checkpoint.json").unlink()
    store = stores.open()
    assert append(store, "t", 0, b).duplicate


@pytest.mark.parametrize("tail", [b"\x00" * 64, b"\x00\x00\x00\x90RMK1" + b"\xab" * 40, b"\x07"])
def test_torn_tail_written_by_hand_is_truncated_on_open(stores, tail):
    store = stores.open(segment_bytes=700)
    store.create_topic("t", 1, {})
    for i in range(8):
        append(store, "t", 0, make_batch(vals(2, f"{i}-")))
    end = store.commitlog.end_position
    path = store.commitlog.segments[-1].path
    stores.crash(store)
    with open(path, "ab") as f:
        f.write(tail)

    store = stores.open()
    assert store.commitlog.end_position == end
    assert path.stat().st_size == end - store.commitlog.segments[-1].base_position
    assert [o for o, _ in contents(store)] == list(range(16))
    r = append(store, "t", 0, make_batch(1))
    assert r.base_offset == 16
    assert store.commitlog.read(end + ENTRY_HEADER_SIZE, 12)[:8] == (16).to_bytes(8, "big")


def test_damaged_last_batch_is_dropped_from_log_and_index(stores):
    """The consume queue had an entry for the batch (it was written before the crash); the
    commitlog copy is damaged, so the batch and its entries go and offsets are reused."""
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(vals(2, "a")))
    r = append(store, "t", 0, make_batch(vals(3, "b"), tags=["x", "y", "z"]))
    assert store.partition("t", 0).next_offset == 5
    batch_pos = store.commitlog.end_position - len(read_all(store, "t", 0)[-1])
    path = store.commitlog.segments[-1].path
    local = batch_pos - store.commitlog.segments[-1].base_position
    stores.crash(store)
    path.write_bytes(flip(path.read_bytes(), local + 40))

    store = stores.open()
    assert store.commitlog.end_position == batch_pos - ENTRY_HEADER_SIZE
    plog = store.partition("t", 0)
    assert plog.next_offset == 2
    assert contents(store) == list(enumerate(vals(2, "a")))
    assert r.base_offset == 2  # the damaged batch had offsets 2..4; they are handed out again
    assert append(store, "t", 0, make_batch(vals(1, "c"), tags=["q"])).base_offset == 2
    assert plog.consume_queue.entry(2)[2] == java_string_hash("q")


async def test_deleted_topic_entries_skipped_on_recovery(stores):
    store = await started(stores)
    old = store.create_topic("t", 1, {})
    keep = store.create_topic("k", 1, {})
    append(store, "t", 0, make_batch(vals(2, "old")))
    await store.checkpoint()
    append(store, "t", 0, make_batch(vals(3, "old-after")))  # replayed by recovery
    append(store, "k", 0, make_batch(vals(1, "k")))
    store.delete_topic("t")
    new = store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(vals(2, "new")))
    append(store, "k", 0, make_batch(vals(1, "k2")))
    stores.crash(store)

    store = stores.open()
    assert store.topics.get("t").topic_id == new.topic_id != old.topic_id
    assert store.topics.get("k").topic_id == keep.topic_id
    assert contents(store, "t") == list(enumerate(vals(2, "new")))
    assert contents(store, "k") == [(0, b"k0"), (1, b"k20")]
    assert not (stores.data_dir / "consumequeue" / str(old.topic_id)).exists()


def test_deleted_topic_without_recreation(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(2))
    store.delete_topic("t")
    stores.crash(store)
    store = stores.open()
    assert store.topics.get("t") is None and store.partitions() == {}
    assert store.create_topic("t", 1, {}) and store.partition("t", 0).next_offset == 0


async def test_topics_and_partitions_created_after_the_checkpoint(stores):
    store = await started(stores)
    store.create_topic("a", 1, {})
    await store.checkpoint()
    store.create_topic("b", 1, {})
    append(store, "b", 0, make_batch(vals(2, "b")))
    store.add_partitions("a", 3)
    append(store, "a", 2, make_batch(vals(1, "a2")))
    stores.crash(store)
    store = stores.open()
    assert contents(store, "b") == list(enumerate(vals(2, "b")))
    assert contents(store, "a", 2) == [(0, b"a20")]
    assert store.partition("a", 1).next_offset == 0


def test_log_append_time_batches_are_replayed_as_stored(stores, clock):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(2, timestamps=[1, 2]), log_append_time=True)
    stamped = clock.now_ms()
    stores.crash(store)
    store = stores.open()
    (batch,) = read_all(store, "t", 0)
    assert rb.read_info(batch).max_timestamp == stamped
    assert store.partition("t", 0).max_timestamp() == (0, stamped)
    assert store.partition("t", 0).offset_for_timestamp(stamped) == (0, stamped)


def test_unreadable_checkpoint_means_full_recovery(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(3), make_batch(2))
    stores.close(store)
    (stores.data_dir / "checkpoint.json").write_text("{not json")
    store = stores.open()
    assert not store.clean_start
    assert [o for o, _ in contents(store)] == [0, 1, 2, 3, 4]


def test_clean_marker_with_a_stale_checkpoint_still_recovers(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(1))
    stores.crash(store)
    (stores.data_dir / "clean_shutdown").touch()  # says clean, but the checkpoint is older
    store = stores.open()
    assert not store.clean_start
    assert store.partition("t", 0).next_offset == 1


def test_open_after_a_crash_fsyncs_the_recovered_tail(stores, monkeypatch):
    """After a process crash the tail is only in the page cache; open() writes a checkpoint
    claiming it, so it must fsync the active segment first."""
    store = stores.open(segment_bytes=500)
    store.create_topic("t", 1, {})
    for _ in range(8):
        append(store, "t", 0, make_batch(2))
    active = store.commitlog.segments[-1].path
    stores.crash(store)
    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    store = stores.open()
    assert str(active) in synced


def test_random_crashes_against_a_model(stores):
    """Random appends to three partitions with random clean closes, crashes and
    checkpoints; after every reopen the store holds exactly what was acknowledged."""
    rng = random.Random(1234)
    store = stores.open(segment_bytes=900)
    store.create_topic("t", 3, {})
    model: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for step in range(120):
        p = rng.randrange(3)
        n = rng.randint(1, 4)
        v = [f"{step}-{i}".encode() for i in range(n)]
        codec = rng.choice([0, 0, 1, 4])
        tags = [rng.choice([None, "A", "B"]) for _ in range(n)]
        r = append(store, "t", p, make_batch(v, codec=codec, tags=tags))
        assert r.base_offset == len(model[p])
        model[p] += v
        action = rng.random()
        if action < 0.08:
            stores.crash(store)
            store = stores.open()
        elif action < 0.12:
            stores.close(store)
            store = stores.open()
            assert store.clean_start
        elif action < 0.2:
            sync_checkpoint(store)
    stores.crash(store)
    store = stores.open()
    for p in (0, 1, 2):
        assert contents(store, "t", p) == list(enumerate(model[p]))


async def test_garbage_in_derived_files_after_the_checkpoint(stores):
    """After an OS crash, index entries written after the checkpoint may read back as
    zeros (the file length made it to disk, the data did not). Recovery must not trust
    anything derived beyond what the checkpoint made durable."""
    store = await started(stores)
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(vals(2, "a"), timestamps=[10, 20]))
    await store.checkpoint()
    append(store, "t", 0, make_batch(vals(2, "b"), timestamps=[30, 40]))
    append(store, "t", 0, make_batch(vals(1, "c"), timestamps=[50]))
    plog = store.partition("t", 0)
    cq_files = sorted(plog.directory.glob("*.cq"))
    ti_path = plog.directory / "timeindex"
    stores.crash(store)
    # Entries 2..4 and the last two time-index entries read back as zeros.
    with open(cq_files[-1], "r+b") as f:
        f.seek(2 * 20)
        f.write(b"\x00" * 3 * 20)
    with open(ti_path, "r+b") as f:
        f.seek(16)
        f.write(b"\x00" * 32)

    store = stores.open()
    plog = store.partition("t", 0)
    assert contents(store) == list(enumerate(vals(2, "a") + vals(2, "b") + vals(1, "c")))
    assert [plog.consume_queue.entry(o)[0] for o in range(5)] == sorted(
        plog.consume_queue.entry(o)[0] for o in range(5)
    )
    assert plog.offset_for_timestamp(25) == (2, 30)
    assert plog.offset_for_timestamp(45) == (4, 50)
    assert plog.max_timestamp() == (4, 50)


def test_replay_of_a_stored_batch_that_does_not_parse_keeps_offsets(stores, caplog):
    """Such a batch is refused on append today, but a log written before that check (or
    by another version) may hold one: replay indexes it without tags instead of failing
    to open or shifting every later offset."""
    from batches import with_field

    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    append(store, "t", 0, make_batch(2))
    lying = with_field(with_field(make_batch(3, tags=["a", "b", "c"]), 57, ">i", 4), 23, ">i", 3)
    parts = rb.stored_parts(memoryview(lying), plog.next_offset, None)
    store.commitlog.append(plog.topic_id, 0, parts)  # behind the store's back
    stores.crash(store)
    store = stores.open()
    assert store.partition("t", 0).next_offset == 6
    assert "does not parse" in caplog.text
    assert append(store, "t", 0, make_batch(1)).base_offset == 6


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_lost_consume_queues_are_rebuilt_from_the_commitlog(stores, how):
    """Derived files can be rebuilt: with consumequeue/ gone but checkpoint.json intact
    (it claims the index is durable), the store must not trust the checkpoint."""
    import shutil

    store = stores.open(segment_bytes=700)
    store.create_topic("t", 2, {})
    store.create_topic("u", 1, {})
    expected = {0: [], 1: []}
    for i in range(10):
        append(store, "t", i % 2, make_batch(vals(2, f"{i}-"), timestamps=[100 + i, 100 + i]))
        expected[i % 2] += vals(2, f"{i}-")
    append(store, "u", 0, make_batch(3))
    idem = idempotent(2, 77, 0, 0)
    append(store, "t", 0, idem)
    expected[0] += [b"value-0", b"value-1"]
    if how == "clean":
        stores.close(store)
    else:
        sync_checkpoint(store)  # a checkpoint that covers everything, then a crash
        stores.crash(store)
    shutil.rmtree(stores.data_dir / "consumequeue")

    store = stores.open()
    assert not store.clean_start
    for p in (0, 1):
        assert contents(store, "t", p) == list(enumerate(expected[p]))
    assert store.partition("u", 0).next_offset == 3
    assert store.partition("t", 1).offset_for_timestamp(105) == (4, 105)
    dup = append(store, "t", 0, idem)
    assert dup.duplicate and dup.base_offset == len(expected[0]) - 2
    assert append(store, "t", 0, make_batch(1)).base_offset == len(expected[0])


def test_lost_consume_queue_after_retention_restarts_at_the_first_surviving_offset(stores):
    import shutil

    store = stores.open(segment_bytes=600, retention_ms=None, consume_queue_entries_per_file=4)
    store.create_topic("t", 1, {})
    for i in range(20):
        append(store, "t", 0, make_batch(vals(2, f"{i}-")))
    stores.close(store)
    store = stores.open(retention_bytes=1500)
    assert store.apply_retention() > 0
    log_start = store.partition("t", 0).log_start_offset
    assert log_start > 0
    stores.close(store)
    shutil.rmtree(stores.data_dir / "consumequeue")

    store = stores.open(retention_bytes=None)
    plog = store.partition("t", 0)
    assert (plog.log_start_offset, plog.next_offset) == (log_start, 40)
    assert [o for o, _ in contents(store)] == list(range(log_start, 40))
    with pytest.raises(Exception):
        plog.read(log_start - 1, 100, True)
    stores.crash(store)
    store = stores.open()
    assert store.partition("t", 0).log_start_offset == log_start
    assert [o for o, _ in contents(store)] == list(range(log_start, 40))
    assert append(store, "t", 0, make_batch(1)).base_offset == 40
