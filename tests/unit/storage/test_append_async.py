"""Decompression off the event loop (issue 12: "stream it with a bound ..., off the event
loop"). ``append_async`` decompresses, parses and checks a request holding a large
compressed batch in the store's worker thread, so the loop answers other requests
meanwhile; small requests stay inline; appends to a partition still happen in call order."""

from __future__ import annotations

import asyncio
import threading

import pytest
from batches import make_batch, values_of
from rmqkafka.storage import record_batch
from rmqkafka.storage.errors import CorruptRecordError, UnknownTopicError
from storage_helpers import MAX_BATCH, read_all

ZSTD = 4
BIG = [b"%06d" % i * 40 for i in range(20_000)]  # compresses to well over 16 KiB


def threads_of_read_records(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = record_batch.read_produced_records

    def spy(batch, *args):
        seen.append(threading.current_thread().name)
        return real(batch, *args)

    monkeypatch.setattr(record_batch, "read_produced_records", spy)
    return seen


async def test_a_large_compressed_batch_is_inflated_in_a_worker_thread(stores, monkeypatch):
    store = stores.open()
    store.create_topic("t", 1, {})
    seen = threads_of_read_records(monkeypatch)
    big = make_batch(BIG, codec=ZSTD)
    assert len(big) >= store.config.inflate_in_thread_bytes
    small = make_batch([b"a", b"b"], codec=ZSTD)
    await store.append_async("t", 0, big, max_batch_bytes=MAX_BATCH)
    await store.append_async("t", 0, small, max_batch_bytes=MAX_BATCH)
    await store.append_async("t", 0, make_batch([b"plain"] * 1000), max_batch_bytes=MAX_BATCH)
    await store.append_async("t", 0, make_batch([b"plain"] * 5000), max_batch_bytes=MAX_BATCH)
    assert seen[0].startswith("rmqk-inflate")
    assert seen[1:3] == [threading.current_thread().name] * 2  # few records: inline
    assert seen[3].startswith("rmqk-inflate")  # 5000 records, compressed or not: a thread
    assert len(values_of(read_all(store, "t", 0))) == len(BIG) + 2 + 6000


async def test_the_loop_answers_others_while_a_large_batch_is_checked(stores, monkeypatch):
    store = stores.open()
    store.create_topic("t", 1, {})
    store.create_topic("u", 1, {})
    release = threading.Event()
    real = record_batch.read_produced_records

    def slow(batch, *args):
        if len(batch) > 10_000:
            assert release.wait(5), "the loop was blocked while the batch was checked"
        return real(batch, *args)

    monkeypatch.setattr(record_batch, "read_produced_records", slow)
    big = asyncio.ensure_future(store.append_async("t", 0, make_batch(BIG, codec=ZSTD), max_batch_bytes=MAX_BATCH))
    await asyncio.sleep(0)
    other = await store.append_async("u", 0, make_batch([b"other"]), max_batch_bytes=MAX_BATCH)
    assert other.base_offset == 0 and not big.done()  # answered while the big one is checked
    release.set()
    assert (await big).base_offset == 0


async def test_appends_to_a_partition_keep_their_call_order(stores):
    """A small request made after a large one waits for it: an idempotent producer's
    pipelined requests must be written in their sequence order."""
    store = stores.open()
    store.create_topic("t", 1, {})
    calls = [
        store.append_async("t", 0, make_batch(BIG, codec=ZSTD, producer_id=7, producer_epoch=0, base_sequence=0),
                           max_batch_bytes=MAX_BATCH),
        store.append_async("t", 0, make_batch([b"next"], producer_id=7, producer_epoch=0, base_sequence=len(BIG)),
                           max_batch_bytes=MAX_BATCH),
    ]
    first, second = await asyncio.gather(*calls)
    assert (first.base_offset, second.base_offset) == (0, len(BIG))
    assert values_of(read_all(store, "t", 0))[-1] == (len(BIG), b"next")


async def test_a_refused_large_batch_does_not_hold_up_the_next(stores):
    store = stores.open()
    store.create_topic("t", 1, {})
    bad = bytearray(make_batch(BIG, codec=ZSTD))
    bad[-10] ^= 0xFF  # CRC mismatch
    results = await asyncio.gather(
        store.append_async("t", 0, bytes(bad), max_batch_bytes=MAX_BATCH),
        store.append_async("t", 0, make_batch([b"ok"]), max_batch_bytes=MAX_BATCH),
        return_exceptions=True,
    )
    assert isinstance(results[0], CorruptRecordError)
    assert results[1].base_offset == 0
    with pytest.raises(UnknownTopicError):
        await store.append_async("nope", 0, make_batch([b"x"]), max_batch_bytes=MAX_BATCH)
    assert store._append_turns == {}
