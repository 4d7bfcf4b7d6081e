"""Client quotas (issue 25) against a real broker process: AlterClientQuotas and
DescribeClientQuotas (Kafka's entity model, errors, validate_only, kept across a restart),
a confluent-kafka producer and consumer held to their byte rates with the throttle callback
firing, a throttled fetch answered empty, and the connection muted for the throttle time
(KIP-219).

Neither confluent-kafka 2.16 nor kafka-python 3.0 exposes the quota admin calls, so those
requests are sent by ``rawkafka`` (encoded as a client encodes them)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS, METADATA = 48, 49, 3
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def alter(conn: KafkaRaw, entity: dict, ops: dict, validate_only: bool = False, version: int = 1):
    """One entry: ``ops`` key -> value (None removes); returns (error code, message)."""
    response = conn.request(ALTER_CLIENT_QUOTAS, version, validate_only=validate_only, entries=[dict(
        entity=[dict(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[dict(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])])
    (entry,) = response.entries
    return entry.error_code, entry.error_message


def describe(conn: KafkaRaw, components: list[tuple[str, int, str | None]], strict: bool = False, version=1):
    response = conn.request(DESCRIBE_CLIENT_QUOTAS, version, strict=strict, components=[
        dict(entity_type=t, match_type=m, match=n) for t, m, n in components])
    if response.error_code != ErrorCode.none:
        return response.error_code, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_alter_and_describe_quotas_kept_across_a_restart(broker_factory):
    broker = broker_factory()
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        assert alter(conn, {"user": "alice"}, {"producer_byte_rate": 1024, "request_percentage": 12.5}) == (
            ErrorCode.none, None)
        assert alter(conn, {"user": "alice", "client-id": None}, {"consumer_byte_rate": 2048})[0] == ErrorCode.none
        assert alter(conn, {"client-id": None}, {"producer_byte_rate": 10}, version=0)[0] == ErrorCode.none
        assert alter(conn, {"ip": "127.0.0.1"}, {"connection_creation_rate": 5})[0] == ErrorCode.none
        assert alter(conn, {"user": "bob"}, {"producer_byte_rate": 99}, validate_only=True)[0] == ErrorCode.none
        assert alter(conn, {"client-id": None}, {"producer_byte_rate": None})[0] == ErrorCode.none
        expected = {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
            (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0},
        }
        assert describe(conn, [("user", EXACT, "alice")]) == expected
        assert describe(conn, [("user", EXACT, "alice")], strict=True, version=0) == {
            (("user", "alice"),): expected[(("user", "alice"),)]}
        assert describe(conn, [("user", EXACT, "bob")]) == {}  # validate_only stored nothing
        assert describe(conn, [("ip", SPECIFIED, None)]) == {(("ip", "127.0.0.1"),): {"connection_creation_rate": 5.0}}
    broker.restart()
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        assert describe(conn, [("user", EXACT, "alice")]) == expected
        assert describe(conn, [("client-id", DEFAULT, None)]) == {
            (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0}}


def test_errors_are_kafkas(broker_factory):
    broker = broker_factory()
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        for entity, ops, message in [
            ({"user": "a"}, {"connection_creation_rate": 1}, "Invalid configuration key connection_creation_rate"),
            ({"user": "a"}, {"bogus": 1}, "Invalid configuration key bogus"),
            ({"client-id": "c"}, {"producer_byte_rate": 0}, "Quota producer_byte_rate must be greater than 0"),
            ({"client-id": "c"}, {"consumer_byte_rate": 1.5}, "consumer_byte_rate cannot be a fractional value."),
            ({"ip": "1.2.3.4", "user": "a"}, {"connection_creation_rate": 1},
             "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
            ({"group": "g"}, {"producer_byte_rate": 1}, "Unhandled client quota entity type: group"),
            ({"user": ""}, {"producer_byte_rate": 1}, "Empty user not supported"),
        ]:
            assert alter(conn, entity, ops) == (ErrorCode.invalid_request, message)
        assert describe(conn, [("user", EXACT, None)]) == (
            ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
        assert describe(conn, [("group", EXACT, "g")]) == (ErrorCode.unsupported_version,
                                                            "Unsupported entity type group")
        assert describe(conn, []) == {}  # nothing was stored by the refused alterations


def test_a_refusal_echoing_a_huge_entity_still_fits_a_v0_answer(broker_factory):
    """Hostile sweep: the message of a refused entry repeats the client's entity, and v0's
    error_message is a legacy string (at most 32767 bytes). An entity type of 32,000
    characters, or a duplicated entity of 3,000 components, made a message that did not
    encode: the connection was closed with a traceback instead of an answer."""
    broker = broker_factory()
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        code, message = alter(conn, {"t" * 32_000: "a"}, {"producer_byte_rate": 1}, version=0)
        assert code == ErrorCode.invalid_request
        assert message.startswith("Unhandled client quota entity type: ttt") and len(message.encode()) <= 32767
        entity = [dict(entity_type=f"type-{i}", entity_name="n") for i in range(3000)]
        entry = dict(entity=entity, ops=[dict(key="producer_byte_rate", value=1.0, remove=False)])
        response = conn.request(ALTER_CLIENT_QUOTAS, 0, validate_only=False, entries=[entry, entry])
        (answer,) = response.entries
        assert answer.error_code == ErrorCode.invalid_request
        assert answer.error_message.startswith("Ignoring duplicate entity ClientQuotaEntity(entries={type-0=n")
        assert len(answer.error_message.encode()) <= 32767
        # v1's compact string holds the whole message
        assert alter(conn, {"t" * 32_000: "a"}, {"producer_byte_rate": 1}) == (
            ErrorCode.invalid_request, "Unhandled client quota entity type: " + "t" * 32_000)
    assert "Traceback" not in broker.stderr


def set_quota(conn: KafkaRaw, entity: dict, ops: dict) -> None:
    """``alter``, which must succeed."""
    assert alter(conn, entity, ops)[0] == ErrorCode.none


def unique(prefix: str) -> str:
    """``prefix`` and 8 random hex digits: a name no earlier run left behind."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topic_with_quota(broker: Any, entity: dict, ops: dict) -> str:
    """A new one-partition topic, and the quota ``ops`` set on ``entity``."""
    topic = unique("q")
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        admin.create_topic(topic)
        set_quota(admin, entity, ops)
    return topic


