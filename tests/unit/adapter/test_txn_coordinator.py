"""The transaction coordinator's state machine and its state log, driven with an injected
clock and fake callbacks (no sleeping, no broker)."""

from __future__ import annotations

import dataclasses

import pytest
from kio.schema.errors import ErrorCode
from rmqkafka.adapter.transactions import state_log
from rmqkafka.adapter.transactions.coordinator import (
    AbortedTxn,
    ProducerIdAndEpoch,
    TransactionCoordinator,
    TxnError,
    TxnSettings,
    legacy_epoch_error,
)
from rmqkafka.adapter.transactions.state_log import StateLogError, TxnMetadata, TxnState
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.offset_store import CommittedOffset

TIMEOUT = 60_000
TID = "txn-1"
T0 = ("t", 0)
T1 = ("t", 1)
U0 = ("u", 0)


class FakeLog:
    """``__transaction_state``: the records appended, in order."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []
        self.fail = False

    def append(self, key: bytes, value: bytes) -> None:
        if self.fail:
            raise OSError("disk full")
        self.records.append((key, value))

    def states(self, txn_id: str = TID) -> list[str]:
        return [state_log.decode(k, v).state.value for k, v in self.records if k == txn_id.encode()]


class FakeMarkers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, list]] = []
        self.fail = False

    def __call__(self, producer_id, producer_epoch, commit, partitions) -> None:
        if self.fail:
            raise OSError("partition offline")
        self.written.append((producer_id, producer_epoch, commit, list(partitions)))


class FakeOffsets:
    def __init__(self) -> None:
        self.applied: list[tuple[str, dict]] = []

    def __call__(self, group, offsets) -> None:
        self.applied.append((group, offsets))


class Allocator:
    def __init__(self, start: int = 1000) -> None:
        self.next = start

    def __call__(self) -> int:
        self.next += 1
        return self.next - 1


class World:
    """One coordinator with its fakes; ``restart`` builds a new one over the same log."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.log = FakeLog()
        self.markers = FakeMarkers()
        self.offsets = FakeOffsets()
        self.allocator = Allocator()
        self.c = self._new()

    def _new(self) -> TransactionCoordinator:
        return TransactionCoordinator(self.clock, self.allocator, self.log.append, self.markers,
                                      self.offsets, TxnSettings(max_timeout_ms=900_000))

    def restart(self, records: list | None = None) -> list[str]:
        if records is not None:
            self.log.records = list(records)
        self.c = self._new()
        return self.c.load(list(self.log.records))


@pytest.fixture
def w() -> World:
    return World()


def code_of(fn, *args, **kwargs) -> ErrorCode:
    with pytest.raises(TxnError) as info:
        fn(*args, **kwargs)
    return info.value.code


def offset(n: int) -> CommittedOffset:
    return CommittedOffset(n, -1, "", 1_700_000_000_000)


def ongoing(w: World, txn_id: str = TID, partitions=(T0, T1)) -> ProducerIdAndEpoch:
    pe = w.c.init_producer_id(txn_id, TIMEOUT)
    w.c.add_partitions(txn_id, *pe, partitions)
    return pe


# -- InitProducerId --------------------------------------------------------------------------
def test_new_id_gets_a_new_producer_id_at_epoch_0(w):
    assert w.c.init_producer_id(TID, TIMEOUT) == (1000, 0)
    meta = w.c.get(TID)
    assert meta.state is TxnState.EMPTY and meta.timeout_ms == TIMEOUT and meta.start_ms == -1
    assert w.log.states() == ["Empty"]
    assert w.c.init_producer_id("other", TIMEOUT) == (1001, 0)


def test_init_checks_in_kafkas_order(w):
    assert code_of(w.c.init_producer_id, "", TIMEOUT) is ErrorCode.invalid_request
    assert code_of(w.c.init_producer_id, TID, 0) is ErrorCode.invalid_transaction_timeout
    assert code_of(w.c.init_producer_id, TID, -5) is ErrorCode.invalid_transaction_timeout
    assert code_of(w.c.init_producer_id, TID, 900_001) is ErrorCode.invalid_transaction_timeout
    assert w.c.init_producer_id(TID, 900_000) == (1000, 0)
    # KIP-360 fields: both or neither
    assert code_of(w.c.init_producer_id, TID, TIMEOUT, 1000, -1) is ErrorCode.invalid_request
    assert code_of(w.c.init_producer_id, TID, TIMEOUT, -1, 0) is ErrorCode.invalid_request


