"""Client quota enforcement as Kafka's ClientQuotaManager and ClientRequestQuotaManager do
it (KIP-13, KIP-55, KIP-124, KIP-219): produce bytes, fetch bytes and request time per
client, each measured as a rate (adapter.client_quota_rate) against the quota that applies
(adapter.client_quota_store), and the throttle time that follows.

What is charged, as KafkaApis does:
- Produce: the request's size in bytes against ``producer_byte_rate``, and (acks != 0) the
  request's time against ``request_percentage``; the response carries the larger throttle.
- Fetch: the response's size against ``consumer_byte_rate`` (a fetch never asks for more
  than ``(quota.window.num - 1) x quota.window.size.seconds x quota`` bytes, Kafka's
  getMaxValueInQuotaWindow); when throttled, the bytes are taken back and the answer is an
  empty response with the throttle time (the consumer fetches the same data again later).
- ShareFetch (KIP-932: the same fetch sensor as Fetch): the response's size against
  ``consumer_byte_rate`` (MaxBytes bounded the same way), and its time; the response keeps
  its records (they are acquired: answering empty would leave them locked until their
  acquisition lock expires) and carries the larger throttle, then the connection is muted.
  ShareAcknowledge is charged as any request.
- Every other request after authentication: its time against ``request_percentage``, the
  throttle bounded by one quota window (Kafka's ClientRequestQuotaManager).
- A new connection: against its IP's ``connection_creation_rate`` (KIP-612); one over it
  is read no more and closed after the throttle time, unserved, as Kafka's acceptor does
  (the metrics show it with the address as the user).
- CreateTopics, CreatePartitions, DeleteTopics and Metadata's auto-creation: their
  partitions against ``controller_mutation_rate`` too, a token bucket per matched entity
  (``mutation_quota``; adapter.mutation_quota says how requests are answered).
Request time is the time the handler's code ran on the event loop (each step of its
coroutine timed: ``timed``), not the time it waited for an fsync or a long poll: what
Kafka counts as request handler thread time. 100 = one event loop fully busy.

Then the connection (adapter.connection) sends the response at once and reads nothing more
from that client for the throttle time (KIP-219); a Produce below v6 or a Fetch below v8,
whose client does not throttle itself, gets its response only after the throttle time.

Cost: a client with no quota that applies costs one dict lookup per key; a rate is kept per
(key, user, client id) the matched quota splits by, at most ``MAX_RATES`` of them (the least
recently used dropped first: a dropped one is only forgotten history).
"""

from __future__ import annotations

import contextvars
import time
import types
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from .client_quota_rate import SampledRate, throttle_time_ms
from .client_quota_store import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaStore,
)
from .mutation_quota import MutationQuota

MAX_RATES = 100_000
MAX_THROTTLED_TRACKED = 10_000  # (key, user, client id) throttle counters kept for metrics
# The first version of each API whose client throttles itself (KIP-219); older ones get
# their response late instead.
CLIENT_THROTTLES_SINCE = {0: 6, 1: 8}


@dataclass(slots=True)
class RequestCharge:
    """One request's quota accounting, shared by the connection and the handler."""

    user: str
    client_id: str
    request_bytes: int = 0
    busy_s: float = 0.0  # the time the handler's code ran so far
    throttle_ms: int = 0  # the response's throttle time, once decided
    decided: bool = False  # the handler charged its request itself (Produce, Fetch)


CHARGE: contextvars.ContextVar[RequestCharge | None] = contextvars.ContextVar("quota_charge", default=None)


@types.coroutine
def timed(coro: Coroutine[Any, Any, Any], charge: RequestCharge):
    """Await ``coro``, adding the time each of its steps runs to ``charge.busy_s``."""
    send, throw = coro.send, coro.throw
    value: Any = None
    error: BaseException | None = None
    while True:
        began = time.perf_counter()
        try:
            yielded = send(value) if error is None else throw(error)
        except StopIteration as done:
            charge.busy_s += time.perf_counter() - began
            return done.value
        except BaseException:
            charge.busy_s += time.perf_counter() - began
            raise
        charge.busy_s += time.perf_counter() - began
        try:
            value, error = (yield yielded), None
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - thrown into the coroutine, as await does
            value, error = None, exc


