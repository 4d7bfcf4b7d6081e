"""confluent-kafka 2.16's ShareConsumer against a broker process: the share-group semantics
issue 23 lists beyond plain delivery (test_share_consumer_delivery.py has that).

- the delivery limit (a record released until archived) and lock expiry after a consumer
  stops polling (a short ``share.record.lock.duration.ms``, the broker's
  ``group.share.min.record.lock.duration.ms`` lowered as confluent's own test cluster does);
- ``share.isolation.level`` with an aborted and a committed transaction;
- ``share.auto.offset.reset`` earliest / latest / by_duration set through the AdminClient
  (ConfigResource of ResourceType.GROUP) and read back with describe_configs;
- share offsets altered and deleted while the group is empty (raw requests 91 / 92: the
  AdminClient has none), the next consumer starting where they say;
- a classic consumer group and a share group reading one topic independently;
- delayed (delay level), timer and RocketMQ half messages: acquirable only once delivered or
  committed;
- one poison record among 100,000 with RocketMQ's options (``rmq.redelivery.backoff=levels``
  with a shortened ``messageDelayLevel``, ``rmq.max.reconsume.times``): every good record
  accepted exactly once, the poison record in ``rmq_dlq.<group>`` with its origin headers;
- broker ``kill -9`` while three consumers acknowledge explicitly, checked record by record.

Every wait is a poll-until loop with a generous deadline (a loaded two-core machine).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from rawkafka import ErrorCode, KafkaRaw, make_batch

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WAIT = 90.0
CONFIG = ("group.share.min.record.lock.duration.ms=1000\n"
          "group.share.heartbeat.interval.ms=1000\n"
          "group.share.min.heartbeat.interval.ms=1000\n")


@pytest.fixture
def broker(broker_factory, tmp_path: Path):
    config = tmp_path / "server.properties"
    config.write_text(CONFIG)
    return broker_factory(config_file=config)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def set_group_configs(bootstrap: str, group: str, **configs: str) -> None:
    """IncrementalAlterConfigs on the GROUP resource through confluent-kafka's AdminClient."""
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    client = admin(bootstrap)  # held until the futures are done: a destroyed client fails them
    for future in client.incremental_alter_configs([resource]).values():
        future.result(30)


def group_configs(bootstrap: str, group: str) -> dict[str, str]:
    client = admin(bootstrap)
    (future,) = client.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return {name: entry.value for name, entry in future.result(30).items()}


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic(topic, partitions)


def produce(bootstrap: str, topic: str, values: list[bytes], headers: list | None = None,
            timestamps: list[int] | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=0, headers=headers[i] if headers else None,
                         timestamp=timestamps[i] if timestamps else 0)
    assert producer.flush(30) == 0


def share_consumer(bootstrap: str, group: str, topic: str, mode: str = "explicit") -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-{uuid.uuid4()}",
                       "share.acknowledgement.mode": mode})
    c.subscribe([topic])
    return c


def records(c: ShareConsumer, timeout: float = 0.5) -> list:
    return [m for m in c.poll(timeout) if m.error() is None]


def read_until(c: ShareConsumer, done, wait: float = WAIT, ack: AcknowledgeType | None = AcknowledgeType.ACCEPT) -> list:
    """Poll (acknowledging each record with ``ack``) until ``done(values so far)``."""
    got: list = []
    deadline = time.monotonic() + wait
    while not done([m.value() for m in got]) and time.monotonic() < deadline:
        batch = records(c)
        for m in batch:
            if ack is not None:
                c.acknowledge(m, ack)
        got += batch
        if batch and ack is not None:
            c.commit_sync()
    return [m.value() for m in got]


def quiet(c: ShareConsumer, seconds: float) -> list:
    """What the consumer gets over ``seconds`` (acknowledged), to show nothing more comes."""
    got = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for m in records(c):
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            got.append(m.value())
    return got


