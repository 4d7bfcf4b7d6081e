"""Consumer-group benchmark: rmqkafka vs the librdkafka mock cluster, same workload, one run.

Usage:  python -m bench.groups_vs_mock [--quick] [--runs N] [--protocols classic,consumer]
        [--consumer-session-timeout-ms MS] [--consumer-heartbeat-ms MS]   (--help explains)

For both targets and both group protocols (``classic``: JoinGroup/SyncGroup, librdkafka's
default eager assignor; ``consumer``: KIP-848 ConsumerGroupHeartbeat, the broker's uniform
assignor, incremental assignments), with confluent-kafka (librdkafka) as the client and a
group of 4 consumer processes (processes, so that the clients' Python loops are not
serialised by one GIL):

- drain: pre-produce records with 100-byte values to 8 partitions; the members subscribe
  with their partitions parked at the log end until the group is stable (4 members own all
  partitions: "subscribe -> 4 members own all partitions"), then on "go" all seek to offset 0
  and consume everything, each committing asynchronously every 10,000 records and
  synchronously at the end (all members commit before any leaves, so no final commit meets
  a rebalance). "drain" runs from go until every partition's position is at its log end
  offset; "total" from subscribe until every member has committed and closed. (Parking
  rather than pause(): librdkafka takes 0.5-1 s from resume() to its first fetch, the same
  against both targets, which would swamp the drain time.) Async commit latency is commit()
  -> on_commit callback, which the client serves at its next consume() call, so it is an
  upper bound. Afterwards the group's committed offsets are compared with the log end
  offsets. Members use fetch.wait.max.ms=100: the mock holds a fetch that finds no data for
  the full wait, which would otherwise add up to 0.5 s to its start. The broker's CPU for the
  drain (user + system of its process, psutil, from go until the parent sees the drain done)
  per record is reported for rmqkafka (the mock runs inside this process).
- crash: a fresh group of 4 on a topic with a steady trickle of new records; once it is
  stable, the member owning partition 0 is SIGKILLed. Classic members ask for
  session.timeout.ms=6000, heartbeat.interval.ms=1000; with the consumer protocol the broker
  decides: group.consumer.session.timeout.ms=45000 and group.consumer.heartbeat.interval.ms=
  5000 (the least Kafka allows by default; --consumer-* change both targets). The survivors
  report every revoke, assignment and first record per newly assigned partition with
  timestamps (CLOCK_MONOTONIC, system-wide); reported: kill -> first rebalance callback (the
  coordinator noticed), -> survivors own all partitions, -> the dead member's partitions are
  consumed again, -> every partition that moved is consumed again (classic moves all of them,
  the consumer protocol only the dead member's).

The mock auto-creates topics with 4 partitions and has no CreateTopics handler, and
``test.mock.num.brokers`` has no partition-count setting; but the librdkafka inside the
confluent-kafka wheel exports its C mock API, so this benchmark makes its own mock cluster
through ctypes, creates 8-partition topics with ``rd_kafka_mock_topic_create`` and sets the
mock's initial rebalance delay to 0 like ours (falling back to the 4-partition ``MockCluster``
if those symbols are missing). The mock keeps only ~5 MB per partition, so it gets 40,000
records per partition; ours is measured on that count too (the compared rows) and on
1,000,000. A full run repeats each drain 3 times (interleaved) and reports medians; the
crash is measured once per target and protocol. A summary table and the issue's targets
(consumer-protocol crash recovery within session timeout + one heartbeat interval; its drain
no slower than classic's) end the output. Note that the mock's classic group coordinator completes
a join round whose membership changed only after a fixed session.timeout.ms - 1000 ms timer
(rdkafka_mock_cgrp.c), so its rebalance times are a property of that timer.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import math
import multiprocessing as mp
import os
import queue
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import confluent_kafka
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from .common import MockCluster, duration_summary, metrics_url, request_durations, start_broker

MEMBERS = 4
PARTITIONS = 8
VALUE = b"v" * 100
COMMIT_EVERY = 10_000
SESSION_TIMEOUT_MS = 6000  # classic members' session.timeout.ms
HEARTBEAT_MS = 1000  # classic members' heartbeat.interval.ms
# The consumer protocol's timeouts are the broker's (the client may not set them): the lowest
# group.consumer.session.timeout.ms Kafka allows with its default bounds
# (group.consumer.min.session.timeout.ms = 45000) and the lowest heartbeat interval
# (group.consumer.min.heartbeat.interval.ms = 5000). The mock is given the same.
CONSUMER_SESSION_TIMEOUT_MS = 45_000
CONSUMER_HEARTBEAT_MS = 5_000
PROTOCOLS = ("classic", "consumer")
RUNS = 3  # drains per target in a full run (median reported)
FETCH_WAIT_MS = 100  # bounds the mock's habit of holding an empty fetch for the full wait
TRICKLE_PER_S = 2000  # background produce rate during the crash phase
MOCK_PER_PARTITION = 40_000  # 100-byte records per partition the mock keeps with margin (~4.4 MB)
QUIET = {"log_level": 0}


# ---------------------------------------------------------------------------- the mock


class CMockCluster:
    """librdkafka's mock cluster made through its C API (ctypes), so topics can have any
    number of partitions and the initial rebalance delay can be set."""

    def __init__(self, session_timeout_ms: int, heartbeat_ms: int) -> None:
        libs = os.path.join(
            os.path.dirname(os.path.dirname(confluent_kafka.__file__)),
            "confluent_kafka.libs",
        )
        candidates = glob.glob(os.path.join(libs, "librdkafka*.so*")) or ["librdkafka.so.1"]
        lib = ctypes.CDLL(candidates[0])
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        lib.rd_kafka_conf_new.restype = vp
        lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
        lib.rd_kafka_new.restype = vp
        lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
        lib.rd_kafka_destroy.argtypes = [vp]
        lib.rd_kafka_mock_cluster_new.restype = vp
        lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [vp]
        lib.rd_kafka_mock_cluster_bootstraps.restype = cp
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
        lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [
            vp,
            ctypes.c_int32,
        ]
        lib.rd_kafka_mock_set_group_consumer_session_timeout_ms.argtypes = [vp, ctypes.c_int]
        lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms.argtypes = [vp, ctypes.c_int]
        began = time.perf_counter()
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", errstr, 512)
        self._rk = lib.rd_kafka_new(0, conf, errstr, 512)  # RD_KAFKA_PRODUCER; owns conf now
        if not self._rk:
            raise RuntimeError(f"rd_kafka_new: {errstr.value.decode()}")
        self._mc = lib.rd_kafka_mock_cluster_new(self._rk, 1)
        if not self._mc:
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        # Kafka's default is 3 s, testcontainers and rmqkafka use 0: same as ours.
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mc, 0)
        # Consumer protocol (KIP-848) groups: the broker's session timeout and heartbeat.
        lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(self._mc, session_timeout_ms)
        lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(self._mc, heartbeat_ms)
        self._lib = lib
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()
        self.ready_seconds = time.perf_counter() - began

    def create_topic(self, name: str, partitions: int) -> None:
        err = self._lib.rd_kafka_mock_topic_create(self._mc, name.encode(), partitions, 1)
        if err:
            raise RuntimeError(f"rd_kafka_mock_topic_create({name}): error {err}")

    def close(self) -> None:
        self._lib.rd_kafka_mock_cluster_destroy(self._mc)
        self._lib.rd_kafka_destroy(self._rk)


@dataclass
class Target:
    name: str
    bootstrap: str
    partitions: int
    create: Callable[[str], None]
    notes: list[str] = field(default_factory=list)
    cpu_seconds: Callable[[], float] | None = None  # the broker process's user + system CPU
    # The broker's own OffsetCommit durations so far (its /metrics histogram; none for the mock)
    commit_durations: Callable[[], dict[str, float]] | None = None


def process_cpu(pid: int) -> Callable[[], float]:
    import psutil

    process = psutil.Process(pid)

    def read() -> float:
        times = process.cpu_times()
        return times.user + times.system

    return read


def broker_target(bootstrap: str, pid: int, url: str) -> Target:
    from confluent_kafka.admin import AdminClient, NewTopic

    def create(name: str) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(10)

    return Target("rmqkafka", bootstrap, PARTITIONS, create, cpu_seconds=process_cpu(pid),
                  commit_durations=lambda: request_durations(url, "OffsetCommit"))


def mock_target(session_timeout_ms: int, heartbeat_ms: int) -> tuple[Target, object]:
    try:
        mock = CMockCluster(session_timeout_ms, heartbeat_ms)
        return Target(
            "mock",
            mock.bootstrap,
            PARTITIONS,
            lambda n: mock.create_topic(n, PARTITIONS),
            [("mock: 8-partition topics via rd_kafka_mock_topic_create (ctypes), initial rebalance delay 0")],
        ), mock
    except (OSError, AttributeError, RuntimeError) as exc:
        mock = MockCluster()

        def create(name: str) -> None:  # a producer's Metadata request auto-creates it (4 partitions)
            Producer({"bootstrap.servers": mock.bootstrap, **QUIET}).list_topics(name, timeout=10)

        return Target(
            "mock",
            mock.bootstrap,
            4,
            create,
            [
                (
                    f"mock: C mock API unavailable ({exc}); 4 auto-created partitions, "
                    "initial rebalance delay at librdkafka's default"
                )
            ],
        ), None


# ---------------------------------------------------------------------------- producing


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            **QUIET,
        }
    )
    failed: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err:
            failed.append(err)

    began = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % partitions, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records still undelivered after 120 s")
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed, first: {failed[0]}")
    return time.perf_counter() - began


def watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"wm-{uuid.uuid4().hex[:6]}",
            **QUIET,
        }
    )
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)}
    finally:
        c.close()


class Trickle(threading.Thread):
    """A steady stream of records to every partition (the crash phase's live traffic)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, **QUIET})
        self.topic, self.partitions = topic, partitions
        self.stop = threading.Event()

    def run(self) -> None:
        i = 0
        step = TRICKLE_PER_S // 100
        while not self.stop.is_set():
            for _ in range(step):
                self.producer.produce(self.topic, VALUE, partition=i % self.partitions)
                i += 1
            self.producer.poll(0)
            time.sleep(0.01)
        self.producer.flush(10)


# ---------------------------------------------------------------------------- a member


def member(
    idx: int,
    bootstrap: str,
    topic: str,
    group: str,
    commit_every: int,
    events: mp.Queue,
    go: mp.Event,
    consume: mp.Event,
    stop: mp.Event,
    leave: mp.Event,
    park_at: dict[int, int],
    protocol: str,
) -> None:
    """One group member (a process) speaking ``protocol`` (classic: eager rebalances with the
    default assignor; consumer: KIP-848, incremental). It subscribes on ``go``; until ``consume`` is set it
    parks its partitions at ``park_at`` (the log end offsets), then seeks them to offset 0; on
    ``stop`` it commits synchronously and leaves the group only on ``leave`` (so that no
    member's leaving fails another's final commit with REBALANCE_IN_PROGRESS). It reports
    (kind, idx, monotonic time, data) on ``events``, kind one of ready, assign, revoke (data:
    the partitions it owns after the callback, whatever the protocol), first (first record of
    a partition after it was assigned), pos (positions), error, committed, final.
    CLOCK_MONOTONIC is system-wide on Linux, so the parent can compare the members' times
    with its own."""
    pending: deque[float] = deque()  # send times of async commits not yet answered
    commit_ms: list[float] = []
    commit_errors: dict[str, int] = {}
    fresh: set[int] = set()  # assigned, no record seen yet
    owned: set[int] = set()
    incremental = protocol == "consumer"
    final = False
    parked = False

    def count_error(name: str) -> None:
        commit_errors[name] = commit_errors.get(name, 0) + 1

    def on_commit(err: KafkaError | None, _parts: list[TopicPartition]) -> None:
        if final or not pending:
            return
        sent = pending.popleft()
        if err is not None:
            count_error(err.name())
        else:
            commit_ms.append((time.monotonic() - sent) * 1000)

    def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
        nonlocal parked
        if not consume.is_set():  # park at the log end (nothing to fetch) until ``consume``
            for tp in parts:
                # An absolute offset: a logical one (OFFSET_END) is resolved by a ListOffsets
                # whose answer can land after the seek below and undo it.
                tp.offset = park_at[tp.partition]
            parked = True
        if incremental:  # parts are the added partitions only
            c.incremental_assign(parts)
        else:
            c.assign(parts)
            owned.clear()
            fresh.clear()
        added = {p.partition for p in parts}
        owned.update(added)
        fresh.update(added)
        events.put(("assign", idx, time.monotonic(), sorted(owned)))

    def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
        if incremental:
            c.incremental_unassign(parts)
            owned.difference_update(p.partition for p in parts)
            fresh.difference_update(p.partition for p in parts)
        else:
            owned.clear()
            fresh.clear()
        events.put(("revoke", idx, time.monotonic(), sorted(owned)))

    timeouts = (
        {"group.protocol": "consumer"}  # the broker sets the session timeout and heartbeat
        if incremental
        else {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": HEARTBEAT_MS}
    )

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **timeouts,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "on_commit": on_commit,
            **QUIET,
        }
    )
    events.put(("ready", idx, time.monotonic(), os.getpid()))
    go.wait()
    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    received = since_commit = 0
    last_report = 0.0
    unreported = False
    while not stop.is_set():
        if parked and consume.is_set():
            start = [TopicPartition(topic, tp.partition, 0) for tp in consumer.assignment()]
            try:
                for tp in start:
                    consumer.seek(tp)
            except KafkaException:  # a fetcher not started yet: assign the start offsets instead
                consumer.assign(start)
            parked = False
        messages = consumer.consume(10_000, 0.01 if parked else 0.2)  # parked: notice "go" soon
        now = time.monotonic()
        if messages:
            bad = [m.error() for m in messages if m.error() is not None]
            if bad:
                events.put(("error", idx, now, str(bad[0])))
            received += len(messages) - len(bad)
            since_commit += len(messages)
            unreported = True
            if fresh:
                for m in messages:
                    if m.partition() in fresh:
                        fresh.discard(m.partition())
                        events.put(("first", idx, now, m.partition()))
            if since_commit >= commit_every:
                pending.append(time.monotonic())
                try:
                    consumer.commit(asynchronous=True)
                except KafkaException as exc:
                    pending.pop()
                    count_error(exc.args[0].name())
                since_commit = 0
        if unreported and (len(messages) < 10_000 or now - last_report >= 0.05):
            positions = consumer.position(consumer.assignment())
            events.put(("pos", idx, now, {tp.partition: tp.offset for tp in positions}))
            last_report, unreported = now, False
    final = True
    began = time.monotonic()
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:  # _NO_OFFSET: nothing consumed since the last commit
        if exc.args[0].code() != KafkaError._NO_OFFSET:
            count_error(exc.args[0].name())
    sync_ms = (time.monotonic() - began) * 1000
    events.put(("committed", idx, time.monotonic(), None))
    leave.wait(60)
    consumer.close()
    events.put(
        (
            "final",
            idx,
            time.monotonic(),
            {
                "received": received,
                "commit_ms": commit_ms,
                "sync_ms": sync_ms,
                "commit_errors": commit_errors,
            },
        )
    )


