"""The console's ring of samples (adapter.console_history): rates from levels, the RATE
column's span, bounded memory whatever the number of topics, and the vendored chart library."""

from __future__ import annotations

from pathlib import Path

from rmqkafka.adapter.console_history import (
    MAX_SERIES,
    SAMPLE_INTERVAL_S,
    SLOTS,
    ConsoleHistory,
    Sample,
    pause_after,
)
from rmqkafka.storage.clock import ManualClock

VENDOR = Path(__file__).resolve().parents[3] / "adapter" / "console" / "vendor"


def sample(produced=None, consumed=None, lag=None) -> Sample:
    return Sample(produced or {}, consumed or {}, lag or {})


def record(history: ConsoleHistory, clock: ManualClock, s: Sample, after_s: float = SAMPLE_INTERVAL_S) -> None:
    clock.advance(int(after_s * 1000))
    history.record(clock.monotonic(), clock.now_ms(), s)


def test_rates_are_level_differences_over_the_real_time_between_samples() -> None:
    clock, history = ManualClock(), ConsoleHistory()
    record(history, clock, sample({"t": 0}, {"t": 0}, {"g": 0}))
    record(history, clock, sample({"t": 50}, {"t": 10}, {"g": 40}))  # 5 s later
    record(history, clock, sample({"t": 150}, {"t": 110}, {"g": 40}), after_s=10.0)  # a late sample
    doc = history.document()
    assert doc["times_ms"] == [1_700_000_005_000, 1_700_000_010_000, 1_700_000_020_000]
    assert doc["produced"] == {"t": [None, 10.0, 10.0]}
    assert doc["consumed"] == {"t": [None, 2.0, 10.0]}
    assert doc["lag"] == {"g": [0, 40, 40]}  # lag is charted as a level


def test_a_level_that_goes_down_is_no_negative_rate_and_absence_is_a_gap() -> None:
    clock, history = ManualClock(), ConsoleHistory()
    record(history, clock, sample({"t": 100}))
    record(history, clock, sample({"t": 5}))  # deleted and created again
    record(history, clock, sample({}))  # gone
    record(history, clock, sample({"t": 30}))
    assert history.document()["produced"]["t"] == [None, 0.0, None, None]


def test_a_series_new_since_earlier_samples_has_gaps_before_it() -> None:
    clock, history = ManualClock(), ConsoleHistory()
    record(history, clock, sample({"a": 0}))
    record(history, clock, sample({"a": 5, "b": 7}))
    record(history, clock, sample({"a": 10, "b": 17}))
    doc = history.document()
    assert doc["produced"] == {"a": [None, 1.0, 1.0], "b": [None, None, 2.0]}


def test_the_rate_column_spans_at_least_one_interval_once_there_is_one() -> None:
    clock, history = ManualClock(), ConsoleHistory()
    assert history.rate("produced", "t", clock.monotonic(), 0) is None  # nothing sampled yet
    record(history, clock, sample({"t": 0}))
    assert history.rate("produced", "t", clock.monotonic(), 3) is None  # the sample is this instant
    clock.advance(1000)
    assert history.rate("produced", "t", clock.monotonic(), 3) == 3.0  # young broker: since the first
    record(history, clock, sample({"t": 3}), after_s=4.0)
    record(history, clock, sample({"t": 33}), after_s=5.0)
    clock.advance(2000)
    # the newest sample 5 s old or more: the one at 3 (7 s ago), not the one 2 s ago
    assert history.rate("produced", "t", clock.monotonic(), 40) == round(37 / 7, 2)
    assert history.rate("produced", "unknown", clock.monotonic(), 40) is None
    assert history.rate("produced", "t", clock.monotonic(), 1) == 0.0  # never negative


def test_the_ring_keeps_fifteen_minutes() -> None:
    clock, history = ManualClock(), ConsoleHistory()
    for i in range(SLOTS + 20):
        record(history, clock, sample({"t": i * 5}))
    doc = history.document()
    assert len(doc["times_ms"]) == SLOTS and len(doc["produced"]["t"]) == SLOTS
    assert doc["window_s"] == SLOTS * SAMPLE_INTERVAL_S == 900
    assert doc["produced"]["t"][1:] == [1.0] * (SLOTS - 1)


