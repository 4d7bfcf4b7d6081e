"""Issue #3: consumer groups with real clients against a real broker process.

* Rebalancing with aiokafka, kafka-python and confluent-kafka, each member in its own process
  (``group_member.py``): three members share a 6-partition topic; one leaves cleanly, one is
  SIGKILLed (no LeaveGroup: the broker notices after ``session.timeout.ms`` = 6 s, the
  minimum), one joins; records keep arriving. Every record is consumed; a record is consumed
  twice only if the crashed member had received it without committing it, and every such
  record is re-delivered to a survivor.
* Committed offsets (with metadata and leader epochs) survive a clean restart and a kill -9,
  read back through each client and both admin clients; a new member resumes exactly after
  them. A live group (one member per library, dynamic or static) keeps its generation,
  members and assignment across a restart and a kill -9, as Kafka's persisted group metadata
  does: no rebalance, every record read once.
* Static membership (group.instance.id): a static member restarted within its session
  timeout keeps its assignment, the generation does not move, the old member id is fenced;
  the wire details (static leader rejoin, changed metadata) against Kafka's coordinator.
* Cooperative-sticky (librdkafka, kafka-python): a joining member takes partitions away
  incrementally; the first member only ever loses the partitions that move.
* Range and roundrobin assignments computed by kafka-python / aiokafka leaders, and groups
  mixing client libraries (the leader's library assigns for all).
* The group admin APIs through confluent-kafka's AdminClient, kafka-python's
  KafkaAdminClient and the raw protocol (OffsetDelete, ListGroups filters, DeleteGroups,
  LeaveGroup batches).
* Error paths through the raw protocol client (every advertised version where it matters).

Both group protocols (issue 22): the rebalancing test, the cooperative (incremental) test
and the confluent admin test also run with confluent-kafka's ``group.protocol=consumer``
(KIP-848; the broker runs it with the same 6 s session and 1 s heartbeat). The others cannot:
the raw-protocol tests are the classic wire (JoinGroup/SyncGroup/Heartbeat), range and
roundrobin are client-side assignors (KIP-848 assigns on the broker: test_consumer_protocol.py
compares its range and uniform assignors), mixing client libraries needs a classic leader
(mixing protocols is online migration), kafka-python and aiokafka do not speak KIP-848, and
the static-membership and restart tests check generations and DescribeGroups answers that the
consumer protocol does not have (test_consumer_protocol.py has their KIP-848 counterparts).

Client quirks met on the way (not broker bugs, worked around here): confluent-kafka-python
commits offset metadata with its C string's terminating NUL and reads committed metadata as a
C string (garbage after metadata written by other clients); kafka-python 3.0.12 can lose a
rebalance that completes as a poll() times out (``group_member.py`` polls for 1 s) and raises
connection errors from poll() while the broker restarts.

Speed: one broker for the module (restart tests get their own), heartbeats every second,
session timeouts of 6 s; every wait has a deadline and member processes are always killed.
Run with ``-s`` to see timings; a failing test prints the shared broker's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from rawkafka import ErrorCode, KafkaRaw, build, make_batch, start_broker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")
CLIENTS = ("aiokafka", "kafka-python", "confluent")
SESSION_MS = 6000  # the broker's group.min.session.timeout.ms
HEARTBEAT_MS = 1000
WAIT = 30.0  # seconds: the longest any single wait may take

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 13, 14, 15, 16, 42, 47
CONSUMER_GROUP_DESCRIBE = 69
# The client libraries and group protocols a rebalancing test runs with: only librdkafka
# speaks KIP-848 (group.protocol=consumer) of the three.
CLIENT_PROTOCOLS = [pytest.param(c, "classic", id=c) for c in CLIENTS] + [
    pytest.param("confluent", "consumer", id="confluent-consumer-protocol")]

TP = tuple[str, int]
Rec = tuple[str, int, int]  # topic, partition, offset


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --------------------------------------------------------------------------- consumer protocol


def subscription(topics: Iterable[str], version: int = 0) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = bytearray(struct.pack(">hi", version, len(list(topics))))
    for topic in topics:
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw
    return bytes(out + struct.pack(">i", -1))


def assignment_bytes(parts: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = bytearray(struct.pack(">hi", 0, len(parts)))
    for topic, partitions in parts.items():
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return bytes(out + struct.pack(">i", -1))


def decode_assignment(data: bytes) -> set[TP]:
    """The partitions of a ConsumerProtocolAssignment (any version; user data ignored)."""
    if not data:
        return set()
    pos = 2
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: set[TP] = set()
    for _ in range(count):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topic = data[pos : pos + length].decode()
        pos += length
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(n):
            out.add((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    return out


# --------------------------------------------------------------------------- raw group requests


def describe(conn: KafkaRaw, group: str, version: int = 5):
    (described,) = conn.request(
        DESCRIBE_GROUPS, version, groups=[group], include_authorized_operations=False
    ).groups
    assert described.error_code == ErrorCode.none, described
    return described


def broker_assignments(conn: KafkaRaw, group: str) -> tuple[str, dict[str, set[TP]]]:
    """(state, {client id: assigned partitions}) as DescribeGroups reports them, or
    ConsumerGroupDescribe for a consumer-protocol group (which DescribeGroups calls Dead)."""
    d = describe(conn, group)
    if d.group_state != "Dead":
        return d.group_state, {m.client_id: decode_assignment(m.member_assignment) for m in d.members}
    (c,) = conn.request(CONSUMER_GROUP_DESCRIBE, 0, group_ids=[group], include_authorized_operations=False).groups
    if c.error_code != ErrorCode.none:
        return "Dead", {}
    return c.group_state, {m.client_id: {(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions}
                           for m in c.members}


def fetch_offsets(conn: KafkaRaw, group: str, tps: Iterable[TP] | None = None, version: int = 7):
    """{(topic, partition): (offset, leader epoch, metadata)} via OffsetFetch."""
    topics = None
    if tps is not None:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, p in sorted(tps):
            by_topic[topic].append(p)
        topics = [dict(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    response = conn.request(OFFSET_FETCH, version, group_id=group, topics=topics, require_stable=False)
    assert response.error_code == ErrorCode.none, response
    out = {}
    for topic in response.topics:
        for p in topic.partitions:
            assert p.error_code == ErrorCode.none, p
            out[(topic.name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch, p.metadata)
    return out


def raw_commit(
    conn: KafkaRaw,
    group: str,
    offsets: dict[TP, tuple[int, int, str]],
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    version: int = 9,
) -> dict[TP, ErrorCode]:
    by_topic: dict[str, list[dict]] = defaultdict(list)
    for (topic, p), (offset, epoch, metadata) in offsets.items():
        by_topic[topic].append(
            dict(partition_index=p, committed_offset=offset, committed_leader_epoch=epoch,
                 commit_timestamp=-1, committed_metadata=metadata)
        )
    response = conn.request(
        OFFSET_COMMIT, version, group_id=group, generation_id_or_member_epoch=generation,
        generation_id=generation, member_id=member_id, group_instance_id=instance_id,
        retention_time=-1, topics=[dict(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def heartbeat(conn: KafkaRaw, group: str, generation: int, member_id: str,
              instance_id: str | None = None, version: int = 4) -> ErrorCode:
    return conn.request(
        HEARTBEAT, version, group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id,
    ).error_code


def current_generation(conn: KafkaRaw, group: str, member_id: str, instance_id: str | None = None) -> int | None:
    """The group's generation, probed with heartbeats on behalf of a live member (the only
    generation answered with NONE); None while it rebalances. DescribeGroups does not
    report generations."""
    for generation in range(200):
        code = heartbeat(conn, group, generation, member_id, instance_id)
        if code == ErrorCode.none:
            return generation
        if code == ErrorCode.rebalance_in_progress:
            return None
        assert code == ErrorCode.illegal_generation, code
    raise AssertionError("no generation accepted")


def assert_no_rebalance(conn: KafkaRaw, group: str, member_id: str, instance_id: str | None, generation: int,
                        seconds: float) -> None:
    """The group stays Stable at ``generation`` for ``seconds`` (a member that wrongly
    believes it leads rejoins once its metadata arrives, within about a second)."""
    deadline = time.monotonic() + seconds
    while True:
        now = current_generation(conn, group, member_id, instance_id)
        assert now == generation, f"a rebalance happened: generation {generation} -> {now} (None: rebalancing)"
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)


def join(conn: KafkaRaw, group: str, topics: Iterable[str] = ("t",), *, member_id: str = "",
         instance_id: str | None = None, version: int = 9, session_ms: int = SESSION_MS,
         rebalance_ms: int = 10_000, protocols: list[tuple[str, bytes]] | None = None,
         protocol_type: str = "consumer", recv_timeout: float | None = None):
    if protocols is None:
        protocols = [("range", subscription(topics))]
    return conn.request(
        JOIN_GROUP, version, group_id=group, session_timeout=session_ms,
        rebalance_timeout=rebalance_ms, member_id=member_id, group_instance_id=instance_id,
        protocol_type=protocol_type, protocols=[dict(name=n, metadata=m) for n, m in protocols],
        reason=None, recv_timeout=recv_timeout,
    )


def sync(conn: KafkaRaw, group: str, generation: int, member_id: str,
         assignments: dict[str, bytes] | None = None, *, instance_id: str | None = None,
         version: int = 5, protocol_name: str | None = "range"):
    return conn.request(
        SYNC_GROUP, version, group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocol_name=protocol_name,
        assignments=[dict(member_id=k, assignment=v) for k, v in (assignments or {}).items()],
    )


def leave(conn: KafkaRaw, group: str, member_id: str, instance_id: str | None = None, version: int = 5):
    return conn.request(
        LEAVE_GROUP, version, group_id=group, member_id=member_id,
        members=[dict(member_id=member_id, group_instance_id=instance_id, reason=None)],
    )


def build_join(group: str, topics: Iterable[str], *, member_id: str = "", instance_id: str | None = None,
               version: int = 9):
    from kio.index import load_request_schema

    return build(
        load_request_schema(JOIN_GROUP, version), group_id=group, session_timeout=SESSION_MS,
        rebalance_timeout=10_000, member_id=member_id, group_instance_id=instance_id,
        protocol_type="consumer", protocols=[dict(name="range", metadata=subscription(topics))], reason=None,
    )


def build_sync(group: str, generation: int, member_id: str, instance_id: str | None = None):
    from kio.index import load_request_schema

    return build(
        load_request_schema(SYNC_GROUP, 5), group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type="consumer", protocol_name="range", assignments=[],
    )


def raw_member(conn: KafkaRaw, group: str, topics: Iterable[str], parts: dict[str, list[int]] | None = None,
               **kw) -> tuple[str, int]:
    """Join (MEMBER_ID_REQUIRED round included) and sync as the only member; (id, generation)."""
    first = join(conn, group, topics, **kw)
    member_id = first.member_id
    if first.error_code == ErrorCode.member_id_required:
        first = join(conn, group, topics, member_id=member_id, **kw)
    assert first.error_code == ErrorCode.none, first
    answer = sync(conn, group, first.generation_id, first.member_id,
                  {first.member_id: assignment_bytes(parts or {})}, instance_id=kw.get("instance_id"))
    assert answer.error_code == ErrorCode.none, answer
    return first.member_id, first.generation_id


# --------------------------------------------------------------------------- member processes


class Member:
    """A group_member.py child process and the events it reported."""

    def __init__(self, client: str, bootstrap: str, group: str, topics: Iterable[str], name: str,
                 log_dir: Path, *, instance_id: str | None = None, strategy: str = "range",
                 session_ms: int = SESSION_MS, max_records: int = 50, protocol: str = "classic") -> None:
        self.client, self.name, self.group = client, name, group
        cmd = [
            sys.executable, str(MEMBER_SCRIPT), "--client", client, "--bootstrap", bootstrap,
            "--group", group, "--topics", ",".join(topics), "--client-id", name,
            "--strategy", strategy, "--session-ms", str(session_ms),
            "--heartbeat-ms", str(HEARTBEAT_MS), "--max-records", str(max_records), "--protocol", protocol,
        ]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in _reap
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            start_new_session=True, text=True, bufsize=1,
        )
        self.events: list[dict] = []
        self.assignment: set[TP] = set()
        self.eof = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, name=f"member-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self.events.append(event)
                parts = {tuple(p) for p in event.get("parts", ())}
                if event["ev"] == "assigned":
                    self.assignment |= parts
                elif event["ev"] in ("revoked", "lost"):
                    self.assignment -= parts
                self._cond.notify_all()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    # -- observing -------------------------------------------------------------------------
    def snapshot(self) -> tuple[list[dict], set[TP]]:
        with self._cond:
            return list(self.events), set(self.assignment)

    def of(self, ev: str) -> list[dict]:
        with self._cond:
            return [e for e in self.events if e["ev"] == ev]

    def wait_for(self, predicate: Callable[[list[dict]], Any], what: str, timeout: float = WAIT) -> Any:
        with self._cond:
            result = self._cond.wait_for(lambda: predicate(self.events) or self.eof, timeout)
            result = predicate(self.events)
            if not result:
                raise AssertionError(f"{self}: timed out or exited waiting for {what}\n{self.tail()}")
            return result

    def tail(self, n: int = 15) -> str:
        events = "\n".join(json.dumps(e)[:300] for e in self.events[-n:])
        try:
            err = self.stderr_path.read_text(errors="replace")[-3000:]
        except OSError:
            err = ""
        return f"--- last events of {self.name} ---\n{events}\n--- stderr of {self.name} ---\n{err}"

    def consumed(self) -> list[tuple[int, Rec]]:
        """(batch, record) for every record this member reported."""
        return [(e["batch"], tuple(r)) for e in self.of("consumed") for r in e["recs"]]

    def uncommitted(self) -> set[Rec]:
        """Records of batches it consumed without a successful commit afterwards."""
        done = {e["batch"] for e in self.of("committed")}
        return {r for batch, r in self.consumed() if batch not in done}

    def member_id(self) -> str | None:
        ids = [e["member_id"] for e in self.of("member") if e.get("member_id")]
        return ids[-1] if ids else None

    # -- controlling -----------------------------------------------------------------------
    def command(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = WAIT) -> None:
        """Ask for a clean close (LeaveGroup for dynamic members) and wait for the exit."""
        self.command("close")
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.name} did not close within {timeout} s\n{self.tail()}") from None
        self._reap()
        assert code == 0 and self.of("closed"), f"{self.name} exited {code}\n{self.tail()}"

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit, nothing."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._reap()

    def _reap(self) -> None:
        self._reader.join(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        self._stderr.close()

    def __repr__(self) -> str:
        return f"<Member {self.name} ({self.client}) pid={self.proc.pid}>"


@contextlib.contextmanager
def member_pool(log_dir: Path) -> Iterator[Callable[..., Member]]:
    """``start(client, bootstrap, group, topics, name, **kw)``; every member is killed at exit."""
    started: list[Member] = []

    def start(*args: Any, **kw: Any) -> Member:
        member = Member(*args, log_dir=log_dir, **kw)
        started.append(member)
        return member

    try:
        yield start
    finally:
        for member in started:
            member.kill()


def wait_converged(conn: KafkaRaw, group: str, members: list[Member], everything: set[TP],
                   timeout: float = WAIT) -> float:
    """Wait until every partition is owned by exactly one live member, every member owns
    some, and the broker (DescribeGroups) agrees: Stable, these members, these assignments.
    Returns the seconds waited."""
    began = time.monotonic()
    deadline = began + timeout
    last = None
    while True:
        views = {m.name: m.snapshot()[1] for m in members}
        owned = [tp for view in views.values() for tp in view]
        if all(views.values()) and len(owned) == len(set(owned)) and set(owned) == everything:
            state, broker_view = broker_assignments(conn, group)
            last = (state, broker_view, views)
            if state == "Stable" and broker_view == views:
                return time.monotonic() - began
        else:
            last = ("members disagree", None, views)
        if time.monotonic() > deadline:
            tails = "\n".join(m.tail() for m in members)
            raise AssertionError(f"group {group} did not converge in {timeout} s: {last}\n{tails}")
        time.sleep(0.05)


def dump_events(members: Iterable[Member], directory: Path) -> None:
    """Every member's events as JSON lines (``<name>.events``), for post-mortems."""
    for m in members:
        (directory / f"{m.name}.events").write_text("".join(json.dumps(e) + "\n" for e in m.events))


