"""Online migration between the classic and the consumer group protocol (KIP-848, issue 22):
conversions, classic members served inside a consumer group, and the migration policy,
driven through the group coordinator with an injected clock (no sleeping)."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.config import AdapterConfig
from rmqkafka.adapter.groups.consumer_coordinator import ConsumerGroupSettings, HeartbeatRequest
from rmqkafka.adapter.groups.coordinator import GroupCoordinator, GroupSettings
from rmqkafka.adapter.groups.group import GroupState
from rmqkafka.adapter.groups.migration import MigrationPolicy
from rmqkafka.adapter.groups.reconciliation import MemberState
from rmqkafka.adapter.groups.subscription import decode_assignment, encode_assignment
from rmqkafka.adapter.properties import ConfigError, build_config, parse_properties
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.offset_store import CommittedOffset
from rmqkafka.storage.store import MessageStore

T = uuid.uuid4()
SESSION, REBALANCE = 10_000, 30_000
ALL = {("t", p) for p in range(6)}


class Catalog:
    def lookup(self, name):
        return (T, 6) if name == "t" else None

    def names(self):
        return ["t"]

    def generation(self):
        return 1  # its one topic is never created again

    def name_of(self, topic_id):
        return "t" if topic_id == T else None


def subscription(topics=("t",), owned=None) -> bytes:
    """ConsumerProtocolSubscription: v0 without ``owned``, else v1 with those partitions."""
    version = 0 if owned is None else 1
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", -1)
    if owned is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(owned):
            by_topic.setdefault(topic, []).append(p)
        out += struct.pack(">i", len(by_topic))
        for topic, ps in by_topic.items():
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ps))
            out += b"".join(struct.pack(">i", p) for p in ps)
    return bytes(out)


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def store(tmp_path, clock):
    s = MessageStore(StorageConfig(data_dir=tmp_path), clock)
    s.open()
    s.create_topic("t", 6, {})
    yield s
    s.close_sync()


def coordinator_with(store, clock, policy=MigrationPolicy.BIDIRECTIONAL) -> GroupCoordinator:
    return GroupCoordinator(store, clock, GroupSettings(), Catalog(),
                            ConsumerGroupSettings(migration_policy=policy))


@pytest.fixture
def coordinator(store, clock):
    return coordinator_with(store, clock)


def classic_join(c, member_id="", protocol_type="consumer", owned=None, client="c", session=SESSION):
    return asyncio.ensure_future(c.join("g", member_id, None, protocol_type, [("range", subscription(owned=owned))],
                                        session, REBALANCE, client, "h", True))


async def stable_classic_group(c) -> dict[str, int]:
    """Classic members a (partitions 0-2) and b (3-5), Stable at generation 2; their ids."""
    a = (await classic_join(c, client="a"))["member_id"]
    first = await classic_join(c, a, client="a")
    await c.sync("g", first["generation_id"], a, None, None, None, {a: encode_assignment({"t": {0, 1, 2, 3, 4, 5}})})
    b = (await classic_join(c, client="b"))["member_id"]
    b_join = classic_join(c, b, client="b")
    await asyncio.sleep(0)
    assert c.heartbeat("g", first["generation_id"], a, None) is ErrorCode.rebalance_in_progress
    a_answer = await classic_join(c, a, client="a")
    b_answer = await b_join
    generation = a_answer["generation_id"]
    assert generation == b_answer["generation_id"] == 2
    assignments = {a: encode_assignment({"t": {0, 1, 2}}), b: encode_assignment({"t": {3, 4, 5}})}
    sync_b = asyncio.ensure_future(c.sync("g", generation, b, None, None, None, {}))
    assert (await c.sync("g", generation, a, None, None, None, assignments))[0] is ErrorCode.none
    assert (await sync_b)[0] is ErrorCode.none
    assert c.groups["g"].state is GroupState.STABLE
    return {"a": a, "b": b}


def consumer_beat(c, member_id, epoch, owned=None, topics=("t",)):
    return c.consumer.heartbeat(
        HeartbeatRequest("g", member_id, epoch, rebalance_timeout_ms=REBALANCE if epoch == 0 else -1,
                         subscribed_names=topics if epoch == 0 else None,
                         owned={} if epoch == 0 else owned),
        "new", "h", api_version=1)


def owned_by_everyone(c) -> list[tuple[str, int]]:
    group = c.consumer.groups["g"]
    return [("t", p) for m in group.members.values() for ps in m.owns().values() for p in ps]


async def test_upgrade_keeps_classic_assignments_and_continues_the_epoch(coordinator):
    ids = await stable_classic_group(coordinator)
    answer = consumer_beat(coordinator, "new-1", 0)
    assert answer.error is ErrorCode.none, answer
    assert coordinator.group_type("g") == "consumer" and "g" not in coordinator.groups
    group = coordinator.consumer.groups["g"]
    a, b = group.members[ids["a"]], group.members[ids["b"]]
    assert a.classic is not None and b.classic is not None and group.members["new-1"].classic is None
    assert (a.subscribed_names, a.classic.session_timeout_ms) == (("t",), SESSION)
    # Kafka: member epochs = the generation; the new member bumps the group epoch once more.
    assert group.epoch == 3 and group.assignment_epoch == 3
    assert a.previous_epoch == 2
    # The classic members still own what they had; the new member waits for it to be revoked.
    assert answer.member_epoch == 3 and answer.assignment == {}
    assert sorted(owned_by_everyone(coordinator)) == sorted(ALL)


async def test_classic_members_rejoin_revoke_and_hand_partitions_to_the_new_member(coordinator):
    ids = await stable_classic_group(coordinator)
    consumer_beat(coordinator, "new-1", 0)
    c = coordinator
    for name in ("a", "b"):
        assert c.heartbeat("g", 2, ids[name], None) is ErrorCode.rebalance_in_progress
        assert c.check_commit("g", 2, ids[name], None, api_version=7) is ErrorCode.none  # before it rejoins
    # An eager member revoked everything before rejoining (v0 subscription: owns nothing).
    joined = await classic_join(c, ids["a"], client="a")
    assert joined["error_code"] is ErrorCode.none
    assert (joined["generation_id"], joined["leader"], joined["members"]) == (3, "", [])
    assert joined["protocol_type"] == "consumer" and joined["protocol_name"] == "range"
    error, data, ptype, pname = await c.sync("g", 3, ids["a"], None, "consumer", "range", {})
    assert (error, ptype, pname) == (ErrorCode.none, "consumer", "range")
    a_parts = decode_assignment(data)
    assert c.heartbeat("g", 3, ids["a"], None) in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    assert c.check_commit("g", 2, ids["a"], None, api_version=7) is ErrorCode.illegal_generation
    assert c.check_commit("g", 3, ids["a"], None, api_version=7) is ErrorCode.none
    assert c.consumer.check_fetch("g", ids["a"], 2) is ErrorCode.illegal_generation
    assert c.consumer.check_fetch("g", ids["a"], 3) is ErrorCode.none
    # A cooperative member rejoins still owning its partitions (v1): it keeps its epoch and
    # the partitions it may keep, revokes the others, then rejoins.
    b_owned = {("t", 3), ("t", 4), ("t", 5)}
    joined = await classic_join(c, ids["b"], owned=b_owned, client="b")
    b_member = c.consumer.groups["g"].members[ids["b"]]
    assert b_member.state is MemberState.UNREVOKED_PARTITIONS  # uniform: 2 each, sticky
    assert joined["generation_id"] == 2
    error, data, _, _ = await c.sync("g", 2, ids["b"], None, "consumer", "range", {})
    kept = decode_assignment(data)
    assert error is ErrorCode.none and kept < b_owned
    # Kafka: a member that must revoke is told to rejoin (once it has revoked).
    assert c.heartbeat("g", 2, ids["b"], None) is ErrorCode.rebalance_in_progress
    joined = await classic_join(c, ids["b"], owned=kept, client="b")
    assert joined["generation_id"] == 3
    b_parts = decode_assignment((await c.sync("g", 3, ids["b"], None, None, None, {}))[1])
    # The new member gets the rest, once released; nobody ever owns a partition twice.
    answer = consumer_beat(c, "new-1", 3, owned={})
    new_parts = {("t", p) for ps in (answer.assignment or {}).values() for p in ps}
    assert len(owned_by_everyone(c)) == len(set(owned_by_everyone(c)))
    for _ in range(3):  # classic members pick up partitions released after their join
        for name, parts in (("a", a_parts), ("b", b_parts)):
            if c.heartbeat("g", 3, ids[name], None) is ErrorCode.rebalance_in_progress:
                await classic_join(c, ids[name], owned=parts, client=name)
        a_parts = decode_assignment((await c.sync("g", 3, ids["a"], None, None, None, {}))[1])
        b_parts = decode_assignment((await c.sync("g", 3, ids["b"], None, None, None, {}))[1])
    assert a_parts | b_parts | new_parts == ALL
    assert len(a_parts) + len(b_parts) + len(new_parts) == 6 and new_parts
    assert c.consumer.state_of("g").value == "Stable"


async def test_downgrade_when_the_last_consumer_member_leaves(coordinator, store):
    ids = await stable_classic_group(coordinator)
    await coordinator.commit("g", {("t", 0): CommittedOffset(42, -1, "m", 0)})
    consumer_beat(coordinator, "new-1", 0)
    epoch = coordinator.consumer.groups["g"].epoch
    left = coordinator.consumer.heartbeat(HeartbeatRequest("g", "new-1", -1), "new", "h", api_version=1)
    assert left.error is ErrorCode.none
    assert coordinator.group_type("g") == "classic" and "g" not in coordinator.consumer.groups
    group = coordinator.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and group.generation_id == epoch
    assert set(group.members) == set(ids.values()) and group.protocol_name == "range"
    assert group.members[ids["a"]].session_timeout_ms == SESSION
    # The classic members rejoin a classic rebalance; offsets survive both conversions.
    assert coordinator.heartbeat("g", 2, ids["a"], None) is ErrorCode.illegal_generation
    joins = [classic_join(coordinator, ids[n], client=n) for n in ("a", "b")]
    answers = await asyncio.gather(*joins)
    assert {a["generation_id"] for a in answers} == {epoch + 1}
    assert coordinator.committed("g", "t", 0).offset == 42


async def test_upgrade_policy_keeps_a_consumer_group_of_classic_members(store, clock):
    c = coordinator_with(store, clock, MigrationPolicy.UPGRADE)
    ids = await stable_classic_group(c)
    consumer_beat(c, "new-1", 0)
    c.consumer.heartbeat(HeartbeatRequest("g", "new-1", -1), "new", "h", api_version=1)
    assert c.group_type("g") == "consumer" and set(c.consumer.groups["g"].members) == set(ids.values())
    assert c.heartbeat("g", 2, ids["a"], None) is ErrorCode.rebalance_in_progress  # the epoch moved


@pytest.mark.parametrize("policy", [MigrationPolicy.DISABLED, MigrationPolicy.DOWNGRADE])
async def test_a_policy_without_upgrade_refuses_as_kafka(store, clock, policy):
    c = coordinator_with(store, clock, policy)
    await stable_classic_group(c)
    answer = consumer_beat(c, "new-1", 0)
    assert answer.error is ErrorCode.group_id_not_found
    assert answer.message == "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    assert c.group_type("g") == "classic" and c.groups["g"].state is GroupState.STABLE


async def test_a_classic_group_of_another_protocol_type_is_not_upgraded(coordinator):
    member = (await classic_join(coordinator, protocol_type="connect"))["member_id"]
    assert (await classic_join(coordinator, member, protocol_type="connect"))["error_code"] is ErrorCode.none
    answer = consumer_beat(coordinator, "new-1", 0)
    assert answer.error is ErrorCode.group_id_not_found
    assert answer.message == ("Cannot upgrade classic group g to consumer group because the group does not use "
                              "the consumer embedded protocol.")


async def test_classic_join_into_a_consumer_group_checks_the_protocol(coordinator):
    consumer_beat(coordinator, "new-1", 0)
    first = await classic_join(coordinator, protocol_type="connect")
    assert first["error_code"] is ErrorCode.inconsistent_group_protocol
    first = await classic_join(coordinator)
    assert first["error_code"] is ErrorCode.member_id_required
    joined = await classic_join(coordinator, first["member_id"])
    assert joined["error_code"] is ErrorCode.none and joined["generation_id"] == 2
    member = coordinator.consumer.groups["g"].members[first["member_id"]]
    assert member.classic is not None and member.epoch == 2


async def test_a_classic_member_in_a_consumer_group_times_out_on_its_own_session(coordinator, clock):
    consumer_beat(coordinator, "new-1", 0)
    first = await classic_join(coordinator, session=6_000)
    await classic_join(coordinator, first["member_id"], session=6_000)
    clock.advance(5_000)
    consumer_beat(coordinator, "new-1", 1, owned=None)
    coordinator.consumer.tick()
    assert first["member_id"] in coordinator.consumer.groups["g"].members
    clock.advance(1_500)
    coordinator.consumer.tick()
    assert first["member_id"] not in coordinator.consumer.groups["g"].members
    assert coordinator.heartbeat("g", 2, first["member_id"], None) is ErrorCode.unknown_member_id


def test_migration_policy_is_parsed_case_insensitively():
    assert MigrationPolicy.parse(" Upgrade ") is MigrationPolicy.UPGRADE
    assert AdapterConfig().group_consumer_migration_policy is MigrationPolicy.BIDIRECTIONAL
    config = build_config(parse_properties("group.consumer.migration.policy=DISABLED\n"), environ={})
    assert config.adapter.group_consumer_migration_policy is MigrationPolicy.DISABLED
    with pytest.raises(ConfigError) as caught:
        build_config(parse_properties("group.consumer.migration.policy=sideways\n"), environ={})
    assert "group.consumer.migration.policy" in str(caught.value) and "\n" not in str(caught.value)


async def test_a_previous_runs_consumer_member_meeting_a_classic_group_rejoins(coordinator):
    """After a restart classic members may re-form the group first: a consumer-protocol member
    of the previous run (epoch > 0) is told UNKNOWN_MEMBER_ID and rejoins, which upgrades the
    group; once the id was a consumer group in this run, Kafka's GROUP_ID_NOT_FOUND."""
    await stable_classic_group(coordinator)
    answer = consumer_beat(coordinator, "old-run", 7, owned={})
    assert answer.error is ErrorCode.unknown_member_id and coordinator.group_type("g") == "classic"
    assert consumer_beat(coordinator, "old-run", 0).error is ErrorCode.none
    coordinator.consumer.heartbeat(HeartbeatRequest("g", "old-run", -1), "new", "h", api_version=1)
    assert coordinator.group_type("g") == "classic"  # downgraded
    answer = consumer_beat(coordinator, "old-run", 4, owned={})
    assert answer.error is ErrorCode.group_id_not_found
    assert answer.message == "Group g is not a consumer group."