@pytest.fixture
def quick_windows_broker(broker_factory: Any, tmp_path: Any) -> Any:
    """A broker measuring rates over 3 windows of 1 s: the first burst is 2 s of quota, so a
    steady rate shows within seconds."""
    config = tmp_path / "server.properties"
    config.write_text("quota.window.num=3\nquota.window.size.seconds=1\n")
    return broker_factory(config_file=config)


def steady(samples: Iterable[tuple[float, int]]) -> float:
    """Bytes a second of the (seconds after the first, bytes) ``samples`` from 3 s to 9 s:
    the seconds before are the burst a new rate allows."""
    return sum(size for at, size in samples if 3 <= at < 9) / 6


def steady_read_rate(poll: Callable[[], Iterable[Any]]) -> float:
    """``steady`` of the record values ``poll`` returns (error events passed over), polled
    until 9 s after the first record, or for 60 s at the most."""
    received: list[tuple[float, int]] = []
    began = None
    deadline = time.monotonic() + 60
    while (began is None or time.monotonic() - began < 9) and time.monotonic() < deadline:
        for message in poll():
            if message.error() is None:
                began = began or time.monotonic()
                received.append((time.monotonic() - began, len(message.value())))
    return steady(received)


def _producer_config(bootstrap: str, client_id: str, throttles: list) -> dict:
    return {"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
            "queue.buffering.max.kbytes": 4096}


def test_a_producer_is_held_to_its_byte_rate_and_told_the_throttle_time(broker_factory):
    broker = broker_factory()
    rate = 200_000
    topic = topic_with_quota(broker, {"client-id": "slow-producer"}, {"producer_byte_rate": rate})
    throttles: list[float] = []
    delivered: list[tuple[float, int]] = []
    producer = Producer(_producer_config(broker.bootstrap_servers, "slow-producer", throttles))
    value = b"x" * 10_000
    began = time.monotonic()
    while time.monotonic() - began < 9:
        try:
            producer.produce(topic, value, on_delivery=lambda err, msg: err is None and delivered.append(
                (time.monotonic() - began, len(msg.value()))))
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    # the first ~10 s of quota (window.num - 1 windows) pass at once; after that, the rate
    measured = steady(delivered)
    print(f"producer at {rate} B/s quota: {measured:.0f} B/s from 3 s to 9 s, throttle_cb max {max(throttles or [0])} s")
    assert 0.3 * rate < measured < 2.5 * rate, measured
    assert throttles and max(throttles) > 0, "confluent-kafka's throttle_cb never fired"


