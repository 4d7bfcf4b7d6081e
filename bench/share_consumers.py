"""Share consumers against a classic consumer group, confluent-kafka 2.16 on both sides.

    python -m bench.share_consumers [--records N] [--partitions P] [--consumers C] [--mode implicit|explicit]

N records of 100 B on P partitions, produced once. Then, against the same broker process:
a classic group of one confluent-kafka Consumer reading them all, and C ShareConsumers of one
share group (each polling in its own thread) reading them all between them, acknowledging
implicitly (or explicitly, one acknowledge() per record and a commit_async() per poll).
Prints records/s and the broker's CPU microseconds per record for each, and the ratio.
"""

from __future__ import annotations

import argparse
import threading
import time

from bench.reliability_common import raw
from bench.share_fetch_raw import cpu_seconds
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from rmqkafka.adapter.embedded import EmbeddedBroker


def classic(bootstrap: str, topic: str, total: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-classic",
                         "auto.offset.reset": "earliest", "enable.auto.commit": True})
    consumer.subscribe([topic])
    seen = 0
    while seen < total:
        seen += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
    consumer.close()


def shared(bootstrap: str, topic: str, total: int, consumers: int, mode: str) -> None:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        conn.request(44, 1, validate_only=False, resources=[dict(
            resource_type=32, resource_name="bench-share",
            configs=[dict(name="share.auto.offset.reset", config_operation=0, value="earliest")])])
    seen = [0]
    lock = threading.Lock()

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "bench-share", "client.id": f"s{i}",
                           "share.acknowledgement.mode": mode})
        c.subscribe([topic])
        while True:
            with lock:
                if seen[0] >= total:
                    break
            got = [m for m in c.poll(0.5) if m.error() is None]
            if mode == "explicit":
                for m in got:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if got:
                    c.commit_async()
            with lock:
                seen[0] += len(got)
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--mode", choices=("implicit", "explicit"), default="implicit")
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        with raw.KafkaRaw.connect(bootstrap) as conn:
            conn.create_topic("bench-sc", args.partitions)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i in range(args.records):
            producer.produce("bench-sc", b"x" * 100, partition=i % args.partitions)
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush(60)
        results = {}
        for name, run in (("classic group", lambda: classic(bootstrap, "bench-sc", args.records)),
                          (f"share x{args.consumers} {args.mode}",
                           lambda: shared(bootstrap, "bench-sc", args.records, args.consumers, args.mode))):
            cpu, began = cpu_seconds(broker.pid), time.perf_counter()
            run()
            wall, used = time.perf_counter() - began, cpu_seconds(broker.pid) - cpu
            results[name] = args.records / wall
            print(f"{name:>22}: {args.records / wall:>9,.0f} records/s, "
                  f"broker CPU {used / args.records * 1e6:5.1f} us/record")
        classic_rate, share_rate = results.values()
        print(f"{'share / classic':>22}: {share_rate / classic_rate:.2f}")


if __name__ == "__main__":
    main()
