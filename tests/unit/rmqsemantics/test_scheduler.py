"""Delay levels, timers, retries and dead letters (rmqsemantics.scheduler) on a real
MessageStore in tmp_path, driven by a ManualClock: nothing sleeps (the in-process broker,
its crashes and clean restarts are semantics_world.py's).
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from rmqkafka.rmqsemantics import scheduler as scheduler_module
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.parked_records import PARKED_AT, REAL_QID, REAL_TOPIC
from rmqkafka.rmqsemantics.scheduler import (
    MAX_RECONSUME_CONFIG,
    RECONSUME_TIMES,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
)
from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.consume_queue import PARKED_CODE
from rmqkafka.storage.errors import InvalidRecordError, OutOfOrderSequenceError
from semantics_world import (
    BIG,
    HOUR,
    LEVELS,
    PRECISION,
    RETRY,
    RETRY_LEVELS,
    SLOTS,
    T0,
    Broker,
    World,
    all_values,
    assert_contiguous,
    batch,
    coverage,
    delay,
    deliver_at,
    drain,
    fail_writes_to,
    hdr,
    parked,
    rec,
    tag,
    timer_ms,
    timer_sec,
    values,
)


@pytest.fixture
async def world(tmp_path: Path):
    w = World(tmp_path / "data", ManualClock(T0))
    yield w
    await w.crash_all()


# == 1. delay levels ===============================================================================


async def test_delay_level_parks_in_the_schedule_topic(world):
    b = await world.open()
    b.topic("t", 2)
    r = b.produce("t", 1, batch(
        rec(b"v0", ("h", b"x"), delay(2), key=b"k0"),
        rec(b"v1", delay(2), ("h", b"y"), key=b"k1"),
        rec(b"v2", delay(99)),  # above the highest level: the highest
        rec(b"v3", delay(1)),
        rec(b"v4", delay(0)),  # level 0: not delayed
    ))
    assert r.base_offset == 0 and b.next_offset("t", 1) == 5
    assert values(b.store, "t", 1) == [b"v4"]  # only the immediate record is there
    assert b.store.topics.get(SCHEDULE_TOPIC).partitions == len(LEVELS)
    level2 = parked(b.store, SCHEDULE_TOPIC, 1)
    assert [(o, code, v) for o, code, v, _ in level2] == [(0, T0 + 2000, b"v0"), (1, T0 + 2000, b"v1")]
    # the parked copy is the produced record (its DELAY kept, as RocketMQ parks it) for t-1
    assert level2[0][3] == [("h", b"x"), ("DELAY", b"2"), (REAL_TOPIC, b"t"), (REAL_QID, b"1"),
                            ("TIMER_OUT_MS", str(T0 + 2000).encode()), ("PARKED_FROM", b"t-1@0")]
    assert level2[1][3][:4] == [("DELAY", b"2"), ("h", b"y"), (REAL_TOPIC, b"t"), (REAL_QID, b"1")]
    assert [(o, c, v) for o, c, v, _ in parked(b.store, SCHEDULE_TOPIC, 2)] == [(0, T0 + 3000, b"v2")]
    assert [(o, c, v) for o, c, v, _ in parked(b.store, SCHEDULE_TOPIC, 0)] == [(0, T0 + 1000, b"v3")]
    assert b.next_offset(TIMER_TOPIC) == 0


async def test_delay_levels_deliver_exactly_at_due_in_order(world):
    b = await world.open()
    b.topic("t", 2)
    b.produce("t", 1, batch(
        rec(b"v0", ("h", b"x"), delay(2), key=b"k0", ts=T0 - 77),
        rec(b"v1", delay(2), key=b"k1"),
        rec(b"v2", delay(99)),
        rec(b"v3", delay(1)),
    ))
    assert b.deliver() == T0 + 1000  # when to call again: the first due time
    b.clock.advance(999)
    b.deliver()
    assert values(b.store, "t", 1) == [] and b.scheduler.counters["delivered"] == 0
    b.clock.advance(1)  # T0 + 1000: level 1 is due
    assert b.deliver() == T0 + 2000
    assert drain(b.store, "t", 1) == [
        (4, b"v3", [(REAL_TOPIC, b"t"), (REAL_QID, b"1"), ("TIMER_OUT_MS", str(T0 + 1000).encode()),
                    (PARKED_AT, b"SCHEDULE_TOPIC_XXXX-0@0")])
    ]
    b.clock.advance(999)
    b.deliver()
    assert b.next_offset("t", 1) == 5
    b.clock.advance(1)  # T0 + 2000
    b.deliver()
    got = drain(b.store, "t", 1, 5)
    assert [(o, v) for o, v, _ in got] == [(5, b"v0"), (6, b"v1")]
    # key, value, CreateTime timestamp and headers kept; DELAY gone; TIMER_OUT_MS, PARKED_AT added
    plog = b.store.partition("t", 1)
    (delivered,) = plog.read(5, BIG, True).batches
    records = record_batch.read_records(delivered)
    assert [(r.key, r.value, r.timestamp) for r in records] == [(b"k0", b"v0", T0 - 77), (b"k1", b"v1", T0 - 999)]
    assert not record_batch.read_info(delivered).attributes & record_batch.TIMESTAMP_TYPE_BIT
    assert list(records[0].headers) == [
        ("h", b"x"), (REAL_TOPIC, b"t"), (REAL_QID, b"1"), ("TIMER_OUT_MS", str(T0 + 2000).encode()),
        (PARKED_AT, b"SCHEDULE_TOPIC_XXXX-1@0"),
    ]
    assert hdr(list(records[1].headers), "DELAY") is None
    assert hdr(list(records[1].headers), PARKED_AT) == b"SCHEDULE_TOPIC_XXXX-1@1"
    b.clock.advance(999)
    b.deliver()
    assert b.next_offset("t", 1) == 7
    b.clock.advance(1)  # T0 + 3000
    assert b.deliver() is None  # nothing left
    assert [(o, v) for o, v, _ in drain(b.store, "t", 1, 7)] == [(7, b"v2")]
    assert b.scheduler.counters["delivered"] == 4
    assert b.next_offset("t", 0) == 0  # nothing went to the other partition


async def test_each_level_delivers_in_produce_order(world):
    b = await world.open()
    b.topic("t", 1)
    for i in range(3):
        b.produce("t", 0, batch(*(rec(b"a%d-%d" % (i, j), delay(1)) for j in range(3))))
    b.clock.advance(300)
    b.produce("t", 0, batch(rec(b"b0", delay(1)), rec(b"b1", delay(1))))
    b.produce("t", 0, batch(rec(b"c0", delay(1))))
    b.clock.advance(700)  # T0 + 1000: the first three batches are due, not the later ones
    b.deliver()
    first = [b"a%d-%d" % (i, j) for i in range(3) for j in range(3)]
    assert values(b.store, "t") == first
    b.clock.advance(299)
    b.deliver()
    assert values(b.store, "t") == first
    b.clock.advance(1)
    b.deliver()
    assert values(b.store, "t") == first + [b"b0", b"b1", b"c0"]


# == 2. mixed batches, idempotent producers ==========================================================


async def test_mixed_idempotent_batches_keep_their_offsets_and_sequences(world):
    b = await world.open()
    b.topic("t", 1)
    first = batch(
        rec(b"i0", tag("A")), rec(b"d1", delay(1)), rec(b"t2", timer_ms(500)), rec(b"i3"), rec(b"d4", delay(2)),
        pid=7, epoch=0, seq=0,
    )
    r1 = b.produce("t", 0, first)
    assert (r1.base_offset, r1.duplicate) == (0, False)
    everything_delayed = batch(rec(b"x5", delay(1)), rec(b"x6", timer_sec(1)), pid=7, epoch=0, seq=5)
    r2 = b.produce("t", 0, everything_delayed)
    assert r2.base_offset == 5
    r3 = b.produce("t", 0, batch(rec(b"i7"), pid=7, epoch=0, seq=7))
    assert r3.base_offset == 7 and b.next_offset("t") == 8
    # the immediate records are readable at once, at their offsets
    assert [(o, v) for o, v, _ in drain(b.store, "t")] == [(0, b"i0"), (3, b"i3"), (7, b"i7")]
    batches = b.store.partition("t", 0).read(0, BIG, True).batches
    assert_contiguous(batches, 0, 8)
    assert coverage(batches) == [(0, 5), (5, 7), (7, 8)]
    sparse = record_batch.read_info(batches[0])
    assert (sparse.producer_id, sparse.producer_epoch, sparse.base_sequence, sparse.last_offset_delta,
            sparse.records_count) == (7, 0, 0, 4, 2)
    assert batches[1][22] & record_batch.CONTROL_BIT  # an emptied batch reads as a covering control batch
    assert record_batch.read_info(batches[1]).producer_id == -1
    assert [b.store.partition("t", 0).consume_queue.entry(o)[2] == PARKED_CODE for o in range(8)] == [
        False, True, True, False, True, True, True, False,
    ]
    parked_before = [b.next_offset(SCHEDULE_TOPIC, p) for p in range(3)] + [b.next_offset(TIMER_TOPIC)]
    assert parked_before == [2, 1, 0, 2]
    # the producer's retries are duplicates: original offsets, nothing parked twice
    for again, base in ((first, 0), (everything_delayed, 5)):
        r = b.produce("t", 0, again)
        assert (r.base_offset, r.duplicate) == (base, True)
    assert [b.next_offset(SCHEDULE_TOPIC, p) for p in range(3)] + [b.next_offset(TIMER_TOPIC)] == parked_before
    assert b.next_offset("t") == 8
    with pytest.raises(OutOfOrderSequenceError):
        b.produce("t", 0, batch(rec(b"gap", delay(1)), pid=7, epoch=0, seq=10))
    r = b.produce("t", 0, batch(rec(b"d8", delay(1)), rec(b"i9"), pid=7, epoch=0, seq=8))
    assert (r.base_offset, r.duplicate) == (8, False)
    assert [b.next_offset(SCHEDULE_TOPIC, p) for p in range(3)] == [3, 1, 0]
    b.run_until(T0 + 2000)
    delivered = [v for o, v, _ in drain(b.store, "t") if o >= 10]
    assert sorted(delivered) == sorted([b"d1", b"t2", b"d4", b"x5", b"x6", b"d8"])
    assert all_values(b.store, "t") == Counter({v: 1 for v in [b"i0", b"i3", b"i7", b"i9", *delivered]})


@pytest.mark.parametrize("shutdown", ["crash", "clean"])
async def test_producer_state_of_sparse_and_empty_batches_survives_reopen(world, shutdown):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"i0"), rec(b"d1", delay(1)), pid=3, epoch=1, seq=0))
    last = batch(rec(b"d2", delay(2)), rec(b"t3", timer_ms(700)), pid=3, epoch=1, seq=2)  # emptied
    b.produce("t", 0, last)
    await (world.crash(b) if shutdown == "crash" else world.close(b))
    b = await world.open()
    r = b.produce("t", 0, last)
    assert (r.base_offset, r.duplicate) == (2, True)
    with pytest.raises(OutOfOrderSequenceError):
        b.produce("t", 0, batch(rec(b"x"), pid=3, epoch=1, seq=5))
    r = b.produce("t", 0, batch(rec(b"i4"), rec(b"d5", delay(1)), pid=3, epoch=1, seq=4))
    assert (r.base_offset, r.duplicate) == (4, False)
    assert_contiguous(b.store.partition("t", 0).read(0, BIG, True).batches, 0, 6)
    b.run_until(T0 + 3000)
    assert all_values(b.store, "t") == Counter({v: 1 for v in [b"i0", b"d1", b"d2", b"t3", b"i4", b"d5"]})


async def test_compressed_mixed_batch(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"i0"), rec(b"d1", delay(1)), rec(b"i2"), codec=1))  # gzip
    stored = b.store.partition("t", 0).read(0, BIG, True).batches
    assert coverage(stored) == [(0, 3)] and stored[0][22] & record_batch.COMPRESSION_MASK == 1
    assert [(o, v) for o, v, _ in drain(b.store, "t")] == [(0, b"i0"), (2, b"i2")]
    b.run_until(T0 + 1000)
    assert [(o, v) for o, v, _ in drain(b.store, "t")] == [(0, b"i0"), (2, b"i2"), (3, b"d1")]


async def test_several_batches_in_one_request(world):
    b = await world.open()
    b.topic("t", 1)
    r = b.produce("t", 0,
                  batch(rec(b"a0", delay(2)), rec(b"a1")),
                  batch(rec(b"b0"), rec(b"b1", timer_ms(300))),
                  batch(rec(b"c0", delay(1))))
    assert r.base_offset == 0 and b.next_offset("t") == 5
    assert [(o, v) for o, v, _ in drain(b.store, "t")] == [(1, b"a1"), (2, b"b0")]
    assert [v for _, _, v, h in parked(b.store, SCHEDULE_TOPIC, 1)] == [b"a0"]
    assert [v for _, _, v, h in parked(b.store, SCHEDULE_TOPIC, 0)] == [b"c0"]
    assert [v for _, _, v, h in parked(b.store, TIMER_TOPIC, 0)] == [b"b1"]
    b.run_until(T0 + 2000)
    assert values(b.store, "t") == [b"a1", b"b0", b"b1", b"c0", b"a0"]


# == 3. views over sparse batches ===================================================================


async def test_views_read_sparse_and_emptied_batches(world):
    b = await world.open()
    b.topic("t", 1)
    eu, us = ("region", b"eu"), ("region", b"us")
    b.produce("t", 0, batch(rec(b"a0", tag("A"), eu), rec(b"b1", tag("B"), eu), rec(b"a2", tag("A"), us, delay(1)),
                            rec(b"c3", tag("C"), us)))
    b.produce("t", 0, batch(rec(b"a4", tag("A"), eu, delay(1)), rec(b"b5", tag("B"), us, timer_ms(400))))  # emptied
    b.produce("t", 0, batch(rec(b"a6", tag("A"), us), rec(b"a7", tag("A"), eu, delay(2)), rec(b"a8", tag("A"), eu)))
    b.produce("t", 0, batch(rec(b"c9", tag("C"), eu)))
    b.semantics.create_view("tag-a", "t", "tags", "A")
    b.semantics.create_view("eu", "t", "sql", "region = 'eu'")
    b.semantics.create_view("all", "t", "tags", "*")

    def view(name: str, offset: int = 0) -> list[tuple[int, bytes | None]]:
        result = b.semantics.read(name, 0, offset, BIG, True)
        assert_contiguous(result.batches, record_batch.base_offset_of(result.batches[0]), b.next_offset("t"))
        out = []
        for x in result.batches:
            if not x[22] & record_batch.CONTROL_BIT:
                out.extend((r.offset, r.value) for r in record_batch.read_records(x) if r.offset >= offset)
        return out

    assert view("tag-a") == [(0, b"a0"), (6, b"a6"), (8, b"a8")]
    assert view("eu") == [(0, b"a0"), (1, b"b1"), (8, b"a8"), (9, b"c9")]
    assert view("all") == [(0, b"a0"), (1, b"b1"), (3, b"c3"), (6, b"a6"), (8, b"a8"), (9, b"c9")]
    assert view("tag-a", 2) == [(6, b"a6"), (8, b"a8")]
    assert view("eu", 4) == [(8, b"a8"), (9, b"c9")]
    b.run_until(T0 + 2000)  # the parked ones arrive, in due order
    assert view("all", 10) == [(10, b"b5"), (11, b"a2"), (12, b"a4"), (13, b"a7")]
    assert view("tag-a", 10) == [(11, b"a2"), (12, b"a4"), (13, b"a7")]
    assert view("eu", 10) == [(12, b"a4"), (13, b"a7")]


# == 4. timers =====================================================================================


async def test_timers_are_delivered_never_early_at_most_a_slot_late(world):
    b = await world.open()
    b.topic("t", 1)
    dues = {
        b"ms250": T0 + 250, b"sec1": T0 + 1000, b"at199": T0 + 199, b"at1234": T0 + 1234,
        b"ms100": T0 + 100, b"ms1": T0 + 1,
    }
    b.produce("t", 0, batch(
        rec(b"ms250", timer_ms(250), key=b"k"), rec(b"sec1", timer_sec(1)), rec(b"at199", deliver_at(T0 + 199)),
        rec(b"at1234", deliver_at(T0 + 1234), ("h", b"v")), rec(b"ms100", timer_ms(100)), rec(b"ms1", timer_ms(1)),
    ))
    assert b.next_offset("t") == 6 and values(b.store, "t") == []
    assert {v: c for _, c, v, _ in parked(b.store, TIMER_TOPIC, 0)} == dues
    b.run_until(T0 + 2000, step_ms=7)
    when = {value: at for at, _, _, value in b.deliveries}
    assert set(when) == set(dues) and len(b.deliveries) == len(dues)
    steps = range(T0, T0 + 2001, 7)
    for value, due in dues.items():
        slot_end = (due // PRECISION + 1) * PRECISION - 1  # the slot is wholly due
        assert due <= when[value] <= slot_end + 6, value  # + 6: the steps are 7 ms apart
        assert when[value] == min(s for s in steps if s >= slot_end), value
    # a timer due at its slot's last ms (T0 + 199) is delivered exactly then
    assert when[b"at199"] == min(s for s in steps if s >= T0 + 199)
    got = {v: (o, h) for o, v, h in drain(b.store, "t")}
    at1234 = [o for o, _, v, _ in parked(b.store, TIMER_TOPIC, 0) if v == b"at1234"]
    assert got[b"at1234"][1] == [("h", b"v"), (REAL_TOPIC, b"t"), (REAL_QID, b"0"),
                                 ("TIMER_OUT_MS", str(dues[b"at1234"]).encode()),
                                 (PARKED_AT, b"rmq_sys_wheel_timer-0@%d" % at1234[0])]
    assert all(hdr(h, n) is None for _, h in got.values() for n in ("TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS"))


async def test_timers_exactly_at_slot_end_and_not_a_ms_before(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"x", deliver_at(T0 + 499))))
    b.clock.advance(498)
    b.deliver()
    assert values(b.store, "t") == []
    b.clock.advance(1)
    b.deliver()
    assert values(b.store, "t") == [b"x"]


async def test_many_timers_in_one_slot_keep_their_order(world):
    b = await world.open()
    b.topic("t", 2)
    order = []
    for n in range(3):  # 3 batches of 10 timers, all in slot [T0+500, T0+600), due times shuffled
        recs = []
        for i in range(10):
            value = b"s%d-%d" % (n, i)
            recs.append(rec(value, deliver_at(T0 + 500 + (i * 37 + n * 11) % 100)))
            order.append(value)
        b.produce("t", n % 2, batch(*recs))
    b.produce("t", 0, batch(rec(b"early", deliver_at(T0 + 450))))  # an earlier slot, produced later
    b.run_until(T0 + 1000, step_ms=50)
    delivered = [v for _, _, _, v in b.deliveries]
    assert delivered == [b"early", *order]
    assert len({at for at, _, _, v in b.deliveries if v != b"early"}) == 1  # one deliver_due delivered the slot
    assert values(b.store, "t", 1) == order[10:20]
    assert values(b.store, "t", 0) == [b"early", *order[:10], *order[20:]]
    assert all_values(b.store, "t") == Counter({v: 1 for v in delivered})


async def test_a_timer_beyond_the_wheel_window_rolls_and_is_delivered_once(world):
    b = await world.open()
    b.topic("t", 1)
    due = T0 + 12_000  # the window is SLOTS * PRECISION = 5 s: it rolls twice
    b.produce("t", 0, batch(rec(b"far", deliver_at(due), ("h", b"1"), key=b"k", ts=T0 - 5)))
    b.produce("t", 0, batch(rec(b"near", timer_ms(2000))))
    b.run_until(T0 + 6000)
    copies = parked(b.store, TIMER_TOPIC, 0)
    assert len(copies) == 3  # far, near, far's first re-parked copy
    assert (copies[2][1], copies[2][2]) == (due, b"far")
    assert hdr(copies[2][3], PARKED_AT) == b"rmq_sys_wheel_timer-0@0"
    assert hdr(copies[2][3], REAL_TOPIC) == b"t" and hdr(copies[2][3], "TIMER_DELIVER_MS") is None
    assert values(b.store, "t") == [b"near"]
    b.run_until(due - 1, step_ms=50)
    assert values(b.store, "t") == [b"near"]
    assert b.next_offset(TIMER_TOPIC) == 4  # rolled a second time
    b.run_until(due + PRECISION)
    got = drain(b.store, "t")
    assert [v for _, v, _ in got] == [b"near", b"far"]
    (when,) = [at for at, _, _, v in b.deliveries if v == b"far"]
    assert due <= when < due + PRECISION
    assert got[1][2] == [("h", b"1"), (REAL_TOPIC, b"t"), (REAL_QID, b"0"), ("TIMER_OUT_MS", str(due).encode()),
                         (PARKED_AT, b"rmq_sys_wheel_timer-0@3")]
    plog = b.store.partition("t", 0)
    (far,) = [r for r in record_batch.read_records(plog.batch_at(got[1][0])) if r.value == b"far"]
    assert (far.key, far.timestamp) == (b"k", T0 - 5)
    b.run_until(due + 10_000, step_ms=500)
    assert values(b.store, "t") == [b"near", b"far"]
    assert b.scheduler.status()["timers_pending"] == 0


async def test_a_timer_in_the_past_stays_in_its_batch(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"past", deliver_at(T0 - 1000)), rec(b"zero", timer_ms(0)), rec(b"now", deliver_at(T0)),
                            rec(b"neg", timer_sec(-3))))
    got = drain(b.store, "t")
    assert [(o, v) for o, v, _ in got] == [(0, b"past"), (1, b"zero"), (2, b"now"), (3, b"neg")]
    assert hdr(got[0][2], "TIMER_DELIVER_MS") == str(T0 - 1000).encode()  # untouched
    assert b.next_offset(TIMER_TOPIC) == 0


async def test_scheduling_headers_in_a_transactional_batch_are_refused(world):
    """A parked record would outlive its transaction's abort: refused, nothing written; a
    transactional batch without them is stored as usual (the transaction itself is the
    coordinator's business, not checked here)."""
    b = await world.open()
    b.topic("t", 1)
    b.topic("rmq_retry.g", 1)
    for request in (batch(rec(b"i"), rec(b"d", delay(1)), pid=7, epoch=0, seq=0, transactional=True),
                    batch(rec(b"t", timer_ms(500)), pid=7, epoch=0, seq=0, transactional=True)):
        with pytest.raises(InvalidRecordError, match="transactional"):
            b.produce("t", 0, request)
    with pytest.raises(InvalidRecordError, match="transactional"):
        b.produce("rmq_retry.g", 0, batch(rec(b"n"), pid=7, epoch=0, seq=0, transactional=True))
    assert b.next_offset("t") == 0 and b.next_offset("rmq_retry.g") == 0
    assert [b.next_offset(SCHEDULE_TOPIC, p) for p in range(3)] + [b.next_offset(TIMER_TOPIC)] == [0, 0, 0, 0]
    b.produce("t", 0, batch(rec(b"plain"), pid=7, epoch=0, seq=0, transactional=True))
    assert values(b.store, "t") == [b"plain"]


async def test_a_timer_over_the_maximum_refuses_the_whole_request(world):
    config = SemanticsConfig(delay_levels_ms=LEVELS, timer_precision_ms=PRECISION, timer_wheel_slots=SLOTS,
                             timer_max_delay_sec=60)
    b = await world.open(config)
    b.topic("t", 1)
    request = (batch(rec(b"ok", delay(1)), rec(b"i")), batch(rec(b"t", timer_sec(30))), batch(rec(b"bad", timer_sec(61))))
    with pytest.raises(InvalidRecordError, match="timerMaxDelaySec"):
        b.produce("t", 0, *request)
    assert b.next_offset("t") == 0
    assert [b.next_offset(SCHEDULE_TOPIC, p) for p in range(3)] + [b.next_offset(TIMER_TOPIC)] == [0, 0, 0, 0]
    with pytest.raises(InvalidRecordError, match="timerMaxDelaySec"):
        b.produce("t", 0, batch(rec(b"bad", deliver_at(T0 + 60_001))))
    with pytest.raises(InvalidRecordError, match="DELAY"):
        b.produce("t", 0, batch(rec(b"x", delay(1)), rec(b"y", ("DELAY", b"soon"))))
    # what was selected for the refused requests is forgotten: the next one parks its own records
    b.produce("t", 0, batch(rec(b"d", delay(2)), rec(b"e", timer_sec(60))))
    assert [v for _, _, v, _ in parked(b.store, SCHEDULE_TOPIC, 1)] == [b"d"]
    assert [v for _, _, v, _ in parked(b.store, TIMER_TOPIC, 0)] == [b"e"]
    assert b.next_offset(SCHEDULE_TOPIC, 0) == 0
    b.run_until(T0 + 61_000, step_ms=1000)
    assert values(b.store, "t") == [b"d", b"e"]


# == 5. exactly once across crashes ============================================================


def workload(b: Broker, name: str) -> dict[bytes, int | None]:
    """Produce a mix of immediate, delayed and timed records to t-0..2 (a rolling timer
    among them); returns each value produced with its due time (None: immediate)."""
    produced: dict[bytes, int | None] = {}
    for p in range(3):
        now = b.clock.now_ms()
        kinds = [
            ("i", (), None), ("l1", (delay(1),), 1000), ("l2", (delay(2),), 2000), ("l3", (delay(3),), 3000),
            ("l9", (delay(9),), 3000), ("t300", (timer_ms(300),), 300), ("t1700", (timer_ms(1700),), 1700),
            ("t6500", (timer_ms(6500),), 6500), ("at", (deliver_at(now + 999),), 999), ("s2", (timer_sec(2),), 2000),
            ("i2", (), None),
        ]
        recs = []
        for kind, headers, after in kinds:
            value = f"{name}-{p}-{kind}".encode()
            produced[value] = None if after is None else now + after
            recs.append(rec(value, *headers))
        b.produce("t", p, batch(*recs[:6]))
        b.produce("t", p, batch(*recs[6:]))
    return produced


def assert_exactly_once(b: Broker, produced: dict[bytes, int | None]) -> None:
    counts = all_values(b.store, "t")
    assert {v: n for v, n in counts.items() if n != 1} == {}
    assert set(counts) == set(produced)
    for p in range(3):  # each went to its own partition
        assert all(v.split(b"-")[1] == str(p).encode() for v in values(b.store, "t", p))


def assert_never_early(deliveries: list[tuple[int, str, int, bytes | None]], dues: dict) -> None:
    early = {value: (at, dues[value]) for at, _, _, value in deliveries
             if dues.get(value) is not None and at < dues[value]}
    assert early == {}, "delivered (at, due) before due"


@pytest.mark.parametrize("when", ["before_any_checkpoint", "right_after_checkpoint",
                                  "deliveries_after_checkpoint", "copied_while_open"])
async def test_every_parked_record_is_delivered_once_across_a_crash(world, when, tmp_path):
    b = await world.open()
    b.topic("t", 3)
    produced = workload(b, "a")
    b.run_until(T0 + 1500)  # level 1 and the early timers are delivered
    assert 0 < b.scheduler.counters["delivered"] < len(produced)
    if when != "before_any_checkpoint":
        await b.store.checkpoint()
    if when in ("deliveries_after_checkpoint", "copied_while_open"):
        produced.update(workload(b, "b"))
        b.run_until(T0 + 3200)  # more deliveries, a park and a roll after the checkpoint
        assert b.next_offset(TIMER_TOPIC) > 18
    delivered_before = b.scheduler.counters["delivered"]
    if when == "copied_while_open":
        copy = tmp_path / "copy"
        shutil.copytree(world.data_dir, copy)
        await world.crash(b)
        b = await world.open(data_dir=copy)
    else:
        await world.crash(b)
        b = await world.open()
    assert b.scheduler.counters["delivered"] == 0  # nothing delivered again by recovery itself
    counts = all_values(b.store, "t")
    # what the scheduler counts as pending is what is not delivered yet
    waiting = [v for v in produced if v not in counts]
    status = b.scheduler.status()
    assert status["timers_pending"] == len([v for v in waiting if v.split(b"-")[2][:1] in b"tas"])
    assert sum(level["depth"] for level in status["levels"]) == len([v for v in waiting if v.split(b"-")[2][:1] == b"l"])
    assert {v: n for v, n in counts.items() if n != 1} == {}
    assert sum(counts.values()) == 6 * (2 if when in ("deliveries_after_checkpoint", "copied_while_open") else 1) + delivered_before
    produced.update(workload(b, "c"))
    b.run_until(b.clock.now_ms() + 15_000)
    assert_exactly_once(b, produced)
    status = b.scheduler.status()
    assert status["timers_pending"] == 0 and all(level["depth"] == 0 for level in status["levels"])


async def test_exactly_once_across_a_chain_of_crashes_and_clean_restarts(world):
    b = await world.open()
    b.topic("t", 3)
    produced = workload(b, "a")
    b.run_until(T0 + 800)
    await world.crash(b)  # 1: before any checkpoint
    b = await world.open()
    b.run_until(T0 + 1300)
    produced.update(workload(b, "b"))
    await b.store.checkpoint()
    b.run_until(T0 + 2300)
    await world.crash(b)  # 2: deliveries after a checkpoint
    b = await world.open()
    await b.store.checkpoint()
    await world.crash(b)  # 3: right after a checkpoint, nothing new
    b = await world.open()
    b.run_until(T0 + 4000)
    produced.update(workload(b, "c"))
    await world.close(b)  # 4: clean
    b = await world.open()
    b.run_until(T0 + 6000)
    await b.store.checkpoint()
    b.run_until(T0 + 7000)
    await world.crash(b)  # 5
    b = await world.open()
    b.run_until(T0 + 25_000, step_ms=200)
    assert_exactly_once(b, produced)
    assert b.scheduler.status()["timers_pending"] == 0


async def test_crash_replay_needs_no_scheduler_bookkeeping_afterwards(world):
    """Once everything is delivered after a crash, the snapshot holds nothing per record."""
    b = await world.open()
    b.topic("t", 3)
    produced = workload(b, "a")
    await b.store.checkpoint()
    b.run_until(T0 + 7000)
    await world.crash(b)
    b = await world.open()
    b.run_until(T0 + 20_000, step_ms=200)
    assert_exactly_once(b, produced)
    snapshot = b.scheduler.snapshot()
    _, done, _, _, pending_by_hour, skip = snapshot["timers"]
    assert snapshot["level_cancelled"] == [] and pending_by_hour == {}
    assert skip == [] and done == []


# == 5b. due times of records parked after the last checkpoint ================================


@pytest.mark.parametrize("lost", ["nothing", "consume_queues"])
async def test_records_parked_after_the_checkpoint_are_not_delivered_early_after_a_crash(world, lost):
    b = await world.open()
    b.topic("t", 3)
    dues = workload(b, "a")
    await b.store.checkpoint()
    b.clock.advance(500)
    dues.update(workload(b, "b"))  # parked after the checkpoint
    await world.crash(b)
    if lost == "consume_queues":
        shutil.rmtree(world.data_dir / "consumequeue")
    b = await world.open()
    b.run_until(T0 + 8000)
    assert_exactly_once(b, dues)
    assert_never_early(world.deliveries, dues)
    assert all(code > T0 for p in range(3) for _, code, _, _ in parked(b.store, SCHEDULE_TOPIC, p))


async def test_a_timer_parked_after_the_checkpoint_survives_a_lost_timer_index(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"early", timer_ms(300))))
    await b.store.checkpoint()
    b.produce("t", 0, batch(rec(b"late", timer_ms(500))))
    await world.crash(b)
    shutil.rmtree(world.data_dir / "timerwheel")
    b = await world.open()
    b.run_until(T0 + 2000)
    assert values(b.store, "t") == [b"early", b"late"]


