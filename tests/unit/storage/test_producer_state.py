from __future__ import annotations

import json

import pytest

from batches import idempotent
from rmqkafka.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from rmqkafka.storage.producer_state import RECENT_BATCHES, ProducerStateTable
from rmqkafka.storage.record_batch import BatchInfo, read_info

MAX_SEQ = 2**31 - 1


def info(pid: int, epoch: int, seq: int, count: int = 1) -> BatchInfo:
    return BatchInfo(
        length=100,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        records_count=count,
    )


def append(table: ProducerStateTable, batch: BatchInfo, offset: int) -> int | None:
    dup = table.check(batch)
    if dup is None:
        table.update(batch, offset)
    return dup


def test_non_idempotent_batches_are_not_tracked():
    table = ProducerStateTable()
    plain = info(-1, -1, -1, 3)
    assert append(table, plain, 0) is None
    assert append(table, plain, 3) is None
    assert len(table) == 0


def test_sequence_flow_and_duplicates_return_the_original_offset():
    table = ProducerStateTable()
    offsets = {}
    offset = 0
    for seq in range(0, 30, 3):
        assert append(table, info(7, 0, seq, 3), offset) is None
        offsets[seq] = offset
        offset += 3
    # The last five batches are remembered.
    for seq in (27, 24, 21, 18, 15):
        assert table.check(info(7, 0, seq, 3)) == offsets[seq]
    # Older ones are not: the retry is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(7, 0, 12, 3))
    assert RECENT_BATCHES == 5


def test_duplicate_must_match_the_whole_range():
    table = ProducerStateTable()
    append(table, info(1, 0, 0, 3), 0)
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(1, 0, 0, 2))  # same first sequence, different last


def test_gap_and_reorder_are_out_of_order():
    table = ProducerStateTable()
    append(table, info(1, 0, 0, 2), 0)
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(1, 0, 3))  # expected 2
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(1, 0, 1))  # inside the last batch, not a duplicate
    assert table.check(info(1, 0, 2)) is None


def test_first_batch_of_a_producer_must_start_at_zero():
    table = ProducerStateTable()
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(5, 0, 1))
    assert table.check(info(5, 0, 0)) is None


def test_older_epoch_is_fenced():
    table = ProducerStateTable()
    append(table, info(1, 3, 0), 0)
    with pytest.raises(InvalidProducerEpochError):
        table.check(info(1, 2, 1))
    with pytest.raises(InvalidProducerEpochError):
        table.check(info(1, 2, 0))  # even a "duplicate" from an older epoch


def test_new_epoch_must_start_at_zero_and_resets_the_history():
    table = ProducerStateTable()
    append(table, info(1, 0, 0), 0)
    append(table, info(1, 0, 1), 1)
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(1, 1, 2))
    assert append(table, info(1, 1, 0), 2) is None
    # The old epoch's batches are no longer duplicates; the old epoch is fenced.
    with pytest.raises(InvalidProducerEpochError):
        table.check(info(1, 0, 1))
    assert table.check(info(1, 1, 0)) == 2
    assert table.check(info(1, 1, 1)) is None


def test_producers_are_independent():
    table = ProducerStateTable()
    append(table, info(1, 0, 0), 0)
    append(table, info(2, 0, 0), 1)
    append(table, info(1, 0, 1), 2)
    assert table.check(info(2, 0, 1)) is None
    assert table.check(info(1, 0, 0)) == 0
    assert table.check(info(2, 0, 0)) == 1
    assert len(table) == 2


def test_sequence_wraps_at_int32_max():
    table = ProducerStateTable()
    # Reach the top of the sequence space within one epoch.
    append(table, info(9, 0, 0), 0)
    table._producers[9].last_sequence = MAX_SEQ - 3  # shortcut instead of 2^31 appends
    assert append(table, info(9, 0, MAX_SEQ - 2, 3), 10) is None  # MAX-2 .. MAX
    assert append(table, info(9, 0, 0, 2), 13) is None  # wraps to 0
    assert table.check(info(9, 0, 2)) is None
    assert table.check(info(9, 0, MAX_SEQ - 2, 3)) == 10
    # A batch that itself wraps: MAX-1, MAX, 0
    table2 = ProducerStateTable()
    append(table2, info(9, 0, 0), 0)
    table2._producers[9].last_sequence = MAX_SEQ - 2
    wrapping = info(9, 0, MAX_SEQ - 1, 3)
    assert wrapping.last_sequence == 0
    assert append(table2, wrapping, 5) is None
    assert table2.check(info(9, 0, 1)) is None
    assert table2.check(wrapping) == 5


def test_real_batches():
    table = ProducerStateTable()
    b0 = read_info(idempotent(3, 42, 0, 0))
    b1 = read_info(idempotent(2, 42, 0, 3))
    assert append(table, b0, 0) is None
    assert append(table, b1, 3) is None
    assert table.check(b0) == 0 and table.check(b1) == 3


