"""RocketMQ's transactional producer over confluent-kafka: :class:`TransactionProducer`.

How transaction messages work on an rmqkafka broker (the broker side is
``rmqsemantics.half_messages``; the headers are described in ``rmqsemantics.half_records``):

* A *half message* is a record produced to its real topic with the headers ``TRAN_MSG=true``,
  ``PGROUP=<producer group>`` and ``UNIQ_KEY=<its id in the group>``. The broker confirms
  it but keeps it out of sight: no consumer sees it yet.
* The producer then runs its *local transaction* (e.g. a database write) and ends the half
  message with an *end record* to the same topic: headers ``TRAN_END=COMMIT`` or
  ``ROLLBACK`` plus the same ``PGROUP`` / ``UNIQ_KEY``. A commit makes the message visible in
  the partition it was produced to; a rollback drops it. An end for a half message that is
  not pending (unknown, or ended already) is refused with ``INVALID_RECORD`` and changes
  nothing, so a message becomes visible at most once whoever ends it.
* A half message nobody ends (the local transaction's outcome was unknown, or the producer
  died) is *checked back*: every ``transactionCheckInterval`` the broker writes a check
  request (the half message plus ``TRANSACTION_CHECK_TIMES``) to ``rmq_trans_check.<group>``
  for each half message older than ``transactionTimeOut``. The group's producers consume
  that topic as one consumer group and answer with an end record. After
  ``transactionCheckMax`` unanswered checks the broker rolls the message back.

:class:`TransactionProducer` packages the producer side as RocketMQ's
``TransactionMQProducer`` does: :meth:`~TransactionProducer.send_message_in_transaction`
sends the half message, calls the listener's ``execute_local_transaction`` and ends the half
message with its answer; a background thread answers the check requests of the group with
the listener's ``check_local_transaction``. Any member of the group may answer any check
(the check topic's partitions are shared among the members like any consumer group's), so
the listener's check must decide from durable state (the database), not from memory of the
process that sent the message.

Why each record is produced alone (one in flight per producer): the broker refuses a
produced partition batch as a whole when one end record in it is not pending. An end that
some other member already answered would otherwise take unrelated half messages and ends
of the same batch down with it.

confluent-kafka is imported when a producer is created, not with this module.
"""

from __future__ import annotations

import enum
import logging
import re
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from confluent_kafka import Message

__all__ = [
    "CHECK_PREFIX",
    "CHECK_TIMES",
    "PGROUP",
    "TRAN_END",
    "TRAN_MSG",
    "UNIQ_KEY",
    "LocalTransactionState",
    "TransactionListener",
    "TransactionMessage",
    "TransactionOutcome",
    "TransactionProducer",
    "TransactionSendError",
    "TransactionSendResult",
    "check_topic",
]

log = logging.getLogger(__name__)

# The broker's names (rmqsemantics.half_records); repeated here so that the client does not
# import the broker.
CHECK_PREFIX = "rmq_trans_check."
TRAN_MSG = "TRAN_MSG"
TRAN_END = "TRAN_END"
PGROUP = "PGROUP"
UNIQ_KEY = "UNIQ_KEY"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
# Headers the broker adds or owns: not passed on as the application's headers of a check.
_BROKER_HEADERS = frozenset((TRAN_MSG, PGROUP, UNIQ_KEY, CHECK_TIMES, "TRAN_HALF", "REAL_TOPIC", "REAL_QID",
                             "HALF_STORED_MS", "PARKED_FROM", "PARKED_AT"))
_REGEX_SPECIAL = frozenset("\\.^$*+?()[]{}|")
_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")

# librdkafka properties of the producer that the check consumer gets too (connection and
# security settings), when given in ``producer_config`` rather than ``config``.
_SHARED_PREFIXES = ("security.", "sasl.", "ssl.", "socket.", "broker.", "client.", "enable.ssl")
_SHARED_KEYS = frozenset(("log_level", "logger", "error_cb", "api.version.request"))


