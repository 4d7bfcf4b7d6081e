"""A tiny synchronous Kafka client over a plain socket, for byte-level integration tests.

Requests are encoded with kio exactly as a client would encode them: the request header
(v1: api_key int16, api_version int16, correlation_id int32, client_id nullable int16 string;
v2: the same plus an empty tagged-fields section; the request schema's ``__header_schema__``
says which) followed by the body from ``kio.serial.entity_writer``, in one frame (int32 size
+ payload). Responses are decoded with ``kio.serial.entity_reader`` after the response header
(v0 = correlation id; v1 adds a tagged-fields section for flexible versions; ApiVersions
responses always use v0).

``send_raw`` / ``recv_frame`` / ``wait_closed`` are there for malformed-input tests, and
``make_batch`` builds v2 record batches with aiokafka's ``DefaultRecordBatchBuilder``.
Every socket operation has a timeout, so no test using this client can hang.

This module deliberately imports nothing from the broker: it is a client.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import itertools
import select
import socket
import struct
import time
import types
import typing
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from crc32c import crc32c
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

__all__ = (
    "EARLIEST",
    "GZIP",
    "LATEST",
    "LZ4",
    "MAX_TIMESTAMP",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "ApiKey",
    "ConnectionClosed",
    "ErrorCode",
    "KafkaRaw",
    "Record",
    "broker_pid",
    "build",
    "decode_records",
    "decode_response",
    "encode_request",
    "legacy_message",
    "make_batch",
    "patch_batch",
    "start_broker",
    "wait_until",
)

DEFAULT_TIMEOUT = 10.0
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


class ApiKey:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    SASL_AUTHENTICATE = 36


class ConnectionClosed(ConnectionError):
    """The broker closed the connection (EOF or reset) while we were reading."""


# --- entity building


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


@functools.cache
def _fields(cls: type) -> dict[str, tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return {f.name: (f, _strip_optional(hints[f.name])) for f in dataclasses.fields(cls)}


def build(cls: type, /, **values: Any) -> Any:
    """``cls(**values)`` for a kio entity, version-agnostic.

    Keys ``cls`` does not have are dropped (so one description serves every version);
    dicts (and lists of dicts) become nested entities; ints become timedeltas (ms) and
    ErrorCodes where the schema wants them. Missing fields fall back to the schema default.
    """
    kwargs: dict[str, Any] = {}
    for name, (f, hint) in _fields(cls).items():
        if name not in values:
            continue
        value = values[name]
        kafka_type = f.metadata.get("kafka_type", "")
        if value is not None:
            if typing.get_origin(hint) is tuple:
                (arg, *_) = typing.get_args(hint)
                if dataclasses.is_dataclass(arg):
                    value = tuple(build(arg, **v) if isinstance(v, dict) else v for v in value)
                else:
                    value = tuple(value)
            elif isinstance(value, dict) and dataclasses.is_dataclass(hint):
                value = build(hint, **value)
            elif kafka_type.startswith("timedelta") and isinstance(value, int):
                value = datetime.timedelta(milliseconds=value)
            elif kafka_type == "error_code" and not isinstance(value, ErrorCode):
                value = ErrorCode(value)
        kwargs[name] = value
    return cls(**kwargs)


def encode_request(
    api_key: int, version: int, correlation_id: int, body: Any, client_id: str | None = "rawkafka"
) -> bytes:
    """One complete request frame (size prefix included)."""
    schema = load_request_schema(api_key, version)
    header_version = schema.__header_schema__.__version__
    head = bytearray(struct.pack(">hhi", api_key, version, correlation_id))
    if client_id is None:
        head += _I16.pack(-1)
    else:
        raw = client_id.encode()
        head += _I16.pack(len(raw)) + raw
    if header_version >= 2:
        head += b"\x00"  # no tagged fields
    buffer = io.BytesIO()
    entity_writer(schema)(buffer, body)
    payload = bytes(head) + buffer.getvalue()
    return _I32.pack(len(payload)) + payload


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation id, kio response) from a response frame payload (size prefix removed)."""
    schema = load_response_schema(api_key, version)
    (correlation_id,) = _I32.unpack_from(payload, 0)
    offset = 4
    if schema.__flexible__ and api_key != ApiKey.API_VERSIONS:
        # Response header v1: tagged fields; we expect none (a single 0 byte).
        if payload[offset] != 0:
            raise AssertionError(f"unexpected tagged fields in response header: {payload[offset]}")
        offset += 1
    body, size = entity_reader(schema)(payload, offset)
    if offset + size != len(payload):
        raise AssertionError(
            f"{len(payload) - offset - size} trailing bytes after {schema.__name__}"
        )
    return correlation_id, body


