"""ShareFetch (78) and ShareAcknowledge (79) against a broker process, with raw kio requests
(issue 23, part 2): acquisition, acknowledgement, share sessions, lock expiry, the delivery
limit, read_committed, and kill -9 in the middle of acknowledging.

Most members here send no ShareGroupHeartbeat: as in Kafka, ShareFetch does not ask the share
group coordinator about its member id. A partition gets share state only once the coordinator
assigns it to some member, though, so each test first joins one member (``join``) that is
assigned every partition of the topic. The offsets APIs do ask it whether a group is empty, and
a member leaving through it releases its records (tests of both below). The confluent-kafka
ShareConsumer tests are at the end."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from rawkafka import ErrorCode, KafkaRaw, decode_records, make_batch

SHARE_FETCH, SHARE_ACKNOWLEDGE, INCREMENTAL_ALTER_CONFIGS, METADATA = 78, 79, 44, 3
SHARE_GROUP_HEARTBEAT = 76
GROUP_RESOURCE = 32
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
BATCH_OPTIMIZED, RECORD_LIMIT = 0, 1  # ShareAcquireMode (v2)
CONFIG = "group.share.min.record.lock.duration.ms=1000\n"


@pytest.fixture
def share_broker(broker_factory, tmp_path: Path):
    config = tmp_path / "server.properties"
    config.write_text(CONFIG)
    return broker_factory(config_file=config)


def topic_id(raw: KafkaRaw, name: str) -> uuid.UUID:
    response = raw.request(METADATA, 12, topics=[dict(name=name, topic_id=uuid.UUID(int=0))],
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return response.topics[0].topic_id


def set_group_configs(raw: KafkaRaw, group: str, **configs: str) -> None:
    response = raw.request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[dict(
        resource_type=GROUP_RESOURCE, resource_name=group,
        configs=[dict(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()])])
    assert response.responses[0].error_code == ErrorCode.none, response.responses[0].error_message


def share_fetch(raw: KafkaRaw, group: str, member: str, epoch: int, tid: uuid.UUID | None = None, *,
                partitions=(0,), acks: dict[int, list] | None = None, max_records: int = 500,
                max_wait_ms: int = 0, version: int = 1, forget: bool = False, min_bytes: int = 1,
                acquire_mode: int | None = None):
    """A ShareFetch; ``acquire_mode`` (v2's ShareAcquireMode) RECORD_LIMIT counts MaxRecords
    exactly, where Kafka's default (batch_optimized, and every v1 request) acquires whole
    batches."""
    acks = acks or {}
    extra = {} if acquire_mode is None else dict(share_acquire_mode=acquire_mode)
    topics = []
    if tid is not None and not forget:
        topics = [dict(topic_id=tid, partitions=[
            dict(partition_index=p, acknowledgement_batches=[
                dict(first_offset=f, last_offset=l, acknowledge_types=list(t)) for f, l, t in acks.get(p, [])])
            for p in sorted(set(partitions) | set(acks))])]
    forgotten = [dict(topic_id=tid, partitions=list(partitions))] if forget else []
    return raw.request(SHARE_FETCH, version, group_id=group, member_id=member, share_session_epoch=epoch,
                       max_wait=max_wait_ms, min_bytes=min_bytes, max_bytes=52428800, max_records=max_records,
                       batch_size=500, topics=topics, forgotten_topics_data=forgotten,
                       recv_timeout=max_wait_ms / 1000 + 15, **extra)


def share_ack(raw: KafkaRaw, group: str, member: str, epoch: int, tid: uuid.UUID, acks: dict[int, list],
              version: int = 1, renew_ack: bool = False):
    flag = dict(is_renew_ack=renew_ack) if version >= 2 else {}
    return raw.request(SHARE_ACKNOWLEDGE, version, group_id=group, member_id=member, share_session_epoch=epoch,
                       **flag, topics=[dict(topic_id=tid, partitions=[
                           dict(partition_index=p, acknowledgement_batches=[
                               dict(first_offset=f, last_offset=l, acknowledge_types=list(t)) for f, l, t in b])
                           for p, b in acks.items()])])


def acquired(response) -> list[tuple[int, int, int]]:
    """(offset, delivery count, value) of each acquired record, from the records returned."""
    out = []
    assert response.error_code == ErrorCode.none, (response.error_code, response.error_message)
    for topic in response.responses:
        for p in topic.partitions:
            assert p.error_code == ErrorCode.none, (p.error_code, p.error_message)
            counts = {o: r.delivery_count for r in p.acquired_records
                      for o in range(r.first_offset, r.last_offset + 1)}
            values = {r.offset: r.value for r in decode_records(p.records)}
            assert set(counts) <= set(values), "every acquired record goes out with its batch"
            out += [(o, counts[o], values[o]) for o in sorted(counts)]
    return out


def join(raw: KafkaRaw, group: str, *topics: str, member: str = "keeper") -> None:
    """A member joins the group subscribed to the topics: the coordinator assigns it their
    partitions, so share fetches (of any member id) may initialize their state."""
    joined = raw.request(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=0,
                         subscribed_topic_names=topics)
    assert joined.error_code == ErrorCode.none, (joined.error_code, joined.error_message)


def setup_topic(raw: KafkaRaw, name: str, group: str, count: int, partitions: int = 1, **configs: str):
    raw.create_topic(name, partitions)
    join(raw, group, name)
    set_group_configs(raw, group, share_auto_offset_reset="earliest", **configs)
    for p in range(partitions):
        if count:
            raw.produce_ok(name, p, make_batch([b"%d-%d" % (p, i) for i in range(count)]))
    return topic_id(raw, name)


def test_members_get_distinct_records_and_accepted_ones_are_never_redelivered(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-distinct", "g1", 0)
        for i in range(10):
            raw.produce_ok("sf-distinct", 0, make_batch([b"v%d" % i]))
        a = acquired(share_fetch(raw, "g1", "member-a", 0, tid, max_records=4))
        b = acquired(share_fetch(raw, "g1", "member-b", 0, tid, max_records=4))
        assert [o for o, _, _ in a] == [0, 1, 2, 3] and [o for o, _, _ in b] == [4, 5, 6, 7]
        assert all(c == 1 for _, c, _ in a + b) and a[0][2] == b"v0"
        # a acknowledges on its next fetch and gets the rest
        c = acquired(share_fetch(raw, "g1", "member-a", 1, acks={0: [(0, 3, [ACCEPT])]}, tid=tid))
        assert [o for o, _, _ in c] == [8, 9]
        # an empty incremental fetch (librdkafka's) still fetches the session's partitions
        raw.produce_ok("sf-distinct", 0, make_batch([b"v10"]))
        d = acquired(share_fetch(raw, "g1", "member-b", 1))
        assert [o for o, _, _ in d] == [10]
        # a waiting share fetch is woken by an append, not by its max wait
        import threading

        def produce_later():
            time.sleep(0.5)
            with KafkaRaw.connect(share_broker.bootstrap_servers) as other:
                other.produce_ok("sf-distinct", 0, make_batch([b"v11"]))

        producer = threading.Thread(target=produce_later)
        started = time.monotonic()
        producer.start()
        e = acquired(share_fetch(raw, "g1", "member-b", 2, max_wait_ms=20_000))
        producer.join()
        assert [o for o, _, _ in e] == [11] and time.monotonic() - started < 15


def test_release_redelivers_with_a_higher_count_and_reject_archives(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-release", "g2", 4)
        first = acquired(share_fetch(raw, "g2", "m", 0, tid))
        assert [(o, c) for o, c, _ in first] == [(0, 1), (1, 1), (2, 1), (3, 1)]
        response = share_ack(raw, "g2", "m", 1, tid, {0: [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 3, [REJECT])]})
        assert response.error_code == ErrorCode.none
        assert response.responses[0].partitions[0].error_code == ErrorCode.none
        again = acquired(share_fetch(raw, "g2", "m", 2))
        assert [(o, c) for o, c, _ in again] == [(1, 2)]
        # a record not acquired by this member: INVALID_RECORD_STATE, and nothing changes
        bad = share_ack(raw, "g2", "other", 0, tid, {0: [(1, 1, [ACCEPT])]})
        assert bad.error_code == ErrorCode.invalid_share_session_epoch  # epoch 0 on ShareAcknowledge
        share_fetch(raw, "g2", "other", 0, tid, max_records=0)
        bad = share_ack(raw, "g2", "other", 1, tid, {0: [(1, 1, [ACCEPT])]})
        assert bad.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        fetched = share_fetch(raw, "g2", "m", 3, acks={0: [(1, 1, [ACCEPT])]}, tid=tid)
        assert fetched.responses[0].partitions[0].acknowledge_error_code == 0
        assert acquired(fetched) == []


def test_expired_locks_make_records_available_until_the_delivery_limit(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-expiry", "g3", 1, share_record_lock_duration_ms="1000",
                          share_delivery_count_limit="2")
        response = share_fetch(raw, "g3", "m", 0, tid)
        assert response.acquisition_lock_timeout.total_seconds() == 1.0
        assert [(o, c) for o, c, _ in acquired(response)] == [(0, 1)]
        # never acknowledged: the lock expires, a waiting fetch is woken by it
        started = time.monotonic()
        again = acquired(share_fetch(raw, "g3", "m2", 0, tid, max_wait_ms=10_000))
        assert [(o, c) for o, c, _ in again] == [(0, 2)]
        assert time.monotonic() - started < 9, "the expiry woke the fetch, not its max wait"
        # the second lock expires too: the delivery limit (2) archives the record
        time.sleep(1.5)
        assert acquired(share_fetch(raw, "g3", "m3", 0, tid, max_wait_ms=1500)) == []


def test_read_committed_skips_aborted_records_and_control_records(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-txn", "g4", 0, share_isolation_level="read_committed")
        raw.produce_ok("sf-txn", 0, make_batch([b"plain-0"]))
        init = raw.init_producer_id(transactional_id="sf-tx", transaction_timeout_ms=60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        added = raw.request(24, 3, v3_and_below_transactional_id="sf-tx", v3_and_below_producer_id=pid,
                            v3_and_below_producer_epoch=epoch,
                            v3_and_below_topics=[dict(name="sf-txn", partitions=[0])])
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        raw.produce_ok("sf-txn", 0, make_batch([b"aborted-0", b"aborted-1"], producer_id=pid, producer_epoch=epoch,
                                                base_sequence=0, transactional=True), transactional_id="sf-tx")
        # open transaction: nothing at or past the LSO
        assert [v for _, _, v in acquired(share_fetch(raw, "g4", "m", 0, tid))] == [b"plain-0"]
        end = raw.request(26, 3, transactional_id="sf-tx", producer_id=pid, producer_epoch=epoch, committed=False)
        assert end.error_code == ErrorCode.none
        raw.produce_ok("sf-txn", 0, make_batch([b"plain-1"]))
        got = acquired(share_fetch(raw, "g4", "m", 1, tid))
        assert [v for _, _, v in got] == [b"plain-1"], "aborted and control records are never acquired"


def test_session_epochs_are_checked_as_kafka_checks_them(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-session", "g5", 1)
        assert share_fetch(raw, "g5", "m", 3, tid).error_code == ErrorCode.share_session_not_found
        assert share_fetch(raw, "g5", "m", -1).error_code == ErrorCode.share_session_not_found
        bad = share_fetch(raw, "g5", "m", 0, tid, acks={0: [(0, 0, [ACCEPT])]})
        assert bad.error_code == ErrorCode.invalid_request, "acknowledgements on epoch 0"
        assert acquired(share_fetch(raw, "g5", "m", 0, tid))
        assert share_fetch(raw, "g5", "m", 5, tid).error_code == ErrorCode.invalid_share_session_epoch
        assert share_fetch(raw, "g5", "m", 1, tid).error_code == ErrorCode.none
        closed = share_fetch(raw, "g5", "m", -1, acks={0: [(0, 0, [ACCEPT])]}, tid=tid, partitions=())
        assert closed.error_code == ErrorCode.none
        assert closed.responses[0].partitions[0].acknowledge_error_code == 0
        assert acquired(closed) == [], "nothing is fetched on the final epoch"
        assert share_fetch(raw, "g5", "m", 2).error_code == ErrorCode.share_session_not_found
        unknown = share_fetch(raw, "g5", "n", 0, uuid.uuid4())
        assert unknown.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id


def test_share_session_limit(broker_factory, tmp_path: Path):
    config = tmp_path / "limit.properties"
    config.write_text("group.share.max.share.sessions=1\ngroup.share.max.size=1\n")  # sessions >= max size
    broker = broker_factory(config_file=config)
    with KafkaRaw.connect(broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-limit", "g6", 1)
        assert share_fetch(raw, "g6", "a", 0, tid).error_code == ErrorCode.none
        assert share_fetch(raw, "g6", "a", 0, tid).error_code == ErrorCode.none, "replacing needs no room"
        assert share_fetch(raw, "g6", "b", 0, tid).error_code == ErrorCode.share_session_limit_reached


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_kill_9_mid_acknowledgement_loses_nothing_and_redelivers_no_accepted_record(broker_factory, tmp_path,
                                                                                    flush):
    config = tmp_path / "kill.properties"
    config.write_text(CONFIG)
    share_broker = broker_factory(config_file=config, flush=flush)
    total = 300
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-crash", "g7", 0)
        for start in range(0, total, 50):
            raw.produce_ok("sf-crash", 0, make_batch([b"r%d" % i for i in range(start, start + 50)]))
        accepted: set[int] = set()
        epoch = 0
        got = acquired(share_fetch(raw, "g7", "m", epoch, tid, max_records=100))
        epoch = 1
        # accept a record at a time, answered each; then send more acks without reading the answers
        for o, _, _ in got[:60]:
            assert share_ack(raw, "g7", "m", epoch, tid, {0: [(o, o, [ACCEPT])]}).error_code == ErrorCode.none
            accepted.add(o)
            epoch += 1
        unanswered = {o for o, _, _ in got[60:80]}  # accepted or not: the kill decides
        for o, _, _ in got[60:80]:
            raw.send(SHARE_ACKNOWLEDGE, 1, None, group_id="g7", member_id="m", share_session_epoch=epoch,
                     topics=[dict(topic_id=tid, partitions=[dict(partition_index=0, acknowledgement_batches=[
                         dict(first_offset=o, last_offset=o, acknowledge_types=[ACCEPT])])])])
            epoch += 1
    share_broker.kill()
    share_broker.restart()
    seen: dict[int, int] = {}
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        epoch = 0
        deadline = time.monotonic() + 60
        required = set(range(total)) - accepted - unanswered
        got = [None]
        while (got or not required <= set(seen)) and time.monotonic() < deadline:
            got = acquired(share_fetch(raw, "g7", "after", epoch, tid, max_wait_ms=500))
            epoch += 1
            if got:
                assert share_ack(raw, "g7", "after", epoch, tid, {0: [(o, o, [ACCEPT]) for o, _, _ in got]}
                                 ).error_code == ErrorCode.none
                epoch += 1
            for o, _, _ in got:
                seen[o] = seen.get(o, 0) + 1
    assert not accepted & set(seen), "an accepted record was delivered again"
    assert required <= set(seen), "a record never accepted was lost"
    assert set(seen) <= required | unanswered
    assert all(n == 1 for n in seen.values())


def test_share_offsets_describe_alter_and_delete(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-offsets", "g8", 10)

        def describe(version=1):
            response = raw.request(90, version, groups=[dict(group_id="g8", topics=[
                dict(topic_name="sf-offsets", partitions=[0]), dict(topic_name="sf-nothing", partitions=[0])])])
            group = response.groups[0]
            assert group.error_code == ErrorCode.none
            assert group.topics[1].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
            row = group.topics[0].partitions[0]
            assert row.error_code == ErrorCode.none and group.topics[0].topic_id == tid
            return row.start_offset, getattr(row, "lag", None)

        assert describe() == (-1, -1), "no share state yet"
        got = acquired(share_fetch(raw, "g8", "m", 0, tid, max_records=4, version=2, acquire_mode=RECORD_LIMIT))
        assert [o for o, _, _ in got] == [0, 1, 2, 3]
        assert share_ack(raw, "g8", "m", 1, tid, {0: [(0, 1, [ACCEPT]), (3, 3, [ACCEPT])]}).error_code == 0
        assert describe() == (2, 7), "SPSO moved over 0-1; 3 is done, so 2 and 4-9 are the lag"
        assert describe(0)[0] == 2

        alter = dict(group_id="g8", topics=[dict(topic_name="sf-offsets", partitions=[
            dict(partition_index=0, start_offset=8)])])
        joined = raw.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g8", member_id="m", member_epoch=0,
                             subscribed_topic_names=("sf-offsets",))
        assert joined.error_code == ErrorCode.none
        assert raw.request(91, 0, **alter).error_code == ErrorCode.non_empty_group
        assert raw.request(92, 0, group_id="g8", topics=[dict(topic_name="sf-offsets")]
                           ).error_code == ErrorCode.non_empty_group
        closed = share_fetch(raw, "g8", "m", -1)
        assert closed.error_code == ErrorCode.none
        for member in ("m", "keeper"):
            left = raw.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g8", member_id=member, member_epoch=-1)
            assert left.error_code == ErrorCode.none
        altered = raw.request(91, 0, **alter)
        assert altered.error_code == ErrorCode.none
        assert altered.responses[0].partitions[0].error_code == ErrorCode.none
        assert describe() == (8, 2)
        got = acquired(share_fetch(raw, "g8", "m", 0, tid))
        assert [o for o, _, _ in got] == [8, 9]
        share_fetch(raw, "g8", "m", -1)
        deleted = raw.request(92, 0, group_id="g8", topics=[dict(topic_name="sf-offsets")])
        assert deleted.error_code == ErrorCode.none and deleted.responses[0].error_code == ErrorCode.none
        assert describe() == (-1, -1)
        # no state, no member: nothing may create it
        refused = share_fetch(raw, "g8", "m", 0, tid)
        assert refused.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        assert describe() == (-1, -1)
        share_fetch(raw, "g8", "m", -1)
        join(raw, "g8", "sf-offsets", member="keeper-2")
        # auto offset reset again: earliest (one record asked, its batch acquired whole)
        assert [o for o, _, _ in acquired(share_fetch(raw, "g8", "m", 0, tid, max_records=1))] == list(range(10))


def test_a_fetch_creates_share_state_only_for_partitions_the_coordinator_assigns(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-bound", "g-bound", 3)
        raw.create_topic("sf-other", 1)
        join(raw, "g-other", "sf-other")  # a group that exists, subscribed to another topic

        def start_offset(group: str) -> int:
            response = raw.request(90, 1, groups=[dict(group_id=group, topics=[
                dict(topic_name="sf-bound", partitions=[0])])])
            return response.groups[0].topics[0].partitions[0].start_offset

        # group ids no member ever joined, and a group whose members are assigned other topics
        for group in [f"hostile-{i}" for i in range(20)] + ["g-other"]:
            refused = share_fetch(raw, group, "m", 0, tid)
            assert refused.error_code == ErrorCode.none
            partition = refused.responses[0].partitions[0]
            assert partition.error_code == ErrorCode.unknown_topic_or_partition and not partition.acquired_records
            assert start_offset(group) == -1, "no share-partition state was written"
            share_fetch(raw, group, "m", -1)
        # the assigned partition gets state on its first fetch, from any member of the session
        assert len(acquired(share_fetch(raw, "g-bound", "m", 0, tid))) == 3
        assert start_offset("g-bound") == 0


def test_rejected_and_exhausted_records_go_to_the_dead_letter_topics(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        # RocketMQ's options: rmq_dlq.<group> with the origin headers (rmqk dlq reads them)
        tid = setup_topic(raw, "sf-dlq", "g9", 0, rmq_max_reconsume_times="1")  # 2 deliveries
        raw.produce_ok("sf-dlq", 0, make_batch([b"poison", b"exhausted"], keys=[b"k0", b"k1"],
                                               headers=[[("h", b"1")], []]))
        assert [o for o, _, _ in acquired(share_fetch(raw, "g9", "m", 0, tid))] == [0, 1]
        response = share_ack(raw, "g9", "m", 1, tid, {0: [(0, 1, [REJECT, RELEASE])]})
        assert response.responses[0].partitions[0].error_code == ErrorCode.none
        assert [(o, c) for o, c, _ in acquired(share_fetch(raw, "g9", "m", 2))] == [(1, 2)]
        assert share_ack(raw, "g9", "m", 3, tid, {0: [(1, 1, [RELEASE])]}).error_code == ErrorCode.none
        dead = raw.fetch_all("rmq_dlq.g9", 0)
        assert [(r.key, r.value) for r in dead] == [(b"k0", b"poison"), (b"k1", b"exhausted")]
        headers = [dict(r.headers) for r in dead]
        assert headers[0]["ORIGIN_TOPIC"] == b"sf-dlq" and headers[0]["ORIGIN_PARTITION"] == b"0"
        assert headers[0]["ORIGIN_OFFSET"] == b"0" and headers[1]["ORIGIN_OFFSET"] == b"1"
        assert headers[0]["h"] == b"1"
        assert headers[0]["DLQ_REASON"] == b"rejected" and headers[1]["DLQ_REASON"] == b"exhausted"
        assert headers[0]["RECONSUME_TIMES"] == b"0" and headers[1]["RECONSUME_TIMES"] == b"1"
        assert acquired(share_fetch(raw, "g9", "m", 4)) == [], "both are archived"

        # KIP-1191: errors.deadletterqueue.topic.name, headers only unless the copy is enabled
        raw.create_topic("sf-kip-dlq", 1)
        tid2 = setup_topic(raw, "sf-dlq2", "g10", 1, errors_deadletterqueue_topic_name="sf-kip-dlq")
        assert [o for o, _, _ in acquired(share_fetch(raw, "g10", "m", 0, tid2))] == [0]
        assert share_ack(raw, "g10", "m", 1, tid2, {0: [(0, 0, [REJECT])]}).error_code == ErrorCode.none
        (letter,) = raw.fetch_all("sf-kip-dlq", 0)
        h = dict(letter.headers)
        assert (letter.key, letter.value) == (None, None)
        assert h["__dlq.errors.topic"] == b"sf-dlq2" and h["__dlq.errors.partition"] == b"0"
        assert h["__dlq.errors.offset"] == b"0" and h["__dlq.errors.group"] == b"g10"
        assert h["__dlq.errors.delivery.count"] == b"1" and h["__dlq.errors.message"]


def test_two_members_drain_more_records_than_the_window_holds(share_broker):
    total = 2600  # more than the in-flight window (share.partition.max.record.locks, 2000)
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-window", "g11", 0)
        for start in range(0, total, 100):
            raw.produce_ok("sf-window", 0, make_batch([b"x%04d" % i for i in range(start, start + 100)]))
        epochs = {"a": 0, "b": 0}
        held: dict[str, list[int]] = {"a": [], "b": []}
        seen: list[int] = []
        deadline = time.monotonic() + 60
        while len(seen) < total and time.monotonic() < deadline:
            for m in ("a", "b"):
                acks = {0: [(o, o, [ACCEPT]) for o in held[m]]} if held[m] else None
                got = acquired(share_fetch(raw, "g11", m, epochs[m], tid, acks=acks, max_records=500,
                                           max_wait_ms=200))
                epochs[m] += 1
                assert len(got) <= 500
                held[m] = [o for o, _, v in got]
                assert all(v == b"x%04d" % o for o, _, v in got)
                seen += held[m]
        assert sorted(seen) == list(range(total)), "every record once, to one member"


def test_share_metrics_count_acquisitions_acks_and_redeliveries(broker_factory, tmp_path: Path):
    import urllib.request

    broker = broker_factory(args=["--metrics-port", "0"])
    with KafkaRaw.connect(broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-metrics", "g12", 3)
        assert len(acquired(share_fetch(raw, "g12", "m", 0, tid))) == 3
        share_ack(raw, "g12", "m", 1, tid, {0: [(0, 2, [ACCEPT, RELEASE, REJECT])]})
        assert [(o, c) for o, c, _ in acquired(share_fetch(raw, "g12", "m", 2))] == [(1, 2)]
    text = urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10).read().decode()
    lines = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
             if line.startswith("rmqk_share_")}
    assert lines["rmqk_share_acquired_records_total"] == 4
    assert lines["rmqk_share_redelivered_records_total"] == 1
    assert lines['rmqk_share_acknowledged_records_total{type="accept"}'] == 1
    assert lines['rmqk_share_acknowledged_records_total{type="release"}'] == 1
    assert lines['rmqk_share_acknowledged_records_total{type="reject"}'] == 1
    assert lines["rmqk_share_dead_letters_total"] == 1
    assert lines["rmqk_share_sessions"] == 1


@pytest.mark.parametrize("kind, expression", [("tags", "A || B"), ("sql", "color = 'red'")])
def test_a_share_group_on_a_view_gets_only_matching_records(share_broker, kind, expression):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        source, view = f"sf-src-{kind}", f"sf-view-{kind}"
        raw.create_topic(source, 1)
        raw.create_topic(view, -1, {"rmq.view.source": source, f"rmq.view.{kind}": expression})
        set_group_configs(raw, "g13", share_auto_offset_reset="earliest")
        join(raw, "g13", view)
        wanted = []
        for batch in range(4):
            values, headers = [], []
            for i in range(10):
                n = batch * 10 + i
                match = n % 3 == 0
                values.append(b"%d" % n)
                headers.append([("TAGS", b"A" if match else b"C"), ("color", b"red" if match else b"blue")])
                if match:
                    wanted.append(n)
            raw.produce_ok(source, 0, make_batch(values, headers=headers))
        raw.produce_ok(source, 0, make_batch([b"x"] * 30, headers=[[("TAGS", b"C"), ("color", b"blue")]] * 30))
        tid = topic_id(raw, view)
        got = acquired(share_fetch(raw, "g13", "m", 0, tid))
        assert [int(v) for _, _, v in got] == wanted and [o for o, _, _ in got] == wanted
        assert share_ack(raw, "g13", "m", 1, tid, {0: [(o, o, [ACCEPT]) for o, _, _ in got]}).error_code == 0
        assert acquired(share_fetch(raw, "g13", "m", 2)) == []
        row = raw.request(90, 1, groups=[dict(group_id="g13", topics=[dict(topic_name=view, partitions=[0])])]
                          ).groups[0].topics[0].partitions[0]
        assert (row.start_offset, row.lag) == (70, 0), "the records the view leaves out are never in flight"
        raw.produce_ok(source, 0, make_batch([b"late"], headers=[[("TAGS", b"B"), ("color", b"red")]]))
        assert [v for _, _, v in acquired(share_fetch(raw, "g13", "m", 3, max_wait_ms=5000))] == [b"late"]


def test_rocketmq_backoff_holds_a_released_record_back_without_holding_the_partition(broker_factory, tmp_path):
    config = tmp_path / "backoff.properties"
    config.write_text("messageDelayLevel=1s 1s 2s 1h\n")  # level 3 (the first retry): 2 s
    broker = broker_factory(config_file=config)
    with KafkaRaw.connect(broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-backoff", "g14", 1, rmq_redelivery_backoff="levels")
        assert [o for o, _, _ in acquired(share_fetch(raw, "g14", "m", 0, tid))] == [0]
        released_at = time.monotonic()
        assert share_ack(raw, "g14", "m", 1, tid, {0: [(0, 0, [RELEASE])]}).error_code == ErrorCode.none
        raw.produce_ok("sf-backoff", 0, make_batch([b"later-1", b"later-2"]))
        got = acquired(share_fetch(raw, "g14", "m", 2))
        assert [o for o, _, _ in got] == [1, 2], "later records flow while the released one waits"
        share_ack(raw, "g14", "m", 3, tid, {0: [(1, 2, [ACCEPT])]})
        again = acquired(share_fetch(raw, "g14", "m", 4, max_wait_ms=20_000))
        assert [(o, c) for o, c, _ in again] == [(0, 2)]
        waited = time.monotonic() - released_at
        assert 1.9 <= waited < 15, f"redelivered after {waited:.2f} s, RocketMQ's first retry delay is 2 s"


def test_version_2_requests_and_renew_acknowledgements(share_broker):
    """KIP-1222 as Kafka 4.2+ answers it: RENEW (type 4, v2) restarts the lock of a record the
    member holds, so it outlives its first lock; a renew-ack ShareFetch acknowledges only;
    ``share.renew.acknowledge.enable=false`` makes a renewal INVALID_RECORD_STATE; in v1 the
    type does not exist (INVALID_REQUEST)."""
    renew = 4
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-v2", "g15", 3, share_record_lock_duration_ms="2000")
        got = acquired(share_fetch(raw, "g15", "m", 0, tid, version=2, max_records=2, acquire_mode=RECORD_LIMIT))
        assert [o for o, _, _ in got] == [0, 1]
        acquired_at = time.monotonic()
        old = share_ack(raw, "g15", "m", 1, tid, {0: [(0, 0, [renew])]}, version=1)
        assert old.responses[0].partitions[0].error_code == ErrorCode.invalid_request
        epoch = 2
        while time.monotonic() - acquired_at < 3.5:  # renewed every 0.5 s, past the 2 s lock
            renewed = share_ack(raw, "g15", "m", epoch, tid, {0: [(0, 0, [renew])]}, version=2, renew_ack=True)
            assert renewed.acquisition_lock_timeout.total_seconds() == 2
            assert renewed.responses[0].partitions[0].error_code == ErrorCode.none
            epoch += 1
            time.sleep(0.5)
        # offset 1 was not renewed: its lock expired and another member gets it
        other = acquired(share_fetch(raw, "g15", "other", 0, tid, version=2, max_records=1, max_wait_ms=5000,
                                     acquire_mode=RECORD_LIMIT))
        assert [(o, c) for o, c, _ in other] == [(1, 2)]
        accepted = share_ack(raw, "g15", "m", epoch, tid, {0: [(0, 0, [ACCEPT])]}, version=2)
        assert accepted.responses[0].partitions[0].error_code == ErrorCode.none, "0 was still m's"
        epoch += 1
        assert [o for o, _, _ in acquired(share_fetch(raw, "g15", "m", epoch, version=2))] == [2]
        epoch += 1
        renew_fetch = dict(group_id="g15", member_id="m", share_session_epoch=epoch, max_wait=0, min_bytes=0,
                           max_bytes=0, max_records=0, batch_size=0, is_renew_ack=True, forgotten_topics_data=[],
                           topics=[dict(topic_id=tid, partitions=[dict(partition_index=0, acknowledgement_batches=[
                               dict(first_offset=2, last_offset=2, acknowledge_types=[renew])])])])
        bad = raw.request(SHARE_FETCH, 2, **dict(renew_fetch, max_records=10))
        assert bad.error_code == ErrorCode.invalid_request, "a renew fetch fetches nothing"
        ok = raw.request(SHARE_FETCH, 2, **renew_fetch)
        assert ok.error_code == ErrorCode.none
        assert ok.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
        assert not ok.responses[0].partitions[0].acquired_records
        set_group_configs(raw, "g15", share_renew_acknowledge_enable="false")
        refused = share_ack(raw, "g15", "m", epoch + 1, tid, {0: [(2, 2, [renew])]}, version=2, renew_ack=True)
        assert refused.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state


def test_renew_in_a_v1_request_or_without_is_renew_ack_is_the_partitions_invalid_request(share_broker):
    """What Kafka (KafkaApis.validateAcknowledgementBatches, KIP-1222) answers for type 4 where
    it does not exist: in a v1 ShareAcknowledge or ShareFetch, or a v2 one without IsRenewAck,
    the partition's error (ShareFetch: its AcknowledgeErrorCode) is INVALID_REQUEST, none of
    that partition's acknowledgements apply (an ACCEPT beside it neither), the request's
    top-level code is NONE, its other partitions are acknowledged, and a ShareFetch still
    fetches the partition."""
    renew = 4
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-renew-v1", "g17", 3, partitions=2)
        got = acquired(share_fetch(raw, "g17", "m", 0, tid, partitions=(0, 1), max_records=10))
        assert sorted(o for o, _, _ in got) == [0, 0, 1, 1, 2, 2]
        epoch = 1
        for version, flag in ((1, False), (2, False)):
            answer = share_ack(raw, "g17", "m", epoch, tid, {0: [(0, 0, [ACCEPT]), (1, 1, [renew])],
                                                             1: [(epoch - 1, epoch - 1, [ACCEPT])]},
                               version=version, renew_ack=flag)
            epoch += 1
            assert (answer.error_code, answer.error_message) == (ErrorCode.none, None), version
            codes = {p.partition_index: p.error_code for p in answer.responses[0].partitions}
            assert codes == {0: ErrorCode.invalid_request, 1: ErrorCode.none}, (version, codes)
        # nothing of partition 0 was applied: its offset 0 is still m's to accept (once)
        ok = share_ack(raw, "g17", "m", epoch, tid, {0: [(0, 0, [ACCEPT])]}, version=2, renew_ack=True)
        assert ok.responses[0].partitions[0].error_code == ErrorCode.none
        again = share_ack(raw, "g17", "m", epoch + 1, tid, {0: [(0, 0, [ACCEPT])]})
        assert again.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        epoch += 2
        # a v1 ShareFetch: the acknowledgement refused, the fetch done
        raw.produce_ok("sf-renew-v1", 0, make_batch([b"0-3"]))
        fetched = share_fetch(raw, "g17", "m", epoch, tid, acks={0: [(1, 1, [renew])]}, max_records=10)
        assert (fetched.error_code, fetched.error_message) == (ErrorCode.none, None)
        (p0,) = [p for p in fetched.responses[0].partitions if p.partition_index == 0]
        assert (p0.error_code, p0.acknowledge_error_code) == (ErrorCode.none, ErrorCode.invalid_request)
        assert [(r.first_offset, r.last_offset) for r in p0.acquired_records] == [(3, 3)]
        # and the same request as v2 with IsRenewAck renews offset 1
        renewed = share_ack(raw, "g17", "m", epoch + 1, tid, {0: [(1, 1, [renew])]}, version=2, renew_ack=True)
        assert renewed.responses[0].partitions[0].error_code == ErrorCode.none


def test_authorization_read_on_the_group_and_on_each_topic_or_view_source(broker_factory, tmp_path: Path):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    config = tmp_path / "acl.properties"
    config.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_admin="admin-secret" user_alice="alice-secret";\n'
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n")
    broker = broker_factory(config_file=config)
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        admin.sasl_plain("admin", "admin-secret")
        admin.create_topic("open-s", 1)
        admin.create_topic("secret-s", 1)
        admin.create_topic("open-view", -1, {"rmq.view.source": "secret-s", "rmq.view.tags": "*"})
        ids = {t.name: t.topic_id for t in admin.metadata(["open-s", "secret-s", "open-view"], version=12).topics}
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
    grants = [AclBinding(kind, "open" if kind == ResourceType.TOPIC else "team", ResourcePatternType.PREFIXED,
                         "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
              for kind in (ResourceType.TOPIC, ResourceType.GROUP)]
    for future in client.create_acls(grants).values():
        future.result(10)
    with KafkaRaw.connect(broker.bootstrap_servers) as alice:
        alice.sasl_plain("alice", "alice-secret")
        refused = share_fetch(alice, "other", "m", 0, ids["open-s"])
        assert refused.error_code == ErrorCode.group_authorization_failed
        join(alice, "team1", "open-s")
        response = alice.request(SHARE_FETCH, 1, group_id="team1", member_id="m", share_session_epoch=0, max_wait=0,
                                 min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10,
                                 topics=[dict(topic_id=ids[name], partitions=[dict(partition_index=0,
                                                                                   acknowledgement_batches=[])])
                                         for name in ("open-s", "secret-s", "open-view")],
                                 forgotten_topics_data=[])
        codes = {t.topic_id: t.partitions[0].error_code for t in response.responses}
        assert codes == {ids["open-s"]: ErrorCode.none, ids["secret-s"]: ErrorCode.topic_authorization_failed,
                         ids["open-view"]: ErrorCode.topic_authorization_failed}
        acked = share_ack(alice, "other", "m", 1, ids["open-s"], {0: [(0, 0, [ACCEPT])]})
        assert acked.error_code == ErrorCode.group_authorization_failed


def test_the_group_config_bounds_the_in_flight_window(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-locks", "g16", 300, share_partition_max_record_locks="100")
        strict = dict(version=2, acquire_mode=RECORD_LIMIT)
        assert len(acquired(share_fetch(raw, "g16", "a", 0, tid, **strict))) == 100
        assert acquired(share_fetch(raw, "g16", "b", 0, tid, **strict)) == [], "the window is full"
        share_ack(raw, "g16", "a", 1, tid, {0: [(0, 49, [ACCEPT])]})
        assert [o for o, _, _ in acquired(share_fetch(raw, "g16", "b", 1, **strict))] == list(range(100, 150))


def test_max_records_is_soft_unless_the_fetch_asks_for_the_record_limit(share_broker):
    """Kafka's batch-optimized acquisition (every v1 fetch, v2's default mode): the batch
    holding the last record counted is acquired to its end, even past the window's bound, and
    goes out as one range; v2's record_limit counts exactly."""
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-soft", "g22", 300, share_partition_max_record_locks="100")
        raw.produce_ok("sf-soft", 0, make_batch([b"next-%d" % i for i in range(10)]))
        join(raw, "g23", "sf-soft")
        set_group_configs(raw, "g23", share_auto_offset_reset="earliest", share_partition_max_record_locks="100")
        whole = share_fetch(raw, "g22", "a", 0, tid, max_records=4)
        assert [(r.first_offset, r.last_offset) for r in whole.responses[0].partitions[0].acquired_records] == \
            [(0, 299)], "one range, the whole first batch, past the window's 100"
        assert len(acquired(whole)) == 300
        assert acquired(share_fetch(raw, "g22", "b", 0, tid)) == [], "the window is full"
        v2 = acquired(share_fetch(raw, "g23", "a", 0, tid, max_records=4, version=2, acquire_mode=BATCH_OPTIMIZED))
        assert len(v2) == 300
        exact = acquired(share_fetch(raw, "g23", "b", 0, tid, max_records=4, version=2, acquire_mode=RECORD_LIMIT))
        assert [o for o, _, _ in exact] == [], "the window (100) is full: nothing new"
        share_ack(raw, "g23", "a", 1, tid, {0: [(0, 299, [ACCEPT])]})
        exact = acquired(share_fetch(raw, "g23", "b", 1, max_records=4, version=2, acquire_mode=RECORD_LIMIT))
        assert [o for o, _, _ in exact] == [300, 301, 302, 303]


