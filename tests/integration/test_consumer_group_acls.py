"""Issue 22: ConsumerGroupHeartbeat checks the member's rights on the topics it subscribes to,
as Kafka 4's KafkaApis does: DESCRIBE on every subscribed name (else TOPIC_AUTHORIZATION_FAILED,
before the group is touched), and a regular expression matches only topics the member may
DESCRIBE. A subscription view counts as its source too (issue 20: a consumer group on a view
follows the view rule).

The broker has one SASL_PLAINTEXT listener; ``admin`` is a super user, ``alice`` may use the
groups ``team*`` and the topics ``open*``, nothing else. ``secret`` is a topic she may not
see; ``open-window`` a view whose name she may use but whose source is ``secret``.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from rawkafka import ErrorCode, KafkaRaw

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CONSUMER_GROUP_HEARTBEAT, LIST_GROUPS = 68, 16


def sasl(bootstrap: str, user: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The bootstrap address, with topics, a view, records and alice's grants in place."""
    from rmqkafka.adapter.embedded import EmbeddedBroker

    root = tmp_path_factory.mktemp("cg-acls")
    config = root / "server.properties"
    config.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_admin="admin-secret" user_alice="alice-secret";\n'
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
        "group.consumer.heartbeat.interval.ms=500\n"
        "group.consumer.min.heartbeat.interval.ms=500\n"
    )
    broker = EmbeddedBroker(data_dir=root / "data", config_file=config)
    with broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient(sasl(bootstrap, "admin"))
        for future in admin.create_topics([NewTopic("secret", 2), NewTopic("open-a", 2)]).values():
            future.result(10)
        window = NewTopic("open-window", -1, -1, config={"rmq.view.source": "secret", "rmq.view.tags": "*"})
        admin.create_topics([window])["open-window"].result(10)
        producer = Producer(sasl(bootstrap, "admin"))
        for i in range(4):
            producer.produce("secret", f"secret-{i}".encode(), partition=i % 2)
            producer.produce("open-a", f"open-{i}".encode(), partition=i % 2)
        assert producer.flush(15) == 0
        grants = [AclBinding(ResourceType.TOPIC, "open", ResourcePatternType.PREFIXED, "User:alice", "*",
                             AclOperation.ALL, AclPermissionType.ALLOW),
                  AclBinding(ResourceType.GROUP, "team", ResourcePatternType.PREFIXED, "User:alice", "*",
                             AclOperation.ALL, AclPermissionType.ALLOW)]
        for future in admin.create_acls(grants).values():
            future.result(10)
        yield bootstrap
        assert "Traceback" not in broker.stderr


@pytest.fixture
def alice(world):
    host, port = world.rsplit(":", 1)
    with KafkaRaw(host, int(port)) as conn:
        conn.sasl_plain("alice", "alice-secret")
        yield conn


def join(conn: KafkaRaw, group: str, names=(), regex=None):
    return conn.request(CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
                        rebalance_timeout=30_000, subscribed_topic_names=tuple(names),
                        subscribed_topic_regex=regex, topic_partitions=())


def topic_ids(conn: KafkaRaw, *names: str) -> dict:
    return {t.topic_id: t.name for t in conn.metadata(list(names), version=12).topics}


def assigned_names(conn: KafkaRaw, beat, ids: dict) -> set[str]:
    return {ids.get(t.topic_id, str(t.topic_id)) for t in beat.assignment.topic_partitions if t.partitions}


def test_a_subscribed_topic_the_member_may_not_describe_is_refused(alice):
    group = f"team-{uuid.uuid4().hex[:6]}"
    beat = join(alice, group, names=("open-a", "secret"))
    assert (beat.error_code, beat.error_message) == (ErrorCode.topic_authorization_failed,
                                                     "Topic authorization failed.")
    # refused before the group was touched: no group of that name exists
    listed = alice.request(LIST_GROUPS, 5, states_filter=(), types_filter=())
    assert group not in {g.group_id for g in listed.groups}
    ok = join(alice, group, names=("open-a",))
    assert ok.error_code == ErrorCode.none
    assert assigned_names(alice, ok, topic_ids(alice, "open-a")) == {"open-a"}


