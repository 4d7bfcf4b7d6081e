"""The share-partition manager (adapter.share.partitions) over a real store, with an
injected clock: lock expiry, restore after restart, chunked reads, deleted groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqkafka.adapter.share.partitions import SharePartitionManager, _unseen
from rmqkafka.adapter.share.sessions import ShareSessionCache
from rmqkafka.adapter.share.settings import ShareBrokerDefaults, group_settings
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.parked_records import build_batch
from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.rmqsemantics.share.partition import AckBatch
from rmqkafka.rmqsemantics.share.state_store import ShareStateStore
from rmqkafka.storage import record_batch
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

TOPIC = "t"


class World:
    def __init__(self, data_dir: Path, configs: dict[str, dict[str, str]] | None = None) -> None:
        self.data_dir, self.clock = data_dir, ManualClock()
        self.configs = configs if configs is not None else {}
        self.woken: list[tuple[str, int]] = []
        self.open()

    def open(self) -> None:
        self.store = MessageStore(StorageConfig(data_dir=self.data_dir), self.clock)
        self.store.open()
        if self.store.topics.get(TOPIC) is None:
            self.store.create_topic(TOPIC, 1, {})
        self.semantics = Semantics(SemanticsConfig(), self.store, self.data_dir, self.clock)
        state = ShareStateStore(self.store, self.clock)
        state.open()
        defaults = ShareBrokerDefaults()
        self.shares = SharePartitionManager(
            self.semantics, self.clock, state,
            lambda g: group_settings({"share.auto.offset.reset": "earliest", **self.configs.get(g, {})}, defaults),
            ShareSessionCache(10), lambda topic, p: self.woken.append((topic, p)))

    def restart(self) -> None:
        self.store.close_sync()
        self.open()

    @property
    def meta(self):
        return self.store.topics.get(TOPIC)

    def produce(self, values: list[bytes]) -> None:
        self.store.append_built(TOPIC, 0, build_batch([(self.clock.now_ms(), None, v, []) for v in values]))

    def acquire(self, member: str, max_records: int = 500, max_bytes: int = 50 << 20, strict: bool = True):
        """A fetch; ``strict`` by default (ShareAcquireMode record_limit: exact counts), the
        batch-optimized tests (Kafka's default) pass False."""
        return self.shares.acquire("g", member, self.meta, 0, max_records, 500, max_bytes, True, strict=strict)


@pytest.fixture
def world(tmp_path: Path):
    w = World(tmp_path / "data", {"g": {"share.record.lock.duration.ms": "15000"}})
    yield w
    w.store.close_sync()


def offsets(fetched) -> list[int]:
    return [o for r in fetched.acquired for o in range(r.first_offset, r.last_offset + 1)]


def test_expired_locks_come_back_and_wake_the_partitions_fetches(world):
    world.produce([b"a", b"b"])
    assert offsets(world.acquire("m1")) == [0, 1]
    assert offsets(world.acquire("m2")) == []
    world.clock.advance(14_999)
    assert world.shares.expire_due() == world.clock.now_ms() + 1
    assert world.woken == []
    world.clock.advance(1)
    world.shares.expire_due()
    assert world.woken == [(TOPIC, 0)] and world.shares.metrics.lock_expiries == 2
    again = world.acquire("m2")
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again.acquired] == [(0, 1, 2)]
    assert world.shares.metrics.redeliveries == 2


def test_accepted_records_stay_accepted_after_a_restart(world):
    world.produce([b"a", b"b", b"c"])
    assert offsets(world.acquire("m")) == [0, 1, 2]
    world.shares.acknowledge("g", "m", world.meta, 0, [AckBatch(0, 0, (1,)), AckBatch(2, 2, (1,))])
    world.restart()
    assert offsets(world.acquire("n")) == [1], "the unacknowledged record only, acquired before the restart"
    assert world.acquire("n").acquired == []


def test_a_fetch_reads_a_chunk_of_the_log_not_its_max_bytes(world):
    for start in range(0, 3000, 100):
        world.produce([b"%04d" % i + b"x" * 1000 for i in range(start, start + 100)])
    asked: list[int] = []
    read = world.semantics.read
    world.semantics.read = lambda *a, **kw: asked.append(a[3]) or read(*a, **kw)
    fetched = world.acquire("m", max_records=5)
    assert asked == [16 << 10], "16 KiB for 5 records, of the 50 MiB allowed"
    assert offsets(fetched) == [0, 1, 2, 3, 4]
    assert len(fetched.batches) == 1, "only the batch holding the acquired records goes out"
    records = [r.value[:4] for b in fetched.batches for r in record_batch.read_records(b)]
    assert records[:5] == [b"0000", b"0001", b"0002", b"0003", b"0004"]
    asked.clear()
    many = world.acquire("m", max_records=1500)
    assert offsets(many) == list(range(5, 1505)), "more than one chunk when the records ask for it"
    # the first chunk (1500 x 128 B) is partly the cached batch of the first fetch: only the
    # rest is read from the log, with the bytes left
    first_batch = len(fetched.batches[0])
    assert asked[0] == 1500 * 128 - first_batch and all(size <= 1 << 20 for size in asked) and len(asked) > 1


