"""Transactions benchmark: rmqkafka vs the librdkafka mock cluster, same workload, one run.

Usage:  python -m bench.transactions [--quick]

For both targets (our broker started with the default configuration via ``start_broker``,
and librdkafka's in-process mock cluster), with confluent-kafka (librdkafka) as the client:
- a transactional producer (``transactional.id`` set, ``init_transactions`` once, not timed)
  runs N transactions (N = 2,000 by default, 300 with ``--quick``) in a loop, each
  ``begin_transaction`` / produce 100 records of 100 B (round-robin over 4 partitions) /
  ``commit_transaction``; transactions/s and records/s from the first begin to the last
  commit returning;
- then a read_committed consumer (``isolation.level=read_committed``, all 4 partitions
  assigned from the beginning, ``enable.partition.eof``) reads until end-of-partition on
  every partition; records/s = records read / time from assign to the last EOF. On our
  broker all N x 100 records must be read. The mock keeps only ~5 MB per partition, so with
  the default N it has already dropped the oldest records: its rate is over what it still
  holds ("records read" row; its ratio compares record counts, not a rate).
The topic has 4 partitions: created with AdminClient on our broker; on the mock (which has
no CreateTopics) auto-created by one non-transactional empty record before the run (empty
values are not counted). Printed: a table per figure with the ratio ours/mock (target >= 1.0).
"""

from __future__ import annotations

import argparse
import time
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)

from .common import MockCluster, create_topic, start_broker

PARTITIONS = 4
PER_TXN = 100
VALUE = b"x" * 100
QUIET = {"log_level": 0}


def produce_transactions(bootstrap: str, topic: str, transactions: int) -> float:
    """Seconds for ``transactions`` begin / produce PER_TXN / commit rounds."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4()}",
                         "linger.ms": 5, **QUIET})
    producer.init_transactions(30)
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    began = time.perf_counter()
    for _ in range(transactions):
        producer.begin_transaction()
        for i in range(PER_TXN):
            producer.produce(topic, VALUE, partition=i % PARTITIONS, on_delivery=report)
        producer.commit_transaction(30)
    elapsed = time.perf_counter() - began
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, first: {failed[0]}")
    return elapsed


def consume_committed(bootstrap: str, topic: str) -> tuple[float, int]:
    """Seconds to read every committed record still retained, and how many were read."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False,
         "isolation.level": "read_committed", "enable.partition.eof": True,
         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760, **QUIET}
    )
    began = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = 0
    at_end: set[int] = set()
    deadline = began + 120
    while len(at_end) < PARTITIONS and time.perf_counter() < deadline:
        for message in consumer.consume(10000, 1.0):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            if message.value():
                seen += 1
    elapsed = time.perf_counter() - began
    consumer.close()
    return elapsed, seen


def run(target: str, bootstrap: str, is_mock: bool, transactions: int) -> dict[str, float]:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, is_mock)
    records = transactions * PER_TXN
    seconds = produce_transactions(bootstrap, topic, transactions)
    results = {"transactions/s": transactions / seconds, "txn produce records/s": records / seconds}
    seconds, seen = consume_committed(bootstrap, topic)
    if seen != records and not (is_mock and seen > 0):
        raise RuntimeError(f"{target}: read_committed consumer saw {seen} of {records} records")
    results["read_committed records/s"] = seen / seconds
    results["records read"] = seen
    print(f"  {target}: done", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller workload for a smoke run")
    args = parser.parse_args()
    transactions = 300 if args.quick else 2_000

    broker = start_broker()
    mock = MockCluster()
    try:
        ours = run("rmqkafka", broker.bootstrap, False, transactions)
        theirs = run("librdkafka mock", mock.bootstrap, True, transactions)
    finally:
        broker.stop()

    print(f"\nworkload: {transactions} transactions x {PER_TXN} records x 100 B on {PARTITIONS} partitions, "
          f"then one read_committed consumer; client confluent-kafka (librdkafka)")
    print(f"{'metric':28} {'rmqkafka':>12} {'mock':>12} {'ratio':>7}")
    for key, value in ours.items():
        other = theirs[key]
        print(f"{key:28} {value:12.1f} {other:12.1f} {value / other:7.2f}")
    if theirs["records read"] < ours["records read"]:
        print("note: the mock keeps only ~5 MB per partition (5 segments of 1 MB), so it had dropped the "
              "oldest records; its read_committed rate is over the records it still retained")


if __name__ == "__main__":
    main()