async def test_a_previous_runs_consumer_member_meeting_a_joining_classic_member_rejoins(coordinator):
    """The classic group exists with no member yet (a MEMBER_ID_REQUIRED round in flight)."""
    first = await classic_join(coordinator)
    assert first["error_code"] is ErrorCode.member_id_required and not coordinator.groups["g"].members
    assert consumer_beat(coordinator, "old-run", 3, owned={}).error is ErrorCode.unknown_member_id


async def test_downgrade_when_the_last_consumer_member_times_out(coordinator, clock):
    ids = await stable_classic_group(coordinator)
    consumer_beat(coordinator, "new-1", 0)
    for name in ("a", "b"):  # eager members: they revoke everything and rejoin
        assert (await classic_join(coordinator, ids[name], client=name))["generation_id"] == 3
        assert (await coordinator.sync("g", 3, ids[name], None, None, None, {}))[0] is ErrorCode.none
    answers = []
    for _ in range(6):  # the classic members keep their sessions (10 s); the new one is silent
        clock.advance(8_000)
        answers.append({coordinator.heartbeat("g", 3, ids[name], None) for name in ("a", "b")})
        coordinator.consumer.tick()
    assert coordinator.group_type("g") == "classic"
    group = coordinator.groups["g"]
    assert set(group.members) == set(ids.values()) and group.state is GroupState.PREPARING_REBALANCE
    assert group.generation_id == 3  # no epoch bump: the classic members are told to rejoin
    assert answers == [{ErrorCode.none}] * 6
    assert {coordinator.heartbeat("g", 3, ids[name], None) for name in ("a", "b")} == {ErrorCode.rebalance_in_progress}


