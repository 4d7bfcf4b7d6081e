"""Timers: memory with a million pending, restart time, produce rate, delivery lateness
(issue #9's benchmark).

Usage:  python -m bench.timers [--pending N] [--burst N]

1. Produce rate in one run: PLAIN records, then as many timer records (``TIMER_DELIVER_MS``
   spread uniformly over the next 30 days), 100 B values, confluent-kafka with acks=1 and
   batches of up to 10,000 records; records/s from the first send to the last delivery
   report, and the timer rate as a multiple of the plain rate.
2. ``--pending`` timers (default 1,000,000; including those of step 1) pending over 30 days:
   the broker's RSS before any timer (idle, after the plain records) and after, settled.
3. Restart with them pending: a clean stop and start (time from spawn to the started line),
   then kill -9 and start (recovery rebuilds the timing wheel from its log).
4. ``--burst`` timers (default 100,000) due within the same minute (uniformly over
   [now + 20 s, now + 80 s]), then as many due at the same millisecond, read by a consumer
   of the real topic: lateness = receive time minus the due time (carried in the value),
   p50 / p99 / max, and records/s from the first due time to the last delivery (for the
   minute: the rate they fall due; at once: the broker's delivery capacity). The broker
   runs with the default configuration (timerPrecisionMs=100).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import struct
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .common import BrokerProcess, produce_when_room, start_broker

DAY_MS = 86_400_000
PLAIN = 200_000
VALUE = b"x" * 92  # + an 8-byte due time = 100 B
QUIET = {"log_level": 0}


def produce(bootstrap: str, topic: str, count: int, due_of) -> float:
    """Send ``count`` records (timers when ``due_of`` is given); returns records/s."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20,
                         "batch.num.messages": 10_000, "batch.size": 2_000_000,
                         "queue.buffering.max.messages": 1_000_000, **QUIET})
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    began = time.perf_counter()
    for i in range(count):
        due = due_of(i) if due_of else 0
        headers = [("TIMER_DELIVER_MS", str(due).encode())] if due_of else None
        produce_when_room(producer, topic, struct.pack(">q", due) + VALUE, partition=i % 4, headers=headers,
                          on_delivery=report)
    producer.flush(120)
    elapsed = time.perf_counter() - began
    if failed:
        raise RuntimeError(f"{len(failed)} produce errors, first {failed[0]}")
    return count / elapsed


def restart(broker: BrokerProcess, kill: bool) -> tuple[BrokerProcess, float]:
    """Stop (SIGTERM, or kill -9) and start on the same data directory; seconds to ready."""
    if kill:
        broker.process.send_signal(signal.SIGKILL)
    else:
        broker.process.send_signal(signal.SIGTERM)
    broker.process.wait(timeout=60)
    again = start_broker(data_dir=broker.data_dir)
    return again, again.ready_seconds


def settled_rss(broker: BrokerProcess, seconds: float = 3.0) -> float:
    time.sleep(seconds)
    return broker.rss_mb()


def burst(broker: BrokerProcess, count: int, spread_ms: int, name: str) -> dict[str, float]:
    """``count`` timers due uniformly over ``spread_ms`` from 20 s on (0: all at once)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, 4, 1)])[name].result()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{name}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50, **QUIET})
    consumer.subscribe([name])
    start = int(time.time() * 1000) + 20_000
    rng = random.Random(7)
    dues = sorted(start + (rng.randrange(spread_ms) if spread_ms else 0) for _ in range(count))
    produce(broker.bootstrap, name, count, lambda i: dues[i])
    lateness = []
    last = None
    deadline = time.time() + 200
    while len(lateness) < count and time.time() < deadline:
        for msg in consumer.consume(10_000, 0.02):  # returns at once with what has arrived
            if msg.error():
                continue
            now = time.time() * 1000
            (due,) = struct.unpack_from(">q", msg.value())
            lateness.append(now - due)
            last = now
    consumer.close()
    lateness.sort()
    got = len(lateness)

    def pct(p: float) -> float:
        return lateness[min(got - 1, int(p * got))] if got else float("nan")

    # records/s from the first due time to the last delivery: the due rate while the broker
    # keeps up; its delivery capacity when everything is due at once
    span = (last - dues[0]) / 1000 if got else float("nan")
    return {f"{name}_delivered": got, f"{name}_lateness_p50_ms": pct(0.50),
            f"{name}_lateness_p99_ms": pct(0.99),
            f"{name}_lateness_max_ms": lateness[-1] if got else float("nan"),
            f"{name}_early": sum(1 for x in lateness if x < 0),
            f"{name}_delivered_per_s": got / span if got > 1 and span > 0 else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--burst", type=int, default=100_000)
    args = parser.parse_args()
    results: dict[str, object] = {"pending": args.pending, "burst": args.burst, "cpus": os.cpu_count()}
    broker = start_broker()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        for name in ("plain", "timed"):
            admin.create_topics([NewTopic(name, 4, 1)])[name].result()
        results["plain_rate"] = produce(broker.bootstrap, "plain", PLAIN, None)
        results["idle_rss_mb"] = settled_rss(broker)
        rng = random.Random(1)

        def spread(_: int) -> int:  # due within the 30 days after the send (timerMaxDelaySec)
            return int(time.time() * 1000) + 60_000 + rng.randrange(30 * DAY_MS - 120_000)

        results["timer_rate"] = produce(broker.bootstrap, "timed", PLAIN, spread)
        results["timer_vs_plain"] = results["timer_rate"] / results["plain_rate"]
        rest = args.pending - PLAIN
        if rest > 0:
            produce(broker.bootstrap, "timed", rest, spread)
        results["pending_rss_mb"] = settled_rss(broker)
        results["rss_growth_mb"] = results["pending_rss_mb"] - results["idle_rss_mb"]
        broker, results["clean_restart_s"] = restart(broker, kill=False)
        results["rss_after_clean_restart_mb"] = settled_rss(broker, 1.0)
        broker, results["kill9_restart_s"] = restart(broker, kill=True)
        results["rss_after_kill9_restart_mb"] = settled_rss(broker, 1.0)
        results.update(burst(broker, args.burst, 60_000, "minute"))
        results.update(burst(broker, args.burst, 0, "instant"))
    finally:
        broker.stop()
    print(json.dumps(results, indent=1, default=lambda x: round(x, 3)))


if __name__ == "__main__":
    main()
