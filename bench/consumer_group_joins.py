"""Broker CPU per ConsumerGroupHeartbeat join as a consumer-protocol (KIP-848) group grows.

Usage:  python -m bench.consumer_group_joins [--sizes 500,1000,2000,4000] [--partitions 4]
                                              [--window 100] [--profile DIR]

One broker process (session timeouts raised to an hour so that no member expires while the
group grows), one topic of P partitions (default 4), one group. Members join one after the
other with raw ConsumerGroupHeartbeat v1 requests (epoch 0, a client-made member id, the
topic subscribed; tests/integration/rawkafka.py), none of them heartbeating again. When the
group has reached each size N, the broker's CPU (psutil, user + system) is read around the
next ``window`` joins: the figure is ms of broker CPU per join at N members. A join that
costs the same at every N is what a group whose joins do not grow with its size shows.
``--profile DIR`` records py-spy (raw collapsed stacks) during the last window.

Prints a line per size and one JSON line (``{"bench": "consumer_group_joins", ...}``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid

from tests.integration.rawkafka import ErrorCode, KafkaRaw

from .common import start_broker
from .cost import broker_cpu_seconds, start_profiler, stop_profiler

CONSUMER_GROUP_HEARTBEAT = 68
TOPIC, GROUP = "joins", "joins-group"
# Members never heartbeat again: no session may end while the bench runs.
CONFIG = """\
group.consumer.max.session.timeout.ms=3600000
group.consumer.session.timeout.ms=3600000
group.consumer.max.heartbeat.interval.ms=60000
group.consumer.heartbeat.interval.ms=60000
"""


def join(conn: KafkaRaw) -> None:
    answer = conn.request(CONSUMER_GROUP_HEARTBEAT, 1, group_id=GROUP, member_id=uuid.uuid4().hex, member_epoch=0,
                          rebalance_timeout=30_000, subscribed_topic_names=(TOPIC,), subscribed_topic_regex=None,
                          topic_partitions=(), instance_id=None, rack_id=None, server_assignor=None,
                          recv_timeout=120)
    if answer.error_code != ErrorCode.none:
        raise RuntimeError(f"join refused: {answer.error_code!r} {answer.error_message}")


def measure(sizes: list[int], partitions: int, window: int, profile: str | None) -> dict[int, float]:
    """Size -> ms of broker CPU per join when the group has that many members."""
    with tempfile.TemporaryDirectory(prefix="rmqk-joins-") as scratch:
        config = os.path.join(scratch, "server.properties")
        with open(config, "w") as f:
            f.write(CONFIG)
        broker = start_broker(extra=["--config", config])
        try:
            with KafkaRaw.connect(broker.bootstrap, timeout=120) as conn:
                conn.create_topic(TOPIC, partitions)
                members, result = 0, {}
                for size in sorted(sizes):
                    while members < size:
                        join(conn)
                        members += 1
                    spy = start_profiler(broker.process.pid, profile, f"joins-{size}") \
                        if profile and size == max(sizes) else None
                    cpu = broker_cpu_seconds(broker.process.pid)
                    for _ in range(window):
                        join(conn)
                    result[size] = (broker_cpu_seconds(broker.process.pid) - cpu) / window * 1000
                    members += window
                    if spy is not None:
                        stop_profiler(spy)
                    print(f"{size:>6} members: {result[size]:7.2f} ms broker CPU per join", flush=True)
                return result
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,1000,2000,4000")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--profile", default=None, help="directory for py-spy's stacks of the last window")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    began = time.perf_counter()
    result = measure(sizes, args.partitions, args.window, args.profile)
    print(json.dumps({"bench": "consumer_group_joins", "partitions": args.partitions, "window": args.window,
                      "ms_cpu_per_join": {str(k): round(v, 3) for k, v in result.items()},
                      "seconds": round(time.perf_counter() - began, 1)}))


if __name__ == "__main__":
    main()
