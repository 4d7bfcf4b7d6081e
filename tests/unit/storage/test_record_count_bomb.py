"""Record-count bombs (issue 20): a few KB of zstd holding millions of empty records with
offset delta 0 took the broker seconds and gigabytes before it answered CORRUPT_MESSAGE,
because every record was parsed before the first was checked.

Now, as Kafka's DefaultRecordBatch and LogValidator read a produced batch: at most the
header's records count is read, the first wrong offset delta ends the parse, a body with
more or fewer records than declared is INVALID_RECORD, and a count whose smallest records
could not fit in what the batch may inflate to is refused before anything is inflated. The
first 16 KiB of a compressed batch's records are read before the rest is inflated.
"""

from __future__ import annotations

import threading
import tracemalloc

import pytest
from batches import NONE, ZSTD, make_batch, with_field
from bench.record_count_bomb import record_count_bomb
from rmqkafka.storage import inflate as inflate_module
from rmqkafka.storage import record_batch
from rmqkafka.storage.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from storage_helpers import MAX_BATCH, read_all

MILLIONS = 2_000_000  # 14 MB of records in about 1 KB of zstd


def peak_mb_of(call) -> tuple[float, BaseException | None]:
    """The peak of Python allocations while ``call`` runs, in MB, and what it raised."""
    tracemalloc.start()
    try:
        call()
        raised = None
    except Exception as exc:  # noqa: BLE001 - returned for the test to check
        raised = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / 1e6, raised


def spy_inflating(monkeypatch) -> list[tuple[str, str]]:
    """(function, thread) of each call of storage.inflate's inflate and inflate_head."""
    calls: list[tuple[str, str]] = []
    for name in ("inflate", "inflate_head"):
        real = getattr(inflate_module, name)

        def spy(*args, _name=name, _real=real, **kw):
            calls.append((_name, threading.current_thread().name))
            return _real(*args, **kw)

        monkeypatch.setattr(inflate_module, name, spy)
    return calls