def check_topic(group: str) -> str:
    """The topic of producer group ``group``'s check requests: ``rmq_trans_check.<group>``."""
    return CHECK_PREFIX + group


class LocalTransactionState(enum.Enum):
    """A listener's answer, RocketMQ's ``LocalTransactionState`` (with its spelling
    ``UNKNOW``; ``UNKNOWN`` is an alias of it)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"  # noqa: PIE796 - an alias on purpose: LocalTransactionState.UNKNOWN is UNKNOW


class TransactionOutcome(enum.Enum):
    """What became of a message sent by :meth:`TransactionProducer.send_message_in_transaction`."""

    COMMITTED = "committed"          # the commit was confirmed: the message is visible
    ROLLED_BACK = "rolled_back"      # the rollback was confirmed: it never will be
    LEFT_FOR_CHECK = "left_for_check"  # UNKNOW: no end was sent; a back-check decides
    END_REFUSED = "end_refused"      # the broker refused the end: the half message had been
                                     # ended already (a check answer, or transactionCheckMax)
    END_FAILED = "end_failed"        # the end was not confirmed (an error, or no answer within
                                     # the timeout: it may still arrive); else a back-check decides


@dataclass(frozen=True, slots=True)
class TransactionMessage:
    """The message a listener is asked about. ``headers`` are the application's (without
    the transaction headers the producer and broker add); ``check_times`` is 0 in
    ``execute_local_transaction`` and the check's number (from 1) in
    ``check_local_transaction``; ``partition`` is None when not known yet."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    uniq_key: str = ""
    check_times: int = 0


class TransactionListener(ABC):
    """RocketMQ's ``TransactionListener``: runs the local transaction and answers checks.

    Both methods may also raise: that counts as ``UNKNOW`` (as in RocketMQ), and the
    exception is logged. ``check_local_transaction`` runs in the producer's check thread,
    possibly in another process of the group than the one that executed the transaction.
    """

    @abstractmethod
    def execute_local_transaction(self, message: TransactionMessage, arg: Any) -> LocalTransactionState:
        """Run the local transaction of ``message`` (already stored, invisibly, by the
        broker); ``arg`` is what ``send_message_in_transaction`` was given."""

    @abstractmethod
    def check_local_transaction(self, message: TransactionMessage) -> LocalTransactionState:
        """Say how the local transaction of ``message`` ended (from durable state)."""


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """The result of :meth:`TransactionProducer.send_message_in_transaction`.

    ``partition`` / ``half_offset`` are where the broker took the half message (the offset
    stays a gap in the partition; a committed message gets a new offset). ``error`` says why
    an end was refused or failed."""

    uniq_key: str
    topic: str
    partition: int
    half_offset: int
    local_state: LocalTransactionState
    outcome: TransactionOutcome
    error: str | None = None

    @property
    def committed(self) -> bool:
        return self.outcome is TransactionOutcome.COMMITTED

    @property
    def rolled_back(self) -> bool:
        return self.outcome is TransactionOutcome.ROLLED_BACK

    @property
    def left_for_check(self) -> bool:
        """True when a back-check decides: the local state was UNKNOW or the end failed."""
        return self.outcome in (TransactionOutcome.LEFT_FOR_CHECK, TransactionOutcome.END_FAILED)


class TransactionSendError(Exception):
    """The half message could not be sent: no local transaction was executed."""


