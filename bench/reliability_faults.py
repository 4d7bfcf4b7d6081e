"""One check per fault of issue 12, each against its own broker process, each pass or fail.

- ``decompression_bomb``: 16 KB of zstd (and 512 KB of gzip) inflating to 512 MB, produced
  on its own: refused with an error code within 5 s, broker RSS grows < 300 MB, the
  connection and the broker stay usable.
- ``record_count_bomb``: 5 KB of zstd holding 9 million empty records with offset delta 0
  (63 MB inflated, the header's count agreeing), produced once, then three at once, then
  with a header declaring one record, while a well-behaved client produces and fetches:
  CORRUPT_MESSAGE (2) each, INVALID_RECORD (87) for the last, nothing stored, the other
  client's slowest request under 0.5 s, broker RSS grows < 64 MB.
- ``pipelined_fetches``: 32 pipelined fetches of a 12 MB partition on a socket that never
  reads: RSS grows < 120 MB and another client's ApiVersions stays under 1 s.
- ``offset_deltas``: a batch whose records' offset deltas are 0,5,2: CORRUPT_MESSAGE (2),
  nothing appended.
- ``huge_partitions``: CreateTopics and CreatePartitions for 2^31-1, 100,000 and 1,001
  partitions: INVALID_PARTITIONS (37), within 5 s, no topic created.
- ``list_offsets_negative``: ListOffsets for timestamp -10 (v1 and v10): answered without
  UNKNOWN_SERVER_ERROR.
- ``slow_request``: a request arriving one byte per second with request.read.timeout.ms=2000:
  the connection is closed within 2-6 s, others are served meanwhile.
- ``damaged_consume_queue``: 60 bytes of random data over entries 20-22 of a consume-queue
  file of a stopped broker: every offset reads back its own record or an error, never another
  record, and retried as a client retries KAFKA_STORAGE_ERROR, every one reads back without a
  restart (the damaged entries are rebuilt while the broker serves).
- ``full_disk_power_loss``: a ``--flush sync`` broker on a 24 MiB tmpfs acknowledges 10,000
  records, is killed, loses the index entries no checkpoint covered (as a power loss may),
  and the file system is filled to its last block: it starts, serves every acknowledged
  record, answers produces with KAFKA_STORAGE_ERROR, and takes them again within 5 s of
  space being freed. Needs root to mount the tmpfs; skipped (and said so) otherwise.
- ``view_acl`` (issue 20): with ACLs on, a user with every right on the topic names ``peek*``
  and none on ``secret`` tries to read ``secret`` through a subscription view: creating one
  over it is refused (TOPIC_AUTHORIZATION_FAILED), and fetching from one the owner made is
  refused too, without a byte of ``secret``.
- ``create_topics_flood``: 4 connections send CreateTopics of 500 new topics each back to
  back (16,000 topics) while a well-behaved client produces: its slowest produce stays under
  1 s, every request is answered, the topics past the controller mutation quota get
  THROTTLING_QUOTA_EXCEEDED (89) with a throttle time, and no more are created than the
  quota allows.
- ``full_disk_timers``: a broker on a 24 MiB tmpfs filled up to 256 KiB free takes timer
  produces (TIMER_DELAY_SEC; half due in 2 s, half each on a wheel page not written yet)
  until the disk refuses them, is killed and started on the full disk, and refuses a
  produce there: it never dies (a memory-mapped wheel died of SIGBUS here), appends get
  KAFKA_STORAGE_ERROR, and once space is freed every acknowledged 2 s timer is delivered
  and none of the later ones early. Needs root, as above.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import zstandard
from crc32c import crc32c

from .record_count_bomb import record_count_bomb as count_bomb
from .reliability_common import BackgroundThread, RssSampler, broker, raw
from .small_filesystem import (
    MountRefused,
    lose_unsynced_index_entries,
    small_filesystem,
)

ErrorCode = raw.ErrorCode
CREATE_PARTITIONS = 37
BOMB_BYTES = 512 << 20
BOMB_RECORDS = 9_000_000  # 63 MB of 7-byte records: just under 64 x message.max.bytes


@dataclass
class FaultResult:
    name: str
    passed: bool
    detail: str
    seconds: float = 0.0
    skipped: str = ""  # why the check could not run here (then ``passed`` says nothing)

    def as_dict(self) -> dict:
        return asdict(self)


def _connect(instance) -> raw.KafkaRaw:
    return raw.KafkaRaw(instance.host, instance.port)


def _still_serving(instance) -> bool:
    """The broker process is alive and answers a fresh connection."""
    if not instance.running:
        return False
    with _connect(instance) as conn:
        return conn.api_versions().error_code == ErrorCode.none


def _bomb_body(codec: int) -> bytes:
    """``BOMB_BYTES`` of zeros compressed with ``codec``, built 1 MiB at a time (no 512 MB
    buffer on our side)."""
    chunk = bytes(1 << 20)
    if codec == raw.ZSTD:
        compressor = zstandard.ZstdCompressor(level=3).compressobj()
    else:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = b"".join(compressor.compress(chunk) for _ in range(BOMB_BYTES >> 20))
    return body + compressor.flush()


def _bomb_batch(codec: int) -> bytes:
    """A one-record batch header whose compressed records are the bomb, CRC valid."""
    batch = bytearray(raw.make_batch([b"x"], compression=codec))
    batch[61:] = _bomb_body(codec)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def _names(codes: dict) -> str:
    return ", ".join(f"{name} {code.name} ({int(code)})" for name, code in codes.items())


def decompression_bomb(workdir: Path) -> FaultResult:
    instance = broker(workdir / "bomb")
    try:
        with _connect(instance) as conn:
            conn.create_topic("bomb")
            bombs = {"zstd": _bomb_batch(raw.ZSTD), "gzip": _bomb_batch(raw.GZIP)}
            codes, slowest = {}, 0.0
            with RssSampler(instance.pid) as rss:
                for name, batch in bombs.items():
                    began = time.monotonic()
                    codes[name] = conn.produce("bomb", 0, batch).error_code
                    slowest = max(slowest, time.monotonic() - began)
            stored = conn.high_watermark("bomb")
        sizes = {name: f"{len(batch) >> 10} KB" for name, batch in bombs.items()}
        passed = (all(code != ErrorCode.none for code in codes.values()) and stored == 0
                  and slowest < 5 and rss.grown_mb < 300 and _still_serving(instance))
        return FaultResult("decompression_bomb", passed,
                           f"{sizes} of 512 MB: {_names(codes)}, {slowest:.2f} s, "
                           f"RSS +{rss.grown_mb:.0f} MB, stored {stored}")
    finally:
        instance.close()


def _fetch_request() -> dict:
    """Fetch v12 fields: all of partition 0 of "big", up to 64 MB, no waiting."""
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 64 << 20}
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 64 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
            "topics": [{"topic": "big", "topic_id": None, "partitions": [partition]}]}


class _GoodClient(BackgroundThread):
    """A well-behaved client in a thread: produces one record and fetches it back, again and
    again, timing each request; ``slowest`` is the longest it waited for an answer."""

    def __init__(self, instance, topic: str) -> None:
        super().__init__("good-client")
        self._instance, self._topic = instance, topic
        self.slowest = 0.0
        self.rounds = self.errors = 0

    def _timed(self, request: Callable[[], object]) -> object:
        began = time.monotonic()
        answer = request()
        self.slowest = max(self.slowest, time.monotonic() - began)
        return answer

    def _run(self) -> None:
        with _connect(self._instance) as conn:
            while not self._stop.is_set():
                try:
                    offset = self._timed(lambda: conn.produce_ok(self._topic, 0, raw.make_batch([b"good"])))
                    entry = self._timed(lambda: conn.fetch(self._topic, 0, offset))
                    self.errors += entry.error_code != ErrorCode.none
                except (OSError, AssertionError):
                    self.errors += 1
                    return
                self.rounds += 1
                time.sleep(0.01)


def _produce_code(instance, batch: bytes) -> ErrorCode:
    with _connect(instance) as conn:
        return conn.produce("bomb", 0, batch).error_code


def record_count_bomb(workdir: Path) -> FaultResult:
    instance = broker(workdir / "record-count-bomb")
    try:
        with _connect(instance) as conn:
            conn.create_topic("bomb")
            conn.create_topic("good")
        now = int(time.time() * 1000)
        bomb = count_bomb(BOMB_RECORDS, timestamp_ms=now)  # the header declares them all
        lying = count_bomb(BOMB_RECORDS, declared=1, timestamp_ms=now)  # the header declares one
        with _GoodClient(instance, "good") as good, RssSampler(instance.pid) as rss:
            time.sleep(0.3)  # the good client's rounds are under way
            began = time.monotonic()
            codes = [_produce_code(instance, bomb)]
            one = time.monotonic() - began
            began = time.monotonic()
            with ThreadPoolExecutor(3) as pool:
                codes += list(pool.map(lambda _: _produce_code(instance, bomb), range(3)))
            three = time.monotonic() - began
            declared_one = _produce_code(instance, lying)
            time.sleep(0.3)
        with _connect(instance) as conn:
            stored = conn.high_watermark("bomb")
        passed = (set(codes) == {ErrorCode.corrupt_message} and declared_one == ErrorCode.invalid_record
                  and stored == 0 and good.errors == 0 and good.rounds > 0 and good.slowest < 0.5
                  and rss.grown_mb < 64 and _still_serving(instance))
        return FaultResult("record_count_bomb", passed,
                           f"{len(bomb) / 1000:.1f} KB of zstd, {BOMB_RECORDS:,} empty records with offset delta 0: "
                           f"{_names({'one': codes[0]})} in {one * 1000:.0f} ms, three at once in "
                           f"{three * 1000:.0f} ms; declaring one record: {_names({'got': declared_one})}; "
                           f"other client's slowest request {good.slowest * 1000:.0f} ms "
                           f"({good.rounds} rounds, {good.errors} errors), RSS +{rss.grown_mb:.0f} MB, stored {stored}")
    finally:
        instance.close()


def pipelined_fetches(workdir: Path) -> FaultResult:
    instance = broker(workdir / "fetches")
    try:
        with _connect(instance) as conn:
            conn.create_topic("big", partitions=1, configs={"max.message.bytes": str(2 << 20)})
            for _ in range(12):
                conn.produce_ok("big", 0, raw.make_batch([os.urandom(1 << 20)]))
        hog = _connect(instance)
        hog.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slowest = 0.0
        with RssSampler(instance.pid) as rss, _connect(instance) as other:
            for _ in range(32):
                hog.send(raw.ApiKey.FETCH, 12, **_fetch_request())
            for _ in range(20):
                began = time.monotonic()
                other.api_versions()
                slowest = max(slowest, time.monotonic() - began)
                time.sleep(0.1)
        hog.close()
        passed = rss.grown_mb < 120 and slowest < 1.0 and _still_serving(instance)
        return FaultResult("pipelined_fetches", passed,
                           f"32 x 12 MB unread: RSS +{rss.grown_mb:.0f} MB, "
                           f"other client's slowest ApiVersions {slowest * 1000:.0f} ms")
    finally:
        instance.close()


def _batch_with_deltas(deltas: tuple[int, ...]) -> bytes:
    """A batch whose records carry ``deltas`` as offset deltas; header fields and CRC as a
    correct batch of that many records would have them."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i, delta in enumerate(deltas):
        builder.append(delta, timestamp=now, key=None, value=b"d%d" % i, headers=[])
    return raw.patch_batch(bytes(builder.build()), fix_crc=True, last_offset_delta=len(deltas) - 1)