def test_second_init_bumps_the_epoch_and_fences_the_old_producer(w):
    old = w.c.init_producer_id(TID, TIMEOUT)
    new = w.c.init_producer_id(TID, 30_000)
    assert new == (old.producer_id, 1)
    assert w.c.get(TID).timeout_ms == 30_000
    assert code_of(w.c.add_partitions, TID, *old, [T0]) is ErrorCode.producer_fenced
    assert code_of(w.c.add_partitions, TID, *old, [T0], legacy_epoch_error=True) is ErrorCode.invalid_producer_epoch
    assert code_of(w.c.add_offsets, TID, *old, "g") is ErrorCode.producer_fenced
    assert code_of(w.c.end_txn, TID, *old, True) is ErrorCode.producer_fenced
    assert code_of(w.c.end_txn, TID, *old, True, legacy_epoch_error=True) is ErrorCode.invalid_producer_epoch
    w.c.add_partitions(TID, *new, [T0])  # the new one works
    assert w.c.get(TID).state is TxnState.ONGOING


def test_init_on_ongoing_aborts_it_with_an_epoch_fence(w):
    old = ongoing(w)
    w.c.add_offsets(TID, *old, "g")
    w.c.txn_offset_commit(TID, *old, "g", {T0: offset(5)})
    assert code_of(w.c.init_producer_id, TID, TIMEOUT) is ErrorCode.concurrent_transactions
    assert w.markers.written == [(old.producer_id, 1, False, [T0, T1])]  # ABORT under epoch + 1
    meta = w.c.get(TID)
    assert meta.state is TxnState.COMPLETE_ABORT and meta.producer_epoch == 1
    assert w.log.states() == ["Empty", "Ongoing", "Ongoing", "Ongoing", "PrepareAbort", "CompleteAbort"]
    assert w.offsets.applied == [] and w.c.pending_offsets(TID) == {}
    # the client retries and gets the next epoch; the old producer is fenced everywhere
    assert w.c.init_producer_id(TID, TIMEOUT) == (old.producer_id, 2)
    assert code_of(w.c.end_txn, TID, *old, False) is ErrorCode.producer_fenced
    assert code_of(w.c.add_partitions, TID, *old, [T0]) is ErrorCode.producer_fenced


def test_init_while_prepared_is_concurrent_transactions(w):
    pe = ongoing(w)
    w.markers.fail = True
    assert w.c.end_txn(TID, *pe, True) is False  # decided, markers pending
    assert w.c.get(TID).state is TxnState.PREPARE_COMMIT
    assert code_of(w.c.init_producer_id, TID, TIMEOUT) is ErrorCode.concurrent_transactions
    w.markers.fail = False
    assert w.c.complete_prepared() == [TID]
    assert w.c.init_producer_id(TID, TIMEOUT) == (pe.producer_id, 1)


def test_epoch_exhaustion_rotates_the_producer_id(w):
    w.restart([state_log.encode(TxnMetadata(TID, 7, producer_epoch=32765, last_producer_id=7,
                                            state=TxnState.COMPLETE_COMMIT, start_ms=1, last_update_ms=1))])
    assert w.c.init_producer_id(TID, TIMEOUT) == (7, 32766)  # the last epoch handed out
    assert w.c.init_producer_id(TID, TIMEOUT) == (1000, 0)   # exhausted: a new producer id
    meta = w.c.get(TID)
    assert (meta.last_producer_id, meta.last_producer_epoch) == (7, -1)


def test_fence_with_the_last_epoch_then_rotation(w):
    w.restart([state_log.encode(TxnMetadata(TID, 7, producer_epoch=32766, last_producer_id=7,
                                            state=TxnState.EMPTY, last_update_ms=1))])
    w.c.add_partitions(TID, 7, 32766, [T0])
    assert code_of(w.c.init_producer_id, TID, TIMEOUT) is ErrorCode.concurrent_transactions
    assert w.markers.written == [(7, 32767, False, [T0])]
    assert w.c.init_producer_id(TID, TIMEOUT) == (1000, 0)


