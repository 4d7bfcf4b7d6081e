"""Classic groups' metadata survives a broker restart as in Kafka (GroupMetadata record):
a coordinator built again on the same data dir, driven with an injected clock."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.groups import classic_persistence
from rmqkafka.adapter.groups.coordinator import GroupCoordinator, GroupSettings
from rmqkafka.adapter.groups.group import GroupState
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.offset_store import CommittedOffset, OffsetStore, read_journal
from rmqkafka.storage.store import MessageStore

SESSION = 10_000
REBALANCE = 30_000
PROTOCOLS = [("range", b"meta-range"), ("roundrobin", b"meta-rr")]


@pytest.fixture
def clock():
    return ManualClock()


class Broker:
    """A store and a coordinator on one data dir, restartable (clean or as after kill -9:
    nothing is flushed or closed first)."""

    def __init__(self, data_dir, clock) -> None:
        self.data_dir, self.clock = data_dir, clock
        self.store = self.coordinator = None
        self.start()
        self.store.create_topic("t", 6, {})

    def start(self, settings: GroupSettings = GroupSettings()) -> None:
        self.store = MessageStore(StorageConfig(data_dir=self.data_dir), self.clock)
        self.store.open()
        self.coordinator = GroupCoordinator(self.store, self.clock, settings)

    async def restart(self, clean: bool = True, settings: GroupSettings = GroupSettings()) -> GroupCoordinator:
        if clean:
            await self.coordinator.stop()
        self.store.close_sync()
        self.start(settings)
        return self.coordinator


@pytest.fixture
async def broker(tmp_path, clock):
    b = Broker(tmp_path, clock)
    yield b
    await b.coordinator.stop()
    b.store.close_sync()


def join(c, member_id="", instance=None, client="c"):
    return asyncio.ensure_future(
        c.join("g", member_id, instance, "consumer", PROTOCOLS, SESSION, REBALANCE, client, "h", True))


async def joined_pair(c):
    """Two members through JoinGroup of generation 1; returns (leader, follower)."""
    a = (await join(c, client="a"))["member_id"]
    b = (await join(c, client="b"))["member_id"]
    answers = await asyncio.gather(join(c, member_id=a, client="a"), join(c, member_id=b, client="b"))
    assert [answer["generation_id"] for answer in answers] == [1, 1]
    leader = answers[0]["leader"]
    return leader, (b if leader == a else a)


async def stable_pair(c):
    """Two members of a Stable generation 1; returns (leader, follower)."""
    leader, follower = await joined_pair(c)
    syncs = await asyncio.gather(
        c.sync("g", 1, follower, None, None, None, {}),
        c.sync("g", 1, leader, None, None, None, {leader: b"L-assign", follower: b"F-assign"}))
    assert [s[0] for s in syncs] == [ErrorCode.none, ErrorCode.none]
    return leader, follower


def hold_metadata_writes(c, monkeypatch) -> threading.Event:
    """Every group-metadata write of ``c`` waits (in its thread) until the event is set."""
    release = threading.Event()
    write = c._metadata.commit

    def slow_write(*args, **kwargs):
        assert release.wait(60)
        write(*args, **kwargs)

    monkeypatch.setattr(c._metadata, "commit", slow_write)
    return release


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "kill-9"])
async def test_a_stable_group_is_restored_stable_with_the_same_generation(broker, clock, clean):
    leader, follower = await stable_pair(broker.coordinator)
    c = await broker.restart(clean)
    group = c.groups["g"]
    assert group.state is GroupState.STABLE
    assert (group.generation_id, group.leader_id, group.protocol_type, group.protocol_name) == \
        (1, leader, "consumer", "range")
    assert set(group.members) == {leader, follower}
    assert group.members[follower].assignment == b"F-assign"
    assert group.members[leader].metadata_for("range") == b"meta-range"
    assert group.members[leader].client_id in ("a", "b")
    # Members carry on: heartbeats, commits, a repeated SyncGroup get their assignment, no rebalance.
    assert c.heartbeat("g", 1, follower, None) is ErrorCode.none
    assert c.check_commit("g", 1, leader, None) is ErrorCode.none
    assert (await c.sync("g", 1, follower, None, None, None, {}))[:2] == (ErrorCode.none, b"F-assign")
    assert c.heartbeat("g", 1, "someone-else", None) is ErrorCode.unknown_member_id
    assert c.heartbeat("g", 0, leader, None) is ErrorCode.illegal_generation


async def test_restored_sessions_start_at_load_and_a_member_that_never_returns_is_removed(broker, clock):
    leader, follower = await stable_pair(broker.coordinator)
    clock.advance(SESSION - 1)  # nearly expired before the restart: the load restarts the timer
    c = await broker.restart()
    clock.advance(SESSION // 2)
    c.tick()
    assert set(c.groups["g"].members) == {leader, follower}
    assert c.heartbeat("g", 1, leader, None) is ErrorCode.none
    clock.advance(SESSION // 2 + 1)
    c.tick()
    group = c.groups["g"]
    assert follower not in group.members and group.state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat("g", 1, leader, None) is ErrorCode.rebalance_in_progress
    answer = await join(c, member_id=leader)
    assert answer["generation_id"] == 2 and [m["member_id"] for m in answer["members"]] == [leader]


async def test_an_emptied_group_is_restored_empty_with_its_generation_and_offsets(broker, clock):
    c = broker.coordinator
    leader, follower = await stable_pair(c)
    await c.commit("g", {("t", 0): CommittedOffset(42, -1, "", clock.now_ms())})
    assert c.leave("g", follower, None) is ErrorCode.none
    assert c.leave("g", leader, None) is ErrorCode.none
    assert c.groups["g"].state is GroupState.EMPTY
    c = await broker.restart()
    group = c.groups["g"]
    assert group.state is GroupState.EMPTY and not group.members
    assert group.generation_id == 2 and group.protocol_type == "consumer"
    assert c.committed("g", "t", 0).offset == 42
    assert c.check_commit("g", -1, "", None) is ErrorCode.none  # a simple client may commit
    first = await join(c)
    answer = await join(c, member_id=first["member_id"])
    assert answer["generation_id"] == 3


async def test_a_deleted_group_stays_deleted(broker, clock):
    c = broker.coordinator
    leader, follower = await stable_pair(c)
    await c.commit("g", {("t", 0): CommittedOffset(7, -1, "", clock.now_ms())})
    c.leave("g", follower, None)
    c.leave("g", leader, None)
    assert c.delete("g") is ErrorCode.none
    c = await broker.restart(clean=False)
    assert "g" not in c.groups and c.state_of("g") is None
    assert "g" not in c.known_group_ids()


async def test_generation_is_durable_before_any_member_is_answered(broker, clock, monkeypatch):
    """kill -9 right after SyncGroup's answer: the answer's generation is on disk already,
    because no member is answered until the write has returned."""
    c = broker.coordinator
    leader, follower = await joined_pair(c)
    release = hold_metadata_writes(c, monkeypatch)
    follower_sync = asyncio.ensure_future(c.sync("g", 1, follower, None, None, None, {}))
    leader_sync = asyncio.ensure_future(
        c.sync("g", 1, leader, None, None, None, {leader: b"L-assign", follower: b"F-assign"}))
    await asyncio.sleep(0.2)
    assert not follower_sync.done() and not leader_sync.done()
    assert "g" not in _on_disk(broker)
    release.set()
    assert (await follower_sync)[:2] == (ErrorCode.none, b"F-assign")
    assert (await leader_sync)[:2] == (ErrorCode.none, b"L-assign")
    entry = classic_persistence.check("g", _on_disk(broker)["g"])
    assert entry.generation == 1 and {m["id"] for m in entry.members} == {leader, follower}


async def test_a_failed_write_fails_the_sync_and_starts_a_rebalance(broker, clock, monkeypatch):
    c = broker.coordinator
    a = (await join(c))["member_id"]
    assert (await join(c, member_id=a))["generation_id"] == 1

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(c._metadata, "commit", full_disk)
    error, assignment, _, _ = await c.sync("g", 1, a, None, None, None, {a: b"x"})
    assert (error, assignment) == (ErrorCode.not_coordinator, b"")
    assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat("g", 1, a, None) is ErrorCode.rebalance_in_progress
    monkeypatch.undo()
    assert (await join(c, member_id=a))["generation_id"] == 2
    assert (await c.sync("g", 2, a, None, None, None, {a: b"y"}))[:2] == (ErrorCode.none, b"y")


async def test_a_static_member_is_restored_and_its_restart_keeps_its_assignment(broker, clock):
    c = broker.coordinator
    a = (await join(c, instance="inst-a", client="a"))
    assert a["error_code"] is ErrorCode.none
    await c.sync("g", 1, a["member_id"], "inst-a", None, None, {a["member_id"]: b"mine"})
    c = await broker.restart(clean=False)
    group = c.groups["g"]
    assert group.static_members == {"inst-a": a["member_id"]}
    # The client restarted too: it joins without a member id and takes over, no rebalance.
    again = await join(c, instance="inst-a", client="a")
    assert again["error_code"] is ErrorCode.none and again["generation_id"] == 1
    assert group.state is GroupState.STABLE
    assert (await c.sync("g", 1, again["member_id"], "inst-a", None, None, {}))[:2] == (ErrorCode.none, b"mine")


async def test_an_older_data_dir_starts_without_groups_and_the_offsets_journal_is_untouched(broker, clock):
    """The metadata has a file of its own: an earlier broker, which truncates the offsets
    journal at a record kind it does not know, never sees one."""
    c = broker.coordinator
    await c.commit("g", {("t", 0): CommittedOffset(5, -1, "", clock.now_ms())})
    await stable_pair(c)
    await c.commit("g", {("t", 1): CommittedOffset(6, -1, "", clock.now_ms())})
    await c.stop()
    broker.store.close_sync()
    offsets_dir = broker.data_dir / "offsets"
    records, end = read_journal((offsets_dir / "journal").read_bytes())
    assert end == os.path.getsize(offsets_dir / "journal") and len(records) == 2
    # A data dir without the file (an earlier version's) starts with no members, as before.
    for name in os.listdir(offsets_dir):
        if name.startswith("groups."):
            os.remove(offsets_dir / name)
    broker.start()
    c = broker.coordinator
    assert "g" not in c.groups
    assert c.committed("g", "t", 1).offset == 6
    store = OffsetStore(offsets_dir)
    store.open()
    assert store.group_offsets("g").keys() == {("t", 0), ("t", 1)}
    store.close()


def _on_disk(broker) -> dict:
    """What a fresh start would load, read without the running coordinator."""
    from rmqkafka.storage.journaled_map import JournaledMap

    return dict(JournaledMap(broker.data_dir / "offsets" / classic_persistence.FILE_NAME,
                             classic_persistence.check).entries)


async def test_an_empty_group_without_offsets_is_dropped_with_its_metadata_at_the_offsets_check(broker, clock):
    """Kafka's cleanupGroupMetadata: an Empty group with no offsets goes, tombstone included."""
    c = broker.coordinator
    a = (await join(c))["member_id"]
    await join(c, member_id=a)
    await c.sync("g", 1, a, None, None, None, {a: b"x"})
    c.leave("g", a, None)
    c = await broker.restart()
    assert c.groups["g"].state is GroupState.EMPTY
    c.expire_offsets()
    assert "g" not in c.groups
    await asyncio.gather(*c._metadata_writes)
    assert "g" not in _on_disk(broker)
    c = await broker.restart(clean=False)
    assert "g" not in c.groups