# ---------------------------------------------------------------------------- the group


class Group:
    """MEMBERS member processes of one group, started together, and their event log."""

    def __init__(
        self,
        target: Target,
        topic: str,
        commit_every: int,
        protocol: str,
        park_at: dict[int, int] | None = None,
    ) -> None:
        ctx = mp.get_context("spawn")  # never fork a process that runs librdkafka threads
        self.events: mp.Queue = ctx.Queue()
        self.go, self.consume, self.stop, self.leave = ctx.Event(), ctx.Event(), ctx.Event(), ctx.Event()
        self.group = f"bench-{uuid.uuid4().hex[:8]}"
        self.log: list[tuple[str, int, float, object]] = []
        self.procs = [
            ctx.Process(
                target=member,
                args=(
                    i,
                    target.bootstrap,
                    topic,
                    self.group,
                    commit_every,
                    self.events,
                    self.go,
                    self.consume,
                    self.stop,
                    self.leave,
                    park_at or {},
                    protocol,
                ),
                daemon=True,
            )
            for i in range(MEMBERS)
        ]
        for proc in self.procs:
            proc.start()
        self.wait_for(
            lambda: sum(e[0] == "ready" for e in self.log) == MEMBERS,
            60,
            "members ready",
        )

    def start(self, parked: bool) -> float:
        """Release the members to subscribe; with ``parked`` they consume only on ``resume``."""
        if not parked:
            self.consume.set()
        began = time.monotonic()
        self.go.set()
        return began

    def resume(self) -> float:
        began = time.monotonic()
        self.consume.set()
        return began

    def pump(self, timeout: float) -> None:
        """Move events that arrive within ``timeout`` s into the log."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            self.log.append(event)
            if event[0] == "error":
                print(f"    member {event[1]}: {event[3]}", flush=True)

    def wait_for(self, done, timeout: float, what: str) -> float:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
            dead = [i for i, p in enumerate(self.procs) if p.exitcode not in (None, 0, -9)]
            if dead:
                raise RuntimeError(f"member(s) {dead} exited while waiting for {what}")
            self.pump(0.05)
        return time.monotonic()

    def assignments(self, since: float = 0.0, members: set[int] | None = None) -> dict[int, list[int]]:
        """Each member's current partitions (after its last assign/revoke event at >= since)."""
        current: dict[int, list[int]] = {}
        for kind, idx, t, data in self.log:
            if t >= since and kind in ("assign", "revoke") and (members is None or idx in members):
                current[idx] = data
        return current

    def finish(self, timeout: float = 30) -> dict[int, dict]:
        """Stop consuming, let every live member commit, then let them all leave."""
        self.stop.set()
        alive = {i for i, p in enumerate(self.procs) if p.exitcode is None and p.is_alive()}
        self.wait_for(
            lambda: {e[1] for e in self.log if e[0] == "committed"} >= alive, timeout, "final commits"
        )
        self.leave.set()
        self.wait_for(
            lambda: {e[1] for e in self.log if e[0] == "final"} >= alive, timeout, "members to leave"
        )
        for proc in self.procs:
            proc.join(10)
        return {e[1]: e[3] for e in self.log if e[0] == "final"}

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def covers(assignment: dict[int, list[int]], partitions: int, members: int) -> bool:
    owned = [p for parts in assignment.values() for p in parts]
    return len(assignment) == members and sorted(owned) == list(range(partitions))


