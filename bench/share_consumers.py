"""Share consumers against a classic consumer group, confluent-kafka 2.16 on both sides (issue 23's
benchmark).

    python -m bench.share_consumers [--quick] [--records N[,N...]] [--partitions P[,P...]]
                                    [--consumers C] [--mode explicit|implicit] [--release F]

For each record count N (a broker process of its own, fresh data dir) and each partition count
P: N records of 100 B produced once on P partitions, then, against the same broker process,
three passes over the same data, each by a fresh group of C consumers (threads of this
process, one client each):

- ``classic``: a classic consumer group of C confluent-kafka Consumers (auto commit);
- ``share``: a share group of C ShareConsumers, explicit acknowledgement: one
  ``acknowledge(ACCEPT)`` per record and a ``commit_sync()`` per poll. Ack latency is the
  time from ``poll()`` returning a record to the ``commit_sync()`` carrying its acknowledgement
  returning (the broker answered it), every record of a poll counted;
- ``redelivery``: the same, but a fraction F of the records (offset % round(1/F) == 0) is
  RELEASEd on its first delivery and accepted when it comes back.

Prints records/s (records / wall time until the last record was accepted: the clients'
close is not counted), broker CPU microseconds per record (utime + stime of the broker
process from /proc), the clients' CPU per record and its share of one core over the pass
(this process: the C clients' threads and the Python loop under one GIL; near one core,
the clients rather than the broker bound the rate), ack latency p50/p99, and the broker's RSS
after producing and after the passes: compare two record counts for "memory flat in the
topic's size".
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.reliability_common import raw
from bench.share_fetch_raw import cpu_seconds
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from rmqkafka.adapter.embedded import EmbeddedBroker

QUICK_RECORDS = "20000,50000"
FULL_RECORDS = "200000,1000000"


def rss(pid: int) -> str:
    """The process's resident memory: total, and of it anonymous (heap) and file-backed
    (mapped segment files the page cache holds: not the broker's own growth)."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile"):
                fields[name] = int(value.split()[0]) / 1024
    return (f"RSS {fields.get('VmRSS', 0):.0f} MiB (anon {fields.get('RssAnon', 0):.0f}, "
            f"file {fields.get('RssFile', 0):.0f})")


@dataclass
class Progress:
    """What the consumer threads of one pass share: records done, when the last one was,
    ack latencies as (seconds, records) pairs, and redeliveries seen."""

    total: int
    done: int = 0
    finished: float | None = None
    latencies: list[tuple[float, int]] = field(default_factory=list)
    redelivered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, count: int) -> bool:
        """Count records done; False once the pass has all of them."""
        with self.lock:
            self.done += count
            if self.done >= self.total and self.finished is None:
                self.finished = time.perf_counter()
            return self.done < self.total

    def more(self) -> bool:
        with self.lock:
            return self.done < self.total

    def percentile(self, q: float) -> float | None:
        ordered = sorted(self.latencies)
        weight = sum(n for _, n in ordered)
        if not weight:
            return None
        rank, seen = q * weight, 0
        for seconds, n in ordered:
            seen += n
            if seen >= rank:
                return seconds
        return ordered[-1][0]


