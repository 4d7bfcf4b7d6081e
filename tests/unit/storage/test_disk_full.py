"""A write that fails half-way through an append (ENOSPC, EIO) takes nothing with it (issue:
the commitlog entry was written, the consume-queue write was short, the time-index write
failed, and the offset was handed out again: acknowledged records became unreadable and a
refused one was stored and served). The append is all or nothing; the next one, once there
is room, gets the same offset; reads and restarts see exactly the acknowledged records."""

from __future__ import annotations

import errno
import os

import pytest

from batches import make_batch, values_of
from rmqkafka.storage import commitlog as commitlog_module
from rmqkafka.storage import files as files_module
from storage_helpers import append, read_all


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