def test_kip360_expected_producer_id_and_epoch(w):
    pe = w.c.init_producer_id(TID, TIMEOUT)
    bumped = w.c.init_producer_id(TID, TIMEOUT, *pe)  # the producer recovers: bump
    assert bumped == (pe.producer_id, 1)
    assert w.c.get(TID).last_producer_epoch == 0
    # the same request again (its answer was lost): the same epoch, no new bump
    assert w.c.init_producer_id(TID, TIMEOUT, *pe) == bumped
    # a stale epoch or a foreign producer id is fenced
    assert code_of(w.c.init_producer_id, TID, TIMEOUT, pe.producer_id, 5) is ErrorCode.producer_fenced
    assert code_of(w.c.init_producer_id, TID, TIMEOUT, 999, 1) is ErrorCode.producer_fenced
    assert code_of(w.c.init_producer_id, TID, TIMEOUT, 999, 1,
                   legacy_epoch_error=True) is ErrorCode.invalid_producer_epoch
    # a new producer instance (no expected fields) clears the retry window
    assert w.c.init_producer_id(TID, TIMEOUT) == (pe.producer_id, 2)
    assert code_of(w.c.init_producer_id, TID, TIMEOUT, *bumped) is ErrorCode.producer_fenced


def test_kip360_unknown_id_with_expected_fields_gets_a_fresh_producer(w):
    assert w.c.init_producer_id(TID, TIMEOUT, 5, 3) == (1000, 0)


def test_kip360_retry_of_a_rotation_gets_the_same_answer(w):
    w.restart([state_log.encode(TxnMetadata(TID, 7, producer_epoch=32766, last_producer_id=7,
                                            state=TxnState.EMPTY, last_update_ms=1))])
    first = w.c.init_producer_id(TID, TIMEOUT, 7, 32766)
    assert first == (1000, 0)
    assert w.c.get(TID).last_producer_epoch == 32766
    assert w.c.init_producer_id(TID, TIMEOUT, 7, 32766) == first


def test_init_with_a_failing_log_changes_nothing(w):
    pe = w.c.init_producer_id(TID, TIMEOUT)
    w.log.fail = True
    assert code_of(w.c.init_producer_id, TID, TIMEOUT) is ErrorCode.coordinator_not_available
    assert code_of(w.c.init_producer_id, "new", TIMEOUT) is ErrorCode.coordinator_not_available
    assert w.c.get(TID).producer_epoch == 0 and w.c.get("new") is None
    w.log.fail = False
    assert w.c.init_producer_id(TID, TIMEOUT) == (pe.producer_id, 1)


def test_legacy_epoch_error_versions():
    assert legacy_epoch_error(22, 3) and not legacy_epoch_error(22, 4)
    assert legacy_epoch_error(24, 1) and not legacy_epoch_error(24, 2)
    assert legacy_epoch_error(25, 1) and not legacy_epoch_error(25, 2)
    assert legacy_epoch_error(26, 1) and not legacy_epoch_error(26, 2)
    assert not legacy_epoch_error(28, 0)


# -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------
def test_add_partitions_errors(w):
    assert code_of(w.c.add_partitions, TID, 1000, 0, [T0]) is ErrorCode.invalid_producer_id_mapping
    pe = w.c.init_producer_id(TID, TIMEOUT)
    assert code_of(w.c.add_partitions, "", *pe, [T0]) is ErrorCode.invalid_request
    assert code_of(w.c.add_partitions, TID, 999, 0, [T0]) is ErrorCode.invalid_producer_id_mapping
    assert code_of(w.c.add_partitions, TID, pe.producer_id, 1, [T0]) is ErrorCode.producer_fenced
    assert w.c.get(TID).state is TxnState.EMPTY


def test_add_partitions_starts_and_grows_the_transaction(w):
    pe = w.c.init_producer_id(TID, TIMEOUT)
    start = w.clock.now_ms()
    w.c.add_partitions(TID, *pe, [T0])
    meta = w.c.get(TID)
    assert meta.state is TxnState.ONGOING and meta.start_ms == start and meta.partitions == {T0}
    w.clock.advance(1000)
    w.c.add_partitions(TID, *pe, [T1, U0])
    meta = w.c.get(TID)
    assert meta.partitions == {T0, T1, U0} and meta.start_ms == start
    records = len(w.log.records)
    w.c.add_partitions(TID, *pe, [T0, U0])  # already there: nothing persisted
    assert len(w.log.records) == records


def test_add_partitions_after_complete_starts_a_new_transaction(w):
    pe = ongoing(w)
    w.c.end_txn(TID, *pe, True)
    w.clock.advance(5000)
    w.c.add_partitions(TID, *pe, [U0])
    meta = w.c.get(TID)
    assert meta.state is TxnState.ONGOING and meta.partitions == {U0}
    assert meta.start_ms == w.clock.now_ms()


