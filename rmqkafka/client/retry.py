"""RocketMQ-style consume retries over a plain Kafka consumer: :class:`RetryingConsumer`.

How retries work on an rmqkafka broker (the broker side is ``rmqsemantics.scheduler``):

* A consumer of group ``g`` that cannot process a record *nacks* it: it produces the record,
  as received, to the group's retry topic ``rmq_retry.g``.
* The broker never appends what is produced to ``rmq_retry.g`` right away: it sets the
  header ``RECONSUME_TIMES`` to its value + 1 (absent counts as 0), parks the record at
  delay level ``3 + RECONSUME_TIMES`` (the value before the increment; with the default
  levels 10s, 30s, 1m, 2m, ... 2h; a ``DELAY`` header on the nacked record picks the level
  instead) and, when the delay is over, appends it to ``rmq_retry.g``, where the group
  consumes it again.
* A record nacked when its ``RECONSUME_TIMES`` is already at the group's maximum (16, the
  broker's ``maxReconsumeTimes``, or the topic config ``rmq.max.reconsume.times`` of
  ``rmq_retry.g``) goes to the dead-letter topic ``rmq_dlq.g`` instead (created by the
  broker with one partition), with ``RECONSUME_TIMES`` = maximum + 1. Nothing consumes it
  there; ``rmqk dlq list|resend`` inspect and re-send dead letters.

:class:`RetryingConsumer` packages the client side: it subscribes to the application's
topics *and* ``rmq_retry.<group>`` (creating that topic, with one partition, when it is
missing), and :meth:`~RetryingConsumer.nack` produces a record to it. On the first nack it
adds ``ORIGIN_TOPIC`` / ``ORIGIN_PARTITION`` / ``ORIGIN_OFFSET`` (where the record was first
consumed; later nacks keep them as they are), so dead letters can be sent back to where they
came from (``rmqk dlq resend --to-origin``).

Offsets and delivery guarantees (at least once): the consumer is created with
``enable.auto.offset.store=false`` and ``enable.auto.commit=true``. A record's offset is
*stored* only by :meth:`~RetryingConsumer.ack`, :meth:`~RetryingConsumer.nack` (after the
broker confirmed the retry copy) or :meth:`~RetryingConsumer.commit`; librdkafka commits
the stored offsets every ``auto.commit.interval.ms`` (5 s) and when the consumer is closed.
:meth:`~RetryingConsumer.commit` commits them synchronously at once. A record that was
neither acked nor nacked is not committed: after a crash or a rebalance it is consumed
again, and so is an acked record whose commit had not happened yet. Acks must follow the
consumption order per partition (storing offset N commits everything before N as well),
as with any Kafka consumer.

confluent-kafka is imported when a consumer is created, not with this module.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from confluent_kafka import Message, TopicPartition

__all__ = [
    "DELAY",
    "DLQ_PREFIX",
    "ORIGIN_OFFSET",
    "ORIGIN_PARTITION",
    "ORIGIN_TOPIC",
    "RECONSUME_TIMES",
    "RETRY_PREFIX",
    "NackError",
    "RetryingConsumer",
    "dlq_topic",
    "header",
    "origin_topic",
    "reconsume_times",
    "retry_topic",
]

log = logging.getLogger(__name__)

# The broker's names (rmqsemantics.scheduler); repeated here so that the client does not
# import the broker.
RETRY_PREFIX = "rmq_retry."
DLQ_PREFIX = "rmq_dlq."
RECONSUME_TIMES = "RECONSUME_TIMES"
DELAY = "DELAY"
# Set by RetryingConsumer.nack (the broker does not know them).
ORIGIN_TOPIC = "ORIGIN_TOPIC"
ORIGIN_PARTITION = "ORIGIN_PARTITION"
ORIGIN_OFFSET = "ORIGIN_OFFSET"

# librdkafka properties copied from the consumer's configuration to the producer and admin
# client it uses (connection and security settings).
_SHARED_PREFIXES = ("security.", "sasl.", "ssl.", "socket.", "broker.", "client.", "enable.ssl")
_SHARED_KEYS = frozenset(("log_level", "logger", "error_cb", "api.version.request"))


class NackError(Exception):
    """A nacked record could not be written to the retry topic (its offset was not stored)."""


def retry_topic(group: str) -> str:
    """The retry topic of consumer group ``group``: ``rmq_retry.<group>``."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """The dead-letter topic of consumer group ``group``: ``rmq_dlq.<group>``."""
    return DLQ_PREFIX + group


def header(msg: Message, name: str) -> bytes | None:
    """The value of the first header ``name`` of a consumed message (None if absent)."""
    for key, value in msg.headers() or ():
        if key == name:
            return value
    return None


def reconsume_times(msg: Message) -> int:
    """How often the record was retried: its ``RECONSUME_TIMES`` header, 0 when absent or
    not a number. A record consumed from ``rmq_retry.<group>`` for the n-th time has n."""
    value = header(msg, RECONSUME_TIMES)
    try:
        return max(0, int(value)) if value is not None else 0
    except ValueError:
        return 0


def origin_topic(msg: Message) -> str:
    """The topic a record was first consumed from: its ``ORIGIN_TOPIC`` header (set by the
    first nack), else the topic it was consumed from."""
    value = header(msg, ORIGIN_TOPIC)
    if value is not None:
        try:
            return value.decode()
        except UnicodeDecodeError:
            pass
    return msg.topic() or ""


class RetryingConsumer:
    """A confluent-kafka consumer of group ``group`` with RocketMQ's retry topic.

    ::

        consumer = RetryingConsumer("localhost:9092", "orders-app", ["orders"],
                                    **{"auto.offset.reset": "earliest"})
        try:
            while True:
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                try:
                    handle(msg.value())
                except Exception:
                    consumer.nack(msg)     # back in rmq_retry.orders-app after the retry delay
                else:
                    consumer.ack(msg)      # committed by the next auto-commit (or commit())
        finally:
            consumer.close()

    ``bootstrap_servers``: ``host:port[,host:port...]``. ``topics``: the application's
    topics (a name or an iterable of names); ``rmq_retry.<group>`` is added. The remaining
    keyword arguments are librdkafka consumer properties (names with dots: pass them as
    ``**{"auto.offset.reset": "earliest"}``); they override the defaults
    ``enable.auto.offset.store=false`` and ``enable.auto.commit=true``. Connection and
    security properties among them (``security.*``, ``sasl.*``, ``ssl.*``, ``socket.*``,
    ``client.*``, ...) are also given to the producer that nacks and to the admin client
    that creates the retry topic; ``producer_config`` adds or overrides producer properties
    (the defaults are ``acks=all`` and ``enable.idempotence=true``).

    ``create_retry_topic=False`` does not create a missing retry topic (the subscription
    then reports it unknown). ``timeout`` (seconds) bounds the topic creation, the wait for
    a nack's confirmation and the committed-offset lookup on assignment.

    Where the group starts in ``rmq_retry.<group>`` when it has no committed offset there:
    at the topic's beginning, whatever ``auto.offset.reset`` says (the topic holds only this
    group's retries, so none is skipped). For the application's topics
    ``auto.offset.reset`` applies as usual (librdkafka's default: ``latest``).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        topics: str | Iterable[str],
        *,
        producer_config: Mapping[str, Any] | None = None,
        create_retry_topic: bool = True,
        timeout: float = 10.0,
        **consumer_config: Any,
    ) -> None:
        from confluent_kafka import Consumer, Producer

        if not group:
            raise ValueError("group must not be empty")
        if consumer_config.get("group.id", group) != group:
            raise ValueError(f"group.id {consumer_config['group.id']!r} differs from group {group!r}")
        names = [topics] if isinstance(topics, str) else list(topics)
        self.group = group
        self.retry_topic = retry_topic(group)
        self.dlq_topic = dlq_topic(group)
        self.topics = [t for t in dict.fromkeys(names) if t != self.retry_topic]
        if not self.topics:
            raise ValueError("give at least one topic to consume (besides the retry topic)")
        self._timeout = timeout
        shared = {
            k: v for k, v in consumer_config.items() if k.startswith(_SHARED_PREFIXES) or k in _SHARED_KEYS
        }
        self._consumer_config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "enable.auto.offset.store": False,
            "enable.auto.commit": True,
            **consumer_config,
        }
        producer_conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            **shared,
            **(producer_config or {}),
        }
        if create_retry_topic:
            self._ensure_retry_topic({"bootstrap.servers": bootstrap_servers, **shared})
        self._producer = Producer(producer_conf)
        self._consumer = Consumer(self._consumer_config)
        self._closed = False
        self._consumer.subscribe([*self.topics, self.retry_topic], on_assign=self._on_assign)

    # -- setup -----------------------------------------------------------------------------
    def _ensure_retry_topic(self, admin_config: dict[str, Any]) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(admin_config)
        futures = admin.create_topics(
            [NewTopic(self.retry_topic, num_partitions=1, replication_factor=-1)],
            operation_timeout=self._timeout, request_timeout=self._timeout,
        )
        try:
            futures[self.retry_topic].result(timeout=self._timeout + 1)
        except KafkaException as exc:
            if _code_name(exc) != "TOPIC_ALREADY_EXISTS":
                raise

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        """Start the retry topic's partitions without a committed offset at the beginning."""
        from confluent_kafka import OFFSET_BEGINNING

        retry = [tp for tp in partitions if tp.topic == self.retry_topic]
        if not retry:
            return  # librdkafka assigns the partitions itself
        try:
            committed = consumer.committed(retry, timeout=self._timeout)
        except Exception as exc:  # noqa: BLE001 - fall back to auto.offset.reset
            log.warning("cannot fetch the committed offsets of %s (%s); auto.offset.reset applies",
                        self.retry_topic, exc)
            return
        has_offset = {tp.partition for tp in committed if tp.error is None and tp.offset >= 0}
        for tp in partitions:
            if tp.topic == self.retry_topic and tp.partition not in has_offset:
                tp.offset = OFFSET_BEGINNING
        # the consumer protocol (KIP-848) and cooperative assignors hand out increments
        strategy = str(self._consumer_config.get("partition.assignment.strategy", "")).lower()
        protocol = str(self._consumer_config.get("group.protocol", "classic")).lower()
        if "cooperative" in strategy or protocol == "consumer":
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)

    # -- consuming -------------------------------------------------------------------------
    def poll(self, timeout: float = 1.0) -> Message | None:
        """The next record (a ``confluent_kafka.Message``) within ``timeout`` seconds, or
        None. Errors other than reaching a partition's end raise ``KafkaException``."""
        from confluent_kafka import KafkaError, KafkaException

        msg = self._consumer.poll(timeout)
        if msg is None:
            return None
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                return None
            raise KafkaException(err)
        return msg

    def ack(self, msg: Message) -> None:
        """Mark ``msg`` processed: its offset is stored and committed with the next
        auto-commit, :meth:`commit` or :meth:`close`. A message of a partition this
        consumer no longer owns (a rebalance took it) is not stored: its new owner
        consumes it again."""
        from confluent_kafka import KafkaException

        try:
            self._consumer.store_offsets(message=msg)
        except KafkaException as exc:
            if _code_name(exc) not in ("_STATE", "_UNKNOWN_PARTITION"):
                raise
            log.info("%s-%d@%d: partition no longer assigned; not acked", msg.topic(), msg.partition(), msg.offset())

    def nack(self, msg: Message, *, delay_level: int | None = None) -> None:
        """Retry ``msg`` later: produce it as received (key, value, headers, timestamp) to
        ``rmq_retry.<group>`` and wait for the broker's confirmation, then store its offset
        as :meth:`ack` does.

        On the first nack (a record not consumed from the retry topic and without an
        ``ORIGIN_TOPIC`` header) ``ORIGIN_TOPIC`` / ``ORIGIN_PARTITION`` / ``ORIGIN_OFFSET``
        are added; later nacks keep them as they are. ``delay_level`` sets the ``DELAY``
        header, which the broker uses instead of level ``3 + RECONSUME_TIMES``.

        Raises :class:`NackError` when the record could not be written within ``timeout``;
        its offset is then not stored, so it is consumed again after a restart.
        """
        if self._closed:
            raise RuntimeError("the RetryingConsumer is closed")
        headers = list(msg.headers() or [])
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        if topic != self.retry_topic and not any(k == ORIGIN_TOPIC for k, _ in headers):
            headers += [
                (ORIGIN_TOPIC, (topic or "").encode()),
                (ORIGIN_PARTITION, str(partition).encode()),
                (ORIGIN_OFFSET, str(offset).encode()),
            ]
        if delay_level is not None:
            if delay_level < 1:
                raise ValueError("delay_level must be at least 1")
            headers = [(k, v) for k, v in headers if k != DELAY] + [(DELAY, str(delay_level).encode())]
        kind, stamp = msg.timestamp()
        outcome: list[Any] = []
        self._producer.produce(
            self.retry_topic,
            value=msg.value(),
            key=msg.key(),
            headers=headers,
            timestamp=stamp if kind and stamp > 0 else 0,
            on_delivery=lambda err, _m: outcome.append(err),
        )
        self._producer.flush(self._timeout)
        if not outcome:
            raise NackError(f"{topic}-{partition}@{offset}: {self.retry_topic} did not confirm the retry within {self._timeout:g} s")
        if outcome[0] is not None:
            raise NackError(f"{topic}-{partition}@{offset}: cannot write to {self.retry_topic}: {outcome[0].str()}")
        self.ack(msg)

    def commit(self, msg: Message | None = None, *, asynchronous: bool = False) -> None:
        """Commit the stored offsets now (after acking ``msg``, if given); synchronous
        unless ``asynchronous``. Nothing stored: nothing happens."""
        from confluent_kafka import KafkaException

        if msg is not None:
            self.ack(msg)
        try:
            self._consumer.commit(asynchronous=asynchronous)
        except KafkaException as exc:
            if _code_name(exc) != "_NO_OFFSET":
                raise

    def close(self) -> None:
        """Commit the stored offsets (with ``enable.auto.commit``), leave the group and stop
        the producer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._consumer.close()
        finally:
            self._producer.flush(self._timeout)
            close = getattr(self._producer, "close", None)  # confluent-kafka >= 2.11
            if close is not None:
                close()

    @property
    def consumer(self) -> Any:
        """The underlying ``confluent_kafka.Consumer`` (for pause, seek, assignment, ...)."""
        return self._consumer

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RetryingConsumer(group={self.group!r}, topics={self.topics!r}, retry_topic={self.retry_topic!r})"


def _code_name(exc: BaseException) -> str | None:
    err = exc.args[0] if exc.args else None
    try:
        return err.name()  # type: ignore[union-attr]
    except AttributeError:
        return None
