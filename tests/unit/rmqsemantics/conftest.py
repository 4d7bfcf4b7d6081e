from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The helper module sits next to the tests; make it importable whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def store(tmp_path: Path):
    """A fresh MessageStore on a manual clock holding the one-partition topic "src" (the
    views' source); a module may define its own ``store`` instead."""
    from rmqkafka.storage.clock import ManualClock
    from rmqkafka.storage.config import StorageConfig
    from rmqkafka.storage.store import MessageStore

    s = MessageStore(StorageConfig(data_dir=tmp_path / "data"), ManualClock())
    s.open()
    s.create_topic("src", 1, {})
    yield s
    s.close_sync()