class TransactionProducer:
    """RocketMQ's ``TransactionMQProducer`` for producer group ``group``.

    ::

        with TransactionProducer("localhost:9092", "order-service", OrderListener()) as producer:
            result = producer.send_message_in_transaction("orders", b'{"id": 7}', key=b"7", arg=order)
            print(result.outcome)

    ``listener``: a :class:`TransactionListener` (or any object with its two methods).
    ``config``: librdkafka properties for both clients (connection and security settings);
    ``producer_config`` / ``consumer_config`` add or override those of one of them. The
    producer's defaults are ``enable.idempotence=true``, ``acks=all``, ``linger.ms=0``; the
    check consumer's: group ``check_group_id`` (default ``rmq_trans_checkers.<group>``),
    ``auto.offset.reset=earliest`` (the topic holds only this group's checks: none is
    skipped), ``topic.metadata.refresh.interval.ms=1000`` (the check topic appears when the
    broker sends its first check: the consumer subscribes to it by a regular expression
    and finds it at the next metadata refresh) and ``enable.auto.commit=false`` (each check
    is committed once answered).

    ``answer_checks=False`` starts no check consumer (a member that only sends; some other
    member of the group must answer the checks). ``timeout`` (seconds) is the default wait
    for a record's delivery.

    Delivery of check answers is at least once: a check is committed after its answer was
    delivered (or refused), so a check delivered again after a crash or a rebalance is just
    answered again, and the broker refuses the second end harmlessly.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        listener: TransactionListener,
        *,
        config: Mapping[str, Any] | None = None,
        check_group_id: str | None = None,
        producer_config: Mapping[str, Any] | None = None,
        consumer_config: Mapping[str, Any] | None = None,
        answer_checks: bool = True,
        timeout: float = 30.0,
    ) -> None:
        if not group:
            raise ValueError("group must not be empty")
        if not _LEGAL_TOPIC.fullmatch(check_topic(group)):
            # The broker would create a check topic no Kafka client can subscribe to.
            raise ValueError(f"group {group!r}: {check_topic(group)!r} is not a legal Kafka topic name "
                             "(ASCII letters, digits, '.', '_', '-'; at most 249 characters)")
        for name in ("execute_local_transaction", "check_local_transaction"):
            if not callable(getattr(listener, name, None)):
                raise TypeError(f"listener has no method {name}()")
        self.group = group
        self.listener = listener
        self.check_topic = check_topic(group)
        self.check_group_id = check_group_id or f"rmq_trans_checkers.{group}"
        self.answer_checks = answer_checks
        self._timeout = timeout
        common = dict(config or {})
        shared = {k: v for k, v in (producer_config or {}).items() if k.startswith(_SHARED_PREFIXES) or k in _SHARED_KEYS}
        self._producer_config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            **common,
            **(producer_config or {}),
        }
        self._consumer_config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "group.id": self.check_group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            **shared,
            **common,
            **(consumer_config or {}),
        }
        self._producer: Any = None
        self._send_lock = threading.Lock()  # one record in flight: see the module docstring
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = self._closed = False
        self.checks_answered = 0  # check requests handled by this member (any answer)

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> Self:
        """Create the producer and start the check thread (a second call does nothing)."""
        if self._closed:
            raise RuntimeError("the TransactionProducer is closed")
        if self._started:
            return self
        from confluent_kafka import Consumer, Producer

        # Created here, not in the thread, so that a bad configuration raises in start().
        consumer = Consumer(self._consumer_config) if self.answer_checks else None
        self._producer = Producer(self._producer_config)
        self._started = True
        if consumer is not None:
            consumer.subscribe([_topic_regex(self.check_topic)])
            self._thread = threading.Thread(target=self._check_loop, args=(consumer,),
                                            name=f"rmq-trans-check-{self.group}", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop the check thread (its consumer leaves the group; the checks it answered are
        committed already) and flush the producer. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._timeout + 5)
        if self._producer is not None:
            self._producer.flush(self._timeout)
            close = getattr(self._producer, "close", None)  # confluent-kafka >= 2.11
            if close is not None:
                close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending ---------------------------------------------------------------------------
    def send_message_in_transaction(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        headers: Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None = None,
        partition: int | None = None,
        arg: Any = None,
        timeout: float | None = None,
    ) -> TransactionSendResult:
        """Send ``value`` as a transaction message of this group to ``topic``.

        The half message (with a new ``UNIQ_KEY``) is produced and its delivery waited for;
        then the listener's ``execute_local_transaction(message, arg)`` runs (an exception
        counts as UNKNOW) and its COMMIT_MESSAGE / ROLLBACK_MESSAGE is sent as an end record
        and waited for; UNKNOW sends nothing and leaves the decision to a back-check.

        Raises :class:`TransactionSendError` when the half message was not confirmed within
        ``timeout`` seconds (default: the producer's); the local transaction is then not
        executed. (A half message confirmed after all is checked back like any other: the
        listener's check should roll back a transaction that never ran.) A failed or
        refused end does not raise: the result's ``outcome`` says what happened.
        """
        if not self._started or self._closed:
            raise RuntimeError("the TransactionProducer is not started (call start() or use it as a context manager)")
        wait = self._timeout if timeout is None else timeout
        uniq_key = uuid.uuid4().hex.upper()
        user_headers = _headers(headers)
        for name, _ in user_headers:
            if name in (TRAN_MSG, TRAN_END, PGROUP, UNIQ_KEY):
                raise ValueError(f"header {name} is set by the TransactionProducer")
        key_bytes, value_bytes = _bytes(key), _bytes(value)
        ids = [(PGROUP, self.group.encode()), (UNIQ_KEY, uniq_key.encode())]
        err, msg = self._produce(topic, key_bytes, value_bytes, [*user_headers, (TRAN_MSG, b"true"), *ids],
                                 partition, wait)
        if err is not None:
            text = f"{err.name()}: {err.str()}" if hasattr(err, "name") else str(err)
            raise TransactionSendError(f"half message {uniq_key} to {topic}: {text}")
        placed = (msg.partition(), msg.offset())
        message = TransactionMessage(topic, placed[0], key_bytes, value_bytes, user_headers, uniq_key, 0)
        try:
            state = _state(self.listener.execute_local_transaction(message, arg))
        except Exception:
            log.exception("execute_local_transaction of %s (group %s) failed; counted as UNKNOW", uniq_key, self.group)
            state = LocalTransactionState.UNKNOW
        if state is LocalTransactionState.UNKNOW:
            return TransactionSendResult(uniq_key, topic, placed[0], placed[1], state, TransactionOutcome.LEFT_FOR_CHECK)
        outcome, error = self._end(topic, placed[0], uniq_key, state, wait)
        return TransactionSendResult(uniq_key, topic, placed[0], placed[1], state, outcome, error)

    def _end(self, topic: str, partition: int | None, uniq_key: str, state: LocalTransactionState,
             wait: float) -> tuple[TransactionOutcome, str | None]:
        """Send the end record for ``state`` (COMMIT_MESSAGE or ROLLBACK_MESSAGE)."""
        from confluent_kafka import KafkaError

        decision = b"COMMIT" if state is LocalTransactionState.COMMIT_MESSAGE else b"ROLLBACK"
        headers = [(TRAN_END, decision), (PGROUP, self.group.encode()), (UNIQ_KEY, uniq_key.encode())]
        err, _ = self._produce(topic, None, None, headers, partition, wait)
        if err is None:
            done = TransactionOutcome.COMMITTED if decision == b"COMMIT" else TransactionOutcome.ROLLED_BACK
            return done, None
        text = f"{err.name()}: {err.str()}" if isinstance(err, KafkaError) else str(err)
        if isinstance(err, KafkaError) and err.code() == KafkaError.INVALID_RECORD:
            return TransactionOutcome.END_REFUSED, text
        log.warning("end %s of %s (group %s) to %s failed: %s; a back-check will decide",
                    decision.decode(), uniq_key, self.group, topic, text)
        return TransactionOutcome.END_FAILED, text

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]],
                 partition: int | None, wait: float) -> tuple[Any, Message | None]:
        """Produce one record and wait for its delivery report: (error or None, message).
        The error is a ``KafkaError``, or a string when no report came within ``wait``."""
        from confluent_kafka import KafkaException

        report: list[tuple[Any, Any]] = []
        options = {} if partition is None else {"partition": partition}
        with self._send_lock:
            try:
                self._producer.produce(topic, value=value, key=key, headers=headers,
                                       on_delivery=lambda e, m: report.append((e, m)), **options)
            except KafkaException as exc:  # e.g. a partition the topic does not have
                return (exc.args[0] if exc.args else str(exc)), None
            except BufferError as exc:  # queue.buffering.max.messages reached
                return f"the producer's queue is full: {exc}", None
            deadline = time.monotonic() + wait
            while not report:
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"no delivery report within {wait:g} s", None
                self._producer.flush(min(left, 1.0))
        return report[0]

    # -- answering checks ------------------------------------------------------------------
    def _check_loop(self, consumer: Any) -> None:
        from confluent_kafka import KafkaError

        try:
            while not self._stop.is_set():
                try:
                    msg = consumer.poll(0.2)
                except Exception:  # keep answering
                    log.exception("check consumer of group %s: poll failed", self.group)
                    time.sleep(0.5)
                    continue
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() not in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                        log.warning("check consumer of group %s: %s", self.group, err.str())
                    continue
                self._answer(msg)
                try:
                    consumer.commit(message=msg, asynchronous=False)
                except Exception as exc:  # noqa: BLE001 - the check comes again: answered again
                    log.warning("check consumer of group %s: commit of %s-%d@%d failed: %s",
                                self.group, msg.topic(), msg.partition(), msg.offset(), exc)
        finally:
            try:
                consumer.close()
            except Exception:
                log.exception("check consumer of group %s: close failed", self.group)

    def _answer(self, msg: Message) -> None:
        """Ask the listener about one check request and send its answer."""
        raw = list(msg.headers() or [])
        found = dict(raw)
        uniq_key = _text(found.get(UNIQ_KEY))
        group = _text(found.get(PGROUP))
        real_topic = _text(found.get("REAL_TOPIC"))
        if not uniq_key or group != self.group or not real_topic:
            log.warning("check request %s-%d@%d without UNIQ_KEY, PGROUP %r or REAL_TOPIC: ignored",
                        msg.topic(), msg.partition(), msg.offset(), self.group)
            return
        try:
            real_qid: int | None = int(_text(found.get("REAL_QID")) or "")
        except ValueError:
            real_qid = None
        try:
            times = int(_text(found.get(CHECK_TIMES)) or "0")
        except ValueError:
            times = 0
        message = TransactionMessage(real_topic, real_qid, msg.key(), msg.value(),
                                     [(k, v) for k, v in raw if k not in _BROKER_HEADERS], uniq_key, times)
        try:
            state = _state(self.listener.check_local_transaction(message))
        except Exception:
            log.exception("check_local_transaction of %s (group %s, check %d) failed; counted as UNKNOW",
                          uniq_key, self.group, times)
            state = LocalTransactionState.UNKNOW
        self.checks_answered += 1
        if state is LocalTransactionState.UNKNOW:
            log.debug("check %d of %s (group %s): UNKNOW", times, uniq_key, self.group)
            return
        outcome, error = self._end(real_topic, real_qid, uniq_key, state, self._timeout)
        if outcome is TransactionOutcome.END_REFUSED:
            log.debug("check %d of %s (group %s): %s refused (ended already): %s",
                      times, uniq_key, self.group, state.value, error)
        elif outcome is not TransactionOutcome.END_FAILED:
            log.info("check %d of %s (group %s): %s", times, uniq_key, self.group, outcome.value)

    def __repr__(self) -> str:
        return f"TransactionProducer(group={self.group!r}, check_group_id={self.check_group_id!r})"


def _topic_regex(topic: str) -> str:
    """A librdkafka subscription pattern matching exactly ``topic``."""
    return "^" + "".join("\\" + c if c in _REGEX_SPECIAL else c for c in topic) + "$"


def _state(value: Any) -> LocalTransactionState:
    """A listener's answer as a LocalTransactionState (its name as a string is accepted too)."""
    if isinstance(value, LocalTransactionState):
        return value
    if isinstance(value, str):
        try:
            return LocalTransactionState[value.upper()]
        except KeyError:
            pass
    raise TypeError(f"a listener returned {value!r}, not a LocalTransactionState")


def _bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value is not None else ""


def _headers(headers: Any) -> list[tuple[str, bytes | None]]:
    if headers is None:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k), _bytes(v)) for k, v in items]