# --------------------------------------------------------------------------- producing


def produce_round_robin(conn: KafkaRaw, topic: str, partitions: int, count: int, per_batch: int = 10) -> None:
    for i in range(count // per_batch):
        conn.produce_ok(topic, i % partitions, make_batch(per_batch))


class BackgroundProducer(threading.Thread):
    """Keeps producing small batches round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float = 0.03) -> None:
        super().__init__(name=f"producer-{topic}", daemon=True)
        self.bootstrap, self.topic, self.partitions, self.interval = bootstrap, topic, partitions, interval
        self._stop_event = threading.Event()
        self.batches = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with KafkaRaw.connect(self.bootstrap) as conn:
                while not self._stop_event.is_set():
                    conn.produce_ok(self.topic, self.batches % self.partitions, make_batch(3))
                    self.batches += 1
                    self._stop_event.wait(self.interval)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        self._stop_event.set()
        if self.ident is not None:
            self.join(10)
        assert not self.is_alive(), "the background producer did not stop"
        if self.error is not None:
            raise self.error

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop it whatever happened (stop() in the test reports its errors)."""
        self._stop_event.set()
        if self.ident is not None:
            self.join(10)


def high_watermarks(conn: KafkaRaw, topic: str, partitions: int) -> dict[TP, int]:
    return {(topic, p): conn.high_watermark(topic, p) for p in range(partitions)}


# --------------------------------------------------------------------------- fixtures


# The consumer protocol's session timeout and heartbeat interval are the broker's: the same
# as the classic members ask for (their minimums lowered to allow it).
CONSUMER_PROTOCOL_CONFIG = {
    "group.consumer.session.timeout.ms": SESSION_MS,
    "group.consumer.min.session.timeout.ms": SESSION_MS,
    "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS,
    "group.consumer.min.heartbeat.interval.ms": HEARTBEAT_MS,
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from rmqkafka.adapter.embedded import EmbeddedBroker

    root = tmp_path_factory.mktemp("groups")
    config = root / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in CONSUMER_PROTOCOL_CONFIG.items()))
    with EmbeddedBroker(data_dir=root / "data", config_file=config) as b:
        yield b
        sys.stderr.write(_broker_problems(b.stderr))


def _broker_problems(log: str) -> str:
    bad = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    return "" if not bad else "--- broker ERROR lines ---\n" + "\n".join(bad[-40:]) + "\n"


@pytest.fixture
def conn(broker):
    with KafkaRaw(broker.host, broker.port) as c:
        yield c


@pytest.fixture
def no_broker_errors(broker, request):
    """Fail a test during which the shared broker logged an ERROR or a traceback; show the
    broker's log of a failed test."""
    seen = len(broker.stderr)
    failed_before = request.session.testsfailed
    yield
    time.sleep(0.05)
    new = broker.stderr[seen:]
    if request.session.testsfailed > failed_before:
        sys.stderr.write(f"--- broker log during {request.node.name} ---\n{new[-20000:]}\n")
    problems = _broker_problems(new)
    assert not problems, problems


