"""Issue 22: online migration of a live group between the classic and the consumer group
protocol (KIP-848), with real client members in their own processes (``group_member.py``)
against a real broker process: new = confluent-kafka (librdkafka 2.16) with
``group.protocol=consumer``; classic = confluent-kafka with ``group.protocol=classic`` and the
eager ``range`` or the ``cooperative-sticky`` assignor, kafka-python or aiokafka (range).

* A rolling upgrade classic -> consumer -> classic of a 3-member group while a producer runs
  throughout: one member at a time is closed and replaced by a member of the other protocol.
  The group converts to a consumer group when the first new member joins (the classic ones
  keep consuming inside it) and back to a classic group when the last new member leaves.
* ``group.consumer.migration.policy``: ``disabled`` refuses the upgrade with Kafka's
  GROUP_ID_NOT_FOUND message (the classic group is untouched); ``upgrade`` converts but never
  downgrades (classic members stay in the consumer group and keep consuming).
* A kill -9 of the broker in the middle of a migration rebalance: members rejoin, and no
  committed offset is lost.

What the record checks assert (each member commits exactly the batch it has just reported,
synchronously, and reports whether the commit succeeded): every produced record is consumed
(no loss); no record is read again after a successful commit of it (a record has at most one
reader whose commit of it succeeded: exactly once for committed records); a record read
more than once was read by a member whose commit of it did not succeed (Kafka's
at-least-once for uncommitted records); at the end the group's committed offsets are the
partitions' high watermarks.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest
from rawkafka import ErrorCode, KafkaRaw, wait_until
from rmqkafka.adapter.embedded import EmbeddedBroker
from test_groups import (
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_PROTOCOL_CONFIG,
    LIST_GROUPS,
    WAIT,
    BackgroundProducer,
    Member,
    Rec,
    dump_events,
    fetch_offsets,
    high_watermarks,
    member_pool,
    produce_round_robin,
    raw_member,
    unique,
    wait_converged,
)

pytestmark = [pytest.mark.integration]

CONSUMER_GROUP_HEARTBEAT = 68
PARTITIONS = 6


def start_with(root: Path, **config: object) -> EmbeddedBroker:
    path = root / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**CONSUMER_PROTOCOL_CONFIG, **config}.items()))
    return EmbeddedBroker(data_dir=root / "data", config_file=path)


def group_type(conn: KafkaRaw, group: str) -> str | None:
    listed = conn.request(LIST_GROUPS, 5, states_filter=[], types_filter=[]).groups
    return next((g.group_type for g in listed if g.group_id == group), None)


def member_types(conn: KafkaRaw, group: str) -> dict[str, int]:
    """{client id: MemberType} from ConsumerGroupDescribe v1 (0 classic, 1 consumer)."""
    (described,) = conn.request(CONSUMER_GROUP_DESCRIBE, 1, group_ids=[group],
                                include_authorized_operations=False).groups
    assert described.error_code == ErrorCode.none, described
    return {m.client_id: m.member_type for m in described.members}


def check_records(members: list[Member], ends: dict[tuple[str, int], int], topic: str) -> tuple[int, int]:
    """The record checks of the module docstring; (records, records read more than once)."""
    readers: dict[Rec, list[str]] = defaultdict(list)
    committed_by: dict[Rec, list[str]] = defaultdict(list)
    for m in members:
        done = {e["batch"] for e in m.of("committed")}
        for batch, rec in m.consumed():
            readers[rec].append(m.name)
            if batch in done:
                committed_by[rec].append(m.name)
    produced = {(topic, p, o) for (_, p), end in ends.items() for o in range(end)}
    missing = produced - set(readers)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:10]}"
    assert set(readers) <= produced
    twice_committed = {rec: names for rec, names in committed_by.items() if len(names) > 1}
    assert not twice_committed, f"records committed by two readers: {sorted(twice_committed.items())[:10]}"
    uncommitted = set().union(*(m.uncommitted() for m in members))
    again = {rec for rec, names in readers.items() if len(names) > 1}
    assert again <= uncommitted, sorted(again - uncommitted)[:10]
    return len(produced), len(again)


def drain(conn: KafkaRaw, group: str, topic: str, producer: BackgroundProducer | None) -> dict:
    """Stop producing; wait until the group has committed every partition's end."""
    if producer is not None:
        time.sleep(0.5)
        producer.stop()
    ends = high_watermarks(conn, topic, PARTITIONS)
    everything = set(ends)
    wait_until(lambda: {tp: c[0] for tp, c in fetch_offsets(conn, group, everything).items()} == ends,
               WAIT, message="everything committed")
    return ends


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("classic_client", "strategy"), [
    ("confluent", "range"), ("confluent", "cooperative-sticky"), ("kafka-python", "range"), ("aiokafka", "range")])
