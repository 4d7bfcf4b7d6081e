"""Consumer-protocol groups (KIP-848): the assignors, the reconciliation and the coordinator,
driven with an injected clock (no sleeping)."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.groups.assignors import MemberSpec, range_assignor, uniform
from rmqkafka.adapter.groups.consumer_coordinator import (
    ConsumerGroupCoordinator,
    ConsumerGroupSettings,
    HeartbeatRequest,
)
from rmqkafka.adapter.groups.consumer_group import ConsumerGroupState
from rmqkafka.adapter.groups.reconciliation import MemberState, reconcile
from rmqkafka.storage.clock import ManualClock

T1, T2 = uuid.uuid4(), uuid.uuid4()
SESSION_MS = 45_000


class Catalog:
    """The topics of a unit test: name -> (id, partitions)."""

    def __init__(self, **topics: tuple[uuid.UUID, int]) -> None:
        self.topics = dict(topics)
        self.listed = 0  # calls of names(): what resolving regular expressions costs
        self._seen: set[uuid.UUID] = set()

    def lookup(self, name):
        return self.topics.get(name)

    def names(self):
        self.listed += 1
        return sorted(self.topics)

    def generation(self):
        """Grows with every topic id ever added to ``topics`` (a creation)."""
        self._seen |= {topic_id for topic_id, _ in self.topics.values()}
        return len(self._seen)

    def name_of(self, topic_id):
        return next((n for n, (i, _) in self.topics.items() if i == topic_id), None)


def spec(member_id, subscribed, previous=None, instance_id=None):
    return MemberSpec(member_id, instance_id, frozenset(subscribed), previous or {})


def loads(assignment):
    return {m: sum(len(ps) for ps in a.values()) for m, a in assignment.items()}


def all_partitions(assignment):
    owned = [(t, p) for a in assignment.values() for t, ps in a.items() for p in ps]
    assert len(owned) == len(set(owned)), "a partition is assigned twice"
    return set(owned)


# -- assignors -------------------------------------------------------------------------------
def test_uniform_balances_and_covers_everything():
    members = {m: spec(m, {T1, T2}) for m in ("a", "b", "c")}
    result = uniform(members, {T1: 4, T2: 3})
    assert sorted(loads(result).values()) == [2, 2, 3]
    assert all_partitions(result) == {(T1, p) for p in range(4)} | {(T2, p) for p in range(3)}


def test_uniform_is_sticky_when_a_member_joins():
    first = uniform({"a": spec("a", {T1}), "b": spec("b", {T1})}, {T1: 8})
    members = {m: spec(m, {T1}, first.get(m)) for m in ("a", "b")}
    members["c"] = spec("c", {T1})
    second = uniform(members, {T1: 8})
    assert sorted(loads(second).values()) == [2, 3, 3]
    for m in ("a", "b"):  # the old members only lose partitions, never swap them
        assert second[m][T1] <= first[m][T1]
    assert all_partitions(second) == {(T1, p) for p in range(8)}


def test_uniform_with_different_subscriptions_moves_only_what_balance_needs():
    members = {"a": spec("a", {T1, T2}), "b": spec("b", {T2})}
    result = uniform(members, {T1: 4, T2: 4})
    assert all_partitions(result) == {(T1, p) for p in range(4)} | {(T2, p) for p in range(4)}
    assert T1 not in result["b"]
    assert loads(result) == {"a": 4, "b": 4}


def test_uniform_drops_partitions_of_topics_no_longer_subscribed_or_gone():
    previous = {T1: frozenset({0, 1}), T2: frozenset({0})}
    result = uniform({"a": spec("a", {T1}, previous)}, {T1: 1})
    assert result == {"a": {T1: frozenset({0})}}


def test_range_gives_co_partitioned_contiguous_ranges():
    members = {m: spec(m, {T1, T2}) for m in ("b", "a")}
    result = range_assignor(members, {T1: 5, T2: 5})
    assert result["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})}
    assert result["b"] == {T1: frozenset({3, 4}), T2: frozenset({3, 4})}


# -- reconciliation --------------------------------------------------------------------------
def free(topic_id, partition):
    return -1


def test_reconcile_revokes_before_it_assigns():
    step = reconcile(state=MemberState.STABLE, epoch=1, assigned={T1: frozenset({0, 1})}, pending_revocation={},
                     target_epoch=2, target={T1: frozenset({1, 2})}, subscribed=frozenset({T1}),
                     owned={T1: frozenset({0, 1})}, owner_epoch=free)
    assert step.state is MemberState.UNREVOKED_PARTITIONS
    assert step.epoch == 1 and step.assigned == {T1: frozenset({1})} and step.pending_revocation == {T1: frozenset({0})}
    # Its next heartbeat no longer lists partition 0: it moves to epoch 2 with 1 and 2.
    step = reconcile(state=step.state, epoch=step.epoch, assigned=step.assigned,
                     pending_revocation=step.pending_revocation, target_epoch=2, target={T1: frozenset({1, 2})},
                     subscribed=frozenset({T1}), owned={T1: frozenset({1})}, owner_epoch=free)
    assert (step.state, step.epoch, step.assigned) == (MemberState.STABLE, 2, {T1: frozenset({1, 2})})


def test_reconcile_waits_while_a_member_heartbeats_without_owned_partitions():
    step = reconcile(state=MemberState.UNREVOKED_PARTITIONS, epoch=1, assigned={},
                     pending_revocation={T1: frozenset({0})}, target_epoch=2, target={},
                     subscribed=frozenset({T1}), owned=None, owner_epoch=free)
    assert step.state is MemberState.UNREVOKED_PARTITIONS and step.epoch == 1


def test_reconcile_holds_back_partitions_another_member_still_owns():
    owned_elsewhere = {(T1, 3)}
    step = reconcile(state=MemberState.STABLE, epoch=0, assigned={}, pending_revocation={}, target_epoch=2,
                     target={T1: frozenset({2, 3})}, subscribed=frozenset({T1}), owned={},
                     owner_epoch=lambda t, p: 1 if (t, p) in owned_elsewhere else -1)
    assert (step.state, step.epoch, step.assigned) == (MemberState.UNRELEASED_PARTITIONS, 2, {T1: frozenset({2})})


# -- the coordinator -------------------------------------------------------------------------
@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def catalog():
    return Catalog(t1=(T1, 4), t2=(T2, 2))


@pytest.fixture
def coordinator(clock, catalog):
    return ConsumerGroupCoordinator(clock, ConsumerGroupSettings(), catalog, lambda g: None, lambda g: None)


def join(coordinator, member_id, topics=("t1",), instance_id=None, regex=None, assignor=None):
    return coordinator.heartbeat(HeartbeatRequest("g", member_id, 0, instance_id=instance_id,
                                                  rebalance_timeout_ms=30_000, subscribed_names=topics,
                                                  subscribed_regex=regex, server_assignor=assignor, owned={}),
                                 "client", "/127.0.0.1", api_version=1)


def beat(coordinator, member_id, epoch, owned=None, instance_id=None):
    return coordinator.heartbeat(HeartbeatRequest("g", member_id, epoch, instance_id=instance_id, owned=owned),
                                 "client", "/127.0.0.1", api_version=1)


def owners(coordinator):
    """Every (topic id, partition) -> members that may own it now: at most one each."""
    seen = {}
    for member in coordinator.groups["g"].members.values():
        for topic_id, ps in member.owns().items():
            for p in ps:
                seen.setdefault((topic_id, p), []).append(member.member_id)
    return seen


def test_join_gets_everything_then_a_second_member_gets_half_after_the_revocation(coordinator):
    a = join(coordinator, "a")
    assert a.error is ErrorCode.none and a.member_epoch == 1 and a.assignment == {T1: frozenset(range(4))}
    b = join(coordinator, "b")
    assert b.member_epoch == 2 and b.assignment == {}  # a still owns everything
    a2 = beat(coordinator, "a", 1, owned={T1: frozenset(range(4))})
    assert a2.member_epoch == 1 and len(a2.assignment[T1]) == 2  # revoke two first, same epoch
    assert coordinator.groups["g"].state is ConsumerGroupState.RECONCILING
    assert beat(coordinator, "b", 2).assignment is None  # still unreleased
    a3 = beat(coordinator, "a", 1, owned=a2.assignment)
    assert a3.member_epoch == 2
    b2 = beat(coordinator, "b", 2)
    assert b2.assignment[T1] == frozenset(range(4)) - a2.assignment[T1]
    assert all(len(m) == 1 for m in owners(coordinator).values())
    assert coordinator.groups["g"].state is ConsumerGroupState.STABLE


def test_epochs_fence_as_kafka_does(coordinator):
    join(coordinator, "a")
    too_new = beat(coordinator, "a", 5)
    assert too_new.error is ErrorCode.fenced_member_epoch and "greater member epoch (5)" in too_new.message
    assert beat(coordinator, "ghost", 1).error is ErrorCode.unknown_member_id
    join(coordinator, "b")  # epoch 2; a is still at 1
    beat(coordinator, "a", 1, owned={T1: frozenset(range(4))})
    beat(coordinator, "a", 1, owned={T1: frozenset({0, 1})})  # revoked: a moves to epoch 2
    # A heartbeat at the previous epoch is accepted if it owns a subset of the assignment ...
    assert beat(coordinator, "a", 1, owned={T1: frozenset({0})}).error is ErrorCode.none
    # ... and fenced if it owns more.
    assert beat(coordinator, "a", 1, owned={T1: frozenset({3})}).error is ErrorCode.fenced_member_epoch


def test_join_validation_errors(coordinator):
    def send(**fields):
        base = dict(group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                    subscribed_names=("t1",), owned={})
        base.update(fields)
        return coordinator.heartbeat(HeartbeatRequest(**base), "c", "h", api_version=1)

    assert send(member_id="").message == "MemberId can't be empty."
    assert send(rebalance_timeout_ms=-1).message == "RebalanceTimeoutMs must be provided in first request."
    assert send(owned=None).message == "TopicPartitions must be empty when (re-)joining."
    assert send(member_epoch=-3).message == "MemberEpoch is invalid."
    unsupported = send(server_assignor="sticky")
    assert unsupported.error is ErrorCode.unsupported_assignor
    assert unsupported.message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    assert send(subscribed_names=None, subscribed_regex="(?=x)").error is ErrorCode.invalid_regular_expression
    assert send(subscribed_names=None, subscribed_regex=r"(a)\1").error is ErrorCode.invalid_regular_expression


def test_leave_frees_the_partitions_for_the_others(coordinator):
    join(coordinator, "a")
    join(coordinator, "b")
    a = beat(coordinator, "a", 1, owned={T1: frozenset(range(4))})
    beat(coordinator, "a", 1, owned=a.assignment)
    left = coordinator.heartbeat(HeartbeatRequest("g", "a", -1), "c", "h", api_version=1)
    assert left.error is ErrorCode.none and left.member_epoch == -1
    b = beat(coordinator, "b", 2)
    assert (b.member_epoch, b.assignment) == (3, {T1: frozenset(range(4))})


def test_session_timeout_removes_a_silent_member(coordinator, clock):
    join(coordinator, "a")
    join(coordinator, "b")
    clock.advance(SESSION_MS - 1000)
    beat(coordinator, "b", 2)
    clock.advance(2000)
    coordinator.tick()
    assert set(coordinator.groups["g"].members) == {"b"}
    b = beat(coordinator, "b", 2)
    assert b.assignment == {T1: frozenset(range(4))}


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_removed(coordinator, clock):
    join(coordinator, "a")
    join(coordinator, "b")
    beat(coordinator, "a", 1, owned={T1: frozenset(range(4))})  # asked to revoke; it never does
    for _ in range(3):  # heartbeats keep its session, not its revocation deadline
        clock.advance(10_000)
        beat(coordinator, "a", 1, owned={T1: frozenset(range(4))})
        beat(coordinator, "b", 2)
        coordinator.tick()
    assert "a" not in coordinator.groups["g"].members
    assert beat(coordinator, "b", 2).assignment == {T1: frozenset(range(4))}


def test_static_member_leaves_and_comes_back_to_its_assignment(coordinator):
    join(coordinator, "a", instance_id="i-a")
    join(coordinator, "b", instance_id="i-b")
    a = beat(coordinator, "a", 1, owned={T1: frozenset(range(4))}, instance_id="i-a")
    beat(coordinator, "a", 1, owned=a.assignment, instance_id="i-a")
    b = beat(coordinator, "b", 2, instance_id="i-b")
    epoch = coordinator.groups["g"].epoch
    duplicate = join(coordinator, "a-twin", instance_id="i-a")
    assert duplicate.error is ErrorCode.unreleased_instance_id
    left = coordinator.heartbeat(HeartbeatRequest("g", "a", -2, instance_id="i-a"), "c", "h", api_version=1)
    assert left.member_epoch == -2
    back = join(coordinator, "a-new", instance_id="i-a")
    assert back.error is ErrorCode.none and back.assignment == a.assignment
    assert coordinator.groups["g"].epoch == epoch  # no rebalance
    assert beat(coordinator, "a", 2, instance_id="i-a").error is ErrorCode.fenced_instance_id
    assert b.assignment == {T1: frozenset(range(4)) - a.assignment[T1]}


def test_regex_subscription_picks_up_a_new_topic(coordinator, catalog):
    a = join(coordinator, "a", topics=None, regex="t.*")
    assert a.assignment == {T1: frozenset(range(4)), T2: frozenset(range(2))}
    t3 = uuid.uuid4()
    catalog.topics["t3"] = (t3, 1)
    catalog.topics["other"] = (uuid.uuid4(), 1)
    a = beat(coordinator, "a", a.member_epoch)
    assert a.assignment[t3] == frozenset({0}) and len(a.assignment) == 3


def test_a_regex_matches_only_what_each_member_may_describe(coordinator, clock):
    """Each member's own rights filter its regular expression, at whichever heartbeat the
    group resolves it; a right granted later changes the member's subscription, which bumps
    the group epoch (a new target) even though the group's topics stay the same."""
    rights = {"a": {"t1"}, "b": {"t1", "t2"}}

    def send(member_id, epoch, owned):
        return coordinator.heartbeat(HeartbeatRequest(
            "g", member_id, epoch, rebalance_timeout_ms=30_000 if epoch == 0 else -1,
            subscribed_names=() if epoch == 0 else None, subscribed_regex="t.*" if epoch == 0 else None,
            owned=owned, may_describe=lambda name: name in rights[member_id]),
            "client", "/127.0.0.1", api_version=1)

    a = send("a", 0, {})
    assert a.assignment == {T1: frozenset(range(4))}
    b = send("b", 0, {})
    group = coordinator.groups["g"]
    assert set(group.target["a"]) == {T1}  # b's heartbeat did not widen a's match
    assert group.target["b"][T2] == frozenset({0, 1})
    epoch = group.epoch
    rights["a"].add("t2")  # the group's topics stay the same: t2 is b's already
    send("a", a.member_epoch, a.assignment)  # rights are seen at the regex refresh interval
    assert group.epoch == epoch and group.regex_matches["a"] == {"t1"}
    clock.advance(ConsumerGroupSettings().regex_refresh_interval_ms)
    send("a", a.member_epoch, a.assignment)
    assert group.epoch == epoch + 1 and group.assignment_epoch == group.epoch
    assert coordinator._resolved(group.members["a"], group.regex_matches) == {"t1", "t2"}
    assert b.error is ErrorCode.none


