"""Incremental fetch sessions (KIP-227) on a real broker process, with raw Fetch frames:
Kafka's session rules, the session bound to its principal, READ re-checked on every partition
of the session at every fetch."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from rawkafka import ErrorCode, KafkaRaw, decode_records, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

FETCH = 1
PARTITIONS = 3


def fetch(conn: KafkaRaw, session_id: int, epoch: int, partitions: dict[tuple[str, int], int], version: int = 12,
          forgotten: dict[str, list[int]] | None = None, max_wait_ms: int = 0, min_bytes: int = 0,
          topic_ids: dict[str, uuid.UUID] | None = None, partition_max_bytes: int = 1 << 20):
    """One Fetch with session metadata; ``partitions`` maps (topic, partition) to its offset."""
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in partitions.items():
        by_topic.setdefault(topic, []).append(dict(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=partition_max_bytes))
    ids = topic_ids or {}
    return conn.request(
        FETCH, version, replica_id=-1, max_wait=max_wait_ms, min_bytes=min_bytes, max_bytes=64 << 20,
        isolation_level=0, session_id=session_id, session_epoch=epoch,
        topics=[dict(topic=t, topic_id=ids.get(t), partitions=ps) for t, ps in by_topic.items()],
        forgotten_topics_data=[dict(topic=t, topic_id=ids.get(t), partitions=ps)
                               for t, ps in (forgotten or {}).items()],
        rack_id="")


def answered(response) -> dict[tuple[str, int], object]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def make_topic(conn: KafkaRaw, topic: str, partitions: int = PARTITIONS) -> None:
    conn.create_topic(topic, partitions)
    for p in range(partitions):
        conn.produce_ok(topic, p, make_batch([b"first"]))


def test_an_initial_fetch_opens_a_session_and_incremental_fetches_answer_only_news(broker):
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        make_topic(conn, "news")
        wanted = {("news", p): 0 for p in range(PARTITIONS)}
        first = fetch(conn, 0, 0, wanted)
        assert first.error_code == ErrorCode.none and first.session_id > 0
        assert set(answered(first)) == set(wanted)
        sid = first.session_id
        # the client moves its positions: listed, nothing new anywhere -> no partitions,
        # after max_wait
        moved = {k: 1 for k in wanted}
        began = time.monotonic()
        quiet = fetch(conn, sid, 1, moved, max_wait_ms=300, min_bytes=1)
        assert time.monotonic() - began >= 0.25
        assert (quiet.error_code, quiet.session_id, answered(quiet)) == (ErrorCode.none, sid, {})
        # a new record on partition 1 only: just that partition, with it (nothing listed)
        conn.produce_ok("news", 1, make_batch([b"second"]))
        news = fetch(conn, sid, 2, {}, max_wait_ms=5000, min_bytes=1)
        assert list(answered(news)) == [("news", 1)]
        entry = answered(news)[("news", 1)]
        assert [r.value for r in decode_records(entry.records)] == [b"second"] and entry.high_watermark == 2
        # the same again: the high watermark is known now, nothing is news
        again = fetch(conn, sid, 3, {("news", 1): 2})
        assert answered(again) == {}


def test_session_errors_wrong_epoch_unknown_id_final_and_forgotten_topics(broker):
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        make_topic(conn, "errs")
        wanted = {("errs", p): 0 for p in range(PARTITIONS)}
        sid = fetch(conn, 0, 0, wanted).session_id
        assert sid > 0
        wrong = fetch(conn, sid, 5, {})
        assert (wrong.error_code, wrong.session_id, wrong.responses) == (
            ErrorCode.invalid_fetch_session_epoch, 0, ())
        unknown = fetch(conn, (sid % (2**31 - 2)) + 1, 1, {})
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found and unknown.responses == ()
        # the wrong epoch did not move the session: epoch 1 still works (the client has
        # read every partition's first record)
        ok = fetch(conn, sid, 1, {k: 1 for k in wanted})
        assert ok.error_code == ErrorCode.none and ok.session_id == sid
        # forgetting partition 0: it is read no more, even with news
        fetch(conn, sid, 2, {}, forgotten={"errs": [0]})
        conn.produce_ok("errs", 0, make_batch([b"news"]))
        conn.produce_ok("errs", 2, make_batch([b"news"]))
        assert list(answered(fetch(conn, sid, 3, {}))) == [("errs", 2)]
        assert answered(fetch(conn, sid, 4, {("errs", 2): 2})) == {}
        # FINAL: a sessionless full answer, and the session is gone
        final = fetch(conn, sid, -1, {("errs", 0): 0})
        assert final.error_code == ErrorCode.none and final.session_id == 0 and list(answered(final)) == [("errs", 0)]
        assert fetch(conn, sid, 5, {}).error_code == ErrorCode.fetch_session_id_not_found


def test_topic_ids_a_session_by_ids_refuses_a_request_by_names_and_a_deleted_topic_is_unknown(broker):
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        make_topic(conn, "ids", 1)
        (topic,) = conn.metadata(["ids"], version=12).topics
        ids = {"ids": topic.topic_id}
        first = fetch(conn, 0, 0, {("ids", 0): 0}, version=13, topic_ids=ids)
        sid = first.session_id
        assert sid > 0 and [t.topic_id for t in first.responses] == [topic.topic_id]
        by_name = fetch(conn, sid, 1, {}, version=12)
        assert by_name.error_code == ErrorCode.fetch_session_topic_id_error and by_name.responses == ()
        assert fetch(conn, sid, 1, {}, version=13).error_code == ErrorCode.none
        conn.request(20, 6, topics=[dict(name="ids", topic_id=topic.topic_id)], timeout=10_000)
        gone = fetch(conn, sid, 2, {}, version=13)
        (t,) = gone.responses
        assert t.topic_id == topic.topic_id and [p.error_code for p in t.partitions] == [ErrorCode.unknown_topic_id]


def test_sessions_can_be_turned_off(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("max.incremental.fetch.session.cache.slots=0\n")
    broker = broker_factory(config_file=config)
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        make_topic(conn, "off", 1)
        first = fetch(conn, 0, 0, {("off", 0): 0})
        assert first.session_id == 0 and list(answered(first)) == [("off", 0)]


JAAS = ('sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";\n')


@pytest.fixture
def secured(broker_factory, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text("listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS +
                      "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                      "super.users=User:admin\n")
    broker = broker_factory(config_file=config)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
    for future in admin.create_topics([NewTopic("open", 1), NewTopic("guarded", 1)]).values():
        future.result(10)
    grants = [AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, user, "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
              for name in ("open", "guarded") for user in ("User:alice", "User:bob")]
    for future in admin.create_acls(grants).values():
        future.result(10)
    return broker, admin


def test_another_principal_cannot_use_a_session(secured):
    broker, _ = secured
    with KafkaRaw.connect(broker.bootstrap_servers) as alice, KafkaRaw.connect(broker.bootstrap_servers) as bob:
        alice.sasl_plain("alice", "alice-secret")
        bob.sasl_plain("bob", "bob-secret")
        sid = fetch(alice, 0, 0, {("open", 0): 0}).session_id
        assert sid > 0
        assert fetch(bob, sid, 1, {}).error_code == ErrorCode.fetch_session_id_not_found
        fetch(bob, sid, 0, {("open", 0): 0})  # bob's full fetch naming it does not close it
        assert fetch(alice, sid, 1, {}).error_code == ErrorCode.none


def test_read_is_checked_on_every_partition_of_the_session_even_when_not_listed(secured):
    broker, admin = secured
    with KafkaRaw.connect(broker.bootstrap_servers) as alice:
        alice.sasl_plain("alice", "alice-secret")
        first = fetch(alice, 0, 0, {("open", 0): 0, ("guarded", 0): 0})
        sid = first.session_id
        assert sid > 0 and {p.error_code for p in answered(first).values()} == {ErrorCode.none}
        assert answered(fetch(alice, sid, 1, {})) == {}  # both topics are empty
        revoke = AclBindingFilter(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL, "User:alice", "*",
                                  AclOperation.READ, AclPermissionType.ALLOW)
        for future in admin.delete_acls([revoke]).values():
            future.result(10)
        denied = answered(fetch(alice, sid, 2, {}))
        assert list(denied) == [("guarded", 0)]
        assert denied[("guarded", 0)].error_code == ErrorCode.topic_authorization_failed


def test_a_throttled_answer_is_kafkas_and_the_session_goes_on(broker):
    """Over its consumer_byte_rate, a full fetch's throttled answer has session id 0 (no
    session is opened), an incremental one's the session's id with no partitions, and the
    session's next epoch is accepted after the mute."""
    topic = "throttled"
    with KafkaRaw.connect(broker.bootstrap_servers) as admin:
        admin.create_topic(topic, 1)
        for _ in range(10):
            admin.produce_ok(topic, 0, make_batch([b"s" * 1000] * 4))
        alter = admin.request(49, 1, entries=[dict(entity=[dict(entity_type="client-id", entity_name="sess-muted")],
                                                  ops=[dict(key="consumer_byte_rate", value=1000.0, remove=False)])],
                              validate_only=False)
        assert [e.error_code for e in alter.entries] == [ErrorCode.none]
    with KafkaRaw.connect(broker.bootstrap_servers, client_id="sess-muted", timeout=30) as conn:
        sid, epoch, offset, throttled = 0, 0, 0, None
        for _ in range(12):
            answer = fetch(conn, sid, epoch, {(topic, 0): offset})
            assert answer.error_code == ErrorCode.none
            if answer.throttle_time.total_seconds() > 0:
                assert answer.responses == ()
                if epoch == 0:
                    assert answer.session_id == 0, "a throttled full fetch opens no session"
                    continue
                throttled = answer
                break
            if epoch == 0:
                sid = answer.session_id
                assert sid > 0
            records = [r for p in answered(answer).values() for r in decode_records(p.records or b"")]
            if records:
                offset = records[-1].offset + 1
            epoch += 1
        assert throttled is not None, "a consumer over its byte rate is never throttled"
        assert throttled.session_id == sid
        after = fetch(conn, sid, epoch + 1, {(topic, 0): offset})  # read once the mute ends
        assert (after.error_code, after.session_id) == (ErrorCode.none, sid)


