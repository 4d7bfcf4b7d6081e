"""What a ConsumerGroupHeartbeat join costs in a large consumer-protocol group (KIP-848).

A hostile client could make every join cost a pass over every member (the target assignment
and the subscribed topics recomputed), so a group's joins together cost quadratic time.
These tests count the work: members handed to the assignor and members whose subscription
is read, per heartbeat. The join that cannot change anyone's target must also leave the
group exactly where the full computation would (same epochs, targets and assignments), and
``group.consumer.max.size`` refuses the member beyond it as Kafka does.
"""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.groups import assignors
from rmqkafka.adapter.groups.consumer_coordinator import (
    ConsumerGroupCoordinator,
    ConsumerGroupSettings,
    HeartbeatRequest,
)
from rmqkafka.storage.clock import ManualClock

T1, T2 = uuid.uuid4(), uuid.uuid4()
PARTITIONS = 4


class Catalog:
    def __init__(self) -> None:
        self.topics = {"t1": (T1, PARTITIONS)}
        self.lookups = 0

    def lookup(self, name):
        self.lookups += 1
        return self.topics.get(name)

    def names(self):
        return sorted(self.topics)

    def generation(self):
        return len(self.topics)  # topics are only added here

    def name_of(self, topic_id):
        return next((n for n, (i, _) in self.topics.items() if i == topic_id), None)


