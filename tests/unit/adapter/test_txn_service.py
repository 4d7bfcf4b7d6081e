"""The transaction coordinator wired to a real store: state log in ``__transaction_state``,
markers in the data partitions, offsets applied, state rebuilt on reopen."""

from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatch
from rmqkafka.adapter.transactions.coordinator import TxnSettings
from rmqkafka.adapter.transactions.service import TOPIC, TransactionService
from rmqkafka.adapter.transactions.state_log import TxnState
from rmqkafka.storage import record_batch
from rmqkafka.storage.batch_builder import marker_batch
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.offset_store import CommittedOffset
from rmqkafka.storage.store import MessageStore
from rmqkafka.storage.txn_index import ABORT, COMMIT, end_marker

BIG = 1 << 30


class Groups:
    def __init__(self, store: MessageStore) -> None:
        self.store = store

    def apply_offsets(self, group, offsets) -> None:
        self.store.offsets.commit(group, offsets)


def open_store(path, clock):
    store = MessageStore(StorageConfig(data_dir=path), clock)
    store.open()
    return store


def service(store, clock) -> TransactionService:
    svc = TransactionService(store, clock, Groups(store), TxnSettings())
    svc.open()
    return svc


def txn_batch(pid: int, epoch: int, seq: int, n: int) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq, batch_size=BIG)
    for i in range(n):
        builder.append(i, timestamp=1_700_000_000_000, key=None, value=b"v%d" % i, headers=[])
    return bytes(builder.build())


def test_marker_batch_is_kafkas_end_marker():
    for commit, kind in ((True, COMMIT), (False, ABORT)):
        batch = marker_batch(5, 3, commit, 1234)
        assert record_batch.crc_ok(batch)
        info = record_batch.read_info(batch)
        assert info.is_control and info.attributes & record_batch.TRANSACTIONAL_BIT
        assert (info.producer_id, info.producer_epoch, info.records_count) == (5, 3, 1)
        assert end_marker(batch) == (kind, 0)
        (record,) = list(DefaultRecordBatch(batch))
        assert record.key == struct.pack(">hh", 0, kind) and record.value == struct.pack(">hi", 0, 0)


def test_commit_abort_offsets_and_reopen(tmp_path):
    clock = ManualClock()
    store = open_store(tmp_path / "d", clock)
    store.create_topic("t", 2, {})
    svc = service(store, clock)
    coord = svc.coordinator
    assert store.topics.get(TOPIC) is not None
    pid, epoch = coord.init_producer_id("a", 60_000)
    coord.add_partitions("a", pid, epoch, [("t", 0), ("t", 1), ("gone", 0)])
    store.append("t", 0, txn_batch(pid, epoch, 0, 3), max_batch_bytes=BIG)
    coord.add_offsets("a", pid, epoch, "g")
    coord.txn_offset_commit("a", pid, epoch, "g", {("t", 0): CommittedOffset(3, -1, "", 0)})
    assert store.partition("t", 0).last_stable_offset == 0
    assert store.offsets.fetch("g", "t", 0) is None
    assert coord.end_txn("a", pid, epoch, commit=True)
    assert store.partition("t", 0).last_stable_offset == 4 == store.partition("t", 0).next_offset
    assert store.partition("t", 1).next_offset == 1  # a marker even without data, as Kafka
    assert store.offsets.fetch("g", "t", 0).offset == 3
    coord.add_partitions("a", pid, epoch, [("t", 0)])
    store.append("t", 0, txn_batch(pid, epoch, 3, 2), max_batch_bytes=BIG)
    coord.end_txn("a", pid, epoch, commit=False)
    assert store.partition("t", 0).aborted_transactions(0, 100) == [(pid, 4)]
    coord.add_partitions("a", pid, epoch, [("t", 1)])  # left open
    store.close_sync()

    store = open_store(tmp_path / "d", clock)
    svc = service(store, clock)
    meta = svc.coordinator.get("a")
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (pid, epoch, TxnState.ONGOING)
    assert store.partition("t", 0).aborted_transactions(0, 100) == [(pid, 4)]
    assert svc.coordinator.verify_produce(pid, epoch, ("t", 1)).name == "none"
    assert svc.coordinator.verify_produce(pid, epoch, ("t", 0)).name == "invalid_txn_state"
    assert svc.coordinator.verify_produce(pid, epoch - 1, ("t", 1)).name == "invalid_producer_epoch"
    store.close_sync()


def test_states_are_written_again_when_retention_trims_the_topic(tmp_path):
    clock = ManualClock()
    store = open_store(tmp_path / "d", clock)
    svc = service(store, clock)
    svc.coordinator.init_producer_id("a", 60_000)
    svc.coordinator.init_producer_id("b", 60_000)
    assert not svc.rewrite_if_trimmed()
    plog = store.partition(TOPIC, 0)
    plog.advance_log_start(plog.next_offset)  # as retention does
    assert svc.rewrite_if_trimmed()
    assert not svc.rewrite_if_trimmed()
    store.close_sync()
    store = open_store(tmp_path / "d", clock)
    svc = service(store, clock)
    assert svc.coordinator.transactional_ids() == ["a", "b"]
    store.close_sync()


def test_compaction_keeps_every_state_and_drops_older_records(tmp_path):
    clock = ManualClock()
    store = open_store(tmp_path / "d", clock)
    store.create_topic("t", 1, {})
    svc = service(store, clock)
    coord = svc.coordinator
    pid, epoch = coord.init_producer_id("a", 60_000)
    for _ in range(5):
        coord.add_partitions("a", pid, epoch, [("t", 0)])
        coord.end_txn("a", pid, epoch, commit=True)
    coord.init_producer_id("b", 60_000)
    coord.add_partitions("b", *coord.init_producer_id("b", 60_000), [("t", 0)])  # left open
    coord.init_producer_id("gone", 60_000)
    clock.advance(coord.settings.transactional_id_expiration_ms + 1)
    coord.expire_transactional_ids()  # "a" and "gone" are removed (Dead); "b" is Ongoing
    coord.init_producer_id("a", 60_000)  # a new "a"
    plog = store.partition(TOPIC, 0)
    assert not svc.compact(min_records=1_000)
    assert svc.compact(min_records=4)
    assert plog.next_offset - plog.log_start_offset == 2
    before = {i: coord.get(i) for i in coord.transactional_ids()}
    store.close_sync()
    store = open_store(tmp_path / "d", clock)
    svc = service(store, clock)
    assert {i: svc.coordinator.get(i) for i in svc.coordinator.transactional_ids()} == before
    assert svc.coordinator.get("b").state is TxnState.ONGOING
    store.close_sync()
