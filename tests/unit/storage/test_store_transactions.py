"""The log side of Kafka transactions on a real MessageStore: open transactions and the LSO,
aborted transactions, read_committed reads, and all of it across segment rolls, restarts,
crashes, retention and DeleteRecords.

Transactional data batches come from aiokafka's encoder (batches.make_batch); end markers
are built by hand as Kafka's coordinator writes them (``marker``) and appended with
``append_built``, as the broker will.
"""

from __future__ import annotations

import json
import os
import random
import struct
from dataclasses import dataclass

import pytest

from batches import BASE_TS, fix_crc, make_batch, values_of
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.batch_builder import zigzag_varint
from rmqkafka.storage.checkpoint_file import read_checkpoint
from rmqkafka.storage.errors import InvalidProducerEpochError, OffsetOutOfRangeError, OutOfOrderSequenceError
from rmqkafka.storage.txn_index import ABORT, COMMIT, MAGIC, SLOT, SLOT_SIZE, VERSION, end_marker
from storage_helpers import append, read_all, sync_checkpoint

HW = 1 << 62  # an upper bound past any offset of these tests


def marker(pid: int, epoch: int, kind: int, *, key: bytes | None = None, value: bytes | None = None) -> bytes:
    """An end-transaction control batch: one record, key (version 0, type), value
    (version 0, coordinator epoch); transactional and control bits, no sequence."""
    key = struct.pack(">hh", 0, kind) if key is None else key
    value = struct.pack(">hi", 0, 7) if value is None else value
    body = (b"\x00" + zigzag_varint(0) + zigzag_varint(0) + zigzag_varint(len(key)) + key
            + zigzag_varint(len(value)) + value + zigzag_varint(0))
    attrs = rb.TRANSACTIONAL_BIT | rb.CONTROL_BIT
    out = bytearray(rb.HEADER.pack(0, 0, -1, 2, 0, attrs, 0, BASE_TS, BASE_TS, pid, epoch, -1, 1))
    out += zigzag_varint(len(body)) + body
    struct.pack_into(">i", out, 8, len(out) - rb.LOG_OVERHEAD)
    return fix_crc(out)


@dataclass
class Producer:
    """A transactional producer of partition t-0 (sequence numbers kept across batches)."""

    pid: int
    epoch: int = 0
    seq: int = 0

    def send(self, store, n: int = 1, topic: str = "t") -> int:
        values = [b"%d-%d" % (self.pid, self.seq + i) for i in range(n)]
        batch = make_batch(values, producer_id=self.pid, producer_epoch=self.epoch,
                           base_sequence=self.seq, transactional=True)
        self.seq += n
        return append(store, topic, 0, batch).base_offset

    def commit(self, store, topic: str = "t") -> int:
        return store.append_built(topic, 0, marker(self.pid, self.epoch, COMMIT)).base_offset

    def abort(self, store, topic: str = "t") -> int:
        return store.append_built(topic, 0, marker(self.pid, self.epoch, ABORT)).base_offset


def plain(store, n: int = 1, topic: str = "t") -> int:
    return append(store, topic, 0, make_batch(n)).base_offset


def state(store, topic: str = "t") -> tuple[int, int, list[tuple[int, int]]]:
    """(LSO, log end, every aborted transaction) of partition 0."""
    plog = store.partition(topic, 0)
    return plog.last_stable_offset, plog.next_offset, plog.aborted_transactions(0, HW)


def checkpoint_json(stores) -> dict:
    return read_checkpoint(stores.data_dir / "checkpoint.json")


async def started(stores, **kw):
    store = stores.open(flush_interval_ms=3_600_000, **kw)
    await store.start()
    return store


