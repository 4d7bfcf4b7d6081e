"""Retention on the shared commitlog: where each partition's log starts, and which commitlog
segments can go.

How per-topic retention and the broker's log.retention.* combine
----------------------------------------------------------------
Kafka's rule is that a topic's own config wins and the broker's value is its default. Here:

- A topic with ``retention.ms`` or ``retention.bytes`` of its own (either one; the other then
  takes the broker's value) follows Kafka's rule per partition, whole batches oldest first:
  a batch goes once its max timestamp is older than ``now - retention.ms`` and every batch
  before it went (the time index's running maximum: a batch stamped in the future holds back
  everything after it, as a segment does in Kafka), and then while the partition's bytes
  without its oldest batch still reach ``retention.bytes``. ``-1`` is unlimited.
- A topic with neither (and the broker's own system topics) follows the broker's values at
  segment granularity, as before there was per-topic retention: a commitlog segment expires
  once its file is older than log.retention.ms, or while the commitlog without it still
  holds log.retention.bytes; the log start of such a partition moves past the batches in
  expired segments. (The broker's values are then commitlog-wide, not per partition: the
  records of such topics are kept at least that long, never less.)
- A topic switching between the two (its ``retention.*`` set or deleted) follows the new
  rule from the next retention run, moves of its batches included (the plan's idle memo
  counts topic changes: ``TopicRegistry.changes``).
- A topic whose ``cleanup.policy`` lacks ``delete`` (compact only) loses nothing to
  retention, as in Kafka; its batches are moved like those of an unlimited topic (the
  compaction store raises ``commitlog_start_offset`` for what it holds).

A partition's log start only moves forward; the store checkpoints the new log starts before
any segment is deleted, so a restart or kill -9 keeps them (as DeleteRecords does).

Space comes back: live batches and moves
----------------------------------------
A batch in the commitlog is live while the consume queue of its partition still points at
it for an offset at or after the partition's ``commitlog_start_offset`` (the log start
offset, or higher when something else holds the offsets below: a compaction store). A closed
segment is deleted, oldest first (the commitlog stays one contiguous range), once nothing in
it is live: a partition pins only the segments holding its live batches, whatever its
retention.

So that a long-retention (or unlimited) topic does not pin every segment behind its oldest
batch, the live batches of a prefix of old segments are moved: when the live bytes of the
oldest segments are at most ``retention_move_ratio`` of their size (and no batch of a topic
following the broker's segment rule is among them: those die with their segment and are
never moved), each live batch is appended again at the head of the commitlog, byte for byte
(same topic id, partition, base offset), its consume-queue entries are re-pointed to the
copy, and the segments are deleted. A moved byte therefore reclaims at least
``(1 - ratio) / ratio`` dead bytes (1 at the default 0.5): write amplification is bounded by
the ratio, and the commitlog holds at most about ``1 / (1 - ratio)`` times its live bytes
beyond what is still pinned.

Crash safety of a move: the copies are appended and fdatasynced before any queue entry
names them; the entries are re-pointed only then; a checkpoint (which fsyncs the queues and
records a position past the copies) comes before the segments are deleted. A crash before
that checkpoint leaves the originals in place; recovery re-dispatches the copies after the
checkpoint's position and, finding their offsets already indexed, treats each as a move
(re-points the entries, nothing else: no new offsets, no producer state). A move that fails
(a full disk) re-points nothing: the copies written so far are dead bytes, deleted later with
their segment (producers' appends may follow them, so nothing is cut back).
A rebuild of every index from the commitlog start (index files lost) meets a moved batch
after later batches of its partition: it first finds each partition's lowest base offset in
the commitlog (entry headers only), starts the partition's index there (never below its log
start), holds the offsets not seen yet as lost entries, and points them at the moved batch
when it comes.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .commitlog import DamagedSegmentError, EntryHead, Segment
from .consume_queue import ENTRY_SIZE, ConsumeQueue, batch_runs

if TYPE_CHECKING:
    from .partition_log import PartitionLog
    from .store import MessageStore

log = logging.getLogger(__name__)

RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
CLEANUP_POLICY = "cleanup.policy"
_WALK_CHUNK = 4096  # consume-queue entries read at a time while walking batches
_WALK_PER_RUN = 1_000_000  # offsets one partition's walk looks at in one run, at most
_MAX_SCAN_SEGMENTS = 64  # oldest segments a run looks into (their entry headers only)
# bytes of segments a run reads to find their live batches (at least one segment; segments
# whose live batches are remembered are not read again)
_SCAN_BYTES_PER_RUN = 256 << 20
_MOVE_SLICE_BYTES = 4 << 20  # bytes moved between two turns of the event loop
_SCAN_SLICE = 20_000  # entry headers (or queue offsets) looked at between two turns of the event loop
_CACHED_HEADS = 200_000  # live batch heads remembered across runs, at most


class _Changed(Exception):
    """A partition changed under a walk during a turn of the loop (see Retention._walk)."""


@dataclass(frozen=True, slots=True)
class TopicRetention:
    """A topic's own retention, the broker's value filling the one it does not set; None
    means unlimited."""

    ms: int | None
    bytes: int | None


def own_retention(configs: dict[str, str], broker_ms: int | None,
                  broker_bytes: int | None) -> TopicRetention | None:
    """The topic's retention when it has one of its own (see the module docstring), else
    None: the topic follows the broker's segment rule. A topic whose cleanup.policy lacks
    "delete" (compact only) loses nothing to retention, as in Kafka."""
    policy = {p.strip() for p in configs.get(CLEANUP_POLICY, "delete").split(",")}
    if "delete" not in policy:
        return TopicRetention(None, None)
    ms, size = _limit(configs.get(RETENTION_MS)), _limit(configs.get(RETENTION_BYTES))
    if ms is False and size is False:
        return None
    return TopicRetention(broker_ms if ms is False else ms, broker_bytes if size is False else size)


def _limit(text: str | None) -> int | None | bool:
    """A retention value: an int, None for unlimited (negative), False when absent."""
    if text is None:
        return False
    try:
        value = int(text)
    except ValueError:
        return False
    return None if value < 0 else value


@dataclass(slots=True)
class RetentionStats:
    """What retention did since the broker started (for metrics)."""

    runs: int = 0
    segments_deleted: int = 0
    bytes_reclaimed: int = 0
    bytes_moved: int = 0
    batches_moved: int = 0


@dataclass(frozen=True, slots=True)
class Move:
    """A live batch of ``plog`` to copy to the commitlog head: ``head`` says where it is
    (commitlog position and size, bytes) and which offsets it spans (logical)."""

    plog: PartitionLog
    head: EntryHead


@dataclass(slots=True)
class Plan:
    """Segments to delete, oldest first (a prefix of the commitlog's closed segments), once
    ``moves`` are done; the first ``free`` of them need no move (nothing live in them), so
    they may go even when the moves fail."""

    segments: list[Segment] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    free: int = 0  # the first segments of ``segments`` that hold no live batch at all


def batch_starts(plog: PartitionLog, start: int, stop: int) -> Iterator[tuple[int, int, int]]:
    """(offset, batch position, batch size) of each batch with entries in [start, stop), from
    the consume queue alone (consume_queue.batch_runs)."""
    queue = plog.consume_queue
    offset = max(start, queue.min_offset)
    chunks = _entry_chunks(queue, offset, min(stop, queue.next_offset))
    for first, _, position, size in batch_runs(offset, chunks):
        yield first, position, size


def _entry_chunks(queue: ConsumeQueue, offset: int, stop: int) -> Iterator[bytes]:
    chunk = 64  # most walks stop at once: read a few entries first
    while offset < stop:
        raw = queue.entries(offset, min(chunk, stop - offset))
        if not raw:
            return
        yield raw
        offset += len(raw) // ENTRY_SIZE
        chunk = _WALK_CHUNK


class Retention:
    """Runs retention for a MessageStore (see the module docstring); the store calls
    ``advance``, ``plan``, ``move`` and ``delete`` in that order, checkpointing between."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.stats = RetentionStats()
        self.copies: list[tuple[Move, int]] = []  # made by ``move``, pointed at by ``repoint``
        self.unsaved = False  # log starts moved that no checkpoint recorded yet
        self.failure_logged = self.move_failure_logged = -(1 << 62)  # when (clock ms) last logged
        # per partition with a retention.bytes: [first offset counted, end counted, bytes]
        self._sizes: dict[PartitionLog, list[int]] = {}
        # closed segment's base position -> the heads of its batches live when last looked at
        self._heads: dict[int, list[EntryHead]] = {}
        self._idle: tuple | None = None  # what decided the last plan that found nothing to do

    # -- log start offsets -----------------------------------------------------------------
    def advance(self) -> Generator[str, None, bool]:
        """Move every partition's log start as its retention says; True if any moved.
        Yields "slice" every _SCAN_SLICE offsets its walks look at (see ``_walk``)."""
        store = self._store
        config = store.config
        now = store.clock.now_ms()
        cut = self._segment_cut(now)
        moved = False
        for (name, _), plog in list(store.partitions().items()):
            meta = store.topics.get(name)
            if meta is None or plog.closed or plog.log_start_offset >= plog.next_offset:
                continue
            rule = own_retention(meta.configs, config.retention_ms, config.retention_bytes)
            try:
                if rule is None:
                    target = yield from self._by_segment(plog, cut)
                else:
                    target = yield from self._by_rule(plog, rule, now)
            except _Changed:
                self._sizes.pop(plog, None)
                continue  # deleted or cut during a turn: the next run looks again
            if target > plog.log_start_offset:
                plog.advance_log_start(target)
                moved = True
        for plog in [p for p in self._sizes if p.closed]:
            del self._sizes[plog]
        return moved

    def _segment_cut(self, now: int) -> int:
        """Where the broker's segment rule keeps the commitlog from: the first closed segment
        neither older than log.retention.ms nor beyond log.retention.bytes (oldest first,
        stopping at the first one kept)."""
        config, commitlog = self._store.config, self._store.commitlog
        remaining = commitlog.size_bytes()
        for segment in commitlog.segments[:-1]:
            too_old = config.retention_ms is not None and segment.mtime_ms() < now - config.retention_ms
            too_big = config.retention_bytes is not None and remaining - segment.size >= config.retention_bytes
            if not (too_old or too_big):
                return segment.base_position
            remaining -= segment.size
        return commitlog.segments[-1].base_position

    @staticmethod
    def _walk(plog: PartitionLog, start: int, stop: int) -> Iterator[str | tuple[int, int, int]]:
        """batch_starts of [start, stop), with "slice" every _SCAN_SLICE offsets so that a long
        walk (a million offsets take about a second) gives the loop turns; raises _Changed when
        the partition was deleted, or its queue cut past the walk, during a turn."""
        mark = start
        for item in batch_starts(plog, start, stop):
            if item[0] - mark >= _SCAN_SLICE:
                yield "slice"
                mark = item[0]
                if plog.closed or plog.consume_queue.min_offset > mark:
                    raise _Changed
            yield item

    def _by_segment(self, plog: PartitionLog, cut: int) -> Generator[str, None, int]:
        """The first offset whose batch is at or after commitlog position ``cut`` (looking at
        _WALK_PER_RUN offsets at most: the rest at the next run)."""
        start = plog.log_start_offset
        last = start
        for item in self._walk(plog, start, min(plog.next_offset, start + _WALK_PER_RUN)):
            if item == "slice":
                yield item
                continue
            offset, position, _ = item
            if position >= cut:
                return offset
            last = offset
        if start + _WALK_PER_RUN < plog.next_offset:
            return last  # the last batch looked at may go on past the window: kept for now
        return plog.next_offset

    def _by_rule(self, plog: PartitionLog, rule: TopicRetention, now: int) -> Generator[str, None, int]:
        target = plog.log_start_offset
        if rule.ms is not None:
            kept = plog.time_index.lookup(now - rule.ms)
            target = max(target, plog.next_offset if kept is None else kept)
        if rule.bytes is not None:
            target = yield from self._by_size(plog, target, rule.bytes)
        else:
            self._sizes.pop(plog, None)
        return target

    def _by_size(self, plog: PartitionLog, start: int, limit: int) -> Generator[str, None, int]:
        """The first offset to keep so that the partition's bytes from it on are the fewest
        still at least ``limit`` (whole batches; Kafka's rule for segments).

        The bytes are counted once and then kept up to date (what retention dropped taken
        off, what was appended added), _WALK_PER_RUN offsets a run at most: until the count
        reaches the end, the decision is made on fewer bytes than there are, so it never
        drops a batch Kafka would keep. (A walk interrupted by _Changed leaves the count to
        be dropped by the caller.)"""
        queue = plog.consume_queue
        counted = self._sizes.get(plog)
        if counted is None or counted[0] > start or counted[1] < start or counted[0] < queue.min_offset:
            counted = self._sizes[plog] = [start, start, 0]
        elif counted[0] < start:  # the start moved (time, DeleteRecords): uncount what went
            for item in self._walk(plog, counted[0], start):
                if item == "slice":
                    yield item
                else:
                    counted[2] -= item[2]
            counted[0] = start
        budget = counted[1] + _WALK_PER_RUN
        end = plog.next_offset
        for item in self._walk(plog, counted[1], end):
            if item == "slice":
                yield item
                continue
            offset, _, size = item
            if offset >= budget:
                end = offset  # counted up to a batch's start: the next run goes on from there
                break
            counted[2] += size
        counted[1] = end
        total = counted[2]
        target = end
        for item in self._walk(plog, start, end):
            if item == "slice":
                yield item
                continue
            offset, _, size = item
            if total - size < limit:
                target = offset
                break
            total -= size
        counted[0], counted[2] = target, total
        return target

    # -- segments --------------------------------------------------------------------------
    def plan(self) -> Generator[str, None, Plan]:
        """The oldest segments that can go, with the live batches to move out of them first
        (see the module docstring); yields "slice" between slices of the scan. Nothing is
        looked at when nothing that decides it changed since a plan that found nothing."""
        store = self._store
        ratio = store.config.retention_move_ratio
        closed = store.commitlog.segments[:-1]
        # what decides a plan besides the segments: a topic created, deleted or changed (a
        # switch between its own retention and the broker's decides whether its batches may
        # be moved) is seen at the next run, not at the next segment roll
        state = (len(closed), store.commitlog.start_position, ratio, store.topics.changes,
                 sum(p.commitlog_start_offset for p in store.partitions().values()))
        if state == self._idle:
            return Plan()
        bases = {segment.base_position for segment in closed}
        for base in [b for b in self._heads if b not in bases]:
            del self._heads[base]
        remaining = sum(segment.size for segment in closed)
        plan, pending = Plan(), []
        size = live_bytes = 0
        scanned = 0
        partitions: dict = {}
        for index, segment in enumerate(closed[:_MAX_SCAN_SEGMENTS]):
            if scanned >= _SCAN_BYTES_PER_RUN:
                break
            if segment.base_position not in self._heads:
                scanned += segment.size
            try:
                live, movable = yield from self._live(segment, partitions)
            except DamagedSegmentError as exc:
                log.warning("retention stops at a damaged commitlog segment %s: %s", segment.path, exc)
                break
            if not movable:
                break
            size += segment.size
            remaining -= segment.size
            live_bytes += sum(m.head.size for m in live)
            pending.extend(live)
            if not live_bytes:
                plan.free += 1
            if live_bytes <= ratio * size:
                plan.segments = closed[: index + 1]
                plan.moves = list(pending)
            elif live_bytes > ratio * (size + remaining):
                break  # even if everything after were dead, moving would not pay
        self._idle = None if plan.segments else state
        return plan

    def _live(self, segment: Segment, partitions: dict) -> Generator[str, None, tuple[list[Move], bool]]:
        """The live batches of ``segment``, and whether they may be moved (none belongs to a
        partition following the broker's segment rule). A segment's live batches only ever
        die (nothing is written into a closed segment), so the heads found live last time
        are all that is looked at again (kept for up to _CACHED_HEADS heads).
        ``partitions`` memoizes (topic id, partition) -> (partition log, its commitlog start,
        movable) or None (deleted) for the plan."""
        cached = self._heads.get(segment.base_position)
        heads = self._store.commitlog.heads(segment) if cached is None else iter(cached)
        live: list[Move] = []
        still: list[EntryHead] = []
        movable = True
        for count, head in enumerate(heads, 1):
            if count % _SCAN_SLICE == 0:
                yield "slice"
            key = (head.topic_id, head.partition)
            found = partitions.get(key, False)
            if found is False:
                found = partitions[key] = self._partition_of(head)
            if found is None:
                continue  # a deleted topic's batch
            plog, start, own = found
            if head.base_offset + head.last_offset_delta < start:
                continue
            # found live before: only the start passing it (or a move, which deletes the
            # segment) ends that; a head never looked at is asked of the queue
            if cached is None and not _points_at(plog, head):
                continue
            still.append(head)
            if own:
                live.append(Move(plog, head))
            else:
                movable = False  # dies with its segment; looked at again next time
        cached_now = sum(len(h) for h in self._heads.values())
        if cached is not None or cached_now + len(still) <= _CACHED_HEADS:
            self._heads[segment.base_position] = still
        return live, movable

    def _partition_of(self, head: EntryHead) -> tuple[PartitionLog, int, bool] | None:
        store = self._store
        meta = store.topics.by_id(head.topic_id)
        if meta is None or not 0 <= head.partition < meta.partitions:
            return None
        plog = store.built_partition(meta.name, head.partition)
        if plog is None:
            return None
        config = store.config
        own = own_retention(meta.configs, config.retention_ms, config.retention_bytes) is not None
        return plog, plog.commitlog_start_offset, own

    def move(self, plan: Plan) -> Iterator[int]:
        """Append a copy of each live batch at the head (into ``copies``); yields every slice
        so the caller can let others run. Raises OSError when a copy cannot be written:
        nothing is re-pointed then, and the copies written are dead bytes (producers' appends
        may follow them: the commitlog is not cut back)."""
        commitlog = self._store.commitlog
        self.copies = []
        copied = 0
        for move in plan.moves:
            if move.plog.closed or not _points_at(move.plog, move.head):
                continue  # died meanwhile
            head = move.head
            batch = commitlog.read_checked(head.position, head.size, head.topic_id, head.partition)
            if batch is None:
                raise OSError(f"batch at commitlog position {head.position} is damaged; not moved")
            self.copies.append((move, commitlog.append(head.topic_id, head.partition, [batch])))
            copied += head.size
            if copied >= _MOVE_SLICE_BYTES:
                yield copied
                copied = 0

    def repoint(self) -> None:
        """Point the moved batches' queue entries at their copies (durable by now)."""
        for move, position in self.copies:
            if move.plog.closed or not _points_at(move.plog, move.head):
                continue
            head = move.head
            move.plog.consume_queue.repoint(head.base_offset, head.base_offset + head.last_offset_delta + 1,
                                            position, head.size)
            self.stats.bytes_moved += move.head.size
            self.stats.batches_moved += 1
        self.copies = []

    def delete(self, plan: Plan) -> int:
        """Delete the planned segments (still dead: liveness only ever decreases)."""
        commitlog = self._store.commitlog
        deleted = 0
        for segment in plan.segments:
            if commitlog.segments[0].base_position != segment.base_position:
                break
            commitlog.delete_oldest_segment()
            deleted += 1
            self.stats.segments_deleted += 1
            self.stats.bytes_reclaimed += segment.size
        return deleted


def _points_at(plog: PartitionLog, head: EntryHead) -> bool:
    """The partition's queue still names this batch for an offset it keeps in the commitlog."""
    queue = plog.consume_queue
    first = max(head.base_offset, plog.commitlog_start_offset, queue.min_offset)
    if first > head.base_offset + head.last_offset_delta or first >= queue.next_offset:
        return False
    position, size, _ = queue.entry(first)
    return position == head.position and size == head.size

