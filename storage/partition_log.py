"""One topic-partition's view of the commitlog: its consume queue, time index, producers
and transactions.

Holds no batch bytes itself, and no file until its first write: its index files (and their
directory) are created then, so a partition never used costs a few small objects and no
descriptor. ``next_offset`` (the log end offset, which is also the high watermark on this
single-replica broker) comes from the consume queue; ``log_start_offset``
is the first offset still readable and only moves forward (retention, DeleteRecords).
``last_stable_offset`` (LSO) is where a read_committed consumer stops: the first offset of
the earliest transaction still open (no end marker yet), never below the log start offset,
or the log end offset when none is open; ``aborted_transactions`` lists what such a
consumer must drop (see storage.txn_index).

Compacted partitions: offsets below ``cleaned_end`` are served from the partition's
compaction store (storage.compaction_store), the rest from the commitlog; the commitlog is
needed only from ``commitlog_start_offset`` on, and retention deleting the commitlog below
the cleaned end does not move the log start offset.

Lost offsets: offsets whose batch was in a damaged commitlog range that recovery skipped
(LOST_CODE entries, see storage.consume_queue) stay in the partition, so no offset is
handed out twice, and are read as a covering batch without records: a consumer moves past
them as past a gap Kafka's cleaner leaves, and recovery logged them at ERROR. (An error on
every read would keep a consumer retrying forever; moving the log start offset past them
would also drop the valid records before them.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from . import record_batch
from .batch_builder import covering_batch
from .commitlog import CommitLog
from .compaction_store import CompactedLog
from .consume_queue import CONTROL_CODE, LOST_CODE, PARKED_CODE, ConsumeQueue
from .errors import CorruptIndexError, OffsetOutOfRangeError
from .producer_state import ProducerStateTable
from .record_batch import NO_PRODUCER_ID, TRANSACTIONAL_BIT, BatchInfo, Buffer
from .tag_code import tag_code
from .time_index import TimeIndex
from .txn_index import ABORT, OngoingTxns, TxnIndex, end_marker

log = logging.getLogger(__name__)

_NO_RECORDS = bytes(4)  # a batch's records count field, zero


def sparse_codes(span: int, deltas: list[int], codes: list[int] | None) -> list[int]:
    """Codes of the ``span`` offsets of a batch holding records only at offset ``deltas``
    (their tag ``codes``, None = untagged): PARKED_CODE where it holds none."""
    out = [PARKED_CODE] * span
    for i, delta in enumerate(deltas):
        out[delta] = codes[i] if codes is not None else 0
    return out


@dataclass(frozen=True, slots=True)
class FetchResult:
    batches: list[bytes]
    size: int
    log_start_offset: int
    high_watermark: int


class PartitionLog:
    def __init__(
        self,
        topic_id: UUID,
        partition: int,
        directory: Path,
        commitlog: CommitLog,
        entries_per_file: int,
        tag_header: str,
    ) -> None:
        self.topic_id = topic_id
        self.partition = partition
        self.directory = directory
        self._commitlog = commitlog
        self._tag_header = tag_header
        self.consume_queue = ConsumeQueue(directory, entries_per_file)
        self.time_index = TimeIndex(directory / "timeindex")
        self.txn_index = TxnIndex(directory / "txnindex")
        self.producers = ProducerStateTable()
        self.ongoing_txns = OngoingTxns()
        self.log_start_offset = self.consume_queue.min_offset
        # called with the offset whose entry a read found damaged: the store repairs it
        self.on_damage: Callable[[int], None] | None = None
        self._commitlog_start_floor = 0  # see commitlog_start_offset
        self.closed = False
        # a compacted partition's cleaned offsets (storage.compaction_store), served from
        # there below its end offset
        self.compacted: CompactedLog | None = None

    @property
    def next_offset(self) -> int:
        return self.consume_queue.next_offset

    @property
    def commitlog_start_offset(self) -> int:
        """The first offset whose batch this partition keeps in the commitlog: the log start
        offset, unless something else holds the offsets below (a compaction store raises it
        with ``raise_commitlog_start``). Retention treats the partition's batches below it as
        dead: only from here on does the partition pin commitlog segments."""
        return max(self.log_start_offset, self._commitlog_start_floor)

    def raise_commitlog_start(self, offset: int) -> None:
        """The offsets below ``offset`` are served from elsewhere from now on."""
        self._commitlog_start_floor = max(self._commitlog_start_floor, min(offset, self.next_offset))

    @property
    def cleaned_end(self) -> int:
        """Offsets below it are served from the compaction store (0: none are)."""
        return 0 if self.compacted is None else self.compacted.end_offset

    @property
    def last_stable_offset(self) -> int:
        first = self.ongoing_txns.first_offset()
        if first is None:
            return self.next_offset
        # Retention or DeleteRecords may have removed the start of an open transaction
        # (Kafka's first unstable offset is likewise never below the log start).
        return max(first, self.log_start_offset)

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with records in
        [``start``, ``upper``): what a read_committed Fetch from ``start`` that returns data
        below ``upper`` must list."""
        return self.txn_index.aborted_between(start, upper)

    # -- writing ---------------------------------------------------------------------------
    def tag_codes(self, batch: Buffer, records: list | None = None) -> list[int] | None:
        """Consume-queue tag code of each record of ``batch``, or None if none has a tag
        (CONTROL_CODE for each record of a control batch).

        ``records`` are the batch's parsed records, if the caller has them. Raises
        CorruptRecordError when the batch has to be parsed and does not parse, so the store
        calls it before writing anything.
        """
        view = memoryview(batch)
        if view[22] & record_batch.CONTROL_BIT:  # attributes' low byte
            return [CONTROL_CODE] * record_batch.read_info(view).records_count
        if isinstance(records, record_batch.ScannedRecords) and records.tag == self._tag_header:
            return records.tag_codes  # found by the compiled scan, no record read
        tags = record_batch.header_values(batch, self._tag_header, records)
        return None if tags is None else [tag_code(t) for t in tags]

    def offset_codes(self, batch: Buffer, records: list | None = None) -> list[int] | None:
        """Consume-queue code of each offset ``batch`` spans: ``tag_codes`` for a batch that
        holds a record at every offset; for a sparse one (records left out on append), its
        records' codes at their offsets and PARKED_CODE at the others."""
        info = record_batch.read_info(batch)
        span = info.last_offset_delta + 1
        if info.records_count == span:
            return self.tag_codes(batch, records)
        if records is None:
            records = record_batch.read_records(batch)
        codes = self.tag_codes(batch, records) if records else None
        return sparse_codes(span, [r.offset - record_batch.base_offset_of(batch) for r in records], codes)

    def dispatch(
        self, position: int, info: BatchInfo, base_offset: int, codes: list[int] | None,
        batch: Buffer | None = None,
    ) -> None:
        """Index a batch that is in the commitlog at ``position`` (live append or replay).

        ``base_offset`` is the broker-assigned one, ``codes`` what ``tag_codes`` returned
        for the batch; the batch size is taken from ``info``. ``batch``: its bytes, when the
        caller has them (only an end-transaction marker is read; without them, from the
        commitlog).
        """
        self.consume_queue.append(info.last_offset_delta + 1, position, info.length, codes)
        self.time_index.maybe_append(info.max_timestamp, base_offset)
        if info.producer_id == NO_PRODUCER_ID:
            return
        if info.is_control:
            # A marker takes no part in the producer's sequence numbers (it carries none).
            self._end_transaction(position, info, base_offset, batch)
            return
        self.producers.update(info, base_offset)
        if info.attributes & TRANSACTIONAL_BIT:
            self.ongoing_txns.begin(info.producer_id, base_offset)

    def _end_transaction(self, position: int, info: BatchInfo, offset: int,
                         batch: Buffer | None) -> None:
        """The end marker at ``offset`` closes its producer's open transaction; an ABORT
        records it. A marker without an open transaction records nothing, and neither does a
        marker batch without records (what Kafka's cleaner leaves of one), as in Kafka."""
        if not info.records_count:
            return
        if batch is None:
            batch = self._commitlog.read(position, info.length)
        marker = end_marker(batch)
        if marker is None:
            log.error("%s/%d: control batch at offset %d is not an end-transaction marker; "
                      "ignored", self.topic_id, self.partition, offset)
            return
        kind, coordinator_epoch = marker
        # the index file first, memory after: a failed write changes nothing (all or nothing)
        first = self.ongoing_txns.first_offset_of(info.producer_id)
        if kind == ABORT and first >= 0:
            others = next((o for pid, o in self.ongoing_txns.items() if pid != info.producer_id), None)
            stable = offset + 1 if others is None else others
            self.txn_index.append(info.producer_id, first, offset, stable)
        self.ongoing_txns.end(info.producer_id)
        self.producers.end_transaction(info, coordinator_epoch)

    def mark_lost(self, end_offset: int, position: int) -> tuple[int, int] | None:
        """Fill offsets ``next_offset`` .. ``end_offset - 1`` with lost entries (their batches
        were in damaged commitlog bytes from ``position`` on); returns the range filled."""
        start = self.next_offset
        if end_offset <= start:
            return None
        self.consume_queue.append_lost(end_offset - start, position)
        return start, end_offset

    def index_marks(self) -> tuple[int, int, int]:
        """Where the index files end now, for ``undo_to``."""
        return self.consume_queue.next_offset, self.time_index.entry_count, self.txn_index.entry_count

    def undo_to(self, marks: tuple[int, int, int]) -> None:
        """Cut the index files back to ``marks`` (an append that failed half-way: its
        entries, and whatever a failed write left past them, go; memory was not touched)."""
        next_offset, time_entries, txn_entries = marks
        self.consume_queue.truncate_to(next_offset)
        self.time_index.truncate_entries(time_entries)
        self.txn_index.truncate_entries(txn_entries)

    # -- reading ---------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, min_one: bool,
             max_offset: int | None = None) -> FetchResult:
        """Whole batches from the one holding ``offset`` on, up to ``max_bytes``.

        With ``min_one`` the first batch is returned even if it alone exceeds ``max_bytes``,
        so a consumer can always make progress (KIP-74). A stored batch without records (all
        of them parked elsewhere on append) goes out as a covering batch, which every client
        counts as progress (see storage.batch_builder). ``max_offset`` (read_committed: the
        LSO): only batches starting below it, never a part of one; nothing when ``offset``
        is at or past it (the range check stays against the log end, as in Kafka).
        """
        end = self.next_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, end)
        stop = end if max_offset is None else min(max_offset, end)
        batches: list[bytes] = []
        size = 0
        compacted = self.compacted
        if compacted is not None and offset < min(stop, compacted.end_offset):
            batches, size, full = compacted.read(offset, min(stop, compacted.end_offset), max_bytes, min_one)
            if full:
                return FetchResult(batches, size, self.log_start_offset, end)
            offset = compacted.end_offset
        while offset < stop:
            position, batch_size, code = self.consume_queue.entry(offset)
            if code == LOST_CODE:
                batch = self._lost(offset, stop)
                batch_size = len(batch)
            if size + batch_size > max_bytes and (batches or not min_one):
                break
            if code != LOST_CODE:
                batch = self._checked(offset, position, batch_size)
            offset = record_batch.next_offset_of(batch)
            if batch[57:61] == _NO_RECORDS:
                batch = covering_batch(record_batch.base_offset_of(batch), offset - 1)
            batches.append(batch)
            size += len(batch)
        return FetchResult(batches, size, self.log_start_offset, end)

    def bytes_available(self, offset: int, limit: int, max_offset: int | None = None) -> int:
        """Bytes of batches from ``offset`` on, counted up to ``limit`` (for min_bytes);
        ``max_offset`` as for ``read``."""
        end = self.next_offset if max_offset is None else min(max_offset, self.next_offset)
        if offset < self.log_start_offset or offset >= end:
            return 0
        size = 0
        compacted = self.compacted
        if compacted is not None and offset < compacted.end_offset:
            size = compacted.bytes_from(offset)
            offset = compacted.end_offset
        while offset < end and size < limit:
            position, batch_size, _ = self.consume_queue.entry(offset)
            if not self._commitlog.start_position <= position < self._commitlog.end_position or batch_size <= 0:
                return limit  # a damaged entry: enough to make the fetch read, and read() refuses it
            size += batch_size
            head = self._commitlog.read(position, record_batch.HEADER_SIZE)
            following = record_batch.next_offset_of(head) if len(head) == record_batch.HEADER_SIZE else offset
            if following <= offset:
                return limit
            offset = following
        return size

    def read_at(self, position: int, size: int) -> bytes:
        """The batch a consume-queue entry names (its position and size)."""
        return self._commitlog.read(position, size)

    def batch_at(self, offset: int) -> bytes:
        """The batch holding ``offset``; below the cleaned end of a compacted partition, the
        first one at or after it (the offset itself may have been cleaned away)."""
        compacted = self.compacted
        if compacted is not None and offset < compacted.end_offset:
            batch = compacted.batch_at_or_after(offset)
            if batch is not None:
                return batch
            offset = compacted.end_offset
        position, size, code = self.consume_queue.entry(offset)
        if code == LOST_CODE:
            return self._lost(offset, self.next_offset)
        return self._checked(offset, position, size)

    def _lost(self, offset: int, stop: int) -> bytes:
        """A covering batch for the lost offsets from ``offset`` on (up to ``stop``)."""
        end = min(self.consume_queue.lost_run_end(offset), stop)
        return covering_batch(offset, end - 1)

    def _checked(self, offset: int, position: int, size: int) -> bytes:
        """The batch the consume queue names for ``offset``, after checking it is one: its
        commitlog entry header (this partition, this size, CRC) and that its offsets include
        ``offset``. A damaged index raises CorruptIndexError (and is logged) instead of
        serving another batch or looping on it, and ``on_damage`` has the damaged entries
        rebuilt from the commitlog (storage.index_repair); a later read finds them whole."""
        batch = self._commitlog.read_checked(position, size, self.topic_id, self.partition)
        if batch is None or not record_batch.base_offset_of(batch) <= offset < record_batch.next_offset_of(batch):
            log.error("%s/%d: the consume-queue entry of offset %d (position %d, %d bytes) does not point at "
                      "its batch; rebuilding the damaged entries from the commitlog",
                      self.topic_id, self.partition, offset, position, size)
            if self.on_damage is not None:
                self.on_damage(offset)
            raise CorruptIndexError(f"the index entry of offset {offset} is damaged")
        return batch

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record stamped >= ``timestamp_ms``, if any."""
        base = self.time_index.lookup(timestamp_ms)
        if base is None:
            return None
        base = max(base, self.log_start_offset)  # the index still names deleted batches
        while base < self.next_offset:
            batch = self.batch_at(base)
            found = record_batch.first_offset_at_or_after(batch, timestamp_ms)
            if found is not None and found[0] >= self.log_start_offset:
                return found
            base = record_batch.next_offset_of(batch)
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp, if any."""
        base = self.time_index.max_timestamp_offset
        if base < 0 or base < self.log_start_offset or base >= self.next_offset:
            return None
        batch = self.batch_at(base)
        offset = record_batch.offset_of_timestamp(batch, self.time_index.max_timestamp)
        if offset is None:  # LogAppendTime batches stamp every record with the max
            offset = base
        return offset, self.time_index.max_timestamp

    # -- maintenance -----------------------------------------------------------------------
    def advance_log_start(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = min(offset, self.next_offset)
            self.consume_queue.delete_before(self.log_start_offset)
            self.txn_index.drop_before(self.log_start_offset)

    def commitlog_dropped_before(self, offset: int) -> None:
        """Retention deleted the commitlog up to this partition's ``offset``: the log start
        offset moves there, unless the compaction store serves the offsets below it."""
        if offset > self.cleaned_end:
            self.advance_log_start(offset)

    def take_dirty_fds(self) -> list[int]:
        """Descriptors of its index files written since the last call, for a sync elsewhere."""
        return [*self.consume_queue.take_dirty_fds(), *self.time_index.take_dirty_fds(),
                *self.txn_index.take_dirty_fds()]

    def flush(self) -> None:
        self.consume_queue.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self, *, destroy: bool = False) -> None:
        """Close its files; ``destroy``: the consume queue's files are deleted too (the
        topic was deleted; the store removes the directories)."""
        self.closed = True
        if self.compacted is not None:
            self.compacted.close()
        if destroy:
            self.consume_queue.destroy()
        else:
            self.consume_queue.close()
        self.time_index.close()
        self.txn_index.close()
