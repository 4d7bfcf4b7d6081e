"""The rate a client quota is measured with: Kafka's ``Rate`` over a ``SampledStat``
(org.apache.kafka.common.metrics.stats), and the throttle time of QuotaUtils.

A rate keeps at most ``samples`` windows of ``window_ms`` each, every one [start ms, sum].
A value recorded at ``now`` goes into the current window, or into a new one when the current
has lasted ``window_ms`` (its start aligned on the previous one's grid, as Kafka 3.x does);
windows older than ``samples x window_ms`` are reset before each measure. The rate is the sum
over the retained windows divided by the elapsed time since the oldest one started, that
elapsed time taken as at least ``samples - 1`` whole windows (so a first burst is spread over
the whole quota window, not over the few ms it took) and at least 1 ms.

A quota is violated when the rate measured right after a record exceeds the bound (Kafka's
``Quota.acceptable``: ``rate <= bound``); the throttle time is then
``round((rate - bound) / bound x window size)``: how long the client must stay silent for its
rate over the window to come back to the bound.

Invariant: at most ``samples`` windows, so a rate costs O(samples) memory and time whatever
its client does.
"""

from __future__ import annotations

import math


class SampledRate:
    """One entity's rate of one quota type (bytes or request time per second)."""

    __slots__ = ("_samples", "_current", "_count", "_window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self._count = samples
        self._window_ms = window_ms
        self._samples: list[list[float]] = []  # [window start ms, sum of values]
        self._current = 0

    def _current_sample(self, now_ms: int) -> list[float]:
        if not self._samples:
            self._samples.append([now_ms, 0.0])
        return self._samples[self._current]

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms >= sample[0] + self._window_ms:
            previous_end = sample[0] + self._window_ms
            start = now_ms - (now_ms - previous_end) % self._window_ms
            self._current = (self._current + 1) % self._count
            if self._current >= len(self._samples):
                self._samples.append([start, 0.0])
            else:
                self._samples[self._current][:] = [start, 0.0]
            sample = self._samples[self._current]
        sample[1] += value

    def _purge(self, now_ms: int) -> None:
        expire = self._count * self._window_ms
        for sample in self._samples:
            if now_ms - sample[0] >= expire:
                sample[:] = [now_ms, 0.0]

    def window_size_ms(self, now_ms: int) -> int:
        """The elapsed time the rate is taken over (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append([now_ms, 0.0])
        oldest = self._samples[0][0]
        for sample in self._samples:
            if sample[0] < oldest:
                oldest = sample[0]
        elapsed = now_ms - int(oldest)
        full_windows = elapsed // self._window_ms
        if full_windows < self._count - 1:
            elapsed += (self._count - 1 - full_windows) * self._window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Per second, over the retained windows."""
        return self.measure_and_window(now_ms)[0]

    def measure_and_window(self, now_ms: int) -> tuple[float, int]:
        """(the rate per second, the window size in ms it was taken over)."""
        size = self.window_size_ms(now_ms)
        total = 0.0
        for sample in self._samples:
            total += sample[1]
        return total * 1000 / size, size

    def idle_since(self, now_ms: int) -> bool:
        """Whether every window has expired: the rate is then that of a fresh one."""
        expire = self._count * self._window_ms
        return all(now_ms - s[0] >= expire for s in self._samples)


def throttle_time_ms(rate: SampledRate, bound: float, now_ms: int) -> int:
    """0 while the rate is within ``bound``; otherwise Kafka's throttle time in ms."""
    value, window_ms = rate.measure_and_window(now_ms)
    if value <= bound:
        return 0
    return int(math.floor((value - bound) / bound * window_ms + 0.5))  # Java's Math.round
