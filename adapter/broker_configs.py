"""Dynamic broker configs (Kafka's KIP-226): broker settings changed at run time with
IncrementalAlterConfigs / AlterConfigs on the BROKER resource, kept in the data directory and
shown by DescribeConfigs with where each value comes from.

Two levels, as in Kafka: this node's own overrides (resource name = its node id) and the
cluster-wide defaults (resource name ""). Precedence, highest first: DYNAMIC_BROKER_CONFIG
(this node's), DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG (server.properties),
DEFAULT_CONFIG. The configs in force are always ``properties.rebuild(static, default + node)``:
every value is checked by exactly the code that checks it at start, so a value accepted at
run time is one a restart accepts too.

Which keys may change (Kafka's DynamicBrokerConfig, limited to what means something here):

- cluster-wide (either level): log.retention.ms / .bytes, log.flush.interval.ms,
  message.max.bytes, compression.type, max.connections, max.connections.per.ip and the
  RocketMQ keys transactionCheckInterval, transactionTimeOut, transactionCheckMax,
  maxReconsumeTimes;
- per broker only (Kafka's PerBrokerConfigs): sasl.jaas.config, sasl.enabled.mechanisms,
  ssl.client.auth, ssl.enabled.protocols, and a listener's own ``listener.name.L.KEY`` of the
  ssl.* and sasl.* keys (``listener.name.L.MECH.sasl.jaas.config``). The keystore and
  truststore keys only with a listener prefix, as in Kafka.

Every other key the broker knows is read-only (Kafka refuses it too, or, for log.segment.bytes,
this broker's one commitlog fixes it at start). Kafka stores keys it does not know as custom
configs for plug-ins; there are no plug-ins here, so an unknown key is refused instead: a
misspelt key must not be stored and silently ignored.

Refusals (ConfigRefused) carry Kafka's code and text: ConfigAdminManager turns every broker
validation failure into INVALID_REQUEST.

The overrides file ``broker_configs.json`` is replaced atomically with its previous copy kept
(storage.files). It holds passwords in clear text, like server.properties (Kafka encrypts
them with password.encoder.secret). An override a restart no longer accepts (the static file
changed under it) is logged and ignored, as Kafka does.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.files import read_json_with_fallback, write_json_atomically

from .config import AdapterConfig
from .properties import KNOWN_KEYS, ConfigError, ServerConfig, rebuild

log = logging.getLogger(__name__)

FILE_NAME = "broker_configs.json"
DEFAULT_RESOURCE = ""  # the cluster-wide defaults' resource name

# DescribeConfigs config sources
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

CLUSTER_WIDE = frozenset({
    "log.retention.ms", "log.retention.bytes", "log.flush.interval.ms", "message.max.bytes",
    "compression.type", "max.connections", "max.connections.per.ip",
    "transactionCheckInterval", "transactionTimeOut", "transactionCheckMax", "maxReconsumeTimes",
})
PER_BROKER = frozenset({"sasl.jaas.config", "sasl.enabled.mechanisms", "ssl.client.auth", "ssl.enabled.protocols"})
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only under a listener prefix
LISTENER_ONLY = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})
# what listener.name.L.<key> may change (L's own value of the key): Kafka's dynamic listener
# keys that this broker reads (properties._LISTENER_KEYS)
_LISTENER_DYNAMIC = frozenset({
    "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password", "ssl.truststore.location",
    "ssl.truststore.type", "ssl.client.auth", "ssl.enabled.protocols", "sasl.enabled.mechanisms",
})
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_MECHANISMS = ("plain", "scram-sha-256", "scram-sha-512")
_LIST_KEYS = frozenset({"sasl.enabled.mechanisms", "ssl.enabled.protocols"})
# Kafka's PASSWORD-typed keys: described with a null value
_SENSITIVE = ("ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "sasl.jaas.config",
              "ssl.keystore.key")
# Kafka's synonyms of a broker key, highest precedence first
_SYNONYMS = {"log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours")}

CLUSTER, BROKER, READ_ONLY, PREFIX_ONLY, UNKNOWN = "cluster", "broker", "read-only", "prefix-only", "unknown"


class ConfigRefused(Exception):
    """A change Kafka refuses: its error code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def update_mode(name: str) -> str:
    """CLUSTER or BROKER (dynamic, at either level or per broker only), READ_ONLY,
    PREFIX_ONLY (dynamic only with a listener prefix) or UNKNOWN."""
    if name in CLUSTER_WIDE:
        return CLUSTER
    if name in PER_BROKER:
        return BROKER
    if name in LISTENER_ONLY:
        return PREFIX_ONLY
    match = _LISTENER_KEY.fullmatch(name)
    if match is not None:
        rest = match[2]
        mechanism, _, key = rest.partition(".")
        if rest in _LISTENER_DYNAMIC or (mechanism.lower() in _MECHANISMS and key == "sasl.jaas.config"):
            return BROKER
        if rest in KNOWN_KEYS or (mechanism.lower() in _MECHANISMS and key == "connections.max.reauth.ms"):
            return READ_ONLY
        return UNKNOWN
    return READ_ONLY if name in KNOWN_KEYS else UNKNOWN