# =========================================================================== rebalancing


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("client", "protocol"), CLIENT_PROTOCOLS)
def test_members_leave_crash_and_join(broker, conn, client, protocol, tmp_path, no_broker_errors):
    """Three members; a clean leave, a SIGKILL, a join; records keep arriving throughout."""
    topic, group = unique(f"rebalance-{client}"), unique(f"g-{client}")
    conn.create_topic(topic, 6)
    everything = {(topic, p) for p in range(6)}
    produce_round_robin(conn, topic, 6, 600)
    bootstrap = broker.bootstrap_servers
    with BackgroundProducer(bootstrap, topic, 6) as producer, member_pool(tmp_path) as start:
        m1, m2, m3 = (start(client, bootstrap, group, [topic], f"{client}-m{i}", protocol=protocol)
                      for i in (1, 2, 3))
        took = wait_converged(conn, group, [m1, m2, m3], everything)
        print(f"\n[{client}] 3 members converged {took:.2f} s after the members were started")
        producer.start()

        # A clean leave: LeaveGroup, the others take over from its committed offsets.
        m1.wait_for(lambda ev: any(e["ev"] == "committed" for e in ev), "a first commit")
        began = time.monotonic()
        m1.close()
        wait_converged(conn, group, [m2, m3], everything)
        print(f"[{client}] after a clean leave: converged in {time.monotonic() - began:.2f} s")

        # A crash with records consumed but not committed: m2 stops committing, consumes
        # one more batch at least, and is SIGKILLed. A new member joins at once.
        m2.command("nocommit")
        m2.wait_for(lambda ev: any(e["ev"] == "nocommit" for e in ev), "nocommit")
        acked = len(m2.events)
        m2.wait_for(lambda ev: any(e["ev"] == "consumed" for e in ev[acked:]), "an uncommitted batch")
        crashed_at = time.monotonic()
        m2.kill()
        m4 = start(client, bootstrap, group, [topic], f"{client}-m4", protocol=protocol)
        wait_converged(conn, group, [m3, m4], everything, timeout=WAIT)
        print(
            f"[{client}] after a SIGKILL (+1 join): converged {time.monotonic() - crashed_at:.2f} s "
            f"after the crash (session timeout {SESSION_MS / 1000:g} s)"
        )

        # Drain: everything produced is consumed and committed.
        time.sleep(0.5)
        producer.stop()
        ends = high_watermarks(conn, topic, 6)
        deadline = time.monotonic() + WAIT
        while (committed := {tp: c[0] for tp, c in fetch_offsets(conn, group, everything).items()}) != ends:
            if time.monotonic() > deadline:
                raise AssertionError(f"committed {committed} != ends {ends}\n{m3.tail()}\n{m4.tail()}")
            time.sleep(0.1)
        m3.close()
        m4.close()

    members = [m1, m2, m3, m4]
    dump_events(members, tmp_path)
    failed = {m.name: m.of("commit_failed") for m in (m1, m3, m4) if m.of("commit_failed")}
    if protocol == "consumer":
        # KIP-848: a commit that crosses its member's epoch bump is STALE_MEMBER_EPOCH, as Kafka
        # 4 answers it (the member's next commit covers it); the record checks above still hold
        failed = {name: [e for e in events if "STALE_MEMBER_EPOCH" not in e["error"]]
                  for name, events in failed.items()}
        failed = {name: events for name, events in failed.items() if events}
    readers: dict[Rec, list[str]] = defaultdict(list)
    for m in members:
        for _, rec in m.consumed():
            readers[rec].append(m.name)
    produced = {(topic, p, o) for (t, p), end in ends.items() for o in range(end)}
    missing = produced - set(readers)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:10]}"
    assert set(readers) <= produced

    uncommitted = m2.uncommitted()
    assert uncommitted, "the crashed member should have held uncommitted records"
    duplicates = {rec: names for rec, names in readers.items() if len(names) > 1}
    unexpected = {rec: names for rec, names in duplicates.items() if rec not in uncommitted}
    assert not unexpected, (
        f"{len(unexpected)} records consumed twice across clean handovers, e.g. "
        f"{sorted(unexpected.items())[:10]}; commit failures: {failed}"
    )
    for rec in uncommitted:
        names = readers[rec]
        assert names.count(m2.name) == 1 and len(names) == 2, (rec, names)
    print(
        f"[{client}] {len(produced)} records, {len(duplicates)} re-delivered (all of them "
        f"uncommitted by the crashed member: {len(uncommitted)})"
    )
    assert not failed, f"commits failed: {failed}"


# =========================================================================== durable offsets

RESTART_PARTITIONS = 4
RECORDS_PER_PARTITION = 40


def client_commit(client: str, bootstrap: str, group: str, offsets: dict[TP, tuple[int, str, int]]) -> None:
    """Commit ``{tp: (offset, metadata, leader epoch)}`` as a client without a subscription
    (aiokafka cannot send a leader epoch: it commits -1)."""
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            result = consumer.commit(
                offsets=[TopicPartition(t, p, o, metadata=m, leader_epoch=e) for (t, p), (o, m, e) in offsets.items()],
                asynchronous=False,
            )
            assert all(tp.error is None for tp in result), result
        finally:
            consumer.close()
    elif client == "kafka-python":
        from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, m, e) for (t, p), (o, m, e) in offsets.items()})
        finally:
            consumer.close()
    else:
        import asyncio

        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.structs import OffsetAndMetadata

        async def commit() -> None:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
            await consumer.start()
            try:
                tps = [TopicPartition(t, p) for t, p in offsets]
                consumer.assign(tps)
                await consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, m) for (t, p), (o, m, _) in offsets.items()})
            finally:
                await consumer.stop()

        asyncio.run(commit())


def client_committed(client: str, bootstrap: str, group: str, tps: list[TP]) -> dict[TP, tuple]:
    """What the client's own committed() reports: (offset, metadata, leader epoch) where the
    client exposes them (aiokafka: offset only)."""
    if client == "confluent":
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            got = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=10)
            return {(tp.topic, tp.partition): (tp.offset, tp.metadata, tp.leader_epoch) for tp in got}
        finally:
            consumer.close()
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            out = {}
            for t, p in tps:
                c = consumer.committed(TopicPartition(t, p), metadata=True)
                out[(t, p)] = (c.offset, c.metadata, c.leader_epoch)
            return out
        finally:
            consumer.close()
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def committed() -> dict[TP, tuple]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            return {(t, p): (await consumer.committed(TopicPartition(t, p)),) for t, p in tps}
        finally:
            await consumer.stop()

    return asyncio.run(committed())


