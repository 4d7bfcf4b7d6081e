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