async def test_a_classic_member_that_does_not_sync_or_rejoin_in_time_is_removed(coordinator, clock):
    ids = await stable_classic_group(coordinator)
    consumer_beat(coordinator, "new-1", 0)
    assert coordinator.heartbeat("g", 2, ids["a"], None) is ErrorCode.rebalance_in_progress
    assert (await classic_join(coordinator, ids["b"], client="b"))["error_code"] is ErrorCode.none
    for _ in range(3):  # both keep heartbeating (sessions of 10 s), neither rejoins nor syncs
        clock.advance(9_000)
        coordinator.heartbeat("g", 2, ids["a"], None)
        coordinator.heartbeat("g", 3, ids["b"], None)
        coordinator.consumer.tick()
    clock.advance(4_000)  # 31 s: past both rebalance timeouts (30 s)
    coordinator.consumer.tick()
    assert set(coordinator.consumer.groups["g"].members) == {"new-1"}


async def test_classic_sync_checks_the_first_protocol_and_answers_in_its_version(coordinator):
    consumer_beat(coordinator, "new-1", 0)
    protocols = [("cooperative-sticky", subscription(owned=set())), ("range", subscription())]
    first = await coordinator.join("g", "", None, "consumer", protocols, SESSION, REBALANCE, "c", "h", True)
    joined = await coordinator.join("g", first["member_id"], None, "consumer", protocols, SESSION, REBALANCE,
                                    "c", "h", True)
    member, generation = joined["member_id"], joined["generation_id"]
    assert joined["protocol_name"] == "cooperative-sticky"  # the member's first protocol, as Kafka
    assert (await coordinator.sync("g", generation, member, None, "consumer", "range", {}))[0] \
        is ErrorCode.inconsistent_group_protocol
    error, data, ptype, pname = await coordinator.sync("g", generation, member, None, None, None, {})
    assert (error, ptype, pname) == (ErrorCode.none, None, None)  # echoes the request (v0-4: none)
    assert struct.unpack_from(">h", data)[0] == 1  # the version of its subscription
    # A LeaveGroup may remove the consumer-protocol member too (admin removal): a downgrade.
    assert coordinator.leave("g", "new-1", None) is ErrorCode.none
    assert coordinator.group_type("g") == "classic"


