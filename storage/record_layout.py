"""Where each record of a v2 batch lies in its records region, read without decoding it.

The records region of a v2 batch is everything after the 61-byte header, decompressed when
the batch is compressed. It is a plain sequence of records, each one::

    length          varint (zigzag)   bytes after this field
    attributes      int8              unused, 0
    timestampDelta  varlong           from the batch's base timestamp
    offsetDelta     varint            from the batch's base offset
    key             varint length (-1 = null) + bytes
    value           varint length (-1 = null) + bytes
    headers         varint count, then per header: varint key length + UTF-8 key,
                    varint value length (-1 = null) + bytes

Because offsets and timestamps are deltas from the batch header, a record's bytes can be
copied unchanged into another batch with the same base offset and base timestamp: that is
what ``record_ends`` is for (one small Python loop step per record, no objects created).
The other readers decode one record's fields and are used on the few records that need it.
Malformed input raises CorruptRecordError (the batch CRC only proves the bytes are the
producer's, not that they frame correctly).
"""

from __future__ import annotations

from .errors import CorruptRecordError
from .record_batch import Buffer

Header = tuple[str, "bytes | None"]


def _varint(data: Buffer, pos: int) -> tuple[int, int]:
    """(zigzag-decoded value, position after it) of the varint at ``pos``."""
    try:
        byte = data[pos]
    except IndexError:
        raise CorruptRecordError("truncated varint in a record") from None
    if byte < 0x80:  # most lengths and deltas: one byte
        return (byte >> 1) ^ -(byte & 1), pos + 1
    shift = 0
    raw = 0
    while True:
        try:
            byte = data[pos]
        except IndexError:
            raise CorruptRecordError("truncated varint in a record") from None
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes in a record")


def record_ends(records: bytes) -> list[int]:
    """The end position of each record in a records region (record i spans
    ``[ends[i-1] or 0, ends[i])``, its length field included).

    Lengths of one or two varint bytes (records under 8 KiB) are decoded inline: this loop
    runs once per record of every batch a filter has to split.
    """
    ends: list[int] = []
    append = ends.append
    pos = 0
    total = len(records)
    while pos < total:
        first = records[pos]
        if first & 1:  # zigzag: an odd varint is negative (its low bit is in the first byte)
            raise CorruptRecordError("negative record length")
        if first < 0x80:
            pos += 1 + (first >> 1)
        else:
            second = records[pos + 1] if pos + 1 < total else 0x80
            if second < 0x80:
                pos += 2 + (((first & 0x7F) | (second << 7)) >> 1)
            else:
                length, pos = _varint(records, pos)
                if length < 0:
                    raise CorruptRecordError("negative record length")
                pos += length
        append(pos)
    if pos != total:
        raise CorruptRecordError("the last record runs past the end of the batch")
    return ends


def timestamp_delta(records: bytes, start: int) -> int:
    """The timestampDelta of the record starting at ``start``."""
    # skip the length (1 to 3 bytes for records under 1 MiB) and the attributes byte
    pos = start + 2 if records[start] < 0x80 else start + 3 if records[start + 1] < 0x80 else _varint(records, start)[1] + 1
    first = records[pos]
    if first < 0x80:  # deltas within +-63 ms of the base: one byte
        return (first >> 1) ^ -(first & 1)
    second = records[pos + 1]
    if second < 0x80:  # within +-8 s: two bytes
        raw = (first & 0x7F) | (second << 7)
        return (raw >> 1) ^ -(raw & 1)
    return _varint(records, pos)[0]


def record_headers(records: bytes, start: int) -> list[Header]:
    """The headers (name, value or None) of the record starting at ``start``, in order."""
    return decode_record(records, start)[4]


def decode_record(records: bytes, start: int) -> tuple[int, int, bytes | None, bytes | None, list[Header]]:
    """(timestampDelta, offsetDelta, key, value, headers) of the record starting at
    ``start``: one record read without decoding the others."""
    _, pos = _varint(records, start)  # length
    pos += 1  # attributes
    timestamp_delta, pos = _varint(records, pos)
    offset_delta, pos = _varint(records, pos)
    fields: list[bytes | None] = []
    for _ in range(2):  # key, value
        size, pos = _varint(records, pos)
        if size < 0:
            fields.append(None)
        else:
            fields.append(bytes(records[pos : pos + size]))
            pos += size
    count, pos = _varint(records, pos)
    headers: list[Header] = []
    for _ in range(count):
        size, pos = _varint(records, pos)
        if size < 0:
            raise CorruptRecordError("a record header has a null name")
        name = bytes(records[pos : pos + size]).decode("utf-8", "replace")
        pos += size
        size, pos = _varint(records, pos)
        if size < 0:
            headers.append((name, None))
        else:
            headers.append((name, bytes(records[pos : pos + size])))
            pos += size
    if pos > len(records):
        raise CorruptRecordError("a record runs past the end of the batch")
    return timestamp_delta, offset_delta, fields[0], fields[1], headers
