"""``rmqk transactions list|describe``: transaction coordinators' state, like
``kafka-transactions.sh list|describe``.

confluent-kafka's AdminClient has no ListTransactions / DescribeTransactions, so these
requests are sent over a plain socket, encoded and decoded with kio (the protocol schemas the
broker itself uses): ListTransactions (66) v0 to every broker of the cluster metadata,
FindCoordinator (10) v3 with key type 1 (transaction) for each transactional id, then
DescribeTransactions (65) v0 to that coordinator. The AdminClient is still used first to get
the metadata, so an unreachable broker fails fast as in the other commands. Being plain TCP,
these requests cannot use TLS or SASL: ``-X security.protocol``, ``ssl.*`` and ``sasl.*`` are
refused (exit status 2); other ``-X`` properties only affect that metadata request.

``list --hanging`` shows transactions in state Ongoing that have been open longer than their
transaction timeout, by the coordinator's own view (DescribeTransactions' start time and
timeout); a healthy coordinator aborts timed-out transactions by itself, so anything listed
there is a coordinator that fell behind.

``describe-producers`` and ``find-hanging`` look from the partitions' side, as
``kafka-transactions.sh`` does: DescribeProducers (61) at each partition's leader lists the
producers with an open transaction there; ``find-hanging`` keeps those whose last write is
older than ``--max-transaction-timeout`` minutes and asks their coordinators
(ListTransactions by producer id, then DescribeTransactions): an open transaction is
hanging when no coordinator knows its producer, the coordinator's epoch for it is newer, or
the coordinator's transaction does not include the partition. Such a transaction holds the
partition's last stable offset back until something writes its marker.
"""

from __future__ import annotations

import io
import itertools
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any, Self

import click

from rmqkafka.cli.common import (
    ClientOptions,
    CliError,
    CliUsageError,
    Group,
    admin_client,
    client_options,
    echo_json,
    echo_table,
    handle_errors,
    json_option,
    one_line,
    read_status_config,
    topic_error,
    warn,
)

LIST_TRANSACTIONS, DESCRIBE_TRANSACTIONS, DESCRIBE_PRODUCERS, FIND_COORDINATOR = 66, 65, 61, 10
_KEY_TYPE_TRANSACTION = 1
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "Dead", "PrepareEpochFence")
_I32 = struct.Struct(">i")

LIST_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADERS = ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions"]
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]
FIND_HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]
HANGING_HEADERS = ["TransactionalId", "Coordinator", "ProducerId", "ProducerEpoch", "TransactionState",
                   "CurrentTransactionDurationMs", "TransactionTimeoutMs", "TopicPartitions"]


# ---------------------------------------------------------------------------------------------
# A minimal blocking Kafka connection (kio encodes and decodes)


def _kio() -> Any:
    # Not hidden from hypothesis as ``serve`` does: in a process that also runs hypothesis
    # (the test suite calls the CLI in-process) kio must register its strategies.
    import kio.index
    import kio.serial

    return kio


class _Connection:
    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.address = f"{host}:{port}"
        self.deadline = time.monotonic() + timeout
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise CliError(f"cannot connect to {self.address}: {one_line(exc.strerror or exc)}") from None
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, api_key: int, version: int, decode: Any = None, **fields: Any) -> Any:
        """Send one request, return its decoded response (by ``decode(frame, offset)`` if given)."""
        kio = _kio()
        schema = kio.index.load_request_schema(api_key, version)
        correlation_id = next(self._ids)
        head = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"rmqk"
        if schema.__header_schema__.__version__ >= 2:
            head += b"\x00"  # no tagged fields
        buffer = io.BytesIO()
        kio.serial.entity_writer(schema)(buffer, schema(**fields))
        payload = head + buffer.getvalue()
        try:
            self.sock.settimeout(max(0.01, self.deadline - time.monotonic()))
            self.sock.sendall(_I32.pack(len(payload)) + payload)
            (size,) = _I32.unpack(self._read(4))
            frame = self._read(size)
        except TimeoutError:
            raise CliError(f"broker at {self.address} did not answer in time") from None
        except OSError as exc:
            raise CliError(f"connection to {self.address} failed: {one_line(exc.strerror or exc)}") from None
        response = kio.index.load_response_schema(api_key, version)
        (got,) = _I32.unpack_from(frame, 0)
        if got != correlation_id:
            raise CliError(f"broker at {self.address} answered out of order")
        offset = 5 if response.__flexible__ else 4  # response header v1: an empty tagged-field section
        if decode is not None:
            return decode(frame, offset)
        body, _ = kio.serial.entity_reader(response)(frame, offset)
        return body

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            self.sock.settimeout(max(0.01, self.deadline - time.monotonic()))
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise CliError(f"broker at {self.address} closed the connection (does it support the transaction APIs?)")
            data += chunk
        return bytes(data)


