"""RocketMQ transaction messages (rmqsemantics.half_messages) on a real MessageStore driven
by a ManualClock (semantics_world.py): half messages, ends, op records, back-checks,
delayed commits, and all of it across clean restarts and crashes."""

from __future__ import annotations

from pathlib import Path

import pytest
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.half_records import (
    CHECK_IMMUNITY,
    CHECK_TIMES,
    HALF_TOPIC,
    OP_TOPIC,
    PGROUP,
    TRAN_END,
    TRAN_END_BY,
    TRAN_HALF,
    TRAN_MSG,
    UNIQ_KEY,
    check_topic,
)
from rmqkafka.rmqsemantics.parked_records import PARKED_AT, REAL_QID, REAL_TOPIC
from rmqkafka.rmqsemantics.scheduler import SCHEDULE_TOPIC
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.errors import InvalidRecordError
from semantics_world import (
    LEVELS,
    PRECISION,
    SLOTS,
    T0,
    World,
    batch,
    delay,
    drain,
    fail_writes_to,
    hdr,
    rec,
    timer_ms,
    values,
)

TIMEOUT = 6_000
INTERVAL = 1_000
CONFIG = SemanticsConfig(delay_levels_ms=LEVELS, timer_precision_ms=PRECISION, timer_wheel_slots=SLOTS,
                         transaction_timeout_ms=TIMEOUT, transaction_check_interval_ms=INTERVAL,
                         transaction_check_max=3)


@pytest.fixture
async def world(tmp_path: Path):
    w = World(tmp_path / "data", ManualClock(T0))
    yield w
    await w.crash_all()


async def opened(world: World):
    b = await world.open(CONFIG)
    b.topic("orders", 2)
    return b


def half(value: bytes, key: str, group: str = "g", *extra: tuple[str, bytes], record_key: bytes | None = None):
    return rec(value, (TRAN_MSG, b"true"), (PGROUP, group.encode()), (UNIQ_KEY, key.encode()), *extra,
               key=record_key)


def end(key: str, decision: bytes = b"COMMIT", group: str = "g"):
    return rec(b"", (TRAN_END, decision), (PGROUP, group.encode()), (UNIQ_KEY, key.encode()))


def ops(b) -> list[tuple[bytes | None, bytes | None, bytes | None]]:
    """(UNIQ_KEY, TRAN_END, TRAN_END_BY) of every op record."""
    return [(hdr(h, UNIQ_KEY), hdr(h, TRAN_END), hdr(h, TRAN_END_BY)) for _, _, h in drain(b.store, OP_TOPIC)]


def halves(b) -> dict:
    return b.scheduler.halves.status()


# -- halves and ends -------------------------------------------------------------------------


async def test_a_half_message_is_invisible_until_committed(world):
    b = await opened(world)
    r = b.produce("orders", 1, batch(rec(b"plain"), half(b"order-1", "A", "g", ("x", b"1"), record_key=b"k1")))
    assert r.base_offset == 0
    assert values(b.store, "orders", 1) == [b"plain"]  # offset 1 is a gap
    assert b.next_offset("orders", 1) == 2
    [(offset, value, headers)] = drain(b.store, HALF_TOPIC)
    assert (offset, value) == (0, b"order-1")
    assert (hdr(headers, REAL_TOPIC), hdr(headers, REAL_QID), hdr(headers, "x")) == (b"orders", b"1", b"1")
    assert halves(b)["pending"] == 1

    b.produce("orders", 0, batch(end("A")))
    [(offset, value, headers)] = drain(b.store, "orders", 1)[1:]
    assert (offset, value) == (2, b"order-1")
    assert hdr(headers, TRAN_MSG) is None and hdr(headers, "x") == b"1" and hdr(headers, UNIQ_KEY) == b"A"
    assert hdr(headers, PARKED_AT) == f"{HALF_TOPIC}-0@0".encode()
    [(_, _, got_key)] = [(o, v, k) for o, v, k in [(r.offset, r.value, r.key) for r in _records(b, "orders", 1)]
                         if o == 2]
    assert got_key == b"k1"
    assert ops(b) == [(b"A", b"COMMIT", b"PRODUCER")]
    assert values(b.store, "orders", 0) == []  # the end record keeps only a gap
    assert halves(b)["pending"] == 0 and halves(b)["committed"] == 1


