"""Share-partition state as records of ``__share_group_state`` (Kafka's share coordinator
keeps ShareSnapshot and ShareUpdate records in a topic of that name), and its replay.

Record format (version 1)
-------------------------
key   = compact UTF-8 JSON ``["group", "topic", partition]``: one key per share-partition
value = compact UTF-8 JSON::

    {"v": 1,              # format version; a reader refuses one it does not know
     "t": "s" | "u" | "d", # snapshot (the whole state), update (the records changed) or
                          # delete (the share group or its offsets were deleted: no state)
     "so": 120,           # the share-partition start offset (SPSO) after the change
     "b": [[first, last, state, delivery_count, due_ms], ...]}
                          # offset ranges sharing one state (RecordState ids: 0 available,
                          # 2 acknowledged, 4 archived; acquired is written as available)
                          # and, with rmq.redelivery.backoff=levels, the wall-clock ms
                          # before which the records are not offered (0: none)
     "dl": 3}             # optional: records dead-lettered (archived by REJECT or the
                          # delivery limit) since the state began, a total; written by a
                          # snapshot and by an update that dead-lettered records, absent
                          # otherwise (records written before it existed have none)

Replay: a snapshot replaces the state; an update sets its SPSO and its ranges' records; a
delete forgets the key (its ``so`` and ``b`` are 0 and empty). ``dl`` sets the dead-letter
count; a snapshot without it has 0, an update without it keeps the count.
Below SPSO only records not yet done stay (the retry schedule); a done record (acknowledged,
archived) below it is dropped. An update before any snapshot of its key starts from an
empty state at its SPSO (retention took the snapshot; the service writes snapshots again).
Acquisitions are never written: after a restart an acquired record is available again with
the delivery count last written, as in Kafka.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import StateLogError
from .partition import InFlight, RecordState, StateBatch, StateUpdate, state_batches

TOPIC = "__share_group_state"
VERSION = 1
SNAPSHOT, UPDATE, DELETE = "s", "u", "d"
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
# Replay walks every offset a record names; what this code writes spans at most the window
# (10,000) plus the retry schedule (1,000,000), so a record naming more is damaged.
MAX_OFFSETS_PER_RECORD = 1_010_000

SharePartitionKey = tuple[str, str, int]  # (group, topic, partition)


def encode_key(key: SharePartitionKey) -> bytes:
    return json.dumps(list(key), separators=(",", ":")).encode()


def decode_key(raw: bytes) -> SharePartitionKey:
    try:
        group, topic, partition = json.loads(raw.decode())
    except (ValueError, UnicodeDecodeError, TypeError) as exc:
        raise StateLogError(f"{TOPIC}: unreadable key {raw[:80]!r}: {exc}") from None
    if not (isinstance(group, str) and isinstance(topic, str) and type(partition) is int):
        raise StateLogError(f"{TOPIC}: key {raw[:80]!r} is not [group, topic, partition]")
    return group, topic, partition


def encode_value(kind: str, update: StateUpdate) -> bytes:
    doc = {"v": VERSION, "t": kind, "so": update.start_offset,
           "b": [[b.first_offset, b.last_offset, int(b.state), b.delivery_count, b.due_ms] for b in update.batches]}
    if update.dead_letters:  # 0 and None are both left out: a snapshot reads 0, an update "unchanged"
        doc["dl"] = update.dead_letters
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_value(raw: bytes) -> tuple[str, StateUpdate]:
    """(kind, update); StateLogError for a torn or unknown record, naming what is wrong."""
    try:
        doc = json.loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateLogError(f"{TOPIC}: torn or unreadable record ({exc})") from None
    if not isinstance(doc, dict) or "v" not in doc:
        raise StateLogError(f"{TOPIC}: record without a version")
    if doc["v"] != VERSION:
        raise StateLogError(f"{TOPIC}: record version {doc['v']!r} is unknown (this broker reads {VERSION})")
    try:
        kind, start, dead = doc["t"], doc["so"], doc.get("dl")
        batches = tuple(StateBatch(f, l, RecordState(s), c, d) for f, l, s, c, d in doc["b"])
    except (KeyError, ValueError, TypeError) as exc:
        raise StateLogError(f"{TOPIC}: malformed record ({exc!r})") from None
    if dead is not None and (type(dead) is not int or dead < 0):
        raise StateLogError(f"{TOPIC}: malformed record (dead letters {dead!r})")
    if kind not in (SNAPSHOT, UPDATE, DELETE) or type(start) is not int or start < 0 or any(
            not (type(b.first_offset) is int and type(b.last_offset) is int
                 and 0 <= b.first_offset <= b.last_offset and 0 <= b.delivery_count <= 32_767)
            for b in batches):
        raise StateLogError(f"{TOPIC}: malformed record (kind {kind!r}, start {start!r})")
    if sum(b.last_offset - b.first_offset + 1 for b in batches) > MAX_OFFSETS_PER_RECORD:
        raise StateLogError(f"{TOPIC}: record names more than {MAX_OFFSETS_PER_RECORD} offsets: damaged")
    return kind, StateUpdate(start, batches, dead)


@dataclass
class ReplayedState:
    """One share-partition's durable state as replay builds it."""

    start_offset: int
    records: dict[int, tuple[RecordState, int, int]] = field(default_factory=dict)
    updates_since_snapshot: int = 0
    dead_letters: int = 0  # records dead-lettered since the state began

    def apply(self, update: StateUpdate) -> None:
        moved_from, self.start_offset = self.start_offset, update.start_offset
        if update.dead_letters is not None:
            self.dead_letters = update.dead_letters
        dropped: list[tuple[int, int]] = []
        for b in update.batches:
            if b.state in _DONE and b.last_offset < update.start_offset:
                dropped.append((b.first_offset, b.last_offset))  # all of it done below SPSO
                continue
            for offset in range(b.first_offset, b.last_offset + 1):
                if b.state in _DONE and offset < update.start_offset:
                    self.records.pop(offset, None)
                else:
                    self.records[offset] = (b.state, b.delivery_count, b.due_ms)
        if dropped:
            self._drop(dropped)
        # only offsets SPSO moved over can have become done below it: walk the smaller set
        passed = range(moved_from, self.start_offset)
        candidates = passed if len(passed) < len(self.records) else list(self.records)
        for offset in candidates:
            entry = self.records.get(offset)
            if entry is not None and offset < self.start_offset and entry[0] in _DONE:
                del self.records[offset]

    def _drop(self, ranges: list[tuple[int, int]]) -> None:
        """Forget the records the (disjoint) ranges name: walk the ranges or, when they span
        more offsets than there are records, the records once (an update accepting the
        records between released ones names a range per gap: walking the records per range
        would cost ranges x records)."""
        records = self.records
        if sum(last - first + 1 for first, last in ranges) <= len(records):
            for first, last in ranges:
                for offset in range(first, last + 1):
                    records.pop(offset, None)
            return
        ranges.sort()
        firsts = [first for first, _ in ranges]
        for offset in [o for o in records if (i := bisect_right(firsts, o) - 1) >= 0 and o <= ranges[i][1]]:
            del records[offset]

    def as_update(self) -> StateUpdate:
        """The state as one snapshot (what SharePartition's ``restored`` takes)."""
        return StateUpdate(self.start_offset, state_batches(
            (o, InFlight(s, c, due_ms=d)) for o, (s, c, d) in sorted(self.records.items())), self.dead_letters)


def replay(records: Iterable[tuple[bytes, bytes]]) -> dict[SharePartitionKey, ReplayedState]:
    """Rebuild every share-partition's state from (key, value) records in log order."""
    states: dict[SharePartitionKey, ReplayedState] = {}
    for raw_key, raw_value in records:
        key = decode_key(raw_key)
        kind, update = decode_value(raw_value)
        if kind == DELETE:
            states.pop(key, None)
            continue
        if kind == SNAPSHOT or key not in states:
            states[key] = ReplayedState(update.start_offset)
        state = states[key]
        state.apply(update)
        state.updates_since_snapshot = 0 if kind == SNAPSHOT else state.updates_since_snapshot + 1
    return states
