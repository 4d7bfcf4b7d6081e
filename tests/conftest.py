"""Fixtures shared by all test kinds: real broker processes on ``tmp_path`` data directories.

``broker``          one started :class:`rmqkafka.adapter.embedded.EmbeddedBroker` per test.
``broker_factory``  a callable ``make(start=True, **options)`` creating EmbeddedBrokers with
                    any constructor options (``flush="sync"``, ``config_file=...``, ``args=``);
                    each gets its own ``tmp_path`` data directory unless ``data_dir=`` is given;
                    all are closed at teardown.
``small_fs``        a small real file system (tmpfs) to fill up: ``.path``, ``.fill()``,
                    ``.free()``; skipped, saying why, where mounting is not allowed.

At teardown each broker's stderr is written to the test's captured stderr, so pytest shows
the broker's log next to a failing test. ``rmqkafka.adapter.embedded`` is imported inside the fixtures,
so collecting tests that need no broker never depends on it.
"""

from __future__ import annotations

import errno
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rmqkafka.adapter.embedded import EmbeddedBroker


def _report(broker: EmbeddedBroker) -> None:
    text = broker.stderr
    if text:
        sys.stderr.write(f"--- broker stderr {broker!r} ---\n{text}\n")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A started broker with a fresh data directory; stopped (SIGTERM) after the test."""
    from rmqkafka.adapter.embedded import EmbeddedBroker

    instance = EmbeddedBroker(data_dir=tmp_path / "broker-data")
    try:
        with instance:
            yield instance
    finally:
        _report(instance)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., EmbeddedBroker]]:
    """``make(start=True, **options) -> EmbeddedBroker``; all are closed at teardown."""
    from rmqkafka.adapter.embedded import EmbeddedBroker

    created: list[EmbeddedBroker] = []

    def make(start: bool = True, **options: Any) -> EmbeddedBroker:
        options.setdefault("data_dir", tmp_path / f"broker-{len(created)}")
        instance = EmbeddedBroker(**options)
        created.append(instance)
        return instance.start() if start else instance

    yield make
    failures: list[BaseException] = []
    for instance in reversed(created):
        try:
            instance.close()
        except Exception as exc:  # close the others before reporting
            failures.append(exc)
        _report(instance)
    if failures:
        raise failures[0]


class SmallFs:
    """A mounted tmpfs of a few MiB: ENOSPC comes from the kernel, and truncating or deleting
    a file frees its blocks, as on a real disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fillers: list[Path] = []

    def fill(self) -> None:
        """Write files until the file system is full, down to its last 512 bytes."""
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
                    assert exc.errno == errno.ENOSPC, exc
                if path.stat().st_size < chunk:
                    break

    def free(self) -> None:
        for path in self._fillers:
            path.unlink(missing_ok=True)
        self._fillers = []


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFs]:
    """A 24 MiB tmpfs. Mounting needs root (CI runs as root); elsewhere the test skips."""
    mount = tmp_path / "small-fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root): {done.stderr.strip()}")
    try:
        yield SmallFs(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
