"""What a power loss may leave of a data directory, for tests of recovery (importable from
every test: pytest puts ``tests/`` on sys.path for its conftest)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def lose_unsynced_index_entries(store_dir: Path) -> None:
    """What a power loss may leave under flush=sync: the commitlog tail was fsynced (each
    produce was acknowledged after it), the index entries written after the checkpoint were
    not. Every consume queue and time index is cut back to the size the checkpoint recorded;
    those of partitions it does not name (first written after it) are gone."""
    derived = json.loads((store_dir / "checkpoint.json").read_text()).get("derived") or {}
    for directory in (store_dir / "consumequeue").glob("*/*"):
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