def offset_deltas(workdir: Path) -> FaultResult:
    instance = broker(workdir / "deltas")
    try:
        with _connect(instance) as conn:
            conn.create_topic("deltas")
            code = conn.produce("deltas", 0, _batch_with_deltas((0, 5, 2))).error_code
            stored = conn.high_watermark("deltas")
        passed = code == ErrorCode.corrupt_message and stored == 0 and _still_serving(instance)
        return FaultResult("offset_deltas", passed, f"deltas 0,5,2: {code.name} ({int(code)}), stored {stored}")
    finally:
        instance.close()


def huge_partitions(workdir: Path) -> FaultResult:
    instance = broker(workdir / "partitions")
    try:
        codes = set()
        with _connect(instance) as conn:
            conn.create_topic("existing")
            began = time.monotonic()
            for count in (2**31 - 1, 100_000, 1001):
                codes.add(conn.create_topics({f"huge-{count}": count}).topics[0].error_code)
                grown = conn.request(CREATE_PARTITIONS, 3, topics=[{"name": "existing", "count": count,
                                                                        "assignments": None}],
                                     timeout=10_000, validate_only=False)
                codes.add(grown.results[0].error_code)
            seconds = time.monotonic() - began
            created = [t.name for t in conn.metadata(None).topics if t.name.startswith("huge-")]
        passed = codes == {ErrorCode.invalid_partitions} and seconds < 5 and not created and _still_serving(instance)
        return FaultResult("huge_partitions", passed,
                           f"2^31-1 / 100000 / 1001 partitions: {sorted(c.name for c in codes)} in "
                           f"{seconds:.2f} s, topics created {created}")
    finally:
        instance.close()