class Work:
    """Members the assignor was given and subscriptions read, since the last ``take``."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        uniform, resolved = assignors.uniform, ConsumerGroupCoordinator._resolved

        def counting_uniform(members, partitions):
            self.count += len(members)
            return uniform(members, partitions)

        def counting_resolved(member, matches):
            self.count += 1
            return resolved(member, matches)

        monkeypatch.setitem(assignors.ASSIGNORS, "uniform", counting_uniform)
        monkeypatch.setattr(ConsumerGroupCoordinator, "_resolved", staticmethod(counting_resolved))

    def take(self) -> int:
        done, self.count = self.count, 0
        return done


def coordinator(max_size: int = 2**31 - 1, catalog: Catalog | None = None) -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(ManualClock(), ConsumerGroupSettings(max_size=max_size), catalog or Catalog(),
                                    lambda g: None, lambda g: None)


def join(c, member_id, topics=("t1",), assignor=None, instance_id=None):
    return c.heartbeat(HeartbeatRequest("g", member_id, 0, instance_id=instance_id, rebalance_timeout_ms=30_000,
                                        subscribed_names=topics, server_assignor=assignor, owned={}),
                       "client", "/127.0.0.1", api_version=1)


def beat(c, member_id, epoch, owned=None):
    return c.heartbeat(HeartbeatRequest("g", member_id, epoch, owned=owned), "client", "/127.0.0.1", api_version=1)


def leave(c, member_id):
    return c.heartbeat(HeartbeatRequest("g", member_id, -1), "client", "/127.0.0.1", api_version=1)


def test_a_join_costs_the_same_in_a_group_of_50_and_of_400(monkeypatch):
    c = coordinator()
    work = Work(monkeypatch)
    per_join = []
    for i in range(400):
        answer = join(c, f"m{i:03}")
        assert answer.error is ErrorCode.none
        per_join.append(work.take())
    # The first joins share the partitions out (the assignor runs over the group); once
    # every partition is held, a join reads no other member.
    assert max(per_join[PARTITIONS + 1:]) == per_join[50] == per_join[399] <= 2
    group = c.groups["g"]
    assert group.epoch == group.assignment_epoch == 400
    # A heartbeat of a member that changes nothing reads no other member either.
    beat(c, "m399", c.groups["g"].members["m399"].epoch)
    assert work.take() <= 2


def test_made_up_topic_names_cost_no_look_ups_until_a_topic_is_created(monkeypatch):
    catalog = Catalog()
    c = coordinator(catalog=catalog)
    work = Work(monkeypatch)
    per_join, looked_up = [], []
    for i in range(300):
        # Each member adds a name nobody else uses: its join is still the cheap one.
        join(c, f"m{i:03}", topics=("t1", f"no-such-topic-{i}"))
        per_join.append(work.take())
        looked_up.append(catalog.lookups)
        catalog.lookups = 0
    assert max(per_join[PARTITIONS + 1:]) <= 2
    assert max(looked_up[PARTITIONS + 1:]) <= 2  # t1, and the name the member brought
    beat(c, "m299", c.groups["g"].members["m299"].epoch)
    assert catalog.lookups <= 1
    # A topic created under one of those names is seen at the next heartbeat.
    epoch = c.groups["g"].epoch
    catalog.topics["no-such-topic-7"] = (T2, 2)
    beat(c, "m299", c.groups["g"].members["m299"].epoch)
    group = c.groups["g"]
    assert group.epoch == epoch + 1 and "no-such-topic-7" in group.subscription_metadata
    assert any(T2 in target for target in group.target.values())


def test_a_leave_of_a_member_without_partitions_reads_no_other_member(monkeypatch):
    c = coordinator()
    for i in range(100):
        join(c, f"m{i:03}")
    work = Work(monkeypatch)
    idle = next(m for m, target in c.groups["g"].target.items() if not any(target.values()))
    assert leave(c, idle).error is ErrorCode.none
    assert work.take() == 0
    # A member holding a partition leaving moves it: the assignor runs on the rest.
    holder = next(m for m, target in c.groups["g"].target.items() if any(target.values()))
    leave(c, holder)
    beat(c, "m099", c.groups["g"].members["m099"].epoch)
    assert work.take() >= 98


def scenario(c, catalog):
    """Joins, leaves and changes a large group goes through; the state after each step."""
    states = []

    def record():
        group = c.groups["g"]
        states.append((group.epoch, group.assignment_epoch, group.assignor_name,
                       {m: {t: set(ps) for t, ps in a.items() if ps} for m, a in group.target.items()},
                       {m.member_id: (m.epoch, m.state, dict(m.assigned), dict(m.pending_revocation))
                        for m in group.members.values()}))

    for i in range(12):
        join(c, f"m{i:02}")
        record()
    for i in range(12):  # everyone reconciles, reporting what it owns
        member = c.groups["g"].members[f"m{i:02}"]
        beat(c, member.member_id, member.epoch, owned=dict(member.assigned))
        record()
    leave(c, next(m for m, target in c.groups["g"].target.items() if not any(target.values())))
    record()
    join(c, "r1", assignor="range")  # votes for another assignor: not the shortcut
    record()
    join(c, "u1", assignor="uniform")
    record()
    join(c, "other", topics=("t1", "t2"))  # another subscription
    record()
    leave(c, "other")
    record()
    leave(c, "u1")
    record()
    join(c, "s1", instance_id="static-1")
    record()
    holder = next(m for m, target in c.groups["g"].target.items() if any(target.values()))
    leave(c, holder)
    record()
    for member in list(c.groups["g"].members.values()):
        beat(c, member.member_id, member.epoch, owned=dict(member.assigned))
        record()
    leave(c, "r1")  # back to the uniform assignor
    record()
    for member in list(c.groups["g"].members.values()):
        beat(c, member.member_id, member.epoch, owned=dict(member.assigned))
        record()
    join(c, "late")
    record()
    leave(c, "late")
    record()
    join(c, "made-up", topics=("t1", "nope"))  # the same topics: the cheap join
    record()
    join(c, "made-up-2", topics=("t1", "nope-2"))
    record()
    leave(c, "made-up")  # the cheap leave
    record()
    catalog.topics["nope-2"] = (T2, 2)  # now made-up-2 subscribes to more than the others
    member = c.groups["g"].members["made-up-2"]
    beat(c, member.member_id, member.epoch)
    record()
    join(c, "after-creation")
    record()
    return states


def test_the_shortcuts_leave_the_group_as_the_full_computation_does(monkeypatch):
    taken = {"join": 0, "leave": 0}
    join_keeps, leave_keeps = ConsumerGroupCoordinator._join_keeps_target, ConsumerGroupCoordinator._leave_keeps_target

    def counted(kind, check):
        def wrapper(self, group, member):
            keeps = check(self, group, member)
            taken[kind] += keeps
            return keeps
        return wrapper

    monkeypatch.setattr(ConsumerGroupCoordinator, "_join_keeps_target", counted("join", join_keeps))
    monkeypatch.setattr(ConsumerGroupCoordinator, "_leave_keeps_target", counted("leave", leave_keeps))
    catalog = Catalog()
    fast = scenario(coordinator(catalog=catalog), catalog)
    assert taken["join"] >= 5 and taken["leave"] >= 2  # the scenario goes through the shortcuts
    monkeypatch.setattr(ConsumerGroupCoordinator, "_join_keeps_target", lambda self, group, member: False)
    monkeypatch.setattr(ConsumerGroupCoordinator, "_leave_keeps_target", lambda self, group, member: False)
    catalog = Catalog()
    assert scenario(coordinator(catalog=catalog), catalog) == fast


def test_group_consumer_max_size_refuses_the_member_beyond_it_as_kafka_does():
    c = coordinator(max_size=3)
    for member_id in ("a", "b", "c"):
        assert join(c, member_id).error is ErrorCode.none
    refused = join(c, "d")
    assert refused.error is ErrorCode.group_max_size_reached
    assert refused.message == "The consumer group has reached its maximum capacity of 3 members."
    assert "d" not in c.groups["g"].members
    # Members already in keep heartbeating, and may rejoin with epoch 0.
    assert beat(c, "a", c.groups["g"].members["a"].epoch).error is ErrorCode.none
    assert join(c, "a").error is ErrorCode.none
    # An unknown member id is refused for the size first (Kafka checks it before the member).
    assert beat(c, "ghost", 5).error is ErrorCode.group_max_size_reached
    leave(c, "b")
    assert join(c, "d").error is ErrorCode.none


@pytest.mark.parametrize("size", [1, 2])
def test_a_static_member_back_under_a_new_id_counts_against_the_size(size):
    c = coordinator(max_size=size)
    for i in range(size - 1):
        join(c, f"m{i}")
    join(c, "s-old", instance_id="static")
    c.heartbeat(HeartbeatRequest("g", "s-old", -2, instance_id="static"), "client", "/127.0.0.1", api_version=1)
    # Kafka's throwIfConsumerGroupIsFull sees a member id that is not in the group.
    assert join(c, "s-new", instance_id="static").error is ErrorCode.group_max_size_reached


def range_scenario(c, member_ids):
    """Members voting for the range assignor join (some sorting before the holders, most
    after), reconcile, and the idle ones leave; the state after each step."""
    states = []
    for member_id in member_ids:
        join(c, member_id, assignor="range")
        group = c.groups["g"]
        states.append((group.epoch, group.assignment_epoch, group.assignor_name,
                       {m: {t: set(ps) for t, ps in a.items() if ps} for m, a in group.target.items()}))
    for member in list(c.groups["g"].members.values()):
        beat(c, member.member_id, member.epoch, owned=dict(member.assigned))
    for member_id in member_ids[::3]:
        if not any(c.groups["g"].target.get(member_id, {}).values()):
            leave(c, member_id)
        group = c.groups["g"]
        states.append((group.epoch, group.assignment_epoch, dict(group.target)))
    return states


def test_the_range_assignor_s_joins_are_cheap_after_its_holders_and_exact(monkeypatch):
    member_ids = [f"m{i:03}" for i in range(40)] + ["a-first", "m0005", "z-last"]
    work = Work(monkeypatch)
    c = coordinator()
    per_join = []
    for member_id in member_ids:
        join(c, member_id, assignor="range")
        per_join.append(work.take())
    assert c.groups["g"].assignor_name == "range"
    # Sorting after the 4 holders: no other member read; before them: the assignor runs.
    assert max(per_join[PARTITIONS + 1:40]) <= 2 and per_join[-1] <= 2
    assert per_join[40] >= 40 and per_join[41] >= 41
    holders = {m for m, target in c.groups["g"].target.items() if any(target.values())}
    assert holders == {"a-first", "m000", "m0005", "m001"}

    fast = range_scenario(coordinator(), member_ids)
    monkeypatch.setattr(ConsumerGroupCoordinator, "_join_keeps_target", lambda self, group, member: False)
    monkeypatch.setattr(ConsumerGroupCoordinator, "_leave_keeps_target", lambda self, group, member: False)
    assert range_scenario(coordinator(), member_ids) == fast


def test_a_revocation_deadline_before_the_timer_s_next_one_wakes_it():
    """A heartbeat moves its session deadline later without waking the timer task; a
    deadline it sets earlier than the one the task sleeps until (a revocation's) must
    still wake it."""
    import asyncio
    import time

    async def scenario():
        clock = ManualClock()
        c = ConsumerGroupCoordinator(clock, ConsumerGroupSettings(), Catalog(), lambda g: None, lambda g: None)
        c.start()
        try:
            c.heartbeat(HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=10_000, subscribed_names=("t1",), owned={}),
                        "client", "/127.0.0.1", api_version=1)
            a = c.groups["g"].members["a"]
            beat(c, "a", a.epoch, owned=dict(a.assigned))
            await asyncio.sleep(0.1)  # the task sleeps until a's session deadline, 45 s on
            join(c, "b")
            beat(c, "a", a.epoch, owned=dict(a.assigned))  # it must give two partitions up
            assert a.revocation_deadline is not None
            clock.advance(11_000)  # past its rebalance timeout, long before its session's end
            until = time.monotonic() + 10
            while "a" in c.groups["g"].members and time.monotonic() < until:
                await asyncio.sleep(0.02)
            assert "a" not in c.groups["g"].members
        finally:
            await c.stop()

    asyncio.run(scenario())
