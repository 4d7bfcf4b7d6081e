"""Producer id allocation, persistent so ids are never reused across restarts.

On-disk format: ``producer_ids.json`` = ``{"next_block": N, "transactional": {"<txn id>":
[producer id, epoch]}}``. Ids are handed out from blocks of BLOCK_SIZE; the file records the
start of the next unused block before any id of the current block is handed out, so a crash
only skips ids, never repeats them.
"""

from __future__ import annotations

import json
from pathlib import Path

from .files import write_json_atomically

BLOCK_SIZE = 1000
MAX_EPOCH = 32767


class ProducerIds:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._transactional: dict[str, list[int]] = {}
        next_block = 0
        if path.exists():
            raw = json.loads(path.read_text(encoding="utf-8"))
            next_block = int(raw["next_block"])
            self._transactional = {k: list(v) for k, v in raw["transactional"].items()}
        self._next_id = next_block
        self._block_end = next_block  # forces a fresh block (and a save) on first use

    def _save(self) -> None:
        write_json_atomically(
            self._path, {"next_block": self._block_end, "transactional": self._transactional}
        )

    def allocate(self) -> int:
        if self._next_id >= self._block_end:
            self._block_end = self._next_id + BLOCK_SIZE
            self._save()
        pid = self._next_id
        self._next_id += 1
        return pid

    def for_transactional_id(self, transactional_id: str) -> tuple[int, int]:
        """The stable producer id of a transactional id, with its epoch bumped."""
        current = self._transactional.get(transactional_id)
        if current is None or current[1] >= MAX_EPOCH:
            current = [self.allocate(), 0]
        else:
            current = [current[0], current[1] + 1]
        self._transactional[transactional_id] = current
        self._save()
        return current[0], current[1]