def list_offsets_negative(workdir: Path) -> FaultResult:
    instance = broker(workdir / "list-offsets")
    try:
        with _connect(instance) as conn:
            conn.create_topic("stamped")
            conn.produce_ok("stamped", 0, raw.make_batch(3))
            answers = {v: conn.list_offsets("stamped", 0, -10, version=v) for v in (1, 10)}
        codes = {v: a.error_code for v, a in answers.items()}
        passed = all(c != ErrorCode.unknown_server_error for c in codes.values()) and _still_serving(instance)
        return FaultResult("list_offsets_negative", passed,
                           "timestamp -10: " + ", ".join(f"v{v} {c.name} offset {answers[v].offset}"
                                                          for v, c in codes.items()))
    finally:
        instance.close()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the broker closes ``sock`` within ``seconds``."""
    sock.settimeout(seconds)
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def slow_request(workdir: Path) -> FaultResult:
    instance = broker(workdir / "slow", config={"request.read.timeout.ms": "2000"})
    try:
        frame = struct.pack(">i", 200) + bytes(20)
        began = time.monotonic()
        served = 0
        with socket.create_connection((instance.host, instance.port)) as slow, _connect(instance) as other:
            for byte in frame:
                try:
                    slow.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    break
                served += other.api_versions().error_code == ErrorCode.none
                if _closed_within(slow, 1.0):
                    break
            closed_after = time.monotonic() - began
        passed = 2 <= closed_after < 6 and served > 0 and _still_serving(instance)
        return FaultResult("slow_request", passed,
                           f"one byte per second, request.read.timeout.ms=2000: closed after "
                           f"{closed_after:.1f} s; {served} requests of another client served meanwhile")
    finally:
        instance.close()


def _consume_queue_file(data_dir: Path) -> Path:
    [queue] = [f for f in (data_dir / "consumequeue").rglob("*.cq")]
    return queue


def _read_each(instance, count: int) -> tuple[int, int, int]:
    """(right, errors, wrong): each offset below ``count`` read on its own, an error retried
    (up to 50 times, 0.1 s apart) as clients retry KAFKA_STORAGE_ERROR; ``errors`` counts
    the errors met on the way."""
    right = errors = wrong = 0
    with _connect(instance) as conn:
        for offset in range(count):
            for _ in range(50):
                entry = conn.fetch("damaged", 0, offset, partition_max_bytes=1)
                if entry.error_code == ErrorCode.none:
                    break
                errors += 1
                time.sleep(0.1)
            if entry.error_code != ErrorCode.none:
                continue
            records = [r for r in raw.decode_records(entry.records or b"") if r.offset == offset]
            good = len(records) == 1 and records[0].value == b"v%d" % offset
            right += good
            wrong += not good
    return right, errors, wrong


def damaged_consume_queue(workdir: Path) -> FaultResult:
    instance = broker(workdir / "damaged")
    try:
        with _connect(instance) as conn:
            conn.create_topic("damaged")
            for i in range(60):
                conn.produce_ok("damaged", 0, raw.make_batch([b"v%d" % i]))
        instance.stop()
        queue = _consume_queue_file(instance.data_dir)
        data = bytearray(queue.read_bytes())
        data[20 * 20:20 * 20 + 60] = random.Random(12).randbytes(60)
        queue.write_bytes(bytes(data))
        instance.start()
        right, errors, wrong = _read_each(instance, 60)
        passed = wrong == 0 and errors > 0 and right == 60 and _still_serving(instance)
        return FaultResult("damaged_consume_queue", passed,
                           f"entries 20-22 overwritten: {right} of 60 right without a restart, {wrong} wrong, "
                           f"{errors} KAFKA_STORAGE_ERROR answers before the repair")
    finally:
        instance.close()


def _on_a_small_filesystem(name: str, workdir: Path, check: Callable[..., FaultResult]) -> FaultResult:
    """``check(fs)`` on a tmpfs mounted for it; skipped (and said so) where mounting is refused."""
    try:
        with small_filesystem(workdir / "small-fs") as fs:
            return check(fs)
    except MountRefused as exc:
        return FaultResult(name, True, "not run", skipped=str(exc))


def full_disk_power_loss(workdir: Path) -> FaultResult:
    return _on_a_small_filesystem("full_disk_power_loss", workdir, _full_disk_power_loss)


def _full_disk_power_loss(fs) -> FaultResult:
    instance = broker(fs.path / "data", flush="sync",
                      config={"log.dir.reserve.bytes": "2097152", "log.flush.interval.ms": "600000"})
    try:
        expected: dict[int, list[bytes]] = {0: [], 1: []}
        with _connect(instance) as conn:
            conn.create_topic("full", 2)
            for i in range(200):
                values = [b"r%d-%d" % (i, n) for n in range(50)]
                conn.produce_ok("full", i % 2, raw.make_batch(values))
                expected[i % 2].extend(values)
        instance.kill()
        lose_unsynced_index_entries(instance.data_dir)
        fs.fill()
        began = time.monotonic()
        instance.start()
        started = time.monotonic() - began
        with _connect(instance) as conn:
            served = sum(len([r for r in conn.fetch_all("full", p)
                              if r.value in set(expected[p])]) for p in (0, 1))
            refused = conn.produce("full", 0, raw.make_batch([b"refused"])).error_code
            fs.free()
            began = time.monotonic()
            while (code := conn.produce("full", 0, raw.make_batch([b"after"])).error_code) != ErrorCode.none:
                if time.monotonic() - began > 5:
                    break
                time.sleep(0.1)
            resumed = time.monotonic() - began
        acknowledged = len(expected[0]) + len(expected[1])
        passed = (served == acknowledged and refused == ErrorCode.kafka_storage_error
                  and code == ErrorCode.none and _still_serving(instance))
        return FaultResult("full_disk_power_loss", passed,
                           f"{acknowledged} acknowledged, index entries lost, disk filled: started in "
                           f"{started:.2f} s, {served} served; produce on the full disk: {_names({'got': refused})}; "
                           f"taken again {resumed:.1f} s after space was freed")
    finally:
        instance.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def view_acl(workdir: Path) -> FaultResult:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    outside = _free_port()  # PLAINTEXT: the attacker is User:ANONYMOUS
    instance = broker(workdir / "view-acl", config={
        "listeners": f"OWNER://127.0.0.1:0,OUTSIDE://127.0.0.1:{outside}",
        "listener.security.protocol.map": "OWNER:SASL_PLAINTEXT,OUTSIDE:PLAINTEXT",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'user_owner="owner-secret";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:owner",
    })
    try:
        owner = {"bootstrap.servers": instance.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanism": "PLAIN", "sasl.username": "owner", "sasl.password": "owner-secret"}
        admin = AdminClient(owner)
        admin.create_topics([NewTopic("secret", 1)])["secret"].result(10)
        producer = Producer(owner)
        producer.produce("secret", b"the secret")
        if producer.flush(10):
            raise RuntimeError("the owner could not produce to 'secret'")
        grants = [AclBinding(kind, "peek", ResourcePatternType.PREFIXED, "User:ANONYMOUS", "*", AclOperation.ALL,
                             AclPermissionType.ALLOW) for kind in (ResourceType.TOPIC, ResourceType.GROUP)]
        for future in admin.create_acls(grants).values():
            future.result(10)
        view_configs = {"rmq.view.source": "secret", "rmq.view.tags": "*"}
        with raw.KafkaRaw("127.0.0.1", outside) as conn:
            created = conn.request(raw.ApiKey.CREATE_TOPICS, 7, timeout=10_000, validate_only=False, topics=[dict(
                name="peek-mine", num_partitions=-1, replication_factor=-1, assignments=(),
                configs=[dict(name=k, value=v) for k, v in view_configs.items()])]).topics[0].error_code
            admin.create_topics([NewTopic("peek-owners", -1, -1, config=view_configs)])["peek-owners"].result(10)
            fetched = conn.fetch("peek-owners", 0, 0)
        leaked = b"the secret" in bytes(fetched.records or b"")
        passed = (created == fetched.error_code == ErrorCode.topic_authorization_failed and not leaked
                  and _still_serving(instance))
        return FaultResult("view_acl", passed,
                           f"a view over 'secret' created by a user without READ on it: {created.name}; a fetch "
                           f"through the owner's view: {fetched.error_code.name}, secret bytes returned: {leaked}")
    finally:
        instance.close()


FLOOD_THREADS = 4
FLOOD_REQUESTS = 8  # per thread
FLOOD_TOPICS = 500  # per request
FLOOD_RATE = 1000  # controller.mutation.rate, the default; burst = 11 x rate


def create_topics_flood(workdir: Path) -> FaultResult:
    """Issue 20: 4 connections send CreateTopics v7 of 500 new topics each, back to back (16,000
    topics), while a well-behaved client produces one record at a time. Its slowest produce
    must stay under 1 s, the broker must answer every request, refuse the topics past the
    controller mutation quota with THROTTLING_QUOTA_EXCEEDED (89) and a throttle time, and
    create no more than the quota allows (burst + rate x elapsed)."""
    from .create_topics_flood import create_frame, producer_while_flooding, topic_codes

    instance = broker(workdir / "flood", config={"max.partitions": "100000",
                                                  "controller.mutation.rate": str(FLOOD_RATE)})
    try:
        frames = [[create_frame([f"flood-{t}-{r}-{i}" for i in range(FLOOD_TOPICS)], correlation_id=r + 1)
                   for r in range(FLOOD_REQUESTS)] for t in range(FLOOD_THREADS)]
        with _connect(instance) as conn:
            conn.create_topic("steady")
        stop = threading.Event()
        producer, times = producer_while_flooding(instance, "steady", stop)
        answers: list[bytes] = []
        failures: list[str] = []

        def flood(own: list[bytes]) -> None:
            try:
                with _connect(instance) as conn:
                    for frame in own:
                        conn.send_raw(frame)
                        answers.append(conn.recv_frame(60))
            except Exception as exc:  # noqa: BLE001  # a broker that drops or stalls us fails the check
                failures.append(f"{type(exc).__name__}: {exc}")

        time.sleep(0.3)
        began = time.monotonic()
        threads = [threading.Thread(target=flood, args=(own,), daemon=True) for own in frames]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        elapsed = time.monotonic() - began
        time.sleep(0.3)
        stop.set()
        producer.join(60)
        codes = [code for payload in answers for code in topic_codes(payload)]
        created = codes.count(ErrorCode.none)
        throttled = codes.count(ErrorCode.throttling_quota_exceeded)
        others = sorted({c.name for c in codes} - {"none", "throttling_quota_exceeded"})
        throttle_ms = max((raw.decode_response(raw.ApiKey.CREATE_TOPICS, 7, p)[1].throttle_time.total_seconds() * 1000
                           for p in answers), default=0)
        allowed = FLOOD_RATE * (11 + elapsed) + FLOOD_TOPICS
        passed = (not failures and not times.errors and len(answers) == FLOOD_THREADS * FLOOD_REQUESTS
                  and times.slowest < 1.0 and throttled > 0 and throttle_ms > 0 and not others
                  and created <= allowed and _still_serving(instance))
        return FaultResult("create_topics_flood", passed,
                           f"{len(answers)} requests answered in {elapsed:.1f} s: {created} topics created "
                           f"(quota allows {allowed:.0f}), {throttled} THROTTLING_QUOTA_EXCEEDED (throttle up to "
                           f"{throttle_ms:.0f} ms), other codes {others}; the other client's slowest produce "
                           f"{times.slowest * 1000:.0f} ms of {len(times.latencies)}, errors "
                           f"{(failures + times.errors)[:3]}")
    finally:
        instance.close()


def full_disk_timers(workdir: Path) -> FaultResult:
    return _on_a_small_filesystem("full_disk_timers", workdir, _full_disk_timers)


class _TimerProducer:
    """Produces one timer record a request on a connection of its own, each value numbered:
    every other one due in 2 s, the others each 20 s later than the one before (from 60 s
    on), so that each of those needs a wheel slot on a page of the wheel file not written
    yet. ``acknowledged`` keeps the soon-due values that were, across reconnections, and
    ``later`` the others."""

    def __init__(self) -> None:
        self.acknowledged: list[bytes] = []
        self.later: list[bytes] = []
        self._conn: raw.KafkaRaw | None = None
        self._n = 0

    def send(self, instance) -> ErrorCode:
        if self._conn is None:
            self._conn = _connect(instance)
        n, self._n = self._n, self._n + 1
        value = b"timer-%d" % n
        delay = b"2" if n % 2 == 0 else b"%d" % (60 + 10 * n)
        batch = raw.make_batch([value], headers=[[("TIMER_DELAY_SEC", delay)]])
        code = self._conn.produce("timed", 0, batch).error_code
        if code == ErrorCode.none:
            (self.acknowledged if n % 2 == 0 else self.later).append(value)
        return code

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _delivered(instance, wanted: set[bytes], seconds: float) -> set[bytes]:
    """The values read from ``timed`` until all of ``wanted`` were or ``seconds`` passed (a
    consumer moves past the gaps the parked records left)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": f"{instance.host}:{instance.port}", "group.id": "full-disk-check",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition("timed", 0, 0)])
    seen: set[bytes] = set()
    deadline = time.monotonic() + seconds
    try:
        while not wanted <= seen and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen.add(message.value())
    finally:
        consumer.close()
    return seen


