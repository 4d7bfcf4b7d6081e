"""Reading a subscription view: its source partition's batches, filtered.

What a read returns (:class:`ReadResult`), from the batch holding ``offset`` on:

* batches in offset order that together cover every offset from ``offset`` to where the
  read stopped, each a valid v2 batch, none overlapping the next;
* a source batch whose records all match goes out as stored (the same bytes object read
  from the commitlog); one with some matches is rebuilt with only those records
  (storage.batch_builder.subset_batch: base offset, last offset delta, producer fields and
  attributes kept, records copied byte for byte, compressed as the source was, at the
  levels of SUBSET_LEVELS); a
  run of offsets without a match becomes one covering batch (batch_builder.covering_batch),
  so clients advance past it; control batches go out as stored;
* ``max_bytes`` / ``min_one`` as for topics (KIP-74) on the bytes returned.

How matches are found. Tag filters read only the consume queue (20-byte entries, in chunks
of CHUNK entries) and look for the filter's tag codes with ``bytes.find`` on the raw
entries, so a run of non-matching records costs no Python work per record; the commitlog
is read only for a batch with a code hit (or the control code, CONTROL_CODE). The exact tag
is then checked, since different tags can share a code ("Aa" and "BB"): for a batch whose
every record has a code hit, by counting the header's encoded bytes in the batch (see
``_all_tagged``), otherwise per hit record by decoding its headers. SQL92 filters read every
batch: each batch is settled per distinct value of the headers the filter names, from one C
pass per name (header_code_match), without decoding the records; a batch that way cannot
settle exactly is decoded (aiokafka's C reader) and each distinct set of headers in it
tested once (records of a batch tend to share them).

A read does bounded work (SCAN_ENTRIES consume-queue entries, SCAN_BYTES of source batches):
when it stops there, it covers what it examined and says so (``more``), so a fetch answers at
once instead of waiting, and the consumer's next fetch goes on from there.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from rmqkafka.storage import record_batch
from rmqkafka.storage.batch_builder import covering_batch, subset_batch, zigzag_varint
from rmqkafka.storage.consume_queue import CODE_AT, CONTROL_CODE, ENTRY_SIZE
from rmqkafka.storage.errors import CorruptRecordError, OffsetOutOfRangeError
from rmqkafka.storage.partition_log import PartitionLog
from rmqkafka.storage.recompress import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    Compression,
    records_region,
)
from rmqkafka.storage.record_layout import record_ends, record_headers

from .filters.record_filter import TAGS, RecordFilter
from .filters.tags import parse_tags
from .header_code_match import kept_records

CHUNK = 4096  # consume-queue entries per read (80 KiB)
SCAN_ENTRIES = 1 << 20  # entries one read examines at most (20 MiB of consume queue)
# Bytes of source batches one read decodes at most. A read runs on the broker's one event
# loop: 2 MiB (16,000 records of 100 B) is ~25 ms of SQL evaluation, so one fetch of a view
# never holds up every other client for long; librdkafka, Java and aiokafka send the next
# fetch at once.
SCAN_BYTES = 2 << 20
MAX_COVER = (1 << 31) - 1  # offsets one covering batch spans at most (lastOffsetDelta is int32)
# A rebuilt batch keeps its source's codec, as Kafka's cleaner does, at a fast level: for a
# tenth of a 1000-record batch of 100-byte JSON values, rebuilding takes ~170 us and
# compressing the kept 12 KB adds 42 us with gzip level 1 (107 us at 6), 10 us with lz4's
# fast mode (92 us at level 9, Kafka's producer default), 35 us with zstd 3 and 11 us with
# snappy, for batches 4-8x smaller than sent uncompressed.
SUBSET_LEVELS = {GZIP: 1, SNAPPY: None, LZ4: 0, ZSTD: 3}

_CODE = struct.Struct(">q")
_POSITION_SIZE = struct.Struct(">qi")
_CONTROL_PATTERN = _CODE.pack(CONTROL_CODE)
_COUNT = struct.Struct(">i")
_NO_TAG = _CODE.pack(0)
_SMALLEST_BATCH = len(covering_batch(0, 0))
_TAGS_NAME = TAGS.encode()
DATA, CONTROL = "data", "control"


class ViewReadCounts:
    """Source offsets read through a view and records among them its filter passed, since
    start-up: their ratio is the view's filtered fraction (rmqk_view_* metrics). Counted from
    the batch headers a read returns (a returned batch may start before the offset asked
    for, so the count is approximate by at most a batch per read)."""

    __slots__ = ("scanned", "matched")

    def __init__(self) -> None:
        self.scanned = 0
        self.matched = 0

    def add(self, offset: int, batches: list[bytes]) -> None:
        if not batches:
            return
        self.scanned += max(0, record_batch.next_offset_of(batches[-1]) - offset)
        for batch in batches:
            if not batch[22] & record_batch.CONTROL_BIT:
                self.matched += _COUNT.unpack_from(batch, 57)[0]


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What a Fetch gets for one partition of a topic or a view.

    ``record_bytes`` counts the batches that carry records a consumer acts on (data and
    control batches; not covering batches): what a fetch's ``min_bytes`` is compared with,
    so a view's consumer is not answered early with only gaps. ``more``: the read stopped on
    its work limit before the log end, so the fetch should answer without waiting.
    """

    batches: list[bytes]
    size: int
    log_start_offset: int
    high_watermark: int
    record_bytes: int
    more: bool = False


