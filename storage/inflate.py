"""Decompressing a record batch's records with a bound on what they inflate to.

A 37 KB zstd batch can hold 1.2 GB of records; decompressed whole, one produce request took
the broker's memory to 2.3 GB and its event loop for seconds. Here every codec is inflated
as a stream that stops one byte past ``limit`` and raises RecordTooLargeError, so a bomb
costs at most ``limit`` bytes before it is refused:

* gzip: zlib with ``max_length`` (several members, as Java's GZIPInputStream reads them);
* snappy: the uncompressed length each block declares (xerial framing, or one raw block)
  is summed before any block is decompressed;
* lz4: an LZ4 frame decompressor with ``max_length``, frame after frame;
* zstd: a zstandard stream reader across frames, read to ``limit + 1`` bytes.

A body that does not decompress raises CorruptRecordError.
"""

from __future__ import annotations

import struct
import zlib

from .errors import CorruptRecordError, RecordTooLargeError

Buffer = bytes | bytearray | memoryview
NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)  # the codec in a batch's attributes
# What a batch may inflate to: INFLATE_FACTOR times the largest batch a topic accepts when it
# is produced (message.max.bytes), and MAX_INFLATED for batches already stored (checked then).
INFLATE_FACTOR = 64
MAX_INFLATED = 1 << 30
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_BLOCK_LENGTH = struct.Struct(">i")
_STEP = 1 << 20  # bytes of output asked for at a time where a codec allocates them up front


def inflate(codec: int, data: Buffer, limit: int, prefix: Buffer = b"") -> bytearray:
    """The records region ``data`` compressed with ``codec``, decompressed after ``prefix``
    (a batch header, so that the batch is whole without another copy of its records);
    RecordTooLargeError past ``limit`` bytes (``prefix`` not counted), CorruptRecordError
    when it does not decompress."""
    out = bytearray(prefix)
    _inflate_into(codec, data, out, len(out) + limit)
    return out


def inflate_head(codec: int, data: Buffer, size: int, prefix: Buffer = b"") -> tuple[bytearray, bool]:
    """The first ``size`` bytes ``data`` inflates to, after ``prefix``, and whether that is
    all of it: a look at a batch's first records before paying for the rest (snappy, whose
    blocks are not read part-way, gives nothing unless it is all within ``size``)."""
    out = bytearray(prefix)
    cap = len(out) + size
    try:
        _inflate_into(codec, data, out, cap)
    except RecordTooLargeError:
        del out[cap:]
        return out, False
    return out, True


def _inflate_into(codec: int, data: Buffer, out: bytearray, cap: int) -> None:
    limit = cap - len(out)
    try:
        if codec == GZIP:
            _gunzip(data, out, cap)
        elif codec == SNAPPY:
            _unsnappy(data, out, cap)
        elif codec == LZ4:
            _unlz4(data, out, cap)
        elif codec == ZSTD:
            _unzstd(data, out, cap)
        else:
            raise CorruptRecordError(f"unknown compression codec {codec}")
    except (RecordTooLargeError, CorruptRecordError):
        raise
    except Exception as exc:  # every codec raises its own
        raise CorruptRecordError(f"record batch does not decompress: {exc!r}") from exc
    if len(out) > cap:
        raise _too_large(limit)


def _too_large(limit: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"the batch's records inflate to more than {limit} bytes")


def _check(out: bytearray, cap: int, start: int) -> None:
    if len(out) > cap:
        raise _too_large(cap - start)


def _gunzip(data: Buffer, out: bytearray, cap: int) -> None:
    start = len(out)
    rest = bytes(data)
    while rest:
        decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
        chunk = rest
        while True:
            step = min(_STEP, cap + 1 - len(out))
            got = decompressor.decompress(chunk, step)
            out += got
            _check(out, cap, start)
            chunk = decompressor.unconsumed_tail
            if not chunk and (decompressor.eof or len(got) < step):
                break  # (a full step may leave output pending in zlib: ask again)
        if not decompressor.eof:
            raise CorruptRecordError("gzip data ends in the middle of a member")
        rest = decompressor.unused_data


def _unsnappy(data: Buffer, out: bytearray, cap: int) -> None:
    import cramjam

    view = memoryview(data)
    if bytes(view[:8]) == _XERIAL_MAGIC:
        blocks = []
        cursor = 16
        while cursor < len(view):
            (size,) = _BLOCK_LENGTH.unpack_from(view, cursor)
            cursor += 4
            if size < 0 or cursor + size > len(view):
                raise CorruptRecordError("snappy block beyond the batch")
            blocks.append(view[cursor:cursor + size])
            cursor += size
    else:
        blocks = [view]
    if len(out) + sum(_snappy_length(block) for block in blocks) > cap:
        raise _too_large(cap - len(out))
    for block in blocks:
        out += cramjam.snappy.decompress_raw(block)


def _snappy_length(block: memoryview) -> int:
    """The uncompressed length a raw snappy block starts with (a little-endian varint)."""
    result = shift = 0
    for i in range(min(len(block), 10)):
        byte = block[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result
        shift += 7
    raise CorruptRecordError("snappy block without a length")


def _unlz4(data: Buffer, out: bytearray, cap: int) -> None:
    import lz4.frame

    start = len(out)
    rest = bytes(data)
    while rest:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        chunk = rest
        while True:  # in steps: lz4 allocates max_length up front
            out += decompressor.decompress(chunk, max_length=min(_STEP, cap + 1 - len(out)))
            chunk = b""
            _check(out, cap, start)
            if decompressor.eof or decompressor.needs_input:
                break
        if not decompressor.eof:
            raise CorruptRecordError("lz4 data ends in the middle of a frame")
        rest = decompressor.unused_data


def _unzstd(data: Buffer, out: bytearray, cap: int) -> None:
    import zstandard

    start = len(out)
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
    while len(out) <= cap:
        chunk = reader.read(min(_STEP, cap + 1 - len(out)))
        if not chunk:
            return
        out += chunk
    raise _too_large(cap - start)
