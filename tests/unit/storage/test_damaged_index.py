"""A consume-queue file damaged while the broker was stopped (issue: 60 random bytes made
the first 3,753 offsets unreachable with no log line; zeros made 201 records unreadable).
Every entry is checked against the commitlog entry it points at (header CRC, partition,
size, offsets) before it is used: a damaged one is refused and logged, never served as
another batch or looped on, and the next start rebuilds the indexes from the commitlog."""

from __future__ import annotations

import os

import pytest

from batches import make_batch, values_of
from rmqkafka.storage.errors import CorruptIndexError
from storage_helpers import append, read_all


@pytest.mark.parametrize("damage", ["random", "zeros"])
def test_a_damaged_consume_queue_is_refused_then_rebuilt(stores, damage, caplog):
    store = stores.open(consume_queue_entries_per_file=1000)
    store.create_topic("t", 1, {})
    store.create_topic("u", 1, {})
    for i in range(60):
        append(store, "t", 0, make_batch([b"t%d" % i]))
        append(store, "u", 0, make_batch([b"u%d" % i]))
    expected = [v for _, v in values_of(read_all(store, "t", 0))]
    directory = store.partition("t", 0).directory
    stores.close(store)

    [queue] = [f for f in directory.iterdir() if f.suffix != "" and f.name[0].isdigit()]
    data = bytearray(queue.read_bytes())
    at = 20 * 20  # entry 20 (20 bytes each)
    data[at:at + 60] = os.urandom(60) if damage == "random" else bytes(60)
    queue.write_bytes(bytes(data))

    store = stores.open()
    plog = store.partition("t", 0)
    before_damage = [values_of(plog.read(o, 1, True, max_offset=o + 1).batches)[0][1] for o in range(20)]
    assert before_damage == expected[:20]  # the entries before the damage are fine
    with pytest.raises(CorruptIndexError):
        plog.read(20, 1 << 20, True)
    with pytest.raises(CorruptIndexError):
        plog.batch_at(21)
    assert "does not point at its batch" in caplog.text
    assert (stores.data_dir / "rebuild_indexes").exists()
    assert [v for _, v in values_of(read_all(store, "u", 0))] == [b"u%d" % i for i in range(60)]
    stores.close(store)

    store = stores.open()
    assert not (stores.data_dir / "rebuild_indexes").exists()
    assert [v for _, v in values_of(read_all(store, "t", 0))] == expected
    assert append(store, "t", 0, make_batch([b"after"])).base_offset == 60


def test_entries_pointing_at_another_partitions_batch_are_refused(stores):
    """A consume-queue entry swapped for one of another partition (same sizes, valid CRCs):
    the commitlog entry header names its partition."""
    store = stores.open()
    store.create_topic("t", 2, {})
    for i in range(5):
        append(store, "t", 0, make_batch([b"a%d" % i]))
        append(store, "t", 1, make_batch([b"b%d" % i]))
    p0, p1 = store.partition("t", 0), store.partition("t", 1)
    stores.close(store)
    [q0] = [f for f in p0.directory.iterdir() if f.name[0].isdigit()]
    [q1] = [f for f in p1.directory.iterdir() if f.name[0].isdigit()]
    data = bytearray(q0.read_bytes())
    data[40:60] = q1.read_bytes()[40:60]  # offset 2 of partition 0 -> partition 1's batch
    q0.write_bytes(bytes(data))
    store = stores.open()
    with pytest.raises(CorruptIndexError):
        store.partition("t", 0).read(2, 1 << 20, True)


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
