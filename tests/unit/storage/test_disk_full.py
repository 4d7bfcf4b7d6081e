"""A write that fails half-way through an append (ENOSPC, EIO) takes nothing with it (issue:
the commitlog entry was written, the consume-queue write was short, the time-index write
failed, and the offset was handed out again: acknowledged records became unreadable and a
refused one was stored and served). The append is all or nothing; the next one, once there
is room, gets the same offset; reads and restarts see exactly the acknowledged records."""

from __future__ import annotations

import asyncio
import errno
import logging
import os

import pytest
from batches import make_batch, values_of
from rmqkafka.storage import commitlog as commitlog_module
from rmqkafka.storage import files as files_module
from storage_helpers import append, read_all

from bench.small_filesystem import lose_unsynced_index_entries


def full_disk(monkeypatch, module, after: int = 0, written: int | None = None):
    """Make ``module``'s os.pwrite / os.pwritev fail with ENOSPC after ``after`` more
    successful calls; with ``written``, the failing call first writes that many bytes (a
    short write, then the error on the next call)."""
    calls = {"n": 0}
    real_pwrite, real_pwritev = os.pwrite, os.pwritev

    def counted(real):
        def call(fd, data, at):
            calls["n"] += 1
            if calls["n"] > after:
                if written is not None and calls["n"] == after + 1:
                    flat = b"".join(bytes(d) for d in data) if isinstance(data, list) else bytes(data)
                    return real_pwrite(fd, flat[:written], at)
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, data, at)
        return call

    monkeypatch.setattr(module.os, "pwrite", counted(real_pwrite))
    monkeypatch.setattr(module.os, "pwritev", counted(real_pwritev))


def sizes(store) -> tuple:
    plog = store.partition("t", 0)
    directory = plog.directory
    return (store.commitlog.end_position, plog.next_offset,
            sorted((f.name, f.stat().st_size) for f in directory.iterdir()),
            sorted((f.name, f.stat().st_size) for f in (store.config.data_dir / "commitlog").iterdir()))


@pytest.mark.parametrize("where", ["commitlog", "commitlog-short", "consume-queue", "time-index"])
def test_an_append_that_fails_half_way_leaves_nothing(stores, monkeypatch, where):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch([b"a", b"b"]))
    before = sizes(store)
    if where == "commitlog":
        full_disk(monkeypatch, commitlog_module)
    elif where == "commitlog-short":
        full_disk(monkeypatch, commitlog_module, written=50)
    elif where == "consume-queue":
        full_disk(monkeypatch, files_module)
    else:  # the consume queue's write works, the time index's fails
        full_disk(monkeypatch, files_module, after=1)
    with pytest.raises(OSError):
        append(store, "t", 0, make_batch([b"refused"], timestamps=[1_800_000_000_000]))
    monkeypatch.undo()  # room again
    assert sizes(store) == before
    assert append(store, "t", 0, make_batch([b"c"])).base_offset == 2
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [b"a", b"b", b"c"]
    stores.crash(store)
    store = stores.open()
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [b"a", b"b", b"c"]
    assert append(store, "t", 0, make_batch([b"d"])).base_offset == 3


@pytest.mark.timeout(60)
def test_a_write_that_makes_no_progress_fails_the_append(stores, monkeypatch):
    """A short pwritev followed by a pwrite that writes nothing (and reports no error) fails
    the append and takes it back; it must not loop for ever on the event loop."""
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch([b"a"]))
    before = sizes(store)
    real_pwrite = os.pwrite

    def short_pwritev(fd, parts, at):
        return real_pwrite(fd, b"".join(bytes(p) for p in parts)[:10], at)

    monkeypatch.setattr(commitlog_module.os, "pwritev", short_pwritev)
    monkeypatch.setattr(commitlog_module.os, "pwrite", lambda fd, data, at: 0)
    with pytest.raises(OSError):
        append(store, "t", 0, make_batch([b"refused"]))
    monkeypatch.undo()
    assert sizes(store) == before
    assert append(store, "t", 0, make_batch([b"b"])).base_offset == 1
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [b"a", b"b"]


def no_space(monkeypatch):
    """Every write fails with ENOSPC, as on a full file system: pwrite / pwritev (see
    ``full_disk``), files written whole (write_json_atomically), and anything that needs a
    new file or directory (a new segment, a new index file, a hard link)."""
    full_disk(monkeypatch, files_module)

    def enospc(*_args, **_kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    real_open, real_os_open = open, os.open

    def write_open(path, mode="r", *args, **kw):
        if any(c in mode for c in "wax+"):
            enospc()
        return real_open(path, mode, *args, **kw)

    def os_open(path, flags, *args, **kw):
        if flags & os.O_CREAT and not os.path.exists(path):
            enospc()
        return real_os_open(path, flags, *args, **kw)

    def mkdir(path, *args, **kw):
        if os.path.exists(path):
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
        enospc()

    monkeypatch.setattr(files_module, "open", write_open, raising=False)
    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "link", enospc)