async def test_classic_join_errors_come_in_kafkas_order(coordinator):
    consumer_beat(coordinator, "new-1", 0)
    malformed = await coordinator.join("g", "", None, "consumer", [("range", b"\x00")], SESSION, REBALANCE,
                                       "c", "h", False)
    assert malformed["error_code"] is ErrorCode.unknown_server_error
    required = await coordinator.join("g", "", None, "consumer", [("range", b"\x00")], SESSION, REBALANCE,
                                      "c", "h", True)
    assert required["error_code"] is ErrorCode.member_id_required  # before the metadata is read


async def test_a_static_classic_member_comes_back_under_a_new_id_with_its_assignment(coordinator):
    consumer_beat(coordinator, "new-1", 0)

    def static_join(member_id=""):
        return coordinator.join("g", member_id, "instance-1", "consumer", [("range", subscription())], SESSION,
                                REBALANCE, "s", "h", True)

    first = await static_join()  # a static member needs no MEMBER_ID_REQUIRED round
    assert first["error_code"] is ErrorCode.none
    old_id = first["member_id"]
    group = coordinator.consumer.groups["g"]
    before = (group.members[old_id].epoch, group.members[old_id].assigned)
    again = await static_join()  # restarted: no member id
    assert again["error_code"] is ErrorCode.none and again["member_id"] != old_id
    assert (group.members[again["member_id"]].epoch, group.members[again["member_id"]].assigned) == before
    assert old_id not in group.members and group.static_members["instance-1"] == again["member_id"]
    assert coordinator.heartbeat("g", again["generation_id"], old_id, "instance-1") is ErrorCode.fenced_instance_id
    assert (await static_join(old_id))["error_code"] is ErrorCode.fenced_instance_id


