"""Issue 22: consumer groups with the KIP-848 protocol (confluent-kafka ``group.protocol=consumer``)
against a real broker process.

The broker runs with a 500 ms heartbeat interval and a 6 s session timeout (their minimums
lowered), so rebalances take a second or two. Members run in threads of this process, except
the one that is SIGKILLed (a child process). Ownership is checked at every callback: a
partition is assigned to a member only after its previous owner's on_revoke returned.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from rawkafka import ErrorCode, KafkaRaw, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SESSION_MS = 6000
HEARTBEAT_MS = 500
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": SESSION_MS,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": HEARTBEAT_MS,
}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    from rmqkafka.adapter.embedded import EmbeddedBroker

    root = tmp_path_factory.mktemp("kip848")
    config = root / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONFIG.items()))
    broker = EmbeddedBroker(data_dir=root / "data", config_file=config)
    with broker:
        yield broker.bootstrap_servers
        if "Traceback" in broker.stderr:
            print(broker.stderr[-5000:])
        assert "Traceback" not in broker.stderr


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
    assert producer.flush(10) == 0


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}


class Ownership:
    """Which member owns which partition, from the rebalance callbacks of every member."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[tuple[str, int], str] = {}
        self.overlaps: list[str] = []

    def assigned(self, member: str, partitions) -> None:
        with self.lock:
            for tp in partitions:
                key = (tp.topic, tp.partition)
                if key in self.owner and self.owner[key] != member:
                    self.overlaps.append(f"{key} given to {member} while {self.owner[key]} owns it")
                self.owner[key] = member

    def revoked(self, member: str, partitions) -> None:
        with self.lock:
            for tp in partitions:
                if self.owner.get((tp.topic, tp.partition)) == member:
                    del self.owner[(tp.topic, tp.partition)]

    def of(self, member: str) -> set[tuple[str, int]]:
        with self.lock:
            return {tp for tp, m in self.owner.items() if m == member}


class Member(threading.Thread):
    """One consumer polling in its own thread; commits what it consumed before a revocation."""

    def __init__(self, name: str, config: dict, topics: list[str], ownership: Ownership,
                 consumed: Counter) -> None:
        super().__init__(name=name, daemon=True)
        self.member = name
        self.consumer = Consumer(config)
        self.ownership, self.consumed = ownership, consumed
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_revoke)

    def _on_assign(self, consumer, partitions) -> None:
        self.ownership.assigned(self.member, partitions)

    def _on_revoke(self, consumer, partitions) -> None:
        try:
            consumer.commit(asynchronous=False)
        except KafkaException:
            pass  # nothing consumed yet
        self.ownership.revoked(self.member, partitions)

    def run(self) -> None:
        while not self.stop.is_set():
            message = self.consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                self.errors.append(str(message.error()))
                continue
            with self.ownership.lock:
                self.consumed[int(message.value())] += 1
            self.consumer.store_offsets(message)
        self.consumer.close()

    def leave(self) -> None:
        self.stop.set()
        self.join(20)


def test_join_consume_commit_and_describe(bootstrap):
    topic, group = unique("kip848"), unique("g")
    create_topic(bootstrap, topic, 4)
    produce(bootstrap, topic, 100, 4)
    consumer = Consumer(consumer_config(bootstrap, group))
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(int(message.value()))
    assert sorted(got) == list(range(100))
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    assert [tp.offset for tp in committed] == [25, 25, 25, 25]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(10)
    assert str(described.type).endswith("CONSUMER")
    assert str(described.state).endswith("STABLE")
    assert len(described.members) == 1
    assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == {0, 1, 2, 3}
    consumer.close()
    wait_until(lambda: str(admin.describe_consumer_groups([group])[group].result(10).state).endswith("EMPTY"),
               timeout=20, message="the group empties when its member leaves")


