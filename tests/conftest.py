"""Fixtures shared by all test kinds: real broker processes on ``tmp_path`` data directories.

``broker``          one started :class:`rmqkafka.adapter.embedded.EmbeddedBroker` per test.
``broker_factory``  a callable ``make(start=True, **options)`` creating EmbeddedBrokers with
                    any constructor options (``flush="sync"``, ``config_file=...``, ``args=``);
                    each gets its own ``tmp_path`` data directory unless ``data_dir=`` is given;
                    all are closed at teardown.
``small_fs``        a small real file system (tmpfs) to fill up: ``.path``, ``.fill()``,
                    ``.free()`` (bench.small_filesystem); skipped, saying why, where mounting
                    is not allowed.

At teardown each broker's stderr is written to the test's captured stderr, so pytest shows
the broker's log next to a failing test. ``rmqkafka.adapter.embedded`` is imported inside the fixtures,
so collecting tests that need no broker never depends on it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for bench/
# Every broker a test starts may take this long to say it is ready: a recovery after kill -9
# on a loaded two-core machine has taken more than the default 15 s.
os.environ.setdefault("RMQK_STARTUP_TIMEOUT", "60")

if TYPE_CHECKING:
    from rmqkafka.adapter.embedded import EmbeddedBroker

    from bench.small_filesystem import SmallFilesystem


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



@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFilesystem]:
    """A 24 MiB tmpfs to fill up (bench.small_filesystem). Mounting needs root (CI runs as
    root); elsewhere the test skips and says why."""
    from bench.small_filesystem import MountRefused, small_filesystem

    try:
        with small_filesystem(tmp_path / "small-fs") as fs:
            yield fs
    except MountRefused as exc:
        pytest.skip(str(exc))
