"""Committed consumer-group offsets: group -> (topic, partition) -> committed position.

Kafka keeps these in the ``__consumer_offsets`` topic; here they are a small store of their
own. It knows nothing of Kafka requests: the group coordinator decides what to commit, what
to delete and which groups are live.

On-disk format
--------------
Directory ``offsets/`` holding ``snapshot.json`` and ``journal``.

``snapshot.json`` (replaced atomically with ``write_json_atomically``: temp file, fsync,
rename, fsync of the directory)::

    {"version": 1, "seq": N,
     "groups": {"<group>": [[topic, partition, offset, leader_epoch, metadata,
                             commit_timestamp_ms], ...]}}

is the whole state after journal record ``seq`` N. ``journal`` is an append-only sequence of
records, each one commit call or one deletion::

    0   size    int32   bytes of the whole record, this field included
    4   magic   int32   RECORD_MAGIC ("RMO1")
    8   crc     uint32  CRC32C of bytes [12, size)
    12  seq     int64   1, 2, 3, ... over the store's whole life (never reset)
    20  type    int8    COMMIT, DELETE_GROUP, DELETE_PARTITIONS or DELETE_TOPIC
    21  body

    string             = int32 byte length, UTF-8 bytes
    COMMIT             = group: string, topic count: int32, per topic: (topic: string,
                         partition count: int32, per partition: (partition int32, offset
                         int64, leader_epoch int32, commit_timestamp_ms int64, metadata
                         string))
    DELETE_GROUP       = group: string
    DELETE_PARTITIONS  = group: string, topic count: int32, per topic: (topic: string,
                         partition count: int32, partition int32 ...)
    DELETE_TOPIC       = topic: string (drops that topic's offsets in every group)

Invariants: the in-memory state is the snapshot with every journal record of a greater
``seq`` applied in order; record seqs strictly increase through the journal; no group is
kept with zero offsets (``groups()`` lists exactly the groups that have some). Every record
is a *blind* write: what it does to a key (group, topic, partition) depends only on the key,
never on the value stored there (commit = set, the deletions = remove keys chosen by group,
topic or an explicit list). Expiry, which does depend on values (commit timestamps), is
therefore journalled as the explicit deletions it decided on, never as "delete older than T".

Crash behaviour: ``commit`` and the deletions pwrite their record at the journal's end before
they change memory or return, so a killed process loses nothing acknowledged (the page cache
survives it); an OS crash can lose what was written since the last fsync, which is the
caller's policy (``unflushed_fds``/``mark_flushed``/``flush``). A record is written whole or
the write raises (the partial bytes are cut off again, and the next record is written over
them anyway). On ``open`` the snapshot is loaded (an unreadable one is moved aside to
``snapshot.json.corrupt`` with a warning and the journal is replayed alone), then each journal
record is validated (length, magic, CRC32C, seq order, body) and applied; the first invalid
record and everything after it is a torn or damaged tail and is truncated with a warning (a
record in the middle is treated the same way on purpose: applying later records after a lost
one could resurrect a deleted offset).

Compaction: when the journal holds ``max_journal_records`` records or ``max_journal_bytes``
bytes (and is at least as large as the last snapshot, so a large state is not rewritten
every few commits: snapshot cost stays proportional to journal growth), the state is
written to ``snapshot.json`` first (durable when ``write_json_atomically`` returns), and only
then is the journal truncated to zero and fsynced. Crash-safe in every order:

* crash before the snapshot's rename: the old snapshot and the whole journal remain, same
  state as before;
* crash after the rename, before or during the truncation: the new snapshot (seq N) and the
  old journal, whose records all have seq <= N, remain; ``open`` skips records the snapshot
  already covers (and finishes the truncation). Even without the seq check the result
  would be the same: the snapshot already reflects the journal J (S = S0 + J), and because
  every record is a blind write, a key's final value after replaying J is set by the last
  record of J touching it, or else is its value in S, which for untouched keys equals S0's;
  so S + J = S0 + J = S, deletions included (tests check both);
* after the truncation, new records continue at seq N + 1, so stale bytes from before it can
  never pass for new records (their seqs would not increase).
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crc32c import crc32c

from .files import fsync_path, write_json_atomically

log = logging.getLogger(__name__)

JOURNAL = "journal"
SNAPSHOT = "snapshot.json"
SNAPSHOT_VERSION = 1

RECORD_MAGIC = 0x524D4F31  # "RMO1"
_HEAD = struct.Struct(">iiI")  # size, magic, crc
_SEQ_TYPE = struct.Struct(">qb")
RECORD_HEADER_SIZE = _HEAD.size + _SEQ_TYPE.size  # 21
_I32 = struct.Struct(">i")
_PART_COMMIT = struct.Struct(">iqiq")  # partition, offset, leader epoch, commit timestamp

COMMIT = 1
DELETE_GROUP = 2
DELETE_PARTITIONS = 3
DELETE_TOPIC = 4

DEFAULT_MAX_JOURNAL_BYTES = 4 << 20
DEFAULT_MAX_JOURNAL_RECORDS = 10_000

_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1 when the client did not give one
    metadata: str
    commit_timestamp_ms: int


TopicPartition = tuple[str, int]
State = dict[str, dict[TopicPartition, CommittedOffset]]
# One journalled operation: (COMMIT, group, {tp: CommittedOffset}), (DELETE_GROUP, group),
# (DELETE_PARTITIONS, group, [tp, ...]) or (DELETE_TOPIC, topic).
Op = tuple[Any, ...]


class OffsetStore:
    """Committed offsets per consumer group, journalled and snapshotted; see the module
    docstring for the on-disk format, the invariants and the crash behaviour.

    Synchronous and single-threaded: only the fdatasync of ``unflushed_fds()`` may run on
    another thread.
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_journal_bytes: int = DEFAULT_MAX_JOURNAL_BYTES,
        max_journal_records: int = DEFAULT_MAX_JOURNAL_RECORDS,
    ) -> None:
        self._dir = Path(directory)
        self._max_bytes = max_journal_bytes
        self._max_records = max_journal_records
        self._groups: State = {}
        self._fd: int | None = None
        self._journal_size = 0
        self._journal_records = 0
        self._seq = 0  # the last record written or replayed: the state's version
        self._flushed_seq = 0
        self._snapshot_bytes = 0
        self._retry_compaction_at = 0
        self.compactions = 0

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> None:
        if self._fd is not None:
            raise RuntimeError("offset store already open")
        self._dir.mkdir(parents=True, exist_ok=True)
        self._groups = {}
        self._snapshot_bytes = 0
        snapshot_seq = self._load_snapshot()
        path = self._dir / JOURNAL
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if created:
                fsync_path(self._dir)
            data = _read_all(fd)
            records, end = read_journal(data)
            if end < len(data):
                log.warning(
                    "offsets journal %s: dropped %d bytes of torn or damaged tail at byte %d "
                    "(after %d valid records)", path, len(data) - end, end, len(records),
                )
                os.ftruncate(fd, end)
                os.fsync(fd)
            fresh = [(seq, op) for seq, op in records if seq > snapshot_seq]
            if records and not fresh:
                # The snapshot covers the whole journal: a compaction was interrupted between
                # the snapshot and the truncation. Finish it.
                os.ftruncate(fd, 0)
                os.fsync(fd)
                records, end = [], 0
        except BaseException:
            os.close(fd)
            raise
        for _, op in fresh:
            apply_op(self._groups, op)
        self._fd = fd
        self._journal_size = end
        self._journal_records = len(records)
        self._seq = max([snapshot_seq, *(seq for seq, _ in records)])
        # Replayed records may exist only in the page cache (a killed process): the first
        # flush must cover them.
        self._flushed_seq = snapshot_seq
        self._retry_compaction_at = 0

    def close(self) -> None:
        """Close the journal; writes nothing (fsync first with ``flush`` if wanted)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- reading ---------------------------------------------------------------------------
    def fetch(self, group: str, topic: str, partition: int) -> CommittedOffset | None:
        offsets = self._groups.get(group)
        return None if offsets is None else offsets.get((topic, partition))

    def group_offsets(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return dict(self._groups.get(group, {}))

    def groups(self) -> list[str]:
        """The groups that have at least one committed offset, sorted."""
        return sorted(self._groups)

    # -- writing ---------------------------------------------------------------------------
    def commit(self, group: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        """Record ``offsets`` for ``group`` (one journal record, written before returning).

        Everything is validated before anything is written: a bad entry raises TypeError or
        ValueError and commits nothing. An empty mapping writes nothing.
        """
        _check_str("group", group)
        entries: dict[TopicPartition, CommittedOffset] = {}
        for key, committed in offsets.items():
            topic, partition = _check_key(key)
            if not isinstance(committed, CommittedOffset):
                raise TypeError(f"expected a CommittedOffset for {key!r}, got {committed!r}")
            _check_int("offset", committed.offset, _INT64)
            _check_int("leader_epoch", committed.leader_epoch, _INT32)
            _check_int("commit_timestamp_ms", committed.commit_timestamp_ms, _INT64)
            _check_str("metadata", committed.metadata)
            entries[(topic, partition)] = committed
        if not entries:
            return
        self._append((COMMIT, group, entries))

    def delete_group(self, group: str) -> None:
        """Drop every offset of ``group``; nothing is written if it has none."""
        if group in self._groups:
            self._append((DELETE_GROUP, group))

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """Drop the given partitions' offsets of ``group``; absent ones are ignored."""
        offsets = self._groups.get(group)
        if not offsets:
            return
        present = [key for key in dict.fromkeys(tuple(k) for k in partitions) if key in offsets]
        if present:
            self._append((DELETE_PARTITIONS, group, present))

    def delete_topic(self, topic: str) -> None:
        """Drop ``topic``'s offsets in every group (the topic was deleted)."""
        if any(key[0] == topic for offsets in self._groups.values() for key in offsets):
            self._append((DELETE_TOPIC, topic))

    def expire(self, now_ms: int, retention_ms: int, keep: set[str]) -> list[str]:
        """Kafka's offsets.retention: drop offsets committed ``retention_ms`` or more before
        ``now_ms``, in every group not in ``keep`` (the coordinator passes the groups with
        live members). Returns the groups that lost all their offsets, sorted.

        Journalled as explicit deletions (see "blind writes" in the module docstring).
        """
        cutoff = now_ms - retention_ms
        emptied: list[str] = []
        for group in sorted(self._groups):
            if group in keep:
                continue
            offsets = self._groups[group]
            stale = [k for k, c in offsets.items() if c.commit_timestamp_ms <= cutoff]
            if not stale:
                continue
            if len(stale) == len(offsets):
                self._append((DELETE_GROUP, group))
                emptied.append(group)
            else:
                self._append((DELETE_PARTITIONS, group, stale))
        return emptied

    def _append(self, op: Op) -> None:
        fd = self._require_open()
        seq = self._seq + 1
        record = encode_record(seq, op)
        try:
            _pwrite_all(fd, record, self._journal_size)
        except OSError:
            try:  # cut the partial record off (the next write would overwrite it anyway)
                os.ftruncate(fd, self._journal_size)
            except OSError:
                pass
            raise
        self._seq = seq
        self._journal_size += len(record)
        self._journal_records += 1
        apply_op(self._groups, op)
        self._maybe_compact()

    # -- compaction ------------------------------------------------------------------------
    def _maybe_compact(self) -> None:
        if self._journal_records < self._retry_compaction_at:
            return
        if self._journal_records < self._max_records and self._journal_size < self._max_bytes:
            return
        if self._journal_size < self._snapshot_bytes:
            return
        try:
            self.compact()
        except OSError:
            # The record that triggered this is written and applied; only the compaction
            # failed (disk full?). Keep journalling and try again a little later.
            log.exception("offsets compaction failed; the journal keeps growing")
            self._retry_compaction_at = self._journal_records + max(1, self._max_records // 10)

    def compact(self) -> None:
        """Write the state as the snapshot, then empty the journal (order: see module doc)."""
        fd = self._require_open()
        path = self._dir / SNAPSHOT
        write_json_atomically(path, self._snapshot_data())
        # The snapshot is durable: everything up to self._seq is, whatever the journal holds.
        self._flushed_seq = max(self._flushed_seq, self._seq)
        self._snapshot_bytes = os.stat(path).st_size
        self.compactions += 1
        os.ftruncate(fd, 0)
        os.fsync(fd)  # the truncation is durable before any later record is written
        self._journal_size = 0
        self._journal_records = 0
        self._retry_compaction_at = 0

    def _snapshot_data(self) -> dict:
        return {
            "version": SNAPSHOT_VERSION,
            "seq": self._seq,
            "groups": {
                group: [
                    [t, p, c.offset, c.leader_epoch, c.metadata, c.commit_timestamp_ms]
                    for (t, p), c in offsets.items()
                ]
                for group, offsets in self._groups.items()
            },
        }

    def _load_snapshot(self) -> int:
        path = self._dir / SNAPSHOT
        if not path.exists():
            return 0
        try:
            raw = path.read_bytes()
            seq, groups = parse_snapshot(json.loads(raw.decode("utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            aside = path.with_name(SNAPSHOT + ".corrupt")
            log.warning(
                "unreadable offsets snapshot %s (%s: %s); moving it to %s and replaying the "
                "journal alone", path, type(exc).__name__, exc, aside.name,
            )
            try:
                os.replace(path, aside)
            except OSError:
                log.exception("could not move %s aside", path)
            return 0
        self._groups = groups
        self._snapshot_bytes = len(raw)
        return seq

    # -- durability ------------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        """Seq of the last record written (what a caller waits on to see its commit fsynced)."""
        return self._seq

    @property
    def flushed_seq(self) -> int:
        """Every record up to this seq is known to be durable."""
        return self._flushed_seq

    def unflushed_fds(self) -> tuple[list[int], int]:
        """(file descriptors to fdatasync, seq they cover once synced); on the owning thread.

        After the fdatasync succeeds, call ``mark_flushed`` with the seq returned here.
        """
        if self._fd is None or self._seq <= self._flushed_seq:
            return [], self._seq
        return [self._fd], self._seq

    def mark_flushed(self, seq: int) -> None:
        self._flushed_seq = max(self._flushed_seq, seq)

    def flush(self) -> int:
        """fdatasync the journal if needed; returns the seq up to which all is durable."""
        fds, seq = self.unflushed_fds()
        for fd in fds:
            os.fdatasync(fd)
        self.mark_flushed(seq)
        return self._flushed_seq

    def _require_open(self) -> int:
        if self._fd is None:
            raise RuntimeError("offset store is not open")
        return self._fd


# -- state transitions ---------------------------------------------------------------------
def apply_op(state: State, op: Op) -> None:
    """Apply one journal operation to ``state``; a blind write (see the module docstring)."""
    kind = op[0]
    if kind == COMMIT:
        _, group, offsets = op
        if offsets:
            state.setdefault(group, {}).update(offsets)
    elif kind == DELETE_GROUP:
        state.pop(op[1], None)
    elif kind == DELETE_PARTITIONS:
        _, group, keys = op
        offsets = state.get(group)
        if offsets is not None:
            for key in keys:
                offsets.pop(key, None)
            if not offsets:
                del state[group]
    elif kind == DELETE_TOPIC:
        topic = op[1]
        for group in list(state):
            offsets = state[group]
            for key in [k for k in offsets if k[0] == topic]:
                del offsets[key]
            if not offsets:
                del state[group]
    else:
        raise ValueError(f"unknown offsets journal operation {kind}")


# -- record encoding -----------------------------------------------------------------------
def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    return _I32.pack(len(data)) + data


def _by_topic(keys: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in keys:
        topics.setdefault(topic, []).append(partition)
    return topics


def encode_record(seq: int, op: Op) -> bytes:
    """One whole journal record (header included) for ``op`` with sequence number ``seq``."""
    kind = op[0]
    parts: list[bytes] = [_SEQ_TYPE.pack(seq, kind), _string(op[1])]
    if kind == COMMIT:
        offsets = op[2]
        topics = _by_topic(offsets)
        parts.append(_I32.pack(len(topics)))
        for topic, partitions in topics.items():
            parts += [_string(topic), _I32.pack(len(partitions))]
            for p in partitions:
                c = offsets[(topic, p)]
                parts.append(_PART_COMMIT.pack(p, c.offset, c.leader_epoch, c.commit_timestamp_ms))
                parts.append(_string(c.metadata))
    elif kind == DELETE_PARTITIONS:
        topics = _by_topic(op[2])
        parts.append(_I32.pack(len(topics)))
        for topic, partitions in topics.items():
            parts += [_string(topic), _I32.pack(len(partitions))]
            parts += [_I32.pack(p) for p in partitions]
    elif kind not in (DELETE_GROUP, DELETE_TOPIC):
        raise ValueError(f"unknown offsets journal operation {kind}")
    tail = b"".join(parts)
    return _HEAD.pack(_HEAD.size + len(tail), RECORD_MAGIC, crc32c(tail)) + tail


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, st: struct.Struct) -> tuple:
        value = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return value

    def count(self) -> int:
        (n,) = self.unpack(_I32)
        if n < 0:
            raise ValueError("negative count")
        return n

    def string(self) -> str:
        n = self.count()
        if self.pos + n > len(self.buf):
            raise ValueError("string runs past the record")
        value = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8")
        self.pos += n
        return value


def decode_body(kind: int, body: memoryview) -> Op:
    """The operation of one record body; raises ValueError or struct.error if malformed."""
    r = _Reader(body)
    name = r.string()
    op: Op
    if kind == COMMIT:
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for _ in range(r.count()):
            topic = r.string()
            for _ in range(r.count()):
                p, offset, epoch, ts = r.unpack(_PART_COMMIT)
                offsets[(topic, p)] = CommittedOffset(offset, epoch, r.string(), ts)
        op = (COMMIT, name, offsets)
    elif kind == DELETE_PARTITIONS:
        keys: list[TopicPartition] = []
        for _ in range(r.count()):
            topic = r.string()
            keys += [(topic, r.unpack(_I32)[0]) for _ in range(r.count())]
        op = (DELETE_PARTITIONS, name, keys)
    elif kind in (DELETE_GROUP, DELETE_TOPIC):
        op = (kind, name)
    else:
        raise ValueError(f"unknown record type {kind}")
    if r.pos != len(body):
        raise ValueError("trailing bytes in the record")
    return op


def read_journal(data: bytes) -> tuple[list[tuple[int, Op]], int]:
    """Validated (seq, op) records from the start of ``data``, and the byte length of that
    valid prefix: it ends at the first record that fails its length, magic, CRC32C, seq
    order (seqs strictly increase) or body decoding."""
    view = memoryview(data)
    records: list[tuple[int, Op]] = []
    pos, previous = 0, 0
    while len(data) - pos >= RECORD_HEADER_SIZE:
        size, magic, crc = _HEAD.unpack_from(data, pos)
        if magic != RECORD_MAGIC or size < RECORD_HEADER_SIZE or size > len(data) - pos:
            break
        if crc32c(view[pos + _HEAD.size : pos + size]) != crc:
            break
        seq, kind = _SEQ_TYPE.unpack_from(data, pos + _HEAD.size)
        if seq <= previous:
            break
        try:
            op = decode_body(kind, view[pos + RECORD_HEADER_SIZE : pos + size])
        except (ValueError, struct.error):
            break
        records.append((seq, op))
        previous = seq
        pos += size
    return records, pos


def parse_snapshot(raw: object) -> tuple[int, State]:
    """(seq, state) of a decoded snapshot.json; raises ValueError if it is not one."""
    if not isinstance(raw, dict):
        raise TypeError("not a JSON object")
    if raw.get("version") != SNAPSHOT_VERSION:
        raise ValueError("not a version 1 offsets snapshot")
    seq = raw["seq"]
    if type(seq) is not int or seq < 0:
        raise ValueError(f"bad seq {seq!r}")
    groups = raw["groups"]
    if not isinstance(groups, dict):
        raise TypeError("groups is not an object")
    state: State = {}
    for group, entries in groups.items():
        if not isinstance(entries, list):
            raise TypeError(f"group {group!r}: not a list")
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for entry in entries:
            if not isinstance(entry, list) or len(entry) != 6:
                raise ValueError(f"group {group!r}: bad entry {entry!r}")
            topic, p, offset, epoch, metadata, ts = entry
            if not (
                isinstance(topic, str) and isinstance(metadata, str)
                and all(type(x) is int for x in (p, offset, epoch, ts))
            ):
                raise ValueError(f"group {group!r}: bad entry {entry!r}")
            offsets[(topic, p)] = CommittedOffset(offset, epoch, metadata, ts)
        if offsets:
            state[group] = offsets
    return seq, state


# -- validation and I/O helpers ------------------------------------------------------------
def _check_str(what: str, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} {value!r} is not encodable as UTF-8") from exc


def _check_int(what: str, value: object, bounds: tuple[int, int]) -> None:
    if type(value) is not int:
        raise TypeError(f"{what} must be an int, got {value!r}")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{what} {value} out of range")


def _check_key(key: object) -> TopicPartition:
    if not isinstance(key, tuple) or len(key) != 2:
        raise TypeError(f"expected a (topic, partition) key, got {key!r}")
    topic, partition = key
    _check_str("topic", topic)
    _check_int("partition", partition, (0, _INT32[1]))
    return topic, partition


def _pwrite_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        view = view[n:]
        at += n


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    at = 0
    while at < size:
        chunk = os.pread(fd, size - at, at)
        if not chunk:
            break
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)
