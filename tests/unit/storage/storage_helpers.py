"""Store-level helpers shared by the storage tests (the ``stores`` and ``clock`` fixtures
live in tests/unit/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

MAX_BATCH = 1 << 20


class StoreFactory:
    """Opens MessageStores on one directory; crash() drops one without a clean shutdown."""

    def __init__(self, data_dir: Path, clock: ManualClock) -> None:
        self.data_dir = data_dir
        self.clock = clock
        self.config_kw: dict = {}
        self._open: list[MessageStore] = []

    def config(self, **kw) -> StorageConfig:
        return StorageConfig(data_dir=self.data_dir, **{**self.config_kw, **kw})

    def open(self, **kw) -> MessageStore:
        if kw:
            self.config_kw.update(kw)
        store = MessageStore(self.config(), self.clock)
        store.open()
        self._open.append(store)
        return store

    def close(self, store: MessageStore) -> None:
        store.close_sync()
        self._open.remove(store)

    async def aclose(self, store: MessageStore) -> None:
        await store.close()
        self._open.remove(store)

    def crash(self, store: MessageStore) -> None:
        """Like a killed process: nothing flushed, no checkpoint, no clean marker.

        The page cache survives a process kill, so what was written stays; only the file
        descriptors go away (closing them writes nothing).
        """
        self._open.remove(store)
        for task in store._tasks:
            task.cancel()
        for plog in store.partitions().values():
            plog.close()
        store.commitlog.close()
        store.offsets.close()

    def close_all(self) -> None:
        for store in list(self._open):
            self.crash(store)


def sync_checkpoint(store: MessageStore) -> None:
    """What MessageStore.checkpoint() does, without an event loop."""
    for plog in store.partitions().values():
        plog.flush()
    store._write_checkpoint(store.commitlog.flush(), store._snapshot())


def append(store: MessageStore, topic: str, p: int, *batches: bytes, **kw):
    max_batch_bytes = kw.pop("max_batch_bytes", MAX_BATCH)
    return store.append(topic, p, b"".join(batches), max_batch_bytes=max_batch_bytes, **kw)


def read_all(store: MessageStore, topic: str, p: int, offset: int | None = None) -> list[bytes]:
    plog = store.partition(topic, p)
    start = plog.log_start_offset if offset is None else offset
    return plog.read(start, 1 << 30, True).batches


def file_ids(fds) -> list[tuple[int, int]]:
    """(device, inode) of each descriptor: which files an fsync covered, whatever descriptor
    numbers it was given (the store syncs duplicates of its own)."""
    return [(st.st_dev, st.st_ino) for st in map(os.fstat, fds)]
