"""Incremental fetch sessions (KIP-227): broker CPU per record consumed with and without them.

Usage:  python -m bench.fetch_sessions [--records N] [--partitions P] [--size B]

For each mode (sessions on: ``max.incremental.fetch.session.cache.slots`` 1000, Kafka's
default; off: 0) a fresh broker, one topic of P partitions (default 1,000), N records
(default 400,000) of B bytes (default 100) produced with confluent-kafka spread evenly over
the partitions (``bench.broker_vs_mock.produce``), then all consumed with kafka-python
(assign + poll; kafka-python's FetchSessionHandler uses sessions when the broker offers them).
Broker CPU (psutil, user + system) is read around the consume alone: us per record is the
robust figure on a shared machine; wall rates depend on its other load. Then the consumer
polls 10 s more with nothing new (fetch.max.wait.ms 100): the broker CPU-s per second an
idle consumer of P partitions costs, with the Fetch requests it sent (the broker's
rmqk_request_duration_seconds count) and the broker CPU per Fetch.

Prints a line per mode and one JSON line (``{"bench": "fetch_sessions", ...}``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from .broker_vs_mock import produce
from .common import create_topic, metrics_url, request_durations, start_broker
from .cost import broker_cpu_seconds

IDLE_SECONDS = 10.0


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, pid: int, idle_s: float, url: str,
                timeout: float = 600.0) -> tuple[float, float, float, float]:
    """(seconds to consume ``count`` records, broker CPU-s meanwhile, broker CPU-s of
    ``idle_s`` seconds more of polling with nothing new, Fetch requests in those seconds)."""
    from kafka import KafkaConsumer, TopicPartition

    client = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                           fetch_max_wait_ms=100, request_timeout_ms=60_000)
    try:
        client.assign([TopicPartition(topic, p) for p in range(partitions)])
        seen = 0
        cpu = broker_cpu_seconds(pid)
        began = time.perf_counter()
        deadline = began + timeout
        while seen < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consumed {seen} of {count} records")
            for records in client.poll(timeout_ms=500, max_records=10_000).values():
                seen += len(records)
        seconds = time.perf_counter() - began
        consume_cpu = broker_cpu_seconds(pid) - cpu
        fetches = request_durations(url, "Fetch")["count"]
        cpu = broker_cpu_seconds(pid)
        idle_until = time.perf_counter() + idle_s
        while time.perf_counter() < idle_until:
            client.poll(timeout_ms=200)
        idle_cpu = broker_cpu_seconds(pid) - cpu
        return seconds, consume_cpu, idle_cpu, request_durations(url, "Fetch")["count"] - fetches
    finally:
        client.close()


def run(mode: str, slots: int, records: int, partitions: int, size: int) -> dict:
    config = Path(tempfile.mkdtemp(prefix="rmqk-bench-fs-")) / "server.properties"
    config.write_text(f"max.partitions.per.topic=100000\nmax.partitions=100000\n"
                      f"max.incremental.fetch.session.cache.slots={slots}\n")
    broker = start_broker(extra=["--config", str(config), "--metrics-port", "0"])
    url = metrics_url(broker)
    try:
        create_topic(broker.bootstrap, "fs", False, partitions=partitions, timeout=60)
        produce(broker.bootstrap, "fs", records, size, partitions=partitions)
        time.sleep(2.0)  # the produce's checkpoints settle
        seconds, cpu, idle_cpu, idle_fetches = consume_all(broker.bootstrap, "fs", partitions, records,
                                                           broker.process.pid, IDLE_SECONDS, url)
    finally:
        broker.stop()
    return {"mode": mode, "slots": slots, "consume_s": round(seconds, 2), "broker_cpu_s": round(cpu, 2),
            "us_per_record": round(cpu / records * 1e6, 2), "records_per_s": round(records / seconds),
            "idle_broker_cpu_per_s": round(idle_cpu / IDLE_SECONDS, 3),
            "idle_fetches_per_s": round(idle_fetches / IDLE_SECONDS, 1),
            "idle_us_per_fetch": round(idle_cpu / max(idle_fetches, 1) * 1e6)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    results = []
    for mode, slots in (("sessions", 1000), ("sessionless", 0)):
        result = run(mode, slots, args.records, args.partitions, args.size)
        results.append(result)
        print(f"{mode:12} broker CPU {result['broker_cpu_s']:7.2f} s  {result['us_per_record']:6.2f} us/record  "
              f"{result['records_per_s']:8} records/s  consume {result['consume_s']} s  "
              f"idle: {result['idle_broker_cpu_per_s']} broker CPU-s per s, {result['idle_fetches_per_s']} "
              f"Fetches per s, {result['idle_us_per_fetch']} us per Fetch", flush=True)
    print(json.dumps({"bench": "fetch_sessions", "records": args.records, "partitions": args.partitions,
                      "size": args.size, "results": results}))


if __name__ == "__main__":
    main()
