"""Which records of a batch a header filter (SQL92) keeps, settled per distinct header value
instead of per record: one compiled pass over the batch per property the filter reads.

``kept_records`` answers for a batch (its plain form: header and uncompressed records) with
the indexes of the records the filter keeps, or None when this way cannot settle the batch
exactly; the caller then tests every record's decoded headers (view_reader), which is always
right. It never answers differently from that test.

How. A filter's verdict depends only on the values of the headers it names (``flt.names``,
the first occurrence of each, see filters.record_filter.header_properties). For each name:

* no record holds the name's encoded bytes (its length varint and UTF-8 bytes): the property
  is absent from every record, no per-record work;
* otherwise storage.batch_scan.scan (the append path's C pass) gives each record's code of
  its first header of that name (Java String.hashCode of the value; 0: absent, null or
  empty). Codes can collide ("Aa" and "BB"), so they are only trusted when the bytes prove
  each code stands for one value:

  1. the encoded name (``E``) occurs exactly as many times in the records as records have a
     non-zero code, and cannot overlap itself; each such record holds E at least once (its
     header), so every occurrence of E is one such record's one header name and nothing
     else (keys, values, other headers, records with code 0) holds those bytes: a record
     with code 0 has no header of that name, the property is absent;
  2. for each code, the value of its first record (read at that record's occurrence of E:
     occurrences come in record order) gives the header's bytes ``E + len + value``; every
     occurrence of those bytes starts at an occurrence of E, so is a record whose header
     holds exactly that value. As many occurrences as records with the code: all of them
     hold that value.

The filter is then evaluated once per distinct combination of values, and the records are
picked by their codes in one comprehension. Any condition not met (no compiled scan, a batch
the scan does not vouch for, an empty value, a value length not minimally encoded, more
than MAX_NAMES properties): None.
"""

from __future__ import annotations

from collections import Counter

from rmqkafka.storage import batch_scan
from rmqkafka.storage.batch_builder import zigzag_varint

from .filters.record_filter import RecordFilter

# Properties one filter may read for this path: each costs a C pass over the batch.
MAX_NAMES = 4

_ABSENT = object()  # a column whose property no record of the batch holds


def kept_records(flt: RecordFilter, plain: bytes | memoryview, region: bytes, count: int,
                 first: int) -> list[int] | None:
    """Indexes (>= ``first``, ascending) of the records of ``plain`` that ``flt`` keeps, or
    None when not settled this way (see the module docstring). ``region``: the batch's
    records (``plain`` after its 61-byte header), ``count``: its record count."""
    names = sorted(flt.names)
    if len(names) > MAX_NAMES:
        return None
    columns: list[tuple[str, list[int], dict[int, str]]] = []
    for name in names:
        encoded = _encoded_name(name)
        if encoded is None:
            return None
        if encoded not in region:
            continue  # absent from every record
        if batch_scan.scan is None:
            return None
        scanned = batch_scan.scan(plain, name.encode())
        if scanned is None:
            return None
        codes = scanned[4]
        if codes is None:  # the bytes were elsewhere: no record has such a header
            continue
        values = _values_by_code(region, encoded, codes)
        if values is None:
            return None
        columns.append((name, codes, values))
    if not columns:
        verdict = flt.matches({})
        return list(range(first, count)) if verdict and first < count else []
    if len(columns) == 1:
        name, codes, values = columns[0]
        good = {code for code, value in values.items() if flt.matches({name: value})}
        if 0 in codes and flt.matches({}):
            good.add(0)
        if not good:
            return []
        return [i for i in range(first, count) if codes[i] in good]
    keys = list(zip(*(codes for _, codes, _ in columns)))
    verdicts = {key: flt.matches({name: values[code] for (name, _, values), code in zip(columns, key) if code})
                for key in set(keys[first:])}
    return [i for i in range(first, count) if verdicts[keys[i]]]


def _encoded_name(name: str) -> bytes | None:
    """A header name as it stands in a record (length varint, UTF-8 bytes), or None when it
    could overlap itself (then counting its occurrences would not count headers)."""
    try:
        raw = name.encode()
    except UnicodeEncodeError:
        return None
    encoded = zigzag_varint(len(raw)) + raw
    if any(encoded.endswith(encoded[:k]) for k in range(1, len(encoded))):
        return None
    return encoded


def _values_by_code(region: bytes, encoded: bytes, codes: list[int]) -> dict[int, str] | None:
    """Each non-zero code's one value (decoded as header_properties decodes it), or None when
    the bytes do not prove a code stands for one value (see the module docstring)."""
    per_code = Counter(codes)
    holders = len(codes) - per_code.pop(0, 0)
    if region.count(encoded) != holders:
        return None
    raw_values: dict[int, bytes] = {}
    at = -1
    skip = len(encoded)
    for code in codes:  # stops once every code has its first record's value
        if not code:
            continue
        at = region.find(encoded, at + 1)
        if code not in raw_values:
            size, start = _length_at(region, at + skip)
            if size <= 0:
                return None
            raw_values[code] = region[start : start + size]
            if len(raw_values) == len(per_code):
                break
    values: dict[int, str] = {}
    for code, raw in raw_values.items():
        if region.count(encoded + zigzag_varint(len(raw)) + raw) != per_code[code]:
            return None
        values[code] = raw.decode("utf-8", "replace")
    return values


def _length_at(region: bytes, pos: int) -> tuple[int, int]:
    """(zigzag varint of at most 5 bytes at ``pos``, position after it); (-1, pos) when it
    does not read (the scan vouched for the batch, so this is never expected)."""
    raw = 0
    for shift in range(0, 35, 7):
        if pos >= len(region):
            break
        byte = region[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
    return -1, pos
