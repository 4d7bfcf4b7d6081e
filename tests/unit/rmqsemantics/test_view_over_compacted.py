"""Issue 25: a view over a compacted topic reads the source's cleaned offsets from its
compaction store (the commitlog below them may be gone), filtered as any other batch."""

from __future__ import annotations

import pytest

# ``stores`` and ``clock`` are tests/unit/conftest.py's, which also puts the storage test
# helpers (batches, compaction_helpers, storage_helpers) on the path.
from batches import make_batch
from compaction_helpers import T, clean, write
from rmqkafka.rmqsemantics.filters import compile_filter
from rmqkafka.rmqsemantics.view_reader import read_view
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.compaction_cleaner import CompactionSettings
from storage_helpers import append

EAGER = CompactionSettings(segment_ms=1, min_cleanable_dirty_ratio=0.0)


@pytest.mark.parametrize("kind, expression", [("tags", "A"), ("sql", "TAGS = 'A'")])
def test_a_view_over_a_compacted_topic_reads_the_cleaned_offsets(stores, clock, kind, expression):
    s = stores.open(segment_bytes=1024, retention_bytes=1)
    s.create_topic(T, 1, {"cleanup.policy": "compact"})
    for r in range(30):
        append(s, T, 0, make_batch([b"a%d" % r, b"b%d" % r], keys=[b"ka", b"kb"], tags=["A", "B"],
                                   timestamps=[clock.now_ms()] * 2))
        clock.advance(1000)
    write(s, clock, [(b"z", b"z")])
    assert clean(s, settings=EAGER)
    s.apply_retention()  # the commitlog below the cleaned end is gone
    plog = s.partition(T, 0)
    assert s.commitlog.start_position > 0 and plog.log_start_offset == 0
    flt = compile_filter(kind, expression)
    batches = read_view(plog, flt, 0, 1 << 30, True).batches
    data = [(r.offset, r.value) for b in batches if not b[22] & rb.CONTROL_BIT for r in rb.read_records(b)]
    assert data == [(58, b"a29")]
    # every offset up to the end is covered, so consumers advance
    assert rb.next_offset_of(batches[-1]) == plog.next_offset
