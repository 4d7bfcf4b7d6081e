"""A record-count bomb (issue 20): a few KB of zstd holding millions of empty records.

Every record is the smallest a v2 batch can hold (7 bytes: its length, attributes, timestamp
delta, offset delta, null key, null value, no headers), all with offset delta 0, so they
compress to almost nothing. The header agrees with itself (records count = last offset
delta + 1) and the CRC is right: only reading the records shows what is wrong with them.
Used by the reliability suite (bench.reliability_faults) and the storage unit tests.
"""

from __future__ import annotations

import struct

import zstandard
from crc32c import crc32c

EMPTY_RECORD = bytes([12, 0, 0, 0, 1, 1, 0])  # length 6 (zigzag 12), then six one-byte fields
_ZSTD = 4
_STEP = 1 << 20


def record_count_bomb(records: int, declared: int | None = None, timestamp_ms: int = 0) -> bytes:
    """A zstd batch of ``records`` empty records with offset delta 0, whose header declares
    ``declared`` records (default: as many as it holds)."""
    declared = records if declared is None else declared
    compressor = zstandard.ZstdCompressor(level=19).compressobj()
    chunk = EMPTY_RECORD * (_STEP // len(EMPTY_RECORD))
    body = bytearray()
    left = records
    while left:  # built a chunk at a time: no buffer of the whole body on our side
        take = min(left, len(chunk) // len(EMPTY_RECORD))
        body += compressor.compress(chunk[: take * len(EMPTY_RECORD)])
        left -= take
    body += compressor.flush()
    header = struct.pack(
        ">qiibIhiqqqhii", 0, 0, -1, 2, 0, _ZSTD, declared - 1, timestamp_ms, timestamp_ms, -1, -1, -1, declared
    )
    batch = bytearray(header) + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)