def _records(b, topic: str, partition: int):
    from rmqkafka.storage import record_batch

    plog = b.store.partition(topic, partition)
    for raw in plog.read(0, 1 << 30, True).batches:
        if not raw[22] & record_batch.CONTROL_BIT:
            yield from record_batch.read_records(raw)


async def test_the_committed_message_keeps_its_timestamp(world):
    b = await opened(world)
    b.produce("orders", 0, batch(rec(b"v", (TRAN_MSG, b"true"), (PGROUP, b"g"), (UNIQ_KEY, b"A"), ts=T0 - 5000)))
    world.clock.advance(3000)
    b.produce("orders", 0, batch(end("A")))
    [record] = list(_records(b, "orders", 0))
    assert record.timestamp == T0 - 5000


async def test_a_commit_soon_after_its_half_reads_nothing_back_and_writes_what_a_read_would_give(world, monkeypatch):
    """The half records are kept as built (ParkedReader.remember): the commit neither reads
    nor parses the half batch, and the committed records are those the half records read
    back from the commitlog give."""
    from rmqkafka.rmqsemantics.half_records import committed_headers
    from rmqkafka.storage import record_batch

    b = await opened(world)
    b.produce("orders", 1, batch(*[half(b"v%d" % i, f"K{i}", "g", ("x", b"%d" % i), record_key=b"k%d" % i)
                                   for i in range(3)]))
    plog = b.store.partition(HALF_TOPIC, 0)
    stored = [r for raw in plog.read(0, 1 << 30, True).batches for r in record_batch.read_records(raw)]
    reads = []
    real_read_at = type(plog).read_at
    monkeypatch.setattr(type(plog), "read_at", lambda self, *args: reads.append(self) or real_read_at(self, *args))
    b.produce("orders", 0, batch(end("K0"), end("K2")))
    assert plog not in reads
    monkeypatch.undo()
    expected = [(r.timestamp, r.key, r.value, committed_headers(r, r.offset)) for r in (stored[0], stored[2])]
    assert [(r.timestamp, r.key, r.value, list(r.headers)) for r in _records(b, "orders", 1)] == expected


async def test_half_batches_kept_as_built_stay_within_their_budget(world):
    from rmqkafka.rmqsemantics.parked_reader import BUILT_BYTES

    b = await opened(world)
    value = b"v" * 10_000
    for n in range(30):  # 30 batches of 10 half messages, 100 KB each: 3 MB in all
        b.produce("orders", 0, batch(*[half(value, f"K{n}-{i}") for i in range(10)]))
    reader = b.scheduler.halves._parked
    assert 0 < reader._built_size <= BUILT_BYTES and len(reader._built) < 30


async def test_rollback_writes_only_an_op_record(world):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A"), half(b"w", "B")))
    b.produce("orders", 0, batch(end("A", b"ROLLBACK"), end("B", b"COMMIT_MESSAGE")))
    assert values(b.store, "orders", 0) == [b"w"]
    assert ops(b) == [(b"A", b"ROLLBACK", b"PRODUCER"), (b"B", b"COMMIT", b"PRODUCER")]
    status = halves(b)
    assert (status["pending"], status["committed"], status["rolled_back"]) == (0, 1, 1)


@pytest.mark.parametrize("second", [b"COMMIT", b"ROLLBACK"])
async def test_an_end_of_an_ended_or_unknown_half_message_changes_nothing(world, second):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A")))
    b.produce("orders", 0, batch(end("A")))
    before = (b.next_offset("orders", 0), b.next_offset(OP_TOPIC))
    with pytest.raises(InvalidRecordError, match="UNIQ_KEY A of group g was already committed"):
        b.produce("orders", 0, batch(rec(b"also"), end("A", second)))
    with pytest.raises(InvalidRecordError, match="is not pending"):
        b.produce("orders", 0, batch(end("nobody")))
    with pytest.raises(InvalidRecordError, match="is not pending"):
        b.produce("orders", 0, batch(end("A", group="other")))
    assert (b.next_offset("orders", 0), b.next_offset(OP_TOPIC)) == before
    assert values(b.store, "orders", 0) == [b"v"]