def admin_committed(bootstrap: str, groups: list[str], confluent_groups: list[str]) -> dict[str, dict[TP, tuple]]:
    """{group: {tp: (offset, metadata, leader epoch)}} through kafka-python's
    KafkaAdminClient.list_group_offsets (every group in one OffsetFetch v8+), checked
    against confluent-kafka's AdminClient.list_consumer_group_offsets for
    ``confluent_groups`` (it reads metadata as a C string, so only for groups whose
    metadata carries the NUL confluent-kafka-python writes)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = kp.list_group_offsets({group: None for group in groups})
    finally:
        kp.close()
    out = {
        group: {(tp.topic, tp.partition): (o.offset, o.metadata, o.leader_epoch) for tp, o in listed[group].items()}
        for group in groups
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for group in confluent_groups:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
        got = {(tp.topic, tp.partition): (tp.offset, tp.metadata, -1 if tp.leader_epoch is None else tp.leader_epoch)
               for tp in result.topic_partitions}
        assert got == {tp: (o, m.rstrip("\x00"), e) for tp, (o, m, e) in out[group].items()}, group
    return out


def expected_view(client: str, offsets: dict[TP, tuple[int, str, int]]) -> dict[TP, tuple]:
    if client == "aiokafka":
        return {tp: (o,) for tp, (o, _, _) in offsets.items()}
    if client == "confluent":
        # librdkafka reports an absent leader epoch (-1) as None.
        return {tp: (o, m, None if e < 0 else e) for tp, (o, m, e) in offsets.items()}
    return {tp: (o, m, e) for tp, (o, m, e) in offsets.items()}


@pytest.mark.timeout(120)
def test_committed_offsets_survive_restart_and_kill(tmp_path):
    """Offsets (with metadata and leader epochs) committed by each client survive a clean
    restart and a kill -9 (also those committed after the last clean start), and a new
    group member resumes exactly after them."""
    with start_broker(tmp_path / "data") as b:
        with KafkaRaw(b.host, b.port) as conn:
            topic = unique("durable")
            conn.create_topic(topic, RESTART_PARTITIONS)
            for p in range(RESTART_PARTITIONS):
                for _ in range(RECORDS_PER_PARTITION // 10):
                    conn.produce_ok(topic, p, make_batch(10))
        tps = [(topic, p) for p in range(RESTART_PARTITIONS)]
        groups = {client: unique(f"durable-{client}") for client in CLIENTS}
        expected: dict[str, dict[TP, tuple[int, str, int]]] = {}
        for i, client in enumerate(CLIENTS):
            epoch = -1 if client == "aiokafka" else 0
            expected[client] = {
                (topic, 0): (3 + i, f"{client} metadata ✓", epoch),
                (topic, 1): (0, "", epoch),
                # The largest metadata allowed: 4096 bytes on the wire (confluent-kafka-python
                # sends a string's terminating NUL too, so 4095 characters there).
                (topic, 2): (17 + i, "x" * (4095 if client == "confluent" else 4096), epoch),
                (topic, 3): (RECORDS_PER_PARTITION, "{\"json\": true}", epoch),
            }
            client_commit(client, b.bootstrap_servers, groups[client], expected[client])
        # A raw commit with leader epochs clients would not send.
        raw_group = unique("durable-raw")
        raw_offsets = {(topic, 0): (5, 7, "epoch seven"), (topic, 1): (6, -1, ""), (topic, 3): (9, 2**31 - 1, "m")}
        with KafkaRaw(b.host, b.port) as conn:
            assert set(raw_commit(conn, raw_group, raw_offsets).values()) == {ErrorCode.none}

        def check(stage: str) -> None:
            with KafkaRaw(b.host, b.port) as conn:
                for client in CLIENTS:
                    nul = "\x00" if client == "confluent" else ""
                    want = {tp: (o, e, m + nul) for tp, (o, m, e) in expected[client].items()}
                    assert fetch_offsets(conn, groups[client], tps) == want, (stage, client)
                    assert fetch_offsets(conn, groups[client], None) == want, (stage, client)
                assert fetch_offsets(conn, raw_group, None) == raw_offsets, stage
            for client in CLIENTS:
                got = client_committed(client, b.bootstrap_servers, groups[client], tps)
                assert got == expected_view(client, expected[client]), (stage, client)
            admin_offsets = admin_committed(b.bootstrap_servers, [*groups.values(), raw_group], [groups["confluent"]])
            for client in CLIENTS:
                nul = "\x00" if client == "confluent" else ""
                want = {tp: (o, m + nul, e) for tp, (o, m, e) in expected[client].items()}
                assert admin_offsets[groups[client]] == want, (stage, client)
            assert admin_offsets[raw_group] == {tp: (o, m, e) for tp, (o, e, m) in raw_offsets.items()}, stage

        check("before any restart")
        b.restart()
        check("after a clean restart")
        # Commits after the last clean start live only in the journal: kill -9 must keep them.
        for client in CLIENTS:
            update = {(topic, 1): (11, f"after restart {client}", expected[client][(topic, 1)][2])}
            client_commit(client, b.bootstrap_servers, groups[client], update)
            expected[client].update(update)
        b.kill()
        b.restart()
        check("after kill -9")

        # A new member of each group resumes exactly at the committed offsets.
        with KafkaRaw(b.host, b.port) as conn:
            for p in range(RESTART_PARTITIONS):
                conn.produce_ok(topic, p, make_batch(5))  # records after every committed offset
        ends = {tp: RECORDS_PER_PARTITION + 5 for tp in tps}
        with member_pool(tmp_path) as start:
            members = {client: start(client, b.bootstrap_servers, groups[client], [topic], f"resume-{client}")
                       for client in CLIENTS}
            for client, member in members.items():
                def caught_up(events, want=expected[client]) -> bool:
                    last = {}
                    for e in events:
                        if e["ev"] == "committed":
                            last.update({(t, p): o for t, p, o in e["offsets"]})
                    return last.keys() >= set(want) and all(last[tp] == ends[tp] for tp in want)

                member.wait_for(caught_up, "consuming up to the end")
                first: dict[TP, int] = {}
                for _, (t, p, o) in member.consumed():
                    first.setdefault((t, p), o)
                assert first == {tp: o for tp, (o, _, _) in expected[client].items()}, client
                counts = Counter(rec for _, rec in member.consumed())
                assert max(counts.values()) == 1, client
            for member in members.values():
                member.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "kill-9"])
def test_live_group_survives_broker_restart(tmp_path, crash, static):
    """Kafka persists a classic group's metadata and reloads it: after a broker restart (same
    port) the members of a live group (one per client library, dynamic or static) carry on
    with their assignment. No rebalance: DescribeGroups shows the same generation, leader and
    members, no member is revoked or assigned anything, commits are accepted again once the
    broker is back, and, as every member commits each batch synchronously, every record is
    read exactly once (a commit in flight at the restart may fail; without a rebalance the
    next one covers it)."""
    with start_broker(tmp_path / "data") as b:
        topic, group = unique("restart-live"), unique("restart-live")
        with KafkaRaw(b.host, b.port) as conn:
            conn.create_topic(topic, 6)
            produce_round_robin(conn, topic, 6, 120)
        everything = {(topic, p) for p in range(6)}
        with member_pool(tmp_path) as start:
            members = [start(c, b.bootstrap_servers, group, [topic], f"live-{c}",
                             instance_id=f"instance-{c}" if static else None) for c in CLIENTS]
            with KafkaRaw(b.host, b.port) as conn:
                wait_converged(conn, group, members, everything)
                before = describe(conn, group)
                before_members = {m.member_id: decode_assignment(m.member_assignment) for m in before.members}
                probe = before.members[0]
                generation = current_generation(conn, group, probe.member_id, probe.group_instance_id)
                assert generation is not None
                ends = high_watermarks(conn, topic, 6)
                wait_until(lambda: {tp: c[0] for tp, c in fetch_offsets(conn, group, everything).items()} == ends,
                           WAIT, message="everything committed before the restart")
            marks = [len(m.events) for m in members]
            if crash:
                b.kill()
            began = time.monotonic()
            b.restart(same_port=True)
            with KafkaRaw(b.host, b.port) as conn:
                after = describe(conn, group)
                assert after.group_state == "Stable", after
                assert {m.member_id: decode_assignment(m.member_assignment) for m in after.members} == before_members
                produce_round_robin(conn, topic, 6, 60)
                ends = high_watermarks(conn, topic, 6)
                wait_until(lambda: {tp: c[0] for tp, c in fetch_offsets(conn, group, everything).items()} == ends,
                           WAIT, message="everything committed after the restart")
                print(f"\n[restart {'kill -9' if crash else 'clean'}{' static' if static else ''}] everything "
                      f"consumed and committed {time.monotonic() - began:.2f} s after the restart began")
                final = describe(conn, group)
                assert final.group_state == "Stable", final
                assert {m.member_id for m in final.members} == set(before_members), "a member was replaced"
                assert current_generation(conn, group, probe.member_id, probe.group_instance_id) == generation
            for m, mark in zip(members, marks):
                moved = [e for e in m.events[mark:] if e["ev"] in ("assigned", "revoked", "lost")]
                assert not moved, f"{m.name} went through a rebalance: {moved}\n{m.tail()}"
                assert any(e["ev"] == "committed" for e in m.events[mark:]), m.tail()
            for m in members:
                m.close()
        dump_events(members, tmp_path)
    readers: dict[Rec, list[str]] = defaultdict(list)
    for m in members:
        for _, rec in m.consumed():
            readers[rec].append(m.name)
    produced = {(topic, p, o) for (t, p), end in ends.items() for o in range(end)}
    assert set(readers) == produced
    twice = {rec: names for rec, names in readers.items() if len(names) > 1}
    assert not twice, sorted(twice.items())[:10]
    failed = sum(len(m.of("commit_failed")) for m in members)
    print(f"[restart] {len(produced)} records, each read once, {failed} commits failed during the restart")


# =========================================================================== static membership

STATIC_SESSION_MS = 20_000


def members_by_client_id(conn: KafkaRaw, group: str) -> dict[str, tuple[str, str | None, set[TP]]]:
    """{client id: (member id, instance id, assignment)} from DescribeGroups."""
    d = describe(conn, group)
    return {m.client_id: (m.member_id, m.group_instance_id, decode_assignment(m.member_assignment)) for m in d.members}


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "client, strategy",
    [(c, "range") for c in CLIENTS] + [("confluent", "cooperative-sticky")],
)
def test_static_member_restart_keeps_assignment(broker, conn, client, strategy, tmp_path, no_broker_errors):
    """A static member SIGKILLed and restarted within its session timeout gets its old
    assignment back under a new member id; the other member sees no rebalance, the
    generation stays, the old member id is fenced. Done for the leader, then a follower.

    Kafka answers such a rejoin at once, without a rebalance, as long as the group's
    protocol stays the same (the member's metadata bytes may change: cooperative-sticky's
    carry the partitions it owned, which a restarted process has none of), and it keeps a
    rejoining static leader from reassigning: JoinGroup v9+ says skip_assignment, older
    versions name the previous leader id and no members (GroupCoordinator
    .updateStaticMemberAndRebalance)."""
    topic, group = unique(f"static-{client}"), unique(f"static-{client}")
    conn.create_topic(topic, 4)
    everything = {(topic, p) for p in range(4)}
    produce_round_robin(conn, topic, 4, 80)
    bootstrap = broker.bootstrap_servers
    kw = dict(session_ms=STATIC_SESSION_MS, strategy=strategy)
    with member_pool(tmp_path) as start:
        leader = start(client, bootstrap, group, [topic], f"{client}-static-a", instance_id="inst-a", **kw)
        leader.wait_for(lambda ev: any(e["ev"] == "assigned" and e["parts"] for e in ev), "a first assignment")
        follower = start(client, bootstrap, group, [topic], f"{client}-static-b", instance_id="inst-b", **kw)
        wait_converged(conn, group, [leader, follower], everything)
        before = members_by_client_id(conn, group)
        assert {v[1] for v in before.values()} == {"inst-a", "inst-b"}
        follower_id = before[follower.name][0]
        generation = current_generation(conn, group, follower_id, "inst-b")
        assert generation is not None

        live = {leader.name: leader, follower.name: follower}
        for name, instance in ((leader.name, "inst-a"), (follower.name, "inst-b")):
            victim = live[name]
            other = next(m for n, m in live.items() if n != name)
            old_id, _, old_assignment = members_by_client_id(conn, group)[name]
            other_id = members_by_client_id(conn, group)[other.name][0]
            other_events = len(other.events)
            victim.kill()
            began = time.monotonic()
            again = start(client, bootstrap, group, [topic], name, instance_id=instance, **kw)
            again.wait_for(lambda ev: any(e["ev"] == "assigned" and e["parts"] for e in ev), "the old assignment")
            took = time.monotonic() - began
            live[name] = again
            wait_converged(conn, group, list(live.values()), everything, timeout=10)
            after = members_by_client_id(conn, group)
            new_id, new_instance, new_assignment = after[name]
            assert new_instance == instance and new_id != old_id
            assert new_assignment == old_assignment == again.snapshot()[1]
            assert after[other.name][0] == other_id, "the other member was replaced"
            assert_no_rebalance(conn, group, new_id, instance, generation, 1.5)
            assert describe(conn, group).group_state == "Stable"
            changes = [e for e in other.events[other_events:] if e["ev"] in ("assigned", "revoked", "lost")]
            assert not changes, f"the other member went through a rebalance: {changes}"
            # The old member id is fenced (with its instance id) and unknown (without).
            assert heartbeat(conn, group, generation, old_id, instance) == ErrorCode.fenced_instance_id
            assert heartbeat(conn, group, generation, old_id) == ErrorCode.unknown_member_id
            code = raw_commit(conn, group, {(topic, 0): (1, -1, "")}, generation, old_id, instance)
            assert set(code.values()) == {ErrorCode.fenced_instance_id}
            print(f"\n[{client} {strategy}] static {instance} restarted: same assignment {took:.2f} s later")
        for m in live.values():
            m.close()


def static_pair(conn: KafkaRaw, version: int) -> tuple[str, str, Any, Any, int]:
    """A Stable group of two raw static members "a" (leader, partition 0) and "b"
    (partition 1); returns (group, topic, a's join answer, b's join answer, generation)."""
    group, topic = unique("static-raw"), unique("static-raw-topic")
    conn.create_topic(topic, 2)
    a = join(conn, group, [topic], instance_id="a", version=version)
    assert a.error_code == ErrorCode.none and a.leader == a.member_id
    assert sync(conn, group, a.generation_id, a.member_id, {a.member_id: assignment_bytes({topic: [0, 1]})},
                instance_id="a").error_code == ErrorCode.none
    with KafkaRaw(conn.host, conn.port) as conn_b:
        pending = conn_b.send(JOIN_GROUP, version, build_join(group, [topic], instance_id="b", version=version))
        wait_until(lambda: heartbeat(conn, group, a.generation_id, a.member_id, "a") == ErrorCode.rebalance_in_progress,
                   5, message="b's join to start a rebalance")
        a2 = join(conn, group, [topic], member_id=a.member_id, instance_id="a", version=version)
        b = conn_b.receive(JOIN_GROUP, version, pending)
        assert a2.generation_id == b.generation_id and a2.leader == a.member_id
        plan = {a.member_id: assignment_bytes({topic: [0]}), b.member_id: assignment_bytes({topic: [1]})}
        pending = conn_b.send(SYNC_GROUP, 5, build_sync(group, b.generation_id, b.member_id, "b"))
        assert sync(conn, group, a2.generation_id, a.member_id, plan, instance_id="a").error_code == ErrorCode.none
        assert decode_assignment(conn_b.receive(SYNC_GROUP, 5, pending).assignment) == {(topic, 1)}
    assert describe(conn, group).group_state == "Stable"
    return group, topic, a2, b, a2.generation_id


@pytest.mark.parametrize("version", [5, 7, 9])
def test_static_leader_rejoin_does_not_reassign_raw(conn, version, no_broker_errors):
    """A static leader restarting (no member id) in a Stable group gets the same generation
    and a new member id at once, and is kept from running an assignment the group would
    ignore: JoinGroup v9+ says skip_assignment (KIP-814); before v9 Kafka names the
    previous leader id and no members (GroupCoordinator.updateStaticMemberAndRebalance).
    kafka-python, told it leads, reassigns and then rejoins: a full rebalance (see
    test_static_member_restart_keeps_assignment[kafka-python-range])."""
    group, topic, a, _, generation = static_pair(conn, version)
    with KafkaRaw(conn.host, conn.port) as conn_a:
        again = join(conn_a, group, [topic], instance_id="a", version=version)
        assert again.error_code == ErrorCode.none
        assert again.generation_id == generation and again.member_id not in ("", a.member_id)
        if version >= 9:
            assert again.skip_assignment, "a rejoining static leader must skip the assignment (KIP-814)"
            assert again.leader == again.member_id
        else:
            assert (again.leader, list(again.members)) == (a.member_id, []), (
                "before JoinGroup v9 Kafka names the previous leader and no members, so the "
                "restarted leader does not run an assignment the group would ignore"
            )
        got = sync(conn_a, group, generation, again.member_id, {}, instance_id="a")
        assert (got.error_code, decode_assignment(got.assignment)) == (ErrorCode.none, {(topic, 0)})
        assert heartbeat(conn_a, group, generation, again.member_id, "a") == ErrorCode.none
        assert heartbeat(conn, group, generation, a.member_id, "a") == ErrorCode.fenced_instance_id


@pytest.mark.parametrize("version", [5, 9])
def test_static_rejoin_with_new_metadata_does_not_rebalance_raw(conn, version, no_broker_errors):
    """A static follower restarting with different metadata bytes for the same protocol (as
    cooperative-sticky members do: the partitions they owned are gone) is answered at once
    with the same generation and its old assignment: Kafka rebalances only if the group's
    selected protocol would change."""
    group, topic, a, _b, generation = static_pair(conn, version)
    changed = [("range", subscription([topic], version=1) + b"\x00\x00\x00\x00")]
    with KafkaRaw(conn.host, conn.port) as conn_b:
        try:
            again = join(conn_b, group, [topic], instance_id="b", version=version, protocols=changed,
                         recv_timeout=3)
        except TimeoutError:
            pytest.fail(
                "the static member's JoinGroup was not answered within 3 s: the broker started a "
                f"rebalance (leader's heartbeat: {heartbeat(conn, group, generation, a.member_id, 'a')!r})"
            )
        assert again.error_code == ErrorCode.none
        assert again.generation_id == generation, "the group rebalanced for a static rejoin"
        got = sync(conn_b, group, generation, again.member_id, {}, instance_id="b")
        assert (got.error_code, decode_assignment(got.assignment)) == (ErrorCode.none, {(topic, 1)})
        assert heartbeat(conn, group, generation, a.member_id, "a") == ErrorCode.none
        assert describe(conn, group).group_state == "Stable"


# =========================================================================== cooperative-sticky


def assignment_history(member: Member) -> list[set[TP]]:
    """The member's assignment after each rebalance callback, in order, from its first
    non-empty assignment on."""
    current: set[TP] = set()
    history = []
    for e in member.snapshot()[0]:
        parts = {tuple(p) for p in e.get("parts", ())}
        if e["ev"] == "assigned":
            current = current | parts
        elif e["ev"] in ("revoked", "lost"):
            current = current - parts
        else:
            continue
        if current or history:
            history.append(set(current))
    return history


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("client", "protocol"), [
    pytest.param("confluent", "classic", id="confluent"), pytest.param("kafka-python", "classic", id="kafka-python"),
    pytest.param("confluent", "consumer", id="confluent-consumer-protocol")])
def test_cooperative_sticky_moves_only_what_changes_owner(broker, conn, client, protocol, tmp_path, no_broker_errors):
    """KIP-429 incremental rebalancing: when a second member joins, the first gives up only
    the partitions that move (on_revoke with exactly those), never holds an empty
    assignment, and keeps consuming the partitions it retains; nothing is read twice. The
    consumer protocol (KIP-848) is incremental by design, with the broker's uniform assignor."""
    topic, group = unique(f"coop-{client}"), unique(f"coop-{client}")
    conn.create_topic(topic, 6)
    everything = {(topic, p) for p in range(6)}
    produce_round_robin(conn, topic, 6, 120)
    kw = dict(strategy="cooperative-sticky", protocol=protocol)
    with BackgroundProducer(broker.bootstrap_servers, topic, 6) as producer, member_pool(tmp_path) as start:
        first = start(client, broker.bootstrap_servers, group, [topic], f"{client}-coop-1", **kw)
        wait_converged(conn, group, [first], everything)
        producer.start()
        seen = len(first.events)
        second = start(client, broker.bootstrap_servers, group, [topic], f"{client}-coop-2", **kw)
        took = wait_converged(conn, group, [first, second], everything)
        print(f"\n[{client}] cooperative-sticky: a second member converged in {took:.2f} s")
        time.sleep(1.0)  # both keep consuming what they own
        producer.stop()
        ends = high_watermarks(conn, topic, 6)
        wait_until(lambda: {tp: c[0] for tp, c in fetch_offsets(conn, group, everything).items()} == ends,
                   WAIT, message="every record committed")
        dump_events([first, second], tmp_path)
        moved = second.snapshot()[1]
        kept = first.snapshot()[1]
        assert len(moved) == len(kept) == 3
        history = assignment_history(first)
        assert history[0] == everything
        assert all(history), f"the first member was left without partitions: {history}"
        revoked = [set(map(tuple, e["parts"])) for e in first.events[seen:] if e["ev"] in ("revoked", "lost")]
        assert revoked and set().union(*revoked) == moved, f"revoked {revoked}, moved {moved}"
        assert all(e["ev"] != "lost" for e in first.events), "partitions were lost, not revoked"
        # It kept consuming what it retained after the second member had its share.
        joined_at = next(e["t"] for e in second.events if e["ev"] == "assigned" and e["parts"])
        later = {(t, p) for e in first.of("consumed") if e["t"] > joined_at for t, p, _ in e["recs"]}
        assert later and later <= kept, later
        first.close()
        second.close()
    counts = Counter(rec for m in (first, second) for _, rec in m.consumed())
    assert set(counts) == {(topic, p, o) for (t, p), end in ends.items() for o in range(end)}
    assert max(counts.values()) == 1, [rec for rec, n in counts.items() if n > 1][:10]