def read_view(plog: PartitionLog, flt: RecordFilter, offset: int, max_bytes: int, min_one: bool,
              *, scan_entries: int = SCAN_ENTRIES, scan_bytes: int = SCAN_BYTES,
              max_offset: int | None = None) -> ReadResult:
    """The view's batches from ``offset`` (see the module docstring). Raises
    OffsetOutOfRangeError as the source's read does. ``max_offset`` (read_committed: the
    source's LSO): the walk, and the gaps it covers, stop there; control batches below it
    pass through, so a read_committed consumer sees the markers of the view's records."""
    end = plog.next_offset
    start = plog.log_start_offset
    if offset < start or offset > end:
        raise OffsetOutOfRangeError(offset, start, end)
    if flt.kind == "tags" and flt.codes is None:  # "*": every record matches
        result = plog.read(offset, max_bytes, min_one, max_offset)
        return ReadResult(result.batches, result.size, start, end, result.size)
    stop = end if max_offset is None else min(end, max_offset)
    if not min_one and max_bytes < _SMALLEST_BATCH:  # nothing could be returned: no work
        return ReadResult([], 0, start, end, 0)
    batches: list[bytes] = []
    size = 0
    carried = 0
    cursor = offset  # every offset below it is covered by ``batches``

    def fits(length: int) -> bool:
        return size + length <= max_bytes or (min_one and not batches)

    walk = _Walk(plog, flt, offset, stop, scan_entries, scan_bytes)
    stopped = False
    for base, nxt, batch, _ in walk:
        if base > cursor:
            for gap in _covering(cursor, base - 1):
                if not fits(len(gap)):
                    stopped = True
                    break
                batches.append(gap)
                size += len(gap)
                cursor = record_batch.next_offset_of(gap)
            if stopped:
                break
        if not fits(len(batch)):
            stopped = True
            break
        batches.append(batch)
        size += len(batch)
        carried += len(batch)
        cursor = nxt
    if not stopped and walk.position > cursor:
        for gap in _covering(cursor, walk.position - 1):
            if not fits(len(gap)):
                stopped = True
                break
            batches.append(gap)
            size += len(gap)
    return ReadResult(batches, size, start, end, carried, more=walk.limited and not stopped)