def test_snapshot_round_trip_through_json():
    table = ProducerStateTable()
    offset = 0
    for seq in range(8):
        append(table, info(1, 2, seq), offset)
        offset += 1
    append(table, info(2**40, 0, 0, 4), offset)
    data = json.loads(json.dumps(table.snapshot()))
    restored = ProducerStateTable.from_snapshot(data)
    assert len(restored) == 2
    assert restored.snapshot() == table.snapshot()
    for seq in range(3, 8):
        assert restored.check(info(1, 2, seq)) == seq
    with pytest.raises(OutOfOrderSequenceError):
        restored.check(info(1, 2, 2))  # only the last five survive, as before
    assert restored.check(info(1, 2, 8)) is None
    assert restored.check(info(2**40, 0, 0, 4)) == offset
    with pytest.raises(InvalidProducerEpochError):
        restored.check(info(1, 1, 0))
    # The restored history keeps its bound.
    append(restored, info(1, 2, 8), 100)
    assert len(restored.snapshot()["1"][2]) == 5


def test_check_all_sees_earlier_batches_of_the_request_and_changes_nothing():
    table = ProducerStateTable()
    append(table, info(1, 0, 0, 2), 0)
    before = table.snapshot()
    # seq 2 then 4: the second builds on the first
    assert table.check_all([info(1, 0, 2, 2), info(1, 0, 4)], 2) == [None, None]
    # a retry inside the same request is a duplicate of the offset it would get
    assert table.check_all([info(1, 0, 2, 2), info(1, 0, 2, 2)], 2) == [None, 2]
    # an old duplicate followed by a new batch
    assert table.check_all([info(1, 0, 0, 2), info(1, 0, 2)], 2) == [0, None]
    # a new producer and a new epoch inside one request
    assert table.check_all([info(2, 0, 0), info(2, 0, 1), info(1, 1, 0)], 2) == [None] * 3
    with pytest.raises(OutOfOrderSequenceError):
        table.check_all([info(1, 0, 2), info(1, 0, 5)], 2)
    with pytest.raises(InvalidProducerEpochError):
        table.check_all([info(1, 1, 0), info(1, 0, 2)], 2)
    assert table.snapshot() == before


def marker_info(pid: int, epoch: int, timestamp: int = 0) -> BatchInfo:
    """An end marker's header: control, no sequence."""
    return BatchInfo(length=70, attributes=0x30, last_offset_delta=0, base_timestamp=timestamp,
                     max_timestamp=timestamp, producer_id=pid, producer_epoch=epoch, base_sequence=-1,
                     records_count=1)


def test_a_marker_of_a_newer_epoch_fences_the_older_one():
    """The coordinator bumps the epoch when it aborts (timeout, fencing): its marker moves
    the producer to that epoch, as in Kafka."""
    table = ProducerStateTable()
    append(table, info(1, 0, 0, 3), 0)
    table.end_transaction(marker_info(1, 1), 0)
    with pytest.raises(InvalidProducerEpochError):
        table.check(info(1, 0, 3))  # the zombie's next batch
    with pytest.raises(InvalidProducerEpochError):
        table.check(info(1, 0, 0, 3))  # and its retry
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(1, 1, 5))
    assert append(table, info(1, 1, 0), 4) is None  # the new epoch starts at 0
    assert table.check(info(1, 2, 0)) is None


def test_a_marker_of_the_same_epoch_keeps_the_sequence():
    table = ProducerStateTable()
    append(table, info(1, 0, 0, 3), 0)
    table.end_transaction(marker_info(1, 0), 0)
    assert table.check(info(1, 0, 0, 3)) == 0  # a retry is still a duplicate
    assert table.check(info(1, 0, 3)) is None
    with pytest.raises(OutOfOrderSequenceError):
        table.check(info(1, 0, 0))


def test_described_fields_and_their_snapshot():
    table = ProducerStateTable()
    append(table, BatchInfo(100, 0, 1, 5, 9, 1, 0, 0, 2), 0)
    append(table, info(2, 0, 0), 2)
    entries = dict(table.entries())
    assert (entries[1].last_timestamp, entries[1].coordinator_epoch) == (9, -1)
    table.end_transaction(marker_info(1, 0, timestamp=20), 4)
    assert (entries[1].last_timestamp, entries[1].coordinator_epoch, entries[1].last_sequence) == (20, 4, 1)
    table.end_transaction(marker_info(3, 2, timestamp=30), 4)  # a marker of a producer never seen
    restored = dict(ProducerStateTable.from_snapshot(json.loads(json.dumps(table.snapshot()))).entries())
    assert [(e.epoch, e.last_sequence, e.last_timestamp, e.coordinator_epoch) for _, e in sorted(restored.items())] == [
        (0, 1, 20, 4), (0, 0, 0, -1), (2, -1, 30, 4)]


def test_a_snapshot_without_described_fields_still_loads():
    """Checkpoints written before DescribeProducers held [epoch, last sequence, recent]."""
    table = ProducerStateTable.from_snapshot({"7": [1, 4, [[3, 4, 10]]]})
    entry = dict(table.entries())[7]
    assert (entry.epoch, entry.last_sequence, entry.last_timestamp, entry.coordinator_epoch) == (1, 4, -1, -1)
    assert table.check(info(7, 1, 3, 2)) == 10