def test_partition_increase_and_topic_deletion_rebalance(coordinator, catalog):
    a = join(coordinator, "a", topics=("t1", "t2"))
    catalog.topics["t1"] = (T1, 6)
    a = beat(coordinator, "a", a.member_epoch)
    assert a.assignment[T1] == frozenset(range(6))
    del catalog.topics["t2"]
    a = beat(coordinator, "a", a.member_epoch, owned={T1: frozenset(range(6)), T2: frozenset(range(2))})
    assert T2 not in a.assignment


def test_range_assignor_chosen_by_the_client(coordinator):
    join(coordinator, "a", assignor="range")
    join(coordinator, "b", assignor="range")
    group = coordinator.groups["g"]
    assert group.assignor_name == "range"
    assert group.target == {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2, 3})}}


def test_offsets_check_member_epochs(coordinator):
    join(coordinator, "a")
    group = coordinator.groups["g"]
    assert coordinator.check_commit(group, "a", 1, False, 9) is ErrorCode.none
    assert coordinator.check_commit(group, "a", 0, False, 9) is ErrorCode.stale_member_epoch
    assert coordinator.check_commit(group, "x", 1, False, 9) is ErrorCode.unknown_member_id
    assert coordinator.check_commit(group, "a", 1, False, 8) is ErrorCode.unsupported_version
    assert coordinator.check_commit(group, "", -1, False, 9) is ErrorCode.unknown_member_id  # not empty
    assert coordinator.check_fetch("g", None, -1) is ErrorCode.none
    assert coordinator.check_fetch("g", "a", 7) is ErrorCode.stale_member_epoch