# --- the client


class KafkaRaw:
    """One blocking connection to a broker."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        client_id: str | None = "rawkafka",
    ) -> None:
        self.host, self.port = host, port
        self.timeout = timeout
        self.client_id = client_id
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = itertools.count(1)
        self._buffer = bytearray()

    @classmethod
    def connect(cls, bootstrap: str, **kw: Any) -> KafkaRaw:
        host, _, port = bootstrap.rpartition(":")
        return cls(host.strip("[]"), int(port), **kw)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> KafkaRaw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw bytes ------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, need: int, deadline: float) -> None:
        while len(self._buffer) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out waiting for {need - len(self._buffer)} more bytes")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(max(65536, need - len(self._buffer)))
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed(str(exc)) from exc
            except socket.timeout as exc:
                raise TimeoutError("timed out reading from the broker") from exc
            if not chunk:
                raise ConnectionClosed("EOF")
            self._buffer += chunk

    def recv_frame(self, timeout: float | None = None) -> bytes:
        """The next response frame's payload (size prefix removed)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        self._fill(4, deadline)
        (size,) = _I32.unpack_from(self._buffer, 0)
        if size < 4:
            raise AssertionError(f"broker sent a frame of size {size}")
        self._fill(4 + size, deadline)
        payload = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return payload

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within ``timeout``.

        Any bytes the broker sends before closing are discarded (and kept in ``discarded``).
        """
        deadline = time.monotonic() + timeout
        self.discarded = bytes(self._buffer)
        self._buffer.clear()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except socket.timeout:
                return False
            if not chunk:
                return True
            self.discarded += chunk

    def is_open(self) -> bool:
        """Whether the socket is still open from the broker's side (no EOF pending)."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return True
        try:
            data = self.sock.recv(65536, socket.MSG_PEEK)
        except OSError:
            return False
        return bool(data)

    # -- requests -------------------------------------------------------------------------
    def send(self, api_key: int, version: int, body: Any | None = None, /, **fields: Any) -> int:
        """Send one request without waiting; returns its correlation id."""
        if body is None:
            body = build(load_request_schema(api_key, version), **fields)
        correlation_id = next(self._correlation)
        self.sock.sendall(encode_request(api_key, version, correlation_id, body, self.client_id))
        return correlation_id

    def receive(
        self, api_key: int, version: int, correlation_id: int, timeout: float | None = None
    ) -> Any:
        got, response = decode_response(api_key, version, self.recv_frame(timeout))
        if got != correlation_id:
            raise AssertionError(f"correlation id {got}, expected {correlation_id}")
        return response

    def request(
        self,
        api_key: int,
        version: int,
        body: Any | None = None,
        /,
        *,
        recv_timeout: float | None = None,
        **fields: Any,
    ) -> Any:
        """Send one request and read its response (``fields`` are the body's fields)."""
        correlation_id = self.send(api_key, version, body, **fields)
        return self.receive(api_key, version, correlation_id, recv_timeout)

    # -- convenience wrappers (field names valid for every version; extras are dropped) ----
    def api_versions(self, version: int = 3) -> Any:
        return self.request(
            ApiKey.API_VERSIONS,
            version,
            client_software_name="rawkafka",
            client_software_version="1.0",
        )

    def sasl_plain(self, user: str, password: str) -> None:
        """Log in with SASL PLAIN (SaslHandshake v1, SaslAuthenticate v2); raises on refusal."""
        handshake = self.request(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert handshake.error_code == ErrorCode.none, handshake
        answer = self.request(ApiKey.SASL_AUTHENTICATE, 2,
                              auth_bytes=b"\0" + user.encode() + b"\0" + password.encode())
        assert answer.error_code == ErrorCode.none, answer

    def metadata(
        self,
        topics: Sequence[str] | None,
        version: int = 12,
        allow_auto_topic_creation: bool = True,
    ) -> Any:
        return self.request(
            ApiKey.METADATA,
            version,
            topics=None if topics is None else [dict(name=t, topic_id=None) for t in topics],
            allow_auto_topic_creation=allow_auto_topic_creation,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

    def create_topics(
        self,
        topics: dict[str, int] | Sequence[str],
        version: int = 7,
        configs: dict[str, str] | None = None,
        validate_only: bool = False,
    ) -> Any:
        if not isinstance(topics, dict):
            topics = {t: 1 for t in topics}
        return self.request(
            ApiKey.CREATE_TOPICS,
            version,
            topics=[
                dict(
                    name=name,
                    num_partitions=n,
                    replication_factor=1,
                    assignments=(),
                    configs=[dict(name=k, value=v) for k, v in (configs or {}).items()],
                )
                for name, n in topics.items()
            ],
            timeout=10_000,
            validate_only=validate_only,
        )

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> None:
        response = self.create_topics({name: partitions}, configs=configs)
        code = response.topics[0].error_code
        if code != ErrorCode.none:
            raise AssertionError(
                f"CreateTopics {name}: {code!r} {response.topics[0].error_message}"
            )

    def produce_request(
        self,
        partitions: dict[tuple[str, int], bytes | None],
        version: int = 9,
        acks: int = -1,
        transactional_id: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        by_topic: dict[str, list[dict]] = {}
        for (topic, p), records in partitions.items():
            by_topic.setdefault(topic, []).append(dict(index=p, records=records))
        fields = dict(
            transactional_id=transactional_id,
            acks=acks,
            timeout=10_000,
            topic_data=[dict(name=t, partition_data=parts) for t, parts in by_topic.items()],
        )
        if acks == 0:
            self.send(ApiKey.PRODUCE, version, **fields)
            return None
        return self.request(ApiKey.PRODUCE, version, recv_timeout=timeout, **fields)

    def produce(
        self, topic: str, partition: int, records: bytes | None, version: int = 9, acks: int = -1,
        transactional_id: str | None = None,
    ) -> Any:
        """Produce to one partition; returns that partition's response entry."""
        response = self.produce_request({(topic, partition): records}, version=version, acks=acks,
                                        transactional_id=transactional_id)
        return response.responses[0].partition_responses[0]

    def produce_ok(self, topic: str, partition: int, records: bytes, **kw: Any) -> int:
        """Produce and insist on success; returns the base offset."""
        entry = self.produce(topic, partition, records, **kw)
        if entry.error_code != ErrorCode.none:
            raise AssertionError(
                f"produce to {topic}-{partition}: {entry.error_code!r} {entry.error_message}"
            )
        return entry.base_offset

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        version: int = 12,
        max_wait_ms: int = 0,
        min_bytes: int = 0,
        max_bytes: int = 64 << 20,
        partition_max_bytes: int = 64 << 20,
        isolation_level: int = 0,
        topic_id: uuid.UUID | None = None,
    ) -> Any:
        """Fetch one partition; returns that partition's response entry."""
        response = self.request(
            ApiKey.FETCH,
            version,
            replica_id=-1,
            max_wait=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[
                dict(
                    topic=topic,
                    topic_id=topic_id,
                    partitions=[
                        dict(
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=partition_max_bytes,
                        )
                    ],
                )
            ],
            forgotten_topics_data=(),
            rack_id="",
            recv_timeout=max_wait_ms / 1000 + self.timeout,
        )
        return response.responses[0].partitions[0]

    def fetch_all(self, topic: str, partition: int, start: int = 0, **kw: Any) -> list[Record]:
        """Every record from ``start`` to the high watermark, in offset order."""
        records: list[Record] = []
        offset = start
        while True:
            entry = self.fetch(topic, partition, offset, **kw)
            if entry.error_code != ErrorCode.none:
                raise AssertionError(f"fetch {topic}-{partition}@{offset}: {entry.error_code!r}")
            got = [r for r in decode_records(entry.records or b"") if r.offset >= offset]
            records.extend(got)
            if got:
                offset = got[-1].offset + 1
            if offset >= entry.high_watermark or not got:
                if offset < entry.high_watermark:
                    raise AssertionError(
                        f"fetch {topic}-{partition}@{offset} returned nothing below "
                        f"the high watermark {entry.high_watermark}"
                    )
                return records

    def list_offsets(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        version: int = 10,
        isolation_level: int = 0,
    ) -> Any:
        """ListOffsets for one partition; returns that partition's response entry."""
        response = self.request(
            ApiKey.LIST_OFFSETS,
            version,
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                dict(
                    name=topic,
                    partitions=[
                        dict(
                            partition_index=partition,
                            current_leader_epoch=-1,
                            timestamp=timestamp,
                            max_num_offsets=1,
                        )
                    ],
                )
            ],
            timeout=10_000,
        )
        return response.topics[0].partitions[0]

    def high_watermark(self, topic: str, partition: int = 0) -> int:
        entry = self.list_offsets(topic, partition, LATEST)
        if entry.error_code != ErrorCode.none:
            raise AssertionError(f"ListOffsets {topic}-{partition}: {entry.error_code!r}")
        return entry.offset

    def init_producer_id(
        self,
        transactional_id: str | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        version: int = 4,
        transaction_timeout_ms: int = 60_000,
    ) -> Any:
        return self.request(
            ApiKey.INIT_PRODUCER_ID,
            version,
            transactional_id=transactional_id,
            transaction_timeout=transaction_timeout_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )


# --- record batches


@dataclasses.dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def decode_records(data: bytes) -> list[Record]:
    """Every record of every whole batch in ``data`` (a Fetch response's records field)."""
    out: list[Record] = []
    if not data:
        return out
    records = MemoryRecords(bytes(data))
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        if getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            out.append(Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)))


