"""The group coordinator's state machine, driven with an injected clock (no sleeping)."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.groups.coordinator import GroupCoordinator, GroupSettings
from rmqkafka.adapter.groups.group import GroupState
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.offset_store import CommittedOffset
from rmqkafka.storage.store import MessageStore

SESSION = 10_000
REBALANCE = 30_000
PROTOCOLS = [("range", b"meta-range"), ("roundrobin", b"meta-rr")]


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


@pytest.fixture
def coordinator(store, clock):
    return GroupCoordinator(store, clock, GroupSettings())


def join(c, member_id="", instance=None, protocols=PROTOCOLS, client="c", v4=True, rebalance=REBALANCE):
    return asyncio.ensure_future(
        c.join("g", member_id, instance, "consumer", protocols, SESSION, rebalance, client, "h", v4)
    )


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


async def join_new(c, **kw) -> dict:
    """A v4+ dynamic member: MEMBER_ID_REQUIRED first, then the real join (not awaited)."""
    first = await join(c, **kw)
    assert first["error_code"] is ErrorCode.member_id_required
    return first["member_id"]


async def test_single_member_joins_syncs_and_heartbeats(coordinator):
    member = await join_new(coordinator)
    answer = await join(coordinator, member_id=member)
    assert answer["error_code"] is ErrorCode.none
    assert answer["generation_id"] == 1 and answer["leader"] == member
    assert answer["protocol_name"] == "range"
    assert [m["member_id"] for m in answer["members"]] == [member]
    error, assignment, ptype, pname = await coordinator.sync("g", 1, member, None, "consumer", "range", {member: b"A"})
    assert (error, assignment, ptype, pname) == (ErrorCode.none, b"A", "consumer", "range")
    assert coordinator.groups["g"].state is GroupState.STABLE
    assert coordinator.heartbeat("g", 1, member, None) is ErrorCode.none
    assert coordinator.heartbeat("g", 0, member, None) is ErrorCode.illegal_generation
    assert coordinator.heartbeat("g", 1, "nobody", None) is ErrorCode.unknown_member_id


async def test_second_member_triggers_a_rebalance_and_only_the_leader_gets_members(coordinator):
    a = await join_new(coordinator, client="a")
    await join(coordinator, member_id=a)
    await coordinator.sync("g", 1, a, None, None, None, {a: b"all"})
    b = await join_new(coordinator, client="b")
    b_join = join(coordinator, member_id=b)
    await settle()
    assert not b_join.done()  # waits for a to rejoin
    assert coordinator.heartbeat("g", 1, a, None) is ErrorCode.rebalance_in_progress
    a_join = join(coordinator, member_id=a)
    a_answer, b_answer = await asyncio.gather(a_join, b_join)
    assert a_answer["generation_id"] == b_answer["generation_id"] == 2
    assert a_answer["leader"] == b_answer["leader"] == a
    assert {m["member_id"] for m in a_answer["members"]} == {a, b}
    assert b_answer["members"] == []
    b_sync = asyncio.ensure_future(coordinator.sync("g", 2, b, None, None, None, {}))
    await settle()
    assert not b_sync.done()  # followers wait for the leader's assignments
    a_sync = await coordinator.sync("g", 2, a, None, None, None, {a: b"p0-2", b: b"p3-5"})
    assert a_sync[1] == b"p0-2"
    assert (await b_sync)[1] == b"p3-5"


async def test_a_silent_member_is_removed_after_its_session_timeout(coordinator, clock):
    a = await join_new(coordinator)
    b = await join_new(coordinator)
    answers = await asyncio.gather(join(coordinator, member_id=a), join(coordinator, member_id=b))
    generation = answers[0]["generation_id"]
    leader = answers[0]["leader"]
    await asyncio.gather(
        coordinator.sync("g", generation, a, None, None, None, {a: b"x", b: b"y"}),
        coordinator.sync("g", generation, b, None, None, None, {a: b"x", b: b"y"}),
    )
    clock.advance(SESSION // 2)
    survivor = a if leader == a else b
    crashed = b if survivor == a else a
    assert coordinator.heartbeat("g", generation, survivor, None) is ErrorCode.none
    clock.advance(SESSION // 2 + 1)
    coordinator.tick()
    group = coordinator.groups["g"]
    assert crashed not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert coordinator.heartbeat("g", generation, survivor, None) is ErrorCode.rebalance_in_progress
    answer = await join(coordinator, member_id=survivor)
    assert answer["generation_id"] == generation + 1
    assert [m["member_id"] for m in answer["members"]] == [survivor]


async def _joined_pair(coordinator, rebalance=REBALANCE):
    """Two members through JoinGroup of generation 1; returns (leader, follower)."""
    a = await join_new(coordinator, client="a", rebalance=rebalance)
    b = await join_new(coordinator, client="b", rebalance=rebalance)
    answers = await asyncio.gather(
        join(coordinator, member_id=a, rebalance=rebalance), join(coordinator, member_id=b, rebalance=rebalance)
    )
    leader = answers[0]["leader"]
    return leader, (b if leader == a else a)


async def test_a_follower_waiting_in_sync_group_is_exempt_from_its_session_timeout(coordinator, clock):
    """Kafka exempts members awaiting join *and* sync: a slow leader must not evict its followers."""
    leader, follower = await _joined_pair(coordinator)
    follower_sync = asyncio.ensure_future(coordinator.sync("g", 1, follower, None, None, None, {}))
    await settle()
    for _ in range(3):  # the leader heartbeats while it computes the assignment; the follower waits
        clock.advance(SESSION // 2)
        assert coordinator.heartbeat("g", 1, leader, None) is ErrorCode.none
        coordinator.tick()
    assert follower in coordinator.groups["g"].members and not follower_sync.done()
    await coordinator.sync("g", 1, leader, None, None, None, {leader: b"L", follower: b"F"})
    assert (await follower_sync)[:2] == (ErrorCode.none, b"F")
    # The wait counted as a heartbeat: the follower has a full session from the leader's sync.
    clock.advance(SESSION - 1)
    coordinator.tick()
    assert coordinator.groups["g"].state is GroupState.STABLE
    assert coordinator.heartbeat("g", 1, follower, None) is ErrorCode.none


async def test_a_member_that_never_sends_sync_group_is_removed_after_the_rebalance_timeout(coordinator, clock):
    """Kafka's pending-sync timeout: a leader that heartbeats but never syncs cannot hang the group."""
    leader, follower = await _joined_pair(coordinator, rebalance=15_000)
    follower_sync = asyncio.ensure_future(coordinator.sync("g", 1, follower, None, None, None, {}))
    await settle()
    for _ in range(2):
        clock.advance(5_000)
        assert coordinator.heartbeat("g", 1, leader, None) is ErrorCode.none
        coordinator.tick()
    group = coordinator.groups["g"]
    assert set(group.members) == {leader, follower}
    clock.advance(5_000)
    coordinator.tick()
    assert leader not in group.members and follower in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert (await follower_sync)[0] is ErrorCode.rebalance_in_progress
    clock.advance(SESSION - 1)  # the follower's session restarted when its wait ended
    coordinator.tick()
    answer = await join(coordinator, member_id=follower, rebalance=15_000)
    assert answer["generation_id"] == 2 and answer["leader"] == follower