def test_a_consumer_is_held_to_its_byte_rate(quick_windows_broker):
    broker = quick_windows_broker
    topic = unique("q")
    rate = 200_000
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        conn.create_topic(topic)
    # small batches: a fetch always returns its first batch whole (KIP-74), so a batch larger
    # than a quota window's worth would be throttled for ever, in Kafka as here
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20, "batch.size": 20_000})
    for _ in range(800):  # 8 MB, unthrottled
        producer.produce(topic, b"y" * 10_000)
        producer.poll(0)
    assert producer.flush(60) == 0
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        set_quota(conn, {"client-id": "slow-consumer"}, {"consumer_byte_rate": rate})
    throttles: list[float] = []
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "slow-consumer",
                         "group.id": unique("g"), "auto.offset.reset": "earliest",
                         "max.partition.fetch.bytes": 100_000,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    consumer.subscribe([topic])
    try:
        measured = steady_read_rate(lambda: filter(None, [consumer.poll(0.2)]))
    finally:
        consumer.close()
    print(f"consumer at {rate} B/s quota: {measured:.0f} B/s from 3 s to 9 s, throttle_cb max {max(throttles or [0])} s")
    assert 0.3 * rate < measured < 2.5 * rate, (measured, throttles)
    assert throttles and max(throttles) > 0


def test_throttled_connection_is_muted_and_throttled_fetch_answered_empty(broker_factory):
    broker = broker_factory(args=["--metrics-port", "0"])
    topic = topic_with_quota(broker, {"client-id": "muted"}, {"producer_byte_rate": 1000, "consumer_byte_rate": 1000})
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="muted", timeout=30) as conn:
        # ~12 kB over the 10 s the first window is taken over: 1200 B/s, (1200 - 1000) / 1000 x 10 s
        response = conn.produce_request({(topic, 0): make_batch([b"z" * 12_000])})
        throttle_ms = response.throttle_time.total_seconds() * 1000
        assert throttle_ms > 500, throttle_ms
        began = time.monotonic()
        conn.metadata([topic])  # read only once the mute ends
        waited = time.monotonic() - began
        assert waited >= 0.8 * throttle_ms / 1000, (waited, throttle_ms)
        # the consumer side: a window's worth at most, then an empty answer with the throttle time
        answers = []
        for _ in range(3):
            fetched = conn.request(1, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=10_000_000,
                                   isolation_level=0, session_id=0, session_epoch=-1, topics=[dict(
                                       topic=topic, partitions=[dict(partition=0, current_leader_epoch=-1,
                                                                     fetch_offset=0, last_fetched_epoch=-1,
                                                                     log_start_offset=-1,
                                                                     partition_max_bytes=10_000_000)])],
                                   forgotten_topics_data=(), rack_id="")
            answers.append(fetched)
            if fetched.throttle_time.total_seconds() > 0:
                break
        throttled = answers[-1]
        assert throttled.throttle_time.total_seconds() > 0
        assert throttled.responses == ()  # Kafka's throttled fetch: no partitions at all
        metrics = _scrape(broker.metrics_url)
        assert metrics[("rmqk_client_quota_throttled_responses_total",
                        frozenset({("quota", "producer_byte_rate"), ("user", ""), ("client_id", "muted")}))] >= 1
        assert metrics[("rmqk_client_quota_throttle_seconds_total",
                        frozenset({("quota", "consumer_byte_rate"), ("user", ""), ("client_id", "muted")}))] > 0
        import json
        import urllib.request

        with urllib.request.urlopen(broker.metrics_url + "/api/quotas", timeout=10) as answer:
            console = json.loads(answer.read())
        assert console["entities"] == [{"entity": {"client-id": "muted"},
                                        "quotas": {"consumer_byte_rate": 1000.0, "producer_byte_rate": 1000.0}}]
        assert {(t["quota"], t["client_id"]) for t in console["throttled"]} == {
            ("producer_byte_rate", "muted"), ("consumer_byte_rate", "muted")}