def test_add_while_prepared_is_concurrent_transactions(w):
    pe = ongoing(w)
    w.markers.fail = True
    w.c.end_txn(TID, *pe, False)
    assert w.c.get(TID).state is TxnState.PREPARE_ABORT
    assert code_of(w.c.add_partitions, TID, *pe, [U0]) is ErrorCode.concurrent_transactions
    assert code_of(w.c.add_offsets, TID, *pe, "g") is ErrorCode.concurrent_transactions


def test_add_offsets_records_the_group(w):
    assert code_of(w.c.add_offsets, TID, 1000, 0, "g") is ErrorCode.invalid_producer_id_mapping
    pe = w.c.init_producer_id(TID, TIMEOUT)
    assert code_of(w.c.add_offsets, TID, 999, 0, "g") is ErrorCode.invalid_producer_id_mapping
    assert code_of(w.c.add_offsets, TID, pe.producer_id, 3, "g",
                   legacy_epoch_error=True) is ErrorCode.invalid_producer_epoch
    w.c.add_offsets(TID, *pe, "g")
    meta = w.c.get(TID)
    assert meta.state is TxnState.ONGOING and meta.groups == {"g"} and meta.partitions == frozenset()
    records = len(w.log.records)
    w.c.add_offsets(TID, *pe, "g")
    assert len(w.log.records) == records


def test_add_failing_log_changes_nothing(w):
    pe = w.c.init_producer_id(TID, TIMEOUT)
    w.log.fail = True
    assert code_of(w.c.add_partitions, TID, *pe, [T0]) is ErrorCode.coordinator_not_available
    assert w.c.get(TID).state is TxnState.EMPTY


# -- TxnOffsetCommit -------------------------------------------------------------------------
def test_txn_offset_commit_checks(w):
    assert code_of(w.c.txn_offset_commit, TID, 1000, 0, "g", {T0: offset(1)}) \
        is ErrorCode.invalid_producer_id_mapping
    pe = w.c.init_producer_id(TID, TIMEOUT)
    assert code_of(w.c.txn_offset_commit, TID, 999, 0, "g", {T0: offset(1)}) \
        is ErrorCode.invalid_producer_id_mapping
    assert code_of(w.c.txn_offset_commit, TID, pe.producer_id, 1, "g", {T0: offset(1)}) \
        is ErrorCode.invalid_producer_epoch
    # not Ongoing
    assert code_of(w.c.txn_offset_commit, TID, *pe, "g", {T0: offset(1)}) is ErrorCode.invalid_txn_state
    w.c.add_partitions(TID, *pe, [U0])
    # Ongoing, but the group was not added with AddOffsetsToTxn
    assert code_of(w.c.txn_offset_commit, TID, *pe, "g", {T0: offset(1)}) is ErrorCode.invalid_txn_state
    assert w.c.pending_offsets(TID) == {}


def test_staged_offsets_are_applied_only_on_commit(w):
    pe = ongoing(w)
    w.c.add_offsets(TID, *pe, "g")
    w.c.txn_offset_commit(TID, *pe, "g", {T0: offset(1), T1: offset(2)})
    w.c.txn_offset_commit(TID, *pe, "g", {T0: offset(3)})  # the later one wins
    assert w.c.pending_offsets(TID) == {"g": {T0: offset(3), T1: offset(2)}}
    assert w.c.has_pending_offsets("g", *T0) and not w.c.has_pending_offsets("g", *U0)
    assert not w.c.has_pending_offsets("other", *T0)
    assert w.offsets.applied == []
    assert w.c.end_txn(TID, *pe, True) is True
    assert w.offsets.applied == [("g", {T0: offset(3), T1: offset(2)})]
    assert w.c.pending_offsets(TID) == {} and not w.c.has_pending_offsets("g", *T0)


def test_staged_offsets_are_dropped_on_abort(w):
    pe = ongoing(w)
    w.c.add_offsets(TID, *pe, "g")
    w.c.txn_offset_commit(TID, *pe, "g", {T0: offset(1)})
    w.c.end_txn(TID, *pe, False)
    assert w.offsets.applied == [] and w.c.pending_offsets(TID) == {}
    # the next transaction does not inherit them
    w.c.add_offsets(TID, *pe, "g")
    w.c.end_txn(TID, *pe, True)
    assert w.offsets.applied == []


