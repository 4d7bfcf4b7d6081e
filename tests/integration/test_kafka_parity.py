"""Kafka behaviour that outside test suites found missing (issue 21): SCRAM users described
with an empty list, the internal topics ``__consumer_offsets`` and ``__transaction_state``,
and topic names that collide once '.' and '_' are folded. Real broker processes, driven by
the client that found each gap and by raw frames."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

OFFSETS = "__consumer_offsets"
TXN_STATE = "__transaction_state"
JAAS = ('sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret";\n')


def sasl_admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})


def test_describe_user_scram_credentials_with_no_users_lists_every_user(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    broker = broker_factory(config_file=config)
    admin = sasl_admin(broker)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for user in ("carol", "dave"):
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, b"pw")])[user].result(10)
    described = admin.describe_user_scram_credentials().result(10)  # librdkafka sends users=[]
    assert {"carol", "dave"} <= set(described)
    assert [(c.mechanism, c.iterations) for c in described["carol"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)]
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:  # null users: every user too
        conn.sasl_plain("admin", "admin-secret")
        for users in (None, []):
            answer = conn.request(50, 0, users=users)
            assert answer.error_code == ErrorCode.none
            assert {"carol", "dave"} <= {r.user for r in answer.results}


# ------------------------------------------------------------------------ internal topics


def _metadata_topics(conn: KafkaRaw, names=None) -> dict:
    answer = conn.metadata(names, version=12)
    return {t.name: t for t in answer.topics}


def _commit_offsets(bootstrap: str, topic: str, group: str) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        message = None
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None
        consumer.commit(message, asynchronous=False)
    finally:
        consumer.close()


def test_consumer_offsets_is_an_internal_topic_once_a_group_exists(broker):
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        conn.create_topic("orders", partitions=1)
        conn.produce_ok("orders", 0, make_batch(3))
        assert OFFSETS not in _metadata_topics(conn)  # no group yet, as in Kafka
    _commit_offsets(broker.bootstrap_servers, "orders", "g1")
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        listed = _metadata_topics(conn)
        assert listed[OFFSETS].is_internal
        assert len(listed[OFFSETS].partitions) == 50
        assert not listed["orders"].is_internal
        by_name = _metadata_topics(conn, [OFFSETS])[OFFSETS]
        assert by_name.error_code == ErrorCode.none and by_name.is_internal
        answer = conn.produce(OFFSETS, 0, make_batch(1))
        assert answer.error_code == ErrorCode.invalid_topic_exception
    # the committed offset is where it was: the topic is presented, the offsets are the store's
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g1"})
    try:
        from confluent_kafka import TopicPartition
        committed = consumer.committed([TopicPartition("orders", 0)], timeout=10)
        assert committed[0].offset > 0
    finally:
        consumer.close()


def test_consumer_offsets_asked_for_by_name_is_created_as_the_internal_topic(broker):
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        topic = _metadata_topics(conn, [OFFSETS])[OFFSETS]
        assert topic.error_code == ErrorCode.none
        assert topic.is_internal and len(topic.partitions) == 50
        assert _metadata_topics(conn)[OFFSETS].is_internal


def test_a_producer_is_refused_on_consumer_offsets(broker):
    _commit_offsets_after_produce(broker)
    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 10000})
    producer.produce(OFFSETS, b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION


def _commit_offsets_after_produce(broker) -> None:
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        conn.create_topic("seed", partitions=1)
        conn.produce_ok("seed", 0, make_batch(1))
    _commit_offsets(broker.bootstrap_servers, "seed", "seed-group")


def test_aiokafka_exclude_internal_topics(broker):
    aiokafka = pytest.importorskip("aiokafka")
    _commit_offsets_after_produce(broker)

    async def subscribed(exclude: bool) -> set[str]:
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers,
                                             group_id=f"pattern-{exclude}", exclude_internal_topics=exclude,
                                             metadata_max_age_ms=1000)
        await consumer.start()
        try:
            consumer.subscribe(pattern=".*")
            for _ in range(100):
                topics = consumer.subscription()
                if "seed" in topics:
                    return set(topics)
                await asyncio.sleep(0.1)
            return set(consumer.subscription())
        finally:
            await consumer.stop()

    included = asyncio.run(subscribed(False))
    assert OFFSETS in included and "seed" in included
    excluded = asyncio.run(subscribed(True))
    assert OFFSETS not in excluded and "seed" in excluded


def test_kafka_python_lists_internal_topics_as_internal(broker):
    from kafka import KafkaAdminClient

    _commit_offsets_after_produce(broker)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        described = {t["name"]: t for t in admin.describe_topics([OFFSETS, "seed"])}
        assert described[OFFSETS]["is_internal"] is True
        assert described["seed"]["is_internal"] is False
        assert OFFSETS in admin.list_topics()
    finally:
        admin.close()


def test_transaction_state_is_listed_as_internal_once_a_transactional_id_is_used(broker):
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        assert TXN_STATE not in _metadata_topics(conn)
        conn.create_topic("txn-out", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "t-1"})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce("txn-out", b"v")
    producer.commit_transaction(15)
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        listed = _metadata_topics(conn)
        assert listed[TXN_STATE].is_internal
        answer = conn.produce(TXN_STATE, 0, make_batch(1))
        assert answer.error_code == ErrorCode.invalid_topic_exception


# ---------------------------------------------------------------------------- topic names


def _create(admin: AdminClient, name: str, partitions: int = 1):
    try:
        admin.create_topics([NewTopic(name, partitions)])[name].result(15)
    except Exception as exc:  # KafkaException carrying the KafkaError
        return exc.args[0]
    return None


def test_topic_names_that_collide_when_dot_and_underscore_are_folded_are_refused(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    suffix = uuid.uuid4().hex[:6]
    assert _create(admin, f"metrics.a_{suffix}") is None
    for other in (f"metrics_a_{suffix}", f"metrics.a.{suffix}", f"metrics_a.{suffix}"):
        error = _create(admin, other)
        assert error is not None and error.code() == KafkaError.TOPIC_EXCEPTION, other
        assert error.str() == f"Topic '{other}' collides with existing topic: metrics.a_{suffix}"
    assert _create(admin, f"metrics-a-{suffix}") is None  # '-' is not folded
    error = _create(admin, f"metrics.a_{suffix}")
    assert error.code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_user_topics_named_like_internal_ones_are_refused(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    _commit_offsets_after_produce(broker)
    error = _create(admin, OFFSETS, 3)
    assert error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
    error = _create(admin, TXN_STATE, 3)
    assert error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        assert len(_metadata_topics(conn, [OFFSETS])[OFFSETS].partitions) == 50


# ------------------------------------------------------------------- compacted topics


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_a_record_without_a_key_is_refused_on_a_compacted_topic(broker, policy):
    topic = f"compacted-{policy.replace(',', '-')}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, config={"cleanup.policy": policy})])[topic].result(15)
    reports = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 10000,
                         "retries": 0, "linger.ms": 0})
    producer.produce(topic, key=b"k", value=b"kept", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    producer.produce(topic, value=b"no key", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    assert reports[0] is None
    assert reports[1] is not None and reports[1].code() == KafkaError.INVALID_RECORD
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        answer = conn.produce(topic, 0, make_batch(2, keys=[b"k1", None]))
        assert answer.error_code == ErrorCode.invalid_record
        why = f"Compacted topic cannot accept message without key in topic partition {topic}-0."
        # Kafka's LogValidator: one RecordError per keyless record, the first three in the message
        assert answer.error_message == (
            "One or more records have been rejected due to 1 record errors in total, and only showing "
            f"the first three errors at most: [RecordError(batchIndex=1, message='{why}')]")
        assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [(1, why)]
        # the refused batch is not stored: the next record follows the first
        assert conn.produce(topic, 0, make_batch(1, keys=[b"k2"])).base_offset == 1


def test_concurrent_lookups_of_a_new_topic_both_get_it(broker):
    """Two clients asking for the same missing topic at once (librdkafka's producer and its
    list_topics do): both get the topic, neither TOPIC_ALREADY_EXISTS (found by the Docker
    test: the second auto-creation met the first one's creation under way)."""
    for round_ in range(5):
        name = f"raced-{round_}-{uuid.uuid4().hex[:6]}"
        conns = [KafkaRaw.connect(broker.bootstrap_servers) for _ in range(4)]
        try:
            sent = [c.send(3, 12, topics=[dict(name=name, topic_id=None)], allow_auto_topic_creation=True,
                           include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False) for c in conns]
            answers = [c.receive(3, 12, cid) for c, cid in zip(conns, sent)]
        finally:
            for c in conns:
                c.close()
        codes = [a.topics[0].error_code for a in answers]
        assert codes == [ErrorCode.none] * 4, codes
        assert len({a.topics[0].topic_id for a in answers}) == 1
