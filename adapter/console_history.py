"""The console's memory of the last minutes: produce and consume rates per topic and lag per
group, sampled every ``SAMPLE_INTERVAL_S`` into a ring of ``SLOTS`` samples (15 minutes).

What is kept are the series' levels at each sample, not rates: a topic's produced count is
the sum of its partitions' end offsets, its consumed count the sum of the positions groups
reached on it (committed offsets; a share group's start offset, SPSO), a group's lag the sum
of its partitions' lags. Rates are differences of consecutive levels over the time between
them, worked out when asked for, so a sample that came late (a busy loop) gives a right rate
and not a spike.

Invariants (what bounds the memory, whatever the number of topics and groups):

- at most ``MAX_SERIES`` series of each kind (produced, consumed, lag) are tracked, each a
  ring of ``SLOTS`` values aligned with one ring of sample times; nothing else outlives a
  sample;
- a series that is not tracked yet takes a free place, or the place of a tracked series that
  is idle: absent from this sample or the last, or a counter that stayed flat over a whole ring since
  it was tracked, or a lag that stayed zero; among newcomers the larger lag, then the name,
  goes first. Its points before it was tracked are None, like those of a
  series that was absent (a topic not created yet, a group that committed nothing yet);
- levels that go down (a topic deleted and made again, offsets reset backwards) give a rate
  of 0 for that interval, never a negative one.

Pure and clock-free: the caller passes each sample's monotonic and wall-clock times (the
injected clock's), so tests drive it without sleeping.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

SAMPLE_INTERVAL_S = 5.0
SLOTS = 180  # 15 minutes of 5-second samples
MAX_SERIES = 50  # per kind: at 3 kinds x 50 x 180 slots, a few hundred KiB at most
RATE_MIN_SPAN_S = 5.0  # the RATE column covers at least one whole interval once there is one
RATE_FIRST_SPAN_S = 0.5  # ... and, before that, at least this long
LOOP_SHARE = 0.01  # at most this share of the event loop goes to sampling
KINDS = ("produced", "consumed", "lag")
COUNTERS = frozenset(("produced", "consumed"))  # the others are levels charted as they are


@dataclass(frozen=True, slots=True)
class Sample:
    """One sample's levels by kind and name (built by the caller from the broker's state)."""

    produced: Mapping[str, int]  # topic -> sum of end offsets
    consumed: Mapping[str, int]  # topic -> sum of the positions groups reached on it
    lag: Mapping[str, int]  # group -> sum of its partitions' lags

    def of(self, kind: str) -> Mapping[str, int]:
        return getattr(self, kind)


class ConsoleHistory:
    def __init__(self, slots: int = SLOTS, max_series: int = MAX_SERIES) -> None:
        self._slots = slots
        self._max_series = max_series
        self._times: deque[tuple[float, int]] = deque(maxlen=slots)  # (monotonic s, wall ms)
        self._series: dict[str, dict[str, deque[int | None]]] = {kind: {} for kind in KINDS}
        self._admitted: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}  # name -> sample count then
        self._count = 0  # samples recorded
        self.omitted: dict[str, int] = dict.fromkeys(KINDS, 0)  # present but not tracked, last sample

    def record(self, mono: float, wall_ms: int, sample: Sample) -> None:
        self._times.append((mono, wall_ms))
        self._count += 1
        for kind in KINDS:
            self._record_kind(kind, sample.of(kind))

    def _record_kind(self, kind: str, values: Mapping[str, int]) -> None:
        series = self._series[kind]
        newcomers = [name for name in values if name not in series]
        if newcomers:
            self._admit(kind, newcomers, values)
        for name, ring in series.items():
            ring.append(values.get(name))
        self.omitted[kind] = sum(1 for name in values if name not in series)

    def _admit(self, kind: str, newcomers: list[str], values: Mapping[str, int]) -> None:
        series = self._series[kind]
        if kind in COUNTERS:
            newcomers.sort()
        else:  # the largest lag first: it is what a person looks for
            newcomers.sort(key=lambda name: (-values[name], name))
        free = self._max_series - len(series)
        if len(newcomers) > free:
            admitted = self._admitted[kind]
            idle = sorted(name for name, ring in series.items()
                          if name not in values or self._idle(kind, ring, admitted[name]))
            for name in idle[:len(newcomers) - free]:
                del series[name], admitted[name]
            free = self._max_series - len(series)
        for name in newcomers[:free]:
            # the new ring's last place is filled by _record_kind with this sample's value
            series[name] = deque([None] * (len(self._times) - 1), maxlen=self._slots)
            self._admitted[kind][name] = self._count

    def _idle(self, kind: str, ring: deque[int | None], admitted: int) -> bool:
        if ring[-1] is None:
            return True
        if kind not in COUNTERS:
            return not any(ring)
        # a counter is judged over a whole ring of its own, or it would give its place up the
        # moment after it took it (one known level is always "flat")
        return self._count - admitted >= self._slots and len({v for v in ring if v is not None}) <= 1

    # -- reading ----------------------------------------------------------------------------
    def rate(self, kind: str, name: str, mono: float, level: int) -> float | None:
        """Per second, from the newest sample at least RATE_MIN_SPAN_S old that has the series
        (else its oldest sample at least RATE_FIRST_SPAN_S old) to ``level`` now; None when
        there is no such sample or the series is not tracked."""
        ring = self._series[kind].get(name)
        if ring is None:
            return None
        chosen: tuple[float, int] | None = None
        for (then, _), before in zip(reversed(self._times), reversed(ring), strict=False):
            if before is None or mono - then < RATE_FIRST_SPAN_S:
                continue
            chosen = (then, before)
            if mono - then >= RATE_MIN_SPAN_S:
                break
        if chosen is None:
            return None
        then, before = chosen
        return round(max(0, level - before) / (mono - then), 2)

    def document(self) -> dict:
        """The charts' data: sample times (wall ms) and, per series, a value per sample (rates
        per second for counters, the level for lag; None where unknown)."""
        times = list(self._times)
        out: dict = {"interval_s": SAMPLE_INTERVAL_S, "window_s": SAMPLE_INTERVAL_S * self._slots,
                     "max_series": self._max_series, "times_ms": [wall for _, wall in times],
                     "omitted": dict(self.omitted)}
        for kind in KINDS:
            rows = {}
            for name, ring in sorted(self._series[kind].items()):
                values = list(ring)[-len(times):] if times else []
                rows[name] = _rates(times, values) if kind in COUNTERS else values
            out[kind] = rows
        return out


def pause_after(took_s: float) -> float:
    """How long the sampler waits after a sample that took ``took_s``: the interval, or longer
    when samples got expensive (thousands of partitions and committed offsets), so that
    sampling never holds more than LOOP_SHARE of the loop. Rates stay right: they divide by
    the real time between samples."""
    return max(SAMPLE_INTERVAL_S, took_s / LOOP_SHARE)


def _rates(times: list[tuple[float, int]], levels: list[int | None]) -> list[float | None]:
    out: list[float | None] = [None]
    for i in range(1, len(levels)):
        before, after = levels[i - 1], levels[i]
        span = times[i][0] - times[i - 1][0]
        if before is None or after is None or span <= 0:
            out.append(None)
        else:
            out.append(round(max(0, after - before) / span, 2))
    return out
