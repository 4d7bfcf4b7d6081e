"""The transaction coordinator's state: one transactional id's metadata, and its log records.

Kafka keeps every transactional id's state in the compacted ``__transaction_state`` topic;
every state change is one record there, written before the change is acted on or answered.
Here the coordinator hands each record to an injected ``append(key, value)`` callback (the
broker appends it to the system topic below) and rebuilds itself from the topic's records
with ``replay``.

Record format (version 1)
-------------------------
key   = the transactional id, UTF-8 (one key per id, so the topic can be compacted: the last
        record of a key is that id's whole state)
value = compact UTF-8 JSON, the whole state after the change::

    {"v": 1,                 # format version; a reader refuses a version it does not know
     "st": "Ongoing",        # Kafka's state name (TxnState values)
     "pid": 1000,            # producer id
     "ep": 3,                # producer epoch (-1: none handed out yet)
     "lpid": 1000,           # previous producer id (differs after a producer id rotation)
     "lep": -1,              # previous producer epoch (KIP-360 retries), -1 if none
     "to": 60000,            # transaction timeout, ms
     "start": 1700000000000, # wall-clock ms the transaction started, -1 if none
     "upd": 1700000000000,   # wall-clock ms of this change
     "tp": [["topic", 0]],   # partitions in the transaction (omitted when empty)
     "g": ["group"],         # groups added with AddOffsetsToTxn (omitted when empty)
     "off": {"group": [["topic", 0, offset, leader_epoch, metadata, commit_ms]]}}
                             # TxnOffsetCommit offsets staged until the commit (omitted
                             # when empty)

A ``"st": "Dead"`` record is the tombstone of an expired transactional id: replay drops the
id. ``PrepareEpochFence`` is never written (the fence is one synchronous step here).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rmqkafka.storage.offset_store import CommittedOffset

TOPIC = "__transaction_state"
PARTITIONS = 1
VERSION = 1

TopicPartition = tuple[str, int]
StagedOffsets = Mapping[str, Mapping[TopicPartition, CommittedOffset]]


class TxnState(enum.Enum):
    """Kafka's TransactionState, by the names DescribeTransactions and ListTransactions use."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"


class StateLogError(Exception):
    """A record of ``__transaction_state`` this code cannot read."""


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """One transactional id's state (Kafka's TransactionMetadata). Immutable: every
    transition builds a new one, which is persisted before it replaces the old."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    groups: frozenset[str] = frozenset()
    offsets: StagedOffsets = field(default_factory=dict)
    start_ms: int = -1
    last_update_ms: int = -1


def encode(meta: TxnMetadata) -> tuple[bytes, bytes]:
    """The (key, value) record of ``meta``."""
    value: dict = {
        "v": VERSION,
        "st": meta.state.value,
        "pid": meta.producer_id,
        "ep": meta.producer_epoch,
        "lpid": meta.last_producer_id,
        "lep": meta.last_producer_epoch,
        "to": meta.timeout_ms,
        "start": meta.start_ms,
        "upd": meta.last_update_ms,
    }
    if meta.partitions:
        value["tp"] = [[t, p] for t, p in sorted(meta.partitions)]
    if meta.groups:
        value["g"] = sorted(meta.groups)
    if meta.offsets:
        value["off"] = {
            group: [[t, p, o.offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms]
                    for (t, p), o in sorted(offsets.items())]
            for group, offsets in sorted(meta.offsets.items()) if offsets
        }
    return (meta.transactional_id.encode("utf-8"),
            json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def decode(key: bytes, value: bytes) -> TxnMetadata:
    try:
        raw = json.loads(value)
        version = raw["v"]
    except (ValueError, TypeError, KeyError) as exc:
        raise StateLogError(f"unreadable {TOPIC} record for key {key!r}") from exc
    if version != VERSION:
        raise StateLogError(f"{TOPIC} record version {version} is not supported (key {key!r})")
    try:
        return TxnMetadata(
            transactional_id=key.decode("utf-8"),
            producer_id=int(raw["pid"]),
            producer_epoch=int(raw["ep"]),
            last_producer_id=int(raw["lpid"]),
            last_producer_epoch=int(raw["lep"]),
            timeout_ms=int(raw["to"]),
            state=TxnState(raw["st"]),
            partitions=frozenset((str(t), int(p)) for t, p in raw.get("tp", ())),
            groups=frozenset(str(g) for g in raw.get("g", ())),
            offsets={
                group: {(str(t), int(p)): CommittedOffset(int(o), int(le), str(md), int(ts))
                        for t, p, o, le, md, ts in rows}
                for group, rows in raw.get("off", {}).items()
            },
            start_ms=int(raw["start"]),
            last_update_ms=int(raw["upd"]),
        )
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
        raise StateLogError(f"malformed {TOPIC} record for key {key!r}") from exc


def replay(records: Iterable[tuple[bytes, bytes]]) -> dict[str, TxnMetadata]:
    """Every live transactional id's state from the topic's records, read in order (the
    last record of an id wins; a Dead record removes the id)."""
    state: dict[str, TxnMetadata] = {}
    for key, value in records:
        meta = decode(key, value)
        if meta.state is TxnState.DEAD:
            state.pop(meta.transactional_id, None)
        else:
            state[meta.transactional_id] = meta
    return state
