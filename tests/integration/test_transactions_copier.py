"""Exactly-once copying under crashes: the shape of Apache Kafka's system test TransactionsTest.

An input topic is filled (idempotent producer, acks=all) before a copier starts. The copier
(``txn_copier.py``, its own OS process) is a consume-transform-produce loop: a read_committed
group consumer and a transactional producer (fixed transactional.id) copy every record to
the output topic, same partition, and commit the consumer's positions with the transaction
every 750 records. While it runs, the test SIGKILLs the copier three times (restarting it:
the new one fences the old one and aborts its open transaction) and kill -9s the broker once
(restarting it on the same port; the copier reconnects by itself, or is restarted if it died
of a fatal error). When the group's committed offsets reach the input's end offsets, a
read_committed reader must see in the output exactly the input: every record once, in the
input's order per partition; so must a read_committed reader that followed the output from
the start while all of this happened (TransactionsTest's verifying consumer), since it must
never be handed a record of a transaction that is later aborted.

Each copier's events (JSON lines) and librdkafka log are kept in the test's tmp_path as
``copier-N.events`` / ``copier-N.stderr``; the statistics (kill points, aborts, the random
seed of the kill delays) are printed and appear in every assertion message.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(600)]

COPIER_SCRIPT = Path(__file__).with_name("txn_copier.py")


def _admin_create(broker, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(10)


def _fill_input(broker, topic: str, partitions: int, count: int) -> dict[int, list[bytes]]:
    """Produce "0".."count-1" (key = value), record i to partition i % partitions; returns the
    values per partition in offset order, as acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 20,
                         "batch.num.messages": 2000})
    stored: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
    failures: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            stored[msg.partition()][msg.offset()] = msg.value()

    for i in range(count):
        value = str(i).encode()
        while True:
            try:
                producer.produce(topic, value, value, partition=i % partitions,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0, "input not acknowledged in time"
    assert not failures, failures[:5]
    out = {}
    for p, by_offset in stored.items():
        assert sorted(by_offset) == list(range(len(by_offset))), f"input partition {p}: offset gaps"
        out[p] = [by_offset[o] for o in range(len(by_offset))]
        assert out[p] == [str(i).encode() for i in range(p, count, partitions)]
    return out


class Copier:
    """One txn_copier.py process and the events it printed."""

    def __init__(self, broker, args: list[str], log_dir: Path, number: int) -> None:
        self.stderr_path = log_dir / f"copier-{number}.stderr"
        self.events_path = log_dir / f"copier-{number}.events"
        self.events: list[dict] = []
        self.committed_sum = -1  # the group's committed offsets' sum after its last commit
        self._lock = threading.Lock()
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(COPIER_SCRIPT), broker.bootstrap_servers, *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.events_path, "wb") as log:  # kept next to the stderr, for post-mortems
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                try:
                    event = json.loads(line)
                except ValueError:
                    event = {"ev": "garbage", "line": line.decode("utf-8", "replace")}
                with self._lock:
                    self.events.append(event)
                    if event["ev"] in ("committed", "done"):
                        self.committed_sum = event["sum"]

    def count(self, ev: str) -> int:
        with self._lock:
            return sum(1 for e in self.events if e["ev"] == ev)

    def last(self, ev: str) -> dict | None:
        with self._lock:
            found = [e for e in self.events if e["ev"] == ev]
        return found[-1] if found else None

    def sigkill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._reader.join(5)

    def finish(self) -> None:
        if self.proc.poll() is None:
            self.sigkill()
        self._reader.join(5)

    def describe(self) -> str:
        if self.proc.poll() is None:  # a stuck copier: its Python stacks go to its stderr
            os.kill(self.proc.pid, signal.SIGUSR1)
            time.sleep(1)
        with self._lock:
            tail = self.events[-8:]
        stderr = self.stderr_path.read_text(errors="replace")[-8000:]
        return (f"copier pid {self.proc.pid} exit {self.proc.returncode}, last events "
                f"{json.dumps(tail)}\nstderr tail:\n{stderr}")