def _full_disk_timers(fs) -> FaultResult:
    """Timer produces with 256 KiB free until the disk refuses them, a kill -9 and a start
    on the full disk, a produce there; then space is freed and every acknowledged timer
    must be delivered."""
    instance = broker(fs.path / "data", config={"log.dir.reserve.bytes": "1048576"})
    producer = _TimerProducer()
    try:
        with _connect(instance) as conn:
            conn.create_topic("timed")
        for _ in range(20):
            producer.send(instance)
        fs.fill(leave=256 << 10)
        refused = sent = 0
        deadline = time.monotonic() + 30
        while refused < 20 and time.monotonic() < deadline and instance.running:
            refused += producer.send(instance) == ErrorCode.kafka_storage_error
            sent += 1
        producer.close()
        alive = instance.running
        instance.kill()
        instance.start()  # on the full disk: recovery, the timer index, the due timers
        after_restart = producer.send(instance)
        producer.close()
        time.sleep(3)  # the timers fall due while there is no room to deliver them
        alive = alive and instance.running
        fs.free()
        acknowledged = set(producer.acknowledged)
        seen = _delivered(instance, acknowledged, 30)
        delivered, early = seen & acknowledged, seen & set(producer.later)
        fatal = "Fatal Python error" in instance.stderr
        passed = (alive and not fatal and refused > 0 and after_restart == ErrorCode.kafka_storage_error
                  and delivered == acknowledged and not early and _still_serving(instance))
        return FaultResult("full_disk_timers", passed,
                           f"256 KiB free: {sent} timer produces, {refused} refused; kill -9 and start on the "
                           f"full disk, a produce: {_names({'got': after_restart})}; broker alive {alive}, "
                           f"fatal signal {fatal}; after space was freed {len(delivered)} of "
                           f"{len(acknowledged)} acknowledged 2 s timers delivered, {len(early)} of "
                           f"{len(producer.later)} later ones early")
    finally:
        producer.close()
        instance.close()


FAULTS: dict[str, Callable[[Path], FaultResult]] = {
    fn.__name__: fn for fn in (decompression_bomb, record_count_bomb, pipelined_fetches, offset_deltas, huge_partitions,
                               list_offsets_negative, slow_request, damaged_consume_queue,
                               full_disk_power_loss, view_acl, create_topics_flood, full_disk_timers)
}


def run_fault(name: str, workdir: Path) -> FaultResult:
    """One fault check, timed. What a misbehaving broker raises here (a closed or timed-out
    connection, a refused request, a broker that does not start) is a failure with its
    message as the detail, so that the other checks still run."""
    began = time.monotonic()
    try:
        result = FAULTS[name](workdir)
    except (OSError, AssertionError, RuntimeError) as exc:
        result = FaultResult(name, False, f"{type(exc).__name__}: {exc}")
    result.seconds = round(time.monotonic() - began, 1)
    return result
