"""RocketMQ transaction messages: half + commit throughput and latency against plain produce,
and the check service's pass over 100,000 pending half messages (memory and pass time).

Usage:  python -m bench.half_messages [--quick]

Client: confluent-kafka (librdkafka), producers with ``enable.idempotence=true``,
``linger.ms=5``, each warmed up by one plain record (producer id and connections ready) before
it is timed; 100 B values; topics of 4 partitions, records round-robin over them.

(a) Throughput and latency, one broker with the default configuration, one run. A consumer
    (its own thread, ``fetch.wait.max.ms=10``, ``poll`` for the first record, then
    ``consume`` of what has arrived without waiting) subscribes to both topics before anything is
    sent and notes when each record arrives, matched by its ``UNIQ_KEY`` header.
    - plain: N records (N = 20,000; 2,000 with ``--quick``) produced to topic ``plain-*``
      with a ``UNIQ_KEY`` header and no transaction headers;
    - half + commit: N half messages (``TRAN_MSG=true``, ``PGROUP``, ``UNIQ_KEY``) produced
      to topic ``half-*``; each half message's delivery callback produces its end record
      (``TRAN_END=COMMIT``, same ``PGROUP`` / ``UNIQ_KEY``, same partition) on the same
      producer, so halves and ends are pipelined; a committed message becomes visible in its
      partition.
    messages/s = N / (last record visible at the consumer - first send), pipelined latency =
    visible - the record's send (for half + commit: the half message's send), p50 / p99, with
    all N in flight at once (queueing in the client included). Then one at a time (200
    rounds; 50 with ``--quick``): send (a half message, and its end once the half message is
    acknowledged), wait until the consumer has it, next; latency p50 / p99.
(b) The check service's pass, a second broker started with ``transactionTimeOut=0`` and
    ``transactionCheckInterval=30000`` (10000 with ``--quick``): P half messages (P = 100,000;
    10,000 with ``--quick``) of one group, never ended, produced within the first interval, so
    that the first pass (30 s after the broker started) finds all of them due. Measured:
    - broker RSS (psutil) before producing, once they are pending (settled 2 s), and after
      the pass (settled 2 s, its check requests read);
    - check requests' visibility: the check topic ``rmq_trans_check.<group>`` is created (4
      partitions, as the broker would) before the pass and a consumer assigned to it from
      offset 0; from the first check request it receives to the P-th;
    - the pass as clients see it: a thread sends a Metadata request (``list_topics``) every
      ~5 ms; the longest wait for an answer, or between two answers, from 1 s before the pass
      is due to the last check request received;
    - the same longest gap while the broker is idle with them pending, from 0.5 s after the
      last half message was acknowledged to 1 s before the pass is due ("idle stall");
    - the broker's CPU seconds (psutil, user + system) from 1 s before the pass is due to
      when the P-th check request has been received (the broker otherwise idle);
    - first check request received minus the pass's due time (broker ready + interval), and
      the longest Metadata gap from 1 s before the due time to that first check request:
      the pass's own blocking of the event loop (it then also serves the check requests);
    - idle broker CPU seconds per second (idle but for the Metadata requests, which run from
      before producing to the end): over 2 s before producing, and from 2 s after the last
      half message was acknowledged to 1 s before the pass; the size of the broker's
      checkpoint.json (which carries the pending table) with them pending.
    The pass runs in one synchronous step of the broker's event loop (HalfMessages.check_pass),
    so no check request is visible before all of them are written.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import os
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from .common import BrokerProcess, create_topic, start_broker

PARTITIONS = 4
VALUE = b"x" * 100
QUIET = {"log_level": 0}
GROUP = "bench-group"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"


def producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                     "batch.num.messages": 10_000, "queue.buffering.max.messages": 1_000_000, **QUIET})


def half_headers(key: bytes) -> list[tuple[str, bytes]]:
    return [("TRAN_MSG", b"true"), ("PGROUP", GROUP.encode()), ("UNIQ_KEY", key)]


def end_headers(key: bytes) -> list[tuple[str, bytes]]:
    return [("TRAN_END", b"COMMIT"), ("PGROUP", GROUP.encode()), ("UNIQ_KEY", key)]


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


class Watcher(threading.Thread):
    """A subscribed consumer noting (perf_counter) when each UNIQ_KEY arrives."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 10, **QUIET})
        self.assigned = threading.Event()
        self.consumer.subscribe(topics, on_assign=lambda _c, parts: self.assigned.set() if parts else None)
        self.seen: dict[bytes, float] = {}
        self.cond = threading.Condition()
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            # poll returns with the first record; consume(n, timeout) would wait out its timeout
            first = self.consumer.poll(0.05)
            if first is None:
                continue
            now = time.perf_counter()
            batch = [first, *self.consumer.consume(10_000, 0)]
            arrived = []
            for msg in batch:
                if msg.error() is None:
                    key = dict(msg.headers() or []).get("UNIQ_KEY")
                    if key is not None:
                        arrived.append(key)
            if arrived:
                with self.cond:
                    for key in arrived:
                        self.seen.setdefault(key, now)
                    self.cond.notify_all()
        self.consumer.close()

    def wait_for(self, keys, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not all(k in self.seen for k in keys):
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sum(1 for k in keys if k not in self.seen)
                    raise RuntimeError(f"{missing} record(s) not visible after {timeout} s")
                self.cond.wait(left)


def warm(bootstrap: str, topic: str) -> Producer:
    """A producer that has its producer id and connections: one plain record sent."""
    prod = producer(bootstrap)
    prod.produce(topic, b"warm-up", partition=0)
    if prod.flush(30):
        raise RuntimeError("the warm-up record was not acknowledged")
    return prod


def pipelined(bootstrap: str, topic: str, watcher: Watcher, count: int, half: bool) -> dict[str, float]:
    prod = warm(bootstrap, topic)
    prefix = f"{'h' if half else 'p'}-{uuid.uuid4().hex[:6]}-".encode()
    keys = [prefix + b"%06d" % i for i in range(count)]
    sent: dict[bytes, float] = {}
    failed: list[object] = []

    def ended(err, _msg) -> None:
        if err is not None:
            failed.append(err)

    def halved(key: bytes, err, msg) -> None:  # a half message acknowledged: send its end record
        if err is not None:
            failed.append(err)
            return
        while True:
            try:
                prod.produce(topic, b"", partition=msg.partition(), headers=end_headers(key), on_delivery=ended)
                return
            except BufferError:
                prod.poll(0.01)

    began = time.perf_counter()
    for i, key in enumerate(keys):
        headers = half_headers(key) if half else [("UNIQ_KEY", key)]
        while True:
            try:
                sent[key] = time.perf_counter()
                prod.produce(topic, VALUE, partition=i % PARTITIONS, headers=headers,
                             on_delivery=functools.partial(halved, key) if half else ended)
                break
            except BufferError:
                prod.poll(0.01)
        if i % 500 == 0:
            prod.poll(0)
    prod.flush(120)
    if half:
        prod.flush(120)  # the end records produced by the last callbacks
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, first: {failed[0]}")
    watcher.wait_for(keys, 120)
    with watcher.cond:
        latencies = [(watcher.seen[k] - sent[k]) * 1000 for k in keys]
        last = max(watcher.seen[k] for k in keys)
    return {"msgs/s": count / (last - began), "p50": pct(latencies, 0.50), "p99": pct(latencies, 0.99)}


def one_at_a_time(bootstrap: str, topic: str, watcher: Watcher, rounds: int, half: bool) -> dict[str, float]:
    prod = warm(bootstrap, topic)
    prefix = f"{'h1' if half else 'p1'}-{uuid.uuid4().hex[:6]}-".encode()
    samples = []
    for i in range(rounds):
        key = prefix + b"%06d" % i
        acked: list[object] = []
        report = acked.append
        time.sleep(0.02)  # let the consumer settle into its next fetch
        began = time.perf_counter()
        prod.produce(topic, VALUE, partition=i % PARTITIONS,
                     headers=half_headers(key) if half else [("UNIQ_KEY", key)],
                     on_delivery=lambda err, _m, report=report: report(err))
        if half:
            while not acked:
                prod.poll(0.001)
            if acked[0] is not None:
                raise RuntimeError(f"half message failed: {acked[0]}")
            prod.produce(topic, b"", partition=i % PARTITIONS, headers=end_headers(key))
        prod.poll(0)
        watcher.wait_for([key], 30)
        samples.append((watcher.seen[key] - began) * 1000)
    prod.flush(10)
    return {"p50": statistics.median(samples), "p99": pct(samples, 0.99)}


def part_a(count: int, rounds: int) -> dict[str, dict[str, float]]:
    broker = start_broker()
    try:
        plain_topic, half_topic = f"plain-{uuid.uuid4().hex[:8]}", f"half-{uuid.uuid4().hex[:8]}"
        for name in (plain_topic, half_topic):
            create_topic(broker.bootstrap, name, False, PARTITIONS)
        watcher = Watcher(broker.bootstrap, [plain_topic, half_topic])
        watcher.start()
        if not watcher.assigned.wait(30):
            raise RuntimeError("the consumer got no assignment")
        results = {"plain": pipelined(broker.bootstrap, plain_topic, watcher, count, False),
                   "half": pipelined(broker.bootstrap, half_topic, watcher, count, True)}
        results["plain"].update({f"1x {k}": v for k, v in
                                 one_at_a_time(broker.bootstrap, plain_topic, watcher, rounds, False).items()})
        results["half"].update({f"1x {k}": v for k, v in
                                one_at_a_time(broker.bootstrap, half_topic, watcher, rounds, True).items()})
        watcher.stopping = True
        watcher.join(5)
        print("  (a) done", flush=True)
        return results
    finally:
        broker.stop()


class Pinger(threading.Thread):
    """Metadata requests back to back (~5 ms apart): (sent, answered) perf_counter pairs."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        self.samples: list[tuple[float, float]] = []
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            began = time.perf_counter()
            with contextlib.suppress(Exception):  # a timeout is a (long) gap too
                self.admin.list_topics(topic=HALF_TOPIC, timeout=60)
            self.samples.append((began, time.perf_counter()))
            time.sleep(0.005)

    def longest_gap(self, start: float, end: float) -> float:
        """Seconds of the longest wait for an answer (or between answers) in [start, end]."""
        answers = [done for sent, done in self.samples if start <= done <= end]
        gaps = [b - a for a, b in itertools.pairwise(answers)]
        waits = [done - sent for sent, done in self.samples if start <= done <= end]
        return max(gaps + waits, default=float("nan"))


def half_status(bootstrap: str) -> dict:
    import json

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    [entries] = [f.result(30) for f in admin.describe_configs([ConfigResource(ResourceType.TOPIC, HALF_TOPIC)]).values()]
    return json.loads(entries["rmq.transaction.half.status"].value)


def broker_cpu(broker: BrokerProcess) -> float:
    times = psutil.Process(broker.process.pid).cpu_times()
    return times.user + times.system


def part_b(pending: int, interval_ms: int) -> dict[str, float]:
    fd, config = tempfile.mkstemp(suffix=".properties", prefix="rmqk-bench-")
    with os.fdopen(fd, "w") as out:
        out.write(f"transactionTimeOut=0\ntransactionCheckInterval={interval_ms}\n")
    broker = start_broker(extra=["--config", config])
    # the scheduler's first pass is due one interval after it started (just before ready)
    pass_due = time.perf_counter() + interval_ms / 1000
    results: dict[str, float] = {}
    try:
        topic, check_topic = f"pend-{uuid.uuid4().hex[:8]}", f"rmq_trans_check.{GROUP}"
        create_topic(broker.bootstrap, topic, False, PARTITIONS)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
        admin.create_topics([NewTopic(check_topic, 4, 1)])[check_topic].result(10)
        pinger = Pinger(broker.bootstrap)
        pinger.start()
        cpu, began = broker_cpu(broker), time.perf_counter()
        time.sleep(2)
        results["idle cpu before"] = (broker_cpu(broker) - cpu) / (time.perf_counter() - began)
        results["rss before MB"] = broker.rss_mb()
        prod = warm(broker.bootstrap, topic)
        failed: list[object] = []
        began = time.perf_counter()
        for i in range(pending):
            while True:
                try:
                    prod.produce(topic, VALUE, partition=i % PARTITIONS, headers=half_headers(b"pend-%07d" % i),
                                 on_delivery=lambda err, _m: failed.append(err) if err else None)
                    break
                except BufferError:
                    prod.poll(0.01)
            if i % 1000 == 0:
                prod.poll(0)
        prod.flush(120)
        results["half produce msgs/s"] = pending / (time.perf_counter() - began)
        if failed:
            raise RuntimeError(f"{len(failed)} half messages failed, first: {failed[0]}")
        produced = time.perf_counter()
        time.sleep(2)
        results["rss pending MB"] = broker.rss_mb()
        cpu, idle_from = broker_cpu(broker), time.perf_counter()
        status = half_status(broker.bootstrap)
        if status["pending"] != pending or status["checks_sent"]:
            raise RuntimeError(f"not all pending before the pass, or checked already: {status['pending']} pending, "
                               f"{status['checks_sent']} checks sent; raise the interval")
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                             "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760, **QUIET})
        consumer.assign([TopicPartition(check_topic, p, 0) for p in range(4)])
        consumer.consume(1, 0.5)
        wait = pass_due - time.perf_counter() - 1.0
        if wait < 0:
            raise RuntimeError("the pending half messages were not all produced a second before the pass")
        time.sleep(wait)
        cpu_before = broker_cpu(broker)
        results["idle cpu pending"] = (cpu_before - cpu) / (time.perf_counter() - idle_from)
        checkpoints = list(Path(broker.data_dir).rglob("checkpoint.json"))
        results["checkpoint MB"] = sum(path.stat().st_size for path in checkpoints) / 1e6
        watch_from = time.perf_counter()
        first = last = None
        got = 0
        deadline = time.perf_counter() + 300
        while got < pending and time.perf_counter() < deadline:
            for msg in consumer.consume(10_000, 0.05):
                if msg.error() is None:
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    got += 1
        cpu_after = broker_cpu(broker)
        pinger.stopping = True
        pinger.join(60)
        consumer.close()
        if got < pending:
            raise RuntimeError(f"only {got} of {pending} check requests arrived")
        results["checks first -> all visible s"] = last - first
        results["stall s"] = pinger.longest_gap(watch_from, last)
        results["blocked s"] = pinger.longest_gap(watch_from, first)
        results["idle stall s"] = pinger.longest_gap(produced + 0.5, watch_from)
        results["broker cpu s"] = cpu_after - cpu_before
        results["pass due -> first check s"] = first - pass_due
        time.sleep(2)
        results["rss after pass MB"] = broker.rss_mb()
        status = half_status(broker.bootstrap)
        results["checks sent"] = status["checks_sent"]
        print("  (b) done", flush=True)
        return results
    finally:
        broker.stop()
        os.unlink(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller workload for a smoke run")
    args = parser.parse_args()
    count, rounds = (2_000, 50) if args.quick else (20_000, 200)
    pending, interval_ms = (10_000, 10_000) if args.quick else (100_000, 30_000)

    a = part_a(count, rounds)
    b = part_b(pending, interval_ms)

    plain, half = a["plain"], a["half"]
    print(f"\n(a) {count} messages x 100 B on {PARTITIONS} partitions, idempotent producer, linger.ms=5; "
          f"client confluent-kafka (librdkafka)")
    print(f"{'metric':44} {'plain':>10} {'half+commit':>12} {'ratio':>7}")
    rows = [("msgs/s (first send -> last visible)", "msgs/s"),
            (f"latency p50 ms (pipelined, {count} in flight)", "p50"),
            (f"latency p99 ms (pipelined, {count} in flight)", "p99"),
            (f"latency p50 ms (one at a time, {rounds} rounds)", "1x p50"),
            (f"latency p99 ms (one at a time, {rounds} rounds)", "1x p99")]
    for label, key in rows:
        print(f"{label:44} {plain[key]:10.1f} {half[key]:12.1f} {half[key] / plain[key]:7.2f}")
    print(f"\n(b) {pending} pending half messages, transactionTimeOut=0, transactionCheckInterval={interval_ms}")
    print(f"{'half messages produced msgs/s':44} {b['half produce msgs/s']:10.1f}")
    print(f"{'broker RSS before producing MB':44} {b['rss before MB']:10.1f}")
    print(f"{'broker RSS with them pending MB':44} {b['rss pending MB']:10.1f}  "
          f"(+{b['rss pending MB'] - b['rss before MB']:.1f})")
    print(f"{'broker RSS after the pass MB':44} {b['rss after pass MB']:10.1f}  "
          f"(+{b['rss after pass MB'] - b['rss pending MB']:.1f})")
    print(f"{'idle broker CPU s/s, before producing':44} {b['idle cpu before']:10.3f}")
    print(f"{'idle broker CPU s/s, with them pending':44} {b['idle cpu pending']:10.3f}")
    print(f"{'idle, pending: longest Metadata stall s':44} {b['idle stall s']:10.3f}")
    print(f"{'checkpoint.json with them pending MB':44} {b['checkpoint MB']:10.1f}")
    print(f"{'pass: due -> first check request seen s':44} {b['pass due -> first check s']:10.3f}")
    print(f"{'pass: longest Metadata gap until then s':44} {b['blocked s']:10.3f}")
    print(f"{'pass: first -> last check request seen s':44} {b['checks first -> all visible s']:10.3f}")
    print(f"{'pass: longest Metadata gap until last s':44} {b['stall s']:10.3f}")
    print(f"{'pass: broker CPU s (until all checks read)':44} {b['broker cpu s']:10.3f}")
    print(f"{'check requests sent (broker counter)':44} {b['checks sent']:10.0f}")


if __name__ == "__main__":
    main()
