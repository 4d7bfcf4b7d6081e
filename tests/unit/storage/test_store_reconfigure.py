"""MessageStore.reconfigure: the settings a dynamic broker config changes at run time
(issue 21) take effect without reopening the store."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from batches import make_batch
from storage_helpers import append
from rmqkafka.storage.checkpoint_file import read_checkpoint


def test_lower_retention_applies_at_the_next_check(stores):
    store = stores.open(segment_bytes=600, retention_ms=None)
    store.create_topic("t", 1, {})
    for i in range(20):
        append(store, "t", 0, make_batch([b"%03d" % i] * 4))
    segments = len(store.commitlog.segments)
    assert segments >= 4 and store.apply_retention() == 0
    store.reconfigure(replace(store.config, retention_bytes=0))
    assert store.apply_retention() == segments - 1  # all but the active segment
    assert store.partition("t", 0).log_start_offset > 0


async def test_a_shorter_flush_interval_does_not_wait_out_the_old_one(stores):
    store = stores.open(flush_interval_ms=3_600_000)
    await store.start()
    store.create_topic("t", 1, {})
    checkpoint = stores.data_dir / "checkpoint.json"

    async def checkpointed() -> bool:
        for _ in range(250):  # 5 s: generous on a loaded machine; the interval is 50 ms
            if read_checkpoint(checkpoint)["position"] == store.commitlog.end_position:
                return True
            await asyncio.sleep(0.02)
        return False

    append(store, "t", 0, make_batch([b"a"]))
    await asyncio.sleep(0.2)
    assert read_checkpoint(checkpoint)["position"] < store.commitlog.end_position  # an hour to go
    store.reconfigure(replace(store.config, flush_interval_ms=50))
    assert await checkpointed()
    append(store, "t", 0, make_batch([b"b"]))  # and the next one comes at the new interval
    assert await checkpointed()
    await stores.aclose(store)