def first_match_at_or_after(plog: PartitionLog, flt: RecordFilter, timestamp_ms: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the view stamped >= ``timestamp_ms``:
    from the source's answer to the same question on, the first record that matches."""
    found = plog.offset_for_timestamp(timestamp_ms)
    if found is None:
        return None
    since = found[0]
    walk = _Walk(plog, flt, since, plog.next_offset, 1 << 62, 1 << 62)
    for _, _, batch, kind in walk:
        if kind == CONTROL:
            continue
        for record in record_batch.read_records(batch):
            if record.offset >= since and record.timestamp >= timestamp_ms:
                return record.offset, record.timestamp
    return None


def _plain_form(batch: bytes) -> tuple[bytes, bytes]:
    """(records region, plain batch: the header, codec bits cleared, and that region) of a
    stored batch, decompressed if it is compressed."""
    if not batch[22] & 0x07:
        return batch[record_batch.HEADER_SIZE:], batch
    region = bytes(records_region(batch))
    header = bytearray(batch[:record_batch.HEADER_SIZE])
    header[22] &= ~0x07
    return region, bytes(header) + region


def _covering(first: int, last: int) -> Iterator[bytes]:
    while first <= last:
        upto = min(last, first + MAX_COVER)
        yield covering_batch(first, upto)
        first = upto + 1


class _Walk:
    """The source batches from ``offset`` that hold a record of the view, in order, as
    ``(base offset, next offset, batch to send, DATA or CONTROL)``. ``position``: every
    offset below it has been examined; ``limited``: the walk stopped on a work limit."""

    def __init__(self, plog: PartitionLog, flt: RecordFilter, offset: int, end: int,
                 scan_entries: int, scan_bytes: int) -> None:
        self.plog = plog
        self.flt = flt
        self.end = end
        self.position = offset
        self.limited = False
        self._entries_left = scan_entries
        self._bytes_left = scan_bytes

    def __iter__(self) -> Iterator[tuple[int, int, bytes, str]]:
        yield from self._cleaned_batches()
        if self.flt.codes is None:
            yield from self._every_batch()
        else:
            yield from self._tagged_batches()

    # -- a compacted source's cleaned offsets: its compaction store, every batch read ------
    def _cleaned_batches(self) -> Iterator[tuple[int, int, bytes, str]]:
        compacted = self.plog.compacted
        if compacted is None or self.position >= compacted.end_offset:
            return
        stop = min(self.end, compacted.end_offset)
        for batch in compacted.batches_from(self.position):
            base = record_batch.base_offset_of(batch)
            if base >= stop or self._spent():
                break
            self._bytes_left -= len(batch)
            nxt = record_batch.next_offset_of(batch)
            out = self._filtered(batch, base, max(base, self.position))
            self.position = nxt
            if out is not None:
                yield base, nxt, *out
        else:
            self.position = max(self.position, stop)
            return
        if not self.limited:
            self.position = max(self.position, min(stop, base))

    def _spent(self) -> bool:
        if self._entries_left <= 0 or self._bytes_left <= 0:
            self.limited = True
            return True
        return False

    def _read(self, position: int, size: int) -> bytes:
        self._bytes_left -= size
        return self.plog.read_at(position, size)

    # -- SQL92 (and any filter without tag codes): every batch is read --------------------
    def _every_batch(self) -> Iterator[tuple[int, int, bytes, str]]:
        queue = self.plog.consume_queue
        while self.position < self.end and not self._spent():
            position, size, _ = queue.entry(self.position)
            if size == 0:  # a lost offset (damaged commitlog range): nothing to filter
                self.position += 1
                continue
            batch = self._read(position, size)
            base = record_batch.base_offset_of(batch)
            nxt = record_batch.next_offset_of(batch)
            out = self._filtered(batch, base, max(base, self.position))
            self.position = nxt
            if out is not None:
                yield base, nxt, *out

    def _filtered(self, batch: bytes, base: int, lo: int) -> tuple[bytes, str] | None:
        if batch[22] & record_batch.CONTROL_BIT:
            return batch, CONTROL
        (count,) = _COUNT.unpack_from(batch, 57)
        if count == record_batch.next_offset_of(batch) - base:  # not sparse: index = offset - base
            region, plain = _plain_form(batch)
            keep = kept_records(self.flt, plain, region, count, lo - base)
            if keep is not None:
                return self._output(batch, keep, count, region)
        records = record_batch.read_records(batch)  # aiokafka's C reader: ~0.6 us a record
        matches = self.flt.matches_headers
        keep = []
        # Records of a batch often carry the same headers (a type, a region, a tag): each
        # distinct set is evaluated once per batch.
        verdicts: dict[tuple, bool] = {}
        for i, record in enumerate(records):
            if record.offset < lo:  # (by offset: a sparse batch has fewer records than offsets)
                continue
            headers = record.headers
            key = tuple(headers)
            verdict = verdicts.get(key)
            if verdict is None:
                verdict = verdicts[key] = matches(headers)
            if verdict:
                keep.append(i)
        return self._output(batch, keep, len(records))

    # -- tag filters: the consume queue first ---------------------------------------------
    def _tagged_batches(self) -> Iterator[tuple[int, int, bytes, str]]:
        queue = self.plog.consume_queue
        codes = sorted(self.flt.codes or ())
        data_patterns = [_CODE.pack(code) for code in codes]
        patterns = [*data_patterns, _CONTROL_PATTERN]
        exact = _header_patterns(self.flt) if 0 not in codes else None
        while self.position < self.end and not self._spent():
            chunk_start = self.position
            raw = queue.entries(chunk_start, min(CHUNK, self.end - chunk_start))
            count = len(raw) // ENTRY_SIZE
            if not count:
                break
            self._entries_left -= count
            hits = _Hits(raw, patterns)
            index = 0
            while True:
                hit = hits.first(index)
                if hit < 0:  # no hit in the rest of the chunk: all of it is examined
                    self.position = chunk_start + count
                    break
                position, size = _POSITION_SIZE.unpack_from(raw, hit * ENTRY_SIZE)
                if size == 0:  # a lost offset (damaged commitlog range)
                    self.position = chunk_start + hit + 1
                    index = hit + 1
                    if index >= count:
                        break
                    continue
                batch = self._read(position, size)
                base = record_batch.base_offset_of(batch)
                nxt = record_batch.next_offset_of(batch)
                out = self._tagged(batch, base, nxt, max(base, self.position), data_patterns, exact)
                self.position = nxt
                if out is not None:
                    yield base, nxt, *out
                index = nxt - chunk_start
                if index >= count or self._bytes_left <= 0:
                    break

    def _tagged(self, batch: bytes, base: int, nxt: int, lo: int, data_patterns: list[bytes],
                exact: list[bytes] | None) -> tuple[bytes, str] | None:
        if batch[22] & record_batch.CONTROL_BIT:
            return batch, CONTROL
        entries = _entries(self.plog, lo, nxt)
        candidates = _aligned(entries, data_patterns)
        if not candidates:
            return None
        (count,) = _COUNT.unpack_from(batch, 57)
        if count != nxt - base:  # sparse (records parked on append): entries are not records
            return self._filtered(batch, base, lo)
        region = bytes(records_region(batch)) if batch[22] & 0x07 else batch[record_batch.HEADER_SIZE:]
        # With the whole batch's codes at hand and none of them 0 (no record without a tag),
        # counting the TAGS name settles the exact tags in C (see _all_tagged).
        names = -1
        if exact is not None and lo == base and _find_aligned(entries, _NO_TAG, 0) < 0:
            names = region.count(_TAGS_NAME)
        if names == count and len(candidates) == count and _all_tagged(region, count, exact):
            return batch, DATA
        ends = record_ends(region)
        if len(ends) != count:
            raise CorruptRecordError(f"batch declares {count} records but holds {len(ends)}")
        first = lo - base
        keep = []
        if names == count:  # each record's one TAGS name is its header's: look for the tags in it
            for candidate in candidates:
                start = ends[candidate - 1] if candidate else 0
                end = ends[candidate]
                if any(region.find(pattern, start, end) >= 0 for pattern in exact):
                    keep.append(candidate)
        else:
            matches = self.flt.matches_headers
            for candidate in candidates:
                i = first + candidate
                if matches(record_headers(region, ends[i - 1] if i else 0)):
                    keep.append(i)
        return self._output(batch, keep, count, region, ends)

    @staticmethod
    def _output(batch: bytes, keep: list[int], count: int, region: bytes | None = None,
                ends: list[int] | None = None) -> tuple[bytes, str] | None:
        if not keep:
            return None
        if len(keep) == count:
            return batch, DATA
        if region is None:
            region = bytes(records_region(batch))
        if ends is None:
            ends = record_ends(region)
            if len(ends) != count:
                raise CorruptRecordError(f"batch declares {count} records but holds {len(ends)}")
        codec = batch[22] & 0x07
        compression = None if codec == NONE else Compression(codec, SUBSET_LEVELS.get(codec))
        return subset_batch(batch, region, ends, keep, compression), DATA


class _Hits:
    """Entry indexes of a raw consume-queue chunk whose tag code is one of ``patterns``
    (8-byte big-endian codes), found with ``bytes.find``; the next hit of each pattern is
    remembered, so k patterns cost k scans of the chunk in all, not k per hit."""

    __slots__ = ("_next", "_patterns", "_raw")

    def __init__(self, raw: bytes, patterns: list[bytes]) -> None:
        self._raw = raw
        self._patterns = patterns
        self._next = [-2] * len(patterns)  # -2: not looked for yet, -1: no more

    def first(self, index: int) -> int:
        """The first hit at or after entry ``index``, or -1."""
        best = -1
        for k, pattern in enumerate(self._patterns):
            at = self._next[k]
            if at == -1:
                continue
            if at < index:
                at = self._next[k] = _find_aligned(self._raw, pattern, index)
                if at < 0:
                    continue
            if best < 0 or at < best:
                best = at
        return best


def _find_aligned(raw: bytes, pattern: bytes, index: int) -> int:
    """The first entry at or after ``index`` whose tag code is ``pattern``, or -1. A match
    that straddles fields is skipped (it is not at a tag code's place)."""
    at = raw.find(pattern, index * ENTRY_SIZE + CODE_AT)
    while at >= 0:
        if at % ENTRY_SIZE == CODE_AT:
            return at // ENTRY_SIZE
        at = raw.find(pattern, at + 1)
    return -1


def _aligned(raw: bytes, patterns: list[bytes]) -> list[int]:
    """Every entry index of ``raw`` whose tag code is one of ``patterns``, ascending."""
    found: list[int] = []
    for pattern in patterns:
        at = raw.find(pattern, CODE_AT)
        while at >= 0:
            if at % ENTRY_SIZE == CODE_AT:
                found.append(at // ENTRY_SIZE)
                at = raw.find(pattern, at + ENTRY_SIZE)
            else:
                at = raw.find(pattern, at + 1)
    if len(patterns) > 1:
        found.sort()
    return found


def _entries(plog: PartitionLog, lo: int, nxt: int) -> bytes:
    """Raw consume-queue entries of offsets [lo, nxt) (a batch may span two queue files)."""
    queue = plog.consume_queue
    raw = queue.entries(lo, nxt - lo)
    got = len(raw) // ENTRY_SIZE
    if lo + got >= nxt or not got:
        return raw
    parts = [raw]
    lo += got
    while lo < nxt:
        more = queue.entries(lo, nxt - lo)
        if not more:
            break
        parts.append(more)
        lo += len(more) // ENTRY_SIZE
    return b"".join(parts)


@functools.lru_cache(maxsize=256)
def _header_patterns(flt: RecordFilter) -> list[bytes] | None:
    """The bytes of a ``TAGS`` header (name and value, with their length varints) for each
    tag of ``flt``, or None if a tag has no UTF-8 form."""
    name = TAGS.encode()
    try:
        return [zigzag_varint(len(name)) + name + zigzag_varint(len(tag.encode())) + tag.encode()
                for tag in sorted(_tags_of(flt))]
    except UnicodeEncodeError:
        return None


def _tags_of(flt: RecordFilter) -> frozenset[str]:
    return parse_tags(flt.expression).tags or frozenset()


def _all_tagged(region: bytes, count: int, patterns: list[bytes]) -> bool:
    """Whether each of the ``count`` records of ``region`` has a tag of the filter, given
    that no record's tag code is 0 and the ``TAGS`` name occurs ``count`` times in it.

    A non-zero code means the record has a non-empty ``TAGS`` header, so the name occurs
    at least once per record; occurring ``count`` times in all, each occurrence is a
    record's one ``TAGS`` header name and nothing else holds those bytes. Then each
    occurrence of a whole pattern (name, value length, value) is a record's header holding
    exactly that tag, and ``count`` occurrences in all mean every record has one.
    """
    return sum(region.count(pattern) for pattern in patterns) == count
