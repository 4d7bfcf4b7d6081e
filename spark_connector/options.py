"""Option parsing and validation, with the built-in Kafka source's names and rules.

Spark hands a Python data source its options with lower-cased keys; every lookup here is
lower-case too, so ``startingOffsets`` and ``startingoffsets`` are the same option, as with
the built-in source. Everything is validated up front (``load()`` time for reads), and
every problem raises :class:`~rmqkafka.spark_connector.errors.KafkaOptionError` naming the option.

Parsed options are frozen dataclasses of plain values, so they pickle to the executors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import KafkaOptionError, UnsupportedOptionError
from .offsets import EARLIEST, LATEST, OffsetSpec, TopicPartition, offsets_from_json
from .views import ViewSpec

# Client settings Spark refuses, with Spark's reasons (KafkaSourceProvider).
_REFUSED_CONSUMER = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' "
    "instead",
    "key.deserializer": "keys are always read as bytes; deserialise with DataFrame operations",
    "value.deserializer": "values are always read as bytes; deserialise with DataFrame "
    "operations",
    "enable.auto.commit": "the source does not commit offsets to Kafka; Spark tracks them in "
    "the checkpoint",
    "interceptor.classes": "interceptors are a Java client feature",
}
_REFUSED_PRODUCER = {
    "key.serializer": "keys are written as bytes; a string key column is written as UTF-8",
    "value.serializer": "values are written as bytes; a string value column is written as "
    "UTF-8",
    "interceptor.classes": "interceptors are a Java client feature",
}
_ENDING_OPTIONS = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
_NOT_IMPLEMENTED = {
    "minoffsetspertrigger": "minOffsetsPerTrigger (with maxTriggerDelay) is not implemented "
    "by the rmqkafka source; use maxOffsetsPerTrigger or a processing-time trigger",
    "maxtriggerdelay": "maxTriggerDelay only applies with minOffsetsPerTrigger, which the "
    "rmqkafka source does not implement",
}
_JAAS = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ClientOptions:
    """What every client needs: where the brokers are and the ``kafka.*`` passthrough."""

    bootstrap_servers: str
    kafka: dict[str, str] = field(default_factory=dict)  # librdkafka names, no "kafka." prefix
    request_timeout_ms: int = 30_000  # driver metadata / ListOffsets calls
    connect_timeout_ms: int = 5_000  # reachability probe of kafka.bootstrap.servers


@dataclass(frozen=True)
class ReadOptions:
    """A validated read (batch or streaming)."""

    client: ClientOptions
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: OffsetSpec
    ending: OffsetSpec | None  # None for streaming
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: error | latest
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    group_id: str | None = None  # kafka.group.id, else groupIdPrefix + a random suffix
    group_id_prefix: str = "spark-kafka-source"
    poll_timeout_ms: int = 120_000  # kafkaConsumer.pollTimeoutMs: an executor poll stall
    view: ViewSpec | None = None  # tags / filter: read through broker-side views (views.py)

    def describe_subscription(self) -> str:
        if self.subscribe is not None:
            return f"subscribe={','.join(self.subscribe)}"
        if self.subscribe_pattern is not None:
            return f"subscribePattern={self.subscribe_pattern}"
        assert self.assign is not None
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assign)


@dataclass(frozen=True)
class WriteOptions:
    """A validated write: ``topic`` (may be None when the data has a topic column)."""

    client: ClientOptions
    topic: str | None


def include_headers(options: Mapping[str, str]) -> bool:
    """The ``includeHeaders`` option (decides the schema before anything else is parsed)."""
    return _bool(_lower(options), "includeheaders", False, "includeHeaders")


def parse_read_options(options: Mapping[str, str], *, streaming: bool | None) -> ReadOptions:
    """Validate the options of ``spark.read`` (``streaming=False``) or ``readStream`` (True).

    ``streaming=None`` checks only what both modes share (``DataSource.schema()`` runs at
    ``load()`` and does not know the mode); the mode's own rules run when Spark asks for
    the reader.
    """
    opts = _lower(options)
    view = _view(opts)
    for name, reason in _NOT_IMPLEMENTED.items():
        if name in opts:
            raise UnsupportedOptionError(reason)
    client = _client_options(opts, _REFUSED_CONSUMER, "reads")
    subscribe, pattern, assign = _subscription(opts)

    if streaming is None:
        starting = _starting(opts, default="earliest")
        ending = _ending(opts)
    elif streaming:
        given = [o for o in _ENDING_OPTIONS if o in opts]
        if given:
            raise KafkaOptionError(
                f"option '{_spark_name(given[0])}' is not valid in streaming queries: a "
                "stream has no end (use a batch read, spark.read, to read up to an offset)"
            )
        starting = _starting(opts, default="latest")
        ending = None
    else:
        starting = _starting(opts, default="earliest")
        ending = _ending(opts)
        if starting.kind == "latest":
            raise KafkaOptionError(
                "startingOffsets='latest' is not valid for batch queries: the batch would "
                "always be empty (use 'earliest', JSON offsets or startingTimestamp)"
            )
        for tp, offset in starting.per_partition.items() if starting.kind == "offsets" else ():
            if offset == LATEST:
                raise KafkaOptionError(
                    f"startingOffsets for {tp[0]}-{tp[1]} is -1 (latest), which is not valid "
                    "for batch queries"
                )
        if ending.kind == "earliest":
            raise KafkaOptionError(
                "endingOffsets='earliest' is not valid for batch queries (use 'latest' or "
                "JSON offsets)"
            )
        for tp, offset in ending.per_partition.items() if ending.kind == "offsets" else ():
            if offset == EARLIEST:
                raise KafkaOptionError(
                    f"endingOffsets for {tp[0]}-{tp[1]} is -2 (earliest), which is not valid "
                    "for batch queries"
                )

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaOptionError(
            "startingOffsetsByTimestampStrategy must be 'error' or 'latest', got "
            f"{opts['startingoffsetsbytimestampstrategy']!r}"
        )
    return ReadOptions(
        client=client,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_partitions=_positive(opts, "minpartitions", "minPartitions"),
        max_records_per_partition=_positive(
            opts, "maxrecordsperpartition", "maxRecordsPerPartition"
        ),
        include_headers=_bool(opts, "includeheaders", False, "includeHeaders"),
        fail_on_data_loss=_bool(opts, "failondataloss", True, "failOnDataLoss"),
        group_id=client.kafka.get("group.id"),
        group_id_prefix=opts.get(
            "groupidprefix", "spark-kafka-relation" if streaming is False else "spark-kafka-source"
        ),
        poll_timeout_ms=_positive(opts, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
        or 120_000,
        view=view,
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the options of ``df.write`` / ``writeStream``."""
    opts = _lower(options)
    client = _client_options(opts, _REFUSED_PRODUCER, "writes")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise KafkaOptionError("option 'topic' is empty")
    return WriteOptions(client=client, topic=topic.strip() if topic else None)