def check_plain_tcp(client: ClientOptions) -> None:
    """These requests go over plain TCP: refuse -X properties asking for TLS or SASL."""
    props = dict(client.properties)
    protocol = props.get("security.protocol", "plaintext").lower()
    if protocol != "plaintext" or any(key.startswith(("sasl.", "ssl.")) for key in props):
        raise CliUsageError("rmqk transactions speaks plain TCP only; -X security.protocol, ssl.* and sasl.* are not supported")


class _Reader:
    """Reads the primitives of a flexible (compact) Kafka response body."""

    def __init__(self, data: bytes, offset: int) -> None:
        self.data, self.pos = data, offset

    def _unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def i16(self) -> int:
        return self._unpack(">h")

    def i32(self) -> int:
        return self._unpack(">i")

    def i64(self) -> int:
        return self._unpack(">q")

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            return ""
        value = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return value

    def array(self, item: Any) -> list[Any]:
        n = self.uvarint() - 1
        return [item() for _ in range(max(n, 0))]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


@dataclass(slots=True)
class TxnState:
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: list[tuple[str, list[int]]]


def decode_describe_v0(frame: bytes, offset: int) -> list[TxnState]:
    """DescribeTransactions v0's transaction states, decoded by hand: kio reads the start time
    as a datetime and refuses -1, which Kafka (and this broker) answer for a transactional id
    with no transaction started."""
    r = _Reader(frame, offset)
    r.i32()  # throttle time

    def topic() -> tuple[str, list[int]]:
        name = r.string()
        partitions = r.array(r.i32)
        r.skip_tags()
        return name, partitions

    def state() -> TxnState:
        out = TxnState(r.i16(), r.string(), r.string(), r.i32(), r.i64(), r.i64(), r.i16(), r.array(topic))
        r.skip_tags()
        return out

    states = r.array(state)
    r.skip_tags()
    return states


def _code_name(code: Any) -> str:
    """``TRANSACTIONAL_ID_NOT_FOUND`` for an ErrorCode or its number."""
    if isinstance(code, int) and not hasattr(code, "name"):
        from kio.schema.errors import ErrorCode

        try:
            code = ErrorCode(code)
        except ValueError:
            return f"error code {code}"
    return str(getattr(code, "name", code)).upper()


def _ok(code: Any) -> bool:
    return int(getattr(code, "value", code)) == 0


def _brokers(metadata: Any) -> list[tuple[int, str, int]]:
    return sorted((b.id, b.host, b.port) for b in metadata.brokers.values())


# ---------------------------------------------------------------------------------------------
# Requests


def list_transactions(client: ClientOptions, metadata: Any, states: tuple[str, ...], producer_ids: tuple[int, ...]) -> list[dict[str, Any]]:
    """Every broker's ListTransactions answer, as dicts with the coordinator's id."""
    out: list[dict[str, Any]] = []
    for node_id, host, port in _brokers(metadata):
        with _Connection(host, port, client.timeout) as conn:
            response = conn.request(LIST_TRANSACTIONS, 0, state_filters=tuple(states), producer_id_filters=tuple(producer_ids))
        if not _ok(response.error_code):
            raise CliError(f"broker {node_id} ({host}:{port}) refused ListTransactions: {_code_name(response.error_code)}")
        for state in response.unknown_state_filters:
            warn(f"broker {node_id} does not know the state {state!r} (known: {', '.join(STATES)})")
        for t in response.transaction_states:
            out.append({"transactional_id": t.transactional_id, "coordinator": node_id,
                        "producer_id": int(t.producer_id), "transaction_state": t.transaction_state})
    out.sort(key=lambda t: t["transactional_id"])
    return out


