"""An fsync error is fatal for what it covered (issue: EIO from fdatasync was swallowed and
the waiting producers were acknowledged): nothing it covered is acknowledged, every later
write is refused, no checkpoint or clean-shutdown marker claims durability again, and a
restart recovers what is on disk."""

from __future__ import annotations

import asyncio
import errno
import os
import socket

import pytest

from batches import make_batch, values_of
from rmqkafka.storage import store as store_module
from rmqkafka.storage.checkpoint_file import read_checkpoint
from rmqkafka.storage.errors import StorageFailedError
from rmqkafka.storage.offset_store import CommittedOffset
from storage_helpers import append, read_all


@pytest.fixture
def failing_fsync(monkeypatch):
    """``fail(errno)`` makes every fdatasync from then on raise that error."""
    real = os.fdatasync
    state = {"errno": None}

    def fdatasync(fd):
        if state["errno"] is not None:
            raise OSError(state["errno"], os.strerror(state["errno"]))
        return real(fd)

    monkeypatch.setattr(store_module.os, "fdatasync", fdatasync)

    def fail(code: int | None = errno.EIO) -> None:
        state["errno"] = code

    return fail


async def test_sync_waiters_are_never_acknowledged_and_writes_are_refused(stores, failing_fsync):
    store = stores.open(flush="sync", flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    first = append(store, "t", 0, make_batch([b"durable"]))
    await store.wait_durable(first.end_position)
    failing_fsync(errno.EIO)
    second = append(store, "t", 0, make_batch([b"maybe-lost"]))
    with pytest.raises(StorageFailedError, match="fsync failed"):
        await store.wait_durable(second.end_position)
    assert store.failed.is_set() and store.failure is not None
    with pytest.raises(StorageFailedError):
        append(store, "t", 0, make_batch([b"refused"]))
    with pytest.raises(StorageFailedError):
        store.append_built("t", 0, make_batch([b"refused"]))
    with pytest.raises(StorageFailedError):
        await store.commit_offsets("g", {("t", 0): CommittedOffset(1, -1, "", 0)})
    with pytest.raises(StorageFailedError):
        await store.wait_durable(second.end_position)
    before = (stores.data_dir / "checkpoint.json").read_text()
    failing_fsync(None)  # a later fsync "succeeds": it proves nothing, nothing changes
    with pytest.raises(StorageFailedError):
        await store.checkpoint()
    await stores.aclose(store)
    assert not (stores.data_dir / "clean_shutdown").exists()
    assert (stores.data_dir / "checkpoint.json").read_text() == before

    store = stores.open()
    assert not store.clean_start
    values = [v for _, v in values_of(read_all(store, "t", 0))]
    assert values[0] == b"durable" and b"refused" not in values
    assert append(store, "t", 0, make_batch([b"after"])).base_offset == len(values)


async def test_a_failed_checkpoint_fsync_is_fatal_in_async_mode(stores, failing_fsync):
    store = stores.open(flush="async", flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    result = append(store, "t", 0, make_batch([b"x"]))
    failing_fsync(errno.ENOSPC)
    with pytest.raises(StorageFailedError, match="No space left"):
        await store.checkpoint()
    with pytest.raises(StorageFailedError):
        await store.wait_durable(result.end_position)
    checkpoint = read_checkpoint(stores.data_dir / "checkpoint.json")
    assert checkpoint["position"] < result.end_position
    assert store.failed.is_set()
    await stores.aclose(store)
    assert not (stores.data_dir / "clean_shutdown").exists()


async def test_a_descriptor_closed_meanwhile_is_not_a_failure(stores, monkeypatch):
    store = stores.open(flush="sync", flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    real = os.dup
    closed = {"once": True}

    def dup(fd):  # the first descriptor was closed before the sync could take it
        if closed["once"]:
            closed["once"] = False
            raise OSError(errno.EBADF, "Bad file descriptor")
        return real(fd)

    monkeypatch.setattr(store_module.os, "dup", dup)
    result = append(store, "t", 0, make_batch([b"x"]))
    await store.wait_durable(result.end_position)
    assert store.failure is None
    await stores.aclose(store)


async def test_a_topic_deleted_during_a_checkpoint_is_not_a_storage_failure(stores, monkeypatch):
    # Found by the reliability fuzzer: the checkpoint took the dirty index files' descriptor
    # numbers, DeleteTopics closed the files, a new connection got one of the numbers, and
    # fdatasync on that socket (EINVAL) was taken for a failed disk: the broker exited.
    store = stores.open(flush_interval_ms=3_600_000)
    store.create_topic("doomed", 4, {})
    await store.start()
    for partition in range(4):
        append(store, "doomed", partition, make_batch([b"x"]))
    loop = asyncio.get_running_loop()
    real = loop.run_in_executor
    reused: list[socket.socket] = []

    def deleted_meanwhile(executor, func, *args):
        if func is not store._write_checkpoint and not reused:
            store.delete_topic("doomed")  # closes the partitions' files...
            reused.extend(socket.socket() for _ in range(16))  # ...and their numbers are reused
        return real(executor, func, *args)

    monkeypatch.setattr(loop, "run_in_executor", deleted_meanwhile)
    try:
        await store.checkpoint()
    finally:
        for sock in reused:
            sock.close()
    assert reused and store.failure is None
    store.create_topic("alive", 1, {})  # the store still takes writes
    assert append(store, "alive", 0, make_batch([b"y"])).base_offset == 0


def _failing_roll_sync(monkeypatch, store, which: str):
    """The next segment roll's fdatasync of the full segment (``which`` "file") or fsync of
    the commitlog directory ("directory") fails with EIO, once."""
    from rmqkafka.storage import commitlog as commitlog_module

    state = {"armed": True}
    real_fdatasync, real_fsync_path = os.fdatasync, commitlog_module.fsync_path

    def fdatasync(fd):
        if which == "file" and state["armed"] and fd == store.commitlog.segments[-1].fd:
            state["armed"] = False
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_fdatasync(fd)

    def fsync_path(path):
        if which == "directory" and state["armed"]:
            state["armed"] = False
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_fsync_path(path)

    monkeypatch.setattr(commitlog_module.os, "fdatasync", fdatasync)
    monkeypatch.setattr(commitlog_module, "fsync_path", fsync_path)
    return state


@pytest.mark.parametrize("which", ["file", "directory"])
def test_a_failed_sync_at_a_segment_roll_is_fatal(stores, monkeypatch, which):
    """A roll fdatasyncs the full segment and fsyncs the directory holding the new one. Its
    failure is fatal, as every fsync failure is: retried at the next roll, the sync would
    report success for pages the kernel dropped, and the records after it would be
    acknowledged on a segment whose data (or directory entry) may be gone."""
    store = stores.open(segment_bytes=4096)
    store.create_topic("t", 1, {})
    big = b"x" * 1500
    append(store, "t", 0, make_batch([big]))
    append(store, "t", 0, make_batch([big]))
    state = _failing_roll_sync(monkeypatch, store, which)
    with pytest.raises(StorageFailedError, match="fsync failed"):
        append(store, "t", 0, make_batch([big]))  # does not fit: rolls
    assert not state["armed"] and store.failure is not None
    with pytest.raises(StorageFailedError):
        append(store, "t", 0, make_batch([b"refused"]))


@pytest.mark.parametrize("which", ["file", "directory"])
def test_a_failed_sync_at_a_roll_during_a_retention_move_is_fatal(stores, clock, monkeypatch, which):
    """The same sync failing under a retention move (which appends copies) is not taken
    for a full disk to retry at the next run: the store fails."""
    store = stores.open(segment_bytes=4096, retention_ms=None)
    store.create_topic("keep", 1, {"retention.ms": "-1"})
    store.create_topic("gone", 1, {"retention.ms": "1000"})
    big = b"x" * 1500
    append(store, "keep", 0, make_batch([big]))
    for _ in range(7):  # the active segment ends up full: the copy of "keep" rolls it
        append(store, "gone", 0, make_batch([big], timestamps=[clock.now_ms()]))
    store.commitlog.flush()
    clock.advance(60_000)
    segments = len(store.commitlog.segments)
    state = _failing_roll_sync(monkeypatch, store, which)
    with pytest.raises(StorageFailedError, match="fsync failed"):
        store.apply_retention()
    assert not state["armed"] and store.failure is not None
    assert len(store.commitlog.segments) >= segments  # nothing was deleted