async def test_a_member_leaving_while_the_generation_is_written_makes_the_write_moot(broker, clock, monkeypatch):
    """Kafka's storeGroup callback acts only if the group is still CompletingRebalance at the
    same generation: a LeaveGroup during the write wins, and the group rebalances."""
    c = broker.coordinator
    leader, follower = await joined_pair(c)
    release = hold_metadata_writes(c, monkeypatch)
    leader_sync = asyncio.ensure_future(
        c.sync("g", 1, leader, None, None, None, {leader: b"L-assign", follower: b"F-assign"}))
    await asyncio.sleep(0.1)
    assert c.leave("g", follower, None) is ErrorCode.none
    release.set()
    assert (await leader_sync)[:2] == (ErrorCode.rebalance_in_progress, b"")
    group = c.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and group.members[leader].assignment == b""
    answer = await join(c, member_id=leader)
    assert answer["generation_id"] == 2


async def test_metadata_damaged_beyond_repair_costs_a_rebalance_not_the_start(broker, clock, caplog):
    """Both copies (and the previous snapshot) unusable: the groups start without members,
    logged, the damaged files set aside, the committed offsets kept; a restart is not refused
    for what costs only a rebalance."""
    await stable_pair(broker.coordinator)
    await broker.coordinator.commit("g", {("t", 0): CommittedOffset(7, -1, "", clock.now_ms())})
    await broker.coordinator.stop()
    offsets_dir = broker.data_dir / "offsets"
    names = [p.name for p in offsets_dir.iterdir() if p.name.startswith("groups.")]
    assert names
    for name in names:
        (offsets_dir / name).write_bytes(b"\x00garbage\xff" * 10)
    c = await broker.restart()
    group = c.groups.get("g")
    assert group is None or not group.members
    assert c.committed("g", "t", 0).offset == 7
    assert any("set aside" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    assert sorted(p.name for p in offsets_dir.iterdir() if p.name.endswith(".damaged"))
    # and it works again: a new generation is written and restored
    await stable_pair(c)
    c = await broker.restart()
    assert c.groups["g"].state is GroupState.STABLE


async def test_a_leader_gone_during_the_generation_write_still_completes_it(broker, clock, monkeypatch):
    """The leader's connection closes (its SyncGroup is cancelled) while the generation is
    written: as Kafka's storeGroup callback, the write still completes the generation and
    the other members get their assignment, instead of waiting out the leader's session."""
    c = broker.coordinator
    leader, follower = await joined_pair(c)
    release = hold_metadata_writes(c, monkeypatch)
    follower_sync = asyncio.ensure_future(c.sync("g", 1, follower, None, None, None, {}))
    leader_sync = asyncio.ensure_future(
        c.sync("g", 1, leader, None, None, None, {leader: b"L-assign", follower: b"F-assign"}))
    await asyncio.sleep(0.1)
    leader_sync.cancel()  # what connection_lost does to the requests in flight
    await asyncio.sleep(0.1)
    release.set()
    assert (await asyncio.wait_for(follower_sync, 30))[:2] == (ErrorCode.none, b"F-assign")
    group = c.groups["g"]
    assert group.state is GroupState.STABLE and group.members[leader].assignment == b"L-assign"
    assert classic_persistence.check("g", _on_disk(broker)["g"]).generation == 1


async def test_a_restored_group_over_group_max_size_rebalances_and_sheds_a_member_refused(broker, clock):
    """Kafka's onLoaded: a group loaded with more members than group.max.size (the cap was
    lowered) rebalances at once; a known member refused while it rebalances
    (GROUP_MAX_SIZE_REACHED) is removed, as Kafka's group.remove(memberId), so the members
    taken back complete the join at once instead of waiting out the rebalance timeout."""
    c = broker.coordinator
    ids = [(await join(c, client=name))["member_id"] for name in "abc"]
    answers = await asyncio.gather(*(join(c, member_id=m) for m in ids))
    assert {a["generation_id"] for a in answers} == {1}
    leader = answers[0]["leader"]
    syncs = await asyncio.gather(*(c.sync("g", 1, m, None, None, None,
                                          {n: n.encode() for n in ids} if m == leader else {}) for m in ids))
    assert {s[0] for s in syncs} == {ErrorCode.none}
    c = await broker.restart(settings=GroupSettings(max_size=2))
    group = c.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and len(group.members) == 3
    first, second = asyncio.ensure_future(join(c, member_id=ids[0])), asyncio.ensure_future(join(c, member_id=ids[1]))
    await asyncio.sleep(0.05)
    refused = await join(c, member_id=ids[2])
    assert (refused["error_code"], refused["member_id"]) == (ErrorCode.group_max_size_reached, "")
    assert ids[2] not in group.members
    done = await asyncio.wait_for(asyncio.gather(first, second), 30)
    assert [(d["error_code"], d["generation_id"]) for d in done] == [(ErrorCode.none, 2)] * 2


async def test_a_static_member_replaced_without_a_rebalance_keeps_its_new_id_across_a_restart(broker, clock):
    """Kafka's updateStaticMemberAndRebalance stores the group before answering: a copier
    restarted under the same group.instance.id, then a broker kill -9, must not find its new
    member id fenced by the restored old one (FENCED_INSTANCE_ID on its next commit)."""
    c = broker.coordinator
    a = await join(c, instance="inst-a", client="a")
    await c.sync("g", 1, a["member_id"], "inst-a", None, None, {a["member_id"]: b"mine"})
    again = await join(c, instance="inst-a", client="a")  # the client restarted
    assert again["error_code"] is ErrorCode.none and again["member_id"] != a["member_id"]
    c = await broker.restart(clean=False)
    assert c.groups["g"].static_members == {"inst-a": again["member_id"]}
    assert c.check_commit("g", 1, again["member_id"], "inst-a") is ErrorCode.none
    assert c.heartbeat("g", 1, again["member_id"], "inst-a") is ErrorCode.none