def covered_at(
    log: list,
    partitions: int,
    members: int,
    since: float = 0.0,
    who: set[int] | None = None,
    initial: dict[int, list[int]] | None = None,
) -> float | None:
    """Time of the first assign/revoke event (at >= ``since``; before it, members own
    ``initial``) after which ``members`` members (of ``who``) together own each partition
    exactly once."""
    current: dict[int, list[int]] = dict(initial or {})
    for kind, idx, t, data in log:
        if t >= since and kind in ("assign", "revoke") and (who is None or idx in who):
            current[idx] = data
            if covers(current, partitions, members):
                return t
    return None


def drain_state(group: Group, ends: dict[int, int], since: float) -> str:
    """What a stuck drain looks like: per partition its end, best position and who reported it."""
    best: dict[int, tuple[int, int, float]] = {}
    last_seen: dict[int, float] = {}
    for kind, idx, t, data in group.log:
        last_seen[idx] = t
        if kind == "pos":
            for p, off in data.items():
                if p not in best or off > best[p][0]:
                    best[p] = (off, idx, t - since)
    lines = [f"  partition {p}: end {ends[p]}, best position {best.get(p)}" for p in sorted(ends)]
    lines.append(f"  assignment {group.assignments()}")
    lines.append(
        f"  last event per member (s after go): { {i: round(t - since, 2) for i, t in last_seen.items()} }"
    )
    lines.append(f"  members alive: {[p.is_alive() for p in group.procs]}")
    return "\n".join(lines)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------- phases


