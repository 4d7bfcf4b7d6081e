"""What the console's history samples (adapter.console_api.levels): produced levels from the
store's partitions, consumed levels from committed offsets (a view's readers on its source
topic) and share groups' start offsets, lag per group; system topics left out."""

from __future__ import annotations

import types

import pytest
from rmqkafka.adapter import console_api
from rmqkafka.rmqsemantics.views import View
from rmqkafka.storage.offset_store import CommittedOffset


def test_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    metas = {name: types.SimpleNamespace(name=name, partitions=2)
             for name in ("orders", "idle", "SCHEDULE_TOPIC_XXXX")}
    view = View.__new__(View)
    object.__setattr__(view, "name", "orders-a")
    object.__setattr__(view, "source", "orders")
    logs = {("orders", 0): 10, ("orders", 1): 5, ("SCHEDULE_TOPIC_XXXX", 0): 99}
    logs = {key: types.SimpleNamespace(next_offset=end) for key, end in logs.items()}
    committed = {"direct": {("orders", 0): 4, ("orders", 1): 5},
                 "filtered": {("orders-a", 0): 7},
                 "gone": {("deleted", 0): 3}}
    committed = {g: {tp: CommittedOffset(o, -1, "", 0) for tp, o in offs.items()} for g, offs in committed.items()}
    resolve = {**metas, "orders-a": view}.get
    ctx = types.SimpleNamespace(
        store=types.SimpleNamespace(topics=types.SimpleNamespace(get=metas.get, all=lambda: list(metas.values())),
                                    partitions=lambda: dict(logs)),
        semantics=types.SimpleNamespace(resolve=resolve),
        groups=types.SimpleNamespace(known_group_ids=lambda: sorted(committed), all_committed=committed.__getitem__,
                                     share=types.SimpleNamespace(groups={"queue": object()})),
    )
    rows = {"queue": [{"topic": "orders", "partition": 0, "start": 6, "lag": 4},
                      {"topic": "orders", "partition": 1, "start": None, "lag": None}]}
    monkeypatch.setattr(console_api, "share_partitions", lambda ctx, group: rows[group])

    sample = console_api.levels(ctx)
    assert sample.produced == {"orders": 15, "idle": 0}  # no system topic
    # direct 4 + 5, through the view 7, the share group's SPSO 6; "idle" has no reader yet: 0
    assert sample.consumed == {"orders": 4 + 5 + 7 + 6, "idle": 0}
    assert sample.lag == {"direct": 6 + 0, "filtered": 3, "gone": 0, "queue": 4}