def test_an_old_produce_version_gets_its_answer_after_the_throttle_time(broker_factory):
    broker = broker_factory()
    topic = topic_with_quota(broker, {"client-id": "old"}, {"producer_byte_rate": 1000})
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="old", timeout=30) as conn:
        began = time.monotonic()
        response = conn.produce_request({(topic, 0): make_batch([b"z" * 12_000])}, version=5)
        waited = time.monotonic() - began
        throttle_s = response.throttle_time.total_seconds()
        assert throttle_s > 0.5 and waited >= 0.8 * throttle_s, (waited, throttle_s)  # KIP-219: v5 < v6


def test_request_percentage_throttles_any_request(broker_factory):
    broker = broker_factory()
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        # the default user: ANONYMOUS here; 0.01 % of the event loop, ~1 ms of handling per 10 s
        set_quota(admin, {"user": None}, {"request_percentage": 0.01})
        with KafkaRaw.connect(broker.bootstrap_servers, client_id="busy", timeout=30) as conn:
            throttle = 0.0
            for _ in range(2000):
                throttle = conn.metadata(None).throttle_time.total_seconds()
                if throttle:
                    break
            assert 0 < throttle <= 1.0  # bounded by one quota window (Kafka's request quota)
        set_quota(admin, {"user": None}, {"request_percentage": None})


def test_a_clients_controller_mutation_rate_throttles_its_topic_creation(broker_factory):
    broker = broker_factory()
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        set_quota(admin, {"client-id": "creator"}, {"controller_mutation_rate": 1})
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="creator") as conn:
        first = conn.create_topics({unique("m"): 20})  # 11 s of burst, taken below 0
        assert first.topics[0].error_code == ErrorCode.none
        second = conn.create_topics({unique("m"): 1})
        assert second.topics[0].error_code == ErrorCode.throttling_quota_exceeded
        assert second.throttle_time.total_seconds() > 5  # 9 partitions of debt at 1 a second
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="someone-else") as other:
        assert other.create_topics({unique("m"): 1}).topics[0].error_code == ErrorCode.none


def test_connections_over_an_ips_creation_rate_are_closed_unserved(broker_factory):
    from rawkafka import ConnectionClosed

    broker = broker_factory()
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        set_quota(admin, {"ip": "127.0.0.1"}, {"connection_creation_rate": 1})
    served = refused = 0
    for _ in range(20):
        with KafkaRaw.connect(broker.bootstrap_servers, timeout=30) as conn:
            try:
                conn.api_versions()
                served += 1
            except ConnectionClosed:
                refused += 1
    # 10 connections over the 10 s the first window is taken over; the admin's was one
    assert 5 <= served <= 12 and refused >= 8, (served, refused)


SECURED = ("listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
           "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
           'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";\n'
           "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
           "super.users=User:admin\nallow.everyone.if.no.acl.found=true\n")


def test_authorization_and_a_sasl_users_quota(broker_factory, tmp_path):
    """AlterClientQuotas needs ALTER_CONFIGS and DescribeClientQuotas DESCRIBE_CONFIGS on the
    cluster (once an ACL names the cluster, only what it or super.users allows); a user quota
    applies to that SASL user's connections, whatever their client id."""
    config = tmp_path / "server.properties"
    config.write_text(SECURED)
    broker = broker_factory(config_file=config)
    topic = unique("q")
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        admin.sasl_plain("admin", "admin-secret")
        admin.create_topic(topic)
        # an ACL on the cluster: from now on only who it (or super.users) allows
        granted = admin.request(30, 3, creations=[dict(
            resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3, principal="User:admin",
            host="*", operation=3, permission_type=3)])
        assert granted.results[0].error_code == ErrorCode.none
        set_quota(admin, {"user": "alice"}, {"producer_byte_rate": 1000})
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="any", timeout=30) as alice:
        alice.sasl_plain("alice", "alice-secret")
        assert alter(alice, {"user": "alice"}, {"producer_byte_rate": 10**9}) == (
            ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        assert describe(alice, [("user", EXACT, "alice")]) == (ErrorCode.cluster_authorization_failed,
                                                                "Cluster authorization failed.")
        response = alice.produce_request({(topic, 0): make_batch([b"z" * 12_000])})
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert response.throttle_time.total_seconds() > 0.5  # the quota on user alice
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="any", timeout=30) as bob:
        bob.sasl_plain("bob", "bob-secret")
        response = bob.produce_request({(topic, 0): make_batch([b"z" * 12_000])})
        assert response.throttle_time.total_seconds() == 0  # no quota on bob


