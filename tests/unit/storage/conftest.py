from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The helper modules sit next to the tests; make them importable whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))

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
