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
  2. values as wide as the first one (under 64 bytes): one regular expression pass reads the
     bytes after each occurrence of E (the value's length and the value), in record order, so
     the i-th window is the i-th holder's header and, when its length byte is that width's,
     its value: the windows themselves are the records' keys, no code is trusted;
  3. otherwise (or when 2 does not settle it), the codes are the keys: for each code, the
     value of its first record (read at that record's occurrence of E) gives the header's
     bytes ``E + len + value``; every occurrence of those bytes starts at an occurrence of E,
     so is a record whose header holds exactly that value. As many occurrences as records
     with the code: all of them hold that value.

The filter is then evaluated once per distinct combination of values, and the records are
picked by their keys in one comprehension. Any condition not met (no compiled scan, a batch
the scan does not vouch for, an empty value, a value length not minimally encoded, more
than MAX_NAMES properties): None.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import compress, islice

from rmqkafka.storage import batch_scan
from rmqkafka.storage.batch_builder import zigzag_varint

from .filters.record_filter import RecordFilter

# Properties one filter may read for this path: each costs a C pass over the batch.
MAX_NAMES = 4
# Verdicts on short values remembered across batches (filter, name, value).
VERDICTS = 4096

# Values under 64 bytes have a one-byte length (zigzag: 2 * width): their windows are read
# with one regular expression pass.
_WINDOW_WIDTHS = 64
_ZIGZAG_ONE_BYTE = [2 * width for width in range(_WINDOW_WIDTHS)]

# A column: each record's key (records with the same key hold the same value) and each key's
# value, ABSENT for records without the header.
ABSENT = object()
Column = tuple[Sequence[Hashable], dict[Hashable, object]]


def kept_records(flt: RecordFilter, plain: bytes | memoryview, region: bytes, count: int,
                 first: int) -> list[int] | None:
    """Indexes (>= ``first``, ascending) of the records of ``plain`` that ``flt`` keeps, or
    None when not settled this way (see the module docstring). ``region``: the batch's
    records (``plain`` after its 61-byte header), ``count``: its record count."""
    names = sorted(flt.names)
    if len(names) > MAX_NAMES:
        return None
    columns: list[tuple[str, Column]] = []
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
        column = _column(region, encoded, codes)
        if column is None:
            return None
        columns.append((name, column))
    if not columns:
        return list(range(first, count)) if first < count and flt.matches({}) else []
    if len(columns) == 1:
        name, (keys, values) = columns[0]
        good = {key for key, value in values.items() if _verdict(flt, name, value)}
        if not good:
            return []
        return _picked(keys, good, first, count)
    rows = list(zip(*(keys for _, (keys, _) in columns)))
    verdicts = {row: flt.matches({name: value for (name, (_, values)), key in zip(columns, row)
                                  if (value := values[key]) is not ABSENT})
                for row in set(rows[first:])}
    return [i for i in range(first, count) if verdicts[rows[i]]]


def _picked(keys: Sequence[Hashable], good: set, first: int, count: int) -> list[int]:
    """Indexes >= ``first`` whose key is in ``good``, with no Python step per record: a
    single key held by at most half the records is found with ``list.index`` (a step per
    kept record), otherwise every key is tested in C."""
    if len(good) == 1 and isinstance(keys, list):
        (key,) = good
        if 2 * keys.count(key) <= count:
            picked: list[int] = []
            at = first - 1
            index = keys.index
            try:
                while True:
                    at = index(key, at + 1)
                    picked.append(at)
            except ValueError:
                return picked
    tested = keys if first == 0 else islice(keys, first, None)
    return list(compress(range(first, count), map(good.__contains__, tested)))


def _verdict(flt: RecordFilter, name: str, value: object) -> bool:
    """The filter on a record whose only property it reads is ``name`` = ``value`` (ABSENT:
    none). Batches repeat the same few values: a short one is evaluated once, not once a
    batch (the cache holds at most VERDICTS values of at most _WINDOW_WIDTHS characters)."""
    if value is not ABSENT and len(value) >= _WINDOW_WIDTHS:  # type: ignore[arg-type]
        return flt.matches({name: value})
    return _short_verdict(flt, name, value)


@functools.lru_cache(maxsize=VERDICTS)
def _short_verdict(flt: RecordFilter, name: str, value: object) -> bool:
    return flt.matches({} if value is ABSENT else {name: value})


@functools.lru_cache(maxsize=256)
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


def _column(region: bytes, encoded: bytes, codes: list[int]) -> Column | None:
    """Each record's key and each key's value (decoded as header_properties decodes it) for
    the header ``encoded`` names, or None when the bytes do not prove it (module docstring)."""
    holders = len(codes) - codes.count(0)
    if region.count(encoded) != holders:
        return None
    skip = len(encoded)
    width, _ = _length_at(region, region.find(encoded) + skip)
    if 0 < width < _WINDOW_WIDTHS:
        # every value as wide as the first: each header's length and value in one C pass
        windows = _windows(encoded, width).findall(region)
        if len(windows) == holders:
            column = _window_column(codes, windows, holders, _ZIGZAG_ONE_BYTE[width])
            if column is not None:
                return column
    return _code_column(region, encoded, codes)


def _window_column(codes: list[int], windows: list[bytes], holders: int, lead: int) -> Column | None:
    """The holders' windows (length byte and value, in record order) as the records' keys
    (None for a record without the header), or None when a window's length is not ``lead``."""
    if holders == len(codes):
        keys: list = windows
    else:
        following = iter(windows)
        keys = [next(following) if code else None for code in codes]
    values: dict[Hashable, object] = {}
    for window in set(keys):
        if window is None:
            values[None] = ABSENT
        elif window[0] != lead:
            return None
        else:
            values[window] = window[1:].decode("utf-8", "replace")
    return keys, values


def _code_column(region: bytes, encoded: bytes, codes: list[int]) -> Column | None:
    """The records' codes as their keys, for values of different widths: each code's first
    value read where its record's name occurs, then proved by counting its header's bytes (a
    pass per code); None when a code stands for more than one value."""
    per_code = Counter(codes)
    per_code.pop(0, None)
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
    values: dict[Hashable, object] = {0: ABSENT}
    for code, raw in raw_values.items():
        if region.count(encoded + zigzag_varint(len(raw)) + raw) != per_code[code]:
            return None
        values[code] = raw.decode("utf-8", "replace")
    return codes, values


@functools.lru_cache(maxsize=256)
def _windows(encoded: bytes, width: int) -> re.Pattern[bytes]:
    """Each occurrence of a header name, capturing the next ``width`` + 1 bytes."""
    return re.compile(re.escape(encoded) + b"(.{%d})" % (width + 1), re.DOTALL)


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
