"""Real Kafka record batches for the storage tests, built with aiokafka's own encoder.

``make_batch`` builds a magic-2 batch the way a producer sends it (base offset 0, leader
epoch -1 as aiokafka leaves it). The other helpers edit fields of a built batch, with or
without fixing the CRC, to craft malformed input.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from crc32c import crc32c

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

BASE_TS = 1_700_000_000_000
Header = tuple[str, bytes | None]


def make_batch(
    values: Sequence[bytes | None] | int = 1,
    *,
    codec: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamps: Sequence[int] | None = None,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[Header]] | Sequence[Header] | None = None,
    tags: Sequence[str | bytes | None] | None = None,
) -> bytes:
    """One v2 batch. ``values`` is a list of values or a record count.

    ``headers`` is either one header list for every record or a list of lists, one per
    record; ``tags`` (one per record, None = no tag) adds a ``TAGS`` header after them.
    """
    if isinstance(values, int):
        values = [b"value-%d" % i for i in range(values)]
    n = len(values)
    if timestamps is None:
        timestamps = [BASE_TS + i for i in range(n)]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=int(transactional),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        hdrs = _headers_for(headers, i)
        if tags is not None and tags[i] is not None:
            tag = tags[i]
            hdrs.append(("TAGS", tag.encode() if isinstance(tag, str) else tag))
        key = keys[i] if keys is not None else None
        meta = builder.append(i, timestamp=timestamps[i], key=key, value=value, headers=hdrs)
        assert meta is not None
    return bytes(builder.build())


def _headers_for(headers, i: int) -> list[Header]:
    if not headers:
        return []
    if isinstance(headers[0], tuple):
        return list(headers)  # one list shared by every record
    return list(headers[i])


def idempotent(values, pid: int, epoch: int, seq: int, **kw) -> bytes:
    return make_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)


def legacy_message(magic: int = 1, value: bytes = b"hello") -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=BASE_TS if magic else None, key=None, value=value)
    return bytes(builder.build())


def fix_crc(batch: bytes | bytearray) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def with_field(batch: bytes, at: int, fmt: str, value: int, *, recrc: bool = True) -> bytes:
    """The batch with one header field replaced (e.g. at=57, fmt=">i" for records count)."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, at, value)
    return fix_crc(out) if recrc else bytes(out)


def flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0xFF
    return bytes(out)


def records(batch: bytes) -> list:
    """The decoded records (offset, timestamp, key, value, headers...) via aiokafka."""
    return list(DefaultRecordBatch(bytes(batch)))


def values_of(batches: Sequence[bytes]) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of stored batches, in order."""
    return [(r.offset, r.value) for b in batches for r in records(b)]