# =========================================================================== assignors, mixed clients


def expected_assignment(strategy: str, members: list[str], topics: list[str], partitions: int) -> dict[str, set[TP]]:
    """What Kafka's RangeAssignor / RoundRobinAssignor give members sorted by member id."""
    members = sorted(members)
    out: dict[str, set[TP]] = {m: set() for m in members}
    if strategy == "range":
        for topic in sorted(topics):
            per, extra = divmod(partitions, len(members))
            p = 0
            for i, m in enumerate(members):
                n = per + (1 if i < extra else 0)
                out[m] |= {(topic, q) for q in range(p, p + n)}
                p += n
    else:
        tps = sorted((t, p) for t in topics for p in range(partitions))
        for i, tp in enumerate(tps):
            out[members[i % len(members)]].add(tp)
    return out


def check_assignor(conn: KafkaRaw, group: str, strategy: str, members: list[Member], topics: list[str],
                   partitions: int) -> None:
    everything = {(t, p) for t in topics for p in range(partitions)}
    wait_converged(conn, group, members, everything)
    d = describe(conn, group)
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", strategy)
    ids = {m.client_id: m.member_id for m in d.members}
    want = expected_assignment(strategy, list(ids.values()), topics, partitions)
    got = {ids[m.name]: m.snapshot()[1] for m in members}
    assert got == want, f"{strategy}: {got} != {want}"
    # Each consumes what it owns: a new record in every partition reaches its owner.
    before = {tp: conn.high_watermark(*tp) for tp in everything}
    for topic, p in sorted(everything):
        conn.produce_ok(topic, p, make_batch(1))
    for m in members:
        mine = m.snapshot()[1]

        def got_new(events, mine=mine) -> bool:
            new = {(t, p) for e in events if e["ev"] == "consumed" for t, p, o in e["recs"] if o >= before[(t, p)]}
            return new == mine

        m.wait_for(got_new, "the new record of each of its partitions", timeout=10)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_range_and_roundrobin_assignors(broker, conn, client, strategy, tmp_path, no_broker_errors):
    """Two members, two topics of 3 partitions: the leader's assignor decides, the broker
    hands each member exactly what the leader computed (checked against Kafka's algorithm)."""
    topics = [unique("assign-a"), unique("assign-b")]
    for t in topics:
        conn.create_topic(t, 3)
        produce_round_robin(conn, t, 3, 30)
    group = unique(f"assign-{client}-{strategy}")
    with member_pool(tmp_path) as start:
        members = [start(client, broker.bootstrap_servers, group, topics, f"{prefix}-{client}-{strategy}",
                         strategy=strategy) for prefix in ("x1", "x2")]
        check_assignor(conn, group, strategy, members, topics, 3)
        for m in members:
            m.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "clients, strategy",
    [
        (("kafka-python", "confluent"), "range"),
        (("confluent", "kafka-python"), "range"),
        (("aiokafka", "kafka-python", "confluent"), "range"),
        (("kafka-python", "aiokafka"), "roundrobin"),
    ],
    ids=lambda v: "+".join(v) if isinstance(v, tuple) else v,
)
def test_group_mixing_client_libraries(broker, conn, clients, strategy, tmp_path, no_broker_errors):
    """Members of different client libraries in one group (the first to join leads and
    assigns for all), then the leader leaves and another library's member takes over."""
    topics = [unique("mixed-a"), unique("mixed-b")]
    for t in topics:
        conn.create_topic(t, 3)
        produce_round_robin(conn, t, 3, 30)
    group = unique("mixed")
    with member_pool(tmp_path) as start:
        members = []
        for i, client in enumerate(clients):
            members.append(start(client, broker.bootstrap_servers, group, topics, f"x{i}-{client}", strategy=strategy))
            if i == 0:  # the first library leads
                members[0].wait_for(lambda ev: any(e["ev"] == "assigned" and e["parts"] for e in ev), "leading")
        check_assignor(conn, group, strategy, members, topics, 3)
        members[0].close()
        check_assignor(conn, group, strategy, members[1:], topics, 3)
        for m in members[1:]:
            m.close()


