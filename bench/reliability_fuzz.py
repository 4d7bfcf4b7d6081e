"""Fuzzing: malformed frames over many connections while a well-behaved client keeps working.

The templates are valid requests: one per API key and version the broker advertises in
ApiVersions, with every field at a plain value (strings "fz", numbers 0, one element per
array, a real record batch where records go), plus Produce requests to a real topic holding
batches of every codec. Each frame sent is a template damaged one way (see ``MUTATIONS``):
random bytes with or without a frame, truncated, bit-flipped, a huge or negative size, a huge
array count, a run of 0xff bytes where a varint may be, a spliced-in random range, or a
Produce whose compressed batch is damaged with the CRC fixed (so decompression sees it) or
left wrong.

Sender threads open a connection, send 0-3 valid frames and one damaged frame, half-close
it and read until the broker closes it (so the broker has read every frame; a connection it leaves open for 5 s after
the client's EOF is counted as ``unclosed``). Meanwhile a confluent-kafka producer and
consumer produce one record at a time and read it back; every failure or wrong record is a
client error. A broker that exits is a crash: it is counted, its log kept, and it is
restarted so that the run goes on. The broker's RSS is sampled throughout.
"""

from __future__ import annotations

import dataclasses
import datetime
import random
import socket
import struct
import threading
import time
import types
import typing
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kio.index import UnknownEntity, load_request_schema

from .reliability_common import (
    QUIET,
    RssSampler,
    broker,
    memory_mb,
    raw,
    restart_same_port,
)

FUZZ_TOPIC = "fuzz"
HEALTHY_TOPIC = "healthy"
SENDERS = 4
CLOSE_TIMEOUT = 5.0
BATCH_HEADER = 61  # bytes of a v2 batch before its (possibly compressed) records
CODECS = (raw.NONE, raw.GZIP, raw.SNAPPY, raw.LZ4, raw.ZSTD)
_PLAIN = {"string": "fz", "bool": False, "bytes": b"", "uuid": uuid.UUID(int=0), "float64": 0.0,
          "timedelta_i32": datetime.timedelta(0), "timedelta_i64": datetime.timedelta(0)}


@dataclass
class FuzzReport:
    frames: int
    malformed: int
    connections: int
    seconds: float
    crashes: int
    unclosed: int
    client_rounds: int
    client_errors: int
    client_max_latency_ms: float
    client_error_samples: list[str]
    rss_start_mb: float
    rss_peak_mb: float
    by_mutation: dict[str, int] = field(default_factory=dict)
    crash_logs: list[str] = field(default_factory=list)

    def failures(self) -> list[str]:
        problems = [f"{name}={value}" for name, value in
                    (("crashes", self.crashes), ("client_errors", self.client_errors)) if value]
        if not self.client_rounds:
            problems.append("the well-behaved client never completed a round")
        return problems

    def as_dict(self) -> dict:
        return asdict(self)


# --- templates


