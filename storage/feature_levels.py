"""Finalized feature levels: a name -> level map with an epoch that counts its changes.

The store keeps the map; what the names mean, which levels are valid and what a new data
directory starts with are the caller's (adapter.features).

On-disk format: ``features.json`` = ``{"epoch": E, "levels": {"<name>": L}}``, replaced
atomically (write temp, fsync, rename, fsync dir) with the previous version kept as
``features.json.prev``, the fallback for a damaged file. No file means nothing was ever
set: epoch 0, ``stored`` False (the caller's initial levels apply).

Invariants: the epoch only grows; each ``set`` writes the whole map with the epoch + 1.
Crash behaviour: a crash leaves the old file or the new one; a failed write (disk full)
raises OSError and leaves the map in memory unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from .files import read_json_with_fallback, write_json_atomically

FILE_NAME = "features.json"


class FeatureLevels:
    def __init__(self, path: Path) -> None:
        self._path = path
        loaded = read_json_with_fallback(path, _parse)
        self.stored = loaded is not None
        self._epoch, self._levels = loaded if loaded is not None else (0, {})

    @property
    def epoch(self) -> int:
        """How many times the map was set (0: never)."""
        return self._epoch

    @property
    def levels(self) -> Mapping[str, int]:
        return MappingProxyType(self._levels)

    def set(self, levels: Mapping[str, int]) -> int:
        """Replace the map (written durably first); returns the new epoch."""
        epoch = self._epoch + 1
        new = {name: int(level) for name, level in sorted(levels.items())}
        write_json_atomically(self._path, {"epoch": epoch, "levels": new}, keep_previous=True)
        self._epoch, self._levels, self.stored = epoch, new, True
        return epoch


def _parse(raw: dict) -> tuple[int, dict[str, int]]:
    return int(raw["epoch"]), {str(k): int(v) for k, v in dict(raw["levels"]).items()}