def test_a_deleted_group_forgets_its_share_partitions_durably(world):
    world.produce([b"a"])
    world.acquire("m")
    assert world.shares.partitions_of("g") == [("g", TOPIC, 0)]
    world.shares.group_deleted("g")
    assert world.shares.partitions_of("g") == []
    world.restart()
    assert world.shares.partitions_of("g") == []
    assert offsets(world.acquire("m")) == [0], "started again by share.auto.offset.reset"


def test_unseen_finds_control_batches_and_aborted_transactions():
    def batch(base: int, count: int, pid: int = -1, transactional: bool = False, control: bool = False) -> bytes:
        raw = bytearray(build_batch([(0, None, b"v", [])] * count))
        raw[0:8] = base.to_bytes(8, "big")
        attrs = int.from_bytes(raw[21:23], "big") | (0x10 if transactional else 0) | (0x20 if control else 0)
        raw[21:23] = attrs.to_bytes(2, "big")
        raw[43:51] = pid.to_bytes(8, "big", signed=True)
        return bytes(raw)

    batches = [batch(0, 2), batch(2, 3, pid=7, transactional=True), batch(5, 1, pid=7, transactional=True,
                                                                             control=True),
               batch(6, 2, pid=8, transactional=True), batch(8, 1, pid=8, transactional=True, control=True)]
    control, aborted = _unseen(batches, [(7, 2)])
    assert control == [(5, 5), (8, 8)]
    assert aborted == [(2, 4)], "producer 8 committed: its records are not aborted"


def test_upkeep_compacts_the_state_topic_and_the_state_survives(world):
    import asyncio

    world.produce([b"r%d" % i for i in range(40)])
    for o in range(40):
        assert offsets(world.acquire("m", max_records=1)) == [o]
        world.shares.acknowledge("g", "m", world.meta, 0, [AckBatch(o, o, (1 if o % 2 else 3,))])
    plog = world.store.partition("__share_group_state", 0)
    before = plog.log_start_offset
    compact = world.shares.state.compact
    world.shares.state.compact = lambda: compact(min_records=10)
    asyncio.run(world.shares.upkeep())
    assert plog.log_start_offset > before, "the older records are gone"
    world.produce([b"next"])
    world.restart()
    assert offsets(world.acquire("n")) == [40], "nothing accepted or rejected before comes back"


def test_member_left_releases_its_records_and_closes_its_session(world):
    world.produce([b"a", b"b"])
    world.shares.sessions.fetch_context("g", "m", 0, [], [], False)
    assert offsets(world.acquire("m", max_records=1)) == [0]
    world.shares.member_left("g", "m")
    assert world.shares.sessions.get("g", "m") is None and world.woken == [(TOPIC, 0)]
    again = world.acquire("n")
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in again.acquired] == [(0, 0, 2), (1, 1, 1)]
    world.shares.session_closed("g", "n")  # a normal close: the deliveries never reached the application
    assert [(r.first_offset, r.delivery_count) for r in world.acquire("o").acquired] == [(0, 2), (1, 1)]


def test_group_emptiness_comes_from_the_coordinator_once_it_is_given(world):
    world.shares.sessions.fetch_context("g", "m", 0, [], [], False)
    assert not world.shares.group_is_empty("g") and world.shares.group_is_empty("other")
    world.shares.use_membership(lambda group_id: group_id == "g")
    assert world.shares.group_is_empty("g") and not world.shares.group_is_empty("other")


def test_batches_larger_than_a_chunk_still_fill_the_fetch(world):
    for start in range(0, 300, 100):
        world.produce([b"%04d" % i + b"y" * 5000 for i in range(start, start + 100)])  # ~500 KB batches
    fetched = world.acquire("m", max_records=250)
    assert offsets(fetched) == list(range(250)) and len(fetched.batches) == 3


