"""Subscription views: the broker filters vs the client filters (issue #8's benchmark).

Usage:  python -m bench.views [--quick]

1,000,000 records (100,000 with --quick) of 100 B over 4 partitions, each with a ``TAGS``
header (10 tags, evenly spread) and a ``region`` header (10 values, evenly spread, not tied
to the tag), in two layouts:

* one-tag batches: every producer batch holds 1,000 records (100 with --quick) of one tag;
* mixed batches: every batch holds all ten tags, round robin.

For each layout, confluent-kafka (librdkafka) reads, from the beginning to the log end of
every partition:

* the baseline a Kafka user has today: the whole source, filtered on the client (first
  ``TAGS`` header == Tag3, or ``region`` header == r3);
* a tag view ``Tag3`` and a SQL92 view ``region = 'r3'`` (10 % each), filtered by the broker.

Reported per case: matching records and records/s (from assign to the end-of-partition
event of every partition), MB the broker sent (the bytes librdkafka received, its
``rxbytes`` statistic), broker CPU seconds (psutil, over the same read), and the view's
records/s as a multiple of the baseline's. Also the time to create
a view over the existing source (a CreateTopics round trip; median of five views). The broker runs with the default
configuration, as ``rmqk serve``.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .common import start_broker

PARTITIONS = 4
TAGS = [b"Tag%d" % i for i in range(10)]
REGIONS = [b"r%d" % i for i in range(10)]
VALUE = b"x" * 100
QUIET = {"log_level": 0}


def produce(bootstrap: str, topic: str, count: int, one_tag_batches: bool) -> float:
    """Write the layout; returns seconds. One-tag batches: a run of RUN records of one tag
    per partition, then a flush, so each producer batch holds exactly that run."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20 if one_tag_batches else 5,
                         "batch.size": 4_000_000, "batch.num.messages": 100_000,
                         "queue.buffering.max.messages": 1_000_000, **QUIET})
    began = time.perf_counter()
    if one_tag_batches:
        run_length = count // 1000  # 250 runs per partition, 25 of each tag
        for run in range(count // (run_length * PARTITIONS)):
            for p in range(PARTITIONS):
                tag = TAGS[(run + p) % 10]
                for i in range(run_length):
                    producer.produce(topic, VALUE, partition=p,
                                     headers=[("TAGS", tag), ("region", REGIONS[i % 10])])
            producer.flush(60)
    else:
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, VALUE, partition=i % PARTITIONS,
                                     headers=[("TAGS", TAGS[(i // PARTITIONS) % 10]),
                                              ("region", REGIONS[(i // (PARTITIONS * 10)) % 10])])
                    break
                except BufferError:
                    producer.poll(0.01)
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(60)
    return time.perf_counter() - began


def consume(bootstrap: str, topic: str, keep) -> tuple[int, float, int]:
    """(records kept, seconds, bytes received from the broker) reading every partition from
    0 to its end; ``keep`` is the client-side filter (None: keep all the topic holds). The
    bytes are librdkafka's own count (statistics ``rxbytes``, every response included)."""
    stats: list[dict] = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760,
                         # the end-of-partition event comes with an empty answer, which waits
                         # fetch.wait.max.ms (500 by default) at the log end, for both reads
                         "fetch.wait.max.ms": 10,
                         "statistics.interval.ms": 100, "stats_cb": lambda raw: stats.append(json.loads(raw)),
                         **QUIET})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    kept = 0
    at_end: set[int] = set()
    began = time.perf_counter()
    deadline = began + 600
    while len(at_end) < PARTITIONS and time.perf_counter() < deadline:
        for message in consumer.consume(10000, 0.05):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise RuntimeError(f"consume {topic}: {error}")
            if keep is None or keep(message.headers()):
                kept += 1
    elapsed = time.perf_counter() - began
    if len(at_end) < PARTITIONS:
        raise RuntimeError(f"consume {topic}: only {len(at_end)} partitions reached their end")
    seen = len(stats)
    while len(stats) < seen + 2:  # a statistics report made after the last response
        consumer.poll(0.05)
    consumer.close()
    received = sum(b["rxbytes"] for b in stats[-1]["brokers"].values())
    return kept, elapsed, received


def tag3(headers) -> bool:
    for key, value in headers:
        if key == "TAGS":
            return value == b"Tag3"
    return False


def region3(headers) -> bool:
    for key, value in headers:
        if key == "region":
            return value == b"r3"
    return False


def broker_cpu(pid: int) -> float:
    import psutil

    cpu = psutil.Process(pid).cpu_times()
    return cpu.user + cpu.system


def measure(pid: int, bootstrap: str, topic: str, keep) -> dict[str, float]:
    before = broker_cpu(pid)
    kept, seconds, received = consume(bootstrap, topic, keep)
    return {"records": kept, "seconds": seconds, "records/s": kept / seconds,
            "MB sent": received / 1e6, "broker CPU s": broker_cpu(pid) - before}


def create(admin: AdminClient, name: str, partitions: int, config: dict[str, str]) -> float:
    began = time.perf_counter()
    admin.create_topics([NewTopic(name, partitions, 1 if partitions > 0 else -1, config=config)])[name].result(30)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 records instead of 1,000,000")
    args = parser.parse_args()
    count = 100_000 if args.quick else 1_000_000

    broker = start_broker(flush="async")
    pid = broker.process.pid
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    rows: list[tuple[str, str, dict[str, float]]] = []
    creations: list[tuple[str, float]] = []
    try:
        for layout, one_tag in (("one-tag batches", True), ("mixed batches", False)):
            topic = f"views-{'one' if one_tag else 'mixed'}-{uuid.uuid4().hex[:6]}"
            create(admin, topic, PARTITIONS, {})
            seconds = produce(broker.bootstrap, topic, count, one_tag)
            print(f"  {layout}: produced {count} records in {seconds:.1f} s", flush=True)
            # Five views over the full source, timed one by one: no scan at creation, so the
            # time is a CreateTopics round trip and the registry file's fsync.
            times = [create(admin, f"{topic}.{tag.decode().lower()}", -1,
                            {"rmq.view.source": topic, "rmq.view.tags": tag.decode()}) for tag in TAGS[3:8]]
            creations.append((layout, sorted(times)[2]))
            create(admin, f"{topic}.r3", -1, {"rmq.view.source": topic, "rmq.view.sql": "region = 'r3'"})
            for case, view, keep in (("tag", f"{topic}.tag3", tag3), ("SQL", f"{topic}.r3", region3)):
                baseline = measure(pid, broker.bootstrap, topic, keep)
                viewed = measure(pid, broker.bootstrap, view, None)
                if viewed["records"] != baseline["records"]:
                    raise RuntimeError(f"{view}: {viewed['records']} records, the client filter kept "
                                       f"{baseline['records']}")
                rows.append((layout, f"client filter ({case})", baseline))
                rows.append((layout, f"{case} view", viewed | {"x": viewed["records/s"] / baseline["records/s"]}))
                print(f"  {layout}: {case} done", flush=True)
    finally:
        broker.stop()

    print(f"\nworkload: {count} records of 100 B, {PARTITIONS} partitions, 10 tags and 10 regions evenly "
          f"spread; client confluent-kafka (librdkafka), from offset 0 to the log end")
    print(f"{'layout':16} {'read':22} {'matching':>9} {'s':>6} {'records/s':>10} {'MB sent':>8} "
          f"{'broker CPU s':>12} {'vs client':>9}")
    for layout, case, r in rows:
        ratio = f"{r['x']:8.2f}x" if "x" in r else f"{'-':>9}"
        print(f"{layout:16} {case:22} {r['records']:9d} {r['seconds']:6.2f} {r['records/s']:10.0f} "
              f"{r['MB sent']:8.1f} {r['broker CPU s']:12.2f} {ratio}")
    for layout, seconds in creations:
        print(f"create a tag view over the {count}-record source ({layout}): {seconds * 1000:.1f} ms "
              f"(median of 5)")


if __name__ == "__main__":
    main()
