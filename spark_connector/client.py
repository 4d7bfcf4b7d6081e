"""The Kafka client wrapper: confluent-kafka (librdkafka) for metadata, reads and writes.

Why confluent-kafka: ``python -m rmqkafka.spark_connector.client_bench`` times the executor's job
(assign + seek + poll one partition until an end offset, collecting every column) with
confluent-kafka, aiokafka and kafka-python; librdkafka with a deep prefetch
(``queued.min.messages``) is the fastest (docs/getting-started/spark.md).

* :class:`Metadata` (driver): topic listing (Metadata) and ListOffsets
  (earliest / latest / by timestamp) through one ``AdminClient``, as Spark's
  ``KafkaOffsetReaderAdmin`` does. Created lazily, closed by :meth:`Metadata.close`,
  never pickled.
* :mod:`rmqkafka.spark_connector.range_read` (executor) builds its consumer from the helpers here.
* :class:`Writer` (executor): a producer that raises on any failed delivery.

Before the first request every client probes ``kafka.bootstrap.servers`` with a plain TCP
connect (``connectTimeoutMs``, default 5 s), so an unreachable broker fails in seconds with
:class:`BrokerUnreachableError` instead of librdkafka retrying until a timeout.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterable
from typing import Any

from .errors import (
    BrokerUnreachableError,
    KafkaClientError,
    KafkaOptionError,
    KafkaSourceError,
    UnknownTopicError,
)
from .offsets import OffsetMap, TopicPartition
from .options import ClientOptions

log = logging.getLogger("spark_connector")

DATA_LOSS_HINT = (
    "Some data may have been lost because it is not available in Kafka any more: it was "
    "aged out by retention, deleted with DeleteRecords, or the topic was deleted before "
    "the query read it. If you want the query to skip such records instead of failing, set "
    "the source option 'failOnDataLoss' to 'false'."
)


def probe(client: ClientOptions) -> None:
    """Raise :class:`BrokerUnreachableError` unless some bootstrap server accepts TCP."""
    problems = []
    timeout = client.connect_timeout_ms / 1000
    for address in client.bootstrap_servers.split(","):
        host, _, port = address.strip().rpartition(":")
        host = host.strip("[]")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except OSError as exc:
            problems.append(f"{address.strip()}: {exc.strerror or exc}")
    raise BrokerUnreachableError(
        "cannot connect to any Kafka broker in kafka.bootstrap.servers="
        f"{client.bootstrap_servers} ({'; '.join(problems)}); is the broker running and "
        "reachable from this machine?"
    )


def base_config(client: ClientOptions) -> dict[str, Any]:
    return {
        "bootstrap.servers": client.bootstrap_servers,
        "log.connection.close": False,
        "socket.connection.setup.timeout.ms": client.connect_timeout_ms,
    }


def with_passthrough(config: dict[str, Any], client: ClientOptions) -> dict[str, Any]:
    config.update(client.kafka)
    return config


def make_client(factory: Any, config: dict[str, Any]) -> Any:
    try:
        return factory(config)
    except Exception as exc:  # librdkafka refuses unknown or bad settings here
        raise KafkaOptionError(
            f"the Kafka client refused its configuration ({exc}); 'kafka.*' options are "
            "passed to librdkafka (confluent-kafka), whose names mostly match the Java "
            "client's: see librdkafka's CONFIGURATION.md"
        ) from None


def _kafka_error(exc: BaseException) -> Any:
    args = getattr(exc, "args", ())
    return args[0] if args and hasattr(args[0], "code") else None


class Metadata:
    """Driver-side topic and offset lookups through one lazily created AdminClient."""

    def __init__(self, client: ClientOptions, isolation: str = "read_uncommitted") -> None:
        self._client = client
        self._isolation = isolation
        self._admin: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_admin"] = None
        return state

    def close(self) -> None:
        self._admin = None  # confluent-kafka closes the handle when it is collected

    @property
    def _timeout(self) -> float:
        return self._client.request_timeout_ms / 1000

    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            probe(self._client)
            config = with_passthrough(base_config(self._client), self._client)
            self._admin = make_client(AdminClient, config)
        return self._admin

    def topics(self) -> dict[str, int]:
        """Every non-internal topic and its partition count."""
        try:
            meta = self.admin().list_topics(timeout=self._timeout)
        except Exception as exc:
            raise self._failure("list topics (Metadata)", exc) from None
        out = {}
        for name, topic in meta.topics.items():
            if name.startswith("__") or topic.error is not None and not topic.partitions:
                continue
            out[name] = len(topic.partitions)
        return out

    def earliest(self, tps: Iterable[TopicPartition]) -> OffsetMap:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.earliest() for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> OffsetMap:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.latest() for tp in tps})

    def for_times(self, stamps: dict[TopicPartition, int]) -> OffsetMap:
        """The first offset with timestamp >= ms per partition; -1 where there is none."""
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()})

    def _list_offsets(self, specs: dict[TopicPartition, Any]) -> OffsetMap:
        if not specs:
            return {}
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as KTP

        isolation = (
            IsolationLevel.READ_COMMITTED
            if self._isolation == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )
        try:
            futures = self.admin().list_offsets(
                {KTP(t, p): spec for (t, p), spec in specs.items()},
                isolation_level=isolation,
                request_timeout=self._timeout,
            )
        except Exception as exc:
            raise self._failure("list offsets (ListOffsets)", exc) from None
        out: OffsetMap = {}
        for ktp, future in futures.items():
            try:
                out[(ktp.topic, ktp.partition)] = future.result().offset
            except Exception as exc:
                raise self._failure(
                    f"list offsets of {ktp.topic}-{ktp.partition} (ListOffsets)", exc
                ) from None
        return out

    def _failure(self, what: str, exc: BaseException) -> Exception:
        from confluent_kafka import KafkaError

        if isinstance(exc, KafkaSourceError):
            return exc
        err = _kafka_error(exc)
        code = err.code() if err is not None else None
        if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                    KafkaError._UNKNOWN_TOPIC, KafkaError._NOENT):
            return UnknownTopicError(f"could not {what}: the topic or partition does not "
                                     f"exist ({err.str()})")
        if code in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            return BrokerUnreachableError(
                f"could not {what}: no answer from the Kafka brokers at "
                f"{self._client.bootstrap_servers} within requestTimeoutMs="
                f"{self._client.request_timeout_ms} ({err.str()})"
            )
        return KafkaClientError(f"could not {what}: {exc}")


def random_group_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


class Writer:
    """A producer for one Spark task: :meth:`send` rows, then :meth:`finish` (raises on error).

    Defaults match the Java producer Spark uses: ``acks=all``, idempotence on,
    ``linger.ms=5``; ``kafka.*`` options override them.
    """

    def __init__(self, client: ClientOptions) -> None:
        from confluent_kafka import Producer

        probe(client)
        self._failures: list[str] = []
        self.count = 0
        self.per_topic: dict[str, int] = {}
        config = base_config(client)
        config.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5})
        config = with_passthrough(config, client)
        config["error_cb"] = self._on_error
        self._producer = make_client(Producer, config)
        self._timeout = client.request_timeout_ms / 1000

    def _on_error(self, err: Any) -> None:
        if err.fatal():
            self._failures.append(err.str())

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failures.append(f"{msg.topic()}: {err.str()}")

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        partition: int | None,
    ) -> None:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": self._on_delivery}
        if headers:
            kwargs["headers"] = headers
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain
                self._producer.poll(0.05)
            except Exception as exc:
                raise KafkaClientError(f"cannot write to topic {topic!r}: {exc}") from None
        self.count += 1
        self.per_topic[topic] = self.per_topic.get(topic, 0) + 1
        if self._failures:
            self.finish()

    def finish(self) -> None:
        remaining = self._producer.flush(self._timeout)
        if self._failures:
            raise KafkaClientError(
                f"{len(self._failures)} record(s) could not be written; first error: "
                f"{self._failures[0]}"
            )
        if remaining:
            raise BrokerUnreachableError(
                f"{remaining} record(s) were not acknowledged within requestTimeoutMs="
                f"{int(self._timeout * 1000)}"
            )