# == 6. orphan parks ===========================================================================


ORPHANS = (rec(b"o-i"), rec(b"o-l1", delay(1)), rec(b"o-l3", delay(3)), rec(b"o-t", timer_ms(400)),
           rec(b"o-far", timer_sec(9)))


async def test_parks_of_a_batch_that_was_not_written_are_cancelled(world, monkeypatch):
    b = await world.open()
    b.topic("t", 1)
    b.topic("u", 1)
    fail_writes_to(b, monkeypatch, "t")
    with pytest.raises(OSError):
        b.produce("t", 0, batch(*ORPHANS))
    monkeypatch.undo()
    assert b.next_offset("t") == 0
    # the parked copies were written first, and are cancelled
    assert [b.next_offset(SCHEDULE_TOPIC, p) for p in range(3)] + [b.next_offset(TIMER_TOPIC)] == [1, 0, 1, 2]
    assert b.scheduler.status()["cancelled"] == 4
    assert b.scheduler.status()["timers_pending"] == 0
    b.produce("u", 0, batch(rec(b"u", delay(1))))
    b.run_until(T0 + 12_000)
    assert values(b.store, "t") == [] and values(b.store, "u") == [b"u"]
    assert b.scheduler.counters["delivered"] == 1


@pytest.mark.parametrize("after", ["nothing", "another_partition", "checkpoint", "park_for_another_partition"])
async def test_orphan_parks_found_by_the_replay_are_cancelled(world, monkeypatch, after):
    b = await world.open()
    b.topic("t", 1)
    b.topic("u", 1)
    b.produce("t", 0, batch(rec(b"fine", delay(1))))
    fail_writes_to(b, monkeypatch, "t")
    with pytest.raises(OSError):
        b.produce("t", 0, batch(*ORPHANS))
    monkeypatch.undo()
    if after == "another_partition":
        b.produce("u", 0, batch(rec(b"u0")))
    elif after == "checkpoint":
        await b.store.checkpoint()
    elif after == "park_for_another_partition":
        b.produce("u", 0, batch(rec(b"u1", delay(2))))
    await world.crash(b)
    b = await world.open()
    b.run_until(T0 + 12_000)
    assert values(b.store, "t") == [b"fine"]
    assert [v for _, _, _, v in b.deliveries] == [b"fine"] + ([b"u1"] if after == "park_for_another_partition" else [])
    assert b.scheduler.status()["timers_pending"] == 0


