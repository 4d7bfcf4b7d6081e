"""A consume-queue file damaged while the broker was stopped (issue: 60 random bytes made
the first 3,753 offsets unreachable with no log line; zeros made 201 records unreadable).
Every entry is checked against the commitlog entry it points at (header CRC, partition,
size, offsets, batch CRC) before it is used: a damaged one is refused and logged, never
served as another batch or looped on, and the damaged entries around it are rebuilt from
the commitlog while the store serves (issue 12: "rebuilt when wrong"; it used to take a
restart). A rebuilt queue is byte for byte what the appends wrote."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from batches import make_batch, values_of
from rmqkafka.storage.errors import CorruptIndexError
from storage_helpers import append, read_all


def queue_file(plog):
    [queue] = [f for f in plog.directory.iterdir() if f.name[0].isdigit()]
    return queue


def damage_entries(path, first: int, count: int, how: str) -> None:
    data = bytearray(path.read_bytes())
    at, end = first * 20, min(len(data), (first + count) * 20)
    data[at:end] = os.urandom(end - at) if how == "random" else bytes(end - at)
    path.write_bytes(bytes(data))


def fill(store, topics=("t", "u"), batches: int = 60, per_batch: int = 1) -> None:
    for topic in topics:
        store.create_topic(topic, 1, {})
    for i in range(batches):
        for topic in topics:
            values = [b"%s%d-%d" % (topic.encode(), i, k) for k in range(per_batch)]
            append(store, topic, 0, make_batch(values, tags=[f"tag{i % 3}"] * per_batch))


def reopened_damaged(stores, batches: int, first: int, count: int, how: str, topics=("t",), **config):
    """A store whose topic ``t`` had ``count`` consume-queue entries from ``first`` damaged
    while it was stopped, open again."""
    store = stores.open(**config)
    fill(store, topics=topics, batches=batches)
    queue = queue_file(store.partition("t", 0))
    stores.close(store)
    damage_entries(queue, first, count, how)
    return stores.open()


def consume(store, topic: str) -> list[bytes]:
    """Every value from the log start to the end, fetch after fetch as a consumer reads (one
    read may stop early before a damaged entry claiming a huge batch; the next meets it)."""
    plog = store.partition(topic, 0)
    offset, batches = plog.log_start_offset, []
    while offset < plog.next_offset:
        got = plog.read(offset, 1 << 20, True).batches
        batches.extend(got)
        offset = int.from_bytes(got[-1][:8], "big") + int.from_bytes(got[-1][23:27], "big") + 1
    return [v for _, v in values_of(batches)]


async def read_until_repaired(store, topic: str) -> list[bytes]:
    """What a consumer sees: KAFKA_STORAGE_ERROR (CorruptIndexError) while the entries are
    damaged, then, retrying after the repair, every record."""
    plog = store.partition(topic, 0)
    refused = 0
    while True:
        try:
            return consume(store, topic)
        except CorruptIndexError:
            refused += 1
            assert refused < 5, "the damaged entries were not repaired"
            await store.wait_repairs()
            assert plog is store.partition(topic, 0)


@pytest.mark.parametrize("damage", ["random", "zeros"])
async def test_a_damaged_consume_queue_is_repaired_while_serving(stores, damage, caplog):
    store = stores.open(consume_queue_entries_per_file=1000)
    fill(store)
    expected = [v for _, v in values_of(read_all(store, "t", 0))]
    queue = queue_file(store.partition("t", 0))
    original = queue.read_bytes()
    stores.close(store)
    data = bytearray(original)
    data[400:460] = os.urandom(60) if damage == "random" else bytes(60)  # entries 20..22
    queue.write_bytes(bytes(data))

    store = stores.open()
    plog = store.partition("t", 0)
    before_damage = [values_of(plog.read(o, 1, True, max_offset=o + 1).batches)[0][1] for o in range(20)]
    assert before_damage == expected[:20]  # the entries before the damage are fine
    with pytest.raises(CorruptIndexError):
        plog.read(20, 1 << 20, True)
    assert "does not point at its batch" in caplog.text
    with pytest.raises(CorruptIndexError):  # refused while the repair runs, not served
        plog.batch_at(21)
    await store.wait_repairs()
    assert "offsets 20..22 rebuilt from the commitlog" in caplog.text
    assert [v for _, v in values_of(read_all(store, "t", 0))] == expected
    assert queue.read_bytes() == original
    assert not (stores.data_dir / "rebuild_indexes").exists()
    assert [v for _, v in values_of(read_all(store, "u", 0))] == [b"u%d-0" % i for i in range(60)]
    assert append(store, "t", 0, make_batch([b"after"])).base_offset == 60
    await stores.aclose(store)

    caplog.clear()
    store = stores.open()
    assert "rebuilding" not in caplog.text
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [*expected, b"after"]


@pytest.mark.parametrize("where", ["first", "inside-batches", "last", "all"])
@pytest.mark.parametrize("how", ["random", "zeros"])
async def test_any_run_of_damaged_entries_is_rebuilt_as_it_was(stores, where, how):
    """Runs at the queue's start (no good entry below), inside batches of 3 records (the
    good entry below and above share a batch with damaged ones), at its end (none above),
    or everywhere: each is rebuilt byte for byte, tag codes included, across queue files."""
    store = stores.open(consume_queue_entries_per_file=50)
    fill(store, per_batch=3)  # 180 offsets in 4 queue files of 50
    expected = [v for _, v in values_of(read_all(store, "t", 0))]
    plog = store.partition("t", 0)
    files = sorted(f for f in plog.directory.iterdir() if f.name[0].isdigit())
    originals = {f: f.read_bytes() for f in files}
    stores.close(store)
    first, count = {"first": (0, 7), "inside-batches": (31, 8), "last": (24, 6), "all": (0, 50)}[where]
    for f in (files[:1] if where != "last" else files[-1:]) if where != "all" else files:
        damage_entries(f, first, count, how)

    store = stores.open()
    assert await read_until_repaired(store, "t") == expected
    assert {f: f.read_bytes() for f in files} == originals


@pytest.mark.parametrize("entry", [(-3, 80, 0), (-(1 << 62), -5, 7)], ids=["negative", "nonsense"])
async def test_a_damaged_first_entry_does_not_move_the_log_start(stores, entry):
    """At start the log start offset follows the first batch retention kept, found by a binary
    search over entry positions: a damaged first entry with a negative position made that
    search skip the first batches (a random first entry does this half the time)."""
    import struct

    store = stores.open()
    fill(store, topics=("t",), batches=10, per_batch=2)
    queue = queue_file(store.partition("t", 0))
    stores.close(store)
    data = bytearray(queue.read_bytes())
    struct.pack_into(">qiq", data, 0, *entry)
    queue.write_bytes(bytes(data))
    store = stores.open()
    assert store.partition("t", 0).log_start_offset == 0
    assert await read_until_repaired(store, "t") == [b"t%d-%d" % (i, k) for i in range(10) for k in range(2)]


async def test_entries_pointing_at_another_partitions_batch_are_repaired(stores):
    """A consume-queue entry swapped for one of another partition (same sizes, valid CRCs):
    the commitlog entry header names its partition."""
    store = stores.open()
    store.create_topic("t", 2, {})
    for i in range(5):
        append(store, "t", 0, make_batch([b"a%d" % i]))
        append(store, "t", 1, make_batch([b"b%d" % i]))
    p0, p1 = store.partition("t", 0), store.partition("t", 1)
    stores.close(store)
    q0, q1 = queue_file(p0), queue_file(p1)
    data = bytearray(q0.read_bytes())
    data[40:60] = q1.read_bytes()[40:60]  # offset 2 of partition 0 -> partition 1's batch
    q0.write_bytes(bytes(data))
    store = stores.open()
    with pytest.raises(CorruptIndexError):
        store.partition("t", 0).read(2, 1 << 20, True)
    await store.wait_repairs()
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [b"a%d" % i for i in range(5)]


def test_without_an_event_loop_the_repair_happens_at_once(stores):
    """A store used outside the event loop (tools, tests): the read that meets the damage is
    refused and the repair is done before it returns."""
    store = reopened_damaged(stores, 10, 3, 2, "zeros")
    with pytest.raises(CorruptIndexError):
        read_all(store, "t", 0)
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [b"t%d-0" % i for i in range(10)]


async def test_appends_and_other_reads_go_on_while_a_repair_runs(stores):
    """The repair works in slices between which the loop serves others: appends to the same
    partition land after the damaged run and are not touched by it."""
    store = reopened_damaged(stores, 40, 5, 30, "random", topics=("t", "u"), index_repair_slice_entries=2)
    with pytest.raises(CorruptIndexError):
        consume(store, "t")
    slices = 0
    while store._repairs:
        slices += 1
        append(store, "t", 0, make_batch([b"during%d" % slices]))
        assert [v for _, v in values_of(read_all(store, "u", 0))][-1] == b"u39-0"
        await asyncio.sleep(0)
    assert slices > 10
    values = await read_until_repaired(store, "t")
    assert values == [b"t%d-0" % i for i in range(40)] + [b"during%d" % i for i in range(1, slices + 1)]


async def test_a_repair_stops_when_its_topic_is_deleted(stores, caplog):
    store = reopened_damaged(stores, 40, 5, 30, "zeros", index_repair_slice_entries=2)
    with pytest.raises(CorruptIndexError):
        read_all(store, "t", 0)
    await asyncio.sleep(0)
    store.delete_topic("t")
    caplog.set_level(logging.WARNING)
    await store.wait_repairs()
    assert "rebuilt" not in caplog.text and "failed" not in caplog.text
    assert not (stores.data_dir / "rebuild_indexes").exists()


async def test_a_repair_that_fails_marks_every_index_for_a_rebuild(stores, monkeypatch, caplog):
    store = reopened_damaged(stores, 10, 3, 2, "zeros")
    plog = store.partition("t", 0)

    def broken(*_args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(plog.consume_queue, "rewrite", broken)
    with pytest.raises(CorruptIndexError):
        read_all(store, "t", 0)
    await store.wait_repairs()
    assert "rebuilding damaged consume-queue entries failed" in caplog.text
    assert (stores.data_dir / "rebuild_indexes").exists()
    monkeypatch.undo()
    await stores.aclose(store)
    store = stores.open()
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [b"t%d-0" % i for i in range(10)]


@pytest.mark.parametrize("entry", [(-5, -80, 0), (1 << 40, 80, 0), (0, 0, 0)], ids=["negative", "beyond", "zeros"])
def test_bytes_available_never_loops_or_fails_on_a_damaged_entry(stores, entry):
    """What a long-polling Fetch asks before it reads: a damaged entry counts as enough (so
    the fetch goes on to read, which refuses it), never an endless loop or an exception."""
    import struct

    store = stores.open()
    store.create_topic("t", 1, {})
    for i in range(5):
        append(store, "t", 0, make_batch([b"v%d" % i]))
    plog = store.partition("t", 0)
    directory = plog.directory
    stores.close(store)
    [queue] = [f for f in directory.iterdir() if f.name[0].isdigit()]
    data = bytearray(queue.read_bytes())
    struct.pack_into(">qiq", data, 2 * 20, *entry)
    queue.write_bytes(bytes(data))
    store = stores.open()
    assert store.partition("t", 0).bytes_available(0, 1 << 20) == 1 << 20
    with pytest.raises(CorruptIndexError):
        store.partition("t", 0).read(0, 1 << 20, True)
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("entry", [(1 << 60, 80, 0), (-7, 80, 0), (0, 0, 0)], ids=["huge", "negative", "zeros"])
async def test_recovery_after_a_crash_is_not_misled_by_a_damaged_entry(stores, entry):
    """Recovery cuts each queue back to what the checkpoint covered and re-indexes the tail.
    It used to find that cut with a binary search over entry positions, which a damaged entry
    in the middle sent elsewhere: valid entries were dropped, the tail's batches no longer
    followed on ("expected offset ...; skipped") and their offsets were handed out again."""
    import struct

    from storage_helpers import sync_checkpoint

    store = stores.open()
    fill(store, topics=("t",), batches=100)
    sync_checkpoint(store)
    for i in range(100, 120):
        append(store, "t", 0, make_batch([b"t%d-0" % i]))
    queue = queue_file(store.partition("t", 0))
    stores.crash(store)
    data = bytearray(queue.read_bytes())
    struct.pack_into(">qiq", data, 50 * 20, *entry)
    queue.write_bytes(bytes(data))

    store = stores.open()
    assert store.partition("t", 0).next_offset == 120
    assert await read_until_repaired(store, "t") == [b"t%d-0" % i for i in range(120)]
    assert append(store, "t", 0, make_batch([b"after"])).base_offset == 120


@pytest.mark.parametrize("entry", [(-7, 80, 0), (0, 0, 0)], ids=["negative", "zeros"])
async def test_a_damaged_entry_does_not_hide_records_when_retention_moved_the_start(stores, entry):
    """After retention deleted segments and a crash before a checkpoint recorded the new log
    start, start-up finds the first surviving offset by a binary search over positions. A
    damaged entry among the surviving ones made it land past valid records, which were then
    hidden below the log start."""
    import struct

    store = stores.open(segment_bytes=600, retention_ms=None, consume_queue_entries_per_file=1000)
    fill(store, topics=("t",), batches=60)
    stores.close(store)
    store = stores.open(retention_bytes=1500)
    assert store.apply_retention() > 0
    kept = store.partition("t", 0).log_start_offset
    assert 0 < kept < 50
    queue = queue_file(store.partition("t", 0))
    stores.crash(store)  # the checkpoint still says log start 0
    data = bytearray(queue.read_bytes())
    for offset in range(kept, (kept + 60) // 2):  # a run: the search surely meets one
        struct.pack_into(">qiq", data, offset * 20, *entry)
    queue.write_bytes(bytes(data))

    store = stores.open(retention_bytes=None)
    assert store.partition("t", 0).log_start_offset <= kept
    values = await read_until_repaired(store, "t")
    assert values[-(60 - kept):] == [b"t%d-0" % i for i in range(kept, 60)]