def test_acknowledgements_wake_fetches_when_they_free_room_or_release(tmp_path: Path):
    w = World(tmp_path / "data", {"g": {"share.partition.max.record.locks": "100"}})
    try:
        w.produce([b"r%d" % i for i in range(300)])
        assert offsets(w.acquire("m", max_records=50)) == list(range(50))
        w.shares.acknowledge("g", "m", w.meta, 0, [AckBatch(0, 9, (1,))])
        assert w.woken == [], "the window had room: nobody waits for this"
        assert len(offsets(w.acquire("m", max_records=500))) == 60  # the window (100) is full now
        asked: list[int] = []
        read = w.semantics.read
        w.semantics.read = lambda *a, **kw: asked.append(a[2]) or read(*a, **kw)
        assert w.acquire("n").acquired == [] and asked == [], "a full window: no read of the log"
        w.shares.acknowledge("g", "m", w.meta, 0, [AckBatch(10, 19, (1,))])
        assert w.woken == [(TOPIC, 0)], "room in a full window wakes the waiting fetches"
        w.shares.acknowledge("g", "m", w.meta, 0, [AckBatch(20, 20, (2,))])
        assert w.woken == [(TOPIC, 0)] * 2, "a release does too"
    finally:
        w.store.close_sync()


# -- the read cache: members of one partition read a big batch once ---------------------------------
def test_members_fetching_one_batch_read_it_once_and_get_the_same_bytes(world):
    world.produce([b"x%d" % i for i in range(2000)])  # one batch, four fetches of 500
    got = [world.acquire(f"m{i}") for i in range(4)]
    assert [offsets(g)[0] for g in got] == [0, 500, 1000, 1500] and all(g.count == 500 for g in got)
    assert all(g.batches == got[0].batches for g in got)
    assert world.shares.read_cache.misses == 1 and world.shares.read_cache.hits == 3


def test_a_cached_batch_larger_than_the_read_is_a_hit_with_more_log_behind_it(world):
    # librdkafka's producer writes batches of thousands of 100 B records, larger than a share
    # fetch's first read: that read would stop after the batch, so the batch cached is all
    # of it, whatever follows in the log
    world.produce([b"y" * 100] * 2000)
    world.produce([b"z" * 100] * 2000)
    got = [world.acquire(f"m{i}") for i in range(4)]
    assert [offsets(g)[0] for g in got] == [0, 500, 1000, 1500]
    assert world.shares.read_cache.misses == 1 and world.shares.read_cache.hits == 3


def test_members_reading_overlapping_chunks_read_each_batch_of_the_log_once(world):
    # batches smaller than a read: each member's read starts inside the last one's and goes
    # past it; only the batches past the cached run are read from the log
    for start in range(0, 2000, 100):  # 100 records of 54 B: a 64 KiB read holds ~10 batches
        world.produce([b"%04d" % i + b"x" * 50 for i in range(start, start + 100)])
    read_from_log: list[int] = []
    read = world.semantics.read
    world.semantics.read = lambda *a, **kw: read_from_log.append(a[2]) or read(*a, **kw)
    got = [world.acquire(f"m{i}") for i in range(4)]
    assert [offsets(g)[0] for g in got] == list(range(0, 2000, 500))
    assert read_from_log == sorted(set(read_from_log)), "no batch read twice"
    assert world.shares.read_cache.hits == 3 and world.shares.read_cache.size <= world.shares.read_cache.max_bytes // 4
    for g in got:  # the same batches a read of the log gives
        first = offsets(g)[0]
        assert [record_batch.base_offset_of(b) for b in g.batches] == list(range(first, first + 500, 100))


def test_a_redelivery_behind_the_cached_run_does_not_replace_it(world):
    for start in range(0, 2000, 100):
        world.produce([b"%04d" % i + b"x" * 50 for i in range(start, start + 100)])
    assert offsets(world.acquire("m0"))[0] == 0
    assert offsets(world.acquire("m1"))[0] == 500  # the run now starts at 500
    world.shares.acknowledge("g", "m0", world.meta, 0, [AckBatch(0, 0, (2,)), AckBatch(1, 499, (1,))])
    assert offsets(world.acquire("m2", max_records=1)) == [0], "the released record, read again"
    read_from_log: list[int] = []
    read = world.semantics.read
    world.semantics.read = lambda *a, **kw: read_from_log.append(a[2]) or read(*a, **kw)
    assert offsets(world.acquire("m3"))[0] == 1000
    assert 1000 not in read_from_log, "the forward run still holds what m1's read read"