async def test_a_crash_right_after_parking_cancels_the_parks(world, monkeypatch, tmp_path):
    """The data directory of a process killed between a park and its batch: the commitlog
    ends with park entries (copied while the broker was open, before it carried on)."""
    b = await world.open()
    b.topic("t", 1)
    fail_writes_to(b, monkeypatch, "t")
    with pytest.raises(OSError):
        b.produce("t", 0, batch(*ORPHANS))
    monkeypatch.undo()
    copy = tmp_path / "killed"
    shutil.copytree(world.data_dir, copy)
    b2 = await world.open(data_dir=copy)
    b2.run_until(T0 + 12_000)
    assert values(b2.store, "t") == [] and b2.scheduler.counters["delivered"] == 0
    assert b2.scheduler.status()["cancelled"] == 4


@pytest.mark.parametrize("delivered_before_the_crash", [True, False])
async def test_orphan_parks_followed_by_the_producers_retry_are_delivered_once(world, monkeypatch,
                                                                              delivered_before_the_crash):
    b = await world.open()
    b.topic("t", 1)
    request = batch(*ORPHANS, pid=9, epoch=0, seq=0)
    fail_writes_to(b, monkeypatch, "t")
    with pytest.raises(OSError):
        b.produce("t", 0, request)
    monkeypatch.undo()
    r = b.produce("t", 0, request)  # the producer was not answered: it retries
    assert (r.base_offset, r.duplicate) == (0, False)
    if delivered_before_the_crash:
        b.run_until(T0 + 12_000)  # live: each delivered once
        assert all_values(b.store, "t") == Counter({b"o-i": 1, b"o-l1": 1, b"o-l3": 1, b"o-t": 1, b"o-far": 1})
    await world.crash(b)  # before any checkpoint
    b = await world.open()
    b.run_until(T0 + 24_000, step_ms=200)
    assert all_values(b.store, "t") == Counter({b"o-i": 1, b"o-l1": 1, b"o-l3": 1, b"o-t": 1, b"o-far": 1})