@pytest.mark.parametrize("stop", ["clean", "crash-after-checkpoint"])
async def test_the_store_starts_on_a_full_disk_and_writes_once_there_is_room(stores, monkeypatch, stop):
    """Issue 12: "resume writes when space returns, and start even when the disk is full".
    Opening needs no write: reads are served, appends fail with OSError (the adapter's
    KAFKA_STORAGE_ERROR) and change nothing, checkpoints fail and are retried; once there is
    room, appends work and a restart sees exactly what was acknowledged."""
    store = stores.open(segment_bytes=600)
    store.create_topic("t", 1, {})
    for i in range(6):
        append(store, "t", 0, make_batch([b"v%d" % i]))
    if stop == "clean":
        stores.close(store)
    else:
        from storage_helpers import sync_checkpoint
        sync_checkpoint(store)
        stores.crash(store)

    no_space(monkeypatch)
    store = stores.open()
    await store.start()
    expected = [b"v%d" % i for i in range(6)]
    assert [v for _, v in values_of(read_all(store, "t", 0))] == expected
    before = sizes(store)
    for _ in range(3):  # one of them needs a new segment
        with pytest.raises(OSError):
            append(store, "t", 0, make_batch([b"x" * 300]))
    with pytest.raises(OSError):
        store.create_topic("u", 1, {})
    with pytest.raises(OSError):
        await store.checkpoint()  # the loop logs it and retries; not an fsync failure
    assert store.failure is None
    assert sizes(store) == before

    monkeypatch.undo()  # room again
    assert append(store, "t", 0, make_batch([b"after"])).base_offset == 6
    await stores.aclose(store)
    store = stores.open()
    assert [v for _, v in values_of(read_all(store, "t", 0))] == [*expected, b"after"]


# -- a real file system that fills up (tests/conftest.py: small_fs) ---------------------------
def test_a_crash_that_left_an_unindexed_tail_starts_on_a_full_disk(small_fs, clock, caplog):
    """Issue 12: "start even when the disk is full". Recovery must write the index entries
    of the commitlog tail no checkpoint covered; on a full disk it could not, and the broker
    did not start until someone freed space. The disk reserve gives recovery that room;
    appends wait until the reserve can be made again."""
    from storage_helpers import StoreFactory, sync_checkpoint

    stores = StoreFactory(small_fs.path / "data", clock)
    try:
        store = stores.open(disk_reserve_bytes=1 << 20)
        store.create_topic("t", 4, {})
        for i in range(40):
            append(store, "t", i % 4, make_batch([b"c%d-%d" % (i, k) for k in range(50)]))
        sync_checkpoint(store)
        for i in range(160):  # the tail: 8,000 offsets, 160 KB of consume-queue entries
            append(store, "t", i % 4, make_batch([b"x%d-%d" % (i, k) for k in range(50)]))
        expected = {p: [v for _, v in values_of(read_all(store, "t", p))] for p in range(4)}
        stores.crash(store)
        lose_unsynced_index_entries(stores.data_dir)
        small_fs.fill()

        caplog.set_level(logging.INFO)
        store = stores.open()
        assert "released the 1048576-byte disk reserve" in caplog.text
        assert {p: [v for _, v in values_of(read_all(store, "t", p))] for p in range(4)} == expected
        with pytest.raises(OSError, match="disk reserve"):
            append(store, "t", 0, make_batch([b"refused"]))
        assert store.partition("t", 0).next_offset == len(expected[0])

        small_fs.free()
        clock.advance(1000)  # the reserve is tried again at most once a second
        assert append(store, "t", 0, make_batch([b"after"])).base_offset == len(expected[0])
        assert (stores.data_dir / "reserve").stat().st_size == 1 << 20
        stores.crash(store)
        store = stores.open()
        assert [v for _, v in values_of(read_all(store, "t", 0))] == [*expected[0], b"after"]
    finally:
        stores.close_all()


async def test_failing_checkpoints_are_logged_once_a_minute_not_every_interval(stores, clock, monkeypatch, caplog):
    """On a full disk every checkpoint fails until there is room: the loop retries each
    interval, and used to log a traceback each time (a flood in the log of a broker left on
    a full disk). It logs the first failure, then at most one line a minute, and says when
    checkpoints work again."""
    store = stores.open(flush_interval_ms=10)
    store.create_topic("t", 1, {})
    real = store._write_checkpoint

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store, "_write_checkpoint", full)
    await store.start()
    for i in range(30):
        append(store, "t", 0, make_batch([b"v%d" % i]))  # something new to checkpoint each time
        await asyncio.sleep(0.012)
    failures = [r for r in caplog.records if "checkpoint failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
    clock.advance(60_000)
    append(store, "t", 0, make_batch([b"later"]))
    await asyncio.sleep(0.05)
    failures = [r for r in caplog.records if "checkpoint failed" in r.getMessage()]
    assert len(failures) == 2 and "still failing" in failures[1].getMessage()
    monkeypatch.setattr(store, "_write_checkpoint", real)
    append(store, "t", 0, make_batch([b"room"]))
    await asyncio.sleep(0.05)
    assert "checkpoints work again" in caplog.text
    await stores.aclose(store)
