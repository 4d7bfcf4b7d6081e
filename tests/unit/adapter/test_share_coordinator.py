"""Share groups (KIP-932) membership: the ``simple`` assignor and the coordinator's heartbeat
rules, driven with an injected clock (no sleeping)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.groups.share_assignor import simple
from rmqkafka.adapter.groups.share_coordinator import (
    ShareCoordinatorSettings,
    ShareGroupCoordinator,
    ShareHeartbeatRequest,
)
from rmqkafka.adapter.groups.share_group import ShareGroupState
from rmqkafka.storage.clock import ManualClock

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
SESSION_MS = 45_000


class Catalog:
    """The topics of a unit test: name -> (id, partitions)."""

    def __init__(self, **topics: tuple[uuid.UUID, int]) -> None:
        self.topics = dict(topics)

    def lookup(self, name):
        return self.topics.get(name)

    def names(self):
        return sorted(self.topics)

    def name_of(self, topic_id):
        return next((n for n, (i, _) in self.topics.items() if i == topic_id), None)


def counts(assignment):
    return {m: sum(len(ps) for ps in a.values()) for m, a in assignment.items()}


def sharers(assignment):
    """(topic id, partition) -> how many members have it."""
    shared: dict = {}
    for a in assignment.values():
        for t, ps in a.items():
            for p in ps:
                shared[(t, p)] = shared.get((t, p), 0) + 1
    return shared


# -- the assignor ----------------------------------------------------------------------------
def test_fewer_members_than_partitions_each_partition_once_balanced():
    result = simple({m: frozenset({T1}) for m in "abc"}, {T1: 8}, {})
    assert sorted(counts(result).values()) == [2, 3, 3]
    assert sharers(result) == {(T1, p): 1 for p in range(8)}


def test_more_members_than_partitions_share_them_evenly():
    result = simple({m: frozenset({T1}) for m in "abcde"}, {T1: 2}, {})
    # ceil(5 / 2) = 3 members per partition: 6 assignments over 5 members
    assert sorted(counts(result).values()) == [1, 1, 1, 1, 2]
    assert sharers(result) == {(T1, 0): 3, (T1, 1): 3}


def test_one_partition_goes_to_every_member():
    result = simple({m: frozenset({T1}) for m in "abcd"}, {T1: 1}, {})
    assert all(a == {T1: frozenset({0})} for a in result.values())


def test_sticky_when_a_member_joins():
    first = simple({m: frozenset({T1}) for m in "ab"}, {T1: 8}, {})
    second = simple({m: frozenset({T1}) for m in "abc"}, {T1: 8}, first)
    assert sorted(counts(second).values()) == [2, 3, 3]
    for m in "ab":  # the old members only give partitions up
        assert second[m][T1] <= first[m][T1]


def test_sticky_when_a_member_leaves():
    first = simple({m: frozenset({T1}) for m in "abc"}, {T1: 9}, {})
    second = simple({m: frozenset({T1}) for m in "ab"}, {T1: 9}, first)
    for m in "ab":
        assert second[m][T1] >= first[m][T1]
    assert sharers(second) == {(T1, p): 1 for p in range(9)}


def test_heterogeneous_subscriptions_balance_each_topic():
    subs = {"a": frozenset({T1}), "b": frozenset({T2}), "c": frozenset({T1, T2})}
    result = simple(subs, {T1: 4, T2: 2}, {})
    assert len(result["a"][T1]) == 2 and len(result["c"][T1]) == 2
    assert len(result["b"][T2]) == 1 and len(result["c"][T2]) == 1
    assert T2 not in result["a"] and T1 not in result["b"]


def test_a_topic_that_does_not_exist_is_not_assigned():
    result = simple({"a": frozenset({T1, T2})}, {T1: 2}, {"a": {T2: frozenset({0})}})
    assert result == {"a": {T1: frozenset({0, 1})}}


@settings(max_examples=200, deadline=None)
@given(members=st.integers(1, 12), partitions=st.integers(1, 12), joined=st.integers(0, 3))
def test_balanced_covering_and_sharing_bounds(members, partitions, joined):
    ids = [f"m{i}" for i in range(members)]
    first = simple({m: frozenset({T1}) for m in ids}, {T1: partitions}, {})
    ids += [f"n{i}" for i in range(joined)]
    result = simple({m: frozenset({T1}) for m in ids}, {T1: partitions}, first)
    per_member = counts(result)
    assert max(per_member.values()) - min(per_member.values()) <= 1
    shared = sharers(result)
    assert set(shared) == {(T1, p) for p in range(partitions)}, "every partition is assigned"
    wanted = -(-len(ids) // partitions)
    assert all(wanted - 1 <= n <= wanted + 1 for n in shared.values())
    if len(ids) <= partitions:
        assert set(shared.values()) == {1}, "no sharing while there are enough partitions"


# -- the coordinator -------------------------------------------------------------------------
class Harness:
    def __init__(self, others=None, max_size=200, timeouts=None, **topics):
        self.clock = ManualClock()
        self.catalog = Catalog(**(topics or {"t": (T1, 4)}))
        self.left: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        self.coordinator = ShareGroupCoordinator(
            self.clock, ShareCoordinatorSettings(session_timeout_ms=SESSION_MS, max_size=max_size),
            self.catalog, lambda group_id: (others or {}).get(group_id), timeouts,
            on_member_left=lambda g, m: self.left.append((g, m)),
            on_group_deleted=self.deleted.append)

    def beat(self, member, epoch, topics=None, group="g", rack=None):
        return self.coordinator.heartbeat(
            ShareHeartbeatRequest(group, member, epoch, rack, None if topics is None else tuple(topics)),
            "client", "/127.0.0.1")


def test_join_gets_an_epoch_and_every_partition():
    h = Harness()
    answer = h.beat("a", 0, ["t"])
    assert answer.error is ErrorCode.none
    assert answer.member_epoch == 1
    assert answer.heartbeat_interval_ms == 5000
    assert answer.assignment == {T1: frozenset(range(4))}
    assert h.coordinator.state_of("g") is ShareGroupState.STABLE
    assert h.coordinator.assignment_of("g", "a") == {"t": {0, 1, 2, 3}}
    assert h.coordinator.is_member("g", "a") and not h.coordinator.is_member("g", "b")
    assert h.coordinator.subscribed_topics("g") == {"t"}


def test_a_second_member_splits_the_partitions_without_a_handshake():
    h = Harness()
    h.beat("a", 0, ["t"])
    b = h.beat("b", 0, ["t"])
    assert b.member_epoch == 2 and len(b.assignment[T1]) == 2
    a = h.beat("a", 1)
    assert a.member_epoch == 2
    assert a.assignment[T1] | b.assignment[T1] == frozenset(range(4))
    assert not a.assignment[T1] & b.assignment[T1]
    again = h.beat("a", 2)
    assert again.assignment is None, "unchanged: no assignment in the answer"


@pytest.mark.parametrize(("member", "epoch", "topics", "message"), [
    ("", 0, ["t"], "MemberId can't be empty."),
    ("  ", 1, None, "MemberId can't be empty."),
    ("a", 0, None, "SubscribedTopicNames must be set in first request."),
    ("a", 0, [], "SubscribedTopicNames must be set in first request."),
    ("a", -2, None, "MemberEpoch is invalid."),
])
def test_invalid_requests(member, epoch, topics, message):
    answer = Harness().beat(member, epoch, topics)
    assert (answer.error, answer.message) == (ErrorCode.invalid_request, message)


def test_empty_group_id_and_rack_are_invalid():
    h = Harness()
    assert h.beat("a", 0, ["t"], group=" ").message == "GroupId can't be empty."
    assert h.beat("a", 0, ["t"], rack="").message == "RackId can't be empty."


def test_epochs_fence_as_kafka():
    h = Harness()
    h.beat("a", 0, ["t"])
    h.beat("b", 0, ["t"])
    h.beat("a", 1)  # a: epoch 2, previous 1
    ahead = h.beat("a", 5)
    assert ahead.error is ErrorCode.fenced_member_epoch and "greater member epoch (5)" in ahead.message
    assert h.beat("a", 1).error is ErrorCode.none, "the previous epoch: the last answer may be lost"
    behind = h.beat("b", 0, ["t"])  # b joined at 2 from 0: 0 is its previous epoch
    assert behind.error is ErrorCode.none
    h.beat("c", 0, ["t"])
    h.beat("a", 2)  # a: epoch 3, previous 2
    stale = h.beat("a", 1)
    assert stale.error is ErrorCode.fenced_member_epoch
    assert "does not match the previous member epoch (2)" in stale.message


def test_unknown_member_and_unknown_group():
    h = Harness()
    assert h.beat("a", 3, group="nobody").error is ErrorCode.unknown_member_id
    h.beat("a", 0, ["t"])
    answer = h.beat("b", 1)
    assert answer.error is ErrorCode.unknown_member_id
    assert answer.message == "Member b is not a member of group g."
    assert h.beat("b", -1).error is ErrorCode.unknown_member_id


def test_a_group_id_of_another_type_is_group_id_not_found():
    h = Harness(others={"c": "consumer", "k": "classic"})
    for group in ("c", "k"):
        answer = h.beat("a", 0, ["t"], group=group)
        assert answer.error is ErrorCode.group_id_not_found
        assert answer.message == f"Group {group} is not a share group."
    assert not h.coordinator.groups


def test_group_max_size():
    h = Harness(max_size=2)
    h.beat("a", 0, ["t"])
    h.beat("b", 0, ["t"])
    full = h.beat("c", 0, ["t"])
    assert full.error is ErrorCode.group_max_size_reached
    assert full.message == "The share group has reached its maximum capacity of 2 members."
    assert h.beat("a", 1).error is ErrorCode.none, "a member already in is not refused"


def test_leave_rebalances_and_calls_back():
    h = Harness()
    h.beat("a", 0, ["t"])
    h.beat("b", 0, ["t"])
    assert len(h.beat("a", 1).assignment[T1]) == 2
    left = h.beat("b", -1)
    assert (left.error, left.member_epoch) == (ErrorCode.none, -1)
    assert h.left == [("g", "b")]
    assert h.beat("a", 2).assignment == {T1: frozenset(range(4))}
    h.beat("a", -1)
    assert h.coordinator.state_of("g") is ShareGroupState.EMPTY


def test_session_timeout_removes_the_member():
    h = Harness()
    h.beat("a", 0, ["t"])
    h.beat("b", 0, ["t"])
    h.clock.advance(SESSION_MS - 1000)
    assert len(h.beat("a", 1).assignment[T1]) == 2
    h.clock.advance(999)
    h.coordinator.tick()
    assert h.left == []
    h.clock.advance(1)
    h.coordinator.tick()
    assert h.left == [("g", "b")]
    assert set(h.coordinator.groups["g"].members) == {"a"}
    assert h.beat("b", 2).error is ErrorCode.unknown_member_id
    assert h.beat("a", 2).assignment == {T1: frozenset(range(4))}


def test_group_config_timeouts_are_read_at_each_heartbeat():
    configs = {"g": (60_000, 7_000)}
    h = Harness(timeouts=lambda group_id: configs.get(group_id, (SESSION_MS, 5000)))
    answer = h.beat("a", 0, ["t"])
    assert answer.heartbeat_interval_ms == 7000
    h.clock.advance(50_000)
    h.coordinator.tick()
    assert h.coordinator.is_member("g", "a")
    assert h.beat("b", 0, ["t"], group="other").heartbeat_interval_ms == 5000


def test_topics_created_grown_and_deleted_rebalance():
    h = Harness(t=(T1, 2))
    first = h.beat("a", 0, ["t", "later"])
    assert first.assignment == {T1: frozenset({0, 1})}
    h.catalog.topics["later"] = (T2, 1)
    created = h.beat("a", first.member_epoch)
    assert created.assignment == {T1: frozenset({0, 1}), T2: frozenset({0})}
    h.catalog.topics["t"] = (T1, 3)
    grown = h.beat("a", created.member_epoch)
    assert grown.assignment[T1] == frozenset({0, 1, 2})
    del h.catalog.topics["t"]
    deleted = h.beat("a", grown.member_epoch)
    assert deleted.assignment == {T2: frozenset({0})}
    assert h.coordinator.assignment_of("g", "a") == {"later": {0}}


def test_subscription_change_and_null_means_unchanged():
    h = Harness(t=(T1, 2), u=(T2, 2))
    first = h.beat("a", 0, ["t"])
    same = h.beat("a", first.member_epoch, None)
    assert same.member_epoch == first.member_epoch and same.assignment is None
    moved = h.beat("a", first.member_epoch, ["u"])
    assert moved.member_epoch == first.member_epoch + 1
    assert moved.assignment == {T2: frozenset({0, 1})}


def test_delete_only_an_empty_group():
    h = Harness()
    h.beat("a", 0, ["t"])
    assert h.coordinator.delete("g") is ErrorCode.non_empty_group
    h.beat("a", -1)
    assert h.coordinator.delete("g") is ErrorCode.none
    assert h.deleted == ["g"]
    assert h.coordinator.state_of("g") is None
    assert h.coordinator.delete("g") is ErrorCode.group_id_not_found


def test_a_failing_callback_does_not_stop_membership(caplog):
    def fail(*args):
        raise RuntimeError("part 2 broke")

    clock = ManualClock()
    coordinator = ShareGroupCoordinator(clock, ShareCoordinatorSettings(session_timeout_ms=SESSION_MS),
                                        Catalog(t=(T1, 4)), on_member_left=fail, on_group_deleted=fail)
    h = Harness()
    h.clock, h.coordinator = clock, coordinator
    h.beat("a", 0, ["t"])
    h.beat("b", 0, ["t"])
    h.clock.advance(SESSION_MS)
    h.coordinator.tick()
    assert h.coordinator.member_count("g") == 0
    assert h.coordinator.delete("g") is ErrorCode.none
    assert "part 2 broke" in caplog.text


def test_subscribed_topics_follow_members():
    h = Harness(t=(T1, 2), u=(T2, 2))
    h.beat("a", 0, ["t", "u"])
    h.beat("b", 0, ["t"])
    assert h.coordinator.subscribed_topics("g") == {"t", "u"}
    h.beat("a", -1)
    assert h.coordinator.subscribed_topics("g") == {"t"}
    assert h.coordinator.groups["g"].subscription_metadata == {"t": (T1, 2)}
    h.beat("b", 2, ["u"])
    assert h.coordinator.subscribed_topics("g") == {"u"}
    h.beat("b", -1)
    assert h.coordinator.subscribed_topics("g") == set()