# -- EndTxn ----------------------------------------------------------------------------------
def test_commit_writes_markers_and_completes(w):
    pe = ongoing(w)
    assert w.c.end_txn(TID, *pe, True) is True
    assert w.markers.written == [(pe.producer_id, 0, True, [T0, T1])]
    meta = w.c.get(TID)
    assert meta.state is TxnState.COMPLETE_COMMIT and meta.partitions == frozenset()
    assert meta.start_ms != -1  # kept, as Kafka keeps it
    assert w.log.states() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]


def test_abort_writes_abort_markers(w):
    pe = ongoing(w, partitions=[U0])
    assert w.c.end_txn(TID, *pe, False) is True
    assert w.markers.written == [(pe.producer_id, 0, False, [U0])]
    assert w.c.get(TID).state is TxnState.COMPLETE_ABORT


def test_end_txn_retry_is_idempotent_and_the_opposite_is_refused(w):
    pe = ongoing(w)
    w.c.end_txn(TID, *pe, True)
    records = len(w.log.records)
    assert w.c.end_txn(TID, *pe, True) is True  # the retry: success, nothing happens again
    assert len(w.markers.written) == 1 and len(w.log.records) == records
    assert code_of(w.c.end_txn, TID, *pe, False) is ErrorCode.invalid_txn_state
    w.c.add_partitions(TID, *pe, [T0])
    w.c.end_txn(TID, *pe, False)
    assert w.c.end_txn(TID, *pe, False) is True
    assert code_of(w.c.end_txn, TID, *pe, True) is ErrorCode.invalid_txn_state


def test_end_txn_errors(w):
    assert code_of(w.c.end_txn, TID, 1000, 0, True) is ErrorCode.invalid_producer_id_mapping
    pe = w.c.init_producer_id(TID, TIMEOUT)
    assert code_of(w.c.end_txn, "", *pe, True) is ErrorCode.invalid_request
    assert code_of(w.c.end_txn, TID, *pe, True) is ErrorCode.invalid_txn_state  # Empty
    assert code_of(w.c.end_txn, TID, *pe, False) is ErrorCode.invalid_txn_state
    assert code_of(w.c.end_txn, TID, 999, 0, True) is ErrorCode.invalid_producer_id_mapping
    assert code_of(w.c.end_txn, TID, pe.producer_id, 1, True) is ErrorCode.producer_fenced
    assert code_of(w.c.end_txn, TID, pe.producer_id, 1, True,
                   legacy_epoch_error=True) is ErrorCode.invalid_producer_epoch


def test_end_txn_while_prepared(w):
    pe = ongoing(w)
    w.markers.fail = True
    assert w.c.end_txn(TID, *pe, True) is False
    assert code_of(w.c.end_txn, TID, *pe, True) is ErrorCode.concurrent_transactions
    assert code_of(w.c.end_txn, TID, *pe, False) is ErrorCode.invalid_txn_state
    w.markers.fail = False
    assert w.c.complete_prepared() == [TID]
    assert w.markers.written == [(pe.producer_id, 0, True, [T0, T1])]
    assert w.c.end_txn(TID, *pe, True) is True


def test_failed_complete_record_is_retried(w):
    pe = ongoing(w)
    w.c.add_offsets(TID, *pe, "g")
    w.c.txn_offset_commit(TID, *pe, "g", {T0: offset(9)})
    real_append = w.log.append

    def fail_on_complete(key, value):
        if state_log.decode(key, value).state is TxnState.COMPLETE_COMMIT:
            raise OSError("disk full")
        real_append(key, value)

    w.c._append = fail_on_complete
    assert w.c.end_txn(TID, *pe, True) is False
    assert w.c.get(TID).state is TxnState.PREPARE_COMMIT
    w.c._append = real_append
    assert w.c.complete_prepared() == [TID]
    # markers and offsets were repeated: both are idempotent
    assert len(w.markers.written) == 2 and len(w.offsets.applied) == 2
    assert w.c.get(TID).state is TxnState.COMPLETE_COMMIT