def test_members_join_and_leave_without_overlap_or_loss(bootstrap):
    topic, group = unique("kip848-many"), unique("g")
    create_topic(bootstrap, topic, 8)
    ownership, consumed = Ownership(), Counter()
    config = consumer_config(bootstrap, group, **{"enable.auto.offset.store": False, "enable.auto.commit": True,
                                                  "auto.commit.interval.ms": 200})
    members = [Member("m0", config, [topic], ownership, consumed)]
    members[0].start()
    produced = 0
    for step in range(1, 5):  # members m1..m4 join one by one while records keep arriving
        produce(bootstrap, topic, 200, 8, start=produced)
        produced += 200
        member = Member(f"m{step}", config, [topic], ownership, consumed)
        member.start()
        members.append(member)
        wait_until(lambda: len(ownership.of(member.member)) >= 1, timeout=30,
                   message=f"{member.member} gets partitions")
    wait_until(lambda: all(1 <= len(ownership.of(m.member)) <= 2 for m in members), timeout=30,
               message="8 partitions spread over 5 members")
    for leaving in members[:3]:  # three leave cleanly, one after the other
        produce(bootstrap, topic, 200, 8, start=produced)
        produced += 200
        leaving.leave()
    survivors = members[3:]
    wait_until(lambda: sum(len(ownership.of(m.member)) for m in survivors) == 8, timeout=30,
               message="the survivors own every partition")
    wait_until(lambda: len(consumed) == produced, timeout=30, message="every record consumed")
    for member in survivors:
        member.leave()
    assert ownership.overlaps == []
    assert set(consumed) == set(range(produced))
    assert all(not m.errors for m in members), [m.errors for m in members]