# --- helpers ---------------------------------------------------------------------------


def _view(opts: dict[str, str]) -> ViewSpec | None:
    """``tags`` (a RocketMQ tag expression) or ``filter`` (SQL92 over headers), not both;
    the broker parses them when the view is created."""
    given = [(kind, name) for kind, name in (("tags", "tags"), ("sql", "filter")) if name in opts]
    if len(given) > 1:
        raise KafkaOptionError("options 'tags' and 'filter' exclude each other: give one")
    if not given:
        return None
    kind, name = given[0]
    expression = opts[name].strip()
    if not expression:
        raise KafkaOptionError(f"option '{name}' is empty")
    return ViewSpec(kind, expression)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items() if v is not None}


_SPARK_NAMES = {
    "endingoffsets": "endingOffsets",
    "endingtimestamp": "endingTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
}


def _spark_name(lower: str) -> str:
    return _SPARK_NAMES.get(lower, lower)


def _client_options(
    opts: dict[str, str], refused: dict[str, str], label: str
) -> ClientOptions:
    servers = opts.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise KafkaOptionError(
            "option 'kafka.bootstrap.servers' must be specified (host:port[,host:port...])"
        )
    for address in servers.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit():
            raise KafkaOptionError(
                f"kafka.bootstrap.servers: {address.strip()!r} is not host:port"
            )
    kafka: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka.") :]
        if name in refused:
            raise KafkaOptionError(
                f"Kafka option 'kafka.{name}' is not supported for {label}: {refused[name]}"
            )
        if name == "sasl.jaas.config":  # Java clients' form -> librdkafka's two settings
            found = dict(_JAAS.findall(value))
            if "username" in found:
                kafka["sasl.username"] = found["username"]
            if "password" in found:
                kafka["sasl.password"] = found["password"]
            continue
        kafka[name] = value
    return ClientOptions(
        bootstrap_servers=servers,
        kafka=kafka,
        request_timeout_ms=_positive(opts, "requesttimeoutms", "requestTimeoutMs") or 30_000,
        connect_timeout_ms=_positive(opts, "connecttimeoutms", "connectTimeoutMs") or 5_000,
    )