@pytest.mark.parametrize(("records", "message"), [
    ((rec(b"x", (TRAN_MSG, b"true"), (UNIQ_KEY, b"A")),), "needs the headers PGROUP and UNIQ_KEY"),
    ((rec(b"x", (TRAN_MSG, b"true"), (PGROUP, b"g")),), "needs the headers PGROUP and UNIQ_KEY"),
    ((rec(b"x", (TRAN_END, b"MAYBE"), (PGROUP, b"g"), (UNIQ_KEY, b"A")),), "COMMIT or ROLLBACK expected"),
    ((rec(b"x", (TRAN_MSG, b"true"), (TRAN_END, b"COMMIT"), (PGROUP, b"g"), (UNIQ_KEY, b"A")),), "not both"),
    ((half(b"x", "A"), half(b"y", "A")), "appears twice in the request"),
    ((half(b"x", "B", "g", ("DELAY", b"soon")),), "DELAY='soon' is not a whole number"),
    ((half(b"x", "B", "bad group/x"),), "a producer group is letters, digits"),
    ((half(b"x", "B", "g" * 234),), "at most 233"),
    ((end("B", group="a:b"),), "a producer group is letters, digits"),
])
async def test_bad_transaction_headers_refuse_the_request(world, records, message):
    b = await opened(world)
    with pytest.raises(InvalidRecordError, match=message):
        b.produce("orders", 0, batch(rec(b"ok"), *records))
    assert b.next_offset("orders", 0) == 0 and b.next_offset(HALF_TOPIC) == 0


async def test_a_pending_key_and_a_foreign_topic_are_refused(world):
    b = await opened(world)
    b.topic("other", 1)
    b.produce("orders", 0, batch(half(b"v", "A")))
    with pytest.raises(InvalidRecordError, match="already pending"):
        b.produce("orders", 1, batch(half(b"w", "A")))
    with pytest.raises(InvalidRecordError, match="its end record must be produced there"):
        b.produce("other", 0, batch(end("A")))
    b.produce("orders", 1, batch(half(b"w", "A", "h")))  # the same key in another group is another message
    assert halves(b)["pending"] == 2


async def test_a_request_with_a_half_and_its_end_in_one_batch_is_refused(world):
    b = await opened(world)
    with pytest.raises(InvalidRecordError, match="appears twice"):
        b.produce("orders", 0, batch(half(b"v", "A"), end("A")))


async def test_transactional_batches_may_not_carry_half_messages(world):
    b = await opened(world)
    with pytest.raises(InvalidRecordError, match="not accepted in Kafka transactions"):
        b.produce("orders", 0, batch(half(b"v", "A"), pid=1, epoch=0, seq=0, transactional=True))


async def test_a_committed_message_with_a_delay_waits_from_the_commit(world):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"late", "A", "g", delay(2)), half(b"timer", "B", "g", timer_ms(1500))))
    world.clock.advance(5000)  # longer than either delay: nothing is delivered before the commit
    b.run_until(T0 + 5000)
    assert values(b.store, "orders", 0) == []
    b.produce("orders", 0, batch(end("A"), end("B")))
    assert [v for _, v, _ in drain(b.store, SCHEDULE_TOPIC, 1)] == [b"late"]
    b.run_until(T0 + 6400)
    assert values(b.store, "orders", 0) == []
    b.run_until(T0 + 6600)
    assert values(b.store, "orders", 0) == [b"timer"]
    b.run_until(T0 + 7100)
    assert values(b.store, "orders", 0) == [b"timer", b"late"]
    [(_, _, headers)] = drain(b.store, "orders", 0)[1:]
    assert hdr(headers, "DELAY") is None and hdr(headers, PARKED_AT) == f"{SCHEDULE_TOPIC}-1@0".encode()


# -- back-checks -----------------------------------------------------------------------------