async def test_records_without_headers_are_never_parked_nor_classified(world, monkeypatch):
    """Select looks no further into a batch whose records carry no header, even when their
    values name every scheduling and half-message header; one with a header is still looked at."""
    b = await world.open()
    b.topic("t", 1)
    classified = []
    original = b.semantics.scheduler.halves.classify
    monkeypatch.setattr(b.semantics.scheduler.halves, "classify",
                        lambda *args: classified.append(args[1]) or original(*args))
    r = b.produce("t", 0, batch(rec(b"DELAY 2 TIMER_DELIVER_MS TRAN_MSG UNIQ_KEY"), rec(b"x")))
    assert r.base_offset == 0 and values(b.store, "t", 0) == [b"DELAY 2 TIMER_DELIVER_MS TRAN_MSG UNIQ_KEY", b"x"]
    assert classified == []
    b.produce("t", 0, batch(rec(b"later", delay(1)), rec(b"now")))
    assert len(classified) == 1 and values(b.store, "t", 0)[-1] == b"now"


async def test_a_value_holding_the_marker_name_does_not_confuse_the_replay(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"plain", delay(1)), rec(b"mentions PARKED_AT", delay(2)), rec(b"i")))
    await world.crash(b)
    b = await world.open()
    b.run_until(T0 + 3000)
    assert all_values(b.store, "t") == Counter({b"plain": 1, b"mentions PARKED_AT": 1, b"i": 1})


