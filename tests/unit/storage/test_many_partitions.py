"""A topics.json written by an older version or by hand with a huge partition count
(issue 12: "open partition files lazily, and never let metadata make the broker
unstartable"). The store starts, a partition's files are opened (and created) only when it
is first written, so the partitions never used cost no descriptor and no file, and a
produce and a fetch on one of them work."""

from __future__ import annotations

import json
import os
import uuid

from batches import make_batch, values_of
from rmqkafka.storage.txn_index import MAGIC, SLOT, VERSION
from storage_helpers import append, read_all

PARTITIONS = 30_000  # above the default max_partitions (10,000): an edited file


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_huge_partition_count_in_topics_json_still_starts(stores):
    stores.data_dir.mkdir(parents=True)
    (stores.data_dir / "topics.json").write_text(json.dumps(
        {"big": {"id": str(uuid.uuid4()), "partitions": PARTITIONS, "configs": {}}}))
    before = open_fds()
    store = stores.open()
    assert open_fds() - before < 50
    assert len(store.partitions()) < 10  # nothing is built for a partition never used

    assert append(store, "big", 12_345, make_batch([b"x", b"y"])).base_offset == 0
    assert [v for _, v in values_of(read_all(store, "big", 12_345))] == [b"x", b"y"]
    plog = store.partition("big", 29_999)  # an unused one answers without files
    assert (plog.log_start_offset, plog.next_offset) == (0, 0)
    assert plog.read(0, 1 << 20, True).batches == []
    assert open_fds() - before < 50
    assert len(list((stores.data_dir / "consumequeue").rglob("*"))) < 10
    stores.close(store)

    store = stores.open()  # after a clean stop, and after a crash
    assert [v for _, v in values_of(read_all(store, "big", 12_345))] == [b"x", b"y"]
    assert append(store, "big", 7, make_batch([b"z"])).base_offset == 0
    stores.crash(store)
    store = stores.open()
    assert [v for _, v in values_of(read_all(store, "big", 7))] == [b"z"]
    assert store.partition("big", 12_345).next_offset == 2
    assert open_fds() - before < 50


def test_empty_index_files_of_an_older_version_hold_no_descriptor(stores):
    """Older versions made a directory, an empty time index and a header-only txnindex for
    every partition at creation: those partitions must not hold descriptors either."""
    store = stores.open()
    store.create_topic("old", 300, {})
    append(store, "old", 0, make_batch([b"a"]))
    directory = store.partition("old", 0).directory
    stores.close(store)
    header = SLOT.pack(MAGIC, VERSION, 0, 0)  # what an older version wrote at creation
    for p in range(1, 300):
        d = directory.parent / str(p)
        d.mkdir()
        (d / "timeindex").write_bytes(b"")
        (d / "txnindex").write_bytes(header)
    before = open_fds()
    store = stores.open()
    assert open_fds() - before < 20
    assert append(store, "old", 5, make_batch([b"b"])).base_offset == 0
    assert [v for _, v in values_of(read_all(store, "old", 5))] == [b"b"]
    assert [v for _, v in values_of(read_all(store, "old", 0))] == [b"a"]