def test_describe_a_group_of_several_members(bootstrap):
    """ConsumerGroupDescribe (raw v1 and confluent-kafka's AdminClient) of a stable group of
    three members: every member at the group's epoch, its assignment equal to its target and
    to what its on_assign callbacks gave it, the assignments disjoint and complete."""
    topic, group = unique("kip848-describe"), unique("g")
    create_topic(bootstrap, topic, 6)
    ownership, consumed = Ownership(), Counter()
    config = consumer_config(bootstrap, group)
    members = [Member(f"d{i}", {**config, "client.id": f"describer-{i}"}, [topic], ownership, consumed)
               for i in range(3)]
    for member in members:
        member.start()
    try:
        wait_until(lambda: all(len(ownership.of(m.member)) == 2 for m in members), timeout=30,
                   message="6 partitions, 2 per member")
        with KafkaRaw.connect(bootstrap) as conn:
            def described():
                (g,) = conn.request(69, 1, group_ids=[group], include_authorized_operations=False).groups
                return g

            wait_until(lambda: described().group_state == "Stable", timeout=30, message="a stable group")
            g = described()
        assert g.error_code == ErrorCode.none and g.assignor_name == "uniform"
        assert g.group_epoch == g.assignment_epoch and len(g.members) == 3
        by_client = {}
        for m in g.members:
            assert m.member_epoch == g.assignment_epoch and m.member_type == 1 and m.instance_id is None
            assert tuple(m.subscribed_topic_names) == (topic,) and m.client_host
            parts = {(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions}
            target = {(t.topic_name, p) for t in m.target_assignment.topic_partitions for p in t.partitions}
            assert parts == target
            by_client[m.client_id] = (m.member_id, parts)
        assert sorted(by_client) == ["describer-0", "describer-1", "describer-2"]
        for i, member in enumerate(members):
            assert by_client[f"describer-{i}"][1] == ownership.of(member.member)
        assert len({member_id for member_id, _ in by_client.values()}) == 3
        everything = [tp for _, parts in by_client.values() for tp in parts]
        assert sorted(everything) == [(topic, p) for p in range(6)]

        admin = AdminClient({"bootstrap.servers": bootstrap})
        seen = admin.describe_consumer_groups([group])[group].result(10)
        assert str(seen.state).endswith("STABLE") and seen.partition_assignor == "uniform"
        assert {m.client_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
                for m in seen.members} == {client: parts for client, (_, parts) in by_client.items()}
    finally:
        for member in members:
            member.leave()
    assert ownership.overlaps == []


def test_regex_subscription_picks_up_a_new_topic(bootstrap):
    prefix = unique("rx")
    create_topic(bootstrap, f"{prefix}-a", 2)
    ownership = Ownership()
    member = Member("rx", consumer_config(bootstrap, unique("g")), [f"^{prefix}-.*"], ownership, Counter())
    member.start()
    try:
        wait_until(lambda: len(ownership.of("rx")) == 2, timeout=30, message="the first topic assigned")
        create_topic(bootstrap, f"{prefix}-b", 3)
        create_topic(bootstrap, unique("other"), 1)
        wait_until(lambda: len(ownership.of("rx")) == 5, timeout=30, message="the new topic joins the assignment")
        assert {t for t, _ in ownership.of("rx")} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        member.leave()


def test_partition_increase_joins_the_assignment(bootstrap):
    topic = unique("grow")
    create_topic(bootstrap, topic, 2)
    ownership = Ownership()
    member = Member("grow", consumer_config(bootstrap, unique("g")), [topic], ownership, Counter())
    member.start()
    try:
        wait_until(lambda: len(ownership.of("grow")) == 2, timeout=30, message="two partitions assigned")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
        wait_until(lambda: len(ownership.of("grow")) == 5, timeout=40, message="five partitions assigned")
    finally:
        member.leave()


@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_server_assignor_range_vs_uniform(bootstrap, assignor):
    topics = [unique("co-a"), unique("co-b")]
    for topic in topics:
        create_topic(bootstrap, topic, 3)
    ownership = Ownership()
    config = consumer_config(bootstrap, unique("g"), **{"group.remote.assignor": assignor})
    members = [Member(f"{assignor}{i}", config, topics, ownership, Counter()) for i in range(2)]
    for member in members:
        member.start()
    try:
        wait_until(lambda: sum(len(ownership.of(m.member)) for m in members) == 6
                   and all(ownership.of(m.member) for m in members), timeout=30, message="6 partitions assigned")
        wait_until(lambda: sorted(len(ownership.of(m.member)) for m in members) in ([2, 4], [3, 3]), timeout=30)
        shapes = sorted(len(ownership.of(m.member)) for m in members)
        if assignor == "range":  # per topic: 2 + 1, the same member first on both topics
            assert shapes == [2, 4]
            big = max(members, key=lambda m: len(ownership.of(m.member)))
            assert {p for _, p in ownership.of(big.member)} == {0, 1}
        else:
            assert shapes == [3, 3]
    finally:
        for member in members:
            member.leave()
    assert ownership.overlaps == []


def test_static_member_comes_back_to_its_assignment(bootstrap):
    topic, group = unique("static"), unique("g")
    create_topic(bootstrap, topic, 4)
    ownership = Ownership()

    def static(name: str, instance: str) -> Member:
        return Member(name, consumer_config(bootstrap, group, **{"group.instance.id": instance}), [topic],
                      ownership, Counter())

    first, second = static("s1", "i-1"), static("s2", "i-2")
    first.start()
    second.start()
    wait_until(lambda: len(ownership.of("s1")) == 2 and len(ownership.of("s2")) == 2, timeout=30,
               message="two static members share four partitions")
    before = ownership.of("s1")
    first.leave()  # a static member leaves with epoch -2: its partitions are not reassigned
    time.sleep(HEARTBEAT_MS * 4 / 1000)
    assert ownership.of("s2") == {(topic, p) for p in range(4)} - before
    again = static("s1-again", "i-1")
    again.start()
    try:
        wait_until(lambda: ownership.of("s1-again") == before, timeout=30, message="the same partitions again")
    finally:
        again.leave()
        second.leave()
    assert ownership.overlaps == []


KILLED_MEMBER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.2)
"""


def test_session_timeout_removes_a_killed_member(bootstrap):
    topic, group = unique("killed"), unique("g")
    create_topic(bootstrap, topic, 4)
    child = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, bootstrap, group, topic],
                             stdout=subprocess.PIPE, text=True)
    ownership = Ownership()
    survivor = None
    try:
        assert child.stdout.readline().startswith("assigned")
        survivor = Member("survivor", consumer_config(bootstrap, group), [topic], ownership, Counter())
        survivor.start()
        wait_until(lambda: len(ownership.of("survivor")) == 2, timeout=30, message="the survivor gets half")
        os.kill(child.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_until(lambda: len(ownership.of("survivor")) == 4, timeout=SESSION_MS / 1000 + 20,
                   message="the killed member's partitions move after its session timeout")
        took = time.monotonic() - killed_at
        assert took >= SESSION_MS / 1000 - 1, f"moved after {took:.1f}s, before the session timeout"
    finally:
        child.kill()
        child.wait()
        if survivor is not None:
            survivor.leave()


def test_commit_with_a_stale_epoch_and_a_classic_join(bootstrap):
    topic, group = unique("stale"), unique("g")
    create_topic(bootstrap, topic, 1)
    with KafkaRaw.connect(bootstrap) as conn:
        meta = conn.metadata([topic], version=12)
        topic_id = meta.topics[0].topic_id
        beat = conn.request(68, 1, group_id=group, member_id="raw-member-1", member_epoch=0,
                            rebalance_timeout=30_000, subscribed_topic_names=(topic,), topic_partitions=())
        assert beat.error_code == ErrorCode.none and beat.member_epoch == 1
        assert [(t.topic_id, t.partitions) for t in beat.assignment.topic_partitions] == [(topic_id, (0,))]

        def commit(epoch: int, member_id: str = "raw-member-1", version: int = 9):
            response = conn.request(8, version, group_id=group, generation_id_or_member_epoch=epoch,
                                    generation_id=epoch, member_id=member_id, topics=[
                                        dict(name=topic, partitions=[dict(partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")])])
            return response.topics[0].partitions[0].error_code

        assert commit(1) == ErrorCode.none
        assert commit(0) == ErrorCode.stale_member_epoch
        assert commit(2) == ErrorCode.stale_member_epoch
        assert commit(1, "someone-else") == ErrorCode.unknown_member_id
        assert commit(1, version=8) == ErrorCode.unsupported_version
        fetch = conn.request(9, 9, groups=[dict(group_id=group, member_id="raw-member-1", member_epoch=5,
                                                topics=None)])
        assert fetch.groups[0].error_code == ErrorCode.stale_member_epoch
        # A classic member joining a consumer group with members (online migration) needs the
        # "consumer" protocol type; metadata that is not a ConsumerProtocol subscription is
        # Kafka's IllegalStateException, UNKNOWN_SERVER_ERROR (test_group_migration.py).
        subscription = struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)
        for protocol_type, metadata, error in (("connect", subscription, ErrorCode.inconsistent_group_protocol),
                                               ("consumer", b"", ErrorCode.unknown_server_error)):
            join = conn.request(11, 5, group_id=group, session_timeout=10_000, rebalance_timeout=10_000,
                                member_id="known-member", protocol_type=protocol_type,
                                protocols=[dict(name="range", metadata=metadata)])
            assert join.error_code == error, protocol_type
        # A heartbeat after the member left: UNKNOWN_MEMBER_ID; a classic group id: GROUP_ID_NOT_FOUND.
        conn.request(68, 1, group_id=group, member_id="raw-member-1", member_epoch=-1, topic_partitions=None)
        assert conn.request(68, 1, group_id=group, member_id="raw-member-1", member_epoch=1,
                            topic_partitions=None).error_code == ErrorCode.unknown_member_id


def test_admin_apis_on_a_consumer_group(bootstrap):
    topic, group = unique("admin"), unique("g")
    create_topic(bootstrap, topic, 2)
    with KafkaRaw.connect(bootstrap) as conn:
        beat = conn.request(68, 1, group_id=group, member_id="admin-member", member_epoch=0,
                            rebalance_timeout=30_000, subscribed_topic_names=(topic,), topic_partitions=())
        assert beat.member_epoch == 1

        def listed(types=(), states=()):
            response = conn.request(16, 5, states_filter=states, types_filter=types)
            return {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in response.groups
                    if g.group_id == group}

        assert listed() == {group: ("consumer", "Stable", "consumer")}  # one member owning everything
        assert listed(types=("Consumer",)) == {group: ("consumer", "Stable", "consumer")}
        assert listed(types=("classic",)) == {}
        assert listed(states=("stable",)) == {group: ("consumer", "Stable", "consumer")}
        for version in (0, 5):  # kafka-python and librdkafka's fallback send these
            described = conn.request(15, version, groups=(group,), **({"include_authorized_operations": False}
                                                                        if version >= 3 else {})).groups[0]
            assert (described.error_code, described.group_state, described.protocol_type,
                    described.members) == (ErrorCode.none, "Dead", "", ())
        # no error, so the operations are there when asked for, as KafkaApis adds them
        asked = conn.request(15, 5, groups=(group,), include_authorized_operations=True).groups[0]
        assert asked.authorized_operations != -2**31
        described = conn.request(15, 6, groups=(group,), include_authorized_operations=True).groups[0]
        assert (described.error_code, described.error_message, described.group_state, described.members,
                described.authorized_operations) == (
            ErrorCode.group_id_not_found, f"Group {group} is not a classic group.", "Dead", (), -2**31)
        offsets_delete = conn.request(47, 0, group_id=group, topics=[
            dict(name=topic, partitions=[dict(partition_index=0)])])
        assert offsets_delete.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic
        assert conn.request(42, 2, groups_names=(group,)).results[0].error_code == ErrorCode.non_empty_group
        conn.request(68, 1, group_id=group, member_id="admin-member", member_epoch=-1, topic_partitions=None)
        assert listed() == {group: ("consumer", "Empty", "consumer")}
        assert conn.request(42, 2, groups_names=(group,)).results[0].error_code == ErrorCode.none
        assert listed() == {}
        unknown = conn.request(69, 0, group_ids=(group,), include_authorized_operations=False).groups[0]
        assert unknown.error_code == ErrorCode.group_id_not_found
        unknown = conn.request(15, 6, groups=(group,), include_authorized_operations=False).groups[0]
        assert (unknown.error_code, unknown.error_message, unknown.group_state) == (
            ErrorCode.group_id_not_found, f"Group {group} not found.", "Dead")
        unknown = conn.request(15, 5, groups=(group,), include_authorized_operations=False).groups[0]
        assert (unknown.error_code, unknown.group_state, unknown.members) == (ErrorCode.none, "Dead", ())


def test_broker_restart_members_rejoin_without_overlap_or_loss(tmp_path):
    """A consumer-protocol group's membership is not persisted (a classic group's is:
    test_groups.py's test_live_group_survives_broker_restart): after a restart members are fenced (UNKNOWN_MEMBER_ID),
    rejoin with epoch 0 and resume from the committed offsets; partitions of a group that
    existed before wait two heartbeat intervals, so no old member still holds one."""
    from rmqkafka.adapter.embedded import EmbeddedBroker

    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in BROKER_CONFIG.items()))
    broker = EmbeddedBroker(data_dir=tmp_path / "data", config_file=config).start()
    try:
        bootstrap = broker.bootstrap_servers
        topic, group = unique("restart"), unique("g")
        create_topic(bootstrap, topic, 4)
        produce(bootstrap, topic, 200, 4)
        ownership, consumed = Ownership(), Counter()
        config_ = consumer_config(bootstrap, group, **{"enable.auto.offset.store": False, "enable.auto.commit": True,
                                                      "auto.commit.interval.ms": 100})
        members = [Member(f"r{i}", config_, [topic], ownership, consumed) for i in range(2)]
        for member in members:
            member.start()
        wait_until(lambda: len(consumed) == 200, timeout=30, message="the first records consumed")
        time.sleep(0.5)  # an auto-commit interval or more
        broker.restart(same_port=True)
        produce(bootstrap, topic, 200, 4, start=200)
        wait_until(lambda: len(consumed) == 400, timeout=40, message="every record consumed after the restart")
        wait_until(lambda: sum(len(ownership.of(m.member)) for m in members) == 4, timeout=30,
                   message="the members own every partition again")
        for member in members:
            member.leave()
        assert ownership.overlaps == []
        assert set(consumed) == set(range(400))
        assert "Traceback" not in broker.stderr
    finally:
        broker.close()
