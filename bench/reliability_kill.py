"""kill -9 cycles: a durable broker SIGKILLed again and again under an idempotent producer
and a committing consumer group, then everything read back.

One broker (``--flush sync``) serves a topic of 4 partitions. One confluent-kafka producer
(``enable.idempotence``, acks=all) sends "0", "1", "2", ... round robin over the partitions
from a thread, and remembers the partition and offset of every record whose delivery report
came without an error. One confluent-kafka group member consumes and commits after every
poll, remembering the highest commit the broker acknowledged per partition.

Each cycle waits until both have made progress since the last restart, lets them run for a
random moment, SIGKILLs the broker and restarts it on the same port and data directory. The
same two clients stay up across every cycle: they reconnect, the producer retries what was
in flight (the broker must recognise what it stored before the kill), the member rejoins.
After each restart the group's committed offsets are read with OffsetFetch: none may be
below what was acknowledged before the kill or read after an earlier restart.

At the end the producer is flushed, the consumer is allowed to catch up, and every
partition is read back: no acknowledged record may be missing or stored elsewhere than
acknowledged, no number may be stored twice, and the offsets must be 0..n-1.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .reliability_common import QUIET, broker, raw, restart_same_port

TOPIC = "kill9"
GROUP = "kill9-group"
PARTITIONS = 4
OFFSET_FETCH = 9

_RECONNECT = {"reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
              "retry.backoff.ms": 50, "retry.backoff.max.ms": 200}


@dataclass
class KillReport:
    cycles: int
    acknowledged: int
    stored: int
    lost: int
    duplicated: int
    misplaced: int  # acknowledged at one offset, stored at another
    gaps: int
    commit_regressions: int
    commits: int
    consumed: int
    stalls: int  # cycles in which the clients made no progress within the time limit
    consumer_caught_up: bool
    seconds: float

    def failures(self) -> list[str]:
        """What broke an invariant, in words; empty when the run is clean."""
        counts = {"lost": self.lost, "duplicated": self.duplicated, "misplaced": self.misplaced,
                  "gaps": self.gaps, "commit_regressions": self.commit_regressions,
                  "stalls": self.stalls}
        problems = [f"{name}={value}" for name, value in counts.items() if value]
        if not self.consumer_caught_up:
            problems.append("the consumer group did not catch up")
        return problems

    def as_dict(self) -> dict:
        return asdict(self)


class NumberedProducer:
    """An idempotent producer sending numbers from a thread until :meth:`finish`."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[int, tuple[int, int]] = {}  # number -> (partition, offset)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5,
            # Long enough that a kill never fails a record: it is retried after the restart.
            "message.timeout.ms": 300_000, "request.timeout.ms": 5000, **_RECONNECT, **QUIET,
        })
        self._thread = threading.Thread(target=self._run, name="numbered-producer", daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            with self._lock:
                self.acked[int(msg.value())] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(TOPIC, value=str(number).encode(),
                                       partition=number % PARTITIONS, on_delivery=self._on_delivery)
            except BufferError:
                self._producer.poll(0.05)
                continue
            number += 1
            self._producer.poll(0)
            time.sleep(0.001)

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def finish(self, timeout: float) -> None:
        """Stop sending and wait for every delivery report (bounded by ``timeout``)."""
        self._stop.set()
        self._thread.join()
        self._producer.flush(timeout)

    def close(self) -> None:
        """After a failure: stop at once, dropping whatever is still queued."""
        self._stop.set()
        self._thread.join()
        self._producer.purge()


class CommittingConsumer:
    """A group member consuming from a thread and committing synchronously after each poll."""

    def __init__(self, bootstrap: str) -> None:
        self.committed: dict[int, int] = {}  # partition -> highest acknowledged commit
        self.commits = self.consumed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000, **_RECONNECT, **QUIET,
        })
        self._consumer.subscribe([TOPIC])
        self._thread = threading.Thread(target=self._run, name="committing-consumer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            positions: dict[int, int] = {}
            for message in self._consumer.consume(500, 0.2):
                if message.error() is None:
                    positions[message.partition()] = message.offset() + 1
                    self.consumed += 1
            if positions:
                self._commit(positions)
        self._consumer.close()

    def _commit(self, positions: dict[int, int]) -> None:
        offsets = [TopicPartition(TOPIC, p, o) for p, o in positions.items()]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            return  # the broker is down or the group is rebalancing: the next poll commits
        with self._lock:
            self.commits += 1
            for p, o in positions.items():
                self.committed[p] = max(self.committed.get(p, 0), o)

    def snapshot(self) -> dict[int, int]:
        with self._lock:
            return dict(self.committed)

    def close(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()


def committed_offsets(bootstrap: str) -> dict[int, int]:
    """The group's committed offsets as the broker reports them (OffsetFetch v6)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            with raw.KafkaRaw.connect(bootstrap) as conn:
                response = conn.request(OFFSET_FETCH, 6, group_id=GROUP, require_stable=False,
                                        topics=[{"name": TOPIC, "partition_indexes": range(PARTITIONS)}])
            if response.error_code == raw.ErrorCode.none:
                return {p.partition_index: p.committed_offset for p in response.topics[0].partitions}
        except (OSError, raw.ConnectionClosed):
            pass  # the broker is still recovering
        if time.monotonic() > deadline:
            raise TimeoutError("OffsetFetch kept failing after a restart")
        time.sleep(0.1)


def high_watermarks(bootstrap: str) -> dict[int, int]:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        return {p: conn.high_watermark(TOPIC, p) for p in range(PARTITIONS)}


def wait_for_progress(producer: NumberedProducer, consumer: CommittingConsumer,
                      timeout: float) -> bool:
    """Whether both clients got something acknowledged again within ``timeout`` s: a kill
    before they reconnect would test nothing."""
    acked, commits = producer.acked_count(), consumer.commits
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if producer.acked_count() >= acked + 20 and consumer.commits > commits:
            return True
        time.sleep(0.02)
    return False


def count_regressions(reported: dict[int, int], floor: dict[int, int]) -> int:
    """Partitions whose committed offset is below ``floor`` (what was already committed)."""
    return sum(1 for p, offset in floor.items() if reported.get(p, -1) < offset)


def wait_caught_up(bootstrap: str, consumer: CommittingConsumer, timeout: float) -> bool:
    """Whether the group's acknowledged commits reach every high watermark in time."""
    target = high_watermarks(bootstrap)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = consumer.snapshot()
        if all(done.get(p, 0) >= hw for p, hw in target.items()):
            return True
        time.sleep(0.1)
    return False


def read_back(bootstrap: str) -> tuple[dict[int, list[tuple[int, int]]], dict[int, int]]:
    """Every stored (offset, number) per partition, and each partition's high watermark."""
    with raw.KafkaRaw.connect(bootstrap, timeout=60) as conn:
        stored = {p: [(r.offset, int(r.value)) for r in conn.fetch_all(TOPIC, p)]
                  for p in range(PARTITIONS)}
        return stored, {p: conn.high_watermark(TOPIC, p) for p in range(PARTITIONS)}


def check_log(stored: dict[int, list[tuple[int, int]]], hws: dict[int, int],
              acked: dict[int, tuple[int, int]]) -> dict[str, int]:
    """lost / duplicated / misplaced / gaps of the stored log against the acknowledgements."""
    where = {number: (p, offset) for p, entries in stored.items() for offset, number in entries}
    counts = Counter(number for entries in stored.values() for _, number in entries)
    return {
        "stored": sum(counts.values()),
        "lost": sum(1 for number in acked if number not in where),
        "duplicated": sum(c - 1 for c in counts.values()),
        "misplaced": sum(1 for number, at in acked.items() if number in where and where[number] != at),
        "gaps": sum(hws[p] - len({offset for offset, _ in entries}) for p, entries in stored.items()),
    }


def run_kill_cycles(workdir: Path, cycles: int = 50, seed: int = 12,
                    progress_timeout: float = 30.0) -> KillReport:
    """``cycles`` SIGKILL + restart cycles; see the module docstring for what is checked."""
    rng = random.Random(seed)
    began = time.monotonic()
    with contextlib.ExitStack() as cleanup:
        instance = broker(workdir / "kill9", flush="sync")
        cleanup.callback(instance.close)
        with raw.KafkaRaw.connect(instance.bootstrap_servers) as conn:
            conn.create_topic(TOPIC, partitions=PARTITIONS)
        bootstrap = instance.bootstrap_servers
        producer = NumberedProducer(bootstrap)
        cleanup.callback(producer.close)
        consumer = CommittingConsumer(bootstrap)
        cleanup.callback(consumer.close)
        regressions = stalls = 0
        floor: dict[int, int] = {}
        for _ in range(cycles):
            stalls += not wait_for_progress(producer, consumer, progress_timeout)
            time.sleep(rng.uniform(0.0, 1.0))
            instance.kill()
            acknowledged = consumer.snapshot()
            floor = {p: max(floor.get(p, 0), acknowledged.get(p, 0)) for p in {*floor, *acknowledged}}
            restart_same_port(instance)
            reported = committed_offsets(bootstrap)
            regressions += count_regressions(reported, floor)
            floor = {p: max(floor.get(p, 0), reported.get(p, 0)) for p in {*floor, *reported}}
        producer.finish(timeout=120)
        caught_up = wait_caught_up(bootstrap, consumer, timeout=60)
        consumer.close()
        stored, hws = read_back(bootstrap)
        figures = check_log(stored, hws, producer.acked)
        return KillReport(cycles=cycles, acknowledged=len(producer.acked),
                          commit_regressions=regressions, commits=consumer.commits,
                          consumed=consumer.consumed, stalls=stalls, consumer_caught_up=caught_up,
                          seconds=round(time.monotonic() - began, 1), **figures)