def test_the_first_wrong_offset_delta_ends_the_parse(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    bomb = record_count_bomb(MILLIONS)
    assert len(bomb) < 7000
    peak, raised = peak_mb_of(lambda: store.append("t", 0, bomb, max_batch_bytes=MAX_BATCH))
    assert isinstance(raised, CorruptRecordError), raised
    assert "record 1 of the batch has offset delta 0, not 1" in str(raised)
    # the first 16 KiB of records inflated and read, not 14 MB of them (nor, as before, a
    # Python object for each of the 2 million: 333 MB)
    assert peak < 1, f"{peak:.1f} MB"
    assert read_all(store, "t", 0) == []


def test_records_beyond_the_declared_count_are_invalid_record(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    bomb = record_count_bomb(MILLIONS, declared=1)
    peak, raised = peak_mb_of(lambda: store.append("t", 0, bomb, max_batch_bytes=MAX_BATCH))
    assert isinstance(raised, InvalidRecordError), raised
    assert str(raised) == "Incorrect declared batch size, records still remaining in file"
    assert peak < 1, f"{peak:.1f} MB"
    plain = with_field(with_field(make_batch(5), 57, ">i", 3), 23, ">i", 2)
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        store.append("t", 0, plain, max_batch_bytes=MAX_BATCH)
    assert read_all(store, "t", 0) == []


@pytest.mark.parametrize("codec", [NONE, ZSTD])
def test_fewer_records_than_declared_are_invalid_record(stores, codec):
    store = stores.open()
    store.create_topic("t", 1, {})
    short = with_field(with_field(make_batch(5, codec=codec), 57, ">i", 6), 23, ">i", 5)
    with pytest.raises(InvalidRecordError, match="^Incorrect declared batch size, premature EOF reached$"):
        store.append("t", 0, short, max_batch_bytes=MAX_BATCH)
    assert read_all(store, "t", 0) == []


def test_a_record_that_does_not_parse_is_still_corrupt_message(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    batch = bytearray(make_batch([b"abc", b"def"]))
    batch[61] = 0x7E  # the first record's length: far past the end
    with pytest.raises(CorruptRecordError, match="does not parse"):
        store.append("t", 0, with_field(bytes(batch), 57, ">i", 2), max_batch_bytes=MAX_BATCH)


def test_a_count_too_large_for_the_inflate_bound_is_refused_before_inflating(stores, monkeypatch):
    """64 x max.message.bytes bounds what a batch inflates to; 7 bytes a record at the least,
    a header declaring more records than that could hold is refused at once."""
    store = stores.open()
    store.create_topic("t", 1, {})
    calls = spy_inflating(monkeypatch)
    limit = 64 * 1024
    fits = limit // 7
    with pytest.raises(RecordTooLargeError, match=f"{fits + 1} records"):
        store.append("t", 0, record_count_bomb(3, declared=fits + 1), max_batch_bytes=1024)
    assert calls == []
    with pytest.raises(InvalidRecordError, match="premature EOF"):  # the count fits: inflated, read
        store.append("t", 0, record_count_bomb(3, declared=fits), max_batch_bytes=1024)
    assert [name for name, _ in calls] == ["inflate_head"]


def test_an_uncompressed_count_larger_than_its_body_is_refused_without_parsing(stores, monkeypatch):
    store = stores.open()
    store.create_topic("t", 1, {})
    monkeypatch.setattr(record_batch, "_batch_reader", lambda: pytest.fail("the records were parsed"))
    batch = make_batch(3)
    declared = (len(batch) - record_batch.HEADER_SIZE) // record_batch.MIN_RECORD_BYTES + 1
    lying = with_field(with_field(batch, 57, ">i", declared), 23, ">i", declared - 1)
    with pytest.raises(InvalidRecordError, match="premature EOF"):
        store.append("t", 0, lying, max_batch_bytes=MAX_BATCH)


async def test_a_small_batch_of_many_records_is_parsed_in_a_worker_thread(stores, monkeypatch):
    """What decides is what the batch may expand to (its records count x the smallest
    record), not its compressed size: 5 KB of zstd can hold 9 million records."""
    store = stores.open()
    store.create_topic("t", 1, {})
    calls = spy_inflating(monkeypatch)
    bomb = record_count_bomb(200_000)
    assert len(bomb) < store.config.inflate_in_thread_bytes
    with pytest.raises(CorruptRecordError):
        await store.append_async("t", 0, bomb, max_batch_bytes=MAX_BATCH)
    await store.append_async("t", 0, make_batch([b"a", b"b"], codec=ZSTD), max_batch_bytes=MAX_BATCH)
    threads = [thread for _, thread in calls]
    assert threads[0].startswith("rmqk-inflate")
    assert threads[1:] == [threading.current_thread().name]  # a few records: inline


def test_a_wrong_offset_delta_after_the_first_slice_is_found(stores):
    """Records are read 1024 at a time; the check holds across slices."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    store = stores.open()
    store.create_topic("t", 1, {})
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=ZSTD, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    deltas = [*range(2500), 7, *range(2501, 3000)]
    for delta in deltas:
        builder.append(delta, timestamp=1_700_000_000_000, key=None, value=b"v", headers=[])
    batch = with_field(bytes(builder.build()), 23, ">i", len(deltas) - 1)
    with pytest.raises(CorruptRecordError, match="record 2500 of the batch has offset delta 7, not 2500"):
        store.append("t", 0, batch, max_batch_bytes=MAX_BATCH)
    assert store.append("t", 0, make_batch(3000, codec=ZSTD), max_batch_bytes=MAX_BATCH).base_offset == 0


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("shape", [(100, 1000), (5000, 10), (3, 20_000)], ids=["100x1KB", "5000x10B", "3x20KB"])
def test_batches_larger_than_the_head_are_read_whole(stores, codec, shape):
    """The head (the first 16 KiB of records) ends inside a record, between two, or before
    the first one ends: the rest is inflated and every record read."""
    store = stores.open()
    store.create_topic("t", 1, {})
    count, size = shape
    values = [bytes([i % 251]) * size for i in range(count)]
    batch = make_batch(values, codec=codec)
    assert store.append("t", 0, batch, max_batch_bytes=MAX_BATCH).base_offset == 0
    assert [r.value for r in record_batch.read_records(read_all(store, "t", 0)[0])] == values
