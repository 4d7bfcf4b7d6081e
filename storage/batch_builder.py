"""New v2 record batches made from stored ones: a batch keeping some of its records, and a
batch that covers a range of offsets while holding no data record.

Both are what a reader that leaves records out hands to Kafka clients, which advance their
next fetch offset to ``baseOffset + lastOffsetDelta + 1`` of every batch they receive,
whatever it holds:

* ``subset_batch`` keeps the stored header's base offset, last offset delta, partition leader
  epoch, base timestamp, producer id / epoch / base sequence and attributes (timestamp type,
  transactional bit) and copies the kept records byte for byte. Their offset and timestamp
  deltas are relative to those unchanged header fields, so every kept record keeps its
  offset, timestamp, key, value and headers exactly. Kafka's log cleaner writes the same
  header, except that it re-encodes the records with the first kept record's timestamp as
  the base timestamp; record timestamps are the same either way. What changes: the record
  count, the max timestamp (the largest kept record's, as the cleaner computes it; a
  LogAppendTime batch keeps its max timestamp, which is every record's timestamp), the
  compression codec if asked, the length and the CRC.
* ``covering_batch`` covers ``first..last`` with one control record (a COMMIT marker) at
  ``last`` and no producer id. A batch with no record at all would cover the range as well,
  and is what Kafka's cleaner leaves when it keeps an emptied batch, but librdkafka reads a
  fetch response that yields it nothing as a sign that its fetch size is too small: it
  doubles its partition fetch size each time and, after about ten such responses, reports
  MSG_SIZE_TOO_LARGE to the application (librdkafka issues #1472, #3752); it also keeps the
  application's position (what a group commits) behind such a batch. (Measured with
  confluent-kafka 2.16 on a view whose source gets other records: 49 such errors in 6 s and
  a position stuck at 10 while the log end moved to 308; with the marker, none and 307.)
  A control batch is
  counted as progress by librdkafka and skipped by every client: Java and kafka-python look
  at control records only for batches with a producer id, aiokafka reads the marker's type
  (COMMIT, not ABORT) and librdkafka ignores COMMIT markers.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from .recompress import NONE, Compression, encode_records
from .record_batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    Buffer,
)
from .record_layout import timestamp_delta

_LENGTH = struct.Struct(">i")
_ATTRS = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_COUNT = struct.Struct(">i")
_CRC = struct.Struct(">I")

# The COMMIT marker's key (version 0, type 1) and value (version 0, coordinator epoch 0), as
# Kafka's EndTransactionMarker writes them.
_MARKER_KEY = struct.pack(">hh", 0, 1)
_ABORT_KEY = struct.pack(">hh", 0, 0)
_MARKER_VALUE = struct.pack(">hi", 0, 0)


def zigzag_varint(value: int) -> bytes:
    """Kafka's signed varint (zigzag) encoding, as record fields use it."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _finish(out: bytearray) -> bytes:
    _LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def subset_batch(batch: Buffer, records: Buffer, ends: list[int], keep: list[int],
                 compression: Compression | None = None) -> bytes:
    """``batch`` holding only its records number ``keep`` (ascending indices, not empty).

    ``records`` is the batch's records region decompressed (recompress.records_region) and
    ``ends`` its record end positions (record_layout.record_ends). The kept records are
    compressed with ``compression`` (None: not compressed), whatever the stored batch used.
    """
    codec = NONE if compression is None else compression.codec
    data = records if isinstance(records, bytes) else bytes(records)
    parts = [data[ends[i - 1] if i else 0 : ends[i]] for i in keep]
    out = bytearray(memoryview(batch)[:HEADER_SIZE])
    (attrs,) = _ATTRS.unpack_from(out, 21)
    if not attrs & TIMESTAMP_TYPE_BIT:
        (base_timestamp,) = _TIMESTAMP.unpack_from(out, 27)
        newest = max(timestamp_delta(data, ends[i - 1] if i else 0) for i in keep)
        _TIMESTAMP.pack_into(out, 35, base_timestamp + newest)
    _ATTRS.pack_into(out, 21, (attrs & ~COMPRESSION_MASK) | codec)
    _COUNT.pack_into(out, 57, len(keep))
    joined = b"".join(parts)
    out += encode_records(compression, joined) if codec != NONE else joined
    return _finish(out)


def empty_batch(batch: Buffer) -> bytes:
    """``batch`` holding none of its records: what the store keeps when every record of a
    produced batch is parked elsewhere, as Kafka's cleaner keeps an emptied batch. Base
    offset, last offset delta, producer id / epoch / base sequence and the timestamp type
    stay (so the producer's sequence state is rebuilt from it); no codec; a CreateTime
    batch's max timestamp becomes -1, since it stamps no record."""
    out = bytearray(memoryview(batch)[:HEADER_SIZE])
    (attrs,) = _ATTRS.unpack_from(out, 21)
    if not attrs & TIMESTAMP_TYPE_BIT:
        _TIMESTAMP.pack_into(out, 35, NO_TIMESTAMP)
    _ATTRS.pack_into(out, 21, attrs & ~COMPRESSION_MASK)
    _COUNT.pack_into(out, 57, 0)
    return _finish(out)


def covering_batch(first: int, last: int) -> bytes:
    """A batch covering offsets ``first..last`` whose only record is a COMMIT control marker
    at ``last`` (see the module docstring); no producer id, not transactional."""
    return _control_batch(first, last - first, CONTROL_BIT, NO_TIMESTAMP, NO_PRODUCER_ID, -1, _MARKER_KEY)


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, timestamp_ms: int,
                 coordinator_epoch: int = 0) -> bytes:
    """A transaction's end marker in one partition, as Kafka's EndTransactionMarker writes
    it: one control record, key (version 0, COMMIT = 1 / ABORT = 0), value (version 0,
    coordinator epoch); transactional and control bits, the producer's id and epoch, no
    sequence."""
    key = _MARKER_KEY if commit else _ABORT_KEY
    value = struct.pack(">hi", 0, coordinator_epoch)
    return _control_batch(0, 0, CONTROL_BIT | TRANSACTIONAL_BIT, timestamp_ms, producer_id, producer_epoch, key,
                          value)


def _control_batch(base: int, delta: int, attributes: int, timestamp: int, producer_id: int,
                   producer_epoch: int, key: bytes, value: bytes = _MARKER_VALUE) -> bytes:
    body = b"\x00\x00" + zigzag_varint(delta) + b"\x08" + key + b"\x0c" + value + b"\x00"
    out = bytearray(HEADER.pack(
        base, 0, 0, 2, 0, attributes, delta, timestamp, timestamp,
        producer_id, producer_epoch, NO_SEQUENCE, 1,
    ))
    out += zigzag_varint(len(body))
    out += body
    return _finish(out)