class ClientQuotas:
    """The quotas in force and every client's measured rates; one per broker."""

    def __init__(self, store: ClientQuotaStore, samples: int, window_seconds: int,
                 now_ms: Callable[[], int], mutation_burst_seconds: float = 11) -> None:
        self.store = store
        self._mutation_burst_seconds = mutation_burst_seconds
        # (user, client id) -> (its controller_mutation_rate, its token bucket)
        self._buckets: dict[tuple[str, str], tuple[float, MutationQuota]] = {}
        self._samples = samples
        self._window_ms = window_seconds * 1000
        self._now_ms = now_ms
        self._rates: dict[tuple[str, str, str], SampledRate] = {}
        # (key, user, client id) -> [throttled responses, total throttle ms], for metrics
        self.throttled: dict[tuple[str, str, str], list[int]] = {}

    def _rate(self, key: str, user: str, client_id: str) -> SampledRate:
        tags = (key, user, client_id)
        rate = self._rates.pop(tags, None)  # re-inserted last: the dict is in LRU order
        if rate is None:
            rate = SampledRate(self._samples, self._window_ms)
            if len(self._rates) >= MAX_RATES:
                del self._rates[next(iter(self._rates))]
        self._rates[tags] = rate
        return rate

    def record(self, key: str, user: str, client_id: str, value: float) -> int:
        """Record ``value`` for this client; the throttle time in ms (0: within quota)."""
        applied = self.store.applied(key, user, client_id)
        if applied is None:
            return 0
        rate = self._rate(key, applied.user, applied.client_id)
        now = self._now_ms()
        rate.record(value, now)
        throttle = throttle_time_ms(rate, applied.bound, now)
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, self._window_ms)
        if throttle:
            self._count_throttle(key, applied.user, applied.client_id, throttle)
        return throttle

    def unrecord(self, key: str, user: str, client_id: str, value: float) -> None:
        """Take back what ``record`` added (a throttled fetch sends nothing)."""
        applied = self.store.applied(key, user, client_id)
        if applied is not None:
            self._rate(key, applied.user, applied.client_id).record(-value, self._now_ms())

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: the most a quota lets through in one window."""
        applied = self.store.applied(key, user, client_id)
        if applied is None:
            return None
        return (self._samples - 1) * self._window_ms / 1000 * applied.bound

    def connection_throttle_ms(self, host: str) -> int:
        """A new connection from ``host``: 0 to serve it, else the ms after which it is to be
        closed unserved (Kafka's ConnectionQuotas: a refused connection is not counted)."""
        bound = self.store.connection_rate(host)
        if bound is None:
            return 0
        rate = self._rate(CONNECTION_CREATION_RATE, host, "")
        now = self._now_ms()
        rate.record(1, now)
        throttle = throttle_time_ms(rate, bound, now)
        if throttle:
            rate.record(-1, now)
            self._count_throttle(CONNECTION_CREATION_RATE, host, "", throttle)
        return throttle

    def mutation_quota(self, user: str, client_id: str) -> MutationQuota | None:
        """The client's ``controller_mutation_rate`` bucket (Kafka's per-entity token bucket,
        burst of ``controller.quota.window.num x size`` seconds of it), None without one."""
        applied = self.store.applied(CONTROLLER_MUTATION_RATE, user, client_id)
        if applied is None:
            return None
        tags = (applied.user, applied.client_id)
        held = self._buckets.pop(tags, None)  # re-inserted last: LRU order
        if held is None or held[0] != applied.bound:
            held = (applied.bound, MutationQuota(applied.bound, self._mutation_burst_seconds, self._now_ms))
            if len(self._buckets) >= MAX_RATES:
                del self._buckets[next(iter(self._buckets))]
        self._buckets[tags] = held
        return held[1]

    def _count_throttle(self, key: str, user: str, client_id: str, throttle_ms: int) -> None:
        counters = self.throttled.get((key, user, client_id))
        if counters is None:
            if len(self.throttled) >= MAX_THROTTLED_TRACKED:
                del self.throttled[next(iter(self.throttled))]
            counters = self.throttled[(key, user, client_id)] = [0, 0]
        counters[0] += 1
        counters[1] += throttle_ms

    # -- what requests are charged -------------------------------------------------------
    def charge_request(self, charge: RequestCharge) -> int:
        """Any request: its handler's time against ``request_percentage``."""
        return self.record(REQUEST_PERCENTAGE, charge.user, charge.client_id, charge.busy_s * 100)

    def charge_produce(self, charge: RequestCharge, acks: int) -> int:
        """A Produce: its bytes, and (acks != 0) its time; the response's throttle time."""
        produce = self.record(PRODUCER_BYTE_RATE, charge.user, charge.client_id, charge.request_bytes)
        request = 0 if acks == 0 else self.charge_request(charge)
        charge.decided = True
        charge.throttle_ms = max(produce, request)
        return charge.throttle_ms

    def fetch_limit(self, charge: RequestCharge | None) -> float | None:
        if charge is None:
            return None
        return self.max_value_in_window(CONSUMER_BYTE_RATE, charge.user, charge.client_id)

    def charge_fetch(self, charge: RequestCharge, response_bytes: int) -> int:
        """A Fetch answer of ``response_bytes``: the throttle time; when not 0, the bytes
        were taken back and the caller answers empty."""
        fetch = self.record(CONSUMER_BYTE_RATE, charge.user, charge.client_id, response_bytes)
        request = self.charge_request(charge)
        throttle = max(fetch, request)
        if throttle:
            self.unrecord(CONSUMER_BYTE_RATE, charge.user, charge.client_id, response_bytes)
        charge.decided = True
        charge.throttle_ms = throttle
        return throttle

    def charge_share_fetch(self, charge: RequestCharge, response_bytes: int) -> int:
        """A ShareFetch answer of ``response_bytes`` (records already acquired for the
        member): recorded, and the throttle time its response carries."""
        fetch = self.record(CONSUMER_BYTE_RATE, charge.user, charge.client_id, response_bytes)
        charge.decided = True
        charge.throttle_ms = max(fetch, self.charge_request(charge))
        return charge.throttle_ms


def client_throttles(api_key: int, api_version: int) -> bool:
    """Whether a client of this version throttles itself (KIP-219), so its response may go
    at once; older Produce and Fetch versions get their response after the throttle time."""
    return api_version >= CLIENT_THROTTLES_SINCE.get(api_key, 0)
