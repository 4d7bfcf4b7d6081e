"""Per-topic retention on the shared commitlog (storage.retention): log starts by each
topic's retention.ms / retention.bytes, segments deleted once nothing live is in them, live
batches moved forward out of mostly dead segments, and crashes at every step of a move."""

from __future__ import annotations

import asyncio
import errno
import os

import pytest

from batches import make_batch, values_of
from rmqkafka.storage.errors import OffsetOutOfRangeError
from storage_helpers import append, read_all

HOUR = 3_600_000
SECOND = 1000


def fill(store, clock, rounds: int = 40, long_value: bytes = b"L" * 20, short_value: bytes = b"S" * 60):
    """A 1-hour topic and a 1-second topic sharing the commitlog, batches interleaved;
    returns the values of the long topic by offset."""
    store.create_topic("long", 1, {"retention.ms": str(HOUR)})
    store.create_topic("short", 1, {"retention.ms": str(SECOND)})
    kept = []
    for i in range(rounds):
        now = clock.now_ms()
        r = append(store, "long", 0, make_batch([long_value + b"%03d" % i], timestamps=[now]))
        kept.append((r.base_offset, long_value + b"%03d" % i))
        append(store, "short", 0, make_batch([short_value + b"%03d" % i] * 2, timestamps=[now, now]))
    return kept


def long_values(store):
    return values_of(read_all(store, "long", 0))


def test_the_short_topic_goes_and_the_long_one_keeps_everything(stores, clock):
    store = stores.open(segment_bytes=1000, retention_ms=None)
    kept = fill(store, clock)
    before = store.commitlog.size_bytes()
    segments = len(store.commitlog.segments)
    assert segments >= 8
    clock.advance(2 * SECOND)
    store.apply_retention()
    short = store.partition("short", 0)
    assert short.log_start_offset == short.next_offset == 80
    with pytest.raises(OffsetOutOfRangeError):
        short.read(79, 1 << 20, True)
    assert long_values(store) == kept
    assert store.partition("long", 0).log_start_offset == 0
    # space came back: the long topic's batches were moved, the old segments deleted
    stats = store.retention.stats
    assert stats.segments_deleted >= segments - 2
    assert stats.bytes_moved > 0
    assert store.commitlog.size_bytes() < before
    assert stats.bytes_moved <= stats.bytes_reclaimed  # at most 1 moved per byte reclaimed (ratio 0.5)
    # the long topic's records survive a reopen, and later its own hour
    stores.close(store)
    store = stores.open()
    assert long_values(store) == kept
    clock.advance(HOUR)
    store.apply_retention()
    assert store.partition("long", 0).log_start_offset == 40
    assert read_all(store, "long", 0) == []
    assert append(store, "long", 0, make_batch(1, timestamps=[clock.now_ms()])).base_offset == 40


def test_moves_stop_when_old_segments_are_mostly_live(stores, clock):
    store = stores.open(segment_bytes=1000, retention_ms=None)
    fill(store, clock, long_value=b"L" * 200, short_value=b"S" * 10)
    clock.advance(2 * SECOND)
    store.apply_retention()
    # the long topic holds most of every segment: moving it would write more than it frees
    assert store.retention.stats.bytes_moved == 0
    assert store.partition("short", 0).log_start_offset == 80


def test_a_topic_without_its_own_retention_follows_the_segment_rule(stores, clock):
    store = stores.open(segment_bytes=1000, retention_ms=HOUR)
    store.create_topic("default", 1, {})
    store.create_topic("forever", 1, {"retention.ms": "-1"})
    for i in range(30):
        append(store, "default", 0, make_batch([b"d" * 50], timestamps=[0]))  # stamped long ago
        append(store, "forever", 0, make_batch([b"f%03d" % i], timestamps=[0]))
    default = store.partition("default", 0)
    assert store.apply_retention() == 0  # segments are young: old timestamps do not matter
    assert default.log_start_offset == 0
    clock.advance(2 * HOUR)  # every closed segment is now older than the broker's hour
    old = (clock.now_ms() - HOUR - 1) / 1000
    closed = store.commitlog.segments[:-1]
    for segment in closed:
        os.utime(segment.path, (old, old))
    store.apply_retention()
    assert default.log_start_offset > 0
    assert values_of(read_all(store, "forever", 0)) == [(i, b"f%03d" % i) for i in range(30)]
    # "forever" was moved out of them, not pinning them
    assert store.commitlog.start_position >= closed[-1].end_position
    assert store.retention.stats.bytes_moved > 0