def share_offsets(bootstrap: str, group: str, topic: str) -> tuple[int, int]:
    """(SPSO, lag) of partition 0 by DescribeShareGroupOffsets v1."""
    with KafkaRaw.connect(bootstrap) as raw:
        row = raw.request(90, 1, groups=[dict(group_id=group, topics=[dict(topic_name=topic, partitions=[0])])]
                          ).groups[0].topics[0].partitions[0]
    return row.start_offset, row.lag


def wait_initialized(c: ShareConsumer, bootstrap: str, group: str, topic: str) -> int:
    """Poll the consumer (it fetches only while polled) until the group's share-partition has
    state (its first fetch); its SPSO. Nothing may be delivered meanwhile."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        assert records(c, 0.2) == []
        start, _ = share_offsets(bootstrap, group, topic)
        if start >= 0:
            return start
    raise AssertionError("the share-partition never got state")


# -- delivery limit and lock expiry ----------------------------------------------------------------
def test_a_record_released_every_time_is_archived_at_the_delivery_limit(broker):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "scs-limit")
    produce(bootstrap, "scs-limit", [b"good", b"bad"])
    set_group_configs(bootstrap, "scs-g1", share_auto_offset_reset="earliest", share_delivery_count_limit="3")
    c = share_consumer(bootstrap, "scs-g1", "scs-limit")
    deliveries: list[int] = []
    try:
        deadline = time.monotonic() + WAIT
        while len(deliveries) < 3 and time.monotonic() < deadline:
            batch = records(c)
            for m in batch:
                if m.value() == b"bad":
                    deliveries.append(m.delivery_count())
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch:
                c.commit_sync()
        assert deliveries == [1, 2, 3], "delivered with a rising count up to share.delivery.count.limit"
        assert quiet(c, 5) == [], "archived: never delivered again"
    finally:
        c.close()
    assert share_offsets(bootstrap, "scs-g1", "scs-limit") == (2, 0)


def test_records_come_back_when_the_lock_of_a_consumer_that_stopped_polling_expires(broker):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "scs-lock")
    values = [b"l%d" % i for i in range(5)]
    produce(bootstrap, "scs-lock", values)
    set_group_configs(bootstrap, "scs-g2", share_auto_offset_reset="earliest",
                      share_record_lock_duration_ms="2000")
    stalled = share_consumer(bootstrap, "scs-g2", "scs-lock")
    other = None
    try:
        taken = read_until(stalled, lambda got: len(got) >= 1, ack=None)  # acquired, never acknowledged
        assert taken and set(taken) <= set(values)
        started = time.monotonic()
        other = share_consumer(bootstrap, "scs-g2", "scs-lock")
        got = read_until(other, lambda got: set(taken) <= set(got))
        assert set(taken) <= set(got), "the stalled consumer's records come back"
        assert time.monotonic() - started >= 1.0, "not before the lock expired"
    finally:
        stalled.close()
        if other is not None:
            other.close()


# -- isolation level -----------------------------------------------------------------------------
def test_read_committed_never_delivers_an_aborted_transaction_and_read_uncommitted_does(broker):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "scs-txn")
    set_group_configs(bootstrap, "scs-rc", share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    set_group_configs(bootstrap, "scs-ru", share_auto_offset_reset="earliest",
                      share_isolation_level="read_uncommitted")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "scs-txn-producer"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("scs-txn", b"aborted-%d" % i, partition=0)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("scs-txn", b"committed-%d" % i, partition=0)
    producer.commit_transaction(30)
    committed = {b"committed-%d" % i for i in range(3)}
    aborted = {b"aborted-%d" % i for i in range(3)}
    rc = share_consumer(bootstrap, "scs-rc", "scs-txn")
    ru = share_consumer(bootstrap, "scs-ru", "scs-txn")
    try:
        got_rc = read_until(rc, lambda got: committed <= set(got))
        assert set(got_rc) == committed
        assert quiet(rc, 3) == []
        got_ru = read_until(ru, lambda got: committed | aborted <= set(got))
        assert set(got_ru) == committed | aborted and len(got_ru) == 6, "control records are never delivered"
    finally:
        rc.close()
        ru.close()


# -- share.auto.offset.reset through the AdminClient ---------------------------------------------------
def test_auto_offset_reset_modes_set_through_the_admin_client(broker):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "scs-reset")
    now = int(time.time() * 1000)
    produce(bootstrap, "scs-reset", [b"old", b"recent"], timestamps=[now - 7_200_000, now - 60_000])
    set_group_configs(bootstrap, "scs-early", share_auto_offset_reset="earliest")
    set_group_configs(bootstrap, "scs-dur", share_auto_offset_reset="by_duration:PT1H")
    assert group_configs(bootstrap, "scs-early")["share.auto.offset.reset"] == "earliest"
    assert group_configs(bootstrap, "scs-dur")["share.auto.offset.reset"] == "by_duration:PT1H"
    assert group_configs(bootstrap, "scs-late")["share.auto.offset.reset"] == "latest"  # the default
    early = share_consumer(bootstrap, "scs-early", "scs-reset")
    dur = share_consumer(bootstrap, "scs-dur", "scs-reset")
    late = share_consumer(bootstrap, "scs-late", "scs-reset")
    try:
        assert read_until(early, lambda got: len(got) >= 2) == [b"old", b"recent"]
        assert read_until(dur, lambda got: len(got) >= 1) == [b"recent"], "from the first record at most 1 h old"
        assert wait_initialized(late, bootstrap, "scs-late", "scs-reset") == 2, "latest: the end of the log"
        produce(bootstrap, "scs-reset", [b"new"])
        assert read_until(late, lambda got: len(got) >= 1) == [b"new"]
        assert quiet(dur, 2) == [b"new"]
    finally:
        for c in (early, dur, late):
            c.close()


# -- share offsets altered and deleted while the group is empty ---------------------------------------
def test_altered_and_deleted_share_offsets_are_where_the_next_consumer_starts(broker):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "scs-offsets")
    values = [b"o%d" % i for i in range(10)]
    produce(bootstrap, "scs-offsets", values)
    set_group_configs(bootstrap, "scs-g3", share_auto_offset_reset="earliest")
    c = share_consumer(bootstrap, "scs-g3", "scs-offsets")
    try:
        assert read_until(c, lambda got: len(got) >= 10) == values
    finally:
        c.close()
    alter = dict(group_id="scs-g3", topics=[dict(topic_name="scs-offsets", partitions=[
        dict(partition_index=0, start_offset=7)])])
    with KafkaRaw.connect(bootstrap) as raw:
        deadline = time.monotonic() + WAIT  # the closed consumer leaves the group
        while (altered := raw.request(91, 0, **alter)).error_code == ErrorCode.non_empty_group:
            assert time.monotonic() < deadline, "the group never became empty"
            time.sleep(0.5)
        assert altered.error_code == ErrorCode.none
        assert altered.responses[0].partitions[0].error_code == ErrorCode.none
    assert share_offsets(bootstrap, "scs-g3", "scs-offsets")[0] == 7
    c = share_consumer(bootstrap, "scs-g3", "scs-offsets")
    try:
        assert read_until(c, lambda got: len(got) >= 3) == values[7:], "from the altered start offset"
        assert quiet(c, 2) == []
    finally:
        c.close()
    with KafkaRaw.connect(bootstrap) as raw:
        deadline = time.monotonic() + WAIT
        while (deleted := raw.request(92, 0, group_id="scs-g3", topics=[dict(topic_name="scs-offsets")])
               ).error_code == ErrorCode.non_empty_group:
            assert time.monotonic() < deadline, "the group never became empty"
            time.sleep(0.5)
        assert deleted.error_code == ErrorCode.none and deleted.responses[0].error_code == ErrorCode.none
    assert share_offsets(bootstrap, "scs-g3", "scs-offsets") == (-1, -1)
    c = share_consumer(bootstrap, "scs-g3", "scs-offsets")
    try:
        assert read_until(c, lambda got: len(got) >= 10) == values, "deleted: share.auto.offset.reset again"
    finally:
        c.close()


# -- a classic consumer group and a share group on one topic ------------------------------------------
def test_a_consumer_group_and_a_share_group_each_read_every_record(broker):
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "scs-both")
    values = [b"b%03d" % i for i in range(100)]
    produce(bootstrap, "scs-both", values)
    set_group_configs(bootstrap, "scs-share", share_auto_offset_reset="earliest")
    share = share_consumer(bootstrap, "scs-share", "scs-both")
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": "scs-classic",
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    classic.subscribe(["scs-both"])
    got_classic: list[bytes] = []
    got_share: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT
        while (len(got_classic) < 100 or len(got_share) < 100) and time.monotonic() < deadline:
            got_classic += [m.value() for m in classic.consume(100, 0.2) if m.error() is None]
            for s in records(share, 0.2):
                share.acknowledge(s, AcknowledgeType.ACCEPT)
                got_share.append(s.value())
        assert got_classic == values and sorted(got_share) == values, "each group gets every record once"
    finally:
        classic.close()
        share.close()


# -- delayed, timer and half messages -----------------------------------------------------------------
def test_delayed_timer_and_half_messages_are_acquirable_only_once_delivered_or_committed(broker_factory, tmp_path):
    config = tmp_path / "delays.properties"
    config.write_text(CONFIG + "messageDelayLevel=1s 4s 8s\n")
    broker = broker_factory(config_file=config)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "scs-later")
    set_group_configs(bootstrap, "scs-g4", share_auto_offset_reset="earliest")
    c = share_consumer(bootstrap, "scs-g4", "scs-later")
    try:
        wait_initialized(c, bootstrap, "scs-g4", "scs-later")
        sent = time.monotonic()
        produce(bootstrap, "scs-later", [b"now", b"delayed", b"timer", b"half"], headers=[
            None, [("DELAY", b"2")], [("TIMER_DELAY_MS", b"4000")],
            [("TRAN_MSG", b"true"), ("PGROUP", b"scs-producers"), ("UNIQ_KEY", b"half-1")]])
        arrivals: dict[bytes, float] = {}
        deadline = time.monotonic() + WAIT
        while len(arrivals) < 3 and time.monotonic() < deadline:
            for m in records(c):
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                arrivals.setdefault(m.value(), time.monotonic() - sent)
        assert set(arrivals) == {b"now", b"delayed", b"timer"}
        assert arrivals[b"delayed"] >= 3.5, "delay level 2 (4 s) passed first"
        assert arrivals[b"timer"] >= 3.5, "the timer (4 s) passed first"
        assert quiet(c, 2) == [], "the half message is invisible until committed"
        produce(bootstrap, "scs-later", [b"end"], headers=[
            [("TRAN_END", b"COMMIT"), ("PGROUP", b"scs-producers"), ("UNIQ_KEY", b"half-1")]])
        assert read_until(c, lambda got: b"half" in got) == [b"half"], "committed: delivered once"
    finally:
        c.close()


# -- the poison record at scale ----------------------------------------------------------------------
def test_one_poison_record_among_100000_with_rocketmqs_retries_and_dead_letter_topic(broker_factory, tmp_path):
    config = tmp_path / "poison.properties"
    config.write_text(CONFIG + "messageDelayLevel=1s 1s 1s\n")  # every retry waits 1 s
    broker = broker_factory(config_file=config)
    bootstrap = broker.bootstrap_servers
    total, poison_at = 100_000, 31_337
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic("scs-poison", 1)
        for start in range(0, total + 1, 2000):
            raw.produce_ok("scs-poison", 0, make_batch(
                [b"poison" if i == poison_at else b"%d" % i for i in range(start, min(start + 2000, total + 1))]))
    set_group_configs(bootstrap, "scs-g5", share_auto_offset_reset="earliest", rmq_redelivery_backoff="levels",
                      rmq_max_reconsume_times="2")
    c = share_consumer(bootstrap, "scs-g5", "scs-poison")
    accepted = bytearray(total + 1)  # acceptances per record
    poison_deliveries = 0
    try:
        deadline = time.monotonic() + 400
        while (accepted.count(1) < total or poison_deliveries < 3) and time.monotonic() < deadline:
            batch = records(c, 1.0)
            for m in batch:
                if m.value() == b"poison":
                    poison_deliveries += 1
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    accepted[int(m.value())] += 1
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch:
                c.commit_sync()
        assert poison_deliveries == 3, "delivered once plus rmq.max.reconsume.times"
        assert accepted.count(1) == total and max(accepted) == 1, "every good record accepted exactly once"
        assert quiet(c, 3) == []
    finally:
        c.close()
    with KafkaRaw.connect(bootstrap) as raw:
        (dead,) = raw.fetch_all("rmq_dlq.scs-g5", 0)
        headers = dict(dead.headers)
        assert dead.value == b"poison" and headers["ORIGIN_TOPIC"] == b"scs-poison"
        assert headers["ORIGIN_PARTITION"] == b"0" and headers["ORIGIN_OFFSET"] == b"%d" % poison_at
        assert headers["DLQ_REASON"] == b"exhausted" and headers["RECONSUME_TIMES"] == b"2"
    assert share_offsets(bootstrap, "scs-g5", "scs-poison") == (total + 1, 0)


# -- kill -9 while several consumers acknowledge -------------------------------------------------------
def test_kill_9_while_share_consumers_acknowledge_redelivers_no_accepted_record(broker_factory, tmp_path):
    import threading

    config = tmp_path / "kill.properties"
    config.write_text(CONFIG)
    broker = broker_factory(config_file=config)
    bootstrap = broker.bootstrap_servers
    total = 20_000
    with KafkaRaw.connect(bootstrap) as raw:
        raw.create_topic("scs-kill", 1)
        for start in range(0, total, 500):
            raw.produce_ok("scs-kill", 0, make_batch([b"%d" % i for i in range(start, start + 500)]))
    set_group_configs(bootstrap, "scs-g6", share_auto_offset_reset="earliest", share_record_lock_duration_ms="5000")
    consumers = [share_consumer(bootstrap, "scs-g6", "scs-kill") for _ in range(3)]
    accepted_before: set[int] = set()  # commit_sync answered before the kill
    accepted_ever: set[int] = set()
    delivered_after: list[int] = []  # polled after the kill was sent
    killed = threading.Event()
    restarted = threading.Event()

    def kill_and_restart():
        deadline = time.monotonic() + WAIT
        while len(accepted_before) < total // 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        killed.set()  # set before the signal: a commit answered after this is not counted before it
        broker.kill()
        broker.restart(same_port=True)
        restarted.set()

    killer = threading.Thread(target=kill_and_restart)
    killer.start()
    try:
        deadline = time.monotonic() + 240
        while (len(accepted_ever) < total or not restarted.is_set()) and time.monotonic() < deadline:
            for c in consumers:
                after = killed.is_set()
                batch = records(c, 0.2)
                offsets = [int(m.value()) for m in batch]
                if after:
                    delivered_after += offsets
                for m in batch:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if not batch:
                    continue
                try:
                    results = c.commit_sync(15)
                except Exception:
                    continue  # the broker is down: these acknowledgements may or may not hold
                if any(error is not None for error in results.values()):
                    continue
                if not killed.is_set():
                    accepted_before.update(offsets)
                accepted_ever.update(offsets)
        killer.join(WAIT)
        assert restarted.is_set()
        assert accepted_ever == set(range(total)), "every record accepted at least once"
        assert len(accepted_before) >= total // 10
        assert accepted_ever - accepted_before and delivered_after, "the kill came in the middle of consuming"
        again = accepted_before & set(delivered_after)
        assert not again, f"accepted before the kill, delivered again after it: {sorted(again)[:10]}"
    finally:
        for c in consumers:
            c.close()