# == 7. retries and dead letters ================================================================


async def test_a_retry_waits_level_three_plus_its_reconsume_times(world):
    b = await world.open(RETRY)
    b.topic("rmq_retry.g", 2)
    b.produce("rmq_retry.g", 1, batch(
        rec(b"r0", ("x", b"1"), key=b"k"), rec(b"r2", (RECONSUME_TIMES, b"2")), rec(b"r15", (RECONSUME_TIMES, b"15")),
        rec(b"rbad", (RECONSUME_TIMES, b"oops")), rec(b"rdelay", delay(1), (RECONSUME_TIMES, b"4")),
    ))
    assert values(b.store, "rmq_retry.g", 1) == [] and b.next_offset("rmq_retry.g", 1) == 5  # every record parked
    where = {v: (p, c, h) for p in range(18) for _, c, v, h in parked(b.store, SCHEDULE_TOPIC, p)}
    assert {v: (p + 1, c - T0) for v, (p, c, _) in where.items()} == {
        b"r0": (3, 300), b"r2": (5, 500), b"r15": (18, 1800), b"rbad": (3, 300), b"rdelay": (1, 100),
    }
    assert hdr(where[b"r0"][2], RECONSUME_TIMES) == b"1"
    assert hdr(where[b"r2"][2], RECONSUME_TIMES) == b"3"
    assert hdr(where[b"r15"][2], RECONSUME_TIMES) == b"16"
    assert hdr(where[b"rbad"][2], RECONSUME_TIMES) == b"1"
    assert where[b"r0"][2] == [("x", b"1"), (RECONSUME_TIMES, b"1"), (REAL_TOPIC, b"rmq_retry.g"), (REAL_QID, b"1"),
                               ("TIMER_OUT_MS", str(T0 + RETRY_LEVELS[2]).encode()), ("PARKED_FROM", b"rmq_retry.g-1@0")]
    b.run_until(T0 + 2000)
    got = {v: h for _, v, h in drain(b.store, "rmq_retry.g", 1)}
    assert set(got) == {b"r0", b"r2", b"r15", b"rbad", b"rdelay"}
    assert hdr(got[b"r15"], RECONSUME_TIMES) == b"16" and hdr(got[b"rdelay"], "DELAY") is None
    when = {v: at for at, _, _, v in b.deliveries}
    assert when[b"r0"] == T0 + 300 and when[b"r2"] == T0 + 500 and when[b"r15"] == T0 + 1800
    assert values(b.store, "rmq_retry.g", 0) == []
    assert b.store.topics.get("rmq_dlq.g") is None


