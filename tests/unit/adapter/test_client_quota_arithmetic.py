"""Client quotas: Kafka's rate and throttle arithmetic (ClientQuotaManagerTest's figures) on an
injected clock, KIP-55's precedence, the entity and value rules of AlterClientQuotas and
the filters of DescribeClientQuotas, durability, and the request time a handler is charged."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode
from rmqkafka.adapter.client_quota_rate import SampledRate, throttle_time_ms
from rmqkafka.adapter.client_quota_store import (
    CLIENT_ID,
    IP,
    USER,
    ClientQuotaStore,
    QuotaRequestError,
    validate_entity,
    validate_value,
)
from rmqkafka.adapter.client_quotas import ClientQuotas, RequestCharge, client_throttles, timed
from rmqkafka.adapter.mutation_quota import MutationQuota, MutationQuotas


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def quotas_with(*entries, samples=11, window_s=1) -> tuple[ClientQuotas, Clock]:
    clock = Clock()
    store = ClientQuotaStore(None)
    store.set({validate_entity(list(entity)): values for entity, values in entries})
    return ClientQuotas(store, samples, window_s, clock), clock


def test_kafka_quota_violation_figures():
    """ClientQuotaManagerTest.testQuotaViolation: 10 windows under the quota, then a spike."""
    quotas, clock = quotas_with(([(CLIENT_ID, "unknown")], {"producer_byte_rate": 500.0}))
    for _ in range(10):
        assert quotas.record("producer_byte_rate", "ANONYMOUS", "unknown", 400) == 0
        clock.ms += 1000
    clock.ms += 500
    # (400 x 10 + 2300) / 10.5 s = 600 B/s; (600 - 500) / 500 x 10.5 s = 2100 ms
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "unknown", 2300) == 2100
    clock.ms += 2100
    for _ in range(10):
        quotas.record("producer_byte_rate", "ANONYMOUS", "unknown", 400)
        clock.ms += 1000
    assert quotas.record("producer_byte_rate", "ANONYMOUS", "unknown", 0) == 0, "the spike has rolled over"


def test_a_first_burst_is_spread_over_the_whole_window():
    rate = SampledRate(11, 1000)
    rate.record(4000, 0)
    assert rate.window_size_ms(0) == 10_000  # samples - 1 whole windows at least
    assert rate.measure(0) == 400
    assert throttle_time_ms(rate, 500, 0) == 0
    rate.record(2000, 0)
    assert throttle_time_ms(rate, 500, 0) == 2000  # (600 - 500) / 500 x 10 s


def test_old_windows_expire_and_the_state_stays_bounded():
    rate = SampledRate(3, 1000)
    for t in range(0, 100_000, 250):
        rate.record(10, t)
        assert len(rate._samples) <= 3
    assert rate.idle_since(100_000 + 3000)
    assert rate.measure(200_000) == 0


def test_a_user_quota_is_shared_by_its_clients_a_client_quota_is_not():
    quotas, _ = quotas_with(([(USER, "alice")], {"producer_byte_rate": 100.0}),
                            ([(CLIENT_ID, None)], {"producer_byte_rate": 100.0}))
    assert quotas.record("producer_byte_rate", "alice", "a", 900) == 0
    assert quotas.record("producer_byte_rate", "alice", "b", 900) > 0  # the same rate as "a"
    assert quotas.record("producer_byte_rate", "bob", "a", 900) == 0
    assert quotas.record("producer_byte_rate", "bob", "b", 900) == 0  # each client id its own


@pytest.mark.parametrize("level", range(8))
def test_kip55_precedence(level):
    """With the levels from ``level`` on all set, the first one applies."""
    levels = [
        [(USER, "u"), (CLIENT_ID, "c")], [(USER, "u"), (CLIENT_ID, None)], [(USER, "u")],
        [(USER, None), (CLIENT_ID, "c")], [(USER, None), (CLIENT_ID, None)], [(USER, None)],
        [(CLIENT_ID, "c")], [(CLIENT_ID, None)],
    ]
    quotas, _ = quotas_with(*[(entity, {"consumer_byte_rate": float(1000 + i)})
                              for i, entity in enumerate(levels) if i >= level])
    assert quotas.store.applied("consumer_byte_rate", "u", "c").bound == 1000 + level
    assert quotas.store.applied("producer_byte_rate", "u", "c") is None
    assert quotas.max_value_in_window("consumer_byte_rate", "u", "c") == 10 * (1000 + level)


def test_clients_without_a_quota_cost_nothing():
    quotas, _ = quotas_with(([(USER, "alice")], {"producer_byte_rate": 100.0}))
    for n in range(1000):
        assert quotas.record("producer_byte_rate", "bob", f"c{n}", 10**9) == 0
        assert quotas.record("consumer_byte_rate", "alice", f"c{n}", 10**9) == 0
    assert not quotas._rates


def test_request_percentage_throttle_is_bounded_by_one_window():
    quotas, _ = quotas_with(([(USER, None)], {"request_percentage": 1.0}))
    charge = RequestCharge("alice", "c", busy_s=100.0)
    assert quotas.charge_request(charge) == 1000  # Kafka: at most quota.window.size.seconds
    assert quotas.throttled[("request_percentage", "alice", "")] == [1, 1000]


def test_a_throttled_fetch_takes_its_bytes_back():
    quotas, _ = quotas_with(([(CLIENT_ID, "c")], {"consumer_byte_rate": 100.0}))
    charge = RequestCharge("u", "c")
    assert quotas.charge_fetch(charge, 900) == 0
    assert quotas.charge_fetch(charge, 900) > 0
    assert charge.decided and charge.throttle_ms > 0
    # 900 B counted, not 1800: 950 B over 10 s is within 100 B/s
    assert quotas.charge_fetch(RequestCharge("u", "c"), 50) == 0
    assert quotas.charge_fetch(RequestCharge("u", "c"), 100) > 0


def test_produce_with_acks_0_is_not_charged_request_time():
    quotas, _ = quotas_with(([(CLIENT_ID, "c")], {"request_percentage": 1.0}))
    assert quotas.charge_produce(RequestCharge("u", "c", request_bytes=10, busy_s=5.0), acks=0) == 0
    assert quotas.charge_produce(RequestCharge("u", "c", request_bytes=10, busy_s=5.0), acks=1) > 0


def test_old_produce_and_fetch_versions_are_throttled_by_the_broker():
    assert not client_throttles(0, 5) and client_throttles(0, 6)
    assert not client_throttles(1, 7) and client_throttles(1, 8)
    assert client_throttles(3, 0)


def test_request_time_counts_what_ran_not_what_waited():
    async def handler():
        await asyncio.sleep(0.3)
        return "done"

    async def main():
        charge = RequestCharge("u", "c")
        assert await timed(handler(), charge) == "done"
        return charge.busy_s

    assert asyncio.run(main()) < 0.2


def test_request_time_wrapper_passes_exceptions_and_cancellation():
    async def failing():
        await asyncio.sleep(0)
        raise ValueError("boom")

    async def main():
        with pytest.raises(ValueError, match="boom"):
            await timed(failing(), RequestCharge("u", "c"))
        task = asyncio.ensure_future(timed(asyncio.sleep(10), RequestCharge("u", "c")))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@pytest.mark.parametrize("pairs, message", [
    ([], "Invalid empty client quota entity"),
    ([(USER, "a"), (USER, "b")], "Invalid client quota entity, duplicate entity entry user"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([(USER, "")], "Empty user not supported"),
    ([(IP, "1.2.3.4"), (USER, "a")], "Invalid quota entity combination, IP entity should"
                                     "not be combined with User or ClientId"),
    ([(IP, "not-an-ip")], "not-an-ip is not a valid IP or resolvable host."),
])
def test_entity_rules(pairs, message):
    with pytest.raises(QuotaRequestError) as raised:
        validate_entity(pairs)
    assert raised.value.code == ErrorCode.invalid_request and str(raised.value) == message


@pytest.mark.parametrize("pairs, key, value, message", [
    ([(USER, "a")], "connection_creation_rate", 5.0, "Invalid configuration key connection_creation_rate"),
    ([(IP, None)], "producer_byte_rate", 5.0, "Invalid configuration key producer_byte_rate"),
    ([(USER, "a")], "producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    ([(CLIENT_ID, "c")], "request_percentage", -1.0, "Quota request_percentage must be greater than 0"),
    ([(CLIENT_ID, "c")], "consumer_byte_rate", 1.5, "consumer_byte_rate cannot be a fractional value."),
    ([(IP, "::1")], "connection_creation_rate", 2.0**31,
     "Proposed value for connection_creation_rate is too large for an INT."),
    ([(USER, "a")], "producer_byte_rate", 2.0**64, "Proposed value for producer_byte_rate is too large for a LONG."),
])
def test_value_rules(pairs, key, value, message):
    with pytest.raises(QuotaRequestError, match="^" + message.replace("(", r"\(").replace(".", r"\.") + "$"):
        validate_value(validate_entity(pairs), key, value)


def test_fractions_are_fine_where_kafka_takes_a_double():
    validate_value(validate_entity([(USER, "a"), (CLIENT_ID, None)]), "request_percentage", 12.5)
    validate_value(validate_entity([(USER, None)]), "controller_mutation_rate", 0.5)


def test_describe_filters():
    quotas, _ = quotas_with(
        ([(USER, "alice")], {"producer_byte_rate": 1.0}),
        ([(USER, "alice"), (CLIENT_ID, "app")], {"producer_byte_rate": 2.0}),
        ([(USER, None)], {"consumer_byte_rate": 3.0}),
        ([(CLIENT_ID, "app")], {"request_percentage": 4.0}),
        ([(IP, "10.0.0.1")], {"connection_creation_rate": 5.0}),
    )
    store = quotas.store

    def found(components, strict=False):
        return sorted((tuple(sorted(dict(entity).items())) for entity, _ in store.describe(components, strict)), key=str)

    assert found([(USER, 0, "alice")]) == [((CLIENT_ID, "app"), (USER, "alice")), ((USER, "alice"),)]
    assert found([(USER, 0, "alice")], strict=True) == [((USER, "alice"),)]
    assert found([(USER, 1, None)]) == [((USER, None),)]
    assert len(found([(USER, 2, None)])) == 3  # a specified name, the default included (Kafka's image)
    assert found([(IP, 2, None)]) == [((IP, "10.0.0.1"),)]
    assert len(found([])) == 5 and found([], strict=True) == []
    for components, code, message in [
        ([("", 0, "x")], ErrorCode.invalid_request, "Invalid empty entity type."),
        ([(USER, 0, "a"), (USER, 1, None)], ErrorCode.invalid_request,
         "Entity type user cannot appear more than once in the filter."),
        ([("group", 0, "g")], ErrorCode.unsupported_version, "Unsupported entity type group"),
        ([(USER, 0, None)], ErrorCode.invalid_request,
         "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([(USER, 1, "a")], ErrorCode.invalid_request,
         "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        ([(USER, 2, "a")], ErrorCode.invalid_request,
         "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
        ([(USER, 7, None)], ErrorCode.unsupported_version, "Unsupported match type 7"),
        ([(IP, 2, None), (USER, 2, None)], ErrorCode.invalid_request,
         "Invalid entity filter component combination. IP filter component should not be used with "
         "user or clientId filter component."),
    ]:
        with pytest.raises(QuotaRequestError) as raised:
            store.describe(components, False)
        assert (raised.value.code, str(raised.value)) == (code, message)


def test_quotas_are_durable(tmp_path):
    store = ClientQuotaStore(tmp_path)
    alice = validate_entity([(USER, "alice"), (CLIENT_ID, None)])
    default_ip = validate_entity([(IP, None)])
    store.set({alice: {"producer_byte_rate": 1024.0}, default_ip: {"connection_creation_rate": 10.0}})
    store.set({default_ip: {}})
    store.close()
    again = ClientQuotaStore(tmp_path)
    assert again.get(alice) == {"producer_byte_rate": 1024.0}
    assert again.get(default_ip) == {} and again.size == 1
    assert again.applied("producer_byte_rate", "alice", "any").bound == 1024.0


def test_a_clients_controller_mutation_rate_is_its_own_token_bucket():
    quotas, clock = quotas_with(([(USER, "u")], {"controller_mutation_rate": 2.0}))
    assert quotas.mutation_quota("v", "c") is None
    mine = quotas.mutation_quota("u", "c")
    assert quotas.mutation_quota("u", "other") is mine  # a user quota: one bucket for its clients
    both = MutationQuotas(MutationQuota(None, 11, clock), mine)
    assert both.try_record(30) == 0  # a full bucket (2 x 11) may go below zero once
    assert both.try_record(1) == 4000  # 8 partitions of debt at 2 a second
    clock.ms += 4000
    assert both.try_record(1) == 0
    quotas.store.set({validate_entity([(USER, "u")]): {"controller_mutation_rate": 5.0}})
    assert quotas.mutation_quota("u", "c") is not mine  # a changed quota starts a new bucket


def test_connection_creation_rate_per_ip_and_default_ip():
    quotas, clock = quotas_with(([(IP, "10.0.0.1")], {"connection_creation_rate": 1.0}),
                                ([(IP, None)], {"connection_creation_rate": 100.0}))
    assert [quotas.connection_throttle_ms("10.0.0.1") for _ in range(10)] == [0] * 10  # 10 over 10 s
    assert quotas.connection_throttle_ms("10.0.0.1") == 1000  # (1.1 - 1) / 1 x 10 s
    assert quotas.connection_throttle_ms("10.0.0.1") == 1000  # a refused one was not counted
    assert quotas.connection_throttle_ms("10.0.0.2") == 0  # the default IP's quota
    assert quotas.connection_throttle_ms("::ffff:10.0.0.9") == 0
    assert ClientQuotaStore(None).connection_rate("10.0.0.1") is None
    assert quotas.store.connection_rate("0:0:0:0:0:0:0:1") == 100.0
