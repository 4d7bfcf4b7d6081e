"""The store's checkpoint file (``checkpoint.json``): its format on disk, written and read.

Format (version 2)::

    rmqkafka-checkpoint 2 <length> <crc32c>\\n
    <length bytes of JSON: {"position": P, ...} as storage.store describes it>

The first line is ASCII: the magic ``rmqkafka-checkpoint``, the format version, the length
of the JSON in bytes (decimal) and the CRC32C (Castagnoli, as record batches use) of those
bytes, as 8 lowercase hex digits. Nothing follows the JSON. Written with
``write_bytes_atomically`` (a temporary file, fsynced, renamed over the old one, the
directory fsynced), so a crash leaves the old file or the new one whole.

Version 1 (the previous format) is the JSON alone, with no first line; it starts with
``{``. It is still read, unchecked (it has no checksum to check), so an upgrade starts as
fast as before; the next checkpoint writes version 2.

Invariants of ``read_checkpoint``: a file that is not exactly one of the two formats (a
changed byte anywhere, a truncation, a file of zeros, a longer file, a version 1 file that
is not a JSON object) is ``DamagedCheckpointError``, never a checkpoint: a damaged byte in
the first line cannot make a version 2 file pass as version 1, because then it does not
start with ``{``, or, if it does, the rest is not JSON. A missing file is None.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from crc32c import crc32c

from .errors import StorageError
from .files import write_bytes_atomically

MAGIC = b"rmqkafka-checkpoint"
VERSION = 2
# the whole first line, anchored: anything else there (an extra space, a sign, upper-case
# hex) is damage, not a variant
_HEADER = re.compile(rb"rmqkafka-checkpoint 2 (0|[1-9][0-9]{0,11}) ([0-9a-f]{8})\n")
_HEADER_MAX = len(MAGIC) + 1 + 1 + 1 + 12 + 1 + 8 + 1


class DamagedCheckpointError(StorageError):
    """The checkpoint file exists but is not a whole checkpoint (the message says why)."""


def encode_checkpoint(data: dict) -> bytes:
    """``data`` in the version 2 format."""
    # json.dumps without indent runs CPython's C encoder (see files.write_json_atomically)
    body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return b"%s %d %d %08x\n" % (MAGIC, VERSION, len(body), crc32c(body)) + body


def write_checkpoint(path: Path, data: dict) -> None:
    """Replace the checkpoint at ``path`` with ``data`` (version 2), atomically."""
    write_bytes_atomically(path, encode_checkpoint(data))


def decode_checkpoint(raw: bytes) -> dict:
    """The checkpoint in ``raw`` (version 2, checked, or version 1); DamagedCheckpointError
    when it is neither."""
    if raw.startswith(b"{"):
        return _json_object(raw, "version 1 (no checksum)")
    newline = raw.find(b"\n", 0, _HEADER_MAX)
    header = _HEADER.fullmatch(raw, 0, newline + 1) if newline >= 0 else None
    if header is None:
        raise DamagedCheckpointError(f"its first line is not a checkpoint header ({bytes(raw[:40])!r})")
    length, crc = int(header.group(1)), int(header.group(2), 16)
    body = raw[newline + 1 :]
    if len(body) != length:
        raise DamagedCheckpointError(f"it holds {len(body)} bytes after its header, which says {length}")
    if crc32c(body) != crc:
        raise DamagedCheckpointError(f"its CRC32C is {crc32c(body):08x}, its header says {crc:08x}")
    return _json_object(body, "version 2")


def read_checkpoint(path: Path) -> dict | None:
    """The checkpoint at ``path``; None when there is none. DamagedCheckpointError when
    the file is damaged; OSError when it cannot be read."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_checkpoint(raw)


def _json_object(text: bytes, what: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as exc:  # UnicodeDecodeError included
        raise DamagedCheckpointError(f"its {what} JSON does not parse ({exc})") from None
    if not isinstance(data, dict):
        raise DamagedCheckpointError(f"its {what} JSON is not an object")
    return data