async def test_a_retried_produce_to_a_retry_topic_is_parked_once(world):
    b = await world.open(RETRY)
    b.topic("rmq_retry.g", 1)
    nack = batch(rec(b"n", (RECONSUME_TIMES, b"1")), rec(b"d", (RECONSUME_TIMES, b"16")), pid=4, epoch=0, seq=0)
    assert b.produce("rmq_retry.g", 0, nack).duplicate is False
    r = b.produce("rmq_retry.g", 0, nack)
    assert (r.base_offset, r.duplicate) == (0, True)
    assert sum(b.next_offset(SCHEDULE_TOPIC, p) for p in range(18)) == 1 and b.next_offset(TIMER_TOPIC) == 1
    b.run_until(T0 + 1000)
    assert values(b.store, "rmq_retry.g") == [b"n"] and values(b.store, "rmq_dlq.g") == [b"d"]
    assert b.scheduler.counters["dead_lettered"] == 1


async def test_retry_levels_are_capped_at_the_highest(world):
    b = await world.open()  # 3 levels only
    b.topic("rmq_retry.g", 1)
    b.produce("rmq_retry.g", 0, batch(rec(b"r", (RECONSUME_TIMES, b"5"))))
    assert [v for _, _, v, _ in parked(b.store, SCHEDULE_TOPIC, 2)] == [b"r"]
    b.run_until(T0 + 3000)
    assert values(b.store, "rmq_retry.g") == [b"r"]