@pytest.mark.parametrize("version", [12, 13])
def test_a_session_client_gets_the_records_a_sessionless_client_gets(broker, version):
    """Random appends to two topics of 3 partitions; after each round one client fetches in
    a session (listing only partitions whose position moved), another without one. Both end
    with every record once, and the session client learns every high watermark. The session
    fetches one batch a partition (partition_max_bytes 1: KIP-74's first batch), so its
    answers depend on the positions it was told."""
    import random

    rng = random.Random(version)
    keys = [(t, p) for t in ("model-a", "model-b") for p in range(3)]
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        for topic in ("model-a", "model-b"):
            conn.create_topic(topic, 3)
        ids = {t.name: t.topic_id for t in conn.metadata(["model-a", "model-b"], version=12).topics}
        by_id = {v: k for k, v in ids.items()}
        produced: dict = {k: [] for k in keys}
        position = {k: 0 for k in keys}
        listed = dict(position)
        hw = {k: 0 for k in keys}
        got_session: dict = {k: [] for k in keys}
        sid, epoch = 0, 0
        for round_ in range(40):
            for _ in range(rng.randrange(3)):
                key = rng.choice(keys)
                values = [f"{key}-{round_}-{i}".encode() for i in range(rng.randrange(1, 4))]
                conn.produce_ok(key[0], key[1], make_batch(values))
                produced[key].extend(values)
            changed = {k: position[k] for k in keys if epoch == 0 or position[k] != listed[k]}
            answer = fetch(conn, sid, epoch, changed, version=version, topic_ids=ids if version >= 13 else None,
                           partition_max_bytes=1)
            assert answer.error_code == ErrorCode.none
            if epoch == 0:
                sid = answer.session_id
                assert sid > 0
            epoch += 1
            listed.update(changed)
            for t in answer.responses:
                topic = by_id[t.topic_id] if version >= 13 else t.topic
                for p in t.partitions:
                    key = (topic, p.partition_index)
                    assert p.error_code == ErrorCode.none
                    hw[key] = p.high_watermark
                    fresh = [r for r in decode_records(p.records or b"") if r.offset >= position[key]]
                    got_session[key].extend(r.value for r in fresh)
                    if fresh:
                        position[key] = fresh[-1].offset + 1
        for key in keys:  # drain what the last rounds left
            for _ in range(200):
                if position[key] >= len(produced[key]):
                    break
                answer = fetch(conn, sid, epoch, {key: position[key]}, version=version,
                               topic_ids=ids if version >= 13 else None, partition_max_bytes=1)
                epoch += 1
                for t in answer.responses:
                    for p in t.partitions:
                        k = (by_id[t.topic_id] if version >= 13 else t.topic, p.partition_index)
                        hw[k] = p.high_watermark
                        fresh = [r for r in decode_records(p.records or b"") if r.offset >= position[k]]
                        got_session[k].extend(r.value for r in fresh)
                        if fresh:
                            position[k] = fresh[-1].offset + 1
        sessionless = {k: [r.value for r in conn.fetch_all(k[0], k[1])] for k in keys}
        assert got_session == produced == sessionless
        assert hw == {k: len(v) for k, v in produced.items()}