async def test_checks_start_after_the_timeout_once_per_pass_then_roll_back(world):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A", "g", record_key=b"k")))
    service = b.scheduler.halves
    assert service.check_pass(T0 + TIMEOUT - 1) == 0
    assert service.check_pass(T0 + TIMEOUT) == 1
    assert service.check_pass(T0 + TIMEOUT + INTERVAL) == 1
    checks = [(v, h) for p in range(4) for _, v, h in drain(b.store, check_topic("g"), p)]
    assert [v for v, _ in checks] == [b"v", b"v"]
    assert [hdr(h, CHECK_TIMES) for _, h in checks] == [b"1", b"2"]
    assert all(hdr(h, TRAN_HALF) == f"{HALF_TOPIC}-0@0".encode() and hdr(h, UNIQ_KEY) == b"A" for _, h in checks)
    assert all(hdr(h, TRAN_MSG) is None and hdr(h, PGROUP) == b"g" for _, h in checks)
    assert halves(b)["oldest"][0]["checks"] == 2
    assert service.check_pass(T0 + TIMEOUT + 2 * INTERVAL) == 1  # the third and last
    assert service.check_pass(T0 + TIMEOUT + 3 * INTERVAL) == 0  # out of checks: rolled back
    assert ops(b) == [(b"A", b"ROLLBACK", b"CHECK_MAX")]
    status = halves(b)
    assert (status["pending"], status["rolled_back_unchecked"], status["checks_sent"]) == (0, 1, 3)
    assert values(b.store, "orders", 0) == []


async def test_a_check_is_answered_by_an_end(world):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A")))
    assert b.scheduler.halves.check_pass(T0 + TIMEOUT) == 1
    b.produce("orders", 1, batch(end("A")))
    assert values(b.store, "orders", 0) == [b"v"]
    assert b.scheduler.halves.check_pass(T0 + TIMEOUT + INTERVAL) == 0


async def test_check_immunity_delays_the_first_check(world):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A", "g", (CHECK_IMMUNITY, b"60")), half(b"w", "B")))
    assert b.scheduler.halves.check_pass(T0 + TIMEOUT) == 1
    assert b.scheduler.halves.check_pass(T0 + 59_999) == 1  # B again; A is immune
    assert b.scheduler.halves.check_pass(T0 + 60_000) == 2  # B's third and last, A's first
    assert b.scheduler.halves.check_pass(T0 + 61_000) == 1  # B out of checks, A again
    assert [k for k, _, _ in ops(b)] == [b"B"]


async def test_checks_go_to_one_partition_per_key_of_the_groups_topic(world):
    b = await opened(world)
    keys = [f"K{i}" for i in range(40)]
    b.produce("orders", 0, batch(*(half(b"v" + k.encode(), k, "shop") for k in keys)))
    assert b.scheduler.halves.check_pass(T0 + TIMEOUT) == 40
    assert b.scheduler.halves.check_pass(T0 + TIMEOUT + INTERVAL) == 40
    by_key: dict[bytes, set[int]] = {}
    for p in range(4):
        for _, _, h in drain(b.store, check_topic("shop"), p):
            by_key.setdefault(hdr(h, UNIQ_KEY), set()).add(p)
    assert len(by_key) == 40 and all(len(ps) == 1 for ps in by_key.values())
    assert len({p for ps in by_key.values() for p in ps}) > 1


# -- restarts and crashes ----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["clean", "crash", "checkpoint_then_crash"])
async def test_pending_halves_and_check_counts_survive_a_restart(world, how):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A"), half(b"w", "B")))
    b.produce("orders", 1, batch(half(b"x", "C")))
    b.produce("orders", 0, batch(end("B", b"ROLLBACK")))
    b.scheduler.halves.check_pass(T0 + TIMEOUT)
    if how == "clean":
        await world.close(b)
    else:
        if how == "checkpoint_then_crash":
            await b.store.checkpoint()
            b.produce("orders", 1, batch(end("C")))
        await world.crash(b)
    b = await world.open(CONFIG)
    pending = {e["uniq_key"]: e["checks"] for e in halves(b)["oldest"]}
    assert pending == ({"A": 1} if how == "checkpoint_then_crash" else {"A": 1, "C": 1})
    with pytest.raises(InvalidRecordError):
        b.produce("orders", 0, batch(end("B")))
    b.produce("orders", 0, batch(end("A")))
    assert values(b.store, "orders", 0) == [b"v"]
    assert values(b.store, "orders", 1) == ([b"x"] if how == "checkpoint_then_crash" else [])