def test_stale_end_txn_from_an_old_epoch_never_touches_the_next_transaction(w):
    old = ongoing(w)
    assert code_of(w.c.init_producer_id, TID, TIMEOUT) is ErrorCode.concurrent_transactions
    new = w.c.init_producer_id(TID, TIMEOUT)
    w.c.add_partitions(TID, *new, [U0])
    w.c.add_offsets(TID, *new, "g")
    w.c.txn_offset_commit(TID, *new, "g", {U0: offset(4)})
    markers = list(w.markers.written)
    for commit in (True, False):
        assert code_of(w.c.end_txn, TID, *old, commit) is ErrorCode.producer_fenced
    assert code_of(w.c.txn_offset_commit, TID, *old, "g", {U0: offset(1)}) is ErrorCode.invalid_producer_epoch
    meta = w.c.get(TID)
    assert meta.state is TxnState.ONGOING and meta.partitions == {U0}
    assert meta.offsets == {"g": {U0: offset(4)}}
    assert w.markers.written == markers and w.offsets.applied == []
    w.c.end_txn(TID, *new, True)
    assert w.markers.written[-1] == (new.producer_id, new.producer_epoch, True, [U0])


# -- timeouts --------------------------------------------------------------------------------
def test_expire_aborts_timed_out_transactions_and_fences_their_producer(w):
    pe = ongoing(w)
    w.c.add_offsets(TID, *pe, "g")
    w.c.txn_offset_commit(TID, *pe, "g", {T0: offset(1)})
    other = w.c.init_producer_id("idle", TIMEOUT)  # Empty: never expires as a transaction
    assert w.c.next_deadline_ms() == w.c.get(TID).start_ms + TIMEOUT + 1
    w.clock.advance(TIMEOUT)
    assert w.c.expire() == []  # start + timeout < now, strictly
    w.clock.advance(1)
    assert w.c.expire() == [AbortedTxn(TID, pe.producer_id, 1)]
    assert w.markers.written == [(pe.producer_id, 1, False, [T0, T1])]
    assert w.c.get(TID).state is TxnState.COMPLETE_ABORT and w.offsets.applied == []
    assert w.c.get("idle").producer_epoch == other.producer_epoch
    assert w.c.next_deadline_ms() is None
    assert w.c.expire() == []
    # the producer that timed out is fenced on its next request
    assert code_of(w.c.add_partitions, TID, *pe, [T0]) is ErrorCode.producer_fenced
    assert code_of(w.c.end_txn, TID, *pe, False) is ErrorCode.producer_fenced
    assert code_of(w.c.end_txn, TID, *pe, True, legacy_epoch_error=True) is ErrorCode.invalid_producer_epoch
    assert w.c.init_producer_id(TID, TIMEOUT) == (pe.producer_id, 2)


def test_expire_uses_each_transactions_own_timeout(w):
    w.c.add_partitions("short", *w.c.init_producer_id("short", 1000), [T0])
    w.c.add_partitions("long", *w.c.init_producer_id("long", 10_000), [T1])
    w.clock.advance(5000)
    assert [a.transactional_id for a in w.c.expire()] == ["short"]
    assert w.c.get("long").state is TxnState.ONGOING
    assert [a.transactional_id for a in w.c.expire(w.clock.now_ms() + 5001)] == ["long"]


def test_expire_with_failing_markers_leaves_it_prepare_abort(w):
    pe = ongoing(w)
    w.markers.fail = True
    w.clock.advance(TIMEOUT + 1)
    assert w.c.expire() == [AbortedTxn(TID, pe.producer_id, 1)]
    assert w.c.get(TID).state is TxnState.PREPARE_ABORT
    assert w.c.expire() == []  # not Ongoing any more: not aborted twice
    w.markers.fail = False
    assert w.c.complete_prepared() == [TID]
    assert w.markers.written == [(pe.producer_id, 1, False, [T0, T1])]


def test_transactional_id_expiration(w):
    settings = TxnSettings(transactional_id_expiration_ms=10_000)
    w.c = TransactionCoordinator(w.clock, w.allocator, w.log.append, w.markers, w.offsets, settings)
    pe = w.c.init_producer_id(TID, TIMEOUT)
    w.c.add_partitions("busy", *w.c.init_producer_id("busy", 900_000), [T0])
    w.clock.advance(9_999)
    assert w.c.expire_transactional_ids() == []
    w.clock.advance(1)
    assert w.c.expire_transactional_ids() == [TID]  # Ongoing ones are never expired
    assert w.c.get(TID) is None and w.log.states()[-1] == "Dead"
    assert w.c.describe([TID])[0].error_code is ErrorCode.transactional_id_not_found
    w.restart()
    assert w.c.get(TID) is None and w.c.get("busy") is not None
    assert w.c.init_producer_id(TID, TIMEOUT) != pe  # a new producer id
    assert w.c.get(TID).producer_epoch == 0