# -- markers ---------------------------------------------------------------------------------
def test_end_marker():
    assert end_marker(marker(1, 0, ABORT)) == (ABORT, 7)
    assert end_marker(marker(1, 0, COMMIT)) == (COMMIT, 7)
    assert end_marker(marker(1, 0, COMMIT, value=b"\x00\x00")) == (COMMIT, -1)  # value too short
    assert end_marker(marker(1, 0, 2)) is None  # not a transaction marker
    assert end_marker(marker(1, 0, ABORT, key=b"\x00")) is None  # key too short
    assert end_marker(marker(1, 0, ABORT, key=struct.pack(">hh", -1, 0))) is None
    assert end_marker(marker(1, 0, COMMIT, key=struct.pack(">hhh", 1, 0, 9))) == (ABORT, 7)
    assert end_marker(make_batch(1)) is None  # no key at all


# -- LSO and aborted transactions ------------------------------------------------------------
def test_lso_while_open_after_commit_and_after_abort(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    a = Producer(1000)
    assert state(store) == (0, 0, [])
    plain(store, 2)
    assert state(store) == (2, 2, [])
    assert a.send(store, 3) == 2
    assert state(store) == (2, 5, [])  # open from 2
    a.send(store)
    plain(store)
    assert state(store) == (2, 7, [])
    assert a.commit(store) == 7
    assert state(store) == (8, 8, [])  # a COMMIT records nothing
    assert a.send(store, 2) == 8
    assert store.partition("t", 0).last_stable_offset == 8
    assert a.abort(store) == 10
    assert state(store) == (11, 11, [(1000, 8)])
    plain(store)
    assert state(store) == (12, 12, [(1000, 8)])


def test_two_interleaved_producers(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    a, b = Producer(1), Producer(2)
    a.send(store)  # 0
    b.send(store)  # 1
    a.send(store)  # 2
    assert plog.last_stable_offset == 0
    assert a.abort(store) == 3
    assert plog.last_stable_offset == 1  # b still open
    b.send(store)  # 4
    a.send(store)  # 5: a's next transaction
    assert b.commit(store) == 6
    assert plog.last_stable_offset == 5
    assert a.abort(store) == 7
    assert plog.last_stable_offset == plog.next_offset == 8
    assert plog.aborted_transactions(0, 8) == [(1, 0), (1, 5)]
    # the entries' LSO is the earliest other open transaction's first offset, else marker + 1
    raw = list(SLOT.iter_unpack((plog.directory / "txnindex").read_bytes()))
    assert raw == [(MAGIC, VERSION, 0, 0), (1, 0, 3, 1), (1, 5, 7, 8)]
    assert plog.aborted_transactions(0, 1) == [(1, 0)]
    assert plog.aborted_transactions(3, 4) == [(1, 0)]  # the marker's own offset
    assert plog.aborted_transactions(4, 5) == []
    assert plog.aborted_transactions(4, 6) == [(1, 5)]
    assert plog.aborted_transactions(7, 8) == [(1, 5)]
    assert plog.aborted_transactions(8, 100) == []


def test_markers_without_an_open_transaction_record_nothing(stores, caplog):
    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    a = Producer(5)
    a.abort(store)  # an empty transaction: Kafka writes no index entry for it
    a.commit(store)
    plain(store)
    store.append_built("t", 0, marker(5, 0, ABORT, key=b"\x00\x00\x00\x07"))  # not a marker
    assert "not an end-transaction marker" in caplog.text
    assert state(store) == (4, 4, [])
    a.send(store)
    store.append_built("t", 0, marker(5, 0, 9))  # ignored: the transaction stays open
    assert plog.last_stable_offset == 4
    a.abort(store)
    assert state(store) == (7, 7, [(5, 4)])


def test_non_transactional_and_other_producers_do_not_open_transactions(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(2, producer_id=9, producer_epoch=0, base_sequence=0))
    assert state(store) == (2, 2, [])
    a = Producer(1)
    a.send(store)
    Producer(2).abort(store)  # another producer's marker ends nothing of a's
    assert state(store) == (2, 4, [])


def test_markers_leave_the_producer_sequence_alone(stores):
    """A marker carries no sequence (-1): the producer's next batch continues its sequence,
    and a retried data batch is still recognised as a duplicate."""
    store = stores.open()
    store.create_topic("t", 1, {})
    a = Producer(3)
    a.send(store, 2)
    a.commit(store)
    last = make_batch(1, producer_id=3, producer_epoch=0, base_sequence=2, transactional=True)
    assert append(store, "t", 0, last).base_offset == 3
    a.abort(store)
    assert append(store, "t", 0, last).duplicate
    with pytest.raises(OutOfOrderSequenceError):  # through append(), a marker is refused
        append(store, "t", 0, marker(3, 0, ABORT))
    assert state(store) == (5, 5, [(3, 3)])


def test_marker_dispatched_without_its_bytes_is_read_from_the_commitlog(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    Producer(4).send(store, 2)
    batch = marker(4, 0, ABORT)
    parts = rb.stored_parts(memoryview(batch), plog.next_offset, None)
    position = store.commitlog.append(plog.topic_id, 0, parts)
    plog.dispatch(position, rb.read_info(batch), plog.next_offset, None)
    assert state(store) == (3, 3, [(4, 0)])


# -- read_committed reads --------------------------------------------------------------------
def test_read_stops_at_the_lso_without_splitting_batches(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    a, b = Producer(1), Producer(2)
    plain(store, 3)  # 0..2
    a.send(store, 2)  # 3..4
    a.commit(store)  # 5
    b.send(store, 3)  # 6..8: open
    plain(store, 2)  # 9..10
    lso = plog.last_stable_offset
    assert lso == 6
    got = plog.read(0, 1 << 20, True, max_offset=lso)
    assert [rb.base_offset_of(x) for x in got.batches] == [0, 3, 5]
    assert got.high_watermark == 11  # the log end, whatever the reader may see
    assert [rb.base_offset_of(x) for x in plog.read(4, 1 << 20, True, max_offset=lso).batches] == [3, 5]
    assert plog.read(6, 1 << 20, True, max_offset=lso).batches == []
    assert plog.read(8, 1 << 20, True, max_offset=lso).batches == []  # inside the open batch
    assert plog.read(11, 1 << 20, True, max_offset=lso).batches == []
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(12, 1 << 20, True, max_offset=lso)
    assert len(plog.read(0, 1 << 20, True).batches) == 5  # read_uncommitted: everything
    first = len(got.batches[0])
    assert plog.read(0, first, True, max_offset=lso).batches == got.batches[:1]
    assert plog.bytes_available(0, 1 << 20, max_offset=lso) == got.size
    assert plog.bytes_available(6, 1 << 20, max_offset=lso) == 0
    assert plog.bytes_available(6, 1 << 20) > 0
    b.abort(store)  # 11
    assert plog.last_stable_offset == 12
    assert [rb.base_offset_of(x) for x in plog.read(6, 1 << 20, True, max_offset=12).batches] == [6, 9, 11]
    assert plog.aborted_transactions(6, 12) == [(2, 6)]


# -- segments, restarts, crashes -------------------------------------------------------------
def test_segment_rolls_in_the_middle_of_a_transaction(stores):
    store = stores.open(segment_bytes=600)
    store.create_topic("t", 2, {})
    a, b = Producer(1), Producer(2)
    first = a.send(store, 2)
    segments = len(store.commitlog.segments)
    for i in range(12):
        append(store, "t", 1, make_batch(3))  # another partition fills the segments
        if i % 4 == 0:
            a.send(store)
    assert len(store.commitlog.segments) > segments + 1
    assert store.partition("t", 0).last_stable_offset == first
    b.send(store)
    end = a.abort(store)
    assert state(store) == (end - 1, end + 1, [(1, first)])
    b.commit(store)
    assert state(store) == (end + 2, end + 2, [(1, first)])
    stores.crash(store)
    store = stores.open()  # no checkpoint since open: everything replayed
    assert state(store) == (end + 2, end + 2, [(1, first)])


def test_restart_after_a_clean_close(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    a, b = Producer(1), Producer(2)
    a.send(store)  # 0
    b.send(store)  # 1
    a.abort(store)  # 2
    b.send(store)  # 3
    before = state(store)
    assert before == (1, 4, [(1, 0)])
    stores.close(store)
    cp = checkpoint_json(stores)
    key = f"{store.partition('t', 0).topic_id}/0"
    assert cp["txns"] == {key: {"2": 1}}
    assert cp["derived"][key] == [4, 1, 1]

    store = stores.open()
    assert store.clean_start
    assert state(store) == before
    b.commit(store)
    assert state(store) == (5, 5, [(1, 0)])
    stores.close(store)
    assert "txns" not in checkpoint_json(stores) or checkpoint_json(stores)["txns"] == {}
    store = stores.open()
    assert state(store) == (5, 5, [(1, 0)])


def test_crash_without_a_checkpoint_since_open(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    a, b = Producer(1), Producer(2)
    a.send(store, 2)  # 0..1
    b.send(store)  # 2
    a.abort(store)  # 3
    b.send(store)  # 4
    a.send(store)  # 5
    expected = state(store)
    assert expected == (2, 6, [(1, 0)])
    stores.crash(store)
    store = stores.open()
    assert not store.clean_start and store.recovered_entries == 5
    assert state(store) == expected
    b.abort(store)  # 6
    a.commit(store)  # 7
    assert state(store) == (8, 8, [(1, 0), (2, 2)])


@pytest.mark.parametrize("when", ["open", "ended", "both"])
async def test_crash_with_a_checkpoint_in_between(stores, when):
    """Open transactions and index entries from before the checkpoint come from its
    snapshot and the file; the rest from replay, nothing twice."""
    store = await started(stores)
    store.create_topic("t", 1, {})
    a, b, c = Producer(1), Producer(2), Producer(3)
    a.send(store)  # 0
    b.send(store)  # 1
    if when != "open":
        b.abort(store)  # 2
        b.send(store)  # 3
    await store.checkpoint()
    if when == "both":
        a.abort(store)
    c.send(store)
    b.abort(store)
    c.send(store)
    expected = state(store)
    assert expected == {
        "open": (0, 5, [(2, 1)]),
        "ended": (0, 7, [(2, 1), (2, 3)]),
        "both": (5, 8, [(2, 1), (1, 0), (2, 3)]),
    }[when]
    stores.crash(store)
    store = stores.open()
    assert not store.clean_start and store.recovered_entries == (4 if when == "both" else 3)
    assert state(store) == expected
    stores.close(store)
    store = stores.open()
    assert state(store) == expected


async def test_checkpoint_fsyncs_the_txnindex(stores, monkeypatch):
    store = await started(stores)
    store.create_topic("t", 1, {})
    a = Producer(1)
    a.send(store)
    a.abort(store)
    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    await store.checkpoint()
    assert str(store.partition("t", 0).directory / "txnindex") in synced
    synced.clear()
    await store.checkpoint()  # nothing new
    assert not any(path.endswith("txnindex") for path in synced)


def test_garbage_in_the_txnindex_after_the_checkpoint(stores):
    """After an OS crash, entries written after the checkpoint may read back as zeros:
    recovery cuts the file back to the checkpoint's count and replays the rest."""
    store = stores.open()
    store.create_topic("t", 1, {})
    a, b = Producer(1), Producer(2)
    a.send(store)
    a.abort(store)
    sync_checkpoint(store)
    b.send(store)
    b.abort(store)
    a.send(store)
    a.abort(store)
    expected = state(store)
    assert len(expected[2]) == 3
    path = store.partition("t", 0).directory / "txnindex"
    stores.crash(store)
    with open(path, "r+b") as f:
        f.seek(2 * SLOT_SIZE)
        f.write(bytes(2 * SLOT_SIZE))
    store = stores.open()
    assert state(store) == expected


def test_torn_commitlog_tail_drops_the_marker_and_reopens_the_transaction(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    a = Producer(1)
    a.send(store, 2)
    a.abort(store)
    path = store.commitlog.segments[-1].path
    stores.crash(store)
    with open(path, "r+b") as f:  # the marker's batch is damaged
        f.truncate(path.stat().st_size - 3)
    store = stores.open()
    assert state(store) == (0, 2, [])
    a.abort(store)
    assert state(store) == (3, 3, [(1, 0)])


@pytest.mark.parametrize("damage", ["deleted", "truncated", "header", "emptied"])
@pytest.mark.parametrize("how", ["clean", "crash"])
def test_damaged_txnindex_is_rebuilt_from_the_commitlog(stores, damage, how):
    store = stores.open(segment_bytes=700)
    store.create_topic("t", 1, {})
    a, b = Producer(1), Producer(2)
    for _ in range(4):
        a.send(store)
        b.send(store, 2)
        plain(store)
        a.abort(store)
        b.commit(store)
    b.send(store)
    expected = state(store)
    assert len(expected[2]) == 4 and expected[0] < expected[1]
    path = store.partition("t", 0).directory / "txnindex"
    if how == "clean":
        stores.close(store)
    else:
        sync_checkpoint(store)
        stores.crash(store)
    data = path.read_bytes()
    if damage == "deleted":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(data[: 2 * SLOT_SIZE + 5])
    elif damage == "header":
        path.write_bytes(bytes(8) + data[8:])
    else:
        path.write_bytes(b"")
    store = stores.open()
    assert not store.clean_start
    assert state(store) == expected


def test_commitlog_shorter_than_the_checkpoint_forgets_lost_transactions(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    plain(store, 2)
    path = store.commitlog.segments[-1].path
    size = path.stat().st_size
    plain(store)
    Producer(1).send(store)  # open from 3 in the checkpoint the close writes, then lost
    stores.close(store)
    with open(path, "r+b") as f:
        f.truncate(size)
    store = stores.open()
    assert state(store) == (2, 2, [])


def test_checkpoint_from_before_the_txnindex_still_opens_cleanly(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    plain(store, 2)
    stores.close(store)
    cp = checkpoint_json(stores)
    cp["derived"] = {key: sizes[:2] for key, sizes in cp["derived"].items()}
    cp.pop("txns", None)
    (stores.data_dir / "checkpoint.json").write_text(json.dumps(cp))
    store = stores.open()
    assert store.clean_start
    assert state(store) == (2, 2, [])


def test_deleted_topic_takes_its_transactions_along(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    a = Producer(1)
    a.send(store)
    a.abort(store)
    Producer(2).send(store)
    store.delete_topic("t")
    store.create_topic("t", 1, {})
    assert state(store) == (0, 0, [])
    stores.crash(store)
    store = stores.open()
    assert state(store) == (0, 0, [])


def test_random_transactions_with_crashes_and_restarts_against_a_model(stores):
    """Random transactional traffic from three producers, plain batches, commits and
    aborts, with segment rolls, checkpoints, clean restarts and crashes; after every step
    the LSO and every aborted-transactions window match a model."""
    rng = random.Random(4321)
    store = stores.open(segment_bytes=900)
    store.create_topic("t", 1, {})
    producers = [Producer(pid) for pid in (1, 2, 3)]
    ongoing: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []  # (producer id, first offset, marker offset)
    log_start = 0
    for _ in range(300):
        producer = rng.choice(producers)
        roll = rng.random()
        if roll < 0.45:
            ongoing.setdefault(producer.pid, producer.send(store, rng.randint(1, 3)))
        elif roll < 0.6:
            plain(store, rng.randint(1, 2))
        elif roll < 0.75:
            producer.commit(store)
            ongoing.pop(producer.pid, None)
        else:
            last = producer.abort(store)
            first = ongoing.pop(producer.pid, None)
            if first is not None:
                aborted.append((producer.pid, first, last))
        action = rng.random()
        if action < 0.03:  # DeleteRecords, then the checkpoint its handler writes
            log_start = rng.randrange(log_start, store.partition("t", 0).next_offset + 1)
            store.partition("t", 0).advance_log_start(log_start)
            sync_checkpoint(store)
        elif action < 0.06:
            stores.crash(store)
            store = stores.open()
        elif action < 0.1:
            stores.close(store)
            store = stores.open()
        elif action < 0.18:
            sync_checkpoint(store)
        plog = store.partition("t", 0)
        end = plog.next_offset
        assert plog.log_start_offset == log_start
        assert plog.last_stable_offset == max(min(ongoing.values(), default=end), log_start)
        for _ in range(3):
            start = rng.randrange(log_start, end + 1)
            upper = rng.randrange(start, end + 2)
            expected = [(pid, first) for pid, first, last in aborted if last >= start and first < upper]
            assert plog.aborted_transactions(start, upper) == expected
    assert len(store.commitlog.segments) > 3 and len(aborted) > 20


# -- log start: DeleteRecords and retention --------------------------------------------------
def test_delete_records_keeps_straddling_transactions(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    a, b, c, d = Producer(1), Producer(2), Producer(3), Producer(4)
    a.send(store, 2)  # 0..1
    a.abort(store)  # 2: (1, 0..2)
    b.send(store)  # 3
    c.send(store)  # 4: stays open
    b.abort(store)  # 5: (2, 3..5)
    plain(store)  # 6
    d.send(store)  # 7
    d.abort(store)  # 8: (4, 7..8), LSO 4 (c)
    path = plog.directory / "txnindex"
    assert plog.last_stable_offset == 4

    plog.advance_log_start(4)  # inside b's aborted transaction and c's open one
    assert plog.last_stable_offset == 4
    assert plog.aborted_transactions(4, 9) == [(2, 3), (4, 7)]
    assert path.stat().st_size == 4 * SLOT_SIZE  # 1 entry of 3 may go: not rewritten yet

    plog.advance_log_start(6)  # past b's marker, still inside c's transaction
    assert plog.last_stable_offset == 6  # never below the log start
    assert plog.read(6, 1 << 20, True, max_offset=plog.last_stable_offset).batches == []
    assert plog.aborted_transactions(6, 9) == [(4, 7)]
    assert list(SLOT.iter_unpack(path.read_bytes())) == [(MAGIC, VERSION, 2, 6), (4, 7, 8, 4)]
    assert plog.txn_index.entry_count == 3

    sync_checkpoint(store)  # what the DeleteRecords handler does
    e = Producer(5)
    e.send(store)  # 9
    e.abort(store)  # 10
    expected = state(store)
    assert expected == (6, 11, [(4, 7), (5, 9)])
    stores.crash(store)
    store = stores.open()
    assert state(store) == expected
    assert store.partition("t", 0).log_start_offset == 6
    c.commit(store)
    assert state(store) == (12, 12, [(4, 7), (5, 9)])


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_log_start_never_reopens_below_what_the_txnindex_dropped(stores, how):
    """DeleteRecords moved the log start and the txnindex dropped what ended below it;
    the process dies before a checkpoint records the new log start. Offsets whose aborts
    are gone from the index must not be served again."""
    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    a, b = Producer(1), Producer(2)
    a.send(store, 2)  # 0..1
    a.abort(store)  # 2
    b.send(store)  # 3
    b.abort(store)  # 4
    plain(store, 2)  # 5..6
    sync_checkpoint(store)
    plog.advance_log_start(5)
    assert plog.txn_index.start_offset == 5
    if how == "clean":  # a checkpoint written by an older version: no log start in it
        stores.close(store)
        cp = checkpoint_json(stores)
        cp["log_start"] = {}
        (stores.data_dir / "checkpoint.json").write_text(json.dumps(cp))
    else:
        stores.crash(store)
    store = stores.open()
    plog = store.partition("t", 0)
    assert plog.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(4, 1 << 20, True)
    assert plog.aborted_transactions(5, 7) == []
    assert state(store) == (7, 7, [])


def fill_until_roll(store) -> int:
    """Plain batches until one starts a new segment; returns that batch's base offset."""
    segments = len(store.commitlog.segments)
    while True:
        base = plain(store)
        if len(store.commitlog.segments) > segments:
            return base


def test_retention_keeps_transactions_straddling_the_log_start(stores):
    store = stores.open(segment_bytes=1500, retention_ms=None)
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    a, b, c, d, e = (Producer(i) for i in range(1, 6))
    a.send(store)
    a.abort(store)  # wholly in the deleted segments
    b_first = b.send(store)
    c_first = c.send(store)
    e_first = e.send(store)
    fill_until_roll(store)
    cut = fill_until_roll(store)
    segments = len(store.commitlog.segments)
    b_second = b.send(store)
    b.abort(store)  # straddles the cut, data on both sides
    e.abort(store)  # straddles the cut, data only before it
    d_first = d.send(store)
    d.abort(store)  # wholly after it
    assert len(store.commitlog.segments) == segments
    assert plog.last_stable_offset == c_first
    stores.close(store)

    store = stores.open(retention_bytes=0)  # every segment but the active one goes
    plog = store.partition("t", 0)
    assert store.apply_retention() == segments - 1
    assert plog.log_start_offset == cut
    expected_aborted = [(2, b_first), (5, e_first), (4, d_first)]
    assert plog.last_stable_offset == cut  # c's transaction is still open
    assert plog.aborted_transactions(cut, HW) == expected_aborted
    assert plog.aborted_transactions(cut, cut + 1) == [(2, b_first), (5, e_first)]
    assert values_of(read_all(store, "t", 0))[0][0] == cut

    sync_checkpoint(store)
    stores.crash(store)
    store = stores.open()
    plog = store.partition("t", 0)
    assert (plog.log_start_offset, plog.last_stable_offset) == (cut, cut)
    assert plog.aborted_transactions(cut, HW) == expected_aborted
    c.commit(store)
    end = plog.next_offset
    assert plog.last_stable_offset == end
    stores.close(store)

    # Rebuilt from what is left of the commitlog: b's transaction now starts at its first
    # surviving batch, and e's (no record left) is not listed. A read_committed consumer,
    # which cannot read below the cut, drops exactly the same records.
    (plog.directory / "txnindex").unlink()
    store = stores.open()
    plog = store.partition("t", 0)
    assert not store.clean_start
    assert plog.last_stable_offset == plog.next_offset == end
    assert plog.aborted_transactions(cut, HW) == [(2, b_second), (4, d_first)]


@pytest.mark.parametrize("reopen", ["close", "crash"])
def test_markers_move_producer_state_and_it_survives_a_restart(stores, reopen):
    """An end marker records its coordinator epoch and time for DescribeProducers, and a
    marker of a bumped epoch fences the producer's older epoch, after a restart too."""
    store = stores.open()
    store.create_topic("t", 1, {})
    a = Producer(1)
    a.send(store, 2)
    store.append_built("t", 0, marker(1, 1, ABORT))  # the coordinator aborted with epoch 1
    getattr(stores, reopen)(store)
    store = stores.open()
    entry = dict(store.partition("t", 0).producers.entries())[1]
    assert (entry.epoch, entry.last_sequence, entry.coordinator_epoch, entry.last_timestamp) == (1, -1, 7, BASE_TS)
    with pytest.raises(InvalidProducerEpochError):
        a.send(store)
    a.epoch, a.seq = 1, 0
    assert a.send(store) == 3