def _committed_offsets(broker, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        consumer.close()


def _read(broker, topic: str, partitions: int, isolation: str = "read_committed",
          timeout: float = 60) -> dict[int, list[bytes]]:
    """Every value a reader with this isolation level sees from offset 0 up to the end
    (partition EOF: the last stable offset for read_committed) of every partition."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": f"verify-{uuid.uuid4()}", "isolation.level": isolation,
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, (
                f"output not read to the end in {timeout} s: {len(at_end)} partitions at EOF, "
                f"{sum(map(len, out.values()))} values")
            for msg in consumer.consume(1000, 0.5):
                err = msg.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                out[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return out


def _run(broker, tmp_path: Path, *, partitions: int, count: int, kills: list[tuple[float, str]],
         name: str, copier_args: tuple[str, ...] = ()) -> dict:
    """Fill the input, copy it under the kill schedule ``[(fraction, "copier"|"broker")]``,
    check the output; returns statistics."""
    source, sink, group, txn_id = f"{name}-in", f"{name}-out", f"{name}-group", f"{name}-copier"
    _admin_create(broker, source, partitions)
    _admin_create(broker, sink, partitions)
    began = time.monotonic()
    expected = _fill_input(broker, source, partitions, count)
    stats: dict = {"fill_s": round(time.monotonic() - began, 1), "copier_kills": 0,
                   "broker_kills": 0, "fatal_restarts": 0, "aborts": 0, "commits": 0}
    args = [source, sink, group, txn_id, str(count), *copier_args]
    copiers: list[Copier] = []

    def start() -> Copier:
        copier = Copier(broker, args, tmp_path, len(copiers))
        copiers.append(copier)
        return copier

    def progress() -> int:
        for copier in reversed(copiers):
            if copier.committed_sum >= 0:
                return copier.committed_sum
        return 0

    def keep_alive(copier: Copier) -> Copier:
        """Restart a copier that died on its own (a fatal error); fail on any other exit."""
        status = copier.proc.poll()
        if status is None:
            return copier
        copier.finish()
        assert status == 3, f"copier exited {status} before the end: {copier.describe()}"
        stats["fatal_restarts"] += 1
        stats.setdefault("fatal_errors", []).append((copier.last("fatal") or {}).get("error"))
        return start()

    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    stats["seed"] = seed
    copy_began = time.monotonic()
    reader = ConcurrentReader(broker, sink, partitions)
    copier = start()
    try:
        since = (copier, 0)  # each kill waits for a commit made after the previous kill

        def copying() -> bool:
            return copier.count("committed") > (since[1] if copier is since[0] else 0)

        for fraction, what in kills:
            target = int(fraction * count)
            deadline = time.monotonic() + 60
            while progress() < target or not copying():
                assert time.monotonic() < deadline, (
                    f"no progress to {target}/{count} ({what} kill) in 60 s, at {progress()}: "
                    f"{copier.describe()}")
                copier = keep_alive(copier)
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.02))  # anywhere in the next transaction or two
            stats.setdefault("kill_points", []).append((what, progress()))
            if what == "copier":
                copier.sigkill()
                stats["copier_kills"] += 1
                copier = start()
            else:
                broker.kill()
                stats["broker_kills"] += 1
                broker.restart(same_port=True)
            since = (copier, copier.count("committed"))
        deadline = time.monotonic() + 180
        while copier.proc.poll() != 0:
            assert time.monotonic() < deadline, (
                f"the copier did not finish in 180 s, at {progress()}/{count}: {copier.describe()}")
            copier = keep_alive(copier)
            time.sleep(0.05)
        stats["copy_s"] = round(time.monotonic() - copy_began, 1)
    finally:
        for c in copiers:
            c.finish()
            stats["aborts"] += c.count("aborted")
            stats["commits"] += c.count("committed")
    try:
        assert stats["copier_kills"] == sum(1 for _, what in kills if what == "copier")
        committed = _committed_offsets(broker, group, source, partitions)
        ends = {p: len(values) for p, values in expected.items()}
        assert committed == ends, f"committed offsets {committed} != input end offsets {ends}"

        output = _read(broker, sink, partitions)
        # what aborted transactions left in the log (read_uncommitted sees it, markers aside)
        stats["aborted_records_in_output"] = (
            sum(map(len, _read(broker, sink, partitions, "read_uncommitted").values())) - count)
        stats["total_s"] = round(time.monotonic() - began, 1)
        _check_copy("the output read after the copy", output, expected, stats)
        _check_copy("the output read while copying", reader.result(count), expected, stats)
    finally:
        reader.close()
    return stats


def _check_copy(what: str, output: dict[int, list[bytes]], expected: dict[int, list[bytes]],
                stats: dict) -> None:
    """``output`` holds every input value exactly once, in the input's order per partition."""
    got_all = Counter(v for values in output.values() for v in values)
    want_all = Counter(v for values in expected.values() for v in values)
    duplicates = sorted((int(v), n) for v, n in got_all.items() if n > 1)
    missing = sorted(int(v) for v in want_all.keys() - got_all.keys())
    extra = sorted(got_all.keys() - want_all.keys())
    summary = f"{what}; stats {stats}"
    assert not duplicates, f"{len(duplicates)} values copied more than once, first {duplicates[:10]}; {summary}"
    assert not missing, f"{len(missing)} values never copied, first {missing[:10]}; {summary}"
    assert not extra, f"values not in the input: {extra[:10]}; {summary}"
    for p, want in expected.items():
        got = output.get(p, [])
        if got != want:
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                         min(len(got), len(want)))
            raise AssertionError(
                f"partition {p}: output ({len(got)} values) differs from input ({len(want)}) at "
                f"index {first}: {got[first:first + 5]} != {want[first:first + 5]}; {summary}")


