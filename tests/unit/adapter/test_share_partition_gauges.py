"""The per share-partition gauges of /metrics: one series per share-partition and figure, at
most MAX_SHARE_PARTITION_SERIES share-partitions a scrape, the rest counted."""

from __future__ import annotations

from types import SimpleNamespace

from rmqkafka.adapter import metrics
from rmqkafka.adapter.request_stats import RequestStats

FIGURES = ("start", "end", "in_flight", "acquired", "acknowledged", "archived", "waiting", "lag", "dead_letters")


def row(partition: int, loaded: bool = True) -> dict:
    figures = {name: partition + i for i, name in enumerate(FIGURES)}
    if not loaded:  # a share-partition with a state but not loaded: start, end and lag only
        figures.update(in_flight=None, acquired=None, acknowledged=None, archived=None, waiting=None,
                       dead_letters=None)
    return {"topic": "t", "partition": partition, "members": [], **figures}


def collect(monkeypatch, rows: dict[str, list[dict]], limit: int) -> dict:
    monkeypatch.setattr(metrics, "share_partitions", lambda ctx, group: rows[group])
    monkeypatch.setattr(metrics, "MAX_SHARE_PARTITION_SERIES", limit)
    ctx = SimpleNamespace(groups=SimpleNamespace(known_group_ids=lambda: sorted(rows) + ["classic"],
                                                 group_type=lambda g: "classic" if g == "classic" else "share"))
    collector = metrics.BrokerCollector(RequestStats(), lambda: ctx, lambda: 0, lambda: True)
    return {f.name: f for f in collector._share_partition_metrics(ctx)}


def test_every_figure_of_every_share_partition_is_a_gauge(monkeypatch):
    no_state = {**row(2), **dict.fromkeys(FIGURES)}
    families = collect(monkeypatch, {"g": [row(0), row(1, loaded=False), no_state]}, limit=100)
    start = families["rmqk_share_partition_start_offset"].samples
    assert [(s.labels, s.value) for s in start] == [
        ({"sharegroup": "g", "topic": "t", "partition": "0"}, 0),
        ({"sharegroup": "g", "topic": "t", "partition": "1"}, 1)], "no series without a state"
    assert [s.value for s in families["rmqk_share_partition_lag"].samples] == [7, 8]
    assert [s.labels["partition"] for s in families["rmqk_share_partition_acquired_records"].samples] == ["0"]
    assert families["rmqk_share_partitions_omitted"].samples[0].value == 0


def test_share_partitions_beyond_the_limit_are_counted_not_shown(monkeypatch):
    families = collect(monkeypatch, {"a": [row(p) for p in range(4)], "b": [row(p) for p in range(3)]}, limit=5)
    shown = [(s.labels["sharegroup"], s.labels["partition"])
             for s in families["rmqk_share_partition_start_offset"].samples]
    assert shown == [("a", "0"), ("a", "1"), ("a", "2"), ("a", "3"), ("b", "0")]
    assert all(len(f.samples) == 5 for name, f in families.items() if name.startswith("rmqk_share_partition_"))
    assert families["rmqk_share_partitions_omitted"].samples[0].value == 2
