"""Group configs (issue 22): IncrementalAlterConfigs / DescribeConfigs on resource type GROUP
(32) against a real broker: Kafka's names, errors and sources, applied to a consumer group's
members at their next heartbeat, kept across a restart, dropped with the group."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)
from rawkafka import ErrorCode, KafkaRaw, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 32, 44
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE, DELETE_GROUPS, LIST_CONFIG_RESOURCES = 68, 69, 42, 74
GROUP = 32
SET, DELETE = 0, 1
DYNAMIC_GROUP_CONFIG, DEFAULT_CONFIG = 8, 5
WAIT = 15
# short enough bounds to see a session expire within a test
FAST_GROUPS = ("group.consumer.min.session.timeout.ms=2000\n"
               "group.consumer.min.heartbeat.interval.ms=500\n")


def start(broker_factory, tmp_path, properties: str = "", **options):
    config = tmp_path / "server.properties"
    config.write_text(properties)
    return broker_factory(config_file=config, **options)


def alter(conn: KafkaRaw, group: str, *ops, validate_only: bool = False) -> tuple[int, str | None]:
    response = conn.request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=validate_only, resources=[dict(
        resource_type=GROUP, resource_name=group,
        configs=[dict(name=k, config_operation=op, value=v) for k, op, v in ops])])
    (result,) = response.responses
    return result.error_code, result.error_message


def describe(conn: KafkaRaw, group: str) -> tuple[int, dict]:
    response = conn.request(DESCRIBE_CONFIGS, 4, include_synonyms=True, include_documentation=False,
                            resources=[dict(resource_type=GROUP, resource_name=group, configuration_keys=None)])
    (result,) = response.results
    return result.error_code, {c.name: (c.value, c.config_source) for c in result.configs}


def heartbeat(conn: KafkaRaw, group: str, member_id: str, epoch: int, topics=("t",)):
    return conn.request(CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=member_id, member_epoch=epoch,
                        rebalance_timeout=30_000, subscribed_topic_names=tuple(topics) if epoch == 0 else None,
                        subscribed_topic_regex=None, topic_partitions=() if epoch == 0 else None)


def test_confluent_admin_sets_and_describes_group_configs(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ResourceType.GROUP, "orders", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(WAIT)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, "orders")])
    entries = next(iter(described.values())).result(WAIT)
    assert (entries["consumer.session.timeout.ms"].value, entries["consumer.session.timeout.ms"].source) == (
        "50000", ConfigSource.GROUP_CONFIG.value)
    assert entries["share.auto.offset.reset"].value == "earliest"
    heartbeat_entry = entries["consumer.heartbeat.interval.ms"]
    assert (heartbeat_entry.value, heartbeat_entry.source) == ("5000", ConfigSource.DEFAULT_CONFIG.value)
    bad = ConfigResource(ResourceType.GROUP, "orders", incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="Unknown group config name: no.such.config"):
        admin.incremental_alter_configs([bad])[bad].result(WAIT)


def test_refusals_have_kafkas_codes_and_messages(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    with KafkaRaw(broker.host, broker.port) as conn:
        assert alter(conn, "g", ("session.timeout.ms", SET, "50000")) == (
            ErrorCode.invalid_config, "Unknown group config name: session.timeout.ms")
        assert alter(conn, "g", ("consumer.session.timeout.ms", SET, "1000")) == (
            ErrorCode.invalid_config,
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms")
        assert alter(conn, "g", ("consumer.heartbeat.interval.ms", SET, "x")) == (
            ErrorCode.invalid_config,
            "Invalid value x for configuration consumer.heartbeat.interval.ms: Not a number of type INT")
        # nothing of a refused request is stored; validate_only stores nothing either
        assert alter(conn, "g", ("consumer.session.timeout.ms", SET, "50000"), ("bad", SET, "1"))[0] == (
            ErrorCode.invalid_config)
        assert alter(conn, "g", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True) == (
            ErrorCode.none, None)
        assert describe(conn, "g")[1]["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
        assert conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[GROUP]).config_resources == ()
        # a group that does not exist yet may have configs, as in Kafka; ListConfigResources lists it
        assert alter(conn, "g", ("consumer.session.timeout.ms", SET, "50000")) == (ErrorCode.none, None)
        listed = conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[GROUP]).config_resources
        assert [(r.resource_type, r.resource_name) for r in listed] == [(GROUP, "g")]
        # DELETE brings the default back and forgets a group left with none
        assert alter(conn, "g", ("consumer.session.timeout.ms", DELETE, None)) == (ErrorCode.none, None)
        assert describe(conn, "g")[1]["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
        assert conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[GROUP]).config_resources == ()
        # AlterConfigs replaces the whole set
        assert alter(conn, "g", ("share.isolation.level", SET, "read_committed")) == (ErrorCode.none, None)
        replaced = conn.request(ALTER_CONFIGS, 2, validate_only=False, resources=[dict(
            resource_type=GROUP, resource_name="g",
            configs=[dict(name="consumer.heartbeat.interval.ms", value="6000")])]).responses[0]
        assert (replaced.error_code, replaced.error_message) == (ErrorCode.none, None)
        overrides = {k: v for k, v in describe(conn, "g")[1].items() if v[1] == DYNAMIC_GROUP_CONFIG}
        assert overrides == {"consumer.heartbeat.interval.ms": ("6000", DYNAMIC_GROUP_CONFIG)}


def test_heartbeat_interval_and_session_timeout_apply_at_the_next_heartbeat(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, FAST_GROUPS)
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("t", partitions=2)
        member = uuid.uuid4().hex
        joined = heartbeat(conn, "live", member, 0)
        assert (joined.error_code, joined.heartbeat_interval) == (ErrorCode.none, timedelta(seconds=5))
        assert alter(conn, "live", ("consumer.heartbeat.interval.ms", SET, "700"),
                     ("consumer.session.timeout.ms", SET, "3000")) == (ErrorCode.none, None)
        again = heartbeat(conn, "live", member, joined.member_epoch)
        assert (again.error_code, again.heartbeat_interval) == (ErrorCode.none, timedelta(milliseconds=700))
        # another group keeps the broker's settings
        other = heartbeat(conn, "other", uuid.uuid4().hex, 0)
        assert other.heartbeat_interval == timedelta(seconds=5)
        # silent for longer than the group's 3 s session (the broker's is 45 s): removed
        wait_until(lambda: members(conn, "live") == [], timeout=30, message="the silent member to expire")
        # the other group's member, just as silent for as long, is still a member
        assert members(conn, "other") == [other.member_id]
        assert heartbeat(conn, "live", member, again.member_epoch).error_code == ErrorCode.unknown_member_id


def members(conn: KafkaRaw, group: str) -> list[str]:
    (described,) = conn.request(CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group],
                                include_authorized_operations=False).groups
    return [m.member_id for m in described.members]


def test_configs_survive_a_restart_and_are_dropped_with_the_group(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("t", partitions=1)
        assert alter(conn, "doomed", ("consumer.session.timeout.ms", SET, "50000")) == (ErrorCode.none, None)
        assert alter(conn, "kept", ("share.isolation.level", SET, "read_committed")) == (ErrorCode.none, None)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "doomed"})
    consumer.commit(offsets=[CTopicPartition("t", 0, 0)], asynchronous=False)
    consumer.close()
    broker.restart()
    with KafkaRaw(broker.host, broker.port) as conn:
        assert describe(conn, "doomed")[1]["consumer.session.timeout.ms"] == ("50000", DYNAMIC_GROUP_CONFIG)
        assert describe(conn, "kept")[1]["share.isolation.level"] == ("read_committed", DYNAMIC_GROUP_CONFIG)
        deleted = conn.request(DELETE_GROUPS, 2, groups_names=["doomed"])
        assert deleted.results[0].error_code == ErrorCode.none
        assert describe(conn, "doomed")[1]["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
        listed = conn.request(LIST_CONFIG_RESOURCES, 1, resource_types=[GROUP]).config_resources
        assert [r.resource_name for r in listed] == ["kept"]
    broker.restart()
    with KafkaRaw(broker.host, broker.port) as conn:
        assert describe(conn, "doomed")[1]["consumer.session.timeout.ms"] == ("45000", DEFAULT_CONFIG)
        assert alter(conn, "crash", ("consumer.heartbeat.interval.ms", SET, "6000")) == (ErrorCode.none, None)
        assert alter(conn, "crash", ("consumer.session.timeout.ms", SET, "55000")) == (ErrorCode.none, None)
    broker.kill()  # kill -9 right after the answers: the journal holds what the snapshot may not
    broker.start()
    with KafkaRaw(broker.host, broker.port) as conn:
        overrides = describe(conn, "crash")[1]
        assert overrides["consumer.heartbeat.interval.ms"] == ("6000", DYNAMIC_GROUP_CONFIG)
        assert overrides["consumer.session.timeout.ms"] == ("55000", DYNAMIC_GROUP_CONFIG)
        assert describe(conn, "kept")[1]["share.isolation.level"] == ("read_committed", DYNAMIC_GROUP_CONFIG)


def sasl(bootstrap: str, user: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


def test_group_acls_guard_group_configs(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path,
                   "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                   'user_admin="admin-secret" user_alice="alice-secret";\n'
                   "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                   "super.users=User:admin\n")
    admin = AdminClient(sasl(broker.bootstrap_servers, "admin"))
    grants = [AclBinding(ResourceType.GROUP, "mine", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)]
    for future in admin.create_acls(grants).values():
        future.result(WAIT)
    with KafkaRaw(broker.host, broker.port) as alice:
        alice.sasl_plain("alice", "alice-secret")
        assert alter(alice, "mine", ("consumer.session.timeout.ms", SET, "50000")) == (
            ErrorCode.group_authorization_failed, "Group authorization failed.")
        assert describe(alice, "mine")[0] == ErrorCode.none
        assert describe(alice, "theirs")[0] == ErrorCode.group_authorization_failed