# -- persistence -----------------------------------------------------------------------------
def assert_survives_restart(w: World) -> None:
    before = {t: w.c.get(t) for t in w.c.transactional_ids()}
    w.restart()
    assert {t: w.c.get(t) for t in w.c.transactional_ids()} == before


def test_state_round_trips_through_the_log_at_every_step(w):
    assert_survives_restart(w)
    pe = w.c.init_producer_id(TID, TIMEOUT)
    assert_survives_restart(w)
    w.c.add_partitions(TID, *pe, [T0, U0])
    assert_survives_restart(w)
    w.c.add_offsets(TID, *pe, "g")
    w.c.txn_offset_commit(TID, *pe, "g", {T0: CommittedOffset(7, 3, "méta", 123)})
    assert_survives_restart(w)
    w.c.end_txn(TID, *pe, True)
    assert_survives_restart(w)
    assert w.c.init_producer_id(TID, TIMEOUT, *pe) == (pe.producer_id, 1)
    assert_survives_restart(w)
    assert w.c.init_producer_id(TID, TIMEOUT, *pe) == (pe.producer_id, 1)  # KIP-360 retry spans it
    assert w.offsets.applied == [("g", {T0: CommittedOffset(7, 3, "méta", 123)})]


def test_crash_right_after_prepare_commit_completes_on_load(w):
    pe = ongoing(w)
    w.c.add_offsets(TID, *pe, "g")
    w.c.txn_offset_commit(TID, *pe, "g", {T0: offset(8)})
    w.c.end_txn(TID, *pe, True)
    cut = w.log.states().index("PrepareCommit") + 1
    w.markers.written.clear()
    w.offsets.applied.clear()
    assert w.restart(w.log.records[:cut]) == [TID]  # the crash: nothing after PrepareCommit
    assert w.markers.written == [(pe.producer_id, 0, True, [T0, T1])]
    assert w.offsets.applied == [("g", {T0: offset(8)})]
    assert w.c.get(TID).state is TxnState.COMPLETE_COMMIT
    assert w.log.states()[-1] == "CompleteCommit"
    assert w.c.end_txn(TID, *pe, True) is True  # the client's retry after the restart


def test_crash_during_an_epoch_fence_completes_the_abort_on_load(w):
    old = ongoing(w)
    w.markers.fail = True
    assert code_of(w.c.init_producer_id, TID, TIMEOUT) is ErrorCode.concurrent_transactions
    assert w.log.states()[-1] == "PrepareAbort"
    w.markers.fail = False
    assert w.restart() == [TID]
    assert w.markers.written == [(old.producer_id, 1, False, [T0, T1])]
    assert w.c.get(TID).state is TxnState.COMPLETE_ABORT
    assert code_of(w.c.end_txn, TID, *old, True) is ErrorCode.producer_fenced
    assert w.c.init_producer_id(TID, TIMEOUT) == (old.producer_id, 2)


def test_load_with_markers_still_failing_keeps_it_prepared(w):
    pe = ongoing(w)
    w.markers.fail = True
    w.c.end_txn(TID, *pe, False)
    assert w.restart() == []
    assert w.c.get(TID).state is TxnState.PREPARE_ABORT
    w.markers.fail = False
    assert w.c.complete_prepared() == [TID]


