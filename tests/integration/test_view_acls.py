"""A subscription view never shows its source to a caller who may not read (or describe) it.

The attacker of issue 20: a user with every right on the topic names ``peek*`` and none on
``secret``, talking over a PLAINTEXT listener (so the broker sees ``User:ANONYMOUS``) with raw
frames, which reach every API and every field. The data owner uses a SASL listener as a
super user.
"""

from __future__ import annotations

import socket
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode
from rawkafka import KafkaRaw, make_batch

(OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS, DELETE_TOPICS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS, ALTER_CONFIGS,
 CREATE_PARTITIONS, DESCRIBE_PRODUCERS, DESCRIBE_TOPIC_PARTITIONS) = 8, 9, 19, 20, 23, 32, 33, 37, 61, 75
TOPIC_RESOURCE = 2
DENIED = ErrorCode.topic_authorization_failed
SECRET = [b"salary=1", b"salary=2", b"salary=3"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def world(broker_factory, tmp_path):
    """(the owner's AdminClient, a raw connection of the attacker, the attacker's bootstrap)."""
    outside = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        f"listeners=OWNER://127.0.0.1:0,OUTSIDE://127.0.0.1:{outside}\n"
        "listener.security.protocol.map=OWNER:SASL_PLAINTEXT,OUTSIDE:PLAINTEXT\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_admin="admin-secret";\n'
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
    )
    broker = broker_factory(config_file=config)
    owner = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
             "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"}
    admin = AdminClient(owner)
    for future in admin.create_topics([NewTopic("secret", 1), NewTopic("peek-own-source", 1)]).values():
        future.result(10)
    producer = Producer(owner)
    for value in SECRET:
        producer.produce("secret", value)
        producer.produce("peek-own-source", b"mine")
    assert producer.flush(15) == 0
    grants = [AclBinding(ResourceType.TOPIC, "peek", ResourcePatternType.PREFIXED, "User:ANONYMOUS", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW),
              AclBinding(ResourceType.GROUP, "peek", ResourcePatternType.PREFIXED, "User:ANONYMOUS", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)]
    for future in admin.create_acls(grants).values():
        future.result(10)
    with KafkaRaw("127.0.0.1", outside) as conn:
        yield admin, conn, f"127.0.0.1:{outside}"


def create_view(conn: KafkaRaw, name: str, source: str, validate_only: bool = False):
    response = conn.request(CREATE_TOPICS, 7, timeout=10_000, validate_only=validate_only, topics=[dict(
        name=name, num_partitions=-1, replication_factor=-1, assignments=(),
        configs=[dict(name="rmq.view.source", value=source), dict(name="rmq.view.tags", value="*")])])
    (result,) = response.topics
    return result.error_code, result.error_message


def test_a_view_cannot_be_created_over_a_topic_the_creator_may_not_read(world):
    admin, conn, _ = world
    for validate_only in (True, False):
        code, message = create_view(conn, "peek-secret", "secret", validate_only)
        assert (code, message) == (DENIED, "a view over 'secret' exposes its records: it needs READ on 'secret'")
    # refused before anything tells whether the source exists
    assert create_view(conn, "peek-nothing", "no-such-topic")[0] == DENIED
    assert "peek-secret" not in admin.list_topics(timeout=10).topics
    # over a topic the creator may read, it works
    assert create_view(conn, "peek-own", "peek-own-source") == (ErrorCode.none, None)
    assert [r.value for r in conn.fetch_all("peek-own", 0)] == [b"mine"] * len(SECRET)