async def test_a_commit_is_never_repeated_when_its_op_record_is_lost(world):
    """The op record cannot be written after the committed message: the half message is
    ended all the same, and a crash replay finds it committed by the message's PARKED_AT."""
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A")))
    await b.store.checkpoint()
    real_append = b.store.append_built

    def no_op_records(name, partition, built, *args, **kwargs):
        if name == OP_TOPIC:
            raise OSError(28, "No space left on device")
        return real_append(name, partition, built, *args, **kwargs)

    b.store.append_built = no_op_records
    b.produce("orders", 0, batch(end("A")))
    assert halves(b)["pending"] == 0 and b.next_offset(OP_TOPIC) == 0
    with pytest.raises(InvalidRecordError):
        b.produce("orders", 0, batch(end("A")))
    await world.crash(b)
    b = await world.open(CONFIG)
    assert halves(b)["pending"] == 0
    assert values(b.store, "orders", 0) == [b"v"]
    with pytest.raises(InvalidRecordError):
        b.produce("orders", 0, batch(end("A")))
    assert b.scheduler.halves.check_pass(T0 + TIMEOUT) == 0


async def test_an_end_whose_batch_was_not_written_never_happened(world, monkeypatch):
    b = await opened(world)
    b.topic("ends", 1)
    b.produce("orders", 0, batch(half(b"v", "A")))
    fail_writes_to(b, monkeypatch, "orders")
    with pytest.raises(OSError):
        b.produce("orders", 1, batch(end("A")))
    monkeypatch.undo()
    assert halves(b)["pending"] == 1 and b.next_offset(OP_TOPIC) == 0
    b.produce("orders", 1, batch(end("A")))  # the producer's retry
    assert values(b.store, "orders", 0) == [b"v"]


async def test_an_end_in_the_partition_it_commits_to(world):
    """The end record's gap is written first, the committed message after it."""
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A")))
    b.produce("orders", 0, batch(rec(b"x"), end("A"), rec(b"y")))
    assert [(o, v) for o, v, _ in drain(b.store, "orders", 0)] == [(1, b"x"), (3, b"y"), (4, b"v")]
    assert b.next_offset("orders", 0) == 5


async def test_a_half_whose_batch_was_not_written_is_cancelled(world, monkeypatch):
    b = await opened(world)
    fail_writes_to(b, monkeypatch, "orders")
    with pytest.raises(OSError):
        b.produce("orders", 0, batch(half(b"v", "A")))
    monkeypatch.undo()
    assert b.next_offset(HALF_TOPIC) == 1  # the half message was parked first
    assert halves(b)["pending"] == 0 and halves(b)["cancelled"] == 1
    b.produce("orders", 0, batch(half(b"v", "A")))  # the producer's retry
    b.produce("orders", 0, batch(end("A")))
    assert values(b.store, "orders", 0) == [b"v"]


async def test_a_crash_between_the_half_and_its_batch_cancels_it(world, monkeypatch, tmp_path):
    import shutil

    b = await opened(world)
    fail_writes_to(b, monkeypatch, "orders")
    with pytest.raises(OSError):
        b.produce("orders", 0, batch(half(b"v", "A")))
    monkeypatch.undo()
    copy = tmp_path / "killed"
    shutil.copytree(world.data_dir, copy)
    b2 = await world.open(CONFIG, data_dir=copy)
    assert halves(b2)["pending"] == 0 and halves(b2)["cancelled"] == 1
    assert b2.scheduler.halves.check_pass(T0 + TIMEOUT) == 0