# =========================================================================== admin APIs


def wait_committed(conn: KafkaRaw, group: str, want: dict[TP, int], timeout: float = WAIT) -> None:
    wait_until(lambda: {tp: c[0] for tp, c in fetch_offsets(conn, group, want).items()} == want,
               timeout, message=f"{group} to commit {want}")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_admin_confluent(broker, conn, protocol, tmp_path, no_broker_errors):
    """confluent-kafka's AdminClient: list (state filters), describe (members, assignments,
    state, coordinator), list/alter offsets, delete (empty vs non-empty vs unknown); the
    active group's member uses either group protocol. Where the consumer protocol differs as
    in Kafka 4: the assignor is the broker's (uniform), the member id is a Uuid made by the
    client, and DescribeGroups calls the group Dead (ConsumerGroupDescribe describes it)."""
    from confluent_kafka import (
        ConsumerGroupState,
        ConsumerGroupTopicPartitions,
        KafkaException,
        TopicPartition,
    )
    from confluent_kafka.admin import AdminClient

    topic = unique("admin-c")
    conn.create_topic(topic, 3)
    produce_round_robin(conn, topic, 3, 30)
    tps = [(topic, p) for p in range(3)]
    active, empty, unknown = unique("adm-active"), unique("adm-empty"), unique("adm-unknown")
    # confluent-kafka-python reads committed metadata as a C string: give it the NUL it
    # writes itself (see test_committed_offsets_survive_restart_and_kill).
    committed = {(topic, 0): (3, -1, "m0\x00"), (topic, 1): (4, 0, "\x00")}
    assert set(raw_commit(conn, empty, committed).values()) == {ErrorCode.none}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def error_code(future) -> int:
        with pytest.raises(KafkaException) as info:
            future.result(10)
        return info.value.args[0].code()

    with member_pool(tmp_path) as start:
        member = start("confluent", broker.bootstrap_servers, active, [topic], "adm-c-member", protocol=protocol)
        wait_converged(conn, active, [member], set(tps))
        wait_committed(conn, active, {tp: 10 for tp in tps})

        listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
        assert listed[active].state == ConsumerGroupState.STABLE and not listed[active].is_simple_consumer_group
        assert listed[empty].state == ConsumerGroupState.EMPTY and listed[empty].is_simple_consumer_group
        stable = {g.group_id for g in admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10).valid}
        assert active in stable and empty not in stable
        empties = {g.group_id for g in admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(10).valid}
        assert empty in empties and active not in empties

        described = {g: f.result(10) for g, f in admin.describe_consumer_groups([active, empty]).items()}
        d = described[active]
        assignor = "range" if protocol == "classic" else "uniform"
        assert (d.state, d.partition_assignor, d.is_simple_consumer_group) == (ConsumerGroupState.STABLE, assignor, False)
        assert (d.coordinator.id, d.coordinator.host, d.coordinator.port) == (0, broker.host, broker.port)
        (m,) = d.members
        if protocol == "classic":
            assert m.member_id.startswith("adm-c-member-")
        else:
            # the client's own Kafka Uuid (base64), not one made from its client id
            assert m.member_id == member.member_id() and not m.member_id.startswith("adm-c-member")
        assert m.client_id == "adm-c-member" and m.host == "127.0.0.1"
        assert m.group_instance_id is None
        assert sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions) == tps
        d = described[empty]
        assert (d.state, d.members, d.is_simple_consumer_group) == (ConsumerGroupState.EMPTY, [], True)
        dead = admin.describe_consumer_groups([unknown])[unknown].result(10)
        assert dead.state == ConsumerGroupState.DEAD and dead.members == []

        def offsets_of(group: str, parts: list[TP] | None = None) -> dict[TP, tuple]:
            request = ConsumerGroupTopicPartitions(group, None if parts is None else [TopicPartition(t, p) for t, p in parts])
            result = admin.list_consumer_group_offsets([request])[group].result(10)
            return {(tp.topic, tp.partition): (tp.offset, tp.metadata, tp.leader_epoch) for tp in result.topic_partitions}

        assert {tp: v[0] for tp, v in offsets_of(active).items()} == {tp: 10 for tp in tps}
        assert offsets_of(empty) == {(topic, 0): (3, "m0", None), (topic, 1): (4, "", 0)}
        assert offsets_of(empty, tps)[(topic, 2)][0] == -1001  # OFFSET_INVALID: nothing committed

        # Altering offsets: allowed for an empty group, refused for one with members.
        request = ConsumerGroupTopicPartitions(empty, [TopicPartition(topic, 2, 9), TopicPartition(topic, 0, 1)])
        altered = admin.alter_consumer_group_offsets([request])[empty].result(10)
        assert all(tp.error is None for tp in altered.topic_partitions)
        assert {tp: v[0] for tp, v in offsets_of(empty).items()} == {(topic, 0): 1, (topic, 1): 4, (topic, 2): 9}
        request = ConsumerGroupTopicPartitions(active, [TopicPartition(topic, 0, 1)])
        refused = admin.alter_consumer_group_offsets([request])[active].result(10)
        assert [tp.error.code() for tp in refused.topic_partitions] == [ErrorCode.unknown_member_id.value]
        assert offsets_of(active)[(topic, 0)][0] == 10

        # Deleting: NON_EMPTY_GROUP with members, GROUP_ID_NOT_FOUND when unknown.
        futures = admin.delete_consumer_groups([active, empty, unknown])
        assert error_code(futures[active]) == ErrorCode.non_empty_group.value
        assert futures[empty].result(10) is None
        assert error_code(futures[unknown]) == ErrorCode.group_id_not_found.value
        listed = {g.group_id for g in admin.list_consumer_groups().result(10).valid}
        assert active in listed and empty not in listed
        assert offsets_of(empty) == {}

        member.close()
    # Once its last member has left, the group (now Empty, offsets kept) can be deleted.
    assert admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(10).valid
    assert broker_assignments(conn, active) == ("Empty", {})
    assert admin.delete_consumer_groups([active])[active].result(10) is None
    assert fetch_offsets(conn, active, None) == {}
    assert active not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