def test_retention_bytes_keeps_the_fewest_batches_that_reach_it(stores, clock):
    store = stores.open(segment_bytes=1 << 20, retention_ms=None)
    store.create_topic("t", 1, {"retention.bytes": "500"})
    sizes = []
    for i in range(20):
        batch = make_batch([b"x" * 40], timestamps=[clock.now_ms()])
        sizes.append(len(batch))
        append(store, "t", 0, batch)
    store.apply_retention()
    plog = store.partition("t", 0)
    kept = sum(sizes[plog.log_start_offset:])
    assert kept >= 500 and kept - sizes[plog.log_start_offset] < 500
    start = plog.log_start_offset
    for _ in range(3):  # counted incrementally: more appends move it on exactly as much
        append(store, "t", 0, make_batch([b"x" * 40], timestamps=[clock.now_ms()]))
    store.apply_retention()
    assert plog.log_start_offset == start + 3


def test_a_dynamic_change_takes_effect_at_the_next_run(stores, clock):
    store = stores.open(segment_bytes=1 << 20, retention_ms=None)
    store.create_topic("t", 1, {})
    for i in range(10):
        append(store, "t", 0, make_batch(1, timestamps=[clock.now_ms() - (10 - i) * 60_000]))
    store.apply_retention()
    plog = store.partition("t", 0)
    assert plog.log_start_offset == 0
    store.topics.set_configs("t", {"retention.ms": str(5 * 60_000 + 1)})
    store.apply_retention()
    assert plog.log_start_offset == 5  # stamped 10..6 minutes ago went; 5 minutes ago stays
    store.topics.set_configs("t", {"retention.ms": "-1"})
    store.apply_retention()
    assert plog.log_start_offset == 5  # never moves back


@pytest.mark.parametrize("how", ["clean", "crash"])
def test_advanced_log_starts_survive_a_reopen(stores, clock, how):
    store = stores.open(segment_bytes=1 << 20, retention_ms=None)
    store.create_topic("t", 1, {"retention.ms": "1000"})
    for _ in range(5):
        append(store, "t", 0, make_batch(2, timestamps=[clock.now_ms()] * 2))
    clock.advance(2000)
    append(store, "t", 0, make_batch(1, timestamps=[clock.now_ms()]))
    store.apply_retention()
    assert store.partition("t", 0).log_start_offset == 10
    (stores.close if how == "clean" else stores.crash)(store)
    store = stores.open()
    assert store.partition("t", 0).log_start_offset == 10
    assert [o for o, _ in values_of(read_all(store, "t", 0))] == [10]


def _steps_until(store, stop: str):
    """Run a retention run up to (not including) step ``stop`` ("flush", "checkpoint"), or
    through the re-pointing that follows the flush ("repointed")."""
    steps = store._retention_steps()
    for step in steps:
        if step == stop:
            return steps
        if step == "flush":
            store.commitlog.flush()
            if stop == "repointed":
                next(steps, None)  # runs repoint(), stops at the checkpoint step
                return steps
    return steps


@pytest.mark.parametrize("stop", ["flush", "repointed", "checkpoint"])
def test_kill_in_the_middle_of_a_move_loses_and_duplicates_nothing(stores, clock, stop):
    store = stores.open(segment_bytes=1000, retention_ms=None)
    kept = fill(store, clock)
    short_end = store.partition("short", 0).next_offset
    clock.advance(2 * SECOND)
    _steps_until(store, stop)
    assert len(store.retention.copies) > 0 or stop != "flush"
    stores.crash(store)
    store = stores.open()
    assert long_values(store) == kept
    assert store.partition("long", 0).next_offset == len(kept)
    assert store.partition("short", 0).next_offset == short_end
    # the next run finishes the job; everything still there, no offset twice
    store.apply_retention()
    assert long_values(store) == kept
    assert store.partition("short", 0).log_start_offset == short_end
    size = store.commitlog.size_bytes()
    store.apply_retention()
    assert store.commitlog.size_bytes() <= size
    assert append(store, "long", 0, make_batch(1, timestamps=[clock.now_ms()])).base_offset == len(kept)
    stores.crash(store)
    store = stores.open()
    assert long_values(store)[: len(kept)] == kept