def drain(target: Target, count: int, protocol: str) -> dict[str, float | str]:
    topic = f"drain-{uuid.uuid4().hex[:8]}"
    target.create(topic)
    produce_s = produce(target.bootstrap, topic, count, target.partitions)
    marks = watermarks(target.bootstrap, topic, target.partitions)
    if any(low != 0 for low, _ in marks.values()):
        raise RuntimeError(f"{target.name} dropped records (log start offsets {marks})")
    ends = {p: high for p, (_low, high) in marks.items()}
    assert sum(ends.values()) == count, (ends, count)

    group = Group(target, topic, COMMIT_EVERY, protocol, park_at=ends)
    try:
        began = group.start(parked=True)
        group.wait_for(
            lambda: covers(group.assignments(), target.partitions, MEMBERS),
            120,
            f"{target.name} group of {MEMBERS} to own {target.partitions} partitions",
        )
        stable_at = covered_at(group.log, target.partitions, MEMBERS)
        rebalances = sum(kind == "assign" for kind, *_ in group.log)
        cpu_before = target.cpu_seconds() if target.cpu_seconds else float("nan")
        commits_before = target.commit_durations() if target.commit_durations else None
        resumed = group.resume()
        reached: dict[int, float] = {}
        scanned = 0

        def all_at_end() -> bool:
            nonlocal scanned
            fresh, scanned = group.log[scanned:], len(group.log)
            for kind, _idx, t, data in fresh:
                if kind == "pos":
                    for p, off in data.items():
                        if off >= ends[p] and p not in reached:
                            reached[p] = t
            return len(reached) == target.partitions

        try:
            group.wait_for(all_at_end, 120, f"{target.name} group to drain {count} records")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{drain_state(group, ends, resumed)}") from None
        drained = max(reached.values())
        # Read when the parent notices the drain: a little after it, so a slight overestimate.
        cpu_used = (target.cpu_seconds() if target.cpu_seconds else float("nan")) - cpu_before
        final_assignment = group.assignments()  # before close() revokes everything
        more_rebalances = sum(kind == "assign" for kind, *_ in group.log) - rebalances
        finals = group.finish()
        closed = time.monotonic()
        handled = (duration_summary(commits_before, target.commit_durations()) if commits_before
                   else {"mean_ms": float("nan"), "p50_le_ms": float("nan")})
    finally:
        group.kill_all()

    first = min(t for kind, _i, t, _d in group.log if kind == "first" and t >= resumed)
    commit_ms = [ms for f in finals.values() for ms in f["commit_ms"]]
    sync_ms = [f["sync_ms"] for f in finals.values()]
    errors: dict[str, int] = {}
    for f in finals.values():
        for name, n in f["commit_errors"].items():
            errors[name] = errors.get(name, 0) + n
    delivered = sum(f["received"] for f in finals.values())

    checker = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group.group, **QUIET})
    committed = checker.committed([TopicPartition(topic, p) for p in range(target.partitions)], timeout=10)
    checker.close()
    matching = sum(tp.offset == ends[tp.partition] for tp in committed)
    print(f"  {target.name} ({protocol}): drained {count} in {drained - resumed:.2f} s", flush=True)
    return {
        "produce records/s": count / produce_s,
        "subscribe -> 4 members own all partitions s": stable_at - began,
        "assign callbacks until stable": rebalances,
        "drain records/s": count / (drained - resumed),
        "drain s (go -> every partition at log end)": drained - resumed,
        "drain s, each run": f"{drained - resumed:.2f}",
        "broker CPU us per record (drain)": cpu_used / count * 1e6,
        "go -> first record s": first - resumed,
        "total s (subscribe -> committed, closed)": closed - began,
        "assign callbacks while draining": more_rebalances,
        "records delivered / produced": delivered / count,
        "async commit p50 ms": statistics.median(commit_ms) if commit_ms else float("nan"),
        "async commit p99 ms": percentile(commit_ms, 0.99),
        # What the broker itself took per OffsetCommit (decoded -> answered): the rest of the
        # latency above is the client's (its queues, and the callback served at consume()).
        "broker OffsetCommit handling mean ms": handled["mean_ms"],
        "broker OffsetCommit handling p50 <= ms": handled["p50_le_ms"],
        "async commits": len(commit_ms),
        "final sync commit max ms": max(sync_ms) if sync_ms else float("nan"),
        "async commits with nothing new (_NO_OFFSET)": errors.pop("_NO_OFFSET", 0),
        "commit errors": ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "none",
        "committed == log end": f"{matching}/{target.partitions}",
        "assignment sizes": "/".join(str(len(v)) for _k, v in sorted(final_assignment.items())),
    }