@pytest.mark.timeout(60)
def test_group_admin_kafka_python(broker, conn, tmp_path, no_broker_errors):
    """kafka-python's KafkaAdminClient: list_groups (state filter), describe_groups,
    list_group_offsets (several groups at once), alter / reset / delete offsets,
    remove_group_members, delete_groups."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, MemberToRemove, OffsetSpec
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    topic, other_topic = unique("admin-kp"), unique("admin-kp-other")
    conn.create_topic(topic, 3)
    conn.create_topic(other_topic, 1)
    produce_round_robin(conn, topic, 3, 30)
    conn.produce_ok(other_topic, 0, make_batch(5))
    tps = [(topic, p) for p in range(3)]
    active, empty = unique("kp-active"), unique("kp-empty")
    raw_commit(conn, empty, {(topic, 0): (3, -1, "m0"), (topic, 1): (4, 0, "")})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        with member_pool(tmp_path) as start:
            member = start("kafka-python", broker.bootstrap_servers, active, [topic], "adm-kp-member")
            wait_converged(conn, active, [member], set(tps))
            wait_committed(conn, active, {tp: 10 for tp in tps})
            member_id = member.member_id()

            groups = {g["group_id"]: g for g in admin.list_groups()}
            assert groups[active]["group_state"] == "Stable" and groups[active]["protocol_type"] == "consumer"
            assert groups[empty]["group_state"] == "Empty" and groups[empty]["protocol_type"] == ""
            only_empty = {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
            assert empty in only_empty and active not in only_empty

            d = admin.describe_groups([active])[active]
            assert (d["group_state"], d["protocol_type"], d["protocol_data"]) == ("Stable", "consumer", "range")
            (m,) = d["members"]
            assert (m["member_id"], m["client_id"]) == (member_id, "adm-kp-member")
            assert m["member_metadata"]["topics"] == [topic]
            assert m["member_assignment"]["assigned_partitions"] == [{"topic": topic, "partitions": [0, 1, 2]}]

            offsets = admin.list_group_offsets({active: None, empty: None})
            assert {(tp.topic, tp.partition): o.offset for tp, o in offsets[active].items()} == {tp: 10 for tp in tps}
            assert {(tp.topic, tp.partition): (o.offset, o.metadata, o.leader_epoch) for tp, o in offsets[empty].items()} \
                == {(topic, 0): (3, "m0", -1), (topic, 1): (4, "", 0)}

            # Offsets of an empty group: alter, reset, delete.
            result = admin.alter_group_offsets(empty, {TopicPartition(topic, 2): OffsetAndMetadata(7, "alt", -1)})
            assert set(result.values()) == {NoError}
            result = admin.reset_group_offsets(empty, {TopicPartition(topic, 0): OffsetSpec.EARLIEST,
                                                       TopicPartition(topic, 1): OffsetSpec.LATEST})
            assert {tp.partition: r["offset"] for tp, r in result.items()} == {0: 0, 1: 10}
            assert {tp: v[0] for tp, v in fetch_offsets(conn, empty, None).items()} == {
                (topic, 0): 0, (topic, 1): 10, (topic, 2): 7}
            assert fetch_offsets(conn, empty, [(topic, 2)]) == {(topic, 2): (7, -1, "alt")}
            result = admin.delete_group_offsets(empty, [TopicPartition(topic, 1)])
            assert set(result.values()) == {NoError}
            assert set(fetch_offsets(conn, empty, None)) == {(topic, 0), (topic, 2)}

            # A group with members: its subscribed topic's offsets cannot be deleted, others can.
            # (an offset of a topic it does not subscribe to, committed on the member's behalf)
            generation = current_generation(conn, active, member_id)
            raw_commit(conn, active, {(other_topic, 0): (2, -1, "")}, generation, member_id)
            result = admin.delete_group_offsets(active, [TopicPartition(topic, 0), TopicPartition(other_topic, 0)])
            assert {tp.topic: e.__name__ for tp, e in result.items()} == {
                topic: "GroupSubscribedToTopicError", other_topic: "NoError"}
            assert set(fetch_offsets(conn, active, None)) == set(tps)

            # remove_group_members: LeaveGroup v3+ on the member's behalf; it rejoins.
            removed = admin.remove_group_members(active, [MemberToRemove(member_id=member_id)])
            assert list(removed.values()) == [NoError]
            member.wait_for(lambda ev: sum(e["ev"] == "member" for e in ev) >= 2 and member.member_id() != member_id,
                            "rejoining under a new member id")
            wait_converged(conn, active, [member], set(tps))

            result = dict(admin.delete_groups([active, empty]))
            assert result == {active: "NonEmptyGroupError", empty: "OK"}
            member.close()
        assert dict(admin.delete_groups([active])) == {active: "OK"}
        assert {active, empty}.isdisjoint(g["group_id"] for g in admin.list_groups())
    finally:
        admin.close()


# =========================================================================== error paths (raw)


@pytest.fixture
def raw_group(conn):
    """A Stable one-member group on a fresh 3-partition topic: (group, topic, member id, generation)."""
    group, topic = unique("raw"), unique("raw-topic")
    conn.create_topic(topic, 3)
    member_id, generation = raw_member(conn, group, [topic], {topic: [0, 1, 2]})
    return group, topic, member_id, generation


def test_heartbeat_errors(conn, raw_group, no_broker_errors):
    group, topic, member_id, generation = raw_group
    assert heartbeat(conn, group, generation, member_id) == ErrorCode.none
    for version in (0, 1, 2, 3, 4):
        assert heartbeat(conn, group, generation - 1, member_id, version=version) == ErrorCode.illegal_generation
        assert heartbeat(conn, group, generation + 1, member_id, version=version) == ErrorCode.illegal_generation
        assert heartbeat(conn, group, generation, "nobody", version=version) == ErrorCode.unknown_member_id
    assert heartbeat(conn, unique("no-such-group"), 1, member_id) == ErrorCode.unknown_member_id
    # SyncGroup, OffsetCommit and LeaveGroup apply the same fencing.
    assert sync(conn, group, generation - 1, member_id).error_code == ErrorCode.illegal_generation
    assert sync(conn, group, generation, "nobody").error_code == ErrorCode.unknown_member_id
    offsets = {(topic, 0): (1, -1, "")}
    assert set(raw_commit(conn, group, offsets, generation - 1, member_id).values()) == {ErrorCode.illegal_generation}
    assert set(raw_commit(conn, group, offsets, generation, "nobody").values()) == {ErrorCode.unknown_member_id}
    # A group with members takes commits only from them (admin-style commits need it empty).
    assert set(raw_commit(conn, group, offsets).values()) == {ErrorCode.unknown_member_id}
    assert set(raw_commit(conn, group, offsets, generation, member_id).values()) == {ErrorCode.none}
    response = leave(conn, group, "nobody")
    assert [m.error_code for m in response.members] == [ErrorCode.unknown_member_id]
    assert conn.request(LEAVE_GROUP, 0, group_id=group, member_id="nobody").error_code == ErrorCode.unknown_member_id
    assert describe(conn, group).group_state == "Stable"
    response = leave(conn, group, member_id)
    assert (response.error_code, [m.error_code for m in response.members]) == (ErrorCode.none, [ErrorCode.none])
    assert heartbeat(conn, group, generation, member_id) == ErrorCode.unknown_member_id
    assert describe(conn, group).group_state == "Empty"
    # Now empty: a commit without generation (admin tools, assign-mode consumers) is fine.
    assert set(raw_commit(conn, group, offsets).values()) == {ErrorCode.none}


def test_heartbeat_with_a_stale_generation_during_a_rebalance(conn, raw_group, no_broker_errors):
    """Kafka checks the member and its generation before the group state
    (GroupCoordinator.validateHeartbeat): a stale generation is ILLEGAL_GENERATION even
    while the group prepares a rebalance; the current one gets REBALANCE_IN_PROGRESS."""
    group, topic, member_id, generation = raw_group
    with KafkaRaw(conn.host, conn.port) as other:
        first = join(other, group, [topic])
        pending = other.send(JOIN_GROUP, 9, build_join(group, [topic], member_id=first.member_id))
        wait_until(lambda: describe(conn, group).group_state == "PreparingRebalance", 5, message="a rebalance")
        assert heartbeat(conn, group, generation, member_id) == ErrorCode.rebalance_in_progress
        assert heartbeat(conn, group, generation - 1, member_id) == ErrorCode.illegal_generation
        leave(conn, group, member_id)
        assert other.receive(JOIN_GROUP, 9, pending).error_code == ErrorCode.none


def test_a_follower_waiting_in_sync_group_outlives_its_session_timeout(conn, no_broker_errors):
    """Kafka exempts members parked in SyncGroup from the session timeout: a leader that takes
    longer than the followers' session to compute the assignment must not evict them."""
    group, topic = unique("slow-leader"), unique("slow-leader-topic")
    conn.create_topic(topic, 2)
    with KafkaRaw(conn.host, conn.port) as follower_conn:
        leader_id, generation = raw_member(conn, group, [topic], {topic: [0, 1]})
        first = join(follower_conn, group, [topic])
        pending = follower_conn.send(JOIN_GROUP, 9, build_join(group, [topic], member_id=first.member_id))
        wait_until(lambda: describe(conn, group).group_state == "PreparingRebalance", 5, message="a rebalance")
        rejoin = join(conn, group, [topic], member_id=leader_id)
        follower_join = follower_conn.receive(JOIN_GROUP, 9, pending)
        assert rejoin.error_code == follower_join.error_code == ErrorCode.none
        assert rejoin.leader == leader_id and follower_join.generation_id == generation + 1
        follower_id = follower_join.member_id
        parked = follower_conn.send(SYNC_GROUP, 5, build_sync(group, generation + 1, follower_id))
        slow_until = time.monotonic() + SESSION_MS / 1000 * 1.5
        while time.monotonic() < slow_until:  # the leader heartbeats but does not sync yet
            assert heartbeat(conn, group, generation + 1, leader_id) == ErrorCode.none
            time.sleep(0.5)
        assert describe(conn, group).group_state == "CompletingRebalance"
        assignments = {leader_id: assignment_bytes({topic: [0]}), follower_id: assignment_bytes({topic: [1]})}
        assert sync(conn, group, generation + 1, leader_id, assignments).error_code == ErrorCode.none
        answer = follower_conn.receive(SYNC_GROUP, 5, parked)
        assert answer.error_code == ErrorCode.none
        assert decode_assignment(answer.assignment) == {(topic, 1)}
        assert heartbeat(follower_conn, group, generation + 1, follower_id) == ErrorCode.none
        assert describe(conn, group).group_state == "Stable"


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5, 7, 9])
def test_join_group_member_id_required_and_session_timeouts(conn, version, no_broker_errors):
    group, topic = unique("join"), unique("join-topic")
    conn.create_topic(topic, 1)
    for bad in (5999, 1_800_001):
        answer = join(conn, group, [topic], version=version, session_ms=bad)
        assert answer.error_code == ErrorCode.invalid_session_timeout, bad
    assert join(conn, "", [topic], version=version).error_code == ErrorCode.invalid_group_id
    first = join(conn, group, [topic], version=version, session_ms=6000)
    if version >= 4:  # KIP-394: a member id first, then the real join
        assert first.error_code == ErrorCode.member_id_required
        assert first.member_id.startswith("rawkafka-") and first.generation_id == -1
        assert describe(conn, group).members == ()  # not a member yet
        first = join(conn, group, [topic], member_id=first.member_id, version=version)
    assert first.error_code == ErrorCode.none and first.generation_id == 1
    assert first.leader == first.member_id and [m.member_id for m in first.members] == [first.member_id]
    assert first.protocol_name == "range"
    # An unknown member id is refused; so is a protocol type or set the group cannot use.
    assert join(conn, group, [topic], member_id="nobody", version=version).error_code == ErrorCode.unknown_member_id
    assert join(conn, group, [topic], version=version, protocol_type="connect").error_code \
        == ErrorCode.inconsistent_group_protocol
    assert join(conn, group, [topic], version=version, protocols=[("sticky", subscription([topic]))]).error_code \
        == ErrorCode.inconsistent_group_protocol