def test_kill_during_the_deletion_of_segments(stores, clock):
    store = stores.open(segment_bytes=1000, retention_ms=None)
    kept = fill(store, clock)
    clock.advance(2 * SECOND)
    steps = _steps_until(store, "checkpoint")
    store._checkpoint_now()
    plan_segments = list(store.commitlog.segments)
    store.commitlog.delete_oldest_segment()  # the first of the deletions, then the kill
    stores.crash(store)
    store = stores.open()
    assert store.commitlog.start_position == plan_segments[1].base_position
    assert long_values(store) == kept
    store.apply_retention()
    assert long_values(store) == kept
    del steps


def test_a_full_disk_during_a_move_changes_nothing(stores, clock, monkeypatch):
    store = stores.open(segment_bytes=1000, retention_ms=None)
    kept = fill(store, clock)
    clock.advance(2 * SECOND)
    end = store.commitlog.end_position
    real_append = store.commitlog.append
    calls = []

    def append_until_full(*args):
        calls.append(1)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(*args)

    monkeypatch.setattr(store.commitlog, "append", append_until_full)
    store.apply_retention()  # no exception: logged, retried at the next run
    assert store.failure is None
    assert store.retention.stats.bytes_moved == 0
    assert store.commitlog.end_position - end < 1000  # three copies at most, named by nothing
    assert long_values(store) == kept
    monkeypatch.setattr(store.commitlog, "append", real_append)
    # a producer's append after the failed move is kept
    appended = append(store, "long", 0, make_batch([b"after"], timestamps=[clock.now_ms()]))
    kept.append((appended.base_offset, b"after"))
    store.apply_retention()
    assert store.retention.stats.bytes_moved > 0
    assert long_values(store) == kept
    stores.crash(store)
    store = stores.open()
    assert long_values(store) == kept


def test_commitlog_start_offset_is_what_pins(stores, clock):
    store = stores.open(segment_bytes=1000, retention_ms=None)
    store.create_topic("kept", 1, {"retention.ms": "-1"})
    for i in range(30):
        append(store, "kept", 0, make_batch([b"k" * 50], timestamps=[clock.now_ms()]))
    plog = store.partition("kept", 0)
    assert plog.commitlog_start_offset == 0
    assert store.apply_retention() == 0  # all live: nothing to move or delete
    plog.raise_commitlog_start(plog.next_offset)  # held elsewhere from now on
    assert plog.commitlog_start_offset == 30 and plog.log_start_offset == 0
    segments = len(store.commitlog.segments)
    assert segments > 2
    assert store.apply_retention() == segments - 1
    assert len(store.commitlog.segments) == 1
    assert store.retention.stats.bytes_moved == 0


async def test_a_move_that_fails_between_appends_keeps_the_appends(stores, clock, monkeypatch):
    """A run on the event loop moves in slices; producers append between them. A copy that
    then fails must not take back what came after the copies written before it."""
    from rmqkafka.storage import retention as retention_module

    store = stores.open(segment_bytes=1000, retention_ms=None, retention_check_interval_ms=3_600_000)
    await store.start()
    kept = fill(store, clock)
    store.create_topic("other", 1, {})
    clock.advance(2 * SECOND)
    monkeypatch.setattr(retention_module, "_MOVE_SLICE_BYTES", 1)  # a turn of the loop after each copy
    long_id = store.topics.get("long").topic_id
    real_append = store.commitlog.append
    copies = []

    def append_failing_the_fourth_copy(topic_id, partition, parts):
        if topic_id == long_id:
            copies.append(1)
            if len(copies) == 4:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(topic_id, partition, parts)

    monkeypatch.setattr(store.commitlog, "append", append_failing_the_fourth_copy)
    others = []

    async def produce() -> None:
        for i in range(20):
            result = await store.append_async("other", 0, make_batch([b"o%02d" % i]), max_batch_bytes=1 << 20)
            others.append((result.base_offset, b"o%02d" % i))
            await asyncio.sleep(0)

    await asyncio.gather(store.run_retention(), produce())
    assert len(copies) >= 4 and store.retention.stats.bytes_moved == 0
    assert values_of(read_all(store, "other", 0)) == others
    assert long_values(store) == kept
    monkeypatch.setattr(store.commitlog, "append", real_append)
    await store.run_retention()
    assert store.retention.stats.bytes_moved > 0
    assert values_of(read_all(store, "other", 0)) == others
    assert long_values(store) == kept
    await stores.aclose(store)
    store = stores.open()
    assert values_of(read_all(store, "other", 0)) == others
    assert long_values(store) == kept