def test_after_a_restart_partitions_wait_for_the_previous_run_to_be_fenced(clock, catalog):
    coordinator = ConsumerGroupCoordinator(clock, ConsumerGroupSettings(), catalog, lambda g: None, lambda g: None,
                                           existed_before_start={"g"}.__contains__)
    # A member of the previous run heartbeats with its old id and epoch: unknown, it rejoins.
    assert beat(coordinator, "old", 7, owned={T1: frozenset({0})}).error is ErrorCode.unknown_member_id
    a = join(coordinator, "a")
    assert (a.member_epoch, a.assignment) == (1, {})  # another old member may still own them
    # A group that did not exist before the start is served at once.
    fresh = coordinator.heartbeat(HeartbeatRequest("new", "n", 0, rebalance_timeout_ms=1000,
                                                   subscribed_names=("t2",), owned={}), "c", "h", api_version=1)
    assert fresh.assignment == {T2: frozenset({0, 1})}
    clock.advance(2 * 5_000 - 1)
    assert beat(coordinator, "a", 1).assignment is None
    clock.advance(1)
    assert beat(coordinator, "a", 1).assignment == {T1: frozenset(range(4))}


# -- group.consumer.regex.refresh.interval.ms ------------------------------------------------
REFRESH_MS = 30_000


