"""The disk reserve: space held back so that the store can always start after a crash.

Recovery after a crash re-indexes the commitlog tail its last checkpoint did not cover: it
writes consume-queue, time-index and txnindex entries (and may need new index files). Under
``flush=sync`` the commitlog tail is on disk but, after a power loss, those entries may not
be, and on a full disk recovery could not write them: the broker would not start until
someone freed space by hand. The reserve makes that impossible:

- it is one file, ``<data dir>/reserve``, of ``size`` bytes of allocated blocks
  (posix_fallocate, so not a sparse file), fsynced with its directory;
- the store gives it up (``release``) before a recovery when the file system has less than
  twice its size free, and recovery writes into the space it held;
- the store accepts appends only while the reserve exists (``ensure``: made again, at most
  once per ``retry_ms``, as soon as there is room), so the next crash again finds it;
- the store checkpoints early once the index bytes written since the last checkpoint reach
  half of it, so what a recovery must write never outgrows it.

On-disk format: zeros; nothing reads it. Crash behaviour: a reserve cut short by a crash
while it was being made is found short (size or allocated blocks) and completed; one that
cannot be completed is deleted again, so a failed attempt never eats the space it wanted.
``size`` 0 disables it (appends are then never refused for it).
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from .clock import Clock
from .files import fsync_path

log = logging.getLogger(__name__)

RESERVE_FILE = "reserve"
_CHUNK = 1 << 20


class DiskReserveMissingError(OSError):
    """An append refused because the disk reserve could not be made (the disk is full)."""


class DiskReserve:
    def __init__(self, directory: Path, size: int, clock: Clock, retry_ms: int = 1000) -> None:
        self.path = directory / RESERVE_FILE
        self.size = size
        self._clock = clock
        self._retry_ms = retry_ms
        self._next_try_ms: int | None = None
        self._warned = False
        self.ready = size == 0 or self._whole()

    def _whole(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        return st.st_size == self.size and st.st_blocks * 512 >= self.size

    def free_bytes(self) -> int:
        st = os.statvfs(self.path.parent)
        return st.f_bavail * st.f_frsize

    def release_if_low(self) -> bool:
        """Give the reserve up when less than twice its size is free (a recovery is about
        to write); returns whether it did."""
        if not self.size or self.free_bytes() >= 2 * self.size:
            return False
        existed = self.path.exists()
        self.release()
        if existed:
            log.warning("the disk has %d bytes free: released the %d-byte disk reserve %s so that "
                        "recovery can write its indexes", self.free_bytes(), self.size, self.path)
        return existed

    def release(self) -> None:
        self.ready = self.size == 0
        self.path.unlink(missing_ok=True)
        fsync_path(self.path.parent)

    def ensure(self) -> bool:
        """Whether the reserve exists, making it if it does not (at most once per
        ``retry_ms``): appends are accepted only then."""
        if self.ready:
            return True
        now = self._clock.now_ms()
        if self._next_try_ms is not None and now < self._next_try_ms:
            return False
        self._next_try_ms = now + self._retry_ms
        try:
            self._make()
        except OSError as exc:
            try:
                self.path.unlink(missing_ok=True)  # never keep the half we got
            except OSError:
                pass
            if not self._warned:
                log.warning("cannot make the %d-byte disk reserve %s (%s): appends are refused "
                            "(KAFKA_STORAGE_ERROR) until there is room", self.size, self.path, exc)
                self._warned = True
            return False
        if self._warned:
            log.warning("disk reserve %s made again: appends are accepted", self.path)
        self._warned = False
        self.ready = True
        return True

    def _make(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, self.size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                _write_zeros(fd, self.size)  # a file system without fallocate
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_path(self.path.parent)

    def refused(self) -> DiskReserveMissingError:
        return DiskReserveMissingError(
            errno.ENOSPC, f"the disk is full: the {self.size}-byte disk reserve {self.path} cannot be "
            "made, and appends wait for it (free space, or set log.dir.reserve.bytes)")


def _write_zeros(fd: int, size: int) -> None:
    zeros = bytes(_CHUNK)
    at = os.fstat(fd).st_size
    while at < size:
        at += os.pwrite(fd, zeros[: min(_CHUNK, size - at)], at)