def describe_transactions(client: ClientOptions, metadata: Any, transactional_ids: list[str], missing_ok: bool = False) -> list[dict[str, Any]]:
    """DescribeTransactions of each id at its coordinator; CliError for an unknown id (left out
    with ``missing_ok``: one listed a moment ago may have expired since)."""
    transactional_ids = list(dict.fromkeys(transactional_ids))
    brokers = _brokers(metadata)
    if not brokers:
        raise CliError(f"the cluster at {client.bootstrap} lists no brokers")
    _, host, port = brokers[0]
    coordinators: dict[tuple[int, str, int], list[str]] = {}
    with _Connection(host, port, client.timeout) as conn:
        for txn_id in transactional_ids:
            found = conn.request(FIND_COORDINATOR, 3, key=txn_id, key_type=_KEY_TYPE_TRANSACTION)
            if not _ok(found.error_code):
                raise CliError(f"cannot find the coordinator of transactional id {txn_id!r}: {_code_name(found.error_code)}")
            coordinators.setdefault((int(found.node_id), found.host, int(found.port)), []).append(txn_id)
    results: dict[str, dict[str, Any]] = {}
    for (node_id, c_host, c_port), ids in coordinators.items():
        with _Connection(c_host, c_port, client.timeout) as conn:
            states = conn.request(DESCRIBE_TRANSACTIONS, 0, decode_describe_v0, transactional_ids=tuple(ids))
        for s in states:
            if not _ok(s.error_code):
                name = _code_name(s.error_code)
                if name == "TRANSACTIONAL_ID_NOT_FOUND":
                    if missing_ok:
                        continue
                    raise CliError(f"transactional id {s.transactional_id!r} not found")
                raise CliError(f"cannot describe transactional id {s.transactional_id!r}: {name}")
            results[s.transactional_id] = {
                "transactional_id": s.transactional_id,
                "coordinator": node_id,
                "producer_id": s.producer_id,
                "producer_epoch": s.producer_epoch,
                "transaction_state": s.transaction_state,
                "transaction_timeout_ms": s.transaction_timeout_ms,
                "transaction_start_time_ms": s.transaction_start_time_ms if s.transaction_start_time_ms > 0 else -1,
                "topic_partitions": [f"{topic}-{p}" for topic, parts in s.topics for p in sorted(parts)],
            }
    return [results[txn_id] for txn_id in transactional_ids if txn_id in results]


def transaction_duration_ms(start_time_ms: int, now_ms: int) -> int | None:
    """How long the current transaction has been open; None when none has started."""
    if start_time_ms is None or start_time_ms < 0:
        return None
    return max(0, now_ms - start_time_ms)


def is_hanging(description: dict[str, Any], now_ms: int) -> bool:
    """An Ongoing transaction open for longer than its transaction timeout."""
    if description.get("transaction_state") != "Ongoing":
        return False
    age = transaction_duration_ms(description.get("transaction_start_time_ms", -1), now_ms)
    return age is not None and age > description.get("transaction_timeout_ms", 0)


def _partitions_text(parts: list[str]) -> str:
    return ",".join(parts) if parts else "-"


def topic_partitions(metadata: Any, topic: str | None, partition: int | None) -> list[tuple[str, int]]:
    """The (topic, partition)s named (all of ``topic``, or every partition of every topic)."""
    if topic is None:
        return sorted((name, p) for name, meta in metadata.topics.items() for p in meta.partitions)
    error = topic_error(metadata, topic)
    if error is not None:
        raise CliError(error)
    partitions = sorted(metadata.topics[topic].partitions)
    if partition is None:
        return [(topic, p) for p in partitions]
    if partition not in partitions:
        raise CliError(f"topic {topic!r} has no partition {partition} (it has {len(partitions)})")
    return [(topic, partition)]