def test_rolling_upgrade_and_downgrade_under_load(tmp_path, classic_client, strategy):
    """classic x3 -> (one at a time) consumer x3 -> (one at a time) classic x3, producing
    throughout; the classic members use an eager (range) or the cooperative assignor, and
    librdkafka, kafka-python or aiokafka (the new members are librdkafka's: only it speaks
    KIP-848 of the three)."""
    with start_with(tmp_path) as b, KafkaRaw(b.host, b.port) as conn, member_pool(tmp_path) as start:
        topic, group = unique("migrate"), unique("migrate")
        conn.create_topic(topic, PARTITIONS)
        everything = {(topic, p) for p in range(PARTITIONS)}
        produce_round_robin(conn, topic, PARTITIONS, 300)
        bootstrap = b.bootstrap_servers

        def member(name: str, protocol: str) -> Member:
            client = classic_client if protocol == "classic" else "confluent"
            return start(client, bootstrap, group, [topic], name, protocol=protocol, strategy=strategy)

        live = [member(f"classic-{i}", "classic") for i in (1, 2, 3)]
        everyone = list(live)
        wait_converged(conn, group, live, everything)
        assert group_type(conn, group) == "classic"
        with BackgroundProducer(bootstrap, topic, PARTITIONS) as producer:
            producer.start()
            timings = []
            for step, (old_protocol, new_protocol) in enumerate(
                    [("classic", "consumer")] * 3 + [("consumer", "classic")] * 3):
                leaving = live.pop(0)
                leaving.wait_for(lambda ev: any(e["ev"] == "committed" for e in ev), "a first commit")
                began = time.monotonic()
                leaving.close()
                joining = member(f"{new_protocol}-{step + 1}", new_protocol)
                live.append(joining)
                everyone.append(joining)
                wait_converged(conn, group, live, everything, timeout=60)
                timings.append(time.monotonic() - began)
                kinds = {m.name.split("-")[0] for m in live}
                expected_type = "classic" if kinds == {"classic"} else "consumer"
                assert group_type(conn, group) == expected_type, (step, kinds)
                if expected_type == "consumer":
                    types = member_types(conn, group)
                    assert types == {m.name: 0 if m.name.startswith("classic") else 1 for m in live}, types
            ends = drain(conn, group, topic, producer)
        for m in live:
            m.close()
    dump_events(everyone, tmp_path)
    records, again = check_records(everyone, ends, topic)
    print(f"\n[migration, {classic_client} {strategy}] {records} records; {again} read twice (all uncommitted by their first reader); "
          f"each step converged in {', '.join(f'{t:.1f}' for t in timings)} s")


def test_policy_disabled_refuses_the_upgrade(tmp_path):
    """Kafka's GROUP_ID_NOT_FOUND and message; the classic group keeps its member and generation."""
    with start_with(tmp_path, **{"group.consumer.migration.policy": "Disabled"}) as b, \
            KafkaRaw(b.host, b.port) as conn:
        topic, group = unique("policy"), unique("policy")
        conn.create_topic(topic, 2)
        member_id, generation = raw_member(conn, group, [topic], {topic: [0, 1]})
        answer = conn.request(CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id="new-1", member_epoch=0,
                              rebalance_timeout=30_000, subscribed_topic_names=(topic,), topic_partitions=())
        assert answer.error_code == ErrorCode.group_id_not_found
        assert answer.error_message == (f"Cannot upgrade classic group {group} to consumer group because online "
                                        f"upgrade is disabled.")
        assert group_type(conn, group) == "classic"
        beat = conn.request(12, 3, group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=None)
        assert beat.error_code == ErrorCode.none


def test_a_bad_policy_is_a_start_up_error(tmp_path):
    broker = start_with(tmp_path, **{"group.consumer.migration.policy": "sideways"})
    with pytest.raises(Exception) as caught:
        broker.start()
    assert "group.consumer.migration.policy" in str(caught.value)