async def test_reaching_the_maximum_goes_to_the_dead_letter_topic(world):
    b = await world.open(RETRY)
    b.topic("rmq_retry.g", 2)
    b.produce("rmq_retry.g", 1, batch(rec(b"dead", (RECONSUME_TIMES, b"16"), ("h", b"1"), key=b"k"),
                                      rec(b"alive", (RECONSUME_TIMES, b"15"))))
    dlq = b.store.topics.get("rmq_dlq.g")
    assert dlq is not None and dlq.partitions == 1
    b.run_until(T0 + PRECISION)
    assert drain(b.store, "rmq_dlq.g") == [(0, b"dead", [
        ("h", b"1"), (RECONSUME_TIMES, b"17"), (REAL_TOPIC, b"rmq_dlq.g"), (REAL_QID, b"0"),
        ("TIMER_OUT_MS", str(T0).encode()), (PARKED_AT, b"rmq_sys_wheel_timer-0@0"),
    ])]
    b.run_until(T0 + 2000)
    assert values(b.store, "rmq_retry.g", 1) == [b"alive"]
    assert values(b.store, "rmq_dlq.g") == [b"dead"]
    assert b.scheduler.status()["dead_lettered"] == 1


async def test_a_group_overrides_the_maximum_on_its_retry_topic(world):
    b = await world.open(RETRY)
    b.store.create_topic("rmq_retry.g2", 1, {MAX_RECONSUME_CONFIG: "2"})
    b.topic("rmq_retry.g", 1)
    assert b.scheduler.max_reconsume_times("g2") == 2 and b.scheduler.max_reconsume_times("g") == 16
    b.produce("rmq_retry.g2", 0, batch(rec(b"g2-1", (RECONSUME_TIMES, b"1")), rec(b"g2-2", (RECONSUME_TIMES, b"2"))))
    b.produce("rmq_retry.g", 0, batch(rec(b"g-2", (RECONSUME_TIMES, b"2"))))
    b.run_until(T0 + 1000)
    assert values(b.store, "rmq_retry.g2") == [b"g2-1"]
    assert values(b.store, "rmq_dlq.g2") == [b"g2-2"]
    assert values(b.store, "rmq_retry.g") == [b"g-2"] and b.store.topics.get("rmq_dlq.g") is None


async def test_seventeen_nacks_end_in_the_dead_letter_topic(world):
    b = await world.open(RETRY)
    b.topic("rmq_retry.g", 1)
    record = rec(b"m", ("k", b"v"), key=b"key")
    rounds = 0
    offset = 0
    while b.store.topics.get("rmq_dlq.g") is None or not values(b.store, "rmq_dlq.g"):
        rounds += 1
        assert rounds <= 17
        b.produce("rmq_retry.g", 0, batch(record))  # the consumer nacks what it got
        b.run_until(b.clock.now_ms() + 2000)
        got = drain(b.store, "rmq_retry.g", 0, offset)
        if got:  # redelivered: nacked again with the headers it came back with
            ((offset, value, headers),) = got
            offset += 1
            assert hdr(headers, RECONSUME_TIMES) == str(rounds).encode()
            record = rec(value, *headers, key=b"key")
    assert rounds == 17
    assert len(values(b.store, "rmq_retry.g")) == 16
    ((_, value, headers),) = drain(b.store, "rmq_dlq.g")
    assert value == b"m" and hdr(headers, RECONSUME_TIMES) == b"17" and hdr(headers, "k") == b"v"
    assert b.scheduler.counters["dead_lettered"] == 1


async def test_dead_letters_and_retries_survive_a_crash(world):
    b = await world.open(RETRY)
    b.topic("rmq_retry.g", 1)
    b.produce("rmq_retry.g", 0, batch(rec(b"retry", (RECONSUME_TIMES, b"3")), rec(b"dead", (RECONSUME_TIMES, b"16"))))
    await world.crash(b)
    b = await world.open(RETRY)
    b.run_until(T0 + 2000)
    assert values(b.store, "rmq_retry.g") == [b"retry"]
    assert values(b.store, "rmq_dlq.g") == [b"dead"]


async def test_dead_letters_survive_a_crash_after_a_checkpoint(world):
    b = await world.open(RETRY)
    b.topic("rmq_retry.g", 1)
    b.produce("rmq_retry.g", 0, batch(rec(b"retry", (RECONSUME_TIMES, b"3")), rec(b"dead", (RECONSUME_TIMES, b"16"))))
    await b.store.checkpoint()
    await world.crash(b)
    b = await world.open(RETRY)
    b.run_until(T0 + 2000)
    assert values(b.store, "rmq_retry.g") == [b"retry"]
    assert values(b.store, "rmq_dlq.g") == [b"dead"]


# == 8. status ======================================================================================