def plain_value(hint: typing.Any, kafka_type: str | None, batch: bytes) -> typing.Any:
    """A valid value for one field of a kio entity (recursing into nested entities)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) is tuple:
        (item, *_) = typing.get_args(hint)
        return (plain_value(item, kafka_type, batch),)
    if dataclasses.is_dataclass(hint):
        return plain_entity(hint, batch)
    if kafka_type == "records":
        return batch
    return _PLAIN.get(kafka_type or "", 0)


def plain_entity(cls: type, batch: bytes) -> typing.Any:
    """``cls`` with every field at a plain valid value."""
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: plain_value(hints[f.name], f.metadata.get("kafka_type"), batch)
                  for f in dataclasses.fields(cls)})


def encode(api_key: int, version: int, body: typing.Any) -> bytes:
    return raw.encode_request(api_key, version, 1, body, client_id="fuzz")


def advertised_versions(bootstrap: str) -> list[tuple[int, int]]:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        return [(k.api_key, v) for k in conn.api_versions().api_keys
                for v in range(k.min_version, k.max_version + 1)]


def templates(bootstrap: str) -> list[bytes]:
    """A valid request frame for every advertised (API key, version), and Produce requests
    to ``FUZZ_TOPIC`` with a batch of each codec."""
    batch = raw.make_batch(3)
    frames = []
    for api_key, version in advertised_versions(bootstrap):
        try:
            schema = load_request_schema(api_key, version)
        except UnknownEntity:
            continue  # kio has no schema for a few old versions (Produce v0-v2)
        frames.append(encode(api_key, version, plain_entity(schema, batch)))
    for codec in CODECS:
        frames.append(produce_frame(raw.make_batch(5, compression=codec)))
    return frames


def produce_frame(batch: bytes, version: int = 9) -> bytes:
    """A Produce request (acks=-1) of ``batch`` to partition 0 of ``FUZZ_TOPIC``."""
    schema = load_request_schema(raw.ApiKey.PRODUCE, version)
    body = raw.build(schema, transactional_id=None, acks=-1, timeout=5000, topic_data=[{
        "name": FUZZ_TOPIC, "partition_data": [{"index": 0, "records": batch}]}])
    return encode(raw.ApiKey.PRODUCE, version, body)


# --- mutations


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def m_random(rng: random.Random, _t: bytes) -> bytes:
    return framed(rng.randbytes(rng.randint(0, 512)))


def m_unframed(rng: random.Random, _t: bytes) -> bytes:
    return rng.randbytes(rng.randint(1, 512))


def m_truncated(rng: random.Random, t: bytes) -> bytes:
    return t[:rng.randrange(1, len(t))]


def m_bitflip(rng: random.Random, t: bytes) -> bytes:
    out = bytearray(t)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(4, len(out))
        out[at] ^= 1 << rng.randrange(8)
    return bytes(out)


def m_length(rng: random.Random, t: bytes) -> bytes:
    size = rng.choice([-1, -(2**31), 0, 1, 3, 2**31 - 1, 104857601, len(t) + rng.randint(1, 4096)])
    return struct.pack(">i", size) + t[4:]


def m_count(rng: random.Random, t: bytes) -> bytes:
    """A huge (or negative) int32 where an array length may be."""
    out = bytearray(t)
    at = rng.randrange(12, max(13, len(out) - 4))
    out[at:at + 4] = struct.pack(">I", rng.choice([0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0x40000000]))
    return framed(bytes(out[4:]))


def m_varint(rng: random.Random, t: bytes) -> bytes:
    """A run of continuation bytes (an unterminated or oversized varint) spliced in."""
    at = rng.randrange(12, len(t) + 1)
    return framed(t[4:at] + b"\xff" * rng.randint(5, 12) + t[at:])


def m_splice(rng: random.Random, t: bytes) -> bytes:
    at = rng.randrange(4, len(t))
    n = rng.randint(1, 64)
    return framed(t[4:at] + rng.randbytes(n) + t[at + n:])


def m_batch(rng: random.Random, _t: bytes) -> bytes:
    """A Produce of a compressed batch damaged inside its records; the CRC fixed half the time
    (then decompression and record parsing see the damage), else left wrong."""
    batch = bytearray(raw.make_batch(rng.randint(1, 20), compression=rng.choice(CODECS[1:])))
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(BATCH_HEADER, len(batch))
        batch[at] = rng.randrange(256)
    if rng.random() < 0.5:
        batch = bytearray(raw.patch_batch(bytes(batch), fix_crc=True))
    return produce_frame(bytes(batch), version=rng.choice([3, 7, 9]))


MUTATIONS = {fn.__name__[2:]: fn for fn in (m_random, m_unframed, m_truncated, m_bitflip, m_length,
                                            m_count, m_varint, m_splice, m_batch)}


# --- the run


class Budget:
    """Frames and seconds left, shared by the sender threads."""

    def __init__(self, frames: int | None, seconds: float) -> None:
        self._frames = frames
        self._deadline = time.monotonic() + seconds
        self._lock = threading.Lock()
        self.sent: Counter[str] = Counter()
        self.connections = self.unclosed = 0

    def left(self) -> bool:
        if time.monotonic() >= self._deadline:
            return False
        return self._frames is None or self.sent.total() < self._frames

    def record(self, kinds: list[str], closed: bool) -> None:
        with self._lock:
            self.sent.update(kinds)
            self.connections += 1
            self.unclosed += not closed


def send_connection(address: tuple[str, int], frames: list[tuple[str, bytes]]) -> tuple[list[str], bool] | None:
    """Send ``frames`` on one connection, half-close it and wait for the broker to close it.

    Returns the kinds of the frames sent whole and whether the broker closed in time; None
    when no connection could be made (the broker is down: the crash monitor restarts it).
    """
    try:
        sock = socket.create_connection(address, timeout=CLOSE_TIMEOUT)
    except OSError:
        return None
    sent: list[str] = []
    with sock:
        try:
            for kind, data in frames:
                sock.sendall(data)
                sent.append(kind)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
        except TimeoutError:
            return sent, False
        except OSError:
            pass  # reset, broken pipe, not connected: the broker closed it at a bad frame
    return sent, True


def sender(address: tuple[str, int], pool: list[bytes], budget: Budget, seed: int) -> None:
    rng = random.Random(seed)
    names = list(MUTATIONS)
    while budget.left():
        frames = [("valid", rng.choice(pool)) for _ in range(rng.randint(0, 3))]
        kind = rng.choice(names)
        frames.append((kind, MUTATIONS[kind](rng, rng.choice(pool))))
        outcome = send_connection(address, frames)
        if outcome is None:
            time.sleep(0.05)
        else:
            budget.record(*outcome)


class HealthyClient:
    """A confluent-kafka producer and consumer: produce one record, read it back, repeat."""

    def __init__(self, bootstrap: str) -> None:
        self.rounds = self.errors = 0
        self.max_latency = 0.0
        self.first_errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "message.timeout.ms": 10_000, **QUIET})
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "healthy",
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 100, **QUIET})
        self._consumer.assign([TopicPartition(HEALTHY_TOPIC, 0, 0)])
        self._thread = threading.Thread(target=self._run, name="healthy-client", daemon=True)
        self._thread.start()

    def _fail(self, what: str) -> None:
        self.errors += 1
        if len(self.first_errors) < 5:
            self.first_errors.append(what)

    def _round(self, number: int) -> None:
        began = time.monotonic()
        delivered: list = []
        self._producer.produce(HEALTHY_TOPIC, value=b"%d" % number, partition=0,
                               on_delivery=lambda err, _m: delivered.append(err))
        self._producer.flush(15)
        if delivered != [None]:
            return self._fail(f"round {number}: delivery {delivered!r}")
        deadline = began + 15
        while time.monotonic() < deadline:
            message = self._consumer.poll(0.5)
            if message is None or message.error():
                continue
            if message.value() != b"%d" % number:
                return self._fail(f"round {number}: read {message.value()!r}")
            self.max_latency = max(self.max_latency, time.monotonic() - began)
            self.rounds += 1
            return None
        return self._fail(f"round {number}: not read back within 15 s")

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            self._round(number)
            number += 1
            time.sleep(0.02)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


def watch(instance, threads: list[threading.Thread]) -> tuple[float, list[str]]:
    """Until the senders are done: sample the broker's RSS, and restart it whenever it exits
    (each exit is a crash; its log tail is kept). Returns the RSS peak and the crash logs."""
    peak, crash_logs = 0.0, []
    while any(thread.is_alive() for thread in threads):
        with RssSampler(instance.pid) as rss:
            while instance.running and any(thread.is_alive() for thread in threads):
                time.sleep(0.2)
        peak = max(peak, rss.peak_mb)
        if instance.running:
            peak = max(peak, memory_mb(instance.pid, "VmHWM"))
        else:
            crash_logs.append(f"exit status {instance.returncode}:\n{instance.stderr[-3000:]}")
            restart_same_port(instance)
    return peak, crash_logs


def run_fuzz(workdir: Path, frames: int | None = None, seconds: float = 180.0,
             seed: int = 12) -> FuzzReport:
    """Fuzz a broker until ``frames`` frames are sent or ``seconds`` pass, whichever first."""
    instance = broker(workdir / "fuzz")
    try:
        with raw.KafkaRaw.connect(instance.bootstrap_servers) as conn:
            conn.create_topic(FUZZ_TOPIC, partitions=2)
            conn.create_topic(HEALTHY_TOPIC)
        pool = templates(instance.bootstrap_servers)
        address = (instance.host, instance.port)
        rss_start = memory_mb(instance.pid)
        client = HealthyClient(instance.bootstrap_servers)
        budget = Budget(frames, seconds)
        began = time.monotonic()
        threads = [threading.Thread(target=sender, args=(address, pool, budget, seed + i), daemon=True)
                   for i in range(SENDERS)]
        for thread in threads:
            thread.start()
        peak, crash_logs = watch(instance, threads)
        elapsed = time.monotonic() - began
        client.close()
        return FuzzReport(
            frames=budget.sent.total(), malformed=budget.sent.total() - budget.sent["valid"],
            connections=budget.connections, seconds=round(elapsed, 1), crashes=len(crash_logs),
            unclosed=budget.unclosed, client_rounds=client.rounds, client_errors=client.errors,
            client_max_latency_ms=round(client.max_latency * 1000, 1),
            client_error_samples=client.first_errors, rss_start_mb=round(rss_start, 1),
            rss_peak_mb=round(peak, 1), by_mutation=dict(budget.sent), crash_logs=crash_logs,
        )
    finally:
        instance.close()