def make_batch(
    values: Sequence[bytes | None] | int = 1,
    *,
    compression: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamps: Sequence[int] | None = None,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
) -> bytes:
    """One v2 record batch as a producer sends it (base offset 0).

    ``values`` is a list of values or a record count (values ``b"value-<i>"``);
    ``timestamps`` defaults to now (ms) for every record; ``headers`` is one list per record.
    """
    if isinstance(values, int):
        values = [b"value-%d" % i for i in range(values)]
    now = int(time.time() * 1000)
    if timestamps is None:
        timestamps = [now] * len(values)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=int(transactional),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        hdrs = list(headers[i]) if headers is not None else []
        if builder.append(i, timestamp=timestamps[i], key=key, value=value, headers=hdrs) is None:
            raise AssertionError("record did not fit in the batch")
    return bytes(builder.build())


def patch_batch(batch: bytes, *, fix_crc: bool, **fields: int) -> bytes:
    """Overwrite header fields of a v2 batch (offset/length/epoch/magic/attributes/...).

    Field names: base_offset, length, leader_epoch, magic, crc, attributes, last_offset_delta,
    base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count.
    With ``fix_crc`` the CRC32C is recomputed afterwards.
    """
    layout = {
        "base_offset": (0, ">q"),
        "length": (8, ">i"),
        "leader_epoch": (12, ">i"),
        "magic": (16, ">b"),
        "crc": (17, ">I"),
        "attributes": (21, ">h"),
        "last_offset_delta": (23, ">i"),
        "base_timestamp": (27, ">q"),
        "max_timestamp": (35, ">q"),
        "producer_id": (43, ">q"),
        "producer_epoch": (51, ">h"),
        "base_sequence": (53, ">i"),
        "records_count": (57, ">i"),
    }
    out = bytearray(batch)
    for name, value in fields.items():
        at, fmt = layout[name]
        struct.pack_into(fmt, out, at, value)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def legacy_message(magic: int = 1, values: Iterable[bytes] = (b"old",)) -> bytes:
    """A magic 0/1 message set, as a pre-0.11 producer sends it."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(
            i, timestamp=int(time.time() * 1000) if magic else None, key=None, value=value
        )
    return bytes(builder.build())


# --- broker helpers


def start_broker(data_dir=None, flush: str | None = None):
    """An ``rmqkafka.adapter.embedded.EmbeddedBroker`` (use it as a context manager) on ``data_dir``,
    for module-scoped brokers (tests/conftest.py's ``broker`` is per test)."""
    from rmqkafka.adapter.embedded import EmbeddedBroker

    return EmbeddedBroker(data_dir=data_dir, flush=flush)


def broker_pid(broker) -> int:
    """The broker process id: from the EmbeddedBroker if it says, else the listener's owner."""
    if isinstance(getattr(broker, "pid", None), int):
        return broker.pid
    import psutil

    for conn in psutil.net_connections(kind="tcp"):
        if (
            conn.status == psutil.CONN_LISTEN
            and conn.laddr
            and conn.laddr.port == broker.port
            and conn.pid
        ):
            return conn.pid
    raise LookupError(f"no process listens on port {broker.port}")


def wait_until(
    predicate, timeout: float = 10.0, interval: float = 0.05, message: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {message}")
        time.sleep(interval)
