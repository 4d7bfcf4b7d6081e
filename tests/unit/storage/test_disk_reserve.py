"""The disk reserve (storage.disk_reserve): allocated space a recovery may spend on a full
disk, made again once there is room, with appends accepted only while it exists, and a
checkpoint started early when what a recovery would have to write reaches half of it."""

from __future__ import annotations

import asyncio
import errno
import logging
import os

import pytest

from batches import make_batch
from rmqkafka.storage.checkpoint_file import read_checkpoint
from rmqkafka.storage.disk_reserve import DiskReserve, DiskReserveMissingError
from storage_helpers import append


def test_it_is_made_allocated_and_kept(tmp_path, clock):
    reserve = DiskReserve(tmp_path, 256 << 10, clock)
    assert not reserve.ready
    assert reserve.ensure()
    st = os.stat(tmp_path / "reserve")
    assert st.st_size == 256 << 10 and st.st_blocks * 512 >= 256 << 10  # not a sparse file
    assert DiskReserve(tmp_path, 256 << 10, clock).ready


def test_one_cut_short_by_a_crash_is_completed(tmp_path, clock):
    (tmp_path / "reserve").write_bytes(bytes(1000))
    reserve = DiskReserve(tmp_path, 256 << 10, clock)
    assert not reserve.ready
    assert reserve.ensure()
    assert os.stat(tmp_path / "reserve").st_size == 256 << 10


def test_a_failed_attempt_keeps_nothing_and_is_retried_once_a_second(tmp_path, clock, monkeypatch, caplog):
    reserve = DiskReserve(tmp_path, 256 << 10, clock)

    def no_room(fd, offset, length):
        os.pwrite(fd, b"x" * 100, 0)  # a part, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_room)
    assert not reserve.ensure()
    assert not (tmp_path / "reserve").exists()
    assert "appends are refused" in caplog.text
    monkeypatch.undo()
    assert not reserve.ensure()  # not tried again within the second
    clock.advance(999)
    assert not reserve.ensure()
    clock.advance(1)
    assert reserve.ensure()
    assert "made again" in caplog.text


def test_it_is_released_only_when_the_disk_is_nearly_full(tmp_path, clock, monkeypatch):
    reserve = DiskReserve(tmp_path, 256 << 10, clock)
    reserve.ensure()
    monkeypatch.setattr(reserve, "free_bytes", lambda: 512 << 10)
    assert not reserve.release_if_low()
    assert reserve.ready
    monkeypatch.setattr(reserve, "free_bytes", lambda: (512 << 10) - 1)
    assert reserve.release_if_low()
    assert not reserve.ready and not (tmp_path / "reserve").exists()


def test_size_zero_turns_it_off(tmp_path, clock):
    reserve = DiskReserve(tmp_path, 0, clock)
    assert reserve.ready and reserve.ensure()
    assert not reserve.release_if_low()
    assert not (tmp_path / "reserve").exists()


def test_appends_wait_for_the_reserve_and_reads_go_on(stores, clock, monkeypatch):
    store = stores.open(disk_reserve_bytes=64 << 10)
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch([b"a"]))
    stores.close(store)
    (stores.data_dir / "reserve").unlink()  # e.g. released by a recovery on a full disk

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    store = stores.open()
    assert store.partition("t", 0).read(0, 1 << 20, True).batches
    with pytest.raises(DiskReserveMissingError) as refused:
        append(store, "t", 0, make_batch([b"b"]))
    assert refused.value.errno == errno.ENOSPC  # an OSError: KAFKA_STORAGE_ERROR at the edge
    with pytest.raises(DiskReserveMissingError):
        store.append_built("t", 0, make_batch([b"b"]))
    monkeypatch.undo()
    clock.advance(1000)
    assert append(store, "t", 0, make_batch([b"b"])).base_offset == 1


async def test_a_checkpoint_starts_early_at_half_the_reserve(stores):
    """What a recovery would write again must stay within the reserve: with a checkpoint
    interval of a minute, index entries worth half the reserve start one at once."""
    store = stores.open(disk_reserve_bytes=128 << 10, flush_interval_ms=60_000)
    await store.start()
    store.create_topic("t", 1, {})
    checkpoint = stores.data_dir / "checkpoint.json"
    opened_at = read_checkpoint(checkpoint)["position"]
    append(store, "t", 0, make_batch(100))  # 2 KB of entries (+ 12 KiB for new file blocks)
    await asyncio.sleep(0.2)
    assert read_checkpoint(checkpoint)["position"] == opened_at
    for _ in range(30):  # 60 KB more: past 64 KiB
        append(store, "t", 0, make_batch(100))
    for _ in range(50):
        await asyncio.sleep(0.02)
        if read_checkpoint(checkpoint)["position"] == store.commitlog.end_position:
            break
    assert read_checkpoint(checkpoint)["position"] == store.commitlog.end_position
    assert store._unchecked_index_bytes == 0
    await stores.aclose(store)


def test_a_recovery_on_a_roomy_disk_keeps_the_reserve(stores, caplog):
    store = stores.open(disk_reserve_bytes=64 << 10)
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch([b"a"]))
    inode = (stores.data_dir / "reserve").stat().st_ino
    stores.crash(store)
    caplog.set_level(logging.WARNING)
    stores.open()
    assert (stores.data_dir / "reserve").stat().st_ino == inode
    assert "released" not in caplog.text
