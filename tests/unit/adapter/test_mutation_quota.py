"""The controller mutation quota's token bucket (KIP-599), on an injected clock."""

from __future__ import annotations

from rmqkafka.adapter.mutation_quota import MutationQuota


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def now_ms(self) -> int:
        return self.ms


def test_a_burst_then_the_rate():
    clock = Clock()
    quota = MutationQuota(10, 11, clock.now_ms)  # 10 a second, burst 110
    assert quota.try_record(100) == 0
    assert quota.try_record(100) == 0  # not empty yet (10 left): taken, into debt (-90)
    throttle = quota.try_record(1)
    assert throttle == 9000  # 90 partitions at 10 a second
    clock.ms += 8999
    assert quota.try_record(1) == 1  # still 0.01 short
    clock.ms += 1
    assert quota.try_record(5) == 0
    assert quota.throttle_ms() == 500


def test_refill_stops_at_the_burst():
    clock = Clock()
    quota = MutationQuota(10, 2, clock.now_ms)
    clock.ms += 3_600_000
    assert quota.try_record(20) == 0
    assert quota.try_record(1) == 0  # 0 left is not empty
    assert quota.try_record(1) > 0


def test_permissive_records_into_debt_and_unlimited_never_throttles():
    clock = Clock()
    quota = MutationQuota(10, 1, clock.now_ms)
    quota.record(30)
    assert quota.throttle_ms() == 2000
    unlimited = MutationQuota(None, 11, clock.now_ms)
    unlimited.record(10**9)
    assert unlimited.try_record(10**9) == 0 and unlimited.throttle_ms() == 0