@pytest.fixture
def refreshing(clock, catalog):
    return ConsumerGroupCoordinator(clock, ConsumerGroupSettings(regex_refresh_interval_ms=REFRESH_MS), catalog,
                                    lambda g: None, lambda g: None)


def regex_member(coordinator, member_id, regex, rights):
    """Heartbeats of a member subscribed to ``regex`` that may DESCRIBE the names in ``rights``."""
    def send(epoch, owned=None, new_regex=None):
        return coordinator.heartbeat(HeartbeatRequest(
            "g", member_id, epoch, rebalance_timeout_ms=30_000 if epoch == 0 else -1,
            subscribed_names=() if epoch == 0 else None,
            subscribed_regex=regex if epoch == 0 else new_regex, owned={} if epoch == 0 else owned,
            may_describe=rights.__contains__), "client", "/127.0.0.1", api_version=1)
    return send


def test_rights_change_what_a_regex_matches_only_at_the_refresh_interval(refreshing, clock, catalog):
    rights = {"t1"}
    send = regex_member(refreshing, "a", "t.*", rights)
    a = send(0)
    assert a.assignment == {T1: frozenset(range(4))}
    group = refreshing.groups["g"]
    rights.add("t2")
    listed = catalog.listed
    clock.advance(REFRESH_MS - 1)
    a = send(a.member_epoch, a.assignment)
    assert (a.assignment, group.regex_matches["a"]) == (None, {"t1"})  # unchanged, not resolved again
    assert catalog.listed == listed  # a heartbeat with nothing due lists no topics
    clock.advance(1)
    a = send(a.member_epoch, a.assignment)
    assert a.assignment == {T1: frozenset(range(4)), T2: frozenset(range(2))}
    rights.discard("t1")  # revoked: gone at the next refresh, not before
    a = send(a.member_epoch)
    assert a.assignment is None and group.regex_matches["a"] == {"t1", "t2"}
    clock.advance(REFRESH_MS)
    a = send(a.member_epoch)
    assert a.assignment == {T2: frozenset(range(2))}