def test_a_view_on_a_hidden_source_is_refused_by_name(alice):
    beat = join(alice, f"team-{uuid.uuid4().hex[:6]}", names=("open-window",))
    assert beat.error_code == ErrorCode.topic_authorization_failed


def test_the_group_check_comes_first(alice):
    beat = join(alice, f"other-{uuid.uuid4().hex[:6]}", names=("secret",))
    assert beat.error_code == ErrorCode.group_authorization_failed


def test_a_regex_matches_only_what_the_member_may_describe(alice, world):
    beat = join(alice, f"team-{uuid.uuid4().hex[:6]}", regex="(open|secret).*")
    assert beat.error_code == ErrorCode.none
    # secret is hidden, and so is the view on it even though its name starts with open
    assert assigned_names(alice, beat, topic_ids(alice, "open-a")) == {"open-a"}
    # the super user's member in a group of its own gets all three
    host, port = world.rsplit(":", 1)
    with KafkaRaw(host, int(port)) as root:
        root.sasl_plain("admin", "admin-secret")
        everything = join(root, f"team-{uuid.uuid4().hex[:6]}", regex="(open|secret).*")
        ids = topic_ids(root, "open-a", "secret", "open-window")
        assert assigned_names(root, everything, ids) == {"open-a", "secret", "open-window"}


def test_a_client_consuming_by_regex_is_given_only_its_topics(world):
    group = f"team-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({**sasl(world, "alice"), "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["^(open|secret).*"])
    seen: list[str] = []
    deadline = time.monotonic() + 40
    try:
        while len(seen) < 4 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.append(message.value().decode())
        # what the broker assigned, as the super user sees it
        admin = AdminClient(sasl(world, "admin"))
        described = admin.describe_consumer_groups([group])[group].result(10)
    finally:
        consumer.close()
    assert sorted(seen) == [f"open-{i}" for i in range(4)]
    (member,) = described.members
    assert {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions} == {("open-a", 0), ("open-a", 1)}


CONSUMER_GROUP_DESCRIBE = 69


def test_describe_hides_a_group_assigned_a_topic_the_caller_may_not_describe(alice, world):
    """Kafka 4's handleConsumerGroupDescribe: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED,
    those rows first), then DESCRIBE on every topic in the members' assignments and target
    assignments, else TOPIC_AUTHORIZATION_FAILED with no members. A view counts with its source."""
    open_only, with_secret, with_window, other = (f"{prefix}-{uuid.uuid4().hex[:6]}"
                                                  for prefix in ("team", "team", "team", "other"))
    host, port = world.rsplit(":", 1)
    with KafkaRaw(host, int(port)) as root:
        root.sasl_plain("admin", "admin-secret")
        for group, names in ((open_only, ("open-a",)), (with_secret, ("open-a", "secret")),
                             (with_window, ("open-window",)), (other, ("open-a",))):
            beat = join(root, group, names=names)
            assert beat.error_code == ErrorCode.none and beat.assignment.topic_partitions
        # the super user sees every group in full
        everything = root.request(CONSUMER_GROUP_DESCRIBE, 1, group_ids=(with_secret,),
                                  include_authorized_operations=False).groups
        assert [(g.error_code, len(g.members)) for g in everything] == [(ErrorCode.none, 1)]

    response = alice.request(CONSUMER_GROUP_DESCRIBE, 1, group_ids=(open_only, with_secret, other, with_window),
                             include_authorized_operations=True)
    rows = [(g.group_id, g.error_code, g.error_message, len(g.members)) for g in response.groups]
    hidden = "The group has described topic(s) that the client is not authorized to describe."
    assert rows == [
        (other, ErrorCode.group_authorization_failed, "Group authorization failed.", 0),
        (open_only, ErrorCode.none, None, 1),
        (with_secret, ErrorCode.topic_authorization_failed, hidden, 0),
        (with_window, ErrorCode.topic_authorization_failed, hidden, 0),
    ]
    shown, refused = response.groups[1], response.groups[2]
    assert shown.group_state == "Stable" and shown.authorized_operations != -2**31
    assert [t.topic_name for t in shown.members[0].assignment.topic_partitions] == ["open-a"]
    # nothing else about the hidden group: no state, epochs, assignor or operations
    assert (refused.group_state, refused.group_epoch, refused.assignor_name, refused.authorized_operations) == (
        "", 0, "", -2**31)
