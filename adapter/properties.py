"""Build the broker's configuration from a Kafka ``server.properties`` file and flags.

Kafka users already have a ``server.properties``; accepting its keys verbatim means they can
point ``rmqk serve --config`` at the file they have. This module reads the Java properties
format (the subset such files use), picks out the keys the broker understands, and returns
one frozen :class:`AdapterConfig` and one :class:`StorageConfig`. It does no other I/O and
never touches the data directory.

Keys understood (everything else is ignored and reported in ``ServerConfig.unknown_keys``):

=================================== ==========================================================
``listeners``                       ``NAME://HOST:PORT``; ``NAME://:PORT`` binds all interfaces
                                    (0.0.0.0), ``NAME://[::1]:PORT`` is IPv6. One or more
                                    client listeners with distinct names; PLAINTEXT, SSL,
                                    SASL_PLAINTEXT or SASL_SSL (by name or through the map);
                                    the first is the primary (``--host``/``--port`` override
                                    it). Listeners named in ``controller.listener.names``
                                    are dropped (there is no controller quorum), so Kafka's
                                    stock KRaft file works.
``advertised.listeners``            per listener name, what Metadata tells the clients that
                                    connected to that listener; empty host = the bound host
``listener.security.protocol.map``  ``NAME:PROTOCOL,...``: each listener's security protocol
``sasl.enabled.mechanisms``         PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (default: all three)
``sasl.jaas.config``                users of SASL listeners, Kafka's JAAS form: ``user_NAME=
                                    "password"`` entries, for every listener and mechanism
                                    without its own ``listener.name.L.MECH.sasl.jaas.config``
                                    (Kafka reads only the prefixed key; this one is ours too)
``sasl.users.file``                 a properties file of ``user=password`` lines (ours), added
                                    to ``sasl.jaas.config``'s users
``sasl.server.max.receive.size``    largest frame before authentication (default 524288)
``connection.failed.authentication.delay.ms`` a failed login is answered and closed this much
                                    later (default 100; less than ``connections.max.idle.ms``)
``connections.max.reauth.ms``       SASL session lifetime (KIP-368); 0 (default) = none
``listener.name.L.KEY``             listener L's own value of KEY, in place of the broker-wide
                                    one: the ``ssl.*`` keys below, ``sasl.enabled.mechanisms``,
                                    ``connections.max.reauth.ms``, and per mechanism
                                    ``listener.name.L.MECH.sasl.jaas.config`` and
                                    ``...MECH.connections.max.reauth.ms`` (L and MECH in lower
                                    case as in Kafka; any case is accepted). A SASL listener
                                    with a mechanism that no JAAS configuration covers refuses
                                    to start, as Kafka does
``ssl.keystore.location``           PEM file with the certificate chain and private key
                                    (``ssl.keystore.type`` must be PEM); needed by TLS listeners
``ssl.key.password``                the private key's password, if it is encrypted
``ssl.truststore.location``         PEM CA certificates to verify client certificates with
``ssl.client.auth``                 none (default), requested or required; on SASL_SSL
                                    listeners only ``listener.name.L.ssl.client.auth`` counts
                                    (KIP-684)
``ssl.enabled.protocols``           TLSv1.2 and/or TLSv1.3 (default both)
``authorizer.class.name``           any non-empty value enforces ACLs (Kafka's class names
                                    are accepted as they are)
``super.users``                     ``User:admin;User:ops``: allowed everything
``allow.everyone.if.no.acl.found``  allow a resource no ACL names (default false)
``log.dirs`` / ``log.dir``          the data directory (``log.dirs`` wins; first entry only)
``num.partitions``                  partitions of auto-created topics (>= 1)
``auto.create.topics.enable``       ``true`` / ``false``
``message.max.bytes``               largest record batch accepted (>= 0)
``compression.type``                default of the topic config ``compression.type``:
                                    producer, uncompressed, gzip, snappy, lz4 or zstd
``socket.request.max.bytes``        largest request frame accepted (> 0)
``connections.max.idle.ms``         close a connection idle this long (default 600000)
``max.connections``                 connections of all listeners together; one more is
                                    closed as it is accepted (default 2147483647; dynamic)
``max.connections.per.ip``          the same per client address (default 2147483647; dynamic)
``request.read.timeout.ms``         close a connection whose request frame has not arrived
                                    whole this long after its first byte (default 60000)
``fetch.max.bytes``                 the most record bytes one Fetch response carries
                                    (>= 1024; default 57671680, Kafka's)
``max.incremental.fetch.session.cache.slots`` incremental fetch sessions (KIP-227) the broker
                                    keeps (>= 0; Kafka's default 1000; 0 = none)
``min.incremental.fetch.session.eviction.ms`` how long a fetch session is kept from eviction
                                    by a bigger one, and idle before any new one may evict
                                    it (>= 0; Kafka's default 120000)
``incremental.fetch.session.cache.max.partitions`` partitions all fetch sessions hold together
                                    (>= 0; default 1000000, ours)
``response.buffer.max.bytes``       Fetch response bytes waiting in the sockets of all
                                    connections before new Fetches wait (default 256 MiB)
``controller.mutation.rate``        partitions CreateTopics, CreatePartitions and DeleteTopics
                                    may create or delete per second, all clients together
                                    (ours; Kafka's ``controller_mutation_rate`` quota as one
                                    broker-wide budget; default 1000, -1 = unlimited); past
                                    it: THROTTLING_QUOTA_EXCEEDED with a throttle time
``controller.quota.window.num``     with ``controller.quota.window.size.seconds``: the burst
                                    is rate x num x size (Kafka's defaults 11 and 1)
``quota.window.num``               with ``quota.window.size.seconds``: the samples over which
                                    a client quota's rate is measured (Kafka's names and
                                    defaults, 11 and 1; adapter.client_quota_rate)
``log.segment.bytes``               commitlog segment size (>= 1 MiB, Kafka's minimum)
``internal.segment.bytes``          Kafka's test-only override of it (>= 1024)
``max.partitions.per.topic``        partitions one topic may have (default 1000; more is
                                    INVALID_PARTITIONS)
``max.partitions``                  partitions of all topics together (default 10000)
``log.retention.ms|minutes|hours``  Kafka's precedence ms > minutes > hours; -1 = unlimited
``log.retention.bytes``             -1 = unlimited
``log.retention.check.interval.ms`` (> 0)
``log.cleaner.enable``              whether compacted topics are cleaned (true; Kafka's)
``log.cleaner.backoff.ms``          the pause between two passes of the log cleaner (15000)
``log.cleaner.dedupe.buffer.size``  memory the cleaner's key map may use (134217728); a
                                    cleaning covers at most size / 176 keys
``node.id`` / ``broker.id``         (>= 0; if both are given they must agree)
``flush.policy``                    ``async`` or ``sync``; RocketMQ's ``flushDiskType=
                                    ASYNC_FLUSH|SYNC_FLUSH`` is accepted too
``log.flush.interval.ms``           the async policy's fsync interval (> 0)
``offsets.retention.minutes``       committed offsets of groups without members expire after
                                    this long (>= 1; Kafka's default 10080 = 7 days)
``group.initial.rebalance.delay.ms`` wait before a new group's first rebalance completes
                                    (>= 0; default 0, where Kafka waits 3000)
``group.min.session.timeout.ms``    smallest session timeout a member may ask for (6000)
``group.max.session.timeout.ms``    largest session timeout a member may ask for (1800000)
``group.max.size``                  members of a classic group (2147483647): a new member
                                    beyond it gets GROUP_MAX_SIZE_REACHED
``group.consumer.session.timeout.ms`` consumer-protocol (KIP-848) session timeout (45000,
                                    within ``group.consumer.min|max.session.timeout.ms``,
                                    45000 and 60000)
``group.consumer.heartbeat.interval.ms`` KIP-848 heartbeat interval (5000, within
                                    ``group.consumer.min|max.heartbeat.interval.ms``, 5000 and
                                    15000; less than the session timeout)
``group.consumer.max.size``         members of a consumer-protocol group (2147483647)
``group.consumer.assignors``        server assignors, the first the default (``uniform,range``;
                                    Kafka's class names are accepted)
``group.consumer.migration.policy`` online migration between the classic and consumer group
                                    protocols: ``bidirectional`` (default), ``upgrade``,
                                    ``downgrade`` or ``disabled`` (any case)
``group.share.session.timeout.ms``  share group (KIP-932) session timeout (45000, within
                                    ``group.share.min|max.session.timeout.ms``, 45000 and 60000)
``group.share.heartbeat.interval.ms`` share group heartbeat interval (5000, within
                                    ``group.share.min|max.heartbeat.interval.ms``, 5000 and
                                    15000; less than the session timeout)
``group.share.max.size``            members of a share group (200; 1..1000)
``group.consumer.regex.refresh.interval.ms`` how old a group's resolution of its regular
                                    expressions may grow before a heartbeat resolves them
                                    again (600000, >= 10000 as in Kafka); created topics are
                                    picked up sooner, at the next heartbeat
``group.share.record.lock.duration.ms`` share groups' acquisition lock (30000, within
                                    ``group.share.min|max.record.lock.duration.ms``, 15000
                                    and 60000; each in [1000, 3600000])
``group.share.delivery.count.limit`` deliveries before a share group archives a record (5,
                                    [2, 10])
``group.share.partition.max.record.locks`` in-flight records per share-partition (2000,
                                    [100, 10000])
``group.share.max.share.sessions``  share sessions of the broker (2000, [1, 2147483647])
``offset.metadata.max.bytes``       longest metadata string of a committed offset (4096)
``offsets.topic.num.partitions``    partitions of ``__consumer_offsets`` (50; presented only)
``transaction.max.timeout.ms``      largest transaction timeout a producer may ask for (900000)
``transactional.id.expiration.ms``  a transactional id unused this long is forgotten
                                    (>= 1; 604800000 = 7 days)
``enablePropertyFilter``            RocketMQ's switch for SQL92 views (default true here;
                                    RocketMQ's own default is false)
``messageDelayLevel``               the delay levels, RocketMQ's syntax (``1s 5s 10s 30s 1m
                                    ... 2h``: whole numbers with unit s, m, h or d; each at
                                    most 2147483647s, at most max.partitions.per.topic levels)
``timerMaxDelaySec``                longest timer a record may ask for (default 30 days)
``timerPrecisionMs``                timing-wheel slot width (default 100; 1..60000)
``timerRollWindowSlot``             timing-wheel window in slots (default 2 days of slots;
                                    2..6048000: a crash rebuilds it in memory)
``maxReconsumeTimes``               retries before a nacked record goes to the dead-letter
                                    topic (default 16; per group: ``rmq.max.reconsume.times``)
``transactionCheckInterval``        ms between passes of the half-message check service
                                    (default 30000, RocketMQ 5's)
``transactionTimeOut``              ms a half message waits before its producer group is
                                    asked (default 6000)
``transactionCheckMax``             checks before an undecided half message is rolled back
                                    (default 15)
``metrics.port``                    HTTP port of /metrics, /ready, /healthz and the console
                                    (ours; unset = off, 0 = any free port; ``--metrics-port``)
``metrics.host``                    address of that port (ours; default: the primary
                                    listener's bind address)
``metrics.allowed.hosts``           host names (comma-separated) that port answers browsers
                                    by, besides IP literals, localhost and the broker's own
                                    names (ours; ``*`` = any; DNS rebinding)
=================================== ==========================================================

Precedence, highest first: command-line overrides (host, port, data_dir, flush, metrics
port), dynamic broker configs (set at run time with IncrementalAlterConfigs, kept in the data
directory: adapter/broker_configs.py), the file, then built-in defaults. Without a listener
the broker binds 127.0.0.1:9092 (not Kafka's all-interfaces default: a development broker
should not be reachable from the network by accident).

Default data directory: ``~/.rmqkafka/data`` (``~`` expanded), or the value of the
environment variable ``RMQK_DATA_DIR`` when it is set and non-empty. A data directory from
the file or the command line wins over both.

Every bad value raises :class:`ConfigError` naming the key and the value. Every integer key
has its range in :data:`INTEGER_RANGES` (Kafka's, RocketMQ's or ours, said in the error);
adding a key is one line there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from rmqkafka.adapter.config import (
    PLAINTEXT,
    SASL_MECHANISMS,
    SASL_PLAINTEXT,
    SASL_SSL,
    SECURITY_PROTOCOLS,
    SSL,
    AdapterConfig,
    ExtraListener,
    ListenerSecurity,
    SecurityConfig,
    TlsConfig,
)
from rmqkafka.adapter.groups.assignors import ASSIGNORS, CLASS_NAMES
from rmqkafka.adapter.groups.migration import MigrationPolicy
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.delay_levels import LONGEST_DELAY_SEC, parse_delay_levels
from rmqkafka.storage.config import StorageConfig

DATA_DIR_ENV = "RMQK_DATA_DIR"
DEFAULT_DATA_DIR = "~/.rmqkafka/data"

KNOWN_KEYS = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "controller.listener.names",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.users.file",
        "sasl.server.max.receive.size",
        "connection.failed.authentication.delay.ms",
        "connections.max.reauth.ms",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.key.password",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "log.dirs",
        "log.dir",
        "num.partitions",
        "auto.create.topics.enable",
        "message.max.bytes",
        "compression.type",
        "socket.request.max.bytes",
        "connections.max.idle.ms",
        "max.connections",
        "max.connections.per.ip",
        "request.read.timeout.ms",
        "fetch.max.bytes",
        "max.incremental.fetch.session.cache.slots",
        "min.incremental.fetch.session.eviction.ms",
        "incremental.fetch.session.cache.max.partitions",
        "response.buffer.max.bytes",
        "controller.mutation.rate",
        "controller.quota.window.num",
        "controller.quota.window.size.seconds",
        "quota.window.num",
        "quota.window.size.seconds",
        "log.segment.bytes",
        "internal.segment.bytes",
        "max.partitions.per.topic",
        "max.partitions",
        "log.dir.reserve.bytes",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.retention.bytes",
        "log.retention.check.interval.ms",
        "log.cleaner.enable",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "node.id",
        "broker.id",
        "flush.policy",
        "flushDiskType",
        "log.flush.interval.ms",
        "offsets.retention.minutes",
        "group.initial.rebalance.delay.ms",
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "group.max.size",
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
        "group.consumer.max.size",
        "group.consumer.assignors",
        "group.consumer.migration.policy",
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
        "group.share.max.size",
        "group.consumer.regex.refresh.interval.ms",
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
        "group.share.delivery.count.limit",
        "group.share.partition.max.record.locks",
        "group.share.max.share.sessions",
        "offset.metadata.max.bytes",
        "offsets.topic.num.partitions",
        "transaction.max.timeout.ms",
        "transactional.id.expiration.ms",
        "enablePropertyFilter",
        "messageDelayLevel",
        "timerMaxDelaySec",
        "timerPrecisionMs",
        "timerRollWindowSlot",
        "maxReconsumeTimes",
        "transactionCheckInterval",
        "transactionTimeOut",
        "transactionCheckMax",
        "metrics.port",
        "metrics.host",
        "metrics.allowed.hosts",
    }
)

_FLUSH_DISK_TYPES = {"ASYNC_FLUSH": "async", "SYNC_FLUSH": "sync"}
_COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
_MS_PER_MINUTE = 60_000
_MS_PER_HOUR = 3_600_000


class ConfigError(ValueError):
    """A configuration value the broker cannot use; the message names the key and value.

    ``key``, ``value`` and ``reason`` are set when one key's value is at fault (the dynamic
    broker configs answer those in Kafka's words, adapter/broker_configs.py)."""

    def __init__(self, message: str, key: str | None = None, value: str | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.key, self.value, self.reason = key, value, reason


# --------------------------------------------------------------------------- integer ranges

INT_MAX = 2**31 - 1  # Java's int: Kafka's INT, RocketMQ's int fields, INT32 on the wire
LONG_MAX = 2**63 - 1  # Java's long: Kafka's LONG

_KAFKA = "Kafka's range"
_KAFKA_TYPE = "Kafka's type, our minimum"  # Kafka has no validator for the key
_ROCKETMQ = "RocketMQ's range: a Java int"
_ROCKETMQ_LONG = "RocketMQ's range: a Java long"


@dataclass(frozen=True, slots=True)
class IntRange:
    """The values an integer key accepts; ``why`` says whose bounds they are (in errors)."""

    low: int
    high: int
    why: str


_PORT = IntRange(0, 65535, "a TCP port")

# Every integer key and its range. Kafka's where Kafka has the key (its ConfigDef type and
# validator); RocketMQ's where RocketMQ has it; ours where neither bounds it and a value would
# cost an unbounded allocation, or overflow a wire field or a 64-bit time.
INTEGER_RANGES: dict[str, IntRange] = {
    "sasl.server.max.receive.size": IntRange(1, INT_MAX, _KAFKA_TYPE),
    "connection.failed.authentication.delay.ms": IntRange(0, INT_MAX, _KAFKA),
    "connections.max.reauth.ms": IntRange(0, LONG_MAX, "Kafka's type; 0 = no re-authentication"),
    "num.partitions": IntRange(1, INT_MAX, _KAFKA),
    "message.max.bytes": IntRange(0, INT_MAX, _KAFKA),
    "socket.request.max.bytes": IntRange(1, INT_MAX, _KAFKA),
    "connections.max.idle.ms": IntRange(1, LONG_MAX, _KAFKA_TYPE),
    "max.connections": IntRange(0, INT_MAX, _KAFKA),
    "max.connections.per.ip": IntRange(0, INT_MAX, _KAFKA),
    "request.read.timeout.ms": IntRange(1, LONG_MAX, "ours"),
    "fetch.max.bytes": IntRange(1024, INT_MAX, _KAFKA),
    "max.incremental.fetch.session.cache.slots": IntRange(0, INT_MAX, _KAFKA),
    "min.incremental.fetch.session.eviction.ms": IntRange(0, INT_MAX, _KAFKA),
    "incremental.fetch.session.cache.max.partitions": IntRange(0, INT_MAX, "ours"),
    "response.buffer.max.bytes": IntRange(1, LONG_MAX, "ours"),
    "log.segment.bytes": IntRange(1 << 20, INT_MAX, _KAFKA),
    # Kafka's test-only override of log.segment.bytes; below 1 KiB a segment per batch would
    # exhaust file descriptors
    "internal.segment.bytes": IntRange(1024, INT_MAX, "ours, for tests only"),
    "max.partitions.per.topic": IntRange(1, INT_MAX, "ours: INT32 on the wire"),
    "max.partitions": IntRange(1, INT_MAX, "ours: INT32 on the wire"),
    "log.dir.reserve.bytes": IntRange(0, 1 << 30, "ours: the reserve is written at start"),
    "log.retention.ms": IntRange(-1, LONG_MAX, "Kafka's type; -1 = unlimited"),
    "log.retention.minutes": IntRange(-1, INT_MAX, "Kafka's type; -1 = unlimited"),
    "log.retention.hours": IntRange(-1, INT_MAX, "Kafka's type; -1 = unlimited"),
    "log.retention.bytes": IntRange(-1, LONG_MAX, "Kafka's type; -1 = unlimited"),
    "log.retention.check.interval.ms": IntRange(1, LONG_MAX, _KAFKA),
    "log.cleaner.backoff.ms": IntRange(0, LONG_MAX, _KAFKA),
    # Kafka's minimum is 1 MiB per cleaner thread; a key costs us 176 bytes
    "log.cleaner.dedupe.buffer.size": IntRange(1 << 20, LONG_MAX, _KAFKA_TYPE),
    "node.id": IntRange(0, INT_MAX, _KAFKA),
    "broker.id": IntRange(0, INT_MAX, _KAFKA),
    "log.flush.interval.ms": IntRange(1, LONG_MAX, _KAFKA_TYPE),
    "offsets.retention.minutes": IntRange(1, INT_MAX, _KAFKA),
    "group.initial.rebalance.delay.ms": IntRange(0, INT_MAX, _KAFKA_TYPE),
    "group.min.session.timeout.ms": IntRange(1, INT_MAX, _KAFKA_TYPE),
    "group.max.session.timeout.ms": IntRange(1, INT_MAX, _KAFKA_TYPE),
    "group.max.size": IntRange(1, INT_MAX, _KAFKA),
    "offset.metadata.max.bytes": IntRange(0, INT_MAX, _KAFKA_TYPE),
    "controller.mutation.rate": IntRange(-1, INT_MAX, "ours: -1 = unlimited, 0 is refused"),
    "controller.quota.window.num": IntRange(1, INT_MAX, _KAFKA),
    "controller.quota.window.size.seconds": IntRange(1, INT_MAX, _KAFKA),
    "quota.window.num": IntRange(1, INT_MAX, _KAFKA),
    "quota.window.size.seconds": IntRange(1, INT_MAX, _KAFKA),
    # each also bounded by its neighbours (_heartbeat_group_settings)
    **{f"group.{kind}.{suffix}": IntRange(1, INT_MAX, _KAFKA) for kind in ("consumer", "share") for suffix in (
        "session.timeout.ms", "min.session.timeout.ms", "max.session.timeout.ms", "heartbeat.interval.ms",
        "min.heartbeat.interval.ms", "max.heartbeat.interval.ms")},
    "group.consumer.max.size": IntRange(1, INT_MAX, _KAFKA),
    "group.share.max.size": IntRange(1, 1000, _KAFKA),
    "group.consumer.regex.refresh.interval.ms": IntRange(10_000, INT_MAX, _KAFKA),
    # Kafka's ShareGroupConfig ranges; the lock duration also within its min and max, the
    # sessions at least group.share.max.size (_share_lock_settings)
    **{f"group.share.{suffix}": IntRange(1000, 3_600_000, _KAFKA) for suffix in (
        "record.lock.duration.ms", "min.record.lock.duration.ms", "max.record.lock.duration.ms")},
    "group.share.delivery.count.limit": IntRange(2, 10, _KAFKA),
    "group.share.partition.max.record.locks": IntRange(100, 10_000, _KAFKA),
    "group.share.max.share.sessions": IntRange(1, INT_MAX, _KAFKA),
    "offsets.topic.num.partitions": IntRange(1, INT_MAX, _KAFKA),
    "transaction.max.timeout.ms": IntRange(1, INT_MAX, _KAFKA),
    "transactional.id.expiration.ms": IntRange(1, INT_MAX, _KAFKA),
    "metrics.port": _PORT,
    "timerMaxDelaySec": IntRange(1, LONGEST_DELAY_SEC, _ROCKETMQ),
    "timerPrecisionMs": IntRange(1, 60_000, "ours"),
    # RocketMQ's wheel holds 7 days; a crash rebuilds ours in memory, 16 bytes a slot (97 MB)
    "timerRollWindowSlot": IntRange(2, 7 * 86_400 * 10, "ours: 7 days of 100 ms slots"),
    "maxReconsumeTimes": IntRange(0, INT_MAX, _ROCKETMQ),
    "transactionCheckInterval": IntRange(1, LONG_MAX, _ROCKETMQ_LONG),
    "transactionTimeOut": IntRange(0, LONG_MAX, _ROCKETMQ_LONG),
    "transactionCheckMax": IntRange(0, INT_MAX, _ROCKETMQ),
}


@dataclass(frozen=True, slots=True)
class Listener:
    """One parsed ``NAME://HOST:PORT`` entry; ``host`` is "" when the URL left it empty."""

    name: str
    host: str
    port: int
    protocol: str = PLAINTEXT


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The result of :func:`build_config`: both layers' configs plus what was ignored.

    ``unknown_keys`` are file keys the broker does not understand (sorted); ``warnings`` are
    other non-fatal remarks (for example extra ``log.dirs`` entries). The CLI logs both.
    """

    adapter: AdapterConfig
    storage: StorageConfig
    semantics: SemanticsConfig = SemanticsConfig()
    unknown_keys: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    # what the configs were built from (the file's keys and the command-line overrides), so
    # that :func:`rebuild` can build them again with dynamic broker configs on top
    static_props: Mapping[str, str] = field(default_factory=dict, repr=False)
    build_args: Mapping[str, object] = field(default_factory=dict, repr=False)


# --------------------------------------------------------------------------- properties format

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text into a dict (a later duplicate key wins, as in Java).

    Supported: ``key=value``, ``key: value`` and ``key value``; ``#`` and ``!`` comment
    lines; blank lines; a line ending in an odd number of backslashes continues on the next
    line (whose leading whitespace is dropped); escapes ``\\t \\n \\r \\f \\uXXXX`` and
    ``\\<char>`` for a literal char. Surrounding whitespace is trimmed (an escaped ``\\ `` stays).
    """
    result: dict[str, str] = {}
    for line_no, logical in _logical_lines(text):
        key_raw, value_raw = _split_key_value(logical)
        key = _unescape(key_raw, line_no)
        result[key] = _unescape(_rstrip_unescaped(value_raw), line_no)
    return result


def read_properties(path: Path) -> dict[str, str]:
    """Read and parse a properties file (UTF-8); I/O and decoding problems are ConfigErrors."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from exc
    try:
        return parse_properties(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continued natural lines; drop comments and blanks. Returns (first line no, line)."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, natural in enumerate(_LINE_BREAK.split(text), start=1):
        if pending is None:
            stripped = natural.lstrip(_WHITESPACE)
            if not stripped or stripped[0] in "#!":
                continue  # comment lines never continue, as in Java
            start, piece = number, stripped
        else:
            piece = pending + natural.lstrip(_WHITESPACE)
        trailing = len(piece) - len(piece.rstrip("\\"))
        if trailing % 2 == 1:
            pending = piece[:-1]
            continue
        pending = None
        out.append((start, piece))
    if pending is not None and pending.strip(_WHITESPACE):
        out.append((start, pending))  # a continuation at end of input just ends the line
    return out


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace (Java's rule)."""
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _rstrip_unescaped(raw: str) -> str:
    """Strip trailing whitespace unless the last whitespace char is escaped (``\\ ``)."""
    stripped = raw.rstrip(_WHITESPACE)
    if len(stripped) < len(raw):
        backslashes = len(stripped) - len(stripped.rstrip("\\"))
        if backslashes % 2 == 1:
            return raw[: len(stripped) + 1]
    return stripped


def _unescape(raw: str, line_no: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            break  # a lone trailing backslash is dropped, as in Java
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"line {line_no}: malformed \\uXXXX escape in {raw!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


# --------------------------------------------------------------------------- typed values

_INT = re.compile(r"[+-]?[0-9]+")
_LISTENER = re.compile(
    r"(?P<name>[A-Za-z0-9_-]+)://"
    r"(?:\[(?P<ipv6>[0-9A-Za-z:.%]+)\]|(?P<host>[A-Za-z0-9._-]*))"
    r":(?P<port>[0-9]+)"
)


def _share_lock_settings(p: _Props) -> dict[str, object]:
    """group.share.* of share-partitions (record locks, delivery limit, sessions), with the lock duration within its min and max as Kafka's
    ShareGroupConfig requires."""
    defaults = AdapterConfig()
    values: dict[str, object] = {}
    for suffix in ("record.lock.duration.ms", "min.record.lock.duration.ms", "max.record.lock.duration.ms",
                   "delivery.count.limit", "partition.max.record.locks", "max.share.sessions"):
        name = "group_share_" + suffix.replace(".", "_")
        given = p.integer("group.share." + suffix)
        values[name] = given if given is not None else getattr(defaults, name)
    value = values["group_share_record_lock_duration_ms"]
    low, high = values["group_share_min_record_lock_duration_ms"], values["group_share_max_record_lock_duration_ms"]
    if high < low:
        raise p.error("group.share.max.record.lock.duration.ms", str(high),
                      "must be greater than or equal to group.share.min.record.lock.duration.ms")
    if not low <= value <= high:
        raise p.error("group.share.record.lock.duration.ms", str(value),
                      f"must be between group.share.min.record.lock.duration.ms ({low}) "
                      f"and group.share.max.record.lock.duration.ms ({high})")
    size = p.integer("group.share.max.size")
    size = defaults.group_share_max_size if size is None else size
    if values["group_share_max_share_sessions"] < size:
        raise p.error("group.share.max.share.sessions", str(values["group_share_max_share_sessions"]),
                      f"must be greater than or equal to group.share.max.size ({size})")
    return values


def _heartbeat_group_settings(p: _Props, kind: str) -> dict[str, object]:
    """group.<kind>.* timeouts and size (kind: consumer or share), with the relations
    Kafka's GroupCoordinatorConfig requires."""
    defaults = AdapterConfig()
    values: dict[str, object] = {}
    for suffix in ("session.timeout.ms", "min.session.timeout.ms", "max.session.timeout.ms",
                   "heartbeat.interval.ms", "min.heartbeat.interval.ms", "max.heartbeat.interval.ms",
                   "max.size"):
        name = f"group_{kind}_" + suffix.replace(".", "_")
        given = p.integer(f"group.{kind}." + suffix)
        values[name] = given if given is not None else getattr(defaults, name)
    for timeout in ("session.timeout", "heartbeat.interval"):
        attr = timeout.replace(".", "_")
        value = values[f"group_{kind}_{attr}_ms"]
        low, high = values[f"group_{kind}_min_{attr}_ms"], values[f"group_{kind}_max_{attr}_ms"]
        key = f"group.{kind}.{timeout}.ms"
        if high < low:
            raise p.error(f"group.{kind}.max.{timeout}.ms", str(high),
                          f"must be greater than or equal to group.{kind}.min.{timeout}.ms")
        if not low <= value <= high:
            raise p.error(key, str(value), f"must be between group.{kind}.min.{timeout}.ms ({low}) "
                                           f"and group.{kind}.max.{timeout}.ms ({high})")
    if values[f"group_{kind}_heartbeat_interval_ms"] >= values[f"group_{kind}_session_timeout_ms"]:
        raise p.error(f"group.{kind}.heartbeat.interval.ms", str(values[f"group_{kind}_heartbeat_interval_ms"]),
                      f"must be less than group.{kind}.session.timeout.ms")
    return values


def _consumer_group_settings(p: _Props) -> dict[str, object]:
    """group.consumer.*: timeouts, size and assignors."""
    values = _heartbeat_group_settings(p, "consumer")
    refresh = p.integer("group.consumer.regex.refresh.interval.ms")
    if refresh is not None:
        values["group_consumer_regex_refresh_interval_ms"] = refresh
    assignors = p.get("group.consumer.assignors")
    if assignors is not None:
        names = []
        for entry in (a.strip() for a in assignors.split(",")):
            name = CLASS_NAMES.get(entry, entry)
            if name not in ASSIGNORS:
                raise p.error("group.consumer.assignors", assignors, f"unknown assignor {entry!r}")
            if name not in names:
                names.append(name)
        if not names:
            raise p.error("group.consumer.assignors", assignors, "at least one assignor is needed")
        values["group_consumer_assignors"] = tuple(names)
    policy = p.get("group.consumer.migration.policy")
    if policy is not None:
        try:
            values["group_consumer_migration_policy"] = MigrationPolicy.parse(policy)
        except ValueError as exc:
            raise p.error("group.consumer.migration.policy", policy, str(exc)) from None
    return values


class _Props:
    """Typed getters over the raw key/value map; every failure names the key and the value."""

    def __init__(self, props: Mapping[str, str], source: str, names: Mapping[str, str] | None = None) -> None:
        self._props = props
        self._source = source
        # key -> the key it was read from (a listener's own listener.name.<name>.<key>)
        self.names: Mapping[str, str] = names or {}

    @property
    def props(self) -> Mapping[str, str]:
        return self._props

    @property
    def source(self) -> str:
        return self._source

    def error(self, key: str, value: str, reason: str) -> ConfigError:
        name = self.names.get(key, key)
        return ConfigError(f"{self._source}: invalid value {value!r} for {name}: {reason}", name, value, reason)

    def get(self, key: str) -> str | None:
        value = self._props.get(key)
        return None if value is None else value.strip()

    def integer(self, key: str, minimum: int | None = None) -> int | None:
        """The key's integer, checked against its INTEGER_RANGES entry (a key without one:
        ``minimum`` up to Java's long)."""
        value = self.get(key)
        if value is None:
            return None
        if not _INT.fullmatch(value):
            raise self.error(key, value, "expected an integer")
        bounds = INTEGER_RANGES.get(key) or IntRange(
            -LONG_MAX - 1 if minimum is None else minimum, LONG_MAX, "Kafka's LONG")
        return checked(int(value), bounds, lambda reason: self.error(key, value, reason))

    def limit(self, key: str) -> tuple[bool, int | None]:
        """(given?, value): an integer >= 0, or -1 for "unlimited", returned as None."""
        number = self.integer(key)
        if number is None:
            return False, None
        return True, (None if number == -1 else number)

    def boolean(self, key: str) -> bool | None:
        value = self.get(key)
        if value is None:
            return None
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise self.error(key, value, "expected true or false")
        return lowered == "true"

    def choice(self, key: str, allowed: tuple[str, ...]) -> str | None:
        value = self.get(key)
        if value is not None and value not in allowed:
            raise self.error(key, value, f"expected one of {', '.join(allowed)}")
        return value

    def listeners(self, key: str, drop_names: frozenset[str]) -> list[Listener]:
        value = self.get(key)
        if not value:
            return []
        found: list[Listener] = []
        for entry in (part.strip() for part in value.split(",")):
            if not entry:
                continue
            match = _LISTENER.fullmatch(entry)
            if match is None:
                hint = "expected NAME://HOST:PORT, e.g. PLAINTEXT://127.0.0.1:9092"
                raise self.error(key, entry, hint)
            port = int(match["port"])
            if port > 65535:
                raise self.error(key, entry, "port must be 0..65535")
            name = match["name"].upper()
            if name in drop_names:
                continue
            found.append(Listener(name, match["ipv6"] or match["host"] or "", port))
        return found


def checked(number: int, bounds: IntRange, error: Callable[[str], ConfigError]) -> int:
    if not bounds.low <= number <= bounds.high:
        raise error(f"must be in [{bounds.low}, {bounds.high}] ({bounds.why})")
    return number


# --------------------------------------------------------------------------- building configs


def default_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$RMQK_DATA_DIR`` if set and non-empty, else ``~/.rmqkafka/data``; ``~`` expanded."""
    env = os.environ if environ is None else environ
    return Path(env.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR).expanduser()


def build_config(
    props: Mapping[str, str],
    *,
    host: str | None = None,
    port: int | None = None,
    data_dir: Path | str | None = None,
    flush: str | None = None,
    metrics_port: int | None = None,
    source: str = "config",
    environ: Mapping[str, str] | None = None,
) -> ServerConfig:
    """Build both configs from parsed properties, then apply the command-line overrides.

    ``None`` for an override means "not given". ``source`` prefixes error messages (the CLI
    passes the file name). ``environ`` defaults to ``os.environ`` (for ``RMQK_DATA_DIR``).
    """
    p = _Props(props, source)
    warnings: list[str] = []

    listeners = _client_listeners(p)
    advertised_by_name = _advertised_listeners(p, listeners)
    listener = listeners[0] if listeners else None
    advertised = advertised_by_name.get(listener.name if listener else "PLAINTEXT")
    bind_host = "127.0.0.1" if listener is None else (listener.host or "0.0.0.0")
    bind_port = 9092 if listener is None else listener.port
    if host is not None:
        bind_host = host or "0.0.0.0"
    if port is not None:
        bind_port = _flag("--port", port)

    node_id = _node_id(p)
    adapter_kwargs: dict[str, object] = {
        "host": bind_host,
        "port": bind_port,
        "security_protocol": listener.protocol if listener else PLAINTEXT,
        "listener_name": listener.name if listener else PLAINTEXT,
        "security": _security(p, listeners, warnings),
    }
    if advertised is not None:
        adapter_kwargs["advertised_host"] = advertised.host or None
        adapter_kwargs["advertised_port"] = advertised.port
    extras = []
    for extra in listeners[1:]:
        shown = advertised_by_name.get(extra.name)
        extras.append(
            ExtraListener(
                extra.name,
                extra.host or "0.0.0.0",
                extra.port,
                (shown.host or None) if shown else None,
                shown.port if shown else None,
                extra.protocol,
            )
        )
    if extras:
        adapter_kwargs["extra_listeners"] = tuple(extras)
    optional = {
        "node_id": node_id,
        "num_partitions": p.integer("num.partitions"),
        "auto_create_topics": p.boolean("auto.create.topics.enable"),
        "message_max_bytes": p.integer("message.max.bytes"),
        "compression_type": p.choice("compression.type", _COMPRESSION_TYPES),
        "socket_request_max_bytes": p.integer("socket.request.max.bytes"),
        "connections_max_idle_ms": p.integer("connections.max.idle.ms"),
        "max_connections": p.integer("max.connections"),
        "max_connections_per_ip": p.integer("max.connections.per.ip"),
        "request_read_timeout_ms": p.integer("request.read.timeout.ms"),
        "fetch_max_bytes": p.integer("fetch.max.bytes"),
        "max_incremental_fetch_session_cache_slots": p.integer("max.incremental.fetch.session.cache.slots"),
        "min_incremental_fetch_session_eviction_ms": p.integer("min.incremental.fetch.session.eviction.ms"),
        "incremental_fetch_session_cache_max_partitions": p.integer("incremental.fetch.session.cache.max.partitions"),
        "response_buffer_max_bytes": p.integer("response.buffer.max.bytes"),
        "group_initial_rebalance_delay_ms": p.integer("group.initial.rebalance.delay.ms"),
        "group_min_session_timeout_ms": p.integer("group.min.session.timeout.ms"),
        "group_max_session_timeout_ms": p.integer("group.max.session.timeout.ms"),
        "group_max_size": p.integer("group.max.size"),
        **_consumer_group_settings(p),
        **_heartbeat_group_settings(p, "share"),
        **_share_lock_settings(p),
        "offset_metadata_max_bytes": p.integer("offset.metadata.max.bytes"),
        "offsets_topic_num_partitions": p.integer("offsets.topic.num.partitions"),
        "transaction_max_timeout_ms": p.integer("transaction.max.timeout.ms"),
        "transactional_id_expiration_ms": p.integer("transactional.id.expiration.ms"),
        "controller_quota_window_num": p.integer("controller.quota.window.num"),
        "controller_quota_window_size_seconds": p.integer("controller.quota.window.size.seconds"),
        "quota_window_num": p.integer("quota.window.num"),
        "quota_window_size_seconds": p.integer("quota.window.size.seconds"),
        "metrics_port": _metrics_port(p, metrics_port),
        "metrics_host": p.get("metrics.host"),
        "metrics_allowed_hosts": _host_names(p.get("metrics.allowed.hosts")),
    }
    adapter_kwargs.update({k: v for k, v in optional.items() if v is not None})
    given, mutation_rate = p.limit("controller.mutation.rate")
    if given:
        if mutation_rate == 0:
            raise p.error("controller.mutation.rate", "0", "must be at least 1, or -1 for unlimited")
        adapter_kwargs["controller_mutation_rate"] = None if mutation_rate is None else float(mutation_rate)

    storage_kwargs: dict[str, object] = {
        "data_dir": _data_dir(p, data_dir, environ, warnings),
        "flush": _flush_policy(p, flush),
    }
    given, retention_ms = _retention_ms(p)
    if given:
        storage_kwargs["retention_ms"] = retention_ms
    given, retention_bytes = p.limit("log.retention.bytes")
    if given:
        storage_kwargs["retention_bytes"] = retention_bytes
    optional = {
        "segment_bytes": _segment_bytes(p),
        "max_partitions_per_topic": p.integer("max.partitions.per.topic"),
        "max_partitions": p.integer("max.partitions"),
        "disk_reserve_bytes": p.integer("log.dir.reserve.bytes"),
        "flush_interval_ms": p.integer("log.flush.interval.ms"),
        "retention_check_interval_ms": p.integer("log.retention.check.interval.ms"),
        "cleaner_enable": p.boolean("log.cleaner.enable"),
        "cleaner_backoff_ms": p.integer("log.cleaner.backoff.ms"),
        "cleaner_dedupe_buffer_bytes": p.integer("log.cleaner.dedupe.buffer.size"),
    }
    storage_kwargs.update({k: v for k, v in optional.items() if v is not None})
    offsets_retention_minutes = p.integer("offsets.retention.minutes")
    if offsets_retention_minutes is not None:
        storage_kwargs["offsets_retention_ms"] = offsets_retention_minutes * _MS_PER_MINUTE

    unknown = tuple(sorted(k for k in props if k not in KNOWN_KEYS and not _is_listener_key(k)))
    semantics_kwargs: dict[str, object] = {
        "enable_property_filter": p.boolean("enablePropertyFilter"),
        "delay_levels_ms": _delay_levels(p, storage_kwargs.get("max_partitions_per_topic")),
        "timer_max_delay_sec": p.integer("timerMaxDelaySec"),
        "timer_precision_ms": p.integer("timerPrecisionMs"),
        "timer_wheel_slots": p.integer("timerRollWindowSlot"),
        "max_reconsume_times": p.integer("maxReconsumeTimes"),
        "transaction_check_interval_ms": p.integer("transactionCheckInterval"),
        "transaction_timeout_ms": p.integer("transactionTimeOut"),
        "transaction_check_max": p.integer("transactionCheckMax"),
    }
    _check_session_timeouts(p)
    return ServerConfig(
        adapter=AdapterConfig(**adapter_kwargs),  # type: ignore[arg-type]
        storage=StorageConfig(**storage_kwargs),  # type: ignore[arg-type]
        semantics=SemanticsConfig(**{k: v for k, v in semantics_kwargs.items() if v is not None}),
        unknown_keys=unknown,
        warnings=tuple(warnings),
        static_props=dict(props),
        # the data directory as resolved now: a rebuild must not look at the environment again
        build_args=dict(host=host, port=port, data_dir=storage_kwargs["data_dir"], flush=flush,
                        metrics_port=metrics_port, source=source),
    )


def rebuild(static: ServerConfig, dynamic: Mapping[str, str], source: str = "dynamic config") -> ServerConfig:
    """``static``'s configs built again with ``dynamic`` keys over its file's (Kafka's
    precedence: a dynamic broker config beats server.properties); every value is checked
    exactly as at start. Errors name ``source``."""
    args = {**static.build_args, "source": source}
    return build_config({**static.static_props, **dynamic}, **args)  # type: ignore[arg-type]


def load_config(
    path: Path | str | None,
    *,
    host: str | None = None,
    port: int | None = None,
    data_dir: Path | str | None = None,
    flush: str | None = None,
    metrics_port: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServerConfig:
    """Read ``path`` (if given) and build the configs; see :func:`build_config`."""
    props = read_properties(Path(path)) if path is not None else {}
    source = str(path) if path is not None else "config"
    return build_config(
        props, host=host, port=port, data_dir=data_dir, flush=flush, metrics_port=metrics_port,
        source=source, environ=environ,
    )


def _flag(option: str, value: int) -> int:
    """A command-line port, in the words of a file's values (the flag has no file)."""
    return checked(value, _PORT, lambda reason: ConfigError(
        f"invalid value {str(value)!r} for {option}: {reason}"))


def _host_names(value: str | None) -> tuple[str, ...] | None:
    """metrics.allowed.hosts: lower-case names, without a DNS root's trailing dot."""
    if value is None:
        return None
    return tuple(name for name in (part.strip().lower().rstrip(".") for part in value.split(",")) if name)


def _metrics_port(p: _Props, override: int | None) -> int | None:
    """The metrics HTTP port: ``--metrics-port`` over ``metrics.port``; None = off."""
    if override is not None:
        return _flag("--metrics-port", override)
    return p.integer("metrics.port")


def _segment_bytes(p: _Props) -> int | None:
    """Kafka's ``internal.segment.bytes`` (for tests: small segments) over log.segment.bytes."""
    internal, configured = p.integer("internal.segment.bytes"), p.integer("log.segment.bytes")
    return internal if internal is not None else configured


def _delay_levels(p: _Props, max_partitions_per_topic: object) -> tuple[int, ...] | None:
    raw = p.get("messageDelayLevel")
    if raw is None:
        return None
    try:
        levels = parse_delay_levels(raw)
    except ValueError as exc:
        raise p.error("messageDelayLevel", raw, str(exc)) from None
    # each level is a partition of the schedule topic
    limit = max_partitions_per_topic if isinstance(max_partitions_per_topic, int) else (
        _default(StorageConfig, "max_partitions_per_topic"))
    if len(levels) > limit:
        raise p.error("messageDelayLevel", raw, f"{len(levels)} levels; at most "
                      f"max.partitions.per.topic ({limit}), one schedule partition each")
    return levels


def _default(config_class: type, name: str) -> object:
    return next(f.default for f in fields(config_class) if f.name == name)


def _check_session_timeouts(p: _Props) -> None:
    low = p.integer("group.min.session.timeout.ms")
    low = _default(AdapterConfig, "group_min_session_timeout_ms") if low is None else low
    high = p.integer("group.max.session.timeout.ms")
    if high is not None and high < low:
        raise p.error("group.max.session.timeout.ms", str(high),
                      f"must be at least group.min.session.timeout.ms ({low})")


def _controller_names(p: _Props) -> frozenset[str]:
    value = p.get("controller.listener.names") or ""
    return frozenset(n.strip().upper() for n in value.split(",") if n.strip())


def _protocol_map(p: _Props) -> dict[str, str]:
    key = "listener.security.protocol.map"
    value = p.get(key) or ""
    mapping: dict[str, str] = {}
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise p.error(key, entry, "expected NAME:PROTOCOL, e.g. PLAINTEXT:PLAINTEXT")
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def _client_listeners(p: _Props) -> list[Listener]:
    """Every client listener, the primary one first; all must be PLAINTEXT, names distinct."""
    found = p.listeners("listeners", _controller_names(p))
    raw = p.get("listeners") or ""
    if not found:
        if p.get("listeners") is not None:
            raise p.error("listeners", raw, "no client listener given")
        return []
    names = [listener.name for listener in found]
    if len(set(names)) != len(names):
        raise p.error("listeners", raw, "each listener needs its own name")
    protocols = _protocol_map(p)
    resolved = []
    for listener in found:
        protocol = protocols.get(listener.name, listener.name)
        if protocol not in SECURITY_PROTOCOLS:
            raise p.error("listeners", raw, f"listener {listener.name} has no known security protocol "
                          f"({protocol}); map it in listener.security.protocol.map to one of "
                          + ", ".join(SECURITY_PROTOCOLS))
        resolved.append(Listener(listener.name, listener.host, listener.port, protocol))
    return resolved


# -------------------------------------------------------------------------------- security

# listener.name.<listener>.<key>: the listener's own value of a key (Kafka writes the listener
# name in lower case; any case is accepted here)
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_JAAS_USER = re.compile(r'\buser_([^\s=]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_SASL_MECHANISMS = SASL_MECHANISMS
_TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
# keys a listener may set for itself (besides <mechanism>.sasl.jaas.config and
# <mechanism>.connections.max.reauth.ms)
_LISTENER_KEYS = frozenset({
    "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password", "ssl.truststore.location",
    "ssl.truststore.type", "ssl.client.auth", "ssl.enabled.protocols", "sasl.enabled.mechanisms",
    "connections.max.reauth.ms",
})
_MECHANISM_KEYS = ("sasl.jaas.config", "connections.max.reauth.ms")
# Kafka's warning when the broker-wide ssl.client.auth meets a SASL_SSL listener (KIP-684)
_KIP_684_WARNING = (
    "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. Listener-prefixed "
    "configuration can be used to enable SSL client authentication for SASL_SSL listeners.")


def _is_listener_key(key: str) -> bool:
    match = _LISTENER_KEY.fullmatch(key)
    if match is None:
        return False
    rest = match[2]
    mechanism, _, mechanism_key = rest.partition(".")
    return rest in _LISTENER_KEYS or (mechanism.upper() in _SASL_MECHANISMS and mechanism_key in _MECHANISM_KEYS)


def _listener_props(p: _Props, name: str) -> _Props:
    """``p`` as listener ``name`` sees it: its ``listener.name.<name>.*`` keys in place of
    the broker-wide ones; errors name the key that was read. Kafka's own spelling (the name
    in lower case) wins over another spelling of the same key."""
    overrides: dict[str, str] = {}
    names: dict[str, str] = {}
    for key in sorted(p.props, key=lambda k: k == k.lower()):  # the lower-case spelling last
        match = _LISTENER_KEY.fullmatch(key)
        if match is not None and match[1].upper() == name:
            rest = match[2]
            mechanism, dot, tail = rest.partition(".")
            if dot and mechanism.upper() in _SASL_MECHANISMS:
                rest = f"{mechanism.lower()}.{tail}"
            overrides[rest] = p.props[key]
            names[rest] = key
    return _Props({**p.props, **overrides}, p.source, names)


def _security(p: _Props, listeners: list[Listener], warnings: list[str]) -> SecurityConfig:
    broker_users = _sasl_users(p)
    all_users = dict(broker_users or ())
    secured = []
    for listener in listeners:
        if listener.protocol == PLAINTEXT:
            continue
        settings = _listener_security(p, listener, broker_users, warnings)
        for _, users in settings.users:
            all_users.update(users)
        secured.append(settings)
    authorizer = bool((p.get("authorizer.class.name") or "").strip())
    super_users = tuple(u.strip() for u in (p.get("super.users") or "").split(";") if u.strip())
    for entry in super_users:
        if ":" not in entry.strip(":"):
            raise p.error("super.users", entry, "expected principals like User:admin, separated by ;")
    idle_ms = p.integer("connections.max.idle.ms", minimum=1) or AdapterConfig().connections_max_idle_ms
    delay_ms = p.integer("connection.failed.authentication.delay.ms")
    if delay_ms is not None and delay_ms >= idle_ms:
        raise p.error("connection.failed.authentication.delay.ms", str(delay_ms),
                      f"must be less than connections.max.idle.ms ({idle_ms}), or failed "
                      "authentications are closed as idle before they are answered")
    kwargs: dict[str, object] = {
        "sasl_mechanisms": _sasl_mechanisms(p),
        "users": tuple(sorted(all_users.items())),
        "listeners": tuple(secured),
        "authorizer": authorizer,
        "super_users": super_users,
    }
    optional = {
        "sasl_max_receive_size": p.integer("sasl.server.max.receive.size"),
        "failed_authentication_delay_ms": delay_ms,
        "connections_max_reauth_ms": p.integer("connections.max.reauth.ms"),
        "allow_everyone_if_no_acl_found": p.boolean("allow.everyone.if.no.acl.found"),
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    return SecurityConfig(**kwargs)  # type: ignore[arg-type]


def _listener_security(p: _Props, listener: Listener, broker_users: tuple[tuple[str, str], ...] | None,
                       warnings: list[str]) -> ListenerSecurity:
    """One SSL or SASL listener's settings, its own keys first (Kafka's listener prefix)."""
    lp = _listener_props(p, listener.name)
    tls = None
    if listener.protocol in (SSL, SASL_SSL):
        tls = _tls(lp)
        if listener.protocol == SASL_SSL and "ssl.client.auth" not in lp.names:
            # KIP-684: on SASL_SSL only the listener's own ssl.client.auth asks for certificates
            if tls.client_auth != "none":
                warnings.append(_KIP_684_WARNING)
            tls = replace(tls, client_auth="none")
    if listener.protocol not in (SASL_PLAINTEXT, SASL_SSL):
        return ListenerSecurity(listener.name, listener.protocol, tls=tls)
    mechanisms = _sasl_mechanisms(lp)
    users, reauth = [], []
    for mechanism in mechanisms:
        jaas_key = f"{mechanism.lower()}.sasl.jaas.config"
        if jaas_key in lp.names:
            mechanism_users = _jaas_users(lp.props[jaas_key])
        elif broker_users is not None:
            mechanism_users = broker_users
        else:
            # Kafka refuses a SASL mechanism without a JAAS configuration; so do we, rather
            # than start a listener nobody can log in to
            raise ConfigError(
                f"{p.source}: listener {listener.name} ({listener.protocol}) has no users for "
                f"{mechanism}: set listener.name.{listener.name.lower()}.{jaas_key} (or sasl.jaas.config / "
                f"sasl.users.file), or leave {mechanism} out of sasl.enabled.mechanisms")
        if mechanism == "PLAIN" and not mechanism_users:
            warnings.append(f"listener {listener.name}: the JAAS configuration of PLAIN names no user "
                            "(user_NAME=\"password\"): every PLAIN login will fail")
        users.append((mechanism, mechanism_users))
        reauth_ms = lp.integer(f"{mechanism.lower()}.connections.max.reauth.ms")
        if reauth_ms is None:
            reauth_ms = lp.integer("connections.max.reauth.ms")
        reauth.append((mechanism, reauth_ms or 0))
    return ListenerSecurity(listener.name, listener.protocol, mechanisms, tuple(users), tls, tuple(reauth))


def _sasl_mechanisms(p: _Props) -> tuple[str, ...]:
    raw = p.get("sasl.enabled.mechanisms")
    if raw is None:
        return _SASL_MECHANISMS
    key = p.names.get("sasl.enabled.mechanisms", "sasl.enabled.mechanisms")
    mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    for mechanism in mechanisms:
        if mechanism not in _SASL_MECHANISMS:
            raise p.error(key, raw, f"{mechanism} is not supported; use " + ", ".join(_SASL_MECHANISMS))
    if not mechanisms:
        raise p.error(key, raw, "no mechanism given")
    return mechanisms


def _jaas_users(jaas: str) -> tuple[tuple[str, str], ...]:
    """The ``user_NAME="password"`` entries of a JAAS configuration (PlainLoginModule's form)."""
    return tuple(sorted((name, re.sub(r"\\(.)", r"\1", password)) for name, password in _JAAS_USER.findall(jaas)))


def _sasl_users(p: _Props) -> tuple[tuple[str, str], ...] | None:
    """The broker-wide users (sasl.jaas.config and sasl.users.file); None when neither is set."""
    jaas, users_file = p.get("sasl.jaas.config"), p.get("sasl.users.file")
    if jaas is None and users_file is None:
        return None
    users = dict(_jaas_users(jaas or ""))
    if users_file is not None:
        try:
            users.update(read_properties(Path(users_file).expanduser()))
        except OSError as exc:
            raise p.error("sasl.users.file", users_file, f"cannot be read ({exc.strerror})") from None
    return tuple(sorted(users.items()))


def _tls(p: _Props) -> TlsConfig:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = p.get(key)
        if kind is not None and kind.upper() != "PEM":
            raise p.error(key, kind, "only PEM files are supported; convert a JKS or PKCS12 store "
                          "with keytool / openssl")
    keystore = p.get("ssl.keystore.location")
    if not keystore:
        raise p.error("ssl.keystore.location", keystore or "", "a TLS listener needs a PEM file "
                      "with its certificate chain and private key")
    protocols = [v.strip() for v in (p.get("ssl.enabled.protocols") or ",".join(_TLS_VERSIONS)).split(",")]
    for version in protocols:
        if version not in _TLS_VERSIONS:
            raise p.error("ssl.enabled.protocols", version, "use TLSv1.2 and/or TLSv1.3")
    truststore = p.get("ssl.truststore.location")
    client_auth = p.choice("ssl.client.auth", ("none", "requested", "required")) or "none"
    if client_auth != "none" and not truststore:
        raise p.error("ssl.client.auth", client_auth, "needs ssl.truststore.location to verify certificates")
    return TlsConfig(
        keystore_location=str(Path(keystore).expanduser()),
        key_password=p.get("ssl.key.password"),
        truststore_location=str(Path(truststore).expanduser()) if truststore else None,
        client_auth=client_auth,
        min_version=min(protocols),
    )


def _advertised_listeners(p: _Props, listeners: list[Listener]) -> dict[str, Listener]:
    """Advertised address by listener name (names absent from the result advertise the
    bound address)."""
    key = "advertised.listeners"
    found = p.listeners(key, _controller_names(p))
    raw = p.get(key) or ""
    expected = [listener.name for listener in listeners] or ["PLAINTEXT"]
    advertised: dict[str, Listener] = {}
    for entry in found:
        if entry.name not in expected:
            reason = f"listener name {entry.name} does not match listeners ({', '.join(expected)})"
            raise p.error(key, raw, reason)
        if entry.name in advertised:
            raise p.error(key, raw, f"listener {entry.name} is advertised twice")
        if entry.host in ("0.0.0.0", "::"):
            raise p.error(key, raw, "cannot advertise the non-routable address " + entry.host)
        if entry.port == 0:
            raise p.error(key, raw, "cannot advertise port 0")
        advertised[entry.name] = entry
    return advertised


def _node_id(p: _Props) -> int | None:
    node_id = p.integer("node.id")
    broker_id = p.integer("broker.id")
    if node_id is not None and broker_id is not None and node_id != broker_id:
        raise p.error("broker.id", str(broker_id), f"differs from node.id={node_id}")
    return node_id if node_id is not None else broker_id


def _data_dir(
    p: _Props, override: Path | str | None, environ: Mapping[str, str] | None, warnings: list[str]
) -> Path:
    if override is not None:
        if not str(override).strip():
            raise ConfigError("invalid value '' for --data-dir: must not be empty")
        return Path(override).expanduser().absolute()
    for key in ("log.dirs", "log.dir"):
        value = p.get(key)
        if value is None:
            continue
        dirs = [d.strip() for d in value.split(",") if d.strip()]
        if not dirs:
            raise p.error(key, value, "no directory given")
        if len(dirs) > 1:
            ignored = ", ".join(dirs[1:])
            warnings.append(f"{key}: using only {dirs[0]}; ignoring {ignored}")
        return Path(dirs[0]).expanduser().absolute()
    return default_data_dir(environ).absolute()


def _flush_policy(p: _Props, override: str | None) -> str:
    if override is not None:
        if override not in ("async", "sync"):
            raise ConfigError(f"invalid value {override!r} for --flush: expected async or sync")
        return override
    policy = p.get("flush.policy")
    if policy is not None:
        policy = policy.lower()
        if policy not in ("async", "sync"):
            raise p.error("flush.policy", p.get("flush.policy") or "", "expected async or sync")
    disk_type = p.get("flushDiskType")
    if disk_type is not None:
        mapped = _FLUSH_DISK_TYPES.get(disk_type.upper())
        if mapped is None:
            raise p.error("flushDiskType", disk_type, "expected ASYNC_FLUSH or SYNC_FLUSH")
        if policy is not None and policy != mapped:
            raise p.error("flushDiskType", disk_type, f"contradicts flush.policy={policy}")
        policy = mapped
    return policy or "async"


def _retention_ms(p: _Props) -> tuple[bool, int | None]:
    """Kafka's precedence: ms, then minutes, then hours; (False, None) when none is given."""
    for key, scale in (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MS_PER_MINUTE),
        ("log.retention.hours", _MS_PER_HOUR),
    ):
        given, value = p.limit(key)
        if given:
            return True, (None if value is None else value * scale)
    return False, None