def test_memory_is_bounded_whatever_the_number_of_topics_and_idle_series_make_room() -> None:
    clock, history = ManualClock(), ConsoleHistory()
    many = 10 * MAX_SERIES
    for step in range(3):
        record(history, clock, sample({f"t{i:04}": step for i in range(many)}, {},
                                      {f"g{i:04}": i for i in range(many)}))
    doc = history.document()
    assert len(doc["produced"]) == MAX_SERIES and history.omitted["produced"] == many - MAX_SERIES
    # the largest lags are kept; among them none is idle, so none gives its place up
    assert sorted(doc["lag"]) == sorted(f"g{i:04}" for i in range(many - MAX_SERIES, many))
    assert history.omitted["lag"] == many - MAX_SERIES
    # all the tracked topics grew, so a new busy topic waits for a place
    record(history, clock, sample({**{f"t{i:04}": 3 for i in range(many)}, "busy": 0}))
    assert "busy" not in history.document()["produced"]
    # once the tracked topics stay flat over the ring, they give their places up to newcomers
    for _ in range(SLOTS):
        record(history, clock, sample({**{f"t{i:04}": 3 for i in range(many)}, "busy": 0}))
    record(history, clock, sample({**{f"t{i:04}": 3 for i in range(many)}, "busy": 100}))
    produced = history.document()["produced"]
    assert len(produced) == MAX_SERIES and "busy" in produced
    sizes = [len(ring) for kind in history._series.values() for ring in kind.values()]
    assert max(sizes) <= SLOTS and len(sizes) <= 3 * MAX_SERIES


def test_sampling_never_holds_more_than_a_percent_of_the_loop() -> None:
    assert pause_after(0.001) == SAMPLE_INTERVAL_S
    assert pause_after(0.05) == SAMPLE_INTERVAL_S  # 1 % of 5 s
    assert pause_after(0.2) == 20.0  # an expensive sample waits 100 times as long


def test_the_vendored_chart_library_is_uplot_with_its_licence() -> None:
    js = (VENDOR / "uPlot.iife.min.js").read_text()
    assert js.startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
    assert "The MIT License" in (VENDOR / "uPlot.LICENSE").read_text()
    assert "1.6.32" in (VENDOR / "README.md").read_text()
    assert (VENDOR / "uPlot.min.css").read_text().startswith(".uplot")


def test_every_console_file_is_package_data() -> None:
    import tomllib

    pyproject = tomllib.loads((VENDOR.parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["rmqkafka.adapter.console"]
    console = VENDOR.parent
    files = [p.relative_to(console).as_posix() for p in console.rglob("*") if p.is_file()]
    assert "vendor/uPlot.iife.min.js" in files and "vendor/uPlot.LICENSE" in files
    # setuptools' globs, like Path.glob's, do not cross folders: "*.js" is not vendor/*.js
    covered = {p.relative_to(console).as_posix() for pattern in patterns for p in console.glob(pattern)}
    missing = [f for f in files if f not in covered and "__pycache__" not in f and f != "__init__.py"]
    assert not missing, f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"


def test_a_series_gone_in_this_sample_gives_its_place_to_a_newcomer_of_the_same_sample() -> None:
    """Topics deleted and others created between two samples: before, the gone ones counted
    as idle only once a sample had recorded them absent, so the newcomers waited a sample,
    and with steady churn every other sample charted nothing new."""
    clock, history = ManualClock(), ConsoleHistory()
    record(history, clock, sample({f"old{i:03}": 1 for i in range(MAX_SERIES)}, {},
                                  {f"g-old{i:03}": 1 for i in range(MAX_SERIES)}))
    record(history, clock, sample({f"new{i:03}": 1 for i in range(MAX_SERIES)}, {},
                                  {f"g-new{i:03}": 1 for i in range(MAX_SERIES)}))
    doc = history.document()
    assert sorted(doc["produced"]) == [f"new{i:03}" for i in range(MAX_SERIES)]
    assert sorted(doc["lag"]) == [f"g-new{i:03}" for i in range(MAX_SERIES)]
    assert history.omitted == {"produced": 0, "consumed": 0, "lag": 0}