def test_retention_bytes_counted_a_window_at_a_time(stores, clock, monkeypatch):
    """With the count spread over runs (a few offsets a run), no run drops a batch Kafka's
    rule keeps, and the runs end where one unbounded run would."""
    from rmqkafka.storage import retention as retention_module

    monkeypatch.setattr(retention_module, "_WALK_PER_RUN", 7)
    store = stores.open(segment_bytes=1 << 20, retention_ms=None)
    store.create_topic("t", 1, {"retention.bytes": "700"})
    sizes = []
    for i in range(40):
        batch = make_batch([b"y" * (20 + i % 5 * 10)] * (1 + i % 3), timestamps=[clock.now_ms()] * (1 + i % 3))
        sizes.append((append(store, "t", 0, batch).base_offset, len(batch)))
    plog = store.partition("t", 0)

    def kept_bytes() -> int:
        return sum(size for base, size in sizes if base >= plog.log_start_offset)

    starts = set()
    for _ in range(30):
        store.apply_retention()
        starts.add(plog.log_start_offset)
        assert kept_bytes() >= 700
        assert plog.log_start_offset in {base for base, _ in sizes}
    assert kept_bytes() - next(size for base, size in sizes if base == plog.log_start_offset) < 700
    assert len(starts) > 2  # it got there in steps


def test_a_compact_only_topic_loses_nothing_to_retention_and_pins_nothing(stores, clock):
    store = stores.open(segment_bytes=1000, retention_ms=1)
    store.create_topic("compacted", 1, {"cleanup.policy": "compact", "retention.ms": "1"})
    store.create_topic("both", 1, {"cleanup.policy": "compact, delete", "retention.ms": "1"})
    store.create_topic("short", 1, {"retention.ms": "1"})
    for i in range(30):
        append(store, "compacted", 0, make_batch([b"c%03d" % i], keys=[b"k"], timestamps=[0]))
        append(store, "both", 0, make_batch([b"b%03d" % i], keys=[b"k"], timestamps=[0]))
        append(store, "short", 0, make_batch([b"s" * 100], timestamps=[0]))
    store.apply_retention()
    assert store.partition("compacted", 0).log_start_offset == 0
    assert values_of(read_all(store, "compacted", 0)) == [(i, b"c%03d" % i) for i in range(30)]
    assert store.partition("both", 0).log_start_offset == 30
    assert store.partition("short", 0).log_start_offset == 30
    assert store.retention.stats.bytes_moved > 0 and store.retention.stats.segments_deleted > 0


def test_a_full_index_rebuild_finds_the_moved_batches(stores, clock):
    """Every index rebuilt from the commitlog start (as after lost index files) meets the
    moved copies after later batches of their partition: they are indexed all the same."""
    store = stores.open(segment_bytes=1000, retention_ms=None)
    kept = fill(store, clock)
    clock.advance(2 * SECOND)
    store.apply_retention()
    assert store.retention.stats.bytes_moved > 0 and store.retention.stats.segments_deleted > 0
    for i in range(5):  # later batches, after the copies
        r = append(store, "long", 0, make_batch([b"later%d" % i], timestamps=[clock.now_ms()]))
        kept.append((r.base_offset, b"later%d" % i))
    short_end = store.partition("short", 0).next_offset
    stores.close(store)
    (stores.data_dir / "rebuild_indexes").touch()
    store = stores.open()
    assert long_values(store) == kept
    assert store.partition("short", 0).next_offset == short_end
    assert append(store, "long", 0, make_batch(1, timestamps=[clock.now_ms()])).base_offset == len(kept)
    stores.crash(store)
    store = stores.open()
    assert long_values(store)[: len(kept)] == kept