async def test_a_half_and_a_delay_in_one_batch_are_both_parked_across_a_crash(world):
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"h", "A"), rec(b"d", delay(1)), rec(b"now")))
    await world.crash(b)
    b = await world.open(CONFIG)
    assert halves(b)["pending"] == 1 and halves(b)["cancelled"] == 0
    b.run_until(T0 + 1200)
    assert values(b.store, "orders", 0) == [b"now", b"d"]
    b.produce("orders", 0, batch(end("A")))
    assert values(b.store, "orders", 0) == [b"now", b"d", b"h"]


async def test_a_forged_parked_at_in_another_topic_does_not_end_a_half(world):
    b = await opened(world)
    b.topic("other", 1)
    b.produce("orders", 0, batch(half(b"v", "A")))
    b.produce("other", 0, batch(rec(b"forged", (PARKED_AT, f"{HALF_TOPIC}-0@0".encode()))))
    await world.crash(b)
    b = await world.open(CONFIG)
    assert halves(b)["pending"] == 1


async def test_a_check_pass_in_steps_skips_what_ended_in_between(world):
    b = await opened(world)
    b.produce("orders", 0, batch(*(half(b"v%d" % i, f"K{i}") for i in range(10))))
    steps = b.scheduler.halves.check_steps(T0 + TIMEOUT, budget=4)
    assert next(steps) == 4
    b.produce("orders", 0, batch(end("K5"), end("K9", b"ROLLBACK")))  # while the service yields
    assert list(steps) == [3, 1]
    assert {e["uniq_key"]: e["checks"] for e in halves(b)["oldest"]} == {f"K{i}": 1 for i in (0, 1, 2, 3, 4, 6, 7, 8)}


async def test_the_ends_of_one_request_are_carried_out_in_a_few_appends(world):
    """One batch of committed messages per partition and one batch of op records, in the
    order of the end records (each end record on its own made commits 25x slower than plain
    produce)."""
    b = await opened(world)
    b.produce("orders", 0, batch(*(half(b"a%d" % i, f"A{i}") for i in range(5))))
    b.produce("orders", 1, batch(*(half(b"b%d" % i, f"B{i}") for i in range(5))))
    ends = [end(f"A{i}") for i in (3, 1, 0)] + [end("B2", b"ROLLBACK")] + [end(f"B{i}") for i in (4, 0)]
    b.produce("orders", 0, batch(*ends))

    def batches(topic: str, partition: int) -> int:
        plog = b.store.partition(topic, partition)
        return len({plog.consume_queue.entry(o)[0] for o in range(plog.log_start_offset, plog.next_offset)})

    assert values(b.store, "orders", 0) == [b"a3", b"a1", b"a0"]
    assert values(b.store, "orders", 1) == [b"b4", b"b0"]
    assert batches(OP_TOPIC, 0) == 1 and b.next_offset(OP_TOPIC) == 6
    assert batches("orders", 1) == 2  # the gaps of the halves, the committed messages
    assert [k for k, _, _ in ops(b)] == [b"A3", b"A1", b"A0", b"B2", b"B4", b"B0"]
    status = halves(b)
    assert (status["pending"], status["committed"], status["rolled_back"]) == (4, 5, 1)


async def test_settings_changed_at_run_time_apply_from_then_on(world):
    """Dynamic broker configs (issue 21): transactionTimeOut for half messages stored after the
    change, transactionCheckMax and maxReconsumeTimes at once."""
    from dataclasses import replace

    b = await opened(world)
    b.produce("orders", 0, batch(half(b"before", "A")))
    b.semantics.reconfigure(replace(CONFIG, transaction_timeout_ms=60_000, transaction_check_max=7,
                                    max_reconsume_times=2))
    b.produce("orders", 0, batch(half(b"after", "B")))
    first_checks = {h["uniq_key"]: h["first_check_ms"] - h["stored_ms"] for h in halves(b)["oldest"]}
    assert first_checks == {"A": TIMEOUT, "B": 60_000}
    assert halves(b)["transaction_check_max"] == 7
    assert b.scheduler.max_reconsume_times("any-group") == 2