def _scrape(url: str) -> dict:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _share_setup(conn: KafkaRaw, topic: str, group: str) -> uuid.UUID:
    """A topic a share group reads from its start: a member joins (the coordinator assigns
    the partition, so its share state may be made) and share.auto.offset.reset=earliest."""
    conn.create_topic(topic)
    joined = conn.request(76, 1, group_id=group, member_id="keeper", member_epoch=0, subscribed_topic_names=(topic,))
    assert joined.error_code == ErrorCode.none
    configured = conn.request(44, 1, validate_only=False, resources=[dict(
        resource_type=32, resource_name=group,
        configs=[dict(name="share.auto.offset.reset", config_operation=0, value="earliest")])])
    assert configured.responses[0].error_code == ErrorCode.none
    return conn.metadata([topic], version=12).topics[0].topic_id


def test_a_share_fetch_is_charged_to_the_consumer_byte_rate_and_muted(broker_factory):
    """ShareFetch is charged as a Fetch (Kafka: the same fetch sensor): its MaxBytes is bounded
    by a quota window's worth, its answer's bytes counted, and once over the rate the answer
    carries the throttle time and the connection is read no more for it (KIP-219). The
    answer keeps its records: they are acquired for the member."""
    broker = broker_factory()
    topic, group = unique("qs"), unique("gs")
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        tid = _share_setup(admin, topic, group)
        for _ in range(10):
            admin.produce_ok(topic, 0, make_batch([b"s" * 1000] * 4))
        set_quota(admin, {"client-id": "share-muted"}, {"consumer_byte_rate": 1000})
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="share-muted", timeout=30) as conn:
        epoch, got, throttled = 0, [], None
        while throttled is None and epoch < 10:
            answer = conn.request(78, 1, group_id=group, member_id="m", share_session_epoch=epoch, max_wait=0,
                                  min_bytes=1, max_bytes=52428800, max_records=500, batch_size=500,
                                  topics=[dict(topic_id=tid, partitions=[dict(partition_index=0,
                                                                              acknowledgement_batches=[])])],
                                  forgotten_topics_data=[])
            assert answer.error_code == ErrorCode.none
            epoch += 1
            parts = [p for t in answer.responses for p in t.partitions]
            got += [o for p in parts for r in p.acquired_records for o in range(r.first_offset, r.last_offset + 1)]
            if answer.throttle_time.total_seconds() > 0:
                throttled = answer
        assert throttled is not None, "a share consumer over its byte rate is never throttled"
        # a quota window's worth (10 windows of 1 s: 10 kB) at most per answer, the first batch always
        assert len(got) <= 16, got
        assert any(p.acquired_records for t in throttled.responses for p in t.partitions), \
            "the throttled answer keeps the records it acquired"
        throttle_s = throttled.throttle_time.total_seconds()
        began = time.monotonic()
        conn.metadata([topic])  # read only once the mute ends
        waited = time.monotonic() - began
        assert waited >= 0.8 * throttle_s, (waited, throttle_s)


def test_a_share_consumer_is_held_to_its_byte_rate(quick_windows_broker):
    from confluent_kafka import ShareConsumer

    broker = quick_windows_broker
    topic, group = unique("qs"), unique("gs")
    rate = 200_000
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        _share_setup(conn, topic, group)
        for _ in range(80):  # 8 MB in batches of 100 kB (a fetch's first batch goes whole)
            conn.produce_ok(topic, 0, make_batch([b"y" * 10_000] * 10))
        set_quota(conn, {"client-id": "slow-share"}, {"consumer_byte_rate": rate})
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                              "client.id": "slow-share"})
    consumer.subscribe([topic])
    try:
        measured = steady_read_rate(lambda: consumer.poll(0.2))
    finally:
        consumer.close()
    print(f"share consumer at {rate} B/s quota: {measured:.0f} B/s from 3 s to 9 s")
    assert 0.3 * rate < measured < 2.5 * rate, measured
