"""Counters the broker bumps on its hot paths, turned into Prometheus metrics only when scraped.

Why not prometheus_client's own Histogram on the hot path: its ``labels()`` lookup and
``observe()`` take locks, which a broker answering tens of thousands of requests a second on one
event-loop thread does not need. Everything here runs on that thread, so adding to an int or
a list slot is safe and costs a fraction of a microsecond; adapter.metrics reads these numbers
at scrape time and builds the histogram families from them.

Nothing here imports prometheus_client: a broker without a metrics port never loads it.
"""

from __future__ import annotations

from bisect import bisect_left

# Upper bounds (seconds) of the latency buckets; a last, open bucket catches the rest (+Inf).
# From half a millisecond (a cached Metadata) to 30 s (a long-polling Fetch, a slow fsync).
BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)


class Latencies:
    """One histogram: a count per bucket (non-cumulative), the total count and the sum."""

    __slots__ = ("buckets", "count", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        # bisect_left: a value equal to a bound belongs to that bound's bucket (Prometheus' le)
        self.buckets[bisect_left(BUCKETS, seconds)] += 1
        self.count += 1
        self.sum += seconds

    def cumulative(self) -> list[tuple[str, int]]:
        """The (le, cumulative count) pairs Prometheus expects, ending with +Inf."""
        out, running = [], 0
        for bound, n in zip((*map(repr, BUCKETS), "+Inf"), self.buckets):
            running += n
            out.append((bound, running))
        return out


class RequestStats:
    """Per broker: request latencies per API key, bytes in and out, fsync latencies."""

    def __init__(self) -> None:
        self.apis: dict[int, Latencies] = {}
        self.bytes_in = 0  # request bytes read from client sockets, framing included
        self.bytes_out = 0  # response bytes handed to client sockets, framing included
        self.connections_accepted = 0
        self.fsync = Latencies()  # the store's group fsyncs (see adapter.metrics.time_fsyncs)

    def observe(self, api_key: int, seconds: float) -> None:
        latencies = self.apis.get(api_key)
        if latencies is None:
            latencies = self.apis[api_key] = Latencies()
        latencies.observe(seconds)