def _subscription(
    opts: dict[str, str],
) -> tuple[tuple[str, ...] | None, str | None, tuple[TopicPartition, ...] | None]:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in opts]
    if len(given) != 1:
        shown = ", ".join(
            {"subscribe": "subscribe", "subscribepattern": "subscribePattern", "assign": "assign"}[
                g
            ]
            for g in given
        )
        raise KafkaOptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be "
            f"specified, got {len(given)}" + (f" ({shown})" if given else "")
        )
    kind = given[0]
    raw = opts[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise KafkaOptionError("option 'subscribe' lists no topics (comma-separated names)")
        return topics, None, None
    if kind == "subscribepattern":
        if not raw.strip():
            raise KafkaOptionError("option 'subscribePattern' is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise KafkaOptionError(
                f"option 'subscribePattern' is not a valid regular expression ({exc}): {raw!r}"
            ) from None
        return None, raw.strip(), None
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise KafkaOptionError(
            f"option 'assign' is not valid JSON ({exc}); expected e.g. "
            f'{{"topicA": [0, 1], "topicB": [2]}}, got {raw!r}'
        ) from None
    if not isinstance(value, dict) or not all(
        isinstance(ps, list) and all(isinstance(p, int) and not isinstance(p, bool) for p in ps)
        for ps in value.values()
    ):
        raise KafkaOptionError(
            'option \'assign\' must be a JSON object of topic -> partition list, e.g. '
            f'{{"topicA": [0, 1], "topicB": [2]}}, got {raw!r}'
        )
    pairs = tuple(sorted({(t, p) for t, ps in value.items() for p in ps}))
    if not pairs:
        raise KafkaOptionError(f"option 'assign' names no topic-partitions: {raw!r}")
    return None, None, pairs


def _starting(opts: dict[str, str], default: str) -> OffsetSpec:
    if "startingtimestamp" in opts:
        return OffsetSpec("timestamp", timestamp=_timestamp(opts, "startingtimestamp",
                                                            "startingTimestamp"))
    if "startingoffsetsbytimestamp" in opts:
        return _by_timestamp(opts["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
    return _offset_word_or_json(opts.get("startingoffsets", default), "startingOffsets")


def _ending(opts: dict[str, str]) -> OffsetSpec:
    if "endingtimestamp" in opts:
        return OffsetSpec("timestamp", timestamp=_timestamp(opts, "endingtimestamp",
                                                            "endingTimestamp"))
    if "endingoffsetsbytimestamp" in opts:
        return _by_timestamp(opts["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp")
    return _offset_word_or_json(opts.get("endingoffsets", "latest"), "endingOffsets")


def _offset_word_or_json(raw: str, name: str) -> OffsetSpec:
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word)
    if not word.startswith("{"):
        raise KafkaOptionError(
            f"option '{name}' must be 'earliest', 'latest' or JSON like "
            f'{{"topicA": {{"0": 23, "1": -1}}}} (-2 = earliest, -1 = latest), got {raw!r}'
        )
    try:
        offsets = offsets_from_json(raw, f"option '{name}'")
    except ValueError as exc:
        raise KafkaOptionError(str(exc)) from None
    for (topic, partition), offset in offsets.items():
        if offset < EARLIEST:
            raise KafkaOptionError(
                f"option '{name}': offset {offset} for {topic}-{partition} is invalid (offsets "
                "are >= 0, or -2 = earliest, -1 = latest)"
            )
    return OffsetSpec.of_map("offsets", offsets)


def _by_timestamp(raw: str, name: str) -> OffsetSpec:
    try:
        stamps = offsets_from_json(raw, f"option '{name}'")
    except ValueError as exc:
        raise KafkaOptionError(str(exc)) from None
    for (topic, partition), stamp in stamps.items():
        if stamp < 0:
            raise KafkaOptionError(
                f"option '{name}': timestamp {stamp} for {topic}-{partition} is negative"
            )
    return OffsetSpec.of_map("timestamps", stamps)


def _timestamp(opts: dict[str, str], key: str, name: str) -> int:
    raw = opts[key].strip()
    if not raw.isdigit():
        raise KafkaOptionError(
            f"option '{name}' must be a timestamp in milliseconds since the epoch, got {raw!r}"
        )
    return int(raw)


def _positive(opts: dict[str, str], key: str, name: str) -> int | None:
    if key not in opts:
        return None
    raw = opts[key].strip()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise KafkaOptionError(f"option '{name}' must be a positive integer, got {raw!r}")
    return value


def _bool(opts: dict[str, str], key: str, default: bool, name: str) -> bool:
    if key not in opts:
        return default
    raw = opts[key].strip().lower()
    if raw not in ("true", "false"):
        raise KafkaOptionError(f"option '{name}' must be 'true' or 'false', got {opts[key]!r}")
    return raw == "true"