def gained_at(log: list, since: float, who: set[int]) -> dict[int, float]:
    """Partition -> when a member of ``who`` last gained it at or after ``since`` (eagerly
    rebalancing members regain everything; incremental ones gain only what moved)."""
    owned: dict[int, set[int]] = {}
    gained: dict[int, float] = {}
    for kind, idx, t, data in log:
        if kind in ("assign", "revoke") and idx in who:
            now = set(data)
            if t >= since:
                for p in now - owned.get(idx, set()):
                    gained[p] = t
            owned[idx] = now
    return gained


def first_records(log: list, gained: dict[int, float]) -> dict[int, float]:
    """Partition -> its first record consumed after it was gained."""
    firsts: dict[int, float] = {}
    for kind, _i, t, d in log:
        if kind == "first" and d in gained and t >= gained[d] and d not in firsts:
            firsts[d] = t
    return firsts


def crash(target: Target, protocol: str) -> dict[str, float | str]:
    topic = f"crash-{uuid.uuid4().hex[:8]}"
    target.create(topic)
    trickle = Trickle(target.bootstrap, topic, target.partitions)
    trickle.start()
    group = Group(target, topic, 1, protocol)  # low volume: commit (async) after every batch
    everyone = set(range(MEMBERS))
    recovery_timeout = 120 if protocol == "consumer" else 60  # 45 s session timeout
    try:
        group.start(parked=False)

        def steady() -> bool:
            if not covers(group.assignments(), target.partitions, MEMBERS):
                return False
            return len(first_records(group.log, gained_at(group.log, 0.0, everyone))) == target.partitions

        group.wait_for(steady, 60, f"{target.name} group of {MEMBERS} to be stable")
        group.pump(2.0)  # a little steady state: heartbeats, commits
        before = group.assignments()
        victim = next(i for i, parts in before.items() if 0 in parts)
        victim_parts = before[victim]
        survivors = everyone - {victim}
        killed = time.monotonic()
        group.procs[victim].kill()

        def resumed() -> bool:
            if not covers(group.assignments(members=survivors), target.partitions, len(survivors)):
                return False
            gained = gained_at(group.log, killed, survivors)
            if not set(victim_parts) <= set(gained):
                return False
            return len(first_records(group.log, gained)) == len(gained)

        group.wait_for(resumed, recovery_timeout, f"{target.name} group to recover from a crashed member")
        group.pump(0.5)
        recovered = group.assignments(members=survivors)  # before close() revokes everything
        group.finish()
    finally:
        group.kill_all()
        trickle.stop.set()
        trickle.join(15)

    closing = min(t for kind, _i, t, _d in group.log if kind == "final")
    upto = [e for e in group.log if e[2] < closing and e[1] in survivors]
    after = [e for e in upto if e[2] >= killed]
    callbacks = [t for kind, _i, t, _d in after if kind in ("assign", "revoke")]
    gained = gained_at(upto, killed, survivors)
    firsts = first_records(upto, gained)
    # Survivors' ownership just before the kill, then each event after it.
    assigned_at = covered_at(
        after,
        target.partitions,
        len(survivors),
        since=killed,
        initial={i: parts for i, parts in before.items() if i in survivors},
    )
    orphan_resumed = max(firsts[p] for p in victim_parts)
    print(
        f"  {target.name} ({protocol}): recovered from a crashed member in "
        f"{max(firsts.values()) - killed:.2f} s",
        flush=True,
    )
    return {
        "crash -> first rebalance callback s": min(callbacks) - killed if callbacks else float("nan"),
        "crash -> survivors own all partitions s": assigned_at - killed,
        "crash -> orphaned partitions consumed s": orphan_resumed - killed,
        "crash -> every moved partition consumed s": max(firsts.values()) - killed,
        "partitions moved": len(gained),
        "assignment sizes after crash": "/".join(str(len(v)) for _k, v in sorted(recovered.items())),
    }


