"""What the log-compaction tests write and how they clean (test_log_cleaner.py, and
tests/unit/rmqsemantics/test_view_over_compacted.py over the same store).

Every helper works on partition 0 of the compacted topic ``T`` of a MessageStore from the
``stores`` fixture, with the test's ManualClock: record timestamps come from that clock, so
the lag and tombstone rules see the times the test sets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from batches import make_batch
from rmqkafka.storage.compaction_cleaner import CompactionSettings
from storage_helpers import append

T = "compacted"
HOUR = 3_600_000
# every batch rolls a segment (segment.ms 1), nothing waits out a lag, any dirt is enough
EAGER = CompactionSettings(delete_retention_ms=HOUR, segment_ms=1, min_cleanable_dirty_ratio=0.0)

Pairs = Sequence[tuple[bytes, bytes | None]]


def keyed(pairs: Pairs, ts: int, **kw) -> bytes:
    """One batch of (key, value) records, all stamped ``ts`` (a None value is a tombstone)."""
    return make_batch([v for _, v in pairs], keys=[k for k, _ in pairs], timestamps=[ts] * len(pairs), **kw)


def write(store, clock, *batches: Pairs, **kw) -> None:
    """Each of ``batches`` appended to T-0 as one keyed batch, a second apart: the clock is
    advanced between them, not after the last (so the test says what time a cleaning sees).
    ``kw`` (codec, producer fields) applies to every batch."""
    for i, pairs in enumerate(batches):
        if i:
            clock.advance(1000)
        append(store, T, 0, keyed(pairs, clock.now_ms(), **kw))


def clean(store, **kw) -> bool:
    """One cleaning of T-0 (``settings`` EAGER unless given), after an fsync of the
    commitlog: only what is durable is cleaned."""
    store._release_durable(store.commitlog.flush())
    plog = store.partition(T, 0)
    return asyncio.run(store.cleaner.clean(T, 0, plog, kw.pop("settings", EAGER), **kw))