def test_a_created_topic_is_matched_at_the_next_heartbeat_before_the_interval(refreshing, clock, catalog):
    """Sooner than Kafka, which resolves again at most every 10 s: creation is announced."""
    a = join(refreshing, "a", topics=None, regex="t.*")
    t3 = uuid.uuid4()
    catalog.topics["t3"] = (t3, 1)
    clock.advance(500)
    a = beat(refreshing, "a", a.member_epoch)
    assert a.assignment == {T1: frozenset(range(4)), T2: frozenset(range(2)), t3: frozenset({0})}
    del catalog.topics["t3"]  # a deletion needs no resolution: the name is looked up again
    a = beat(refreshing, "a", a.member_epoch, owned=a.assignment)
    assert a.assignment == {T1: frozenset(range(4)), T2: frozenset(range(2))}
    assert refreshing.groups["g"].regex_matches["a"] == {"t1", "t2", "t3"}


def test_a_new_or_changed_regex_is_resolved_at_once_and_alone(refreshing, clock, catalog):
    rights = {"t1", "t2"}
    a = regex_member(refreshing, "a", "t1", rights)(0)
    group = refreshing.groups["g"]
    rights_b = {"t1", "t2"}
    send_b = regex_member(refreshing, "b", "t2", rights_b)
    b = send_b(0)
    assert group.regex_matches == {"a": {"t1"}, "b": {"t2"}}
    epoch = group.epoch
    b = send_b(b.member_epoch, b.assignment, new_regex="t.*")
    assert group.epoch == epoch + 1 and group.regex_matches == {"a": {"t1"}, "b": {"t1", "t2"}}
    assert group.resolved_regexes == {"a": "t1", "b": "t.*"}
    refreshing.remove(group, group.members["a"], reason="left")  # a member that leaves takes its entries along
    assert group.regex_matches == {"b": {"t1", "t2"}} and group.resolved_regexes == {"b": "t.*"}
    assert a.error is ErrorCode.none
