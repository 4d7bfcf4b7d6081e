"""Fixtures shared by the unit tests of every layer.

``clock``   a :class:`ManualClock` (tests advance it; nothing sleeps). A test module that
            needs another clock defines its own ``clock`` fixture, which wins.
``stores``  a ``StoreFactory`` (tests/unit/storage/storage_helpers.py) on ``tmp_path/data``
            with that clock; every store still open at teardown is dropped as in a crash.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The storage helper modules sit next to the storage tests; the other layers' tests build
# stores with them too, whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent / "storage"))

from rmqkafka.storage.clock import ManualClock  # noqa: E402
from storage_helpers import StoreFactory  # noqa: E402


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def stores(tmp_path: Path, clock: ManualClock):
    factory = StoreFactory(tmp_path / "data", clock)
    yield factory
    factory.close_all()
