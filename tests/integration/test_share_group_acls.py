"""Issue 23: ShareGroupHeartbeat and ShareGroupDescribe check rights as Kafka 4's KafkaApis
does: READ on the group first (GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every subscribed
topic (TOPIC_AUTHORIZATION_FAILED, before the group is touched); a subscription view counts as
its source too. ShareGroupDescribe needs DESCRIBE on the group and hides a group assigned topics the caller
may not DESCRIBE.

The broker has one SASL_PLAINTEXT listener; ``admin`` is a super user, ``alice`` may use the
groups ``team*`` and the topics ``open*``, nothing else. ``secret`` is a topic she may not
see; ``open-window`` a view whose name she may use but whose source is ``secret``.
"""

from __future__ import annotations

import uuid

import pytest
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

SHARE_HEARTBEAT, SHARE_DESCRIBE, LIST_GROUPS = 76, 77, 16


def sasl(bootstrap: str, user: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from rmqkafka.adapter.embedded import EmbeddedBroker

    root = tmp_path_factory.mktemp("sg-acls")
    config = root / "server.properties"
    config.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_admin="admin-secret" user_alice="alice-secret";\n'
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
    )
    broker = EmbeddedBroker(data_dir=root / "data", config_file=config)
    with broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient(sasl(bootstrap, "admin"))
        for future in admin.create_topics([NewTopic("secret", 2), NewTopic("open-a", 2)]).values():
            future.result(10)
        window = NewTopic("open-window", -1, -1, config={"rmq.view.source": "secret", "rmq.view.tags": "*"})
        admin.create_topics([window])["open-window"].result(10)
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


def join(conn: KafkaRaw, group: str, *names: str):
    return conn.request(SHARE_HEARTBEAT, 1, group_id=group, member_id=uuid.uuid4().hex, member_epoch=0,
                        rack_id=None, subscribed_topic_names=names)


def listed(conn: KafkaRaw) -> set[str]:
    return {g.group_id for g in conn.request(LIST_GROUPS, 5, states_filter=(), types_filter=()).groups}


def test_a_subscribed_topic_the_member_may_not_describe_is_refused(alice):
    group = f"team-{uuid.uuid4().hex[:6]}"
    beat = join(alice, group, "open-a", "secret")
    assert beat.error_code == ErrorCode.topic_authorization_failed
    assert group not in listed(alice), "refused before the group was touched"
    assert join(alice, group, "open-a").error_code == ErrorCode.none
    assert group in listed(alice)


def test_a_view_on_a_hidden_source_is_refused_by_name(alice):
    assert join(alice, f"team-{uuid.uuid4().hex[:6]}", "open-window").error_code == ErrorCode.topic_authorization_failed


def test_the_group_check_comes_first(alice):
    assert join(alice, f"other-{uuid.uuid4().hex[:6]}", "secret").error_code == ErrorCode.group_authorization_failed


def test_describe_needs_describe_on_the_group(alice, world):
    mine, theirs = f"team-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    assert join(alice, mine, "open-a").error_code == ErrorCode.none
    host, port = world.rsplit(":", 1)
    with KafkaRaw(host, int(port)) as admin:
        admin.sasl_plain("admin", "admin-secret")
        assert join(admin, theirs, "secret").error_code == ErrorCode.none
    described = alice.request(SHARE_DESCRIBE, 1, group_ids=(mine, theirs), include_authorized_operations=True).groups
    assert [(g.group_id, g.error_code) for g in described] == [(mine, ErrorCode.none),
                                                               (theirs, ErrorCode.group_authorization_failed)]
    assert described[0].group_state == "Stable" and len(described[0].members) == 1
    assert described[0].authorized_operations > 0
    assert described[1].members == () and described[1].authorized_operations == -2**31


def test_describe_hides_a_group_assigned_topics_the_caller_may_not_see(alice, world):
    group = f"team-{uuid.uuid4().hex[:6]}"
    host, port = world.rsplit(":", 1)
    with KafkaRaw(host, int(port)) as admin:
        admin.sasl_plain("admin", "admin-secret")
        assert join(admin, group, "secret").error_code == ErrorCode.none
        (seen,) = admin.request(SHARE_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False).groups
        assert seen.error_code == ErrorCode.none and len(seen.members) == 1
    (hidden,) = alice.request(SHARE_DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False).groups
    assert (hidden.error_code, hidden.error_message, hidden.members) == (
        ErrorCode.topic_authorization_failed,
        "The group has described topic(s) that the client is not authorized to describe.", ())
    (empty,) = alice.request(SHARE_DESCRIBE, 1, group_ids=("",), include_authorized_operations=False).groups
    assert empty.error_code == ErrorCode.invalid_group_id
