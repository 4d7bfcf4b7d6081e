"""Data for the metrics-port tests (test_metrics_http.py, test_console_page.py): one broker
holding a bit of everything the metrics and the console show, with known numbers.

- ``orders``: 3 partitions, 10 records each (offsets 0..9); one record of partition 0 has
  tag ``A``, read by the view ``orders-a`` (tags ``A``);
- group ``billing``: subscribed (one live member), consumed all 30 and committed: lag 0;
- group ``audit``: committed 10 / 4 / 0 by hand (no member): lag 0 / 6 / 10;
- share group ``queue``: one ShareConsumer (client id ``queue-worker``) subscribed to
  ``orders``, assigned its 3 partitions;
- in ``later`` (1 partition, so that ``orders`` has no gaps): 2 records with ``DELAY=5``
  (level 5, 1 minute) and 1 with ``TIMER_DELAY_SEC=3600``: level 5 depth 2, 1 timer
  pending; a RocketMQ half message (producer group ``pg``, key ``half-1``), never ended;
  an open Kafka transaction (``txn-open``) with one record;
- 3 records in ``rmq_dlq.billing`` (produced there directly) and an empty
  ``rmq_retry.billing``.

``Seeded.close()`` aborts the transaction and closes the live consumers.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from confluent_reads import poll_records

TOPIC = "orders"
LATER = "later"
VIEW = "orders-a"
LIVE_GROUP = "billing"
IDLE_GROUP = "audit"
SHARE_GROUP = "queue"
DLQ_TOPIC = "rmq_dlq.billing"
RETRY_TOPIC = "rmq_retry.billing"  # where a resend sends dead letters (created empty)
IDLE_COMMITS = {0: 10, 1: 4, 2: 0}


@dataclass
class Seeded:
    bootstrap: str
    closers: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):  # teardown goes on
                close()


def _flush(producer: Any) -> None:
    assert producer.flush(15) == 0, "records not delivered"


def seed(bootstrap: str) -> Seeded:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    seeded = Seeded(bootstrap)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(TOPIC, 3, 1), NewTopic(LATER, 1, 1), NewTopic(RETRY_TOPIC, 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(15)
    view = NewTopic(VIEW, 3, 1, config={"rmq.view.source": TOPIC, "rmq.view.tags": "A"})
    for future in admin.create_topics([view]).values():
        future.result(15)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in range(3):
        for i in range(10):
            headers = [("TAGS", b"A")] if (partition, i) == (0, 0) else []
            producer.produce(TOPIC, f"v{partition}-{i}".encode(), f"k{i}".encode(), partition=partition,
                             headers=headers)
    for i in range(3):
        producer.produce(DLQ_TOPIC, f"dead-{i}".encode(), f"d{i}".encode(), partition=0)
    _flush(producer)
    for _ in range(2):
        producer.produce(LATER, b"later", headers=[("DELAY", b"5")])
    producer.produce(LATER, b"much later", headers=[("TIMER_DELAY_SEC", b"3600")])
    producer.produce(LATER, b"half", headers=[("TRAN_MSG", b"true"), ("PGROUP", b"pg"), ("UNIQ_KEY", b"half-1")])
    _flush(producer)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": LIVE_GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "billing-worker"})
    seeded.closers.append(consumer.close)
    consumer.subscribe([TOPIC])
    got = len(poll_records(consumer, 30, timeout=30, poll_s=0.5))
    assert got == 30, f"consumed {got} of 30"
    consumer.commit(asynchronous=False)

    idle = Consumer({"bootstrap.servers": bootstrap, "group.id": IDLE_GROUP, "enable.auto.commit": False})
    idle.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in IDLE_COMMITS.items()], asynchronous=False)
    idle.close()

    _join_share_group(seeded, bootstrap)

    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-open"})
    txn.init_transactions(15)
    txn.begin_transaction()
    txn.produce(LATER, b"uncommitted")
    _flush(txn)
    seeded.closers.append(lambda: txn.abort_transaction(15))
    return seeded


def _join_share_group(seeded: Seeded, bootstrap: str) -> None:
    """A ShareConsumer in SHARE_GROUP, waited for until ShareGroupDescribe shows it assigned."""
    from confluent_kafka import ShareConsumer
    from rawkafka import KafkaRaw, wait_until

    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": SHARE_GROUP, "client.id": "queue-worker"})
    seeded.closers.append(share.close)
    share.subscribe([TOPIC])
    with KafkaRaw.connect(bootstrap) as conn:
        def assigned() -> bool:
            (group,) = conn.request(77, 1, group_ids=(SHARE_GROUP,), include_authorized_operations=False).groups
            return bool(group.members) and sum(len(tp.partitions) for tp in group.members[0].assignment.topic_partitions) == 3

        wait_until(assigned, timeout=30, interval=0.2, message="the share consumer assigned")