async def test_a_check_immunity_past_int64_neither_breaks_the_table_nor_a_restart(world):
    """CHECK_IMMUNITY_TIME_IN_SECONDS is the producer's: one whose time is past int64 (the
    packed table's column) must not fail the produce after its half was written, nor the
    replay after a crash. Such a message is never due for a check."""
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A", "g", (CHECK_IMMUNITY, b"9" * 30)), half(b"w", "B")))
    b.produce("orders", 0, batch(half(b"x", "C", "g", (CHECK_IMMUNITY, b"9" * 30))))
    assert halves(b)["pending"] == 3
    await world.crash(b)
    b = await world.open(CONFIG)
    assert sorted(e["uniq_key"] for e in halves(b)["oldest"]) == ["A", "B", "C"]
    assert b.scheduler.halves.check_pass(T0 + 10 * TIMEOUT) == 1  # B only
    b.produce("orders", 0, batch(end("A"), end("C", b"ROLLBACK")))
    assert values(b.store, "orders", 0) == [b"v"]


def _rewrite_halves_state(data_dir: Path, rewrite) -> None:
    import json

    from rmqkafka.storage.checkpoint_file import read_checkpoint

    path = data_dir / "checkpoint.json"
    checkpoint = read_checkpoint(path)
    state = checkpoint["state"]["scheduler"]
    state["halves"] = rewrite(state["halves"])
    path.write_text(json.dumps(checkpoint))


async def test_a_checkpoint_written_by_the_previous_format_keeps_its_pending_halves(world):
    """A broker of the previous format checkpointed its pending half messages as rows
    ({"pending": [[offset, group, key, topic, partition, stored, first check, checks]]}).
    After a clean shutdown nothing is replayed: the rows are all there is, and this broker
    reads them (pending, check counts, ends)."""
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A"), half(b"w", "B")))
    b.produce("orders", 1, batch(half(b"x", "C", "g2")))
    b.scheduler.halves.check_pass(T0 + TIMEOUT)
    b.produce("orders", 0, batch(end("B", b"ROLLBACK")))
    rows = [[o, e.group, e.key, e.topic, e.partition, e.stored_ms, e.first_check_ms, e.checks]
            for o, e in b.scheduler.halves.pending.items()]
    await world.close(b)
    _rewrite_halves_state(world.data_dir, lambda state: {"pending": rows})
    b = await world.open(CONFIG)
    assert b.store.clean_start  # the checkpoint's state, not a replay
    assert {e["uniq_key"]: e["checks"] for e in halves(b)["oldest"]} == {"A": 1, "C": 1}
    b.produce("orders", 0, batch(end("A")))
    b.produce("orders", 1, batch(end("C", group="g2")))
    assert values(b.store, "orders", 0) == [b"v"] and values(b.store, "orders", 1) == [b"x"]
    with pytest.raises(InvalidRecordError):
        b.produce("orders", 0, batch(end("B")))


@pytest.mark.parametrize("damage", ["short column", "bad base64", "missing column", "group index", "not a dict",
                                    "offsets out of order"])
async def test_a_damaged_pending_table_in_the_checkpoint_is_rebuilt_from_the_commitlog(world, damage):
    """A checkpoint whose pending table does not read (the JSON parses, the table does not
    hold together) must not stop the broker, nor make it forget a pending half message: the
    store rebuilds every derived state from the commitlog start, as for a lost index."""
    import base64

    def damaged(state: dict) -> dict:
        table = state["table"]
        if damage == "short column":
            table["stored"] = base64.b64encode(base64.b64decode(table["stored"])[:-8]).decode()
        elif damage == "bad base64":
            table["offsets"] = table["offsets"][:-3] + "!!!"
        elif damage == "missing column":
            del table["checks"]
        elif damage == "group index":
            table["group"] = base64.b64encode(b"\x07\x00\x00\x00" * 2).decode()
        elif damage == "not a dict":
            state["table"] = [1, 2, 3]
        else:
            table["offsets"] = base64.b64encode((5).to_bytes(8, "little") + (1).to_bytes(8, "little")).decode()
        return state

    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A"), half(b"w", "B")))
    b.scheduler.halves.check_pass(T0 + TIMEOUT)
    b.produce("orders", 1, batch(rec(b"plain")))
    await world.close(b)
    _rewrite_halves_state(world.data_dir, damaged)
    b = await world.open(CONFIG)
    assert {e["uniq_key"]: e["checks"] for e in halves(b)["oldest"]} == {"A": 1, "B": 1}
    assert values(b.store, "orders", 1) == [b"plain"]
    b.produce("orders", 0, batch(end("A"), end("B")))
    assert values(b.store, "orders", 0) == [b"v", b"w"]