@pytest.mark.parametrize("rule", ["broker segments", "retention.bytes"])
def test_moving_log_starts_takes_turns_of_the_event_loop(stores, clock, monkeypatch, rule):
    """Finding where each partition's log now starts walks its consume-queue entries (up to
    a million per partition and run): the walk gives the loop a turn every _SCAN_SLICE
    offsets (it held the loop 0.85 s for 4 partitions of 500,000 expired offsets), and a
    partition deleted or cut by DeleteRecords during a turn is left for the next run."""
    from rmqkafka.storage import retention as retention_module

    monkeypatch.setattr(retention_module, "_SCAN_SLICE", 1000)
    # (retention.ms finds its log start in the time index: no walk)
    configs = {"broker segments": {}, "retention.bytes": {"retention.bytes": "1"}}[rule]
    store = stores.open(segment_bytes=4096, retention_ms=None, retention_bytes=1)
    store.create_topic("t", 3, configs)
    for p in range(3):
        for _ in range(25):
            append(store, "t", p, make_batch([b""] * 200, timestamps=[clock.now_ms()] * 200))
    clock.advance(60 * SECOND)
    steps = store._retention_steps()
    assert next(steps) == "slice"  # before any partition's walk got far
    store.partition("t", 1).advance_log_start(2600)  # DeleteRecords during the turn
    slices = 1
    try:
        while True:
            step = next(steps)
            if step == "slice":
                slices += 1
            elif step == "flush":
                store.commitlog.flush()
            elif step == "checkpoint":
                store._checkpoint_now()
    except StopIteration:
        pass
    assert slices >= 6
    for p in range(3):
        plog = store.partition("t", p)
        assert plog.log_start_offset >= (2600 if p == 1 else 4000)  # the last segment's batches may stay
    store.apply_retention()  # the next run finishes what a turn interrupted
    assert all(store.partition("t", p).log_start_offset >= 4600 for p in range(3))


def test_a_topic_deleted_during_a_turn_of_the_walk_is_passed_over(stores, clock, monkeypatch):
    from rmqkafka.storage import retention as retention_module

    monkeypatch.setattr(retention_module, "_SCAN_SLICE", 1000)
    store = stores.open(segment_bytes=4096, retention_ms=None, retention_bytes=1)
    store.create_topic("t", 1, {})
    store.create_topic("u", 1, {})
    for topic in ("t", "u"):
        for _ in range(25):
            append(store, topic, 0, make_batch([b""] * 200))
    steps = store._retention_steps()
    assert next(steps) == "slice"
    store.delete_topic("t")
    for step in steps:
        if step == "flush":
            store.commitlog.flush()
        elif step == "checkpoint":
            store._checkpoint_now()
    assert store.partition("u", 0).log_start_offset >= 4600



def test_a_switch_to_its_own_retention_applies_at_the_next_run(stores, clock):
    """A topic that switches from the broker's retention to its own stops pinning old
    segments at the next retention run, not at the next segment roll: no append and no
    new segment between the switch and the run."""
    store = stores.open(segment_bytes=1000, retention_ms=None)
    # "mixed" pins every segment while it follows the broker's (unlimited) segment rule:
    # its batches are never moved, they die with their segment
    store.create_topic("mixed", 1, {})
    store.create_topic("short", 1, {"retention.ms": str(SECOND)})
    kept = []
    for i in range(30):
        r = append(store, "mixed", 0, make_batch([b"m%03d" % i], timestamps=[clock.now_ms()]))
        kept.append((r.base_offset, b"m%03d" % i))
        append(store, "short", 0, make_batch([b"S" * 80], timestamps=[clock.now_ms()]))
    clock.advance(2 * SECOND)
    segments = list(store.commitlog.segments)
    assert len(segments) >= 4
    assert store.apply_retention() == 0  # pinned by "mixed"
    assert store.apply_retention() == 0
    store.topics.set_configs("mixed", {"retention.ms": "-1"})
    assert store.apply_retention() > 0  # moved out, and the old segments went
    assert store.commitlog.start_position >= segments[-2].end_position
    assert values_of(read_all(store, "mixed", 0)) == kept
    assert store.partition("short", 0).log_start_offset == 30


def test_a_switch_to_the_brokers_retention_applies_at_the_next_run(stores, clock):
    """The other way: a topic of its own unlimited retention, mostly live in old segments
    (not worth moving), switched to the broker's hour loses the expired segments' batches
    at the next run."""
    store = stores.open(segment_bytes=1000, retention_ms=HOUR)
    store.create_topic("mixed", 1, {"retention.ms": "-1"})
    for i in range(30):
        append(store, "mixed", 0, make_batch([b"m" * 200], timestamps=[clock.now_ms()]))
    old = (clock.now_ms() - 2 * HOUR) / 1000
    closed = store.commitlog.segments[:-1]
    assert len(closed) >= 4
    for segment in closed:
        os.utime(segment.path, (old, old))
    assert store.apply_retention() == 0  # its own: unlimited, everything live
    assert store.apply_retention() == 0
    store.topics.set_configs("mixed", {})
    assert store.apply_retention() == len(closed)
    plog = store.partition("mixed", 0)
    assert plog.log_start_offset > 0
    assert read_all(store, "mixed", 0)