async def test_status_reports_levels_timers_and_counters(world):
    b = await world.open()
    b.topic("t", 1)
    assert T0 // HOUR * HOUR + HOUR - T0 == 2_800_000  # T0 is 800 s into its hour
    hour = T0 // HOUR
    b.produce("t", 0, batch(rec(b"a", delay(1)), rec(b"b", delay(1)), rec(b"c", delay(3)),
                            rec(b"t1", timer_ms(500)), rec(b"t2", timer_sec(2800)), rec(b"t3", timer_sec(2801)),
                            rec(b"t4", timer_sec(3 * 3600))))
    status = b.scheduler.status()
    assert status["levels"] == [
        {"level": 1, "delay_ms": 1000, "depth": 2, "next_due_ms": T0 + 1000, "delivered_up_to": 0},
        {"level": 2, "delay_ms": 2000, "depth": 0, "next_due_ms": None, "delivered_up_to": 0},
        {"level": 3, "delay_ms": 3000, "depth": 1, "next_due_ms": T0 + 3000, "delivered_up_to": 0},
    ]
    assert status["timers_pending"] == 4
    assert status["timers_by_hour"] == {hour: 1, hour + 1: 2, hour + 3: 1}  # T0 + 2800 s starts hour + 1
    assert status["timers_done_before_ms"] == T0
    assert (status["delivered"], status["dropped"], status["dead_lettered"], status["cancelled"]) == (0, 0, 0, 0)
    b.run_until(T0 + 1000)
    status = b.scheduler.status()
    assert status["levels"][0] == {"level": 1, "delay_ms": 1000, "depth": 0, "next_due_ms": None, "delivered_up_to": 2}
    assert status["levels"][2]["depth"] == 1
    assert status["timers_pending"] == 3 and status["timers_by_hour"] == {hour + 1: 2, hour + 3: 1}
    assert status["timers_done_before_ms"] == T0 + 1000
    assert status["delivered"] == 3


async def test_records_for_a_deleted_topic_are_dropped_and_counted(world):
    b = await world.open()
    b.topic("t", 1)
    b.topic("gone", 1)
    b.produce("gone", 0, batch(rec(b"x", delay(1)), rec(b"y", timer_ms(200))))
    b.produce("t", 0, batch(rec(b"z", delay(1))))
    b.semantics.delete("gone")
    b.run_until(T0 + 1000)
    status = b.scheduler.status()
    assert (status["delivered"], status["dropped"]) == (1, 2)
    assert values(b.store, "t") == [b"z"] and status["timers_pending"] == 0


# == 9. a lost timer index ========================================================================


async def lose_the_timer_index(world, b: Broker) -> Broker:
    await b.store.checkpoint()
    await world.crash(b)
    shutil.rmtree(world.data_dir / "timerwheel")
    return await world.open()


async def test_a_lost_timer_index_is_rebuilt_from_the_timer_topic(world):
    b = await world.open()
    b.topic("t", 2)
    b.produce("t", 0, batch(*(rec(b"t%d" % i, timer_ms(200 * i)) for i in range(1, 20))))
    b.produce("t", 1, batch(rec(b"l", delay(2)), rec(b"x", deliver_at(T0 + 4321))))
    b.run_until(T0 + 1000)
    assert b.scheduler.counters["delivered"] == 4  # t5 (due T0 + 1000) waits for its slot's end
    b = await lose_the_timer_index(world, b)
    assert (world.data_dir / "timerwheel" / "wheel").exists()
    assert b.scheduler.status()["timers_pending"] == 16
    b.run_until(T0 + 6000)
    assert all_values(b.store, "t") == Counter({v: 1 for v in [*(b"t%d" % i for i in range(1, 20)), b"l", b"x"]})
    assert b.scheduler.status()["timers_pending"] == 0


async def test_a_lost_timer_index_after_deliveries_past_the_checkpoint(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(*(rec(b"t%d" % i, timer_ms(200 * i)) for i in range(1, 20))))
    b.run_until(T0 + 1000)
    await b.store.checkpoint()
    b.run_until(T0 + 2000)  # delivered after the checkpoint: known from their PARKED_AT
    await world.crash(b)
    shutil.rmtree(world.data_dir / "timerwheel")
    b = await world.open()
    b.run_until(T0 + 6000)
    assert all_values(b.store, "t") == Counter({b"t%d" % i: 1 for i in range(1, 20)})
    assert_never_early(world.deliveries, {b"t%d" % i: T0 + 200 * i for i in range(1, 20)})


async def test_a_lost_timer_index_does_not_duplicate_a_rolled_timer(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"far", deliver_at(T0 + 8000)), rec(b"near", timer_ms(300))))
    b.run_until(T0 + 5500)  # far rolled once (re-parked at offset 2)
    assert b.next_offset(TIMER_TOPIC) == 3
    b = await lose_the_timer_index(world, b)
    b.run_until(T0 + 9000)
    assert all_values(b.store, "t") == Counter({b"near": 1, b"far": 1})


async def test_a_lost_timer_index_mid_slot_does_not_redeliver(world, monkeypatch):
    monkeypatch.setattr(scheduler_module, "DELIVERY_BUDGET", 4)  # deliver_due stops mid-slot
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(*(rec(b"s%d" % i, deliver_at(T0 + 250)) for i in range(10))))
    b.clock.advance(300)
    b.deliver()
    assert values(b.store, "t") == [b"s0", b"s1", b"s2", b"s3"]
    b = await lose_the_timer_index(world, b)
    b.run_until(T0 + 1000)
    assert values(b.store, "t") == [b"s%d" % i for i in range(10)]


async def test_a_lost_timer_index_after_a_clean_shutdown(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"x", timer_ms(500)), rec(b"y", timer_ms(1500))))
    await world.close(b)
    shutil.rmtree(world.data_dir / "timerwheel")
    b = await world.open()
    b.run_until(T0 + 2000)
    assert values(b.store, "t") == [b"x", b"y"]


async def test_clean_restart_keeps_pending_work(world):
    b = await world.open()
    b.topic("t", 1)
    b.produce("t", 0, batch(rec(b"l1", delay(1)), rec(b"l3", delay(3)), rec(b"t", timer_ms(1500)),
                            rec(b"far", timer_sec(7))))
    b.run_until(T0 + 1200)
    await world.close(b)
    assert (world.data_dir / "clean_shutdown").exists()
    b = await world.open()
    assert b.store.clean_start and b.store.recovered_entries == 0
    assert b.scheduler.status()["timers_pending"] == 2
    b.run_until(T0 + 8000)
    assert all_values(b.store, "t") == Counter({b"l1": 1, b"l3": 1, b"t": 1, b"far": 1})


async def test_lost_consume_queues_rebuild_the_scheduler_state_exactly_once(world):
    b = await world.open()
    b.topic("t", 3)
    produced = workload(b, "a")
    b.run_until(T0 + 1500)
    await b.store.checkpoint()
    await world.crash(b)
    shutil.rmtree(world.data_dir / "consumequeue")
    b = await world.open()
    b.run_until(T0 + 15_000)
    assert_exactly_once(b, produced)
