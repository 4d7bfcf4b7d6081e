"""Which implementation reads a produced batch's records on append: the compiled one-pass scan
(storage/_batchscan.c, built by ``pip install`` when a C compiler is there) or aiokafka's
reader with the checks in Python (storage.record_batch), the fallback.

``RMQK_PURE_PYTHON=1`` in the environment selects the fallback even when the extension is
built (tests run both on the same inputs). The scan answers only for batches the Python path
accepts, with the same results, and returns None for anything else: the Python path then reads
that batch and raises its own error, so both paths refuse the same batches with the same
errors (see _batchscan.c).
"""

from __future__ import annotations

import os
from collections.abc import Callable

ScanResult = tuple[bool, bool, int, int, "list[int] | None"]

ENV_PURE_PYTHON = "RMQK_PURE_PYTHON"


def _load() -> object | None:
    if os.environ.get(ENV_PURE_PYTHON, "") not in ("", "0"):
        return None
    try:
        from . import _batchscan
    except ImportError:
        return None
    return _batchscan


_module = _load()

# (plain batch, tag header name as UTF-8) -> (any record has a header, every record has a
# key, least timestamp, largest timestamp, tag codes or None) or None (not vouched for).
scan: Callable[[object, bytes], ScanResult | None] | None = None if _module is None else _module.scan
# (position, size, codes) -> the consume-queue entries of a batch, one bytes object.
cq_entries: Callable[[int, int, list[int]], bytes] | None = None if _module is None else _module.cq_entries
IMPLEMENTATION = "python" if _module is None else "c"


def describe() -> str:
    """One line for the broker's start-up log: which path appends use, and why."""
    if _module is not None:
        return "record batches are scanned by the compiled extension (rmqkafka.storage._batchscan)"
    if os.environ.get(ENV_PURE_PYTHON, "") not in ("", "0"):
        return f"record batches are scanned in Python ({ENV_PURE_PYTHON} is set)"
    return "record batches are scanned in Python (the compiled extension is not built)"