def describe_producers(client: ClientOptions, metadata: Any, partitions: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """DescribeProducers of each partition at its leader: one dict per producer, with its
    topic and partition."""
    brokers = {node_id: (host, port) for node_id, host, port in _brokers(metadata)}
    by_leader: dict[int, dict[str, list[int]]] = {}
    for topic, partition in partitions:
        leader = metadata.topics[topic].partitions[partition].leader
        if leader not in brokers:
            raise CliError(f"partition {topic}-{partition} has no leader")
        by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
    from kio.schema.describe_producers.v0.request import TopicRequest

    out: list[dict[str, Any]] = []
    for leader, topics in sorted(by_leader.items()):
        host, port = brokers[leader]
        with _Connection(host, port, client.timeout) as conn:
            response = conn.request(DESCRIBE_PRODUCERS, 0, topics=tuple(
                TopicRequest(name=topic, partition_indexes=tuple(ps)) for topic, ps in topics.items()))
        for topic in response.topics:
            for p in topic.partitions:
                if not _ok(p.error_code):
                    raise CliError(f"cannot describe the producers of {topic.name}-{p.partition_index}: "
                                   f"{_code_name(p.error_code)}{f' ({p.error_message})' if p.error_message else ''}")
                out.extend({"topic": topic.name, "partition": int(p.partition_index),
                            "producer_id": int(s.producer_id), "producer_epoch": int(s.producer_epoch),
                            "coordinator_epoch": int(s.coordinator_epoch), "last_sequence": int(s.last_sequence),
                            "last_timestamp": int(s.last_timestamp),
                            "current_transaction_start_offset": int(s.current_txn_start_offset)}
                           for s in p.active_producers)
    out.sort(key=lambda s: (s["topic"], s["partition"], s["producer_id"]))
    return out


def open_candidates(producers: list[dict[str, Any]], now_ms: int, max_timeout_ms: int) -> list[dict[str, Any]]:
    """Producers with a transaction open in their partition whose last write is older than
    ``max_timeout_ms`` (no coordinator keeps a transaction open that long)."""
    return [s for s in producers
            if s["current_transaction_start_offset"] >= 0 and now_ms - s["last_timestamp"] > max_timeout_ms]


def hanging_among(candidates: list[dict[str, Any]], transactional_ids: dict[int, str],
                  descriptions: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates no coordinator accounts for: an unknown producer id, a newer epoch at
    the coordinator, or a coordinator transaction without the partition."""
    hanging = []
    for s in candidates:
        txn_id = transactional_ids.get(s["producer_id"])
        description = descriptions.get(txn_id) if txn_id is not None else None
        if (description is None or description["producer_id"] != s["producer_id"]
                or description["producer_epoch"] > s["producer_epoch"]
                or f"{s['topic']}-{s['partition']}" not in description["topic_partitions"]):
            hanging.append(s)
    return hanging


# ---------------------------------------------------------------------------------------------
# Commands


@click.group("transactions", cls=Group, no_args_is_help=True)
def transactions() -> None:
    """Kafka transactions (like kafka-transactions.sh) and RocketMQ half messages (half)."""


@transactions.command("list")
@click.option("--state", "states", multiple=True, metavar="STATE",
              help=f"Only transactions in this state (repeatable): {', '.join(STATES)}.")
@click.option("--producer-id", "producer_ids", multiple=True, type=click.IntRange(min=0), metavar="N",
              help="Only transactions of this producer id (repeatable).")
@click.option("--hanging", is_flag=True,
              help="Only Ongoing transactions open longer than their timeout, as the coordinator "
                   "sees them (find-hanging looks from the partitions' side).")
@json_option
@client_options
@handle_errors
def list_cmd(states: tuple[str, ...], producer_ids: tuple[int, ...], hanging: bool, as_json: bool, client: ClientOptions) -> None:
    """Transactional ids known to the coordinators, with producer id and state."""
    check_plain_tcp(client)
    _, metadata = admin_client(client)
    if hanging:
        listed = list_transactions(client, metadata, ("Ongoing",), producer_ids)
        if states and "Ongoing" not in states:
            listed = []
        now_ms = int(time.time() * 1000)
        found = describe_transactions(client, metadata, [t["transactional_id"] for t in listed], missing_ok=True) if listed else []
        rows = [dict(d, current_transaction_duration_ms=transaction_duration_ms(d["transaction_start_time_ms"], now_ms))
                for d in found if is_hanging(d, now_ms)]
        if as_json:
            echo_json(rows)
            return
        echo_table(HANGING_HEADERS, [
            (d["transactional_id"], d["coordinator"], d["producer_id"], d["producer_epoch"], d["transaction_state"],
             d["current_transaction_duration_ms"], d["transaction_timeout_ms"], _partitions_text(d["topic_partitions"]))
            for d in rows
        ])
        return
    listed = list_transactions(client, metadata, states, producer_ids)
    if as_json:
        echo_json(listed)
        return
    echo_table(LIST_HEADERS, [(t["transactional_id"], t["coordinator"], t["producer_id"], t["transaction_state"]) for t in listed])


@transactions.command("describe")
@click.argument("transactional_ids", nargs=-1, required=True, metavar="TXN_ID...")
@json_option
@client_options
@handle_errors
def describe_cmd(transactional_ids: tuple[str, ...], as_json: bool, client: ClientOptions) -> None:
    """State, producer, timeout, start time and partitions of transactional ids."""
    check_plain_tcp(client)
    _, metadata = admin_client(client)
    found = describe_transactions(client, metadata, list(transactional_ids))
    now_ms = int(time.time() * 1000)
    for d in found:
        d["current_transaction_duration_ms"] = transaction_duration_ms(d["transaction_start_time_ms"], now_ms)
    if as_json:
        echo_json(found)
        return
    echo_table(DESCRIBE_HEADERS, [
        (d["coordinator"], d["transactional_id"], d["producer_id"], d["producer_epoch"], d["transaction_state"],
         d["transaction_timeout_ms"], d["transaction_start_time_ms"], d["current_transaction_duration_ms"],
         _partitions_text(d["topic_partitions"]))
        for d in found
    ])


@transactions.command("describe-producers")
@click.option("--topic", required=True, help="The topic.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="The partition.")
@json_option
@client_options
@handle_errors
def describe_producers_cmd(topic: str, partition: int, as_json: bool, client: ClientOptions) -> None:
    """The producers of a partition, with the first offset of their open transaction."""
    check_plain_tcp(client)
    _, metadata = admin_client(client)
    found = describe_producers(client, metadata, topic_partitions(metadata, topic, partition))
    if as_json:
        echo_json([{k: v for k, v in s.items() if k not in ("topic", "partition")} for s in found])
        return
    echo_table(PRODUCERS_HEADERS, [
        (s["producer_id"], s["producer_epoch"], s["coordinator_epoch"], s["last_sequence"], s["last_timestamp"],
         s["current_transaction_start_offset"] if s["current_transaction_start_offset"] >= 0 else "None")
        for s in found
    ])


@transactions.command("find-hanging")
@click.option("--topic", help="Only this topic's partitions (default: every topic).")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition of --topic.")
@click.option("--max-transaction-timeout", "max_minutes", type=click.IntRange(min=0), default=15, show_default=True,
              metavar="MINUTES", help="Transactions open longer than this (the brokers' transaction.max.timeout.ms) are candidates.")
@json_option
@client_options
@handle_errors
def find_hanging_cmd(topic: str | None, partition: int | None, max_minutes: int, as_json: bool,
                     client: ClientOptions) -> None:
    """Open transactions in partitions that no coordinator will ever finish."""
    if partition is not None and topic is None:
        raise CliUsageError("--partition needs --topic")
    check_plain_tcp(client)
    _, metadata = admin_client(client)
    now_ms = int(time.time() * 1000)
    candidates = open_candidates(describe_producers(client, metadata, topic_partitions(metadata, topic, partition)),
                                 now_ms, max_minutes * 60_000)
    hanging: list[dict[str, Any]] = []
    if candidates:
        producer_ids = tuple(sorted({s["producer_id"] for s in candidates}))
        listed = list_transactions(client, metadata, (), producer_ids)
        transactional_ids = {t["producer_id"]: t["transactional_id"] for t in listed}
        descriptions = {d["transactional_id"]: d for d in
                        describe_transactions(client, metadata, list(transactional_ids.values()), missing_ok=True)}
        hanging = hanging_among(candidates, transactional_ids, descriptions)
    rows = [dict(s, duration_minutes=(now_ms - s["last_timestamp"]) // 60_000) for s in hanging]
    if as_json:
        echo_json(rows)
        return
    echo_table(FIND_HANGING_HEADERS, [
        (s["topic"], s["partition"], s["producer_id"], s["producer_epoch"], s["coordinator_epoch"],
         s["current_transaction_start_offset"], s["last_timestamp"], s["duration_minutes"])
        for s in rows
    ])


# ---------------------------------------------------------------------------------------------
# RocketMQ transaction messages: ``rmqk transactions half list|describe``
#
# Half messages (records produced with TRAN_MSG=true, PGROUP and UNIQ_KEY; see
# rmqsemantics/half_records.py on the broker) wait invisibly in RMQ_SYS_TRANS_HALF_TOPIC until
# their producer (or a back-check) commits or rolls them back. There is no Kafka API for them,
# so the broker answers as read-only configs of that topic: ``rmq.transaction.half.status``
# (counters, pending count, the oldest pending half messages up to the broker's limit, the
# transaction* settings)
# and, asked by name only, ``rmq.transaction.half.<group>/<UNIQ_KEY>`` (one pending half
# message as JSON, or null). ``list`` reads the status through the AdminClient, as ``rmqk
# delays`` does. ``describe`` must name its keys, which confluent-kafka's describe_configs
# cannot send, so it sends DescribeConfigs (32) v1 over the plain connection above (plain TCP
# only, like the other ``transactions`` commands).

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
HALF_STATUS = "rmq.transaction.half.status"
HALF_ONE = "rmq.transaction.half."  # + <group>/<UNIQ_KEY>
DESCRIBE_CONFIGS = 32
_RESOURCE_TOPIC = 2
HALF_HEADERS = ["UniqKey", "Group", "Topic", "Partition", "AgeMs", "Checks"]
HALF_DESCRIBE_HEADERS = ["UniqKey", "Group", "Topic", "Partition", "HalfOffset", "StoredMs", "AgeMs", "Checks",
                         "FirstCheckMs"]
_HALF_COUNTERS = (("pending", "pending"), ("committed", "committed"), ("rolled_back", "rolled back"),
                  ("rolled_back_unchecked", "rolled back after max checks"), ("checks_sent", "checks sent"))


def _not_rmqkafka(client: ClientOptions) -> CliError:
    return CliError(f"the broker at {client.bootstrap} reports no half-message status ({HALF_STATUS} of "
                    f"{HALF_TOPIC}); is it an rmqkafka broker?")


def _half_json(name: str, value: str | None) -> Any:
    import json

    try:
        return json.loads(value) if value is not None else None
    except ValueError:
        raise CliError(f"{name} is not JSON: {value[:80]!r}") from None


def fetch_half_status(client: ClientOptions) -> dict[str, Any]:
    """The broker's ``rmq.transaction.half.status`` document (through the AdminClient)."""
    admin, _ = admin_client(client)
    return read_status_config(admin, client, HALF_TOPIC, HALF_STATUS, "half-message status")


def fetch_half_entries(client: ClientOptions, metadata: Any, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any] | None]:
    """Each (group, UNIQ_KEY)'s pending entry, None when it is not pending: DescribeConfigs
    of ``rmq.transaction.half.<group>/<UNIQ_KEY>`` by name, over plain TCP."""
    from kio.schema.describe_configs.v1.request import DescribeConfigsResource

    brokers = _brokers(metadata)
    if not brokers:
        raise CliError(f"the cluster at {client.bootstrap} lists no brokers")
    names = {f"{HALF_ONE}{group}/{key}": (group, key) for group, key in keys}
    _, host, port = brokers[0]
    with _Connection(host, port, client.timeout) as conn:
        response = conn.request(DESCRIBE_CONFIGS, 1, resources=(DescribeConfigsResource(
            resource_type=_RESOURCE_TOPIC, resource_name=HALF_TOPIC, configuration_keys=tuple(names)),),
            include_synonyms=False)
    [result] = response.results
    if not _ok(result.error_code):
        if _code_name(result.error_code) == "UNKNOWN_TOPIC_OR_PARTITION":
            raise _not_rmqkafka(client)
        raise CliError(f"cannot describe {HALF_TOPIC}: {_code_name(result.error_code)}"
                       f"{f' ({result.error_message})' if result.error_message else ''}")
    answered = {c.name: c.value for c in result.configs}
    found: dict[tuple[str, str], dict[str, Any] | None] = {}
    for name, ident in names.items():
        if name not in answered:
            raise _not_rmqkafka(client)
        value = _half_json(name, answered[name])
        found[ident] = value if isinstance(value, dict) else None
    return found


def _half_rows(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e.get("uniq_key"), e.get("group"), e.get("topic"), e.get("partition"), e.get("age_ms"), e.get("checks"))
            for e in entries]