def test_ongoing_survives_a_restart_and_times_out_later(w):
    pe = ongoing(w)
    w.clock.advance(TIMEOUT // 2)
    assert w.restart() == []
    assert w.c.get(TID).state is TxnState.ONGOING and w.markers.written == []
    assert w.c.expire() == []
    w.c.add_partitions(TID, *pe, [U0])  # the producer carries on after the restart
    w.clock.advance(TIMEOUT // 2 + 1)
    assert w.c.expire() == [AbortedTxn(TID, pe.producer_id, 1)]
    assert w.markers.written == [(pe.producer_id, 1, False, [T0, T1, U0])]


def test_state_log_records_are_compact_versioned_json(w):
    pe = ongoing(w, partitions=[T0])
    key, value = w.log.records[-1]
    assert key == TID.encode()
    assert value.startswith(b'{"v":1,"st":"Ongoing","pid":1000,"ep":0,')
    assert b'"tp":[["t",0]]' in value and b" " not in value
    assert state_log.decode(key, value) == w.c.get(TID)
    assert pe == (1000, 0)


def test_state_log_refuses_what_it_cannot_read():
    with pytest.raises(StateLogError):
        state_log.decode(b"x", b'{"v":2,"st":"Empty"}')
    with pytest.raises(StateLogError):
        state_log.decode(b"x", b"not json")
    with pytest.raises(StateLogError):
        state_log.decode(b"x", b'{"v":1,"st":"Bogus","pid":1,"ep":0,"lpid":1,"lep":-1,'
                               b'"to":1,"start":-1,"upd":0}')


def test_replay_keeps_the_last_record_of_each_id_and_drops_dead_ones():
    a0 = TxnMetadata("a", 1, producer_epoch=0, last_update_ms=1)
    a1 = dataclasses.replace(a0, producer_epoch=1)
    b = TxnMetadata("b", 2, producer_epoch=0, last_update_ms=1)
    b_dead = dataclasses.replace(b, state=TxnState.DEAD)
    state = state_log.replay([state_log.encode(m) for m in (a0, b, a1, b_dead)])
    assert state == {"a": a1}


# -- DescribeTransactions / ListTransactions -------------------------------------------------
def test_describe(w):
    pe = ongoing(w, partitions=[U0, T1, T0])
    start = w.clock.now_ms()
    w.c.init_producer_id("empty", 5000)
    got = w.c.describe([TID, "empty", "missing", ""])
    assert [d.error_code for d in got] == [ErrorCode.none, ErrorCode.none,
                                         ErrorCode.transactional_id_not_found, ErrorCode.invalid_request]
    d = got[0]
    assert (d.transactional_id, d.state, d.timeout_ms, d.start_time_ms, d.producer_id, d.producer_epoch) \
        == (TID, "Ongoing", TIMEOUT, start, pe.producer_id, 0)
    assert d.topics == (("t", (0, 1)), ("u", (0,)))
    e = got[1]
    assert (e.state, e.timeout_ms, e.start_time_ms, e.topics) == ("Empty", 5000, -1, ())


def test_list_filters(w):
    a = ongoing(w, "a")
    w.clock.advance(10_000)
    b = ongoing(w, "b")
    c = w.c.init_producer_id("c", TIMEOUT)
    w.c.end_txn("b", *b, True)

    def ids(**kw):
        return [t.transactional_id for t in w.c.list(**kw).transactions]

    assert ids() == ["a", "b", "c"]
    assert w.c.list().transactions[0].state == "Ongoing"
    assert w.c.list().transactions[0].producer_id == a.producer_id
    assert ids(states=["Ongoing"]) == ["a"]
    assert ids(states=["CompleteCommit", "Empty"]) == ["b", "c"]
    listing = w.c.list(states=["Ongoing", "Bogus"])
    assert [t.transactional_id for t in listing.transactions] == ["a"]
    assert listing.unknown_state_filters == ("Bogus",)
    assert ids(states=["Bogus"]) == []  # Kafka: a non-empty state filter that knows no state
    assert ids(producer_ids=[b.producer_id, c.producer_id]) == ["b", "c"]
    assert ids(producer_ids=[424242]) == []
    # duration: running for longer than the filter (Kafka compares now - start > filter;
    # an id without a transaction has start -1 and so always passes, as in Kafka)
    w.clock.advance(1000)
    assert ids(duration_filter_ms=5000) == ["a", "c"]
    assert ids(duration_filter_ms=11_000) == ["c"]
    assert ids(duration_filter_ms=0, states=["Ongoing", "CompleteCommit"]) == ["a", "b"]
    assert ids(transactional_id_pattern="[ab]") == ["a", "b"]
    assert ids(transactional_id_pattern="") == ["a", "b", "c"]
    with pytest.raises(TxnError) as info:
        w.c.list(transactional_id_pattern="(")
    assert info.value.code is ErrorCode.invalid_regular_expression


@pytest.mark.timeout(20)
def test_list_matches_its_pattern_in_linear_time(w):
    """RE2J as Kafka: Python's re takes seconds for ``(a+)+b`` against 26 letters, and the
    time doubles with each one more; both the pattern and the ids are the clients'."""
    w.c.init_producer_id("a" * 200, TIMEOUT)
    w.c.init_producer_id("a" * 199 + "b", TIMEOUT)
    assert [t.transactional_id for t in w.c.list(transactional_id_pattern="(a+)+b").transactions] \
        == ["a" * 199 + "b"]
    with pytest.raises(TxnError) as info:
        w.c.list(transactional_id_pattern=r"(a)\1")  # RE2J has no backreferences
    assert info.value.code is ErrorCode.invalid_regular_expression
