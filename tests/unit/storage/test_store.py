from __future__ import annotations

import asyncio

import pytest

import rmqkafka.storage.store as store_module
from batches import (
    CODEC_NAMES,
    CODECS,
    GZIP,
    flip,
    idempotent,
    make_batch,
    records,
    values_of,
    with_field,
)
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.errors import (
    CorruptRecordError,
    InvalidPartitionCountError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from rmqkafka.storage.checkpoint_file import read_checkpoint
from rmqkafka.storage.tag_code import java_string_hash
from storage_helpers import append, file_ids, read_all


def values(n: int, prefix: str) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


# -- topics ------------------------------------------------------------------------------------
def test_create_delete_add_partitions(stores):
    store = stores.open()
    meta = store.create_topic("t", 2, {"cleanup.policy": "delete"})
    assert set(store.partitions()) == set()  # built on first use (issue 12)
    assert store.partition("t", 1).next_offset == 0
    assert set(store.partitions()) == {("t", 1)}
    with pytest.raises(TopicExistsError):
        store.create_topic("t", 1, {})
    store.add_partitions("t", 4)
    assert store.partition("t", 3).next_offset == 0
    with pytest.raises(UnknownTopicError):
        store.add_partitions("nope", 2)
    with pytest.raises(UnknownPartitionError):
        store.partition("t", 4)
    with pytest.raises(UnknownTopicError):
        store.partition("nope", 0)
    append(store, "t", 3, make_batch(2))
    cq_dir = store.partition("t", 3).directory
    assert cq_dir.exists()
    store.delete_topic("t")
    assert not cq_dir.exists()
    assert not (stores.data_dir / "consumequeue" / str(meta.topic_id)).exists()
    with pytest.raises(UnknownTopicError):
        store.partition("t", 0)
    with pytest.raises(UnknownTopicError):
        append(store, "t", 0, make_batch(1))
    stores.close(store)
    store = stores.open()
    assert store.topics.get("t") is None and store.partitions() == {}


def test_append_and_read(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    b = [
        make_batch(values(3, "a")),
        make_batch(values(2, "b"), codec=GZIP),
        make_batch(values(4, "c")),
    ]
    results = [append(store, "t", 0, x) for x in b]
    assert [r.base_offset for r in results] == [0, 3, 5]
    assert all(not r.duplicate and r.log_append_time_ms is None for r in results)
    assert results[-1].end_position == store.commitlog.end_position
    plog = store.partition("t", 0)
    assert plog.next_offset == 9
    got = plog.read(0, 1 << 20, False)
    assert (got.log_start_offset, got.high_watermark) == (0, 9)
    assert got.size == sum(len(x) for x in b) == sum(len(x) for x in got.batches)
    assert [rb.base_offset_of(x) for x in got.batches] == [0, 3, 5]
    for stored, sent in zip(got.batches, b):
        assert stored[8:12] == sent[8:12] and stored[16:] == sent[16:]  # byte for byte
    expected = values(3, "a") + values(2, "b") + values(4, "c")
    assert values_of(got.batches) == list(enumerate(expected))


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(3))
    append(store, "t", 0, make_batch(4))
    plog = store.partition("t", 0)
    for offset in (3, 4, 6):
        got = plog.read(offset, 1 << 20, False)
        assert [rb.base_offset_of(x) for x in got.batches] == [3]
    got = plog.read(1, 1 << 20, False)
    assert [rb.base_offset_of(x) for x in got.batches] == [0, 3]


def test_read_bounds(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(3))
    plog = store.partition("t", 0)
    assert plog.read(3, 1 << 20, True).batches == []  # at the end: empty, not an error
    for bad in (4, 100, -1):
        with pytest.raises(OffsetOutOfRangeError) as e:
            plog.read(bad, 1 << 20, True)
        assert (e.value.log_start_offset, e.value.log_end_offset) == (0, 3)
    store.create_topic("e", 1, {})
    assert store.partition("e", 0).read(0, 100, True).batches == []


def test_max_bytes_and_min_one(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    sizes = []
    for i in range(4):
        batch = make_batch([b"x" * (50 * (i + 1))])
        sizes.append(len(batch))
        append(store, "t", 0, batch)
    plog = store.partition("t", 0)
    assert len(plog.read(0, sizes[0] + sizes[1], False).batches) == 2
    assert len(plog.read(0, sizes[0] + sizes[1] - 1, False).batches) == 1
    assert plog.read(0, sizes[0] - 1, False).batches == []
    one = plog.read(0, 1, True)  # KIP-74: the first batch even if it is too big
    assert len(one.batches) == 1 and one.size == sizes[0]
    assert len(plog.read(1, 0, True).batches) == 1
    assert plog.read(1, 0, False).batches == []
    assert plog.bytes_available(0, 1 << 20) == sum(sizes)
    assert plog.bytes_available(2, 1) == sizes[2]
    assert plog.bytes_available(4, 100) == 0


def test_several_batches_in_one_request(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    r = append(store, "t", 0, make_batch(2), make_batch(3))
    assert r.base_offset == 0
    assert [rb.base_offset_of(x) for x in read_all(store, "t", 0)] == [0, 2]
    assert store.partition("t", 0).next_offset == 5


def test_partitions_are_independent(stores):
    store = stores.open()
    store.create_topic("t", 2, {})
    store.create_topic("u", 1, {})
    assert append(store, "t", 1, make_batch(2)).base_offset == 0
    assert append(store, "u", 0, make_batch(5)).base_offset == 0
    assert append(store, "t", 1, make_batch(1)).base_offset == 2
    assert append(store, "t", 0, make_batch(1)).base_offset == 0
    assert [store.partitions()[k].next_offset for k in [("t", 0), ("t", 1), ("u", 0)]] == [1, 3, 5]


def test_too_large(stores):
    store = stores.open(segment_bytes=4096)
    store.create_topic("t", 1, {})
    batch = make_batch([b"x" * 300])
    with pytest.raises(RecordTooLargeError):
        append(store, "t", 0, batch, max_batch_bytes=len(batch) - 1)
    append(store, "t", 0, batch, max_batch_bytes=len(batch))
    with pytest.raises(RecordTooLargeError):  # one bad batch rejects the whole request
        append(store, "t", 0, make_batch(1), batch, max_batch_bytes=len(batch) - 1)
    with pytest.raises(RecordListTooLargeError):
        append(store, "t", 0, make_batch([b"y" * 5000]))
    assert store.partition("t", 0).next_offset == 1


def test_invalid_input_writes_nothing(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    end = store.commitlog.end_position
    good = make_batch(2)
    for bad, err in [
        (good + flip(make_batch(2), 40), CorruptRecordError),
        (good + good[:-3], CorruptRecordError),
        (good + with_field(make_batch(2), 57, ">i", 5), InvalidRecordError),
        (b"", InvalidRecordError),
    ]:
        with pytest.raises(err):
            store.append("t", 0, bad, max_batch_bytes=1 << 20)
    assert store.commitlog.end_position == end
    assert store.partition("t", 0).next_offset == 0


def _with_deltas(deltas: list[int], codec: int = 0) -> bytes:
    """A batch whose records carry these offset deltas, its header consistent with its
    record count."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, delta in enumerate(deltas):
        builder.append(delta, timestamp=1_700_000_000_000, key=None, value=b"v%d" % i, headers=[])
    # lastOffsetDelta (at byte 23) as the record count says, whatever the deltas
    return with_field(bytes(builder.build()), 23, ">i", len(deltas) - 1)


@pytest.mark.parametrize("deltas", [[0, 5, 2], [0, 0, 0], [1, 2, 3], [2, 1, 0]], ids=str)
@pytest.mark.parametrize("codec", [0, 4], ids=["none", "zstd"])
def test_records_with_wrong_offset_deltas_are_refused(stores, deltas, codec):
    """Kafka's rule: a produced batch's records have offset deltas 0, 1, ..., n-1; others
    would make consumers see an offset twice and others never."""
    store = stores.open()
    store.create_topic("t", 1, {})
    bad = _with_deltas(deltas, codec)
    with pytest.raises(CorruptRecordError, match="offset delta"):
        append(store, "t", 0, make_batch(1), bad)
    assert store.partition("t", 0).next_offset == 0
    assert append(store, "t", 0, _with_deltas([0, 1, 2], codec)).base_offset == 0


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: CODEC_NAMES[c])
def test_unparseable_batch_with_valid_crc_is_rejected_before_writing(stores, codec):
    """A batch whose CRC is right but whose records do not match its header must be refused
    up front: once in the commitlog it could not be indexed, and replaying it would fail."""
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(2, tags=["a", "b"]))
    end = store.commitlog.end_position
    batch = make_batch(3, codec=codec, tags=["a", "b", "c"])
    lying = with_field(with_field(batch, 57, ">i", 4), 23, ">i", 3)
    with pytest.raises(InvalidRecordError, match="premature EOF"):  # Kafka's INVALID_RECORD
        append(store, "t", 0, lying)
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        append(store, "t", 0, make_batch(1), lying)
    assert store.commitlog.end_position == end
    assert store.partition("t", 0).next_offset == 2
    assert append(store, "t", 0, make_batch(1, tags=["z"])).base_offset == 2
    stores.crash(store)
    store = stores.open()
    assert store.partition("t", 0).next_offset == 3


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: CODEC_NAMES[c])
def test_tag_codes_in_the_consume_queue(stores, codec):
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(1))
    append(store, "t", 0, make_batch(4, codec=codec, tags=["TagA", None, "标签", "TagA"]))
    cq = store.partition("t", 0).consume_queue
    codes = [cq.entry(o)[2] for o in range(5)]
    assert codes == [0, 2598919, 0, java_string_hash("标签"), 2598919]


def test_custom_tag_header(stores):
    store = stores.open(tag_header="X-TAG")
    store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(2, headers=[[("X-TAG", b"TagA")], [("TAGS", b"TagA")]]))
    cq = store.partition("t", 0).consume_queue
    assert [cq.entry(o)[2] for o in range(2)] == [2598919, 0]


def test_log_append_time(stores, clock):
    store = stores.open()
    store.create_topic("t", 1, {})
    clock.advance(5000)
    now = clock.now_ms()
    r = append(store, "t", 0, make_batch(3, timestamps=[1, 2, 3]), log_append_time=True)
    assert r.log_append_time_ms == now
    (stored,) = read_all(store, "t", 0)
    info = rb.read_info(stored)
    assert info.attributes & rb.TIMESTAMP_TYPE_BIT and info.max_timestamp == now
    assert rb.crc_ok(stored)
    assert [(x.timestamp, x.timestamp_type) for x in records(stored)] == [(now, 1)] * 3
    plog = store.partition("t", 0)
    assert plog.offset_for_timestamp(now) == (0, now)
    assert plog.offset_for_timestamp(2) == (0, now)
    assert plog.max_timestamp() == (0, now)
    clock.advance(10)
    append(store, "t", 0, make_batch(2, codec=GZIP, timestamps=[1, 2]), log_append_time=True)
    assert plog.offset_for_timestamp(now + 1) == (3, now + 10)
    assert plog.max_timestamp() == (3, now + 10)


def test_offset_for_timestamp_and_max_timestamp(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    plog = store.partition("t", 0)
    assert plog.offset_for_timestamp(0) is None and plog.max_timestamp() is None
    append(store, "t", 0, make_batch(3, timestamps=[100, 300, 200]))  # 0..2
    append(store, "t", 0, make_batch(2, timestamps=[50, 60]))  # 3..4
    append(store, "t", 0, make_batch(2, codec=GZIP, timestamps=[250, 400]))  # 5..6
    append(store, "t", 0, make_batch(1, timestamps=[400]))  # 7
    assert plog.offset_for_timestamp(0) == (0, 100)
    assert plog.offset_for_timestamp(100) == (0, 100)
    assert plog.offset_for_timestamp(101) == (1, 300)
    assert plog.offset_for_timestamp(300) == (1, 300)
    assert plog.offset_for_timestamp(301) == (6, 400)
    assert plog.offset_for_timestamp(401) is None
    assert plog.max_timestamp() == (6, 400)  # the first record carrying the maximum


def test_idempotent_duplicates(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    b0, b1 = idempotent(3, 7, 0, 0), idempotent(2, 7, 0, 3)
    assert append(store, "t", 0, b0).base_offset == 0
    assert append(store, "t", 0, b1).base_offset == 3
    end = store.commitlog.end_position
    dup = append(store, "t", 0, b0)
    assert (dup.base_offset, dup.duplicate) == (0, True)
    assert append(store, "t", 0, b1).base_offset == 3
    assert store.commitlog.end_position == end
    assert store.partition("t", 0).next_offset == 5
    with pytest.raises(OutOfOrderSequenceError):
        append(store, "t", 0, idempotent(1, 7, 0, 9))
    assert append(store, "t", 0, idempotent(1, 7, 1, 0)).base_offset == 5  # new epoch
    with pytest.raises(InvalidProducerEpochError):
        append(store, "t", 0, idempotent(1, 7, 0, 5))
    assert store.commitlog.end_position > end


def test_idempotent_state_is_per_partition(stores):
    store = stores.open()
    store.create_topic("t", 2, {})
    append(store, "t", 0, idempotent(1, 7, 0, 0))
    assert not append(store, "t", 1, idempotent(1, 7, 0, 0)).duplicate


def test_rejected_sequence_in_a_multi_batch_request_writes_nothing(stores):
    """Every check, the producer's sequence included, happens before the first byte is
    written: a request is appended whole or not at all."""
    store = stores.open()
    store.create_topic("t", 1, {})
    append(store, "t", 0, idempotent(1, 7, 0, 0))
    end = store.commitlog.end_position
    with pytest.raises(OutOfOrderSequenceError):
        append(store, "t", 0, idempotent(1, 7, 0, 1), idempotent(1, 7, 0, 5))
    assert store.commitlog.end_position == end
    assert store.partition("t", 0).next_offset == 1
    # The same two batches in order are fine, and each one's sequence builds on the last.
    r = append(store, "t", 0, idempotent(2, 7, 0, 1), idempotent(1, 7, 0, 3))
    assert r.base_offset == 1 and store.partition("t", 0).next_offset == 4
    assert append(store, "t", 0, idempotent(1, 7, 0, 3)).duplicate


def test_idempotent_duplicate_across_a_clean_restart(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    batches = [idempotent(2, 11, 3, seq) for seq in range(0, 14, 2)]
    for b in batches:
        append(store, "t", 0, b)
    stores.close(store)
    store = stores.open()
    assert store.clean_start and store.recovered_entries == 0
    for i in (2, 3, 4, 5, 6):
        r = append(store, "t", 0, batches[i])
        assert (r.base_offset, r.duplicate) == (2 * i, True)
    with pytest.raises(OutOfOrderSequenceError):
        append(store, "t", 0, batches[1])
    assert append(store, "t", 0, idempotent(1, 11, 3, 14)).base_offset == 14


def test_clean_restart_keeps_everything(stores):
    store = stores.open(segment_bytes=500)
    store.create_topic("t", 2, {})
    sent = {0: [], 1: []}
    for i in range(20):
        b = make_batch(values(i % 3 + 1, f"{i}-"))
        append(store, "t", i % 2, b)
        sent[i % 2].append(b)
    cluster = store.cluster_id
    stores.close(store)
    assert (stores.data_dir / "clean_shutdown").exists()
    store = stores.open()
    assert not (stores.data_dir / "clean_shutdown").exists()
    assert store.clean_start and store.recovered_entries == 0
    assert store.cluster_id == cluster
    for p in (0, 1):
        got = read_all(store, "t", p)
        assert [x[16:] for x in got] == [x[16:] for x in sent[p]]
    next_offset = store.partition("t", 0).next_offset
    assert append(store, "t", 0, make_batch(1)).base_offset == next_offset


def test_recreated_topic_starts_at_offset_zero(stores):
    store = stores.open()
    old = store.create_topic("t", 1, {})
    append(store, "t", 0, make_batch(5))
    store.delete_topic("t")
    new = store.create_topic("t", 1, {})
    assert new.topic_id != old.topic_id
    assert store.partition("t", 0).next_offset == 0
    assert append(store, "t", 0, make_batch(values(2, "new"))).base_offset == 0
    stores.close(store)
    store = stores.open()
    assert values_of(read_all(store, "t", 0)) == list(enumerate(values(2, "new")))


def test_append_listeners(stores):
    store = stores.open()
    store.create_topic("t", 2, {})
    calls = []
    seen = []
    def listener(name, p, appended):
        calls.append((name, p))
        seen.append(([[r.value for r in recs] for recs in appended.records], appended.tag_codes))
    store.add_append_listener(listener)
    append(store, "t", 1, make_batch(1))
    append(store, "t", 0, make_batch(1), make_batch([b"a", b"b"], tags=["Aa", None]))
    assert calls == [("t", 1), ("t", 0)]
    # each written batch's parsed records and tag codes ride along ("Aa".hashCode() == 2112)
    assert seen == [([[b"value-0"]], [None]), ([[b"value-0"], [b"a", b"b"]], [None, [2112, 0]])]
    with pytest.raises(CorruptRecordError):
        append(store, "t", 0, flip(make_batch(1), 30))
    assert calls == [("t", 1), ("t", 0)]


# -- async: group commit, checkpoint, close ---------------------------------------------------
@pytest.fixture
def count_fsyncs(monkeypatch):
    calls: list[list[int]] = []
    real = store_module._fdatasync_all

    def counting(fds):
        calls.append(file_ids(fds))
        real(fds)

    monkeypatch.setattr(store_module, "_fdatasync_all", counting)
    return calls


async def test_group_commit_shares_one_fsync(stores, count_fsyncs):
    store = stores.open(flush="sync", flush_interval_ms=3_600_000)
    store.create_topic("t", 3, {})
    await store.start()
    results = [append(store, "t", p, make_batch(2)) for p in (0, 1, 2, 0)]
    await asyncio.wait_for(
        asyncio.gather(*(store.wait_durable(r.end_position) for r in results)), 5
    )
    assert len(count_fsyncs) == 1
    assert count_fsyncs[0] == file_ids([store.commitlog.segments[-1].fd])
    # Already durable: no new fsync.
    await asyncio.wait_for(store.wait_durable(results[0].end_position), 5)
    assert len(count_fsyncs) == 1
    r = append(store, "t", 0, make_batch(1))
    await asyncio.wait_for(store.wait_durable(r.end_position), 5)
    assert len(count_fsyncs) == 2
    await stores.aclose(store)


async def test_group_commit_waiters_arriving_during_an_fsync(stores, monkeypatch):
    store = stores.open(flush="sync", flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    gate = asyncio.Event()
    rounds = []
    real = store_module._fdatasync_all
    loop = asyncio.get_running_loop()

    def slow(fds):
        rounds.append(store.commitlog.end_position)
        asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(5)
        real(fds)

    monkeypatch.setattr(store_module, "_fdatasync_all", slow)
    r1 = append(store, "t", 0, make_batch(1))
    w1 = asyncio.ensure_future(store.wait_durable(r1.end_position))
    while not rounds:
        await asyncio.sleep(0.001)
    r2 = append(store, "t", 0, make_batch(1))  # after the fsync started: not covered
    w2 = asyncio.ensure_future(store.wait_durable(r2.end_position))
    await asyncio.sleep(0.01)
    assert not w1.done() and not w2.done()
    gate.set()
    await asyncio.wait_for(w1, 5)
    await asyncio.wait_for(w2, 5)
    assert len(rounds) == 2
    await stores.aclose(store)


async def test_checkpoint_records_a_consistent_position(stores, count_fsyncs):
    store = stores.open(flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    append(store, "t", 0, idempotent(2, 5, 0, 0))
    await store.checkpoint()
    data = read_checkpoint(stores.data_dir / "checkpoint.json")
    assert data["position"] == store.commitlog.end_position
    key = f"{store.topics.get('t').topic_id}/0"
    assert data["producers"][key] == {"5": [0, 1, [[0, 1, 0]], 1_700_000_000_001, -1]}
    assert len(count_fsyncs) == 1
    assert set(count_fsyncs[0]) >= set(file_ids([store.commitlog.segments[-1].fd]))
    await stores.aclose(store)


async def test_wait_durable_in_async_mode_is_released_by_the_periodic_flush(stores):
    store = stores.open(flush="async", flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    r = append(store, "t", 0, make_batch(1))
    waiter = asyncio.ensure_future(store.wait_durable(r.end_position))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await store.checkpoint()
    await asyncio.wait_for(waiter, 5)
    await stores.aclose(store)


async def test_close_flushes_and_releases_waiters(stores, monkeypatch):
    store = stores.open(flush="sync", flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    never = asyncio.Event()

    async def stuck():
        await never.wait()

    # The group-commit loop never gets to run; close() must still settle the waiter.
    monkeypatch.setattr(store, "_group_commit_loop", stuck)
    for task in store._tasks:
        task.cancel()
    await asyncio.gather(*store._tasks, return_exceptions=True)
    store._tasks = []
    r = append(store, "t", 0, make_batch(1))
    waiter = asyncio.ensure_future(store.wait_durable(r.end_position))
    await asyncio.sleep(0.01)
    await stores.aclose(store)
    # close() fsynced everything, so the append is durable: the waiter succeeds.
    await asyncio.wait_for(waiter, 5)
    assert (stores.data_dir / "clean_shutdown").exists()
    store = stores.open()
    assert store.clean_start and store.partition("t", 0).next_offset == 1


async def test_background_checkpoint_loop_runs(stores, count_fsyncs):
    store = stores.open(flush_interval_ms=10)
    store.create_topic("t", 1, {})
    await store.start()
    append(store, "t", 0, make_batch(1))
    for _ in range(200):
        data = read_checkpoint(stores.data_dir / "checkpoint.json")
        if data["position"] == store.commitlog.end_position:
            break
        await asyncio.sleep(0.01)
    assert data["position"] == store.commitlog.end_position
    await stores.aclose(store)


async def test_close_during_an_in_flight_checkpoint(stores, monkeypatch):
    """Cancelling the checkpoint loop does not stop its thread: close() must wait for it,
    or the older checkpoint lands after the final one (and both use the same temp file)."""
    import threading
    import time

    store = stores.open(flush_interval_ms=5)
    store.create_topic("t", 1, {})
    started = threading.Event()
    real = store._write_checkpoint

    def slow(position, snapshot):
        if threading.current_thread() is not threading.main_thread():
            started.set()
            time.sleep(0.2)
        real(position, snapshot)

    monkeypatch.setattr(store, "_write_checkpoint", slow)
    await store.start()
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
    append(store, "t", 0, make_batch(2))  # after the in-flight checkpoint's snapshot
    end = store.commitlog.end_position
    await stores.aclose(store)
    await asyncio.sleep(0.3)  # a straggling thread would have written by now
    data = read_checkpoint(stores.data_dir / "checkpoint.json")
    assert data["position"] == end
    store = stores.open()
    assert store.clean_start


def test_partition_limits(stores):
    """One request asking for 2^31-1 partitions opened a file per partition until handles
    ran out: a topic may have max_partitions_per_topic, all topics max_partitions (checked by
    check_partition_limits, which the adapter runs for a client's request)."""
    store = stores.open(max_partitions_per_topic=8, max_partitions=12)
    with pytest.raises(InvalidPartitionCountError, match="at most 8 per topic"):
        store.create_topic("huge", 2**31 - 1, {})
    with pytest.raises(InvalidPartitionCountError, match="at most 8 per topic"):
        store.check_partition_limits("huge", 9, 0)
    store.create_topic("a", 8, {})
    with pytest.raises(InvalidPartitionCountError, match="would make 13; at most 12 in all"):
        store.check_partition_limits("b", 5, 0)
    store.check_partition_limits("b", 4, 0)
    store.create_topic("b", 4, {})
    with pytest.raises(InvalidPartitionCountError, match="would make 13"):
        store.check_partition_limits("b", 5, 4)
    with pytest.raises(InvalidPartitionCountError, match="at most 8 per topic"):
        store.add_partitions("a", 100_000)
    assert [(m.name, m.partitions) for m in store.topics.all()] == [("a", 8), ("b", 4)]
    store.delete_topic("a")
    store.check_partition_limits("b", 8, 4)
    store.add_partitions("b", 8)


def test_the_brokers_own_topics_are_created_over_the_total_limit(stores):
    """Issue 12: a topics.json over max_partitions (an older version, a hand edit) made the
    broker unstartable: creating its own one-partition system topic was refused."""
    store = stores.open(max_partitions=12)
    store.create_topic("legacy", 12, {})
    store.create_topic("system", 1, {})
    store.add_partitions("system", 2)
    with pytest.raises(InvalidPartitionCountError, match="in all"):
        store.check_partition_limits("client", 1, 0)


async def test_an_idle_checkpoint_is_not_rewritten(stores):
    store = stores.open(flush_interval_ms=3_600_000)
    store.create_topic("t", 1, {})
    await store.start()
    append(store, "t", 0, make_batch(1))
    await store.checkpoint()
    path = stores.data_dir / "checkpoint.json"
    written = path.stat().st_ino
    await store.checkpoint()
    assert path.stat().st_ino == written  # nothing changed: not replaced
    append(store, "t", 0, make_batch(1))
    await store.checkpoint()
    assert path.stat().st_ino != written
    assert read_checkpoint(path)["position"] == store.commitlog.end_position
    await stores.aclose(store)