@transactions.group("half", cls=Group, no_args_is_help=True)
def half() -> None:
    """RocketMQ transaction messages: half messages waiting for a commit or rollback."""


@half.command("list")
@click.option("--group", "group", metavar="GROUP", help="Only half messages of this producer group (PGROUP).")
@json_option
@client_options
@handle_errors
def half_list_cmd(group: str | None, as_json: bool, client: ClientOptions) -> None:
    """Counters and the oldest pending half messages (as many as the broker lists)."""
    from rmqkafka.cli.common import echo

    status = fetch_half_status(client)
    oldest = [e for e in status.get("oldest", []) if isinstance(e, dict)]
    pending = int(status.get("pending", 0) or 0)
    shown = [e for e in oldest if group is None or e.get("group") == group]
    if as_json:
        if group is not None:
            status = dict(status, oldest=shown, group=group)
        echo_json(status)
        return
    echo(", ".join(f"{status.get(key, 0)} {label}" for key, label in _HALF_COUNTERS)
         + f" (transactionTimeOut {status.get('transaction_timeout_ms')} ms, transactionCheckInterval "
         f"{status.get('transaction_check_interval_ms')} ms, transactionCheckMax {status.get('transaction_check_max')})")
    echo_table(HALF_HEADERS, _half_rows(shown))
    if pending > len(oldest):
        among = f" (those of group {group} among them)" if group is not None else ""
        echo(f"{pending - len(oldest)} more pending than shown: the broker lists only the oldest {len(oldest)} "
             f"of {pending}{among}")


