"""The transaction coordinator wired to the broker: its state log is the hidden system topic
``__transaction_state`` of the commitlog, its markers are control batches appended to the
data partitions, its committed offsets go to the offset store.

On start the coordinator is rebuilt from the topic's records (a transaction found decided is
completed then: markers again, offsets, Complete*); a background task aborts transactions
past their timeout and removes transactional ids unused for
``transactional.id.expiration.ms``.

The topic is compacted by rewriting (``compact``) and its states written again when
retention trims it (``rewrite_if_trimmed``), so it neither grows without bound nor loses an
id's state.

Durability: every callback appends synchronously (the state record, the markers, the offset
journal record are written before the coordinator goes on), and a handler awaits
``durable()`` before answering, which with ``--flush sync`` waits for an fsync covering all
of it (shared with produce waiters: group commit).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from rmqkafka.rmqsemantics.parked_records import build_batch
from rmqkafka.storage.batch_builder import marker_batch
from rmqkafka.storage.clock import Clock
from rmqkafka.storage.offset_store import CommittedOffset
from rmqkafka.storage.store import MessageStore
from rmqkafka.storage.system_records import keyed_records

from . import state_log
from .coordinator import TransactionCoordinator, TxnSettings
from .state_log import TopicPartition

log = logging.getLogger(__name__)

TOPIC = state_log.TOPIC
EXPIRE_INTERVAL_S = 1.0  # Kafka: transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s)
ABORT, COMMIT = 0, 1
COMPACT_AFTER = 100_000  # records of __transaction_state before it is compacted


class TransactionService:
    def __init__(self, store: MessageStore, clock: Clock, groups, settings: TxnSettings) -> None:
        self.store = store
        self.clock = clock
        self.groups = groups
        self.coordinator = TransactionCoordinator(
            clock, store.producer_ids.allocate, self._append, self._write_markers,
            self._apply_offsets, settings,
        )
        self._task: asyncio.Task | None = None
        self._log_start = 0

    # -- callbacks -------------------------------------------------------------------------
    def _append(self, key: bytes, value: bytes) -> None:
        batch = build_batch([(self.clock.now_ms(), key, value, [])])
        self.store.append_built(TOPIC, 0, batch)

    def _write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                       partitions: Sequence[TopicPartition]) -> None:
        now = self.clock.now_ms()
        for topic, partition in partitions:
            meta = self.store.topics.get(topic)
            if meta is None or not 0 <= partition < meta.partitions:
                log.info("no marker for %s-%d: the partition no longer exists", topic, partition)
                continue
            self.store.append_built(topic, partition, marker_batch(producer_id, producer_epoch, commit, now))

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool, coordinator_epoch: int) -> None:
        """A marker sent by WriteTxnMarkers (an admin's abort of a hanging transaction):
        checked against the partition's producer state as Kafka checks a coordinator's
        (storage errors InvalidProducerEpochError, CoordinatorFencedError), then appended
        like the coordinator's own. The coordinator's state is not touched: the partition's
        open transaction ends here, the coordinator's (if any) when it ends or times out."""
        plog = self.store.partition(topic, partition)
        plog.producers.check_end_marker(producer_id, producer_epoch, coordinator_epoch)
        batch = marker_batch(producer_id, producer_epoch, commit, self.clock.now_ms(), coordinator_epoch)
        self.store.append_built(topic, partition, batch)
        log.info("%s-%d: %s marker of producer %d epoch %d written by WriteTxnMarkers", topic, partition,
                 "COMMIT" if commit else "ABORT", producer_id, producer_epoch)

    def _apply_offsets(self, group: str, offsets: dict[TopicPartition, CommittedOffset]) -> None:
        self.groups.apply_offsets(group, offsets)

    # -- life cycle ------------------------------------------------------------------------
    def open(self) -> None:
        """Create the system topic if needed and rebuild the coordinator from it."""
        if self.store.topics.get(TOPIC) is None:
            self.store.create_topic(TOPIC, state_log.PARTITIONS, {})
        completed = self.coordinator.load(self._records())
        self._log_start = self.store.partition(TOPIC, 0).log_start_offset
        log.info("transaction coordinator: %d transactional ids loaded, %d decided transactions completed",
                 len(self.coordinator.transactional_ids()), len(completed))

    def _records(self):
        for _, key, value in keyed_records(self.store.partition(TOPIC, 0)):
            yield key, value

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._expire_loop(), name="txn-expire")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(EXPIRE_INTERVAL_S)
            try:
                self.coordinator.complete_prepared()
                self.coordinator.expire()
                self.coordinator.expire_transactional_ids()
                self.rewrite_if_trimmed()
                if self.compact():
                    await self.store.checkpoint()
            except Exception:
                log.exception("transaction expiry failed")

    def compact(self, min_records: int = COMPACT_AFTER) -> bool:
        """Kafka compacts ``__transaction_state``; here, once the topic holds more than
        ``min_records`` (and twice as many records as ids), every id's current state is
        written again and the topic's log start moved past the older records, so a restart
        replays only those. Until the next checkpoint records the new log start, a crash
        replays the older records too, which changes nothing (the last record of an id
        wins; a removed id's records are all older)."""
        plog = self.store.partition(TOPIC, 0)
        ids = self.coordinator.transactional_ids()
        if plog.next_offset - plog.log_start_offset <= max(min_records, 2 * len(ids)):
            return False
        mark = plog.next_offset
        self._rewrite(ids)
        plog.advance_log_start(mark)
        self._log_start = plog.log_start_offset
        log.info("%s compacted: %d states from offset %d on", TOPIC, len(ids), mark)
        return True

    def _rewrite(self, ids: list[str]) -> None:
        for txn_id in ids:
            meta = self.coordinator.get(txn_id)
            if meta is not None:
                self._append(*state_log.encode(meta))

    def rewrite_if_trimmed(self) -> bool:
        """Retention deletes whole old commitlog segments, whatever topic they hold; Kafka
        compacts ``__transaction_state`` instead. When the topic lost its oldest records,
        every id's current state is appended again, so a restart still finds it (the
        window: a crash between the deletion and this call, at most EXPIRE_INTERVAL_S)."""
        start = self.store.partition(TOPIC, 0).log_start_offset
        if start == self._log_start:
            return False
        self._rewrite(self.coordinator.transactional_ids())
        self._log_start = self.store.partition(TOPIC, 0).log_start_offset
        log.info("%s trimmed by retention to offset %d: %d states written again",
                 TOPIC, start, len(self.coordinator.transactional_ids()))
        return True

    async def durable(self) -> None:
        """Return once everything the coordinator wrote so far is durable (flush=sync)."""
        if self.store.config.flush != "sync":
            return
        await self.store.wait_durable(self.store.commitlog.end_position)
        await self.store.wait_offsets_durable()