def test_a_view_made_by_someone_else_shows_nothing_of_a_source_the_caller_may_not_read(world):
    admin, conn, bootstrap = world
    assert create_view(conn, "peek-own", "peek-own-source") == (ErrorCode.none, None)
    # the owner made a view over "secret" under a name the attacker has every right on
    for future in admin.create_topics([NewTopic("peek-at-secret", -1, -1, config={
            "rmq.view.source": "secret", "rmq.view.tags": "*"})]).values():
        future.result(10)
    view = "peek-at-secret"
    described_id = admin.describe_topics(TopicCollection([view]))[view].result(10).topic_id
    view_id = uuid.UUID(int=((described_id.get_most_significant_bits() & (2**64 - 1)) << 64)
                        | (described_id.get_least_significant_bits() & (2**64 - 1)))

    # Fetch (by name, and by id on v13+) and ListOffsets
    assert conn.fetch(view, 0, 0).error_code == DENIED
    assert conn.fetch("", 0, 0, version=13, topic_id=view_id).error_code == DENIED
    assert conn.list_offsets(view, 0, -1).error_code == DENIED
    # Metadata: not listed, refused by name; the attacker's own view is there
    listed = {t.name: t for t in conn.metadata(None, allow_auto_topic_creation=False).topics}
    assert view not in listed and "peek-own" in listed
    (named,) = conn.metadata([view], allow_auto_topic_creation=False).topics
    assert named.error_code == DENIED
    # DescribeConfigs would show rmq.view.source
    configs = conn.request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                           resources=[dict(resource_type=TOPIC_RESOURCE, resource_name=view, configuration_keys=None)])
    assert (configs.results[0].error_code, configs.results[0].configs) == (DENIED, ())
    # DescribeTopicPartitions, by name and in a listing
    described = conn.request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[dict(name=view)], response_partition_limit=100,
                             cursor=None)
    assert described.topics[0].error_code == DENIED and described.topics[0].partitions == ()
    every = conn.request(DESCRIBE_TOPIC_PARTITIONS, 0, topics=[], response_partition_limit=100, cursor=None)
    assert view not in {t.name for t in every.topics}
    # OffsetForLeaderEpoch, DescribeProducers
    epochs = conn.request(OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-1, topics=[dict(
        topic=view, partitions=[dict(partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    assert epochs.topics[0].partitions[0].error_code == DENIED
    producers = conn.request(DESCRIBE_PRODUCERS, 0, topics=[dict(name=view, partition_indexes=[0])])
    assert producers.topics[0].partitions[0].error_code == DENIED
    # a group's offsets on the view: committing and fetching
    committed = conn.request(OFFSET_COMMIT, 8, group_id="peek-group", generation_id_or_member_epoch=-1,
                             member_id="", group_instance_id=None, topics=[dict(name=view, partitions=[dict(
                                 partition_index=0, committed_offset=3, committed_leader_epoch=-1,
                                 committed_metadata="")])])
    assert committed.topics[0].partitions[0].error_code == DENIED
    fetched = conn.request(OFFSET_FETCH, 7, group_id="peek-group", require_stable=False,
                           topics=[dict(name=view, partition_indexes=[0])])
    assert fetched.topics[0].partitions[0].error_code == DENIED

    # refusals on the view's own name do not name the source
    produced = conn.produce(view, 0, make_batch([b"x"]))
    assert produced.error_code == ErrorCode.invalid_topic_exception
    assert produced.error_message == "'peek-at-secret' is a view (read-only); produce to its source topic"
    grown = conn.request(CREATE_PARTITIONS, 3, timeout=10_000, validate_only=False,
                         topics=[dict(name=view, count=5, assignments=None)])
    assert grown.results[0].error_code == ErrorCode.invalid_partitions
    assert "secret" not in grown.results[0].error_message.replace("peek-at-secret", "")
    altered = conn.request(ALTER_CONFIGS, 2, validate_only=False, resources=[dict(
        resource_type=TOPIC_RESOURCE, resource_name=view, configs=[dict(name="rmq.view.source", value="x")])])
    assert altered.responses[0].error_code == ErrorCode.invalid_request
    assert "secret" not in altered.responses[0].error_message.replace("peek-at-secret", "")

    # a Kafka consumer of the view gets TOPIC_AUTHORIZATION_FAILED, never a record
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "peek-consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([view])
    try:
        seen, errors = [], []
        for _ in range(40):
            message = consumer.poll(0.5)
            if message is None:
                continue
            (errors if message.error() else seen).append(message.error() or message.value())
            if errors:
                break
    finally:
        consumer.close()
    assert seen == []
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # with READ on the source, the same caller reads through the view
    for future in admin.create_acls([AclBinding(ResourceType.TOPIC, "secret", ResourcePatternType.LITERAL,
                                                "User:ANONYMOUS", "*", AclOperation.READ,
                                                AclPermissionType.ALLOW)]).values():
        future.result(10)
    assert [r.value for r in conn.fetch_all(view, 0)] == SECRET
    assert view in {t.name for t in conn.metadata(None, allow_auto_topic_creation=False).topics}


def test_deleting_a_source_names_only_the_views_the_caller_may_describe(world):
    admin, conn, _ = world
    assert create_view(conn, "peek-own", "peek-own-source") == (ErrorCode.none, None)
    for future in admin.create_topics([NewTopic("owners-view", -1, -1, config={
            "rmq.view.source": "peek-own-source", "rmq.view.tags": "*"})]).values():
        future.result(10)

    def refusal():
        response = conn.request(DELETE_TOPICS, 6, timeout=10_000, topics=[dict(name="peek-own-source",
                                                                                   topic_id=None)])
        return response.responses[0].error_code, response.responses[0].error_message

    assert refusal() == (ErrorCode.policy_violation, "topic 'peek-own-source' is the source of view(s) peek-own "
                                                     "and 1 other(s); delete them first")
    conn.request(DELETE_TOPICS, 6, timeout=10_000, topics=[dict(name="peek-own", topic_id=None)])
    assert refusal() == (ErrorCode.policy_violation, "topic 'peek-own-source' is the source of 1 view(s) you may "
                                                     "not describe; they must be deleted first")