def _previous_format_restore(state: dict) -> list:
    """How a broker of the previous format read this state (its HalfMessages.restore)."""
    table = {}
    for offset, group, key, topic, partition, stored, first_check, checks in state.get("pending", []):
        table[int(offset)] = (group, key, topic, int(partition), int(stored), int(first_check), int(checks))
    return list(table)


async def test_a_broker_of_the_previous_format_refuses_a_checkpoint_with_pending_halves(world):
    """The previous format read only "pending": given the new snapshot it would start with no
    pending half message (never checked, never ended) and then checkpoint that. While any is
    pending the snapshot's "pending" is a string it cannot read, so it fails to start instead;
    with none pending it reads an empty list and loses nothing. This broker reads both."""
    b = await opened(world)
    assert _previous_format_restore(b.scheduler.halves.snapshot()) == []
    b.produce("orders", 0, batch(half(b"v", "A")))
    state = b.scheduler.halves.snapshot()
    with pytest.raises(ValueError):
        _previous_format_restore(state)
    await world.close(b)
    b = await world.open(CONFIG)
    assert b.store.clean_start and halves(b)["pending"] == 1
    b.produce("orders", 0, batch(end("A")))
    assert _previous_format_restore(b.scheduler.halves.snapshot()) == []
    assert values(b.store, "orders", 0) == [b"v"]


async def test_a_replayed_check_count_reaches_the_next_snapshot(world):
    """The snapshot is cached by version: a check count a replayed check request raises must
    change the version, or a checkpoint after it would keep the count from before."""
    from rmqkafka.rmqsemantics.half_records import check_batch
    from rmqkafka.rmqsemantics.pending_halves import PendingHalves

    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A")))
    table = b.scheduler.halves
    assert table.snapshot()["table"]  # cached now
    [record] = list(_records(b, HALF_TOPIC, 0))
    table.replay(check_topic("g"), 0, check_batch([(record, record.offset, 2)]))
    assert table.pending.get(record.offset).checks == 2
    again = PendingHalves()
    again.restore(table.snapshot()["table"], None)
    assert again.get(record.offset).checks == 2


@pytest.mark.parametrize("left", ["the previous checkpoint and a torn temporary file", "a checkpoint cut short"])
async def test_a_checkpoint_write_cut_short_keeps_every_pending_half(world, left):
    """A crash in the middle of writing a checkpoint leaves the previous one (the new one goes
    to a temporary name first) or, on a file system that lost the rename's order, a file cut
    short: neither forgets a pending half message or its check count."""
    b = await opened(world)
    b.produce("orders", 0, batch(half(b"v", "A"), half(b"w", "B")))
    await b.store.checkpoint()
    b.scheduler.halves.check_pass(T0 + TIMEOUT)
    b.produce("orders", 1, batch(half(b"x", "C")))
    await world.crash(b)
    path = world.data_dir / "checkpoint.json"
    text = path.read_text()
    if left == "a checkpoint cut short":
        path.write_text(text[: len(text) // 2])
    else:
        (world.data_dir / "checkpoint.json.tmp").write_text(text[: len(text) // 3])
    b = await world.open(CONFIG)
    assert {e["uniq_key"]: e["checks"] for e in halves(b)["oldest"]} == {"A": 1, "B": 1, "C": 0}
    b.produce("orders", 0, batch(end("A"), end("B", b"ROLLBACK")))
    b.produce("orders", 1, batch(end("C")))
    assert values(b.store, "orders", 0) == [b"v"] and values(b.store, "orders", 1) == [b"x"]