@pytest.mark.timeout(180)
def test_policy_upgrade_never_downgrades(tmp_path):
    """With ``upgrade`` the group converts, and stays a consumer group of classic members once
    the last new member has left; the classic member keeps consuming everything."""
    with start_with(tmp_path, **{"group.consumer.migration.policy": "UPGRADE"}) as b, \
            KafkaRaw(b.host, b.port) as conn, member_pool(tmp_path) as start:
        topic, group = unique("upgrade-only"), unique("upgrade-only")
        conn.create_topic(topic, PARTITIONS)
        everything = {(topic, p) for p in range(PARTITIONS)}
        produce_round_robin(conn, topic, PARTITIONS, 120)
        classic = start("confluent", b.bootstrap_servers, group, [topic], "classic-1")
        wait_converged(conn, group, [classic], everything)
        new = start("confluent", b.bootstrap_servers, group, [topic], "consumer-1", protocol="consumer")
        wait_converged(conn, group, [classic, new], everything, timeout=60)
        assert group_type(conn, group) == "consumer"
        assert member_types(conn, group) == {"classic-1": 0, "consumer-1": 1}
        new.close()
        wait_converged(conn, group, [classic], everything, timeout=60)
        assert group_type(conn, group) == "consumer"
        assert member_types(conn, group) == {"classic-1": 0}
        produce_round_robin(conn, topic, PARTITIONS, 60)
        ends = drain(conn, group, topic, None)
        classic.close()
    check_records([classic, new], ends, topic)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("with_offsets", [True, False], ids=["committed-offsets", "no-offsets"])
def test_broker_kill_during_a_migration_rebalance(tmp_path, with_offsets):
    """kill -9 as soon as a new-protocol member has turned a classic group into a consumer
    group (the classic members are then being told to rejoin): after the restart (same port)
    members get UNKNOWN_MEMBER_ID, rejoin and converge again, the group upgraded once more; no
    committed offset goes backwards; every record is consumed. Without committed offsets (no
    record yet) the members rejoin the same way and start from the beginning."""
    with start_with(tmp_path) as b, member_pool(tmp_path) as start:
        topic, group = unique("migrate-kill"), unique("migrate-kill")
        everything = {(topic, p) for p in range(PARTITIONS)}
        with KafkaRaw(b.host, b.port) as conn:
            conn.create_topic(topic, PARTITIONS)
            if with_offsets:
                produce_round_robin(conn, topic, PARTITIONS, 300)
        members = [start("confluent", b.bootstrap_servers, group, [topic], f"classic-{i}") for i in (1, 2)]
        with KafkaRaw(b.host, b.port) as conn:
            wait_converged(conn, group, members, everything)
        with BackgroundProducer(b.bootstrap_servers, topic, PARTITIONS) as producer:
            if with_offsets:
                producer.start()
                for m in members:
                    m.wait_for(lambda ev: any(e["ev"] == "committed" for e in ev), "a first commit")
            new = start("confluent", b.bootstrap_servers, group, [topic], "consumer-1", protocol="consumer")
            members.append(new)
            with KafkaRaw(b.host, b.port) as conn:
                wait_until(lambda: group_type(conn, group) == "consumer", WAIT, 0.01, message="the upgrade")
                before = {tp: c[0] for tp, c in fetch_offsets(conn, group, everything).items()}
            producer.stop()  # its connection would not survive the kill
        marks = [len(m.events) for m in members]
        b.kill()
        b.restart(same_port=True)
        with KafkaRaw(b.host, b.port) as conn:
            after = {tp: c[0] for tp, c in fetch_offsets(conn, group, everything).items()}
            assert all(after[tp] >= offset for tp, offset in before.items()), (before, after)
            if not with_offsets:
                assert set(before.values()) == set(after.values()) == {-1}
            produce_round_robin(conn, topic, PARTITIONS, 60)
            wait_converged(conn, group, members, everything, timeout=60)
            for m, mark in zip(members, marks):  # everyone rejoined under a new membership
                assert any(e["ev"] == "assigned" for e in m.events[mark:]), m.tail()
            assert group_type(conn, group) == "consumer"
            ends = drain(conn, group, topic, None)
        for m in members:
            m.close()
    dump_events(members, tmp_path)
    records, again = check_records(members, ends, topic)
    print(f"\n[migration kill -9] {records} records, {again} read twice")
