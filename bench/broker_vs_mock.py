"""Broker core benchmark: rmqkafka vs the librdkafka mock cluster, same workload, one run.

Usage:  python -m bench.broker_vs_mock [--quick]

For both targets, with confluent-kafka (librdkafka) as the client:
- produce throughput (msgs/s, MB/s) of 100-byte and 1-KiB values on 4 partitions, acks=all;
- consume throughput of the same records (assign + poll from the beginning);
- end-to-end latency p50/p99, one record at a time, with a long-polling consumer;
- time from process start to ready, and idle RSS (ours only: the mock lives in-process).
The mock keeps only ~5 MB per partition, so the workload is sized to fit in it.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from .common import MockCluster, create_topic, start_broker

PARTITIONS = 4
QUIET = {"log_level": 0}


def produce(bootstrap: str, topic: str, count: int, size: int, partitions: int = PARTITIONS) -> float:
    """Seconds to produce and get every acknowledgement for ``count`` records, spread evenly
    over partitions 0 .. ``partitions`` - 1."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
         "queue.buffering.max.messages": 1_000_000, **QUIET}
    )
    value = b"x" * size
    failed = []
    began = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions,
                                 on_delivery=lambda err, _m: failed.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - began
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, first: {failed[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, count: int, partitions: int = PARTITIONS) -> float:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}", "enable.auto.commit": False,
         "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760, **QUIET}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    began = time.perf_counter()
    deadline = began + 120
    while seen < count and time.perf_counter() < deadline:
        for message in consumer.consume(min(10000, count - seen), 1.0):
            if not message.error() and message.value():
                seen += 1
    elapsed = time.perf_counter() - began
    consumer.close()
    if seen < count:
        raise RuntimeError(f"consumed only {seen} of {count}")
    return elapsed


def latency(bootstrap: str, topic: str, rounds: int) -> tuple[float, float]:
    """p50 and p99 milliseconds from produce() to the consumer receiving the record."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"lat-{uuid.uuid4()}", "enable.auto.commit": False,
         "fetch.wait.max.ms": 500, "fetch.min.bytes": 1, **QUIET}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, **QUIET})
    producer.produce(topic, b"warmup", partition=0)
    producer.flush(10)
    while True:  # wait for the warm-up record so the consumer is parked in a long poll
        message = consumer.poll(5)
        if message is not None and not message.error():
            break
    samples = []
    for _ in range(rounds):
        time.sleep(0.02)  # let the consumer settle into its next long poll
        sent = time.perf_counter()
        producer.produce(topic, b"ping", partition=0)
        producer.poll(0)
        while True:
            message = consumer.poll(5)
            if message is not None and not message.error():
                samples.append((time.perf_counter() - sent) * 1000)
                break
    consumer.close()
    producer.flush(10)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def run(target: str, bootstrap: str, is_mock: bool, args) -> dict[str, float]:
    results: dict[str, float] = {}
    for size, count in ((100, args.small_count), (1024, args.large_count)):
        topic = f"bench-{size}-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, is_mock)
        seconds = produce(bootstrap, topic, count, size)
        results[f"produce {size}B msgs/s"] = count / seconds
        results[f"produce {size}B MB/s"] = count * size / seconds / 1e6
        seconds = consume(bootstrap, topic, count)
        results[f"consume {size}B msgs/s"] = count / seconds
        results[f"consume {size}B MB/s"] = count * size / seconds / 1e6
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, is_mock)
    p50, p99 = latency(bootstrap, topic, args.latency_rounds)
    results["e2e latency p50 ms"] = p50
    results["e2e latency p99 ms"] = p99
    print(f"  {target}: done", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller workload for a smoke run")
    args = parser.parse_args()
    args.small_count = 20_000 if args.quick else 100_000
    args.large_count = 4_000 if args.quick else 16_000
    args.latency_rounds = 50 if args.quick else 300

    broker = start_broker(flush="async")
    time.sleep(0.5)
    idle_rss = broker.rss_mb()
    mock = MockCluster()
    try:
        ours = run("rmqkafka", broker.bootstrap, False, args)
        theirs = run("librdkafka mock", mock.bootstrap, True, args)
        after_rss = broker.rss_mb()
    finally:
        broker.stop()

    print(f"\nworkload: 4 partitions, acks=all, {args.small_count} x 100 B and {args.large_count} x 1 KiB "
          f"records, {args.latency_rounds} latency rounds; client confluent-kafka (librdkafka)")
    print(f"{'metric':28} {'rmqkafka':>12} {'mock':>12} {'ratio':>7}")
    for key, value in ours.items():
        other = theirs[key]
        print(f"{key:28} {value:12.1f} {other:12.1f} {value / other:7.2f}")
    print(f"{'ready s':28} {broker.ready_seconds:12.3f} {mock.ready_seconds:12.3f}")
    print(f"{'idle RSS MB':28} {idle_rss:12.1f} {'-':>12}")
    print(f"{'RSS after workload MB':28} {after_rss:12.1f} {'-':>12}")


if __name__ == "__main__":
    main()