# ---------------------------------------------------------------------------- main


def fmt(value: float | str) -> str:
    if isinstance(value, str):
        return f"{value:>12}"
    if isinstance(value, int):
        return f"{value:12d}"
    if math.isnan(value):  # not measured (the mock's CPU is this process's)
        return f"{'-':>12}"
    return f"{value:12.3f}" if abs(value) < 100 else f"{value:12.1f}"


def ratio(a: float | str, b: float | str) -> str:
    if isinstance(a, str) or isinstance(b, str) or not b or math.isnan(a) or math.isnan(b):
        return f"{'':>7}"
    return f"{a / b:7.2f}"


def combine(runs: list[dict[str, float | str]]) -> dict[str, float | str]:
    """Per metric: the median of the runs' numbers, or their distinct strings joined by |."""
    out: dict[str, float | str] = {}
    for key, first in runs[0].items():
        values = [run[key] for run in runs]
        if key.endswith("each run"):  # every run's, repeats included
            out[key] = "|".join(str(v) for v in values)
        elif isinstance(first, str):
            out[key] = "|".join(dict.fromkeys(str(v) for v in values))
        else:
            out[key] = statistics.median(values)
    return out


def broker_properties(session_timeout_ms: int, heartbeat_ms: int) -> str:
    """A server.properties file with the consumer protocol's timeouts (the bounds lowered
    only as far as the values need)."""
    lines = [
        f"group.consumer.session.timeout.ms={session_timeout_ms}",
        f"group.consumer.heartbeat.interval.ms={heartbeat_ms}",
    ]
    if session_timeout_ms < CONSUMER_SESSION_TIMEOUT_MS:
        lines.append(f"group.consumer.min.session.timeout.ms={session_timeout_ms}")
    if heartbeat_ms < CONSUMER_HEARTBEAT_MS:
        lines.append(f"group.consumer.min.heartbeat.interval.ms={heartbeat_ms}")
    handle, path = tempfile.mkstemp(prefix="rmqk-bench-", suffix=".properties")
    with os.fdopen(handle, "w") as out:
        out.write("\n".join(lines) + "\n")
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.groups_vs_mock",
        description=(
            "Consumer groups of 4 confluent-kafka member processes on 8 partitions, against "
            "rmqkafka and against librdkafka's mock cluster, with the classic protocol and the "
            "consumer protocol (KIP-848): subscribe -> all partitions assigned, drain rate of "
            "pre-produced records (with the broker's CPU per record), and SIGKILL of a member "
            "-> its partitions owned and consumed by the others. Prints a table."
        ),
        epilog=(
            "Targets checked at the end: with the consumer protocol, survivors own the crashed "
            "member's partitions within group.consumer.session.timeout.ms + one "
            "group.consumer.heartbeat.interval.ms; its drain is no slower than classic's."
        ),
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 40,000 / 100,000 records, one drain per target and protocol",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"drains per target and protocol, median reported (default {RUNS}; 1 with --quick)",
    )
    parser.add_argument(
        "--protocols",
        default=",".join(PROTOCOLS),
        help="comma-separated group protocols to measure: classic, consumer (default: both)",
    )
    parser.add_argument(
        "--phases",
        default="drain,crash",
        help="comma-separated phases to run: drain, crash (default: both; drain alone to profile it)",
    )
    parser.add_argument(
        "--consumer-session-timeout-ms",
        type=int,
        default=CONSUMER_SESSION_TIMEOUT_MS,
        help=(
            "the broker's (and the mock's) group.consumer.session.timeout.ms "
            f"(default {CONSUMER_SESSION_TIMEOUT_MS}: the least Kafka allows with its default "
            "group.consumer.min.session.timeout.ms; a lower value lowers that bound too)"
        ),
    )
    parser.add_argument(
        "--consumer-heartbeat-ms",
        type=int,
        default=CONSUMER_HEARTBEAT_MS,
        help=(
            "the broker's (and the mock's) group.consumer.heartbeat.interval.ms "
            f"(default {CONSUMER_HEARTBEAT_MS}, Kafka's least by default)"
        ),
    )
    args = parser.parse_args(argv)
    args.protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    unknown = set(args.protocols) - set(PROTOCOLS)
    if unknown or not args.protocols:
        parser.error(f"--protocols: unknown {sorted(unknown)}; choose from {', '.join(PROTOCOLS)}")
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if set(args.phases) - {"drain", "crash"} or not args.phases:
        parser.error("--phases: choose from drain, crash")
    if args.runs is None:
        args.runs = 1 if args.quick else RUNS
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    big = 100_000 if args.quick else 1_000_000
    small = 40_000 if args.quick else MOCK_PER_PARTITION * PARTITIONS
    session_ms, heartbeat_ms = args.consumer_session_timeout_ms, args.consumer_heartbeat_ms

    properties = broker_properties(session_ms, heartbeat_ms)
    broker = start_broker(flush="async", extra=["--config", properties, "--metrics-port", "0"])
    url = metrics_url(broker)
    mock_target_, mock = mock_target(session_ms, heartbeat_ms)
    small = min(small, MOCK_PER_PARTITION * mock_target_.partitions)
    ours_target = broker_target(broker.bootstrap, broker.process.pid, url)
    runs = args.runs
    how = f"median of {runs} runs" if runs > 1 else "1 run"
    results: dict[str, dict[str, dict[str, float | str]]] = {}
    began = time.monotonic()
    try:
        collected: dict[str, tuple[list, list, list]] = {p: ([], [], []) for p in args.protocols}
        for _ in range(runs if "drain" in args.phases else 0):  # interleaved: slow spells hit every row
            for protocol in args.protocols:
                ours_runs, theirs_runs, big_runs = collected[protocol]
                ours_runs.append(drain(ours_target, small, protocol))
                theirs_runs.append(drain(mock_target_, small, protocol))
                big_runs.append(drain(ours_target, big, protocol))
        for protocol in args.protocols:
            ours_runs, theirs_runs, big_runs = collected[protocol]
            crashed = "crash" in args.phases
            results[protocol] = {
                "ours_small": combine(ours_runs) if ours_runs else {},
                "theirs_small": combine(theirs_runs) if theirs_runs else {},
                "ours_big": combine(big_runs) if big_runs else {},
                "ours_crash": crash(ours_target, protocol) if crashed else {},
                "theirs_crash": crash(mock_target_, protocol) if crashed else {},
            }
        rss = broker.rss_mb()
    finally:
        broker.stop()
        os.unlink(properties)
        if mock is not None:
            mock.close()
    elapsed = time.monotonic() - began

    print(f"\ncommand: {shlex.join(['python', '-m', 'bench.groups_vs_mock', *sys.argv[1:]])}")
    print(
        f"workload: group of {MEMBERS} consumer processes, confluent-kafka {confluent_kafka.__version__} / "
        f"librdkafka {confluent_kafka.libversion()[0]}, 100-byte values, {PARTITIONS} partitions "
        f"(mock: {mock_target_.partitions}); async commit every {COMMIT_EVERY} records per member + "
        f"final sync commit; rmqkafka --flush async. classic: default assignor (eager), "
        f"session.timeout.ms={SESSION_TIMEOUT_MS}, heartbeat.interval.ms={HEARTBEAT_MS}. consumer "
        f"(KIP-848): server assignor uniform, broker and mock group.consumer.session.timeout.ms="
        f"{session_ms}, group.consumer.heartbeat.interval.ms={heartbeat_ms}. crash: "
        f"{TRICKLE_PER_S} records/s trickle, SIGKILL of the member owning partition 0. "
        f"Run took {elapsed:.0f} s."
    )
    for note in mock_target_.notes:
        print(note)
    for protocol, r in results.items():
        print(f"\n== {protocol} protocol")
        print(f"{'metric':44} {'rmqkafka':>12} {'mock':>12} {'ratio':>7}")
        if r["ours_small"]:
            print(f"-- drain {small} records (both; {how})")
        for key, value in r["ours_small"].items():
            theirs = r["theirs_small"][key]
            print(f"{key:44} {fmt(value)} {fmt(theirs)} {ratio(value, theirs)}")
        if r["ours_big"]:
            print(f"-- drain {big} records (rmqkafka only: the mock keeps ~5 MB per partition; {how})")
        for key, value in r["ours_big"].items():
            print(f"{key:44} {fmt(value)} {'-':>12}")
        if r["ours_crash"]:
            print("-- crash of one member (one run; times from the SIGKILL)")
        for key, value in r["ours_crash"].items():
            theirs = r["theirs_crash"][key]
            print(f"{key:44} {fmt(value)} {fmt(theirs)} {ratio(value, theirs)}")
    print(f"{'broker RSS after the run MB':44} {rss:12.1f} {'-':>12}")
    print_summary(results, small, big, session_ms, heartbeat_ms)