async def test_a_silent_follower_that_has_not_synced_still_times_out(coordinator, clock):
    leader, follower = await _joined_pair(coordinator)
    clock.advance(SESSION // 2)
    assert coordinator.heartbeat("g", 1, leader, None) is ErrorCode.none
    clock.advance(SESSION // 2 + 1)
    coordinator.tick()
    assert follower not in coordinator.groups["g"].members


async def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped(coordinator, clock):
    a = await join_new(coordinator, rebalance=5_000)
    await join(coordinator, member_id=a, rebalance=5_000)
    await coordinator.sync("g", 1, a, None, None, None, {})
    c = await join_new(coordinator, rebalance=5_000)
    c_join = join(coordinator, member_id=c, rebalance=5_000)
    await settle()
    clock.advance(4_000)
    assert coordinator.heartbeat("g", 1, a, None) is ErrorCode.rebalance_in_progress  # a is alive...
    clock.advance(1_001)  # ...but never rejoins
    coordinator.tick()
    answer = await c_join
    assert answer["error_code"] is ErrorCode.none and answer["generation_id"] == 2
    assert [m["member_id"] for m in answer["members"]] == [c]
    assert coordinator.heartbeat("g", 1, a, None) is ErrorCode.unknown_member_id


async def test_leave_triggers_a_rebalance_and_the_last_leave_empties_the_group(coordinator):
    a = await join_new(coordinator)
    await join(coordinator, member_id=a)
    await coordinator.sync("g", 1, a, None, None, None, {})
    assert coordinator.leave("g", a, None) is ErrorCode.none
    group = coordinator.groups["g"]
    coordinator.tick()
    assert group.state is GroupState.EMPTY and not group.members
    assert coordinator.leave("g", a, None) is ErrorCode.unknown_member_id


async def test_a_waiting_join_is_answered_when_the_other_member_leaves(coordinator):
    a = await join_new(coordinator)
    b = await join_new(coordinator)
    await asyncio.gather(join(coordinator, member_id=a), join(coordinator, member_id=b))
    # A rebalance in which only a rejoins: b leaving completes it.
    coordinator._prepare_rebalance(coordinator.groups["g"], "test")
    a_join = join(coordinator, member_id=a)
    await settle()
    assert not a_join.done()
    coordinator.leave("g", b, None)
    answer = await a_join
    assert answer["error_code"] is ErrorCode.none and len(answer["members"]) == 1


async def test_static_member_restart_keeps_its_assignment_without_a_rebalance(coordinator):
    first = await join(coordinator, instance="i-1", v4=True)
    assert first["error_code"] is ErrorCode.none  # static members skip MEMBER_ID_REQUIRED
    old_id = first["member_id"]
    await coordinator.sync("g", 1, old_id, "i-1", None, None, {old_id: b"mine"})
    again = await join(coordinator, instance="i-1")  # restarted: no member id
    assert again["error_code"] is ErrorCode.none
    assert again["generation_id"] == 1 and again["member_id"] != old_id
    error, assignment, *_ = await coordinator.sync("g", 1, again["member_id"], "i-1", None, None, {})
    assert (error, assignment) == (ErrorCode.none, b"mine")
    assert coordinator.heartbeat("g", 1, old_id, "i-1") is ErrorCode.fenced_instance_id
    assert coordinator.groups["g"].state is GroupState.STABLE


async def test_protocol_checks(coordinator):
    a = await join_new(coordinator)
    await join(coordinator, member_id=a)
    other = await coordinator.join("g", "", None, "connect", PROTOCOLS, SESSION, REBALANCE, "x", "h", True)
    assert other["error_code"] is ErrorCode.inconsistent_group_protocol
    none_common = await coordinator.join("g", "", None, "consumer", [("sticky", b"")], SESSION, REBALANCE, "x", "h", True)
    assert none_common["error_code"] is ErrorCode.inconsistent_group_protocol
    bad_session = await coordinator.join("g", "", None, "consumer", PROTOCOLS, 10, REBALANCE, "x", "h", True)
    assert bad_session["error_code"] is ErrorCode.invalid_session_timeout


async def test_protocol_vote_prefers_what_members_list_first(coordinator):
    a = await join_new(coordinator)
    b = await join_new(coordinator)
    answers = await asyncio.gather(
        join(coordinator, member_id=a, protocols=[("roundrobin", b""), ("range", b"")]),
        join(coordinator, member_id=b, protocols=[("roundrobin", b""), ("range", b"")]),
    )
    assert answers[0]["protocol_name"] == "roundrobin"


async def test_commit_rules(coordinator):
    offsets = {("t", 0): CommittedOffset(5, -1, "m", 0)}
    # A simple consumer of a group without members may commit.
    assert coordinator.check_commit("simple", -1, "", None) is ErrorCode.none
    await coordinator.commit("simple", offsets)
    assert coordinator.committed("simple", "t", 0).offset == 5
    a = await join_new(coordinator)
    await join(coordinator, member_id=a)
    assert coordinator.check_commit("g", 1, a, None) is ErrorCode.rebalance_in_progress  # completing
    await coordinator.sync("g", 1, a, None, None, None, {})
    assert coordinator.check_commit("g", 1, a, None) is ErrorCode.none
    assert coordinator.check_commit("g", 0, a, None) is ErrorCode.illegal_generation
    assert coordinator.check_commit("g", 1, "stranger", None) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("g", -1, "", None) is ErrorCode.unknown_member_id


async def test_commit_rules_of_unknown_and_empty_groups(coordinator):
    """Kafka's validateOffsetCommit: a commit naming a generation or a member must come from
    a current member. A group this coordinator does not know (never joined here, or a broker
    restart forgot its members) is an older generation for OffsetCommit, and for
    TxnOffsetCommit an empty group the member is not in (KIP-447's zombie fencing)."""
    offsets = {("t", 0): CommittedOffset(5, -1, "m", 0)}
    assert coordinator.check_commit("unknown", 5, "zombie", None) is ErrorCode.illegal_generation
    assert coordinator.check_commit("unknown", 5, "", None) is ErrorCode.illegal_generation
    assert coordinator.check_commit("unknown", -1, "zombie", None) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("unknown", 5, "zombie", None, transactional=True) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("unknown", 5, "", None, transactional=True) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("unknown", -1, "", "instance", transactional=True) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("unknown", -1, "", None, transactional=True) is ErrorCode.none
    assert coordinator.check_commit("unknown", -1, "", None) is ErrorCode.none
    await coordinator.commit("empty", offsets)  # a group with offsets and no members
    assert coordinator.check_commit("empty", 3, "stale-member", None) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("empty", 3, "", None) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("empty", 3, "stale-member", None, transactional=True) is ErrorCode.unknown_member_id
    assert coordinator.check_commit("empty", -1, "", None) is ErrorCode.none


async def test_txn_commit_rules_of_a_live_group(coordinator):
    a = await join_new(coordinator)
    await join(coordinator, member_id=a)
    # Kafka answers REBALANCE_IN_PROGRESS only to OffsetCommit while the group completes its
    # rebalance; a transactional commit of the current generation is accepted
    assert coordinator.check_commit("g", 1, a, None, transactional=True) is ErrorCode.none
    assert coordinator.check_commit("g", 0, a, None, transactional=True) is ErrorCode.illegal_generation
    assert coordinator.check_commit("g", 1, "stranger", None, transactional=True) is ErrorCode.unknown_member_id
    # no generation and no member: older TxnOffsetCommit versions carry neither
    assert coordinator.check_commit("g", -1, "", None, transactional=True) is ErrorCode.none


async def test_delete_and_list(coordinator):
    a = await join_new(coordinator)
    await join(coordinator, member_id=a)
    assert coordinator.delete("g") is ErrorCode.non_empty_group
    assert coordinator.delete("missing") is ErrorCode.group_id_not_found
    await coordinator.commit("offsets-only", {("t", 1): CommittedOffset(1, -1, "", 0)})
    assert "offsets-only" in coordinator.known_group_ids()
    assert coordinator.delete("offsets-only") is ErrorCode.none
    assert coordinator.committed("offsets-only", "t", 1) is None


async def test_pending_member_ids_expire(coordinator, clock):
    await join_new(coordinator)
    assert coordinator.groups["g"].pending_members
    clock.advance(SESSION + 1)
    coordinator.tick()
    assert not coordinator.groups["g"].pending_members


async def test_an_emptied_group_keeps_its_protocol_type(coordinator):
    a = await join_new(coordinator)
    await join(coordinator, member_id=a)
    coordinator.leave("g", a, None)
    group = coordinator.groups["g"]
    assert group.state is GroupState.EMPTY and group.protocol_type == "consumer"
    # ...and any protocol type may start the group again.
    again = await coordinator.join("g", "", None, "connect", PROTOCOLS, SESSION, REBALANCE, "x", "h", False)
    assert again["error_code"] is ErrorCode.none and group.protocol_type == "connect"


async def test_group_max_size_refuses_a_new_member_and_keeps_the_known_ones(store, clock):
    """Kafka's group.max.size (acceptJoiningMember): what a client can make the broker keep,
    and persist, per group is bounded."""
    c = GroupCoordinator(store, clock, GroupSettings(max_size=2))
    a = await join_new(c, client="a")
    b = await join_new(c, client="b")
    answers = await asyncio.gather(join(c, member_id=a), join(c, member_id=b))
    leader = answers[0]["leader"]
    await asyncio.gather(*(c.sync("g", 1, m, None, None, None, {a: b"A", b: b"B"}) for m in (a, b)))
    third = await join(c, client="c")
    assert (third["error_code"], third["member_id"]) == (ErrorCode.group_max_size_reached, "")
    assert set(c.groups["g"].members) == {a, b} and c.groups["g"].state is GroupState.STABLE
    # While it rebalances, only members rejoining count: a known one is always taken back.
    again = join(c, member_id=leader, protocols=[("range", b"changed")])
    await settle()
    assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
    other = b if leader == a else a
    rejoined = await asyncio.gather(again, join(c, member_id=other))
    assert [(r["error_code"], r["generation_id"]) for r in rejoined] == [(ErrorCode.none, 2)] * 2
    await c.stop()
