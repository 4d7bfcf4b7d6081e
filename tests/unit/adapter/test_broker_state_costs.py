"""adapter.broker_state reads each table once per document, not once per row: /metrics, the
console's JSON and its history sampler (every 5 s) call group_offsets over every committed
offset, and the store's partition table is a copy per call."""

from __future__ import annotations

import types

from rmqkafka.adapter.broker_state import group_offsets
from rmqkafka.storage.offset_store import CommittedOffset


def fake_context(topics: int, groups: int) -> tuple[types.SimpleNamespace, list[int]]:
    copies = [0]
    metas = {f"t{i}": types.SimpleNamespace(name=f"t{i}", partitions=3) for i in range(topics)}
    logs = {(name, p): types.SimpleNamespace(next_offset=10) for name in metas for p in range(3)}

    def partitions() -> dict:
        copies[0] += 1
        return dict(logs)

    committed = {f"g{g}": {(f"t{(g + k) % topics}", p): CommittedOffset(4, -1, "", 0) for k in range(5) for p in range(3)}
                 for g in range(groups)}
    ctx = types.SimpleNamespace(
        store=types.SimpleNamespace(topics=types.SimpleNamespace(get=metas.get), partitions=partitions),
        semantics=types.SimpleNamespace(resolve=metas.get),
        groups=types.SimpleNamespace(known_group_ids=lambda: sorted(committed), all_committed=committed.__getitem__),
    )
    return ctx, copies


def test_group_offsets_copies_the_partition_table_once() -> None:
    ctx, copies = fake_context(topics=50, groups=20)
    rows = group_offsets(ctx)
    assert len(rows) == 20 * 15 and {(r.end, r.lag) for r in rows} == {(10, 6)}
    assert copies[0] == 1


def test_share_partitions_copy_no_partition_table_per_row() -> None:
    """A share group's rows each looked their high watermark up through a copy of the store's
    whole partition table: a /metrics scrape (twice per group) and each 5-s history sample
    were O(share-partitions x partitions)."""
    from rmqkafka.adapter.broker_state import share_partitions

    ctx, copies = fake_context(topics=50, groups=0)
    logs = ctx.store.partitions()
    copies[0] = 0
    ctx.store.built_partition = lambda name, p: logs.get((name, p))
    rows = [(f"t{i}", p) for i in range(50) for p in range(3)]
    ctx.shares = types.SimpleNamespace(partitions_of=lambda group: [(group, t, p) for t, p in rows],
                                       start_and_lag=lambda key, meta: (4, 6), get=lambda key: None,
                                       dead_letters=lambda key: 0)
    ctx.semantics.partition_count = lambda meta: meta.partitions
    ctx.groups.share = types.SimpleNamespace(groups={})
    found = share_partitions(ctx, "queue")
    assert len(found) == 150 and {(r["start"], r["end"], r["lag"]) for r in found} == {(4, 10, 6)}
    assert copies[0] <= 1