class ConcurrentReader:
    """A read_committed consumer reading the output from offset 0 while the copier runs and
    the broker is killed (TransactionsTest's verifying consumer): it must never see a record
    of an aborted or still open transaction."""

    def __init__(self, broker, topic: str, partitions: int) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": broker.bootstrap_servers, "group.id": f"concurrent-{uuid.uuid4()}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100, "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500, "metadata.recovery.strategy": "none",
            "error_cb": lambda err: self.errors.append(str(err)),
            # librdkafka's chatter while the broker is down goes to Python logging
            "logger": logging.getLogger("rdkafka"),
        })
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self._consumer.consume(1000, 0.2):
                if msg.error() is not None:
                    self.errors.append(str(msg.error()))
                else:
                    self.values[msg.partition()].append(msg.value())

    def count(self) -> int:
        return sum(map(len, self.values.values()))

    def result(self, expect: int, timeout: float = 60) -> dict[int, list[bytes]]:
        """Wait for ``expect`` values, then for 1 s more (anything beyond is a duplicate)."""
        deadline = time.monotonic() + timeout
        while self.count() < expect and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)
        self.close()
        return self.values

    def close(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(10)
            self._consumer.close()


KILLS = [(0.15, "copier"), (0.30, "broker"), (0.45, "copier"), (0.70, "copier")]


# "async" is the broker's default (an append reaches the page cache at once, so a killed
# process loses nothing); "sync" acknowledges only after an fsync.
@pytest.mark.parametrize("flush", ["async", "sync"])
def test_copier_exactly_once_four_partitions(broker_factory, tmp_path, flush):
    broker = broker_factory(flush=flush)
    stats = _run(broker, tmp_path, partitions=4, count=100_000, kills=KILLS, name="eos4")
    print(f"copier stats: {stats}")


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_copier_exactly_once_one_partition_ordered(broker_factory, tmp_path, flush):
    broker = broker_factory(flush=flush)
    stats = _run(broker, tmp_path, partitions=1, count=33_333, kills=KILLS, name="eos1")
    print(f"copier stats: {stats}")
