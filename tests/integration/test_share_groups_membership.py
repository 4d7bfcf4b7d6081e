"""Issue 23, part 1: share groups' membership, assignment and group admin (KIP-932) against a
real broker process: raw ShareGroupHeartbeat (76) / ShareGroupDescribe (77) requests, the
other group APIs on a share group's id, and confluent-kafka's ``ShareConsumer`` joining.

The broker runs with a 500 ms heartbeat interval and a 20 s session timeout (their minimums
lowered to 500 ms and 3 s), long enough for raw members to stay put on a loaded machine; the
session timeout test gives its group 3 s with the group config ``share.session.timeout.ms``. ShareFetch is part 2: a ShareConsumer here joins and gets its assignment, which is
what these tests check (through ShareGroupDescribe and ListGroups).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from rawkafka import ErrorCode, KafkaRaw, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SESSION_MS = 20_000
SHORT_SESSION_MS = 3000
HEARTBEAT_MS = 500
BROKER_CONFIG = {
    "group.share.session.timeout.ms": SESSION_MS,
    "group.share.min.session.timeout.ms": SHORT_SESSION_MS,
    "group.share.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.share.min.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.share.max.size": 3,
}
SHARE_HEARTBEAT, SHARE_DESCRIBE = 76, 77
CONSUMER_HEARTBEAT, JOIN_GROUP, OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 68, 11, 8, 9, 47
LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, FIND_COORDINATOR = 16, 15, 42, 10
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS, GROUP_RESOURCE = 44, 32, 32
WAIT = 30


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    from rmqkafka.adapter.embedded import EmbeddedBroker

    root = tmp_path_factory.mktemp("kip932")
    config = root / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONFIG.items()))
    broker = EmbeddedBroker(data_dir=root / "data", config_file=config, args=["--metrics-port", "0"])
    with broker:
        yield broker
        if "Traceback" in broker.stderr:
            print(broker.stderr[-5000:])
        assert "Traceback" not in broker.stderr


@pytest.fixture
def bootstrap(started):
    return started.bootstrap_servers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def beat(conn: KafkaRaw, group: str, member: str, epoch: int, topics=None, rack=None):
    return conn.request(SHARE_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=rack,
                        subscribed_topic_names=None if topics is None else tuple(topics))


def assigned(response) -> dict:
    return {t.topic_id: set(t.partitions) for t in response.assignment.topic_partitions}


def describe(conn: KafkaRaw, *groups: str, operations: bool = False):
    return conn.request(SHARE_DESCRIBE, 1, group_ids=groups, include_authorized_operations=operations).groups


def listed(conn: KafkaRaw, group: str, types=(), states=()) -> dict:
    response = conn.request(LIST_GROUPS, 5, states_filter=states, types_filter=types)
    return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups
            if g.group_id == group}


def test_members_join_share_partitions_and_leave(bootstrap):
    topic, group = unique("members"), unique("sg")
    create_topic(bootstrap, topic, 2)
    with KafkaRaw.connect(bootstrap) as conn:
        topic_id = conn.metadata([topic], version=12).topics[0].topic_id
        first = beat(conn, group, "member-a", 0, [topic])
        assert (first.error_code, first.member_id, first.member_epoch) == (ErrorCode.none, "member-a", 1)
        assert first.heartbeat_interval.total_seconds() * 1000 == HEARTBEAT_MS
        assert assigned(first) == {topic_id: {0, 1}}
        second = beat(conn, group, "member-b", 0, [topic])
        assert second.member_epoch == 2 and assigned(second) in ({topic_id: {0}}, {topic_id: {1}})
        again = beat(conn, group, "member-a", 1)
        assert again.member_epoch == 2
        assert assigned(again)[topic_id] | assigned(second)[topic_id] == {0, 1}
        # three members on two partitions: ceil(3 / 2) = 2 members per partition
        third = beat(conn, group, "member-c", 0, [topic])
        assert third.member_epoch == 3
        beat(conn, group, "member-a", 2), beat(conn, group, "member-b", 2)
        owners = [p for m in describe(conn, group)[0].members for tp in m.assignment.topic_partitions
                  for p in tp.partitions]
        assert sorted(owners) == [0, 0, 1, 1]
        # group.share.max.size=3
        full = beat(conn, group, "member-d", 0, [topic])
        assert full.error_code == ErrorCode.group_max_size_reached
        assert full.error_message == "The share group has reached its maximum capacity of 3 members."
        (described,) = describe(conn, group)
        assert (described.error_code, described.group_state, described.assignor_name) == (ErrorCode.none, "Stable",
                                                                                         "simple")
        assert described.group_epoch == 3 and described.assignment_epoch == 3
        members = {m.member_id: m for m in described.members}
        assert set(members) == {"member-a", "member-b", "member-c"}
        assert all(m.member_epoch == 3 and m.subscribed_topic_names == (topic,) for m in members.values())
        assert sum(len(tp.partitions) for m in members.values() for tp in m.assignment.topic_partitions) == 4
        assert all(tp.topic_name == topic and tp.topic_id == topic_id
                   for m in members.values() for tp in m.assignment.topic_partitions)
        for member, epoch in (("member-a", 3), ("member-b", 3), ("member-c", 3)):
            left = beat(conn, group, member, -1)
            assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        assert listed(conn, group) == {group: ("share", "Empty", "share")}
        assert beat(conn, group, "member-a", 3).error_code == ErrorCode.unknown_member_id


def test_heartbeat_refusals_have_kafkas_codes_and_messages(bootstrap):
    topic, group = unique("refusals"), unique("sg")
    create_topic(bootstrap, topic, 1)
    with KafkaRaw.connect(bootstrap) as conn:
        for member, epoch, topics, message in (
            ("", 0, [topic], "MemberId can't be empty."),
            ("m", 0, None, "SubscribedTopicNames must be set in first request."),
            ("m", 0, [], "SubscribedTopicNames must be set in first request."),
            ("m", -2, None, "MemberEpoch is invalid."),
        ):
            response = beat(conn, group, member, epoch, topics)
            assert (response.error_code, response.error_message) == (ErrorCode.invalid_request, message)
        assert beat(conn, group, "m", 0, [topic], rack=" ").error_message == "RackId can't be empty."
        assert beat(conn, group, "m", 4).error_code == ErrorCode.unknown_member_id
        joined = beat(conn, group, "m", 0, [topic])
        ahead = beat(conn, group, "m", joined.member_epoch + 1)
        assert ahead.error_code == ErrorCode.fenced_member_epoch
        assert ahead.error_message.startswith("The share group member has a greater member epoch")
        beat(conn, group, "m", -1)


def test_topics_created_later_grown_and_deleted_rebalance(bootstrap):
    topic, later, group = unique("grow"), unique("later"), unique("sg")
    create_topic(bootstrap, topic, 1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with KafkaRaw.connect(bootstrap) as conn:
        first = beat(conn, group, "m", 0, [topic, later])
        topic_id = conn.metadata([topic], version=12).topics[0].topic_id
        assert assigned(first) == {topic_id: {0}}
        create_topic(bootstrap, later, 1)
        later_id = conn.metadata([later], version=12).topics[0].topic_id
        created = beat(conn, group, "m", first.member_epoch)
        assert assigned(created) == {topic_id: {0}, later_id: {0}}
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
        grown = beat(conn, group, "m", created.member_epoch)
        assert assigned(grown) == {topic_id: {0, 1, 2}, later_id: {0}}
        admin.delete_topics([later])[later].result(10)
        deleted = beat(conn, group, "m", grown.member_epoch)
        assert assigned(deleted) == {topic_id: {0, 1, 2}}
        beat(conn, group, "m", -1)


def test_a_silent_member_is_removed_after_the_session_timeout(bootstrap):
    topic, group = unique("session"), unique("sg")
    create_topic(bootstrap, topic, 2)
    with KafkaRaw.connect(bootstrap) as conn:
        short = conn.request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[dict(
            resource_type=GROUP_RESOURCE, resource_name=group,
            configs=[dict(name="share.session.timeout.ms", config_operation=0, value=str(SHORT_SESSION_MS))])])
        assert short.responses[0].error_code == ErrorCode.none
        beat(conn, group, "quiet", 0, [topic])
        alive = beat(conn, group, "alive", 0, [topic])
        epoch = alive.member_epoch

        def quiet_gone() -> bool:
            nonlocal epoch
            response = beat(conn, group, "alive", epoch)  # "alive" keeps heartbeating
            epoch = response.member_epoch
            return {m.member_id for m in describe(conn, group)[0].members} == {"alive"}

        wait_until(quiet_gone, timeout=WAIT, interval=HEARTBEAT_MS / 1000, message="the silent member removed")
        assert beat(conn, group, "quiet", 2).error_code == ErrorCode.unknown_member_id
        final = beat(conn, group, "alive", epoch)
        owned = describe(conn, group)[0].members[0].assignment.topic_partitions
        assert [set(tp.partitions) for tp in owned] == [{0, 1}], final
        beat(conn, group, "alive", -1)


def test_a_group_id_has_one_type(bootstrap):
    topic, share, consumer, classic = unique("types"), unique("sg"), unique("cg"), unique("classic")
    create_topic(bootstrap, topic, 1)
    with KafkaRaw.connect(bootstrap) as conn:
        beat(conn, share, "s", 0, [topic])
        # the consumer protocol, a classic join, offsets: Kafka's answers for a share group's id
        consumer_beat = conn.request(CONSUMER_HEARTBEAT, 1, group_id=share, member_id="c", member_epoch=0,
                                     rebalance_timeout=30_000, subscribed_topic_names=(topic,),
                                     topic_partitions=())
        assert consumer_beat.error_code == ErrorCode.group_id_not_found
        assert consumer_beat.error_message == f"Group {share} is not a consumer group."
        (consumer_describe,) = conn.request(69, 0, group_ids=(share,), include_authorized_operations=False).groups
        assert (consumer_describe.error_code, consumer_describe.error_message) == (
            ErrorCode.group_id_not_found, f"Group {share} is not a consumer group.")
        join = conn.request(JOIN_GROUP, 5, group_id=share, session_timeout=10_000, rebalance_timeout=10_000,
                            member_id="", protocol_type="consumer", protocols=[dict(name="range", metadata=b"")])
        assert join.error_code == ErrorCode.inconsistent_group_protocol
        commit = conn.request(OFFSET_COMMIT, 9, group_id=share, generation_id_or_member_epoch=-1, member_id="",
                              topics=[dict(name=topic, partitions=[dict(
                                  partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                  committed_metadata="")])])
        assert commit.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
        fetch = conn.request(OFFSET_FETCH, 8, groups=[dict(group_id=share, topics=None)], require_stable=False)
        assert fetch.groups[0].error_code == ErrorCode.group_id_not_found
        delete_offsets = conn.request(OFFSET_DELETE, 0, group_id=share, topics=[
            dict(name=topic, partitions=[dict(partition_index=0)])])
        assert delete_offsets.error_code == ErrorCode.group_id_not_found
        coordinator = conn.request(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(share,))
        assert coordinator.coordinators[0].error_code == ErrorCode.none
        # ... and a share heartbeat on a consumer group's or a classic group's id
        conn.request(CONSUMER_HEARTBEAT, 1, group_id=consumer, member_id="c", member_epoch=0,
                     rebalance_timeout=30_000, subscribed_topic_names=(topic,), topic_partitions=())
        conn.request(OFFSET_COMMIT, 2, group_id=classic, generation_id=-1, member_id="", retention_time=-1,
                     topics=[dict(name=topic, partitions=[dict(partition_index=0, committed_offset=1,
                                                                committed_metadata="")])])
        for other in (consumer, classic):
            refused = beat(conn, other, "s", 0, [topic])
            assert refused.error_code == ErrorCode.group_id_not_found
            assert refused.error_message == f"Group {other} is not a share group."
            (described,) = describe(conn, other)
            assert (described.error_code, described.error_message) == (
                ErrorCode.group_id_not_found, f"Group {other} is not a share group.")
        (unknown,) = describe(conn, "no-such-group")
        assert (unknown.error_code, unknown.error_message) == (ErrorCode.group_id_not_found,
                                                               "Group no-such-group not found.")
        conn.request(CONSUMER_HEARTBEAT, 1, group_id=consumer, member_id="c", member_epoch=-1, topic_partitions=None)
        beat(conn, share, "s", -1)


def test_admin_apis_on_a_share_group(bootstrap):
    topic, group = unique("admin"), unique("sg")
    create_topic(bootstrap, topic, 2)
    with KafkaRaw.connect(bootstrap) as conn:
        set_config = conn.request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[dict(
            resource_type=GROUP_RESOURCE, resource_name=group,
            configs=[dict(name="share.heartbeat.interval.ms", config_operation=0, value="700")])])
        assert set_config.responses[0].error_code == ErrorCode.none
        joined = beat(conn, group, "admin-member", 0, [topic])
        assert joined.heartbeat_interval.total_seconds() * 1000 == 700, "the group config is the member's heartbeat interval"
        assert listed(conn, group) == {group: ("share", "Stable", "share")}
        assert listed(conn, group, types=("Share",)) == {group: ("share", "Stable", "share")}
        assert listed(conn, group, types=("consumer", "classic")) == {}
        assert listed(conn, group, states=("stable",)) == {group: ("share", "Stable", "share")}
        assert listed(conn, group, states=("empty",)) == {}
        (old_describe,) = conn.request(DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False).groups
        assert (old_describe.error_code, old_describe.group_state, old_describe.members) == (ErrorCode.none, "Dead", ())
        (described,) = describe(conn, group, operations=True)
        assert described.authorized_operations > 0, "IncludeAuthorizedOperations answered"
        (without,) = describe(conn, group)
        assert without.authorized_operations == -2**31
        assert conn.request(DELETE_GROUPS, 2, groups_names=(group,)).results[0].error_code == ErrorCode.non_empty_group
        beat(conn, group, "admin-member", -1)
        assert conn.request(DELETE_GROUPS, 2, groups_names=(group,)).results[0].error_code == ErrorCode.none
        assert listed(conn, group) == {}
        configs = conn.request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                               resources=[dict(resource_type=GROUP_RESOURCE, resource_name=group,
                                               configuration_keys=("share.heartbeat.interval.ms",))])
        entry = configs.results[0].configs[0]
        assert (entry.value, entry.config_source) == (str(HEARTBEAT_MS), 5), "its configs went with the group"
        assert conn.request(DELETE_GROUPS, 2, groups_names=(group,)).results[0].error_code == ErrorCode.group_id_not_found


def scrape(url: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        body = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


def share_consumer(bootstrap: str, group: str, name: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                          "share.acknowledgement.mode": "explicit"})


def test_share_consumers_join_and_get_their_assignment(started):
    """confluent-kafka's ShareConsumer joins by itself; two on one partition both get it; rmqk,
    the console and /metrics show the group."""
    bootstrap = started.bootstrap_servers
    topic, group = unique("confluent"), unique("sg")
    create_topic(bootstrap, topic, 1)
    consumers = [share_consumer(bootstrap, group, f"share-{i}") for i in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        with KafkaRaw.connect(bootstrap) as conn:
            topic_id = conn.metadata([topic], version=12).topics[0].topic_id

            def both_assigned() -> bool:
                for consumer in consumers:
                    try:
                        consumer.poll(0.2)  # its fetches fail until ShareFetch exists: what we test is membership
                    except Exception:  # noqa: BLE001, S110
                        pass
                (group_now,) = describe(conn, group)
                members = group_now.members if group_now.error_code == ErrorCode.none else ()
                return len(members) == 2 and all(
                    [(tp.topic_id, tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions]
                    == [(topic_id, topic, (0,))] for m in members)

            wait_until(both_assigned, timeout=WAIT, interval=0.2, message="both share consumers assigned")
            (group_now,) = describe(conn, group)
            assert {m.client_id for m in group_now.members} == {"share-0", "share-1"}
            assert all(m.subscribed_topic_names == (topic,) for m in group_now.members)
            rows = json.loads(subprocess.run(
                [sys.executable, "-m", "rmqkafka", "groups", "describe", group, "--json", "-b", bootstrap],
                capture_output=True, text=True, timeout=60, check=True).stdout)
            assert rows[0]["type"] == "share" and rows[0]["state"] == "Stable"
            assert sorted(m["client_id"] for m in rows[0]["members"]) == ["share-0", "share-1"]
            assert all(m["assignment"] == [{"topic": topic, "partition": 0}] for m in rows[0]["members"])
            listing = json.loads(subprocess.run(
                [sys.executable, "-m", "rmqkafka", "groups", "list", "--json", "-b", bootstrap],
                capture_output=True, text=True, timeout=60, check=True).stdout)
            assert {"group": group, "type": "share", "state": "Stable", "protocol_type": "share"} in listing
            with urllib.request.urlopen(started.metrics_url + "/api/groups", timeout=30) as response:
                shown = {g["group"]: g for g in json.loads(response.read())["groups"]}[group]
            assert (shown["type"], shown["state"], shown["protocol"]) == ("share", "Stable", "simple")
            assert sorted(m["client_id"] for m in shown["members"]) == ["share-0", "share-1"]
            assert all(m["assignment"] == [{"topic": topic, "partitions": [0]}] for m in shown["members"])
            assert [(p["topic"], p["partition"], len(p["members"])) for p in shown["share_partitions"]] == [
                (topic, 0, 2)]
            metrics = scrape(started.metrics_url)
            assert metrics[("rmqk_sharegroup_members", frozenset({("sharegroup", group)}))] == 2
            assert metrics[("rmqk_sharegroup_partition_members", frozenset(
                {("sharegroup", group), ("topic", topic), ("partition", "0")}))] == 2
        for consumer in consumers:
            consumer.close()
        consumers = []
        with KafkaRaw.connect(bootstrap) as conn:
            wait_until(lambda: describe(conn, group)[0].group_state == "Empty", timeout=WAIT,
                       message="the closed consumers left")
            subprocess.run([sys.executable, "-m", "rmqkafka", "groups", "delete", group, "-b", bootstrap],
                           capture_output=True, text=True, timeout=60, check=True)
            assert listed(conn, group) == {}
    finally:
        for consumer in consumers:
            consumer.close()


def test_a_share_consumer_joins_again_after_a_restart(broker_factory, tmp_path):
    """Membership is in memory: after a restart the consumer's heartbeat gets UNKNOWN_MEMBER_ID
    and librdkafka joins again with epoch 0 (same member id), getting its assignment back."""
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONFIG.items()))
    broker = broker_factory(config_file=config)
    create_topic(broker.bootstrap_servers, "restarted", 2)
    consumer = share_consumer(broker.bootstrap_servers, "sg-restart", "survivor")
    try:
        consumer.subscribe(["restarted"])

        def member() -> tuple[str, int] | None:
            for _ in range(3):
                try:
                    consumer.poll(0.1)
                except Exception:  # noqa: BLE001, S110 - no ShareFetch yet
                    pass
            with KafkaRaw.connect(broker.bootstrap_servers) as conn:
                (group,) = describe(conn, "sg-restart")
            if group.error_code != ErrorCode.none or not group.members:
                return None
            (m,) = group.members
            assert sum(len(tp.partitions) for tp in m.assignment.topic_partitions) == 2
            return m.member_id, m.member_epoch

        wait_until(lambda: member() is not None, timeout=WAIT, message="joined")
        before = member()
        broker.restart(same_port=True)
        wait_until(lambda: member() is not None, timeout=WAIT, message="joined again after the restart")
        after = member()
        assert after[0] == before[0] and after[1] == 1, (before, after)
    finally:
        consumer.close()