async def test_a_classic_member_replacing_the_last_static_consumer_member_downgrades(coordinator, store):
    """Kafka's validateOnlineDowngradeWithReplacedMember: a rolling downgrade of static members
    restarts the last consumer-protocol member as a classic one under its instance id; the
    group turns classic and the join is served there (a rebalance of the classic members)."""
    ids = await stable_classic_group(coordinator)
    upgraded = coordinator.consumer.heartbeat(
        HeartbeatRequest("g", "new-1", 0, instance_id="instance-1", rebalance_timeout_ms=REBALANCE,
                         subscribed_names=("t",), owned={}), "new", "h", api_version=1)
    assert upgraded.error is ErrorCode.none and coordinator.group_type("g") == "consumer"
    join = asyncio.ensure_future(coordinator.join("g", "", "instance-1", "consumer", [("range", subscription())],
                                                  SESSION, REBALANCE, "s", "h", True))
    await asyncio.sleep(0)
    assert coordinator.group_type("g") == "classic" and "g" not in coordinator.consumer.groups
    group = coordinator.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and "instance-1" in group.static_members
    assert "new-1" not in group.members and set(ids.values()) < set(group.members)
    rejoins = [classic_join(coordinator, ids[n], client=n) for n in ("a", "b")]
    answers = await asyncio.gather(join, *rejoins)
    assert {a["error_code"] for a in answers} == {ErrorCode.none}
    assert len({a["generation_id"] for a in answers}) == 1


async def test_the_replacing_classic_member_is_served_in_the_consumer_group_without_downgrade(store, clock):
    c = coordinator_with(store, clock, MigrationPolicy.UPGRADE)
    await stable_classic_group(c)
    c.consumer.heartbeat(HeartbeatRequest("g", "new-1", 0, instance_id="instance-1", rebalance_timeout_ms=REBALANCE,
                                          subscribed_names=("t",), owned={}), "new", "h", api_version=1)
    answer = await c.join("g", "", "instance-1", "consumer", [("range", subscription())], SESSION, REBALANCE,
                          "s", "h", True)
    assert answer["error_code"] is ErrorCode.none and c.group_type("g") == "consumer"
    assert "new-1" not in c.consumer.groups["g"].members