@half.command("describe")
@click.argument("group_name", metavar="GROUP")
@click.argument("uniq_keys", nargs=-1, required=True, metavar="UNIQ_KEY...")
@json_option
@client_options
@handle_errors
def half_describe_cmd(group_name: str, uniq_keys: tuple[str, ...], as_json: bool, client: ClientOptions) -> None:
    """Topic, partition, half offset, age and back-checks of pending half messages."""
    check_plain_tcp(client)
    _, metadata = admin_client(client)
    keys = [(group_name, key) for key in dict.fromkeys(uniq_keys)]
    found = fetch_half_entries(client, metadata, keys)
    entries = [entry for entry in found.values() if entry is not None]
    missing = [key for (_, key), entry in found.items() if entry is None]
    if as_json:
        echo_json(entries)
    elif entries:
        echo_table(HALF_DESCRIBE_HEADERS, [
            (e["uniq_key"], e["group"], e["topic"], e["partition"], e["half_offset"], e["stored_ms"], e["age_ms"],
             e["checks"], e["first_check_ms"])
            for e in entries
        ])
    if missing:
        one = len(missing) == 1
        raise CliError(f"half message{'' if one else 's'} UNIQ_KEY {', '.join(missing)} of group {group_name} "
                       f"{'is' if one else 'are'} not pending (unknown, or already committed or rolled back)")