def is_dynamic(name: str) -> bool:
    return update_mode(name) in (CLUSTER, BROKER)


def is_sensitive(name: str) -> bool:
    return name.endswith(_SENSITIVE)


def is_list(name: str) -> bool:
    return name.rpartition(".name.")[2].split(".", 1)[-1] in _LIST_KEYS or name in _LIST_KEYS


def canonical(name: str) -> str:
    """A listener key in Kafka's spelling (listener and mechanism names in lower case), so
    that one key has one override whatever case the client wrote it in."""
    match = _LISTENER_KEY.fullmatch(name)
    if match is None:
        return name
    mechanism, dot, key = match[2].partition(".")
    if dot and mechanism.lower() in _MECHANISMS:
        return f"listener.name.{match[1].lower()}.{mechanism.lower()}.{key}"
    return f"listener.name.{match[1].lower()}.{match[2]}"


def _names(names) -> str:
    """A set of names as Kafka's messages print a Scala Set."""
    return "Set(" + ", ".join(sorted(names)) + ")"


def check_resource_name(name: str, node_id: int) -> None:
    """Kafka's ConfigAdminManager.validateResourceNameIsCurrentNodeId ("" is the default)."""
    if name == DEFAULT_RESOURCE:
        return
    try:
        number = int(name)
    except ValueError:
        raise ConfigRefused(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if number != node_id:
        raise ConfigRefused(ErrorCode.invalid_request,
                            f"Unexpected broker id, expected {node_id}, but received {name}")


def _check_names(overrides: Mapping[str, str]) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs, less the value checks (``rebuild``'s)."""
    modes = {name: update_mode(name) for name in overrides}
    read_only = [n for n, m in modes.items() if m == READ_ONLY]
    if read_only:
        raise ConfigRefused(ErrorCode.invalid_request, f"Cannot update these configs dynamically: {_names(read_only)}")
    unknown = [n for n, m in modes.items() if m == UNKNOWN]
    if unknown:
        raise ConfigRefused(ErrorCode.invalid_request, f"Unknown broker configs: {_names(unknown)}")
    prefix_only = [n for n, m in modes.items() if m == PREFIX_ONLY]
    if prefix_only:
        raise ConfigRefused(ErrorCode.invalid_request, "These security configs can be dynamically updated only "
                            f"per-listener using the listener prefix: {_names(prefix_only)}")


def _check_level(overrides: Mapping[str, str], per_broker: bool) -> None:
    per_broker_names = [n for n in overrides if update_mode(n) == BROKER]
    if not per_broker and per_broker_names:
        raise ConfigRefused(ErrorCode.invalid_request, "Cannot update these configs at default cluster level, "
                            f"broker id must be specified: {_names(per_broker_names)}")


def _value_error(exc: ConfigError) -> ConfigRefused:
    if exc.key is not None:
        return ConfigRefused(ErrorCode.invalid_request,
                             f"Invalid value {exc.value} for configuration {exc.key}: {exc.reason}")
    return ConfigRefused(ErrorCode.invalid_request, str(exc))


# --------------------------------------------------------------------------- what DescribeConfigs shows

Getter = Callable[[ServerConfig], str]


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    kind: str  # Kafka's ConfigType name
    value: Getter
    doc: str


def _limit(value: int | None) -> str:
    return str(-1 if value is None else value)


_DEFS = [
    BrokerConfigDef("node.id", "INT", lambda c: str(c.adapter.node_id), "This broker's id."),
    BrokerConfigDef("listeners", "LIST", lambda c: f"{c.adapter.listener_name}://{c.adapter.host}:{c.adapter.port}",
                    "Where the broker listens."),
    BrokerConfigDef("advertised.listeners", "LIST", lambda c: "", "What clients are told to connect to."),
    BrokerConfigDef("log.dirs", "LIST", lambda c: str(c.storage.data_dir), "The data directory."),
    BrokerConfigDef("num.partitions", "INT", lambda c: str(c.adapter.num_partitions), "Partitions of auto-created topics."),
    BrokerConfigDef("auto.create.topics.enable", "BOOLEAN", lambda c: str(c.adapter.auto_create_topics).lower(),
                    "Metadata requests create missing topics."),
    BrokerConfigDef("message.max.bytes", "INT", lambda c: str(c.adapter.message_max_bytes),
                    "Largest record batch accepted (topic config max.message.bytes)."),
    BrokerConfigDef("compression.type", "STRING", lambda c: c.adapter.compression_type,
                    "Default codec of stored batches (topic config compression.type)."),
    BrokerConfigDef("socket.request.max.bytes", "INT", lambda c: str(c.adapter.socket_request_max_bytes),
                    "Largest request frame accepted."),
    BrokerConfigDef("connections.max.idle.ms", "LONG", lambda c: str(c.adapter.connections_max_idle_ms),
                    "A connection idle this long is closed."),
    BrokerConfigDef("max.connections", "INT", lambda c: str(c.adapter.max_connections),
                    "Connections of all listeners together; one more is closed as it is accepted."),
    BrokerConfigDef("max.connections.per.ip", "INT", lambda c: str(c.adapter.max_connections_per_ip),
                    "Connections from one client address; one more is closed as it is accepted."),
    BrokerConfigDef("log.segment.bytes", "INT", lambda c: str(c.storage.segment_bytes), "Commitlog segment size."),
    BrokerConfigDef("log.retention.ms", "LONG", lambda c: _limit(c.storage.retention_ms),
                    "Segments older than this are deleted (-1: never)."),
    BrokerConfigDef("log.retention.bytes", "LONG", lambda c: _limit(c.storage.retention_bytes),
                    "Oldest segments are deleted above this size (-1: no limit)."),
    BrokerConfigDef("log.retention.check.interval.ms", "LONG", lambda c: str(c.storage.retention_check_interval_ms),
                    "How often retention runs."),
    BrokerConfigDef("flush.policy", "STRING", lambda c: c.storage.flush,
                    "async: periodic fsync; sync: acks wait for fsync (group commit)."),
    BrokerConfigDef("log.flush.interval.ms", "LONG", lambda c: str(c.storage.flush_interval_ms),
                    "Period of the async fsync and of checkpoints."),
    BrokerConfigDef("sasl.enabled.mechanisms", "LIST", lambda c: ",".join(c.adapter.security.sasl_mechanisms),
                    "SASL mechanisms of listeners without their own."),
    BrokerConfigDef("maxReconsumeTimes", "INT", lambda c: str(c.semantics.max_reconsume_times),
                    "Retries before a nacked record goes to rmq_dlq.<group> (RocketMQ)."),
    BrokerConfigDef("transactionCheckInterval", "LONG", lambda c: str(c.semantics.transaction_check_interval_ms),
                    "ms between passes of the half-message check service (RocketMQ)."),
    BrokerConfigDef("transactionTimeOut", "LONG", lambda c: str(c.semantics.transaction_timeout_ms),
                    "ms a half message waits before its producer group is asked (RocketMQ)."),
    BrokerConfigDef("transactionCheckMax", "INT", lambda c: str(c.semantics.transaction_check_max),
                    "Checks before an undecided half message is rolled back (RocketMQ)."),
]
DEFS = {d.name: d for d in _DEFS}


@dataclass(frozen=True, slots=True)
class Described:
    """One DescribeConfigs entry of a broker resource."""

    name: str
    value: str | None  # None for a sensitive config
    source: int
    read_only: bool
    sensitive: bool
    kind: str
    doc: str
    synonyms: list[tuple[str, str | None, int]]


# --------------------------------------------------------------------------- the overrides

Prepare = Callable[[ServerConfig], Callable[[], None]]


class BrokerConfigs:
    """The static configs, the dynamic overrides at both levels and the configs in force
    (``current``: frozen objects, replaced wholesale by a change).

    ``prepare(new)`` (set by the broker) checks what only the running broker can check, such
    as that a new keystore loads, and returns the function that swaps ``new`` in; it is
    called before anything is stored, so a refused change costs nothing.
    """

    def __init__(self, static: ServerConfig, prepare: Prepare | None = None) -> None:
        self.static = static
        self.node_id = static.adapter.node_id
        self._path = Path(static.storage.data_dir) / FILE_NAME
        self.prepare: Prepare = prepare or (lambda new: lambda: None)
        stored = read_json_with_fallback(self._path, _parse) or ({}, {})
        self.defaults, self.broker = stored[0], stored[1].get(str(self.node_id), {})
        self._others = {k: v for k, v in stored[1].items() if k != str(self.node_id)}
        self.current = self._start_config()

    def _start_config(self) -> ServerConfig:
        """The configs to start with: the stored overrides a rebuild accepts (Kafka logs and
        drops the others)."""
        for level in (self.defaults, self.broker):
            for name in [n for n in level if not is_dynamic(n)]:
                log.error("dynamic broker config %s is not dynamic: ignored", name)
                del level[name]
        for name in [n for n in self.defaults if update_mode(n) == BROKER]:
            log.error("per-broker config %s at the cluster default level: ignored", name)
            del self.defaults[name]
        while True:
            try:
                return rebuild(self.static, {**self.defaults, **self.broker}, FILE_NAME)
            except ConfigError as exc:
                level = next((lv for lv in (self.broker, self.defaults) if exc.key in lv), None)
                if level is None:
                    raise
                log.error("dynamic broker config ignored: %s", exc)
                del level[exc.key]

    def overrides(self, resource_name: str) -> dict[str, str]:
        return dict(self.defaults if resource_name == DEFAULT_RESOURCE else self.broker)

    def alter(self, resource_name: str, overrides: Mapping[str, str], validate_only: bool) -> None:
        """Make ``overrides`` the resource's whole set of overrides: checked, then (unless
        ``validate_only``) stored and applied. ConfigRefused when Kafka would refuse it."""
        check_resource_name(resource_name, self.node_id)
        overrides = {canonical(k): v for k, v in overrides.items()}
        per_broker = resource_name != DEFAULT_RESOURCE
        _check_names(overrides)
        defaults, broker = (self.defaults, overrides) if per_broker else (overrides, self.broker)
        try:
            new = rebuild(self.static, {**defaults, **broker}, "dynamic broker config")
        except ConfigError as exc:
            raise _value_error(exc) from None
        _check_level(overrides, per_broker)
        try:
            swap = self.prepare(new)
        except Exception as exc:  # what the broker could not load: a keystore, say
            raise ConfigRefused(ErrorCode.invalid_request, f"Invalid dynamic configuration: {exc}") from None
        if validate_only or (defaults, broker) == (self.defaults, self.broker):
            return
        self._save(defaults, broker)
        self.defaults, self.broker, self.current = dict(defaults), dict(broker), new
        swap()
        log.info("dynamic broker configs of %s now: %s", repr(resource_name) if per_broker else "the cluster default",
                 ", ".join(f"{k}={'[hidden]' if is_sensitive(k) else v}" for k, v in sorted(overrides.items()))
                 or "none")

    def _save(self, defaults: dict[str, str], broker: dict[str, str]) -> None:
        brokers = {**self._others, str(self.node_id): broker} if broker else dict(self._others)
        write_json_atomically(self._path, {"version": 1, "default": defaults, "brokers": brokers}, keep_previous=True)

    # -- DescribeConfigs ------------------------------------------------------------------

    def synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        """(name, value, source) of every level that sets ``name`` or a synonym of it, in
        Kafka's order of precedence; the built-in default last."""
        names = _SYNONYMS.get(name, (name,))
        hide = is_sensitive(name)
        out: list[tuple[str, str | None, int]] = []
        for level, source in ((self.broker, DYNAMIC_BROKER_CONFIG), (self.defaults, DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self.static.static_props, STATIC_BROKER_CONFIG)):
            out += [(n, None if hide else level[n].strip(), source) for n in names if n in level]
        spec = DEFS.get(name)
        if spec is not None and name not in ("listeners", "advertised.listeners", "log.dirs", "node.id"):
            out.append((name, spec.value(_defaults(self.static)), DEFAULT_CONFIG))
        return out

    def source(self, name: str) -> int:
        found = self.synonyms(name)
        return found[0][2] if found else DEFAULT_CONFIG

    def describe(self, resource_name: str, runtime: Mapping[str, str]) -> list[Described]:
        """The entries of resource ``resource_name``: for the default resource, its overrides
        only (as Kafka); for this node, every setting (``runtime``: values only the running
        broker knows, such as its bound listeners) and every override."""
        if resource_name == DEFAULT_RESOURCE:
            return [Described(n, None if is_sensitive(n) else v, DYNAMIC_DEFAULT_BROKER_CONFIG, False,
                              is_sensitive(n), _kind(n), _doc(n),
                              [(n, None if is_sensitive(n) else v, DYNAMIC_DEFAULT_BROKER_CONFIG)])
                    for n, v in sorted(self.defaults.items())]
        out = []
        for spec in _DEFS:
            value = runtime.get(spec.name) or spec.value(self.current)
            synonyms = self.synonyms(spec.name)
            out.append(Described(spec.name, value, synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                                 not is_dynamic(spec.name), False, spec.kind, spec.doc, synonyms))
        for name in sorted(({**self.defaults, **self.broker}).keys() - DEFS.keys()):
            synonyms = self.synonyms(name)
            sensitive = is_sensitive(name)
            out.append(Described(name, None if sensitive else synonyms[0][1], synonyms[0][2], False, sensitive,
                                 _kind(name), _doc(name), synonyms))
        return out


def _kind(name: str) -> str:
    if name in DEFS:
        return DEFS[name].kind
    return "PASSWORD" if is_sensitive(name) else ("LIST" if is_list(name) else "STRING")


def _doc(name: str) -> str:
    spec = DEFS.get(name)
    return spec.doc if spec is not None else "A listener's own value of a security setting (listener.name.L.KEY)."


def _defaults(static: ServerConfig) -> ServerConfig:
    return ServerConfig(AdapterConfig(), StorageConfig(static.storage.data_dir), SemanticsConfig())


def _parse(data: dict) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    if data.get("version") != 1:
        raise ValueError(f"unknown version {data.get('version')!r}")
    defaults = {str(k): str(v) for k, v in data["default"].items()}
    brokers = {str(b): {str(k): str(v) for k, v in c.items()} for b, c in data["brokers"].items()}
    return defaults, brokers
