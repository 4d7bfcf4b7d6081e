"""A small real file system to fill up, and what a power loss leaves of a data directory:
for the disk-full fault of the reliability suite and the tests of recovery on a full disk.

``small_filesystem(path)`` mounts a tmpfs of a few MiB there: ENOSPC comes from the kernel,
and truncating or deleting a file frees its blocks, as on a real disk. Mounting needs root;
elsewhere it raises MountRefused, saying why.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rmqkafka.storage.checkpoint_file import read_checkpoint


class MountRefused(Exception):
    """The tmpfs could not be mounted (not root, or no mount permission)."""


class SmallFilesystem:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fillers: list[Path] = []

    def fill(self, leave: int = 0) -> None:
        """Write files until the file system is full, down to its last 512 bytes, then give
        back what is needed for ``leave`` bytes to be free."""
        self._fill_up()
        for path in reversed(self._fillers):
            missing = leave - self.free_bytes()
            if missing <= 0:
                return
            size = path.stat().st_size if path.exists() else 0
            if size > missing:
                os.truncate(path, size - missing)
            else:
                path.unlink(missing_ok=True)

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def _fill_up(self) -> None:
        for chunk in (1 << 20, 4096, 512):
            while True:
                path = self.path / f"filler-{len(self._fillers)}"
                self._fillers.append(path)
                try:
                    with open(path, "wb") as f:
                        while True:
                            f.write(bytes(chunk))
                            f.flush()
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                if path.stat().st_size < chunk:
                    break

    def free(self) -> None:
        """Delete what ``fill`` wrote."""
        for path in self._fillers:
            path.unlink(missing_ok=True)
        self._fillers = []


@contextmanager
def small_filesystem(path: Path, size_mib: int = 24) -> Iterator[SmallFilesystem]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(path)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise MountRefused(f"cannot mount a tmpfs to fill up (needs root): {done.stderr.strip()}")
    try:
        yield SmallFilesystem(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def lose_unsynced_index_entries(data_dir: Path) -> None:
    """What a power loss may leave under flush=sync: the commitlog tail was fsynced (each
    produce was acknowledged after it), the index entries written after the checkpoint were
    not. Every consume queue and time index is cut back to the size the checkpoint recorded;
    those of partitions it does not name (first written after it) are gone."""
    derived = (read_checkpoint(data_dir / "checkpoint.json") or {}).get("derived") or {}
    for directory in (data_dir / "consumequeue").glob("*/*"):
        key = f"{directory.parent.name}/{directory.name}"
        if key not in derived:
            for path in directory.iterdir():
                path.unlink()
            continue
        next_offset, time_entries, _ = derived[key]
        [queue] = [f for f in directory.iterdir() if f.suffix == ".cq"]
        os.truncate(queue, (next_offset - int(queue.stem)) * 20)
        if (directory / "timeindex").exists():
            os.truncate(directory / "timeindex", time_entries * 16)
