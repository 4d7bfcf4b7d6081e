"""Small durable-file helpers shared by the storage modules."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import StorageError

log = logging.getLogger(__name__)
PREVIOUS_SUFFIX = ".prev"


class DamagedFileError(StorageError):
    """A metadata file and its previous copy are both unreadable: the broker cannot know
    what it held and does not start (the message says which file)."""


def fsync_path(path: Path) -> None:
    """fsync a file or directory by name (a directory, to make a rename or unlink durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomically(path: Path, data: object, *, keep_previous: bool = False) -> None:
    """Replace ``path`` with ``data`` as JSON so that a crash leaves the old or the new file
    (``write_bytes_atomically``)."""
    # json.dumps without indent runs CPython's C encoder; json.dump and indent run the pure
    # Python one (0.6 s instead of 0.09 s for a checkpoint holding 100,000 half messages)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    write_bytes_atomically(path, text.encode("utf-8"), keep_previous=keep_previous)


def write_bytes_atomically(path: Path, data: bytes, *, keep_previous: bool = False) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file: write a
    temporary file, fsync it, rename it over ``path``, fsync the directory.
    ``keep_previous``: the file being replaced stays as ``<path>.prev`` (a hard link, swapped
    in atomically), the fallback of ``read_json_with_fallback``."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if keep_previous and path.exists():
        link = path.with_name(path.name + PREVIOUS_SUFFIX + ".tmp")
        link.unlink(missing_ok=True)
        os.link(path, link)
        os.replace(link, path.with_name(path.name + PREVIOUS_SUFFIX))
    os.replace(tmp, path)
    fsync_path(path.parent)


def read_json_with_fallback(path: Path, parse: Callable[[Any], Any]) -> Any:
    """``parse`` of the JSON in ``path``, or, when the file is damaged (unreadable, not JSON,
    or refused by ``parse`` with ValueError / KeyError / TypeError), of its previous copy
    (``write_json_atomically(keep_previous=True)``), said loudly: the latest change it held
    is lost. None when neither file exists; DamagedFileError when neither is usable."""
    previous = path.with_name(path.name + PREVIOUS_SUFFIX)
    failure = None
    for candidate in (path, previous):
        if not candidate.exists():
            continue
        try:
            value = parse(json.loads(candidate.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("%s is damaged (%s)", candidate, exc)
            failure = failure or exc
            continue
        if candidate is previous and failure is not None:
            log.error("%s is damaged: using its previous copy %s; the last change it recorded is lost",
                      path, previous)
        return value
    if failure is not None:
        raise DamagedFileError(f"{path} is damaged ({failure}) and has no usable previous copy; restore it "
                               "from a backup, or move it away to start without it")
    return None


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, at: int) -> None:
    """``os.pwrite`` until every byte is written (a short write is legal); an error raises."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, at)
        if written <= 0:
            raise OSError(f"pwrite wrote {written} bytes")
        view = view[written:]
        at += written


class SingleFileIndex:
    """Durability of an index kept in one file (``_fd``) that its writes mark ``_dirty``:
    the checkpoint takes the descriptor to fsync, a clean close flushes it.

    The file is opened only if it exists and holds entries, and created (or reopened) by the
    first write (``_create``): a partition never written to costs no descriptor and no file
    (``_fd`` is None, the index is empty), so a topic with a huge partition count still
    starts."""

    _path: Path
    _fd: int | None
    _dirty: bool

    def _open_existing(self) -> int | None:
        try:
            return os.open(self._path, os.O_RDWR)
        except FileNotFoundError:
            return None

    def _create(self) -> int:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def take_dirty_fds(self) -> list[int]:
        if not self._dirty or self._fd is None:
            return []
        self._dirty = False
        return [self._fd]

    def flush(self) -> None:
        if self._dirty and self._fd is not None:
            os.fdatasync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
