"""Incremental fetch sessions (KIP-227): broker CPU per record consumed with and without them.

Usage:  python -m bench.fetch_sessions [--records N] [--partitions P] [--size B]

For each mode (sessions on: ``max.incremental.fetch.session.cache.slots`` 1000, Kafka's
default; off: 0) a fresh broker, one topic of P partitions (default 1,000), N records
(default 400,000) of B bytes (default 100) produced with confluent-kafka spread evenly over
the partitions (``bench.broker_vs_mock.produce``), then all consumed with kafka-python
(assign + poll; kafka-python's FetchSessionHandler uses sessions when the broker offers them).
Broker CPU (psutil, user + system) is read around the consume alone: us per record is the
robust figure on a shared machine; wall rates depend on its other load.

Prints a line per mode and one JSON line (``{"bench": "fetch_sessions", ...}``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from .broker_vs_mock import produce
from .common import create_topic, start_broker
from .cost import broker_cpu_seconds


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 600.0) -> float:
    from kafka import KafkaConsumer, TopicPartition

    client = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                           fetch_max_wait_ms=100, request_timeout_ms=60_000)
    try:
        client.assign([TopicPartition(topic, p) for p in range(partitions)])
        seen = 0
        began = time.perf_counter()
        deadline = began + timeout
        while seen < count:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consumed {seen} of {count} records")
            for records in client.poll(timeout_ms=500, max_records=10_000).values():
                seen += len(records)
        return time.perf_counter() - began
    finally:
        client.close()


def run(mode: str, slots: int, records: int, partitions: int, size: int) -> dict:
    config = Path(tempfile.mkdtemp(prefix="rmqk-bench-fs-")) / "server.properties"
    config.write_text(f"max.partitions.per.topic=100000\nmax.partitions=100000\n"
                      f"max.incremental.fetch.session.cache.slots={slots}\n")
    broker = start_broker(extra=["--config", str(config)])
    try:
        create_topic(broker.bootstrap, "fs", False, partitions=partitions, timeout=60)
        produce(broker.bootstrap, "fs", records, size, partitions=partitions)
        time.sleep(2.0)  # the produce's checkpoints settle
        pid = broker.process.pid
        before = broker_cpu_seconds(pid)
        seconds = consume_all(broker.bootstrap, "fs", partitions, records)
        cpu = broker_cpu_seconds(pid) - before
    finally:
        broker.stop()
    return {"mode": mode, "slots": slots, "consume_s": round(seconds, 2), "broker_cpu_s": round(cpu, 2),
            "us_per_record": round(cpu / records * 1e6, 2), "records_per_s": round(records / seconds)}


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
              f"{result['records_per_s']:8} records/s  consume {result['consume_s']} s", flush=True)
    print(json.dumps({"bench": "fetch_sessions", "records": args.records, "partitions": args.partitions,
                      "size": args.size, "results": results}))


if __name__ == "__main__":
    main()
