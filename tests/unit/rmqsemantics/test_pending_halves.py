"""The pending half-message table in columns (rmqsemantics/pending_halves.py)."""

from __future__ import annotations

import json
import random
import tracemalloc

from rmqkafka.rmqsemantics import pending_halves
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


def test_the_table_behaves_as_a_dict_of_rows_under_random_adds_ends_and_restores():
    """Against a model (a dict by offset and a dict by (group, key)): adds in order, older
    offsets inserted, known offsets replaced, runs, removes that leave tombstones and rebuild
    the columns, check counts, and a snapshot read back, in random order. Few groups and keys,
    so a key is often named again by a later row."""
    rng = random.Random(20261127)
    table, rows, named = PendingHalves(), {}, {}

    def add(offset, group, key, topic, partition, stored, first):
        old = rows.get(offset)
        if old is not None and named.get((old.group, old.key)) == offset:
            del named[(old.group, old.key)]
        rows[offset] = Pending(group, key, topic, partition, stored, first, 0)
        named[(group, key)] = offset

    def remove(offset):
        entry = rows.pop(offset, None)
        if entry is not None and named.get((entry.group, entry.key)) == offset:
            del named[(entry.group, entry.key)]
        return entry

    next_offset = 0
    for step in range(6000):
        op = rng.random()
        group, key = f"g{rng.randrange(4)}", f"k{rng.randrange(300)}"
        topic, partition = f"t{rng.randrange(3)}", rng.randrange(3)
        if op < 0.35:
            next_offset += rng.randrange(1, 3)
            table.add(next_offset, group, key, topic, partition, step, step + 100)
            add(next_offset, group, key, topic, partition, step, step + 100)
        elif op < 0.40:
            offset = rng.randrange(next_offset + 1)  # older: inserted, or replacing a row
            table.add(offset, group, key, topic, partition, step, step + 100)
            add(offset, group, key, topic, partition, step, step + 100)
        elif op < 0.48:
            base = next_offset + 1 if rng.random() < 0.8 else max(0, next_offset - 3)
            pairs = [(f"g{rng.randrange(4)}", f"k{rng.randrange(300)}") for _ in range(rng.randrange(1, 6))]
            firsts = [step + i for i in range(len(pairs))]
            table.add_run(base, pairs, topic, partition, step, firsts)
            for offset, ((g, k), first) in enumerate(zip(pairs, firsts), base):
                add(offset, g, k, topic, partition, step, first)
            next_offset = max(next_offset, base + len(pairs) - 1)
        elif op < 0.85 and rows:
            offset = rng.choice(list(rows)) if rng.random() < 0.9 else rng.randrange(next_offset + 2)
            if rng.random() < 0.5:
                assert table.remove(offset) == remove(offset)
            else:
                entry = remove(offset)
                assert table.discard(offset) == (None if entry is None else (entry.group, entry.key))
        elif op < 0.95 and rows:
            offset, times = rng.choice(list(rows)), rng.randrange(-2, 6)
            if rng.random() < 0.5:
                table.set_checks(offset, times)
                rows[offset].checks = max(times, 0)
            else:
                table.raise_checks(offset, times)
                rows[offset].checks = max(rows[offset].checks, times)
        else:
            again = PendingHalves()
            again.restore(json.loads(json.dumps(table.snapshot())), None)
            table = again
            # two live rows may share a key only through a replay (a live one refuses the
            # second half); read back, the key names the later offset
            named = {(e.group, e.key): offset for offset, e in sorted(rows.items())}
        assert len(table) == len(rows)
        if step % 50 == 0 or step > 5900:
            assert list(table.items()) == sorted(rows.items())
            assert all(table.get(offset) == entry for offset, entry in rows.items())
            assert all(table.offset_of(g, k) == offset for (g, k), offset in named.items())
            assert not any(table.offset_of(f"g{g}", f"k{k}") is not None and (f"g{g}", f"k{k}") not in named
                           for g in range(4) for k in range(300))
            assert table.due(step) == sorted(o for o, e in rows.items() if e.first_check_ms <= step)
            assert table.checked() == sum(1 for e in rows.values() if e.checks > 0)


def test_groups_and_partitions_no_row_names_are_forgotten():
    """Each group interns its name once; after its half messages end, nothing names it: the
    names must not grow with every group ever seen (a producer chooses its groups)."""
    table = PendingHalves()
    for i in range(20_000):
        table.add(i, f"group-{i}", "k", f"topic-{i}", i % 3, 1, 2)
    for i in range(20_000):
        if i % 1000:
            table.remove(i)
    assert len(table) == 20
    # rebuilt (and re-interned) when the dead outnumber the live: bounded by the rows since
    bound = 2 * (20 + pending_halves._COMPACT_AT) + pending_halves._NAMES_SLACK
    assert len(table._groups) <= bound and len(table._dests) <= bound
    assert [table.get(i).group for i in range(0, 20_000, 1000)] == [f"group-{i}" for i in range(0, 20_000, 1000)]
    assert table.topic_of(5000) == "topic-5000" and table.offset_of("group-7000", "k") == 7000
    table.add(20_000, "group-1000", "k2", "topic-1000", 1, 1, 2)
    assert table.get(20_000) == Pending("group-1000", "k2", "topic-1000", 1, 1, 2, 0)
    state = json.loads(json.dumps(table.snapshot()))
    assert len(state["groups"]) == 20 and len(state["dests"]) <= 21


def test_times_past_int64_and_odd_check_counts_stay_in_their_columns():
    table = PendingHalves()
    table.add(1, "g", "a", "t", 0, 10, 10**30)  # a producer's immunity: never due
    table.add_run(2, [("g", "b")], "t", 0, -(10**30), [10**30])
    assert table.get(1).first_check_ms == 2**63 - 1 and table.get(2).stored_ms == -(2**63)
    assert table.due(2**63 - 2) == []
    table.set_checks(1, -1)  # never a tombstone's mark
    table.raise_checks(2, 10**12)
    assert len(table) == 2 and table.get(1).checks == 0 and table.get(2).checks == 2**31 - 1
    assert table.offset_of("g", "a") == 1


def test_a_snapshot_that_does_not_hold_together_raises_value_error_and_leaves_the_table_empty():
    import base64

    good = json.loads(json.dumps(filled(5).snapshot()))
    damaged = [dict(good, stored=base64.b64encode(base64.b64decode(good["stored"])[:-8]).decode()),
               dict(good, offsets="!!!!"), {k: v for k, v in good.items() if k != "keys"},
               dict(good, keys=good["keys"][:-1] + [7]), dict(good, groups=[]), dict(good, dests="x"), [1, 2]]
    for state in damaged:
        table = filled(3)
        try:
            table.restore(state, None)
        except ValueError:
            pass
        else:
            raise AssertionError(f"read: {state}")
        assert len(table) == 0 and list(table.items()) == [] and table.offset_of("g0", "key-00000000") is None
    bad_rows = [[1, "g", None, "t", 0, 1, 2, 0]]
    table = PendingHalves()
    try:
        table.restore(None, bad_rows)
    except ValueError:
        assert len(table) == 0
    else:
        raise AssertionError("read a row without a key")
