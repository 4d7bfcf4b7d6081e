"""Re-encoding a v2 record batch with another compression codec.

A v2 batch is a 61-byte header followed by its records, compressed as one block when the
batch is compressed. Changing the codec therefore only needs the records' bytes: they are
decompressed and compressed again, byte for byte the same records, so every record's offset
delta, timestamp delta, key, value and headers are kept exactly. Of the header only the
codec bits of the attributes, the batch length and the CRC change; base offset, timestamps,
producer id / epoch / base sequence, record count and the transactional and control bits
are the producer's.

The codecs produce what Kafka's own producer writes: gzip (RFC 1952), snappy in xerial's
block framing (32 KiB blocks, what Java's SnappyOutputStream writes; raw snappy is read
too), LZ4 frames with independent 64 KiB blocks (what Kafka's LZ4 streams read) and zstd
frames. Decompression is aiokafka's, the same code that reads the records afterwards.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from crc32c import crc32c

from .inflate import GZIP, LZ4, MAX_INFLATED, NONE, SNAPPY, ZSTD, inflate
from .record_batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Buffer,
)

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_LENGTH = struct.Struct(">i")
_ATTRS = struct.Struct(">h")
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Compression:
    """The codec batches are stored with; ``level`` None means the codec's default."""

    codec: int  # the attributes' compression bits: NONE GZIP SNAPPY LZ4 ZSTD
    level: int | None = None


def recompress(batch: Buffer, target: Compression, max_inflated: int = MAX_INFLATED) -> Buffer:
    """``batch`` encoded with ``target``'s codec, or ``batch`` itself (no copy) if it already
    is, or if it is a control batch (Kafka leaves those as written).

    Raises CorruptRecordError if the records do not decompress, RecordTooLargeError if they
    inflate past ``max_inflated`` bytes.
    """
    view = memoryview(batch)
    (attrs,) = _ATTRS.unpack_from(view, 21)
    source = attrs & COMPRESSION_MASK
    if source == target.codec or attrs & CONTROL_BIT:
        return batch
    records = inflate(source, view[HEADER_SIZE:], max_inflated) if source != NONE else view[HEADER_SIZE:]
    body = encode_records(target, records)
    out = bytearray(view[:HEADER_SIZE])
    out += body
    _LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _ATTRS.pack_into(out, 21, (attrs & ~COMPRESSION_MASK) | target.codec)
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


def records_region(batch: Buffer) -> Buffer:
    """The records of ``batch`` as they follow its header, decompressed if it is compressed
    (the stored bytes themselves, not a copy, when it is not). Raises CorruptRecordError if
    they do not decompress."""
    view = memoryview(batch)
    codec = view[22] & COMPRESSION_MASK
    if codec == NONE:
        return view[HEADER_SIZE:]
    return inflate(codec, view[HEADER_SIZE:], MAX_INFLATED)


def encode_records(target: Compression, data: Buffer) -> Buffer:
    """``data`` (a records region) compressed as ``target`` says (NONE: as it is)."""
    codec, level = target.codec, target.level
    if codec == NONE:
        return data
    if codec == GZIP:
        # wbits 31: a gzip member; -1 is zlib's default level (6), as Java's Deflater
        compressor = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        import cramjam

        out = bytearray(_XERIAL_HEADER)
        view = memoryview(data)
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK])
            out += _LENGTH.pack(len(block))
            out += block
        return out
    if codec == LZ4:
        import lz4.frame

        return lz4.frame.compress(
            data,
            compression_level=9 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,  # Kafka's LZ4 input stream reads independent blocks only
            content_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        import zstandard

        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(data)
    raise ValueError(f"unknown compression codec {codec}")