def run_threads(consumers: int, body: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=body, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def classic(bootstrap: str, topic: str, group: str, consumers: int, progress: Progress) -> None:
    def run(i: int) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"c{i}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True})
        c.subscribe([topic])
        while progress.more():
            got = sum(1 for m in c.consume(1000, 0.5) if m.error() is None)
            if got:
                progress.add(got)
        c.close()

    run_threads(consumers, run)


def shared(bootstrap: str, topic: str, group: str, consumers: int, mode: str, release_every: int,
           progress: Progress) -> None:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        conn.request(44, 1, validate_only=False, resources=[dict(
            resource_type=32, resource_name=group,
            configs=[dict(name="share.auto.offset.reset", config_operation=0, value="earliest")])])

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"s{i}",
                           "share.acknowledgement.mode": mode})
        c.subscribe([topic])
        latencies, redelivered = [], 0
        while progress.more():
            got = [m for m in c.poll(0.5) if m.error() is None]
            if not got:
                continue
            received = time.perf_counter()
            accepted = len(got)
            if mode == "explicit":
                for m in got:
                    if m.delivery_count() > 1:
                        redelivered += 1
                    if release_every and m.delivery_count() == 1 and m.offset() % release_every == 0:
                        c.acknowledge(m, AcknowledgeType.RELEASE)
                        accepted -= 1
                    else:
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync()
                latencies.append((time.perf_counter() - received, len(got)))
            progress.add(accepted)
        c.close()
        with progress.lock:
            progress.latencies += latencies
            progress.redelivered += redelivered

    run_threads(consumers, run)


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        conn.create_topic(topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, b"x" * 100, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def bench(records: int, partition_counts: list[int], consumers: int, mode: str, release: float) -> None:
    release_every = round(1 / release) if release > 0 else 0
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        print(f"== {records:,} records of 100 B, {consumers} consumers per group, broker pid {broker.pid}, "
              f"at start {rss(broker.pid)}", flush=True)
        for partitions in partition_counts:
            topic = f"bench-sc-{partitions}"
            produce(bootstrap, topic, records, partitions)
            print(f"-- {partitions} partition(s): produced, broker {rss(broker.pid)}", flush=True)
            passes = [
                ("classic group", lambda p: classic(bootstrap, topic, f"classic-{partitions}", consumers, p)),
                (f"share {mode}", lambda p: shared(bootstrap, topic, f"share-{partitions}", consumers, mode, 0, p)),
            ]
            if mode == "explicit" and release_every:
                passes.append((f"share, {release:.0%} released once",
                               lambda p: shared(bootstrap, topic, f"redeliver-{partitions}", consumers, mode,
                                                release_every, p)))
            rates = {}
            for name, run in passes:
                progress = Progress(records)
                cpu, mine, began = cpu_seconds(broker.pid), cpu_seconds(os.getpid()), time.perf_counter()
                run(progress)
                used, ended = cpu_seconds(broker.pid) - cpu, time.perf_counter()
                clients = cpu_seconds(os.getpid()) - mine  # to the clients' close: their share of a core
                wall = (progress.finished or ended) - began
                rates[name] = records / wall
                line = (f"{name:>28}: {records / wall:>9,.0f} records/s, broker CPU {used / records * 1e6:5.1f} us/record"
                        f", clients CPU {clients / records * 1e6:5.1f} us/record ({clients / (ended - began):.2f} core)"
                        f", {rss(broker.pid)}")
                if progress.latencies:
                    line += f", ack latency p50 {ms(progress.percentile(0.5))} p99 {ms(progress.percentile(0.99))}"
                if release_every and name.startswith("share,"):
                    line += f", redelivered {progress.redelivered:,}"
                if name != "classic group":
                    line += f" ({records / wall / rates['classic group']:.2f} x classic)"
                print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"records {QUICK_RECORDS} (default {FULL_RECORDS})")
    parser.add_argument("--records", help="record counts, comma-separated: a broker each")
    parser.add_argument("--partitions", default="1,4", help="partition counts, comma-separated (default 1,4)")
    parser.add_argument("--consumers", type=int, default=4, help="consumers per group (default 4)")
    parser.add_argument("--mode", choices=("implicit", "explicit"), default="explicit",
                        help="share acknowledgement mode (default explicit: ack latency is measured)")
    parser.add_argument("--release", type=float, default=0.1,
                        help="fraction released once in the redelivery pass (default 0.1; 0: no such pass)")
    args = parser.parse_args()
    counts = [int(n) for n in (args.records or (QUICK_RECORDS if args.quick else FULL_RECORDS)).split(",")]
    partitions = [int(p) for p in args.partitions.split(",")]
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}", flush=True)
    for records in counts:
        bench(records, partitions, args.consumers, args.mode, args.release)


if __name__ == "__main__":
    main()