def test_offset_commit_errors(conn, no_broker_errors):
    group, topic = unique("commit"), unique("commit-topic")
    conn.create_topic(topic, 2)
    result = raw_commit(conn, group, {
        (topic, 0): (5, -1, "x" * 4096),       # the largest metadata allowed
        (topic, 1): (6, -1, "y" * 4097),       # one byte too many
        (topic, 2): (7, -1, ""),               # no such partition
        (unique("no-such-topic"), 0): (8, -1, ""),
    })
    assert result == {
        (topic, 0): ErrorCode.none,
        (topic, 1): ErrorCode.offset_metadata_too_large,
        (topic, 2): ErrorCode.unknown_topic_or_partition,
        next(tp for tp in result if tp[0] != topic): ErrorCode.unknown_topic_or_partition,
    }
    assert fetch_offsets(conn, group, None) == {(topic, 0): (5, -1, "x" * 4096)}
    for version in range(2, 10):  # every advertised version stores what it can carry
        assert set(raw_commit(conn, group, {(topic, 1): (10 + version, 3, f"v{version}")}, version=version).values()) \
            == {ErrorCode.none}
        epoch = 3 if version >= 6 else -1
        assert fetch_offsets(conn, group, [(topic, 1)]) == {(topic, 1): (10 + version, epoch, f"v{version}")}


def test_offset_fetch_versions_and_groups(conn, no_broker_errors):
    topic_a, topic_b = unique("fetch-a"), unique("fetch-b")
    conn.create_topic(topic_a, 2)
    conn.create_topic(topic_b, 1)
    g1, g2, g3 = unique("fetch-1"), unique("fetch-2"), unique("fetch-unknown")
    raw_commit(conn, g1, {(topic_a, 0): (1, 0, "a0"), (topic_b, 0): (2, -1, "b0")})
    raw_commit(conn, g2, {(topic_a, 1): (3, 5, "")})
    # Null topics (v2+): every committed partition of the group.
    for version in range(2, 8):
        response = conn.request(OFFSET_FETCH, version, group_id=g1, topics=None, require_stable=False)
        got = {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}
        assert got == {(topic_a, 0): 1, (topic_b, 0): 2}, version
    # Named partitions: uncommitted ones answer -1 (v1 included).
    for version in range(1, 8):
        response = conn.request(OFFSET_FETCH, version, group_id=g1, require_stable=False,
                                topics=[dict(name=topic_a, partition_indexes=[0, 1])])
        got = {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in response.topics for p in t.partitions}
        assert got == {(topic_a, 0): (1, "a0"), (topic_a, 1): (-1, "")}, version
    # v8+: several groups in one request, each with null or named topics; unknown groups
    # answer no partitions / -1.
    for version in (8, 9):
        response = conn.request(OFFSET_FETCH, version, require_stable=False, groups=[
            dict(group_id=g1, topics=None, member_id=None, member_epoch=-1),
            dict(group_id=g2, topics=[dict(name=topic_a, partition_indexes=[0, 1])], member_id=None, member_epoch=-1),
            dict(group_id=g3, topics=None, member_id=None, member_epoch=-1),
            dict(group_id=g3, topics=[dict(name=topic_b, partition_indexes=[0])], member_id=None, member_epoch=-1),
        ])
        got = [
            (g.group_id, g.error_code,
             {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
              for t in g.topics for p in t.partitions})
            for g in response.groups
        ]
        assert got == [
            (g1, ErrorCode.none, {(topic_a, 0): (1, 0, "a0"), (topic_b, 0): (2, -1, "b0")}),
            (g2, ErrorCode.none, {(topic_a, 0): (-1, -1, ""), (topic_a, 1): (3, 5, "")}),
            (g3, ErrorCode.none, {}),
            (g3, ErrorCode.none, {(topic_b, 0): (-1, -1, "")}),
        ], version


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator(broker, conn, version, no_broker_errors):
    """v0 (group key only), v1-3 (key type: 0 group, 1 transaction), v4+ (batched keys)."""
    node = (0, broker.host, broker.port)
    if version < 4:
        for key_type in ((0,) if version == 0 else (0, 1)):
            r = conn.request(FIND_COORDINATOR, version, key="some-group", key_type=key_type)
            assert (r.error_code, r.node_id, r.host, r.port) == (ErrorCode.none, *node)
        if version >= 1:
            r = conn.request(FIND_COORDINATOR, version, key="k", key_type=7)
            assert r.error_code == ErrorCode.invalid_request and r.node_id == -1
        return
    for key_type in (0, 1):
        keys = ["g-1", "g-2", "txn-ü"]
        r = conn.request(FIND_COORDINATOR, version, key_type=key_type, coordinator_keys=keys)
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in r.coordinators] == [
            (k, ErrorCode.none, *node) for k in keys
        ]
    r = conn.request(FIND_COORDINATOR, version, key_type=7, coordinator_keys=["a", "b"])
    assert [(c.key, c.error_code) for c in r.coordinators] == [("a", ErrorCode.invalid_request), ("b", ErrorCode.invalid_request)]


def test_offset_delete_raw(conn, raw_group, no_broker_errors):
    """OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC for a topic the group's members subscribe to,
    NONE for others (and for every topic once the group is empty); GROUP_ID_NOT_FOUND for
    an unknown group."""
    group, topic, member_id, generation = raw_group
    other = unique("offset-delete-other")
    conn.create_topic(other, 2)
    offsets = {(topic, 0): (1, -1, ""), (topic, 1): (2, -1, ""), (other, 0): (3, -1, ""), (other, 1): (4, -1, "")}
    assert set(raw_commit(conn, group, offsets, generation, member_id).values()) == {ErrorCode.none}

    def delete(group_id: str, parts: dict[str, list[int]]):
        r = conn.request(OFFSET_DELETE, 0, group_id=group_id, topics=[
            dict(name=t, partitions=[dict(partition_index=p) for p in ps]) for t, ps in parts.items()])
        return r.error_code, {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    code, parts = delete(group, {topic: [0], other: [0]})
    assert code == ErrorCode.none
    assert parts == {(topic, 0): ErrorCode.group_subscribed_to_topic, (other, 0): ErrorCode.none}
    assert set(fetch_offsets(conn, group, None)) == {(topic, 0), (topic, 1), (other, 1)}
    assert delete(unique("no-such-group"), {topic: [0]})[0] == ErrorCode.group_id_not_found
    leave(conn, group, member_id)
    code, parts = delete(group, {topic: [0, 1]})
    assert (code, set(parts.values())) == (ErrorCode.none, {ErrorCode.none})
    assert set(fetch_offsets(conn, group, None)) == {(other, 1)}


def test_list_describe_delete_groups_raw(conn, raw_group, no_broker_errors):
    group, topic, member_id, _generation = raw_group
    offsets_only = unique("offsets-only")
    raw_commit(conn, offsets_only, {(topic, 0): (1, -1, "")})
    for version in range(6):
        fields = {}
        if version >= 4:
            fields["states_filter"] = []
        if version >= 5:
            fields["types_filter"] = []
        r = conn.request(LIST_GROUPS, version, **fields)
        listed = {g.group_id: g for g in r.groups}
        assert r.error_code == ErrorCode.none
        assert listed[group].protocol_type == "consumer" and listed[offsets_only].protocol_type == ""
        if version >= 4:
            assert (listed[group].group_state, listed[offsets_only].group_state) == ("Stable", "Empty")
    r = conn.request(LIST_GROUPS, 5, states_filter=["stable"], types_filter=[])
    assert group in {g.group_id for g in r.groups} and offsets_only not in {g.group_id for g in r.groups}
    # KIP-848 groups only (the module's consumer-protocol tests leave some): not these classic ones
    r = conn.request(LIST_GROUPS, 5, states_filter=[], types_filter=["consumer"])
    assert all(g.group_type == "consumer" for g in r.groups)
    assert not {group, offsets_only} & {g.group_id for g in r.groups}
    r = conn.request(LIST_GROUPS, 5, states_filter=[], types_filter=["classic"])
    assert {group, offsets_only} <= {g.group_id for g in r.groups}

    for version in range(6):
        d = describe(conn, group, version)
        assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
        (m,) = d.members
        assert m.member_id == member_id and m.client_id == "rawkafka" and m.client_host == "127.0.0.1"
        assert decode_assignment(m.member_assignment) == {(topic, p) for p in range(3)}
        assert m.member_metadata == subscription([topic])
    assert describe(conn, unique("no-such-group")).group_state == "Dead"

    r = conn.request(DELETE_GROUPS, 2, groups_names=[group, offsets_only, unique("no-such-group")])
    assert [x.error_code for x in r.results] == [
        ErrorCode.non_empty_group, ErrorCode.none, ErrorCode.group_id_not_found]
    assert fetch_offsets(conn, offsets_only, None) == {}


@pytest.mark.parametrize("version", [3, 4, 5])
def test_leave_group_batch_and_instance_ids_raw(conn, version, no_broker_errors):
    """LeaveGroup v3+: several members at once, identified by member id or by
    group.instance.id alone; a mismatched member id for an instance is FENCED_INSTANCE_ID."""
    group, _topic, a, b, generation = static_pair(conn, 5)
    response = conn.request(LEAVE_GROUP, version, group_id=group, members=[
        dict(member_id="wrong-id", group_instance_id="a", reason=None),
        dict(member_id="nobody", group_instance_id=None, reason=None),
    ])
    assert response.error_code == ErrorCode.none
    assert [m.error_code for m in response.members] == [ErrorCode.fenced_instance_id, ErrorCode.unknown_member_id]
    assert describe(conn, group).group_state == "Stable"
    response = conn.request(LEAVE_GROUP, version, group_id=group, members=[
        dict(member_id="", group_instance_id="a", reason=None),  # by instance id alone
        dict(member_id=b.member_id, group_instance_id="b", reason=None),
    ])
    assert (response.error_code, [m.error_code for m in response.members]) == (ErrorCode.none, [ErrorCode.none] * 2)
    assert [(m.member_id, m.group_instance_id) for m in response.members] == [("", "a"), (b.member_id, "b")]
    d = describe(conn, group)
    assert (d.group_state, d.members) == ("Empty", ())
    assert heartbeat(conn, group, generation, a.member_id, "a") == ErrorCode.unknown_member_id
