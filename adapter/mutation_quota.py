"""The controller mutation quota of KIP-599: how many partitions CreateTopics, CreatePartitions
and DeleteTopics may create or delete per second.

Kafka sets it per user and client id (the ``controller_mutation_rate`` client quota, off by
default); this broker has one budget for all clients, ``controller.mutation.rate`` (ours),
because what it protects is the one event loop and the one metadata writer. The accounting is
Kafka's token bucket (ControllerMutationQuotaManager): the bucket holds at most
``rate x controller.quota.window.num x controller.quota.window.size.seconds`` partitions
(11 s of the rate by default), refills at ``rate`` per second, and a mutation is refused
only when the bucket is already empty, so one request may take the bucket below zero (a
burst) and the requests after it wait for the debt to be paid off.

How requests are answered (Kafka's): from CreateTopics v6, CreatePartitions v3 and
DeleteTopics v5 on (strict), each topic met while the bucket is empty gets
THROTTLING_QUOTA_EXCEEDED (89) and the response's throttle_time_ms says how long until it is
not; the Java admin client retries those topics after that time. Older versions do not know
the error (permissive): Kafka does their work, answers with the throttle time and mutes the
connection for it; here such a request waits for the throttle time first, then is served,
so neither kind can make the broker mutate faster than the rate.

A client's own ``controller_mutation_rate`` quota (adapter.client_quotas, Kafka's
ControllerMutationQuotaManager: the same bucket per user and client id as KIP-55 matches
them) applies on top: a mutation must fit in both (``MutationQuotas``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from kio.schema.errors import ErrorCode

MESSAGE = "The throttling quota has been exceeded."
_EPSILON = 1e-6


class MutationQuota:
    """A token bucket of partition mutations; ``rate`` None: unlimited. ``now_ms`` is the
    broker's clock."""

    def __init__(self, rate: float | None, burst_seconds: float, now_ms: Callable[[], int]) -> None:
        self._rate = rate
        self._burst = None if rate is None else rate * burst_seconds
        self._now_ms = now_ms
        self._tokens = self._burst or 0.0
        self._at = now_ms()

    def _refill(self) -> None:
        now = self._now_ms()
        if self._rate is not None and self._burst is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate / 1000)
        self._at = now

    def throttle_ms(self) -> int:
        """0 while the bucket is not empty; otherwise the ms until it is not."""
        if self._rate is None:
            return 0
        self._refill()
        if self._tokens >= -_EPSILON:  # refills add up in floating point
            return 0
        return max(1, math.ceil(-self._tokens * 1000 / self._rate - _EPSILON))

    def try_record(self, partitions: int) -> int:
        """Strict: take ``partitions`` unless the bucket is empty; returns 0 when taken,
        otherwise the throttle time in ms (nothing taken)."""
        throttle = self.throttle_ms()
        if throttle == 0 and self._rate is not None:
            self._tokens -= partitions
        return throttle

    def record(self, partitions: int) -> None:
        """Permissive: take ``partitions`` whatever the bucket holds."""
        if self._rate is not None:
            self._refill()
            self._tokens -= partitions


class MutationQuotas:
    """Several buckets a mutation must fit in at once (the broker's, the client's
    ``controller_mutation_rate``): throttled while any is, taken from all."""

    def __init__(self, *quotas: MutationQuota) -> None:
        self._quotas = quotas

    def throttle_ms(self) -> int:
        return max(q.throttle_ms() for q in self._quotas)

    def try_record(self, partitions: int) -> int:
        throttle = self.throttle_ms()
        if throttle == 0:
            self.record(partitions)
        return throttle

    def record(self, partitions: int) -> None:
        for quota in self._quotas:
            quota.record(partitions)


def charge(quota: MutationQuota | MutationQuotas, partitions: int, strict: bool, result: dict) -> int:
    """Count one topic's ``partitions`` of a request. Strict versions: when the bucket is
    empty, ``result`` gets THROTTLING_QUOTA_EXCEEDED and the throttle time (ms) is returned;
    0 means go ahead. Permissive versions (which waited first: ``wait_for_quota``) are
    recorded whatever the bucket holds."""
    if not strict:
        quota.record(partitions)
        return 0
    throttled = quota.try_record(partitions)
    if throttled:
        result["error_code"] = ErrorCode.throttling_quota_exceeded
        result["error_message"] = MESSAGE
    return throttled


async def wait_for_quota(quota: MutationQuota | MutationQuotas) -> None:
    """A permissive (old-version) request: wait until the bucket is not empty."""
    while throttle := quota.throttle_ms():
        await asyncio.sleep(throttle / 1000)
