"""What one sample of the console's history costs the broker's loop (adapter.console_history).

``python -m bench.console_history [--topics 1000] [--partitions 3] [--groups 200]``: starts a
broker in this process (metrics port on, so the sampler exists), creates the topics, writes
one record to every partition and commits offsets for the groups (each group on 5 topics,
all partitions), then times ``ConsoleApi.sample`` on the loop (the work the sampler does every
5 s) and ``/api/history``'s document, and prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time

from rmqkafka.adapter.broker import Broker
from rmqkafka.adapter.properties import build_config


def _populate(bootstrap: str, topics: int, partitions: int, groups: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    names = [f"t{i:05}" for i in range(topics)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for start in range(0, topics, 500):
        for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names[start:start + 500]]).values():
            future.result(120)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for name in names:
        for p in range(partitions):
            producer.produce(name, b"x", partition=p)
    assert producer.flush(300) == 0
    for g in range(groups):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{g:04}", "enable.auto.commit": False})
        offsets = [TopicPartition(names[(g * 5 + k) % topics], p, 1) for k in range(5) for p in range(partitions)]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()


async def run(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as data_dir:
        config = build_config({}, port=0, data_dir=data_dir, metrics_port=0)
        broker = Broker(config)
        host, port = await broker.start()
        try:
            started = time.monotonic()
            await asyncio.to_thread(_populate, f"{host}:{port}", args.topics, args.partitions, args.groups)
            populated = time.monotonic() - started
            api, ctx = broker._watch.api, broker.context
            samples, documents = [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                api.sample(ctx)
                samples.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                json.dumps(api.history_document(ctx))
                documents.append(time.perf_counter() - t0)
            return {"topics": args.topics, "partitions": args.partitions, "groups": args.groups,
                    "populate_s": round(populated, 1),
                    "sample_ms_median": round(statistics.median(samples) * 1000, 2),
                    "sample_ms_max": round(max(samples) * 1000, 2),
                    "history_document_ms_median": round(statistics.median(documents) * 1000, 2)}
        finally:
            await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