def test_a_partition_kafka_leaves_out_of_the_read_does_not_end_the_wait(broker):
    """Kafka's handleFetchRequest answers an unknown topic (or one the caller may not read) at
    once as an erroneous partition and waits on the others as usual: only errors met reading
    the log end the wait. A consumer whose session holds a deleted topic must not busy-poll."""
    with KafkaRaw.connect(broker.bootstrap_servers) as conn:
        make_topic(conn, "quiet", 1)
        wanted = {("quiet", 0): 1, ("no-such-topic", 0): 0}
        for session_id, epoch in ((0, -1), (0, 0)):
            began = time.monotonic()
            answer = fetch(conn, session_id, epoch, wanted, max_wait_ms=1500, min_bytes=1)
            assert time.monotonic() - began >= 1.2
            parts = answered(answer)
            assert parts[("no-such-topic", 0)].error_code == ErrorCode.unknown_topic_or_partition
            assert parts[("quiet", 0)].error_code == ErrorCode.none
        sid = answer.session_id
        assert sid > 0
        began = time.monotonic()
        incremental = fetch(conn, sid, 1, {}, max_wait_ms=1500, min_bytes=1)
        assert time.monotonic() - began >= 1.2
        assert list(answered(incremental)) == [("no-such-topic", 0)]  # errors are answered every time
        # nothing to wait on at all: answered at once, as Kafka does with no partition to read
        began = time.monotonic()
        alone = fetch(conn, 0, -1, {("no-such-topic", 0): 0}, max_wait_ms=5000, min_bytes=1)
        assert time.monotonic() - began < 4
        assert answered(alone)[("no-such-topic", 0)].error_code == ErrorCode.unknown_topic_or_partition
