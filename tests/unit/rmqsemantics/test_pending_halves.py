"""The pending half-message table in columns (rmqsemantics/pending_halves.py)."""

from __future__ import annotations

import json
import random
import tracemalloc

from rmqkafka.rmqsemantics.pending_halves import Pending, PendingHalves


def filled(n: int, groups: int = 3) -> PendingHalves:
    table = PendingHalves()
    for i in range(n):
        table.add(100 + i * 2, f"g{i % groups}", f"key-{i:08d}", f"t{i % 2}", i % 4, 1000 + i, 5000 + i)
    return table


def test_rows_are_read_back_by_offset_and_by_key():
    table = filled(10)
    assert len(table) == 10
    assert table.get(104) == Pending("g2", "key-00000002", "t0", 2, 1002, 5002, 0)
    assert table.get(105) is None and 105 not in table and 104 in table
    assert table.offset_of("g2", "key-00000002") == 104
    assert table.offset_of("g1", "key-00000002") is None
    assert [offset for offset, _ in table.items()] == list(range(100, 120, 2))


def test_removed_rows_are_gone_everywhere_and_the_rest_stay_in_order():
    table = filled(5000)
    removed = set(random.Random(7).sample(range(5000), 4000))  # enough to compact the columns
    for i in removed:
        entry = table.remove(100 + i * 2)
        assert entry is not None and entry.key == f"key-{i:08d}"
    kept = [i for i in range(5000) if i not in removed]
    assert len(table) == len(kept)
    assert [offset for offset, _ in table.items()] == [100 + i * 2 for i in kept]
    for i in list(removed)[:50]:
        assert table.offset_of(f"g{i % 3}", f"key-{i:08d}") is None
    for i in kept[:50]:
        assert table.offset_of(f"g{i % 3}", f"key-{i:08d}") == 100 + i * 2


def test_checks_due_and_counts():
    table = filled(10)
    assert table.due(5004) == [100, 102, 104, 106, 108]
    table.set_checks(102, 2)
    table.raise_checks(102, 1)  # never lowers
    table.raise_checks(104, 3)
    assert table.get(102).checks == 2 and table.get(104).checks == 3
    assert table.checked() == 2
    table.remove(104)
    assert table.checked() == 1 and table.due(5004) == [100, 102, 106, 108]


def test_an_older_offset_is_inserted_in_its_place_and_a_known_one_replaced():
    table = filled(3)  # 100, 102, 104
    table.add(101, "g9", "late", "t", 0, 1, 2)
    table.add(102, "g9", "again", "t", 1, 3, 4)
    assert [offset for offset, _ in table.items()] == [100, 101, 102, 104]
    assert table.get(102) == Pending("g9", "again", "t", 1, 3, 4, 0)
    assert table.offset_of("g2", "key-00000001") is None and table.offset_of("g9", "again") == 102
    assert len(table) == 4 and len(table._offsets) == 4  # no tombstone left behind for 102


def test_the_snapshot_goes_through_json_and_back_and_an_older_broker_rows_are_read():
    table = filled(1000)
    for i in range(0, 1000, 3):
        table.remove(100 + i * 2)
    table.set_checks(102, 4)
    state = json.loads(json.dumps(table.snapshot()))
    again = PendingHalves()
    again.restore(state, None)
    assert list(again.items()) == list(table.items())
    assert again.offset_of("g1", "key-00000001") == 102
    older = [[o, e.group, e.key, e.topic, e.partition, e.stored_ms, e.first_check_ms, e.checks]
             for o, e in table.items()]
    from_rows = PendingHalves()
    from_rows.restore(None, list(reversed(older)))
    assert list(from_rows.items()) == list(table.items())


def test_100000_pending_take_less_than_25_mb():
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        table = PendingHalves()
        for i in range(100_000):
            table.add(i, "producer-group-1", f"7F0000010B2D18B4AAC2{i:012d}", "orders", i % 4, 1_700_000_000_000 + i,
                      1_700_000_006_000 + i)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(table) == 100_000
    assert used < 25 * 2**20, f"{used / 2**20:.1f} MB"


def test_ended_oldest_first_the_dead_prefix_is_cut_and_lookups_still_work():
    table = filled(3000)
    for i in range(2500):
        table.remove(100 + i * 2)
    assert len(table._offsets) < 3000  # the columns were cut
    assert [offset for offset, _ in table.items()] == [100 + i * 2 for i in range(2500, 3000)]
    assert table.get(100 + 2600 * 2).key == "key-00002600" and table.get(100 + 2400 * 2) is None
    table.add(100 + 3000 * 2, "g0", "next", "t0", 0, 1, 2)
    assert table.offset_of("g0", "next") == 6100 and len(table) == 501


def test_discard_names_the_row_it_removed():
    table = filled(3)
    assert table.discard(102) == ("g1", "key-00000001")
    assert table.discard(102) is None and len(table) == 2 and table.offset_of("g1", "key-00000001") is None
