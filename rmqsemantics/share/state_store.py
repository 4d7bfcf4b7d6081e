"""Share-partition states kept in the commitlog's system topic ``__share_group_state``.

On ``open`` every state is replayed from the topic (state_log.replay). Each share-partition
gets a persister: it appends the change as an update record, synchronously (the change takes
effect only if the append succeeded: SharePartition undoes it otherwise), and every
``snapshot_every`` updates (Kafka's ``share.coordinator.snapshot.update.records.per.snapshot``,
500) a snapshot record, so a key's replay reads a bounded tail. ``compact`` rewrites every
state as a snapshot and moves the topic's log start past the older records, as
``__transaction_state`` is compacted; ``rewrite_if_trimmed`` writes them again when retention
deleted old segments. Crash behaviour: a record is either whole in the log (batches are CRC
checked, a torn tail is cut at recovery) or absent, and then the change it carried was never
answered; until a checkpoint records a compaction's new log start, a crash replays the older
records too, which changes nothing (the snapshot written after them wins).

The copy of each state kept here (to write snapshots) is bounded like the share-partition's
own: window plus retry schedule.
"""

from __future__ import annotations

import logging

from rmqkafka.storage.clock import Clock
from rmqkafka.storage.errors import StorageError
from rmqkafka.storage.store import MessageStore
from rmqkafka.storage.system_records import keyed_records

from ..parked_records import build_batch
from .partition import PersistFn, StateUpdate
from .state_log import (
    DELETE,
    SNAPSHOT,
    TOPIC,
    UPDATE,
    ReplayedState,
    SharePartitionKey,
    encode_key,
    encode_value,
    replay,
)

log = logging.getLogger(__name__)

SNAPSHOT_EVERY = 500
COMPACT_AFTER = 100_000  # records of __share_group_state before it is compacted


class ShareStateStore:
    def __init__(self, store: MessageStore, clock: Clock, snapshot_every: int = SNAPSHOT_EVERY) -> None:
        self.store = store
        self.clock = clock
        self.snapshot_every = snapshot_every
        self._states: dict[SharePartitionKey, ReplayedState] = {}
        self._log_start = 0

    def open(self) -> None:
        """Create the topic if needed and replay it; StateLogError on a record it cannot read."""
        if self.store.topics.get(TOPIC) is None:
            self.store.create_topic(TOPIC, 1, {})
        plog = self.store.partition(TOPIC, 0)
        self._states = replay((key, value) for _, key, value in keyed_records(plog))
        self._log_start = plog.log_start_offset
        log.info("%s: %d share-partition states loaded", TOPIC, len(self._states))

    def restored(self, key: SharePartitionKey) -> StateUpdate | None:
        """The durable state of a share-partition, None if it never had one."""
        state = self._states.get(key)
        return None if state is None else state.as_update()

    def dead_letters(self, key: SharePartitionKey) -> int | None:
        """Records the share-partition dead-lettered since its state began (durable), None if
        it has no state: without building the state (``restored`` walks the window)."""
        state = self._states.get(key)
        return None if state is None else state.dead_letters

    def keys(self) -> list[SharePartitionKey]:
        return sorted(self._states)

    def initialize(self, key: SharePartitionKey, start_offset: int) -> None:
        """A new share-partition's first record: its SPSO (share.auto.offset.reset)."""
        self._write(key, SNAPSHOT, StateUpdate(start_offset, ()))

    def delete(self, key: SharePartitionKey) -> None:
        """Forget a share-partition's state (its group or its offsets were deleted), durably."""
        if key in self._states:
            self._append(key, DELETE, StateUpdate(0, ()))
            del self._states[key]

    def persister(self, key: SharePartitionKey) -> PersistFn:
        return lambda update: self._write(key, UPDATE, update)

    def _write(self, key: SharePartitionKey, kind: str, update: StateUpdate) -> None:
        self._append(key, kind, update)  # raises on failure: the caller's change is undone
        state = self._states.get(key)
        if kind == SNAPSHOT or state is None:
            state = self._states[key] = ReplayedState(update.start_offset)
        state.apply(update)
        state.updates_since_snapshot = 0 if kind == SNAPSHOT else state.updates_since_snapshot + 1
        if state.updates_since_snapshot >= self.snapshot_every:
            try:
                self._append(key, SNAPSHOT, state.as_update())
                state.updates_since_snapshot = 0
            except (OSError, StorageError) as exc:  # the updates are durable; the next one retries
                log.warning("%s: snapshot of %s not written (%s)", TOPIC, key, exc)

    def _append(self, key: SharePartitionKey, kind: str, update: StateUpdate) -> None:
        batch = build_batch([(self.clock.now_ms(), encode_key(key), encode_value(kind, update), [])])
        self.store.append_built(TOPIC, 0, batch)

    def compact(self, min_records: int = COMPACT_AFTER) -> bool:
        """Once the topic holds more than ``min_records`` (and twice as many records as
        states), write every state as a snapshot and move the log start past the rest."""
        plog = self.store.partition(TOPIC, 0)
        if plog.next_offset - plog.log_start_offset <= max(min_records, 2 * len(self._states)):
            return False
        mark = plog.next_offset
        self._rewrite()
        plog.advance_log_start(mark)
        self._log_start = plog.log_start_offset
        log.info("%s compacted: %d states from offset %d on", TOPIC, len(self._states), mark)
        return True

    def rewrite_if_trimmed(self) -> bool:
        """Retention deletes old commitlog segments whatever topic they hold: when this topic
        lost records, every state is written again as a snapshot."""
        start = self.store.partition(TOPIC, 0).log_start_offset
        if start == self._log_start:
            return False
        self._rewrite()
        self._log_start = self.store.partition(TOPIC, 0).log_start_offset
        log.info("%s trimmed by retention to offset %d: %d states written again", TOPIC, start, len(self._states))
        return True

    def _rewrite(self) -> None:
        for key, state in sorted(self._states.items()):
            self._append(key, SNAPSHOT, state.as_update())
            state.updates_since_snapshot = 0