SUMMARY = (
    ("subscribe -> 8 partitions assigned s", "small", "subscribe -> 4 members own all partitions s"),
    ("drain records/s ({small})", "small", "drain records/s"),
    ("drain records/s ({big}, rmqkafka only)", "big", "drain records/s"),
    ("broker CPU us/record, drain ({small})", "small", "broker CPU us per record (drain)"),
    ("broker CPU us/record, drain ({big})", "big", "broker CPU us per record (drain)"),
    ("kill -9 -> survivors own all partitions s", "crash", "crash -> survivors own all partitions s"),
    ("kill -9 -> orphaned partitions consumed s", "crash", "crash -> orphaned partitions consumed s"),
)


def print_summary(results: dict, small: int, big: int, session_ms: int, heartbeat_ms: int) -> None:
    protocols = list(results)
    print(f"\nsummary ({MEMBERS} members, {PARTITIONS} partitions)")
    header = "".join(f" {p + ' rmqkafka':>17} {p + ' mock':>14}" for p in protocols)
    print(f"{'':44}{header}")
    for label, phase, key in SUMMARY:
        if not results[protocols[0]]["ours_crash" if phase == "crash" else f"ours_{phase}"]:
            continue  # a phase not run
        cells = ""
        for p in protocols:
            r = results[p]
            if phase == "crash":
                ours, theirs = r["ours_crash"][key], r["theirs_crash"][key]
            elif phase == "small":
                ours, theirs = r["ours_small"][key], r["theirs_small"][key]
            else:
                ours, theirs = r["ours_big"][key], "-"
            cells += f" {fmt(ours):>17} {fmt(theirs):>14}"
        print(f"{label.format(small=small, big=big):44}{cells}")
    if "consumer" in results and results["consumer"]["ours_crash"]:
        bound = (session_ms + heartbeat_ms) / 1000
        took = results["consumer"]["ours_crash"]["crash -> survivors own all partitions s"]
        verdict = "met" if took <= bound else "MISSED"
        print(
            f"target: consumer protocol, kill -9 -> survivors own all partitions <= session timeout "
            f"+ one heartbeat interval = {bound:g} s: {took:.2f} s, {verdict}"
        )
    if {"classic", "consumer"} <= set(results) and results["classic"]["ours_small"]:
        for rows, count in (("ours_small", small), ("ours_big", big)):
            new = results["consumer"][rows]["drain records/s"]
            old = results["classic"][rows]["drain records/s"]
            verdict = "met" if new >= old else "MISSED"
            print(
                f"target: rmqkafka drain of {count}, consumer protocol no slower than classic: "
                f"{new:.0f} vs {old:.0f} records/s ({new / old:.2f}x), {verdict}"
            )


if __name__ == "__main__":
    main()