def test_a_member_may_acknowledge_each_record_of_a_whole_batch_alone(share_broker):
    """A batch-optimized fetch can hand one member more than 10,000 records (a full window
    and the rest of the batch it began): one single-offset batch per record, types mixed, is
    a valid acknowledgement of them all."""
    count = 12_000
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-many-acks", "g24", count, share_partition_max_record_locks="2000")
        got = acquired(share_fetch(raw, "g24", "a", 0, tid))
        assert len(got) == count
        acks = [(o, o, [ACCEPT if o % 2 else REJECT]) for o in range(count)]
        response = share_ack(raw, "g24", "a", 1, tid, {0: acks})
        assert response.responses[0].partitions[0].error_code == ErrorCode.none, \
            response.responses[0].partitions[0].error_message
        raw.produce_ok("sf-many-acks", 0, make_batch([b"after"]))
        assert [o for o, _, _ in acquired(share_fetch(raw, "g24", "a", 2))] == [count], "all of them done"


def test_auto_offset_reset_latest_and_by_duration(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        raw.create_topic("sf-reset", 1)
        now = int(time.time() * 1000)
        raw.produce_ok("sf-reset", 0, make_batch([b"old-0", b"old-1"], timestamps=[now - 7_200_000] * 2))
        raw.produce_ok("sf-reset", 0, make_batch([b"recent"], timestamps=[now - 60_000]))
        tid = topic_id(raw, "sf-reset")
        join(raw, "g17", "sf-reset")
        join(raw, "g18", "sf-reset")
        # latest (the default): the share-partition starts at the end of the log
        assert acquired(share_fetch(raw, "g17", "m", 0, tid)) == []
        raw.produce_ok("sf-reset", 0, make_batch([b"new"]))
        assert [v for _, _, v in acquired(share_fetch(raw, "g17", "m", 1))] == [b"new"]
        # by_duration: from the first record at most that old
        set_group_configs(raw, "g18", share_auto_offset_reset="by_duration:PT1H")
        assert [v for _, _, v in acquired(share_fetch(raw, "g18", "m", 0, tid))] == [b"recent", b"new"]


def test_a_deleted_topic_takes_its_share_state_along(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-deleted", "g19", 3)
        got = acquired(share_fetch(raw, "g19", "m", 0, tid))
        share_ack(raw, "g19", "m", 1, tid, {0: [(0, 2, [ACCEPT])]})
        assert len(got) == 3
        assert raw.request(20, 6, topics=[dict(name="sf-deleted", topic_id=tid)], timeout=10_000
                           ).responses[0].error_code == ErrorCode.none
        raw.create_topic("sf-deleted", 1)
        raw.produce_ok("sf-deleted", 0, make_batch([b"again"]))
        tid2 = topic_id(raw, "sf-deleted")
        assert tid2 != tid
        join(raw, "g19", "sf-deleted", member="keeper-2")  # the coordinator learns the new topic
        assert [(o, v) for o, _, v in acquired(share_fetch(raw, "g19", "m", 0, tid2))] == [(0, b"again")]


def test_max_records_is_shared_fairly_across_partitions(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-fair", "g20", 50, partitions=3)
        seen_partitions = set()
        for epoch in range(3):
            response = share_fetch(raw, "g20", "m", epoch, tid, partitions=(0, 1, 2), max_records=10)
            for topic in response.responses:
                seen_partitions |= {p.partition_index for p in topic.partitions if p.acquired_records}
        assert seen_partitions == {0, 1, 2}, "no partition starves"


def test_a_member_leaving_the_group_releases_its_records_at_once(share_broker):
    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-leave", "g21", 3)
        for member in ("a", "b"):
            joined = raw.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g21", member_id=member, member_epoch=0,
                                 subscribed_topic_names=("sf-leave",))
            assert joined.error_code == ErrorCode.none
        assert len(acquired(share_fetch(raw, "g21", "a", 0, tid))) == 3  # locked for 30 s
        left = raw.request(SHARE_GROUP_HEARTBEAT, 1, group_id="g21", member_id="a", member_epoch=-1)
        assert left.error_code == ErrorCode.none
        assert share_fetch(raw, "g21", "a", 1).error_code == ErrorCode.share_session_not_found
        again = acquired(share_fetch(raw, "g21", "b", 0, tid))
        assert [(o, c) for o, c, _ in again] == [(0, 2), (1, 2), (2, 2)]


def test_min_bytes_holds_the_answer_back_without_locking_records(share_broker):
    import threading

    with KafkaRaw.connect(share_broker.bootstrap_servers) as raw:
        tid = setup_topic(raw, "sf-min-bytes", "g-min", 1)  # one small batch, far below 4000 bytes
        assert len(acquired(share_fetch(raw, "g-min", "a", 0, tid, max_records=0))) == 0  # opens the session
        # MinBytes not met: the fetch waits its MaxWaitMs out, then acquires what there is
        started = time.monotonic()
        late = acquired(share_fetch(raw, "g-min", "a", 1, min_bytes=4000, max_wait_ms=2000))
        assert time.monotonic() - started >= 1.5 and [o for o, _, _ in late] == [0]
        share_ack(raw, "g-min", "a", 2, tid, {0: [(0, 0, [ACCEPT])]})
        raw.produce_ok("sf-min-bytes", 0, make_batch([b"small"]))
        result: dict = {}

        def waiting_fetch():
            with KafkaRaw.connect(share_broker.bootstrap_servers) as other:
                share_fetch(other, "g-min", "b", 0, tid, max_records=0)
                begun = time.monotonic()
                result["got"] = acquired(share_fetch(other, "g-min", "b", 1, min_bytes=4000, max_wait_ms=60_000))
                result["took"] = time.monotonic() - begun

        waiter = threading.Thread(target=waiting_fetch)
        waiter.start()
        time.sleep(1.0)
        # while b waits for MinBytes, the small record is not locked: a can take it
        assert [v for _, _, v in acquired(share_fetch(raw, "g-min", "a", 3))] == [b"small"]
        share_ack(raw, "g-min", "a", 4, tid, {0: [(1, 1, [RELEASE])]})
        assert "got" not in result, "MinBytes is not met by one small record"
        raw.produce_ok("sf-min-bytes", 0, make_batch([b"x" * 5000]))  # now it is
        waiter.join(60)
        assert [(o, v[:1]) for o, _, v in result["got"]] == [(1, b"s"), (2, b"x")]
        assert result["took"] < 45, "answered when MinBytes was met, not at MaxWaitMs"