def test_the_read_cache_reads_on_past_its_run_and_never_serves_another_log(world):
    world.produce([b"a"] * 10)
    assert offsets(world.acquire("m1", max_records=10)) == list(range(10))
    world.produce([b"b"] * 10)  # past the cached run: read from the log, not cut short
    fetched = world.acquire("m2", max_records=100)
    assert offsets(fetched) == list(range(10, 20))
    assert world.shares.read_cache.hits == 0
    world.store.delete_topic(TOPIC)
    world.store.create_topic(TOPIC, 1, {})  # same name, another log: offsets start again
    world.produce([b"c"] * 3)
    plog = world.semantics.source_partition(world.meta, 0)
    assert world.shares.read_cache.get((world.meta.topic_id, 0), plog, 0, 1 << 20, True, None) is None


def test_the_read_cache_stays_within_its_bytes(world):
    from rmqkafka.adapter.share.read_cache import ShareReadCache

    cache = ShareReadCache(4000)
    plog = world.semantics.source_partition(world.meta, 0)
    world.produce([b"y" * 100] * 5)
    batch = world.semantics.read(world.meta, 0, 0, 1 << 20, True).batches
    for p in range(10):
        cache.put(("id", p), plog, list(batch))
        assert cache.size <= 4000
    assert cache.get(("id", 9), plog, 0, 1 << 20, True, None) == list(batch)
    assert cache.get(("id", 0), plog, 0, 1 << 20, True, None) is None  # dropped, least recently used
    cache.put(("id", 11), plog, list(batch) * 0)
    assert cache.get(("id", 11), plog, 0, 1 << 20, True, None) is None


# -- batch-optimized acquisition (ShareAcquireMode 0, Kafka's default): MaxRecords is soft ----------
def ranges(fetched) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in fetched.acquired]


def test_max_records_is_a_soft_limit_new_records_run_to_their_batch_end(world):
    for start in range(0, 300, 100):
        world.produce([b"%04d" % i for i in range(start, start + 100)])
    first = world.acquire("m1", max_records=5, strict=False)
    assert ranges(first) == [(0, 99, 1)], "the whole batch holding the 5th record (Kafka's soft limit)"
    assert len(first.batches) == 1
    # 150 records asked from offset 100: the 150th (249) is in the third batch, so to its end;
    # BatchSize 100 cuts the ranges where a batch starts, never inside one
    second = world.shares.acquire("g", "m2", world.meta, 0, 150, 100, 50 << 20, True)
    assert ranges(second) == [(100, 199, 1), (200, 299, 1)] and len(second.batches) == 2
    assert world.acquire("m3", strict=False).acquired == []
    strict = World.acquire  # record_limit (v2's ShareAcquireMode 1) counts exactly
    world.produce([b"x"] * 100)
    assert offsets(strict(world, "m3", max_records=5)) == [300, 301, 302, 303, 304]


def test_a_batch_acquired_whole_is_accepted_whole_after_the_restart(world):
    world.produce([b"r%d" % i for i in range(1000)])
    assert ranges(world.acquire("m", max_records=500, strict=False)) == [(0, 999, 1)]
    world.shares.acknowledge("g", "m", world.meta, 0, [AckBatch(0, 999, (1,))])
    sp = world.shares.get(("g", TOPIC, 0))
    assert sp.start_offset == 1000 and sp.in_flight_count() == 0
    world.restart()
    world.produce([b"next"])
    assert offsets(world.acquire("n", strict=False)) == [1000]


def test_the_window_runs_past_its_bound_only_to_a_batch_end_and_by_a_bounded_count(tmp_path: Path):
    from rmqkafka.rmqsemantics.share.partition import MAX_BATCH_OVERSHOOT

    w = World(tmp_path / "data", {"g": {"share.partition.max.record.locks": "100"}})
    try:
        w.produce([b"a%d" % i for i in range(1000)])
        assert ranges(w.acquire("m1", max_records=500, strict=False)) == [(0, 999, 1)], \
            "the window (100) holds the whole batch begun, as Kafka's does"
        assert w.acquire("m2", strict=False).acquired == [], "a full window acquires nothing new"
        w.shares.acknowledge("g", "m1", w.meta, 0, [AckBatch(0, 999, (1,))])
        # a producer's batch larger than the overshoot: the window stops at its bound plus it
        big = 100 + MAX_BATCH_OVERSHOOT + 5_000
        w.produce([b""] * big)
        got = w.acquire("m2", max_records=500, strict=False)
        assert ranges(got) == [(1000, 1000 + 100 + MAX_BATCH_OVERSHOOT - 1, 1)] and len(got.batches) == 1
        assert w.shares.get(("g", TOPIC, 0)).in_flight_count() == 100 + MAX_BATCH_OVERSHOOT
    finally:
        w.store.close_sync()
