"""A start after a crash, and a clean stop, sync every partition's index files written since
the last checkpoint before they write the next one, several syncs at a time
(``_fdatasync_in_parallel``): one after another, 4,000 partitions made a restart wait 8 s
on the disk."""

from __future__ import annotations

import errno
import os
import threading

import pytest
from batches import make_batch
from rmqkafka.storage import store as store_module
from rmqkafka.storage.store import MessageStore
from storage_helpers import append, read_all

PARTITIONS = 64

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="Linux's /proc")


class SyncLog:
    """Every fdatasync (the file it hit, the thread it ran on) and when checkpoints were written."""

    def __init__(self, monkeypatch) -> None:
        self.synced: list[tuple[str, str]] = []
        self.checkpoints: list[int] = []  # len(synced) when each checkpoint was written
        real_sync, real_checkpoint = os.fdatasync, MessageStore._write_checkpoint
        lock = threading.Lock()

        def fdatasync(fd: int) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            real_sync(fd)
            with lock:
                self.synced.append((path, threading.current_thread().name))

        def write_checkpoint(store, position, snapshot):
            self.checkpoints.append(len(self.synced))
            real_checkpoint(store, position, snapshot)

        monkeypatch.setattr(os, "fdatasync", fdatasync)
        monkeypatch.setattr(MessageStore, "_write_checkpoint", write_checkpoint)

    def index_syncs(self, before: int) -> dict[str, set[str]]:
        """Partition index files synced among the first ``before`` syncs -> their threads."""
        files: dict[str, set[str]] = {}
        for path, thread in self.synced[:before]:
            if "/consumequeue/" in path:
                files.setdefault(path, set()).add(thread)
        return files


def index_files(store: MessageStore) -> set[str]:
    return {str(p) for p in (store.config.data_dir / "consumequeue").rglob("*") if p.is_file()
            and p.stat().st_size > 0 and p.name != "txnindex"}


def fill(stores) -> None:
    store = stores.open()
    store.create_topic("t", PARTITIONS, {})
    for p in range(PARTITIONS):
        append(store, "t", p, make_batch([b"v%d" % p]))
    stores.crash(store)  # nothing synced, no checkpoint past the creation


def test_a_start_after_a_crash_syncs_every_recovered_partition_in_parallel_before_its_checkpoint(
        stores, monkeypatch):
    fill(stores)
    log = SyncLog(monkeypatch)
    store = stores.open()  # recovery re-indexes all 64 partitions

    assert log.checkpoints, "the start writes a checkpoint"
    synced = log.index_syncs(log.checkpoints[0])
    expected = index_files(store)
    assert len(expected) >= 2 * PARTITIONS  # each partition's consume queue and time index
    assert expected <= set(synced), sorted(expected - set(synced))[:5]
    threads = set().union(*synced.values())
    assert len(threads) > 1 and all(t.startswith("rmqk-sync") for t in threads), threads
    for p in range(PARTITIONS):
        assert len(read_all(store, "t", p)) == 1


def test_a_clean_stop_syncs_every_written_partition_in_parallel_before_its_checkpoint(stores, monkeypatch):
    store = stores.open()
    store.create_topic("t", PARTITIONS, {})
    log = SyncLog(monkeypatch)
    for p in range(PARTITIONS):
        append(store, "t", p, make_batch([b"v%d" % p]))
    expected = index_files(store)
    stores.close(store)

    synced = log.index_syncs(log.checkpoints[-1])
    assert expected <= set(synced), sorted(expected - set(synced))[:5]
    assert len(set().union(*synced.values())) > 1


def test_a_failed_sync_fails_the_whole_and_every_other_sync_still_runs(monkeypatch, tmp_path):
    fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT, 0o644) for i in range(40)]
    ran: list[int] = []

    def fdatasync(fd: int) -> None:
        ran.append(fd)
        if fd == fds[7]:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    try:
        with pytest.raises(OSError) as failure:
            store_module._fdatasync_in_parallel(fds)
        assert failure.value.errno == errno.EIO
        assert set(ran) == set(fds)
    finally:
        for fd in fds:
            os.close(fd)
