"""``rmqkafka.client.TransactionProducer`` (RocketMQ transaction messages) end to end against a
real broker process with confluent-kafka.

The broker runs with fast back-checks (``transactionCheckInterval=500``,
``transactionTimeOut=1000``: an unanswered half message is checked from about 1 s on, every
0.5 s) and ``group.min.session.timeout.ms=1000``, so the check consumer of a killed member
leaves its group quickly. ``transactionCheckMax=60`` gives a checker 30 s to answer before
the broker rolls back: on a loaded machine a check consumer can take seconds to join its
group, and with three checks (1.5 s) the halves were rolled back before it answered. The
test of the rollback after unanswered checks runs its own broker with
``transactionCheckMax=3``.

What is visible in a topic is read up to sentinels: a plain record produced to every
partition after the fact; a committed message is appended before the broker answers its end
record, so whatever is not before the sentinels was not committed. The broker's
transaction status is its DescribeConfigs ``rmq.transaction.half.status``.

Checked: a commit (seen once, key/value/headers, ``UNIQ_KEY``), a rollback (never seen, no
check), UNKNOW (and an exception in ``execute_local_transaction``) then a back-check that
commits, an end sent after a check answered it (refused: END_REFUSED), a producer SIGKILLed
after its half message whose check another member of the group answers, three unanswered
checks (rolled back by the broker), the raw protocol's refusal of an end for an unknown
``UNIQ_KEY``, and the order service example of docs/guides/rocketmq-transactions.md (``order_service_example.py``),
including its ``check_local_transaction`` answering the broker's checks.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

EXAMPLE = Path(__file__).with_name("order_service_example.py")
BROKER_CONFIG = """\
transactionCheckInterval=500
transactionTimeOut=1000
transactionCheckMax=60
group.min.session.timeout.ms=1000
"""
# For the members of these tests: a killed member leaves the check group within ~1.5 s.
FAST_GROUP = {"session.timeout.ms": 1500, "heartbeat.interval.ms": 300, "log_level": 0}


@pytest.fixture
def bootstrap(broker_factory: Callable[..., Any], tmp_path: Path) -> str:
    config = tmp_path / "server.properties"
    config.write_text(BROKER_CONFIG)
    return broker_factory(config_file=config).bootstrap_servers


# -- helpers ---------------------------------------------------------------------------------
def create_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def status(bootstrap: str) -> dict:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    resource = ConfigResource("topic", "RMQ_SYS_TRANS_HALF_TOPIC")
    configs = admin.describe_configs([resource])[resource].result(10)
    return json.loads(configs["rmq.transaction.half.status"].value)


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def visible(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic`` a consumer sees now (sentinels aside)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    partitions = len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
    marker = uuid.uuid4().hex.encode()
    for partition in range(partitions):
        producer.produce(topic, value=b"sentinel", partition=partition, headers=[("sentinel", marker)])
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{marker.decode()}",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[Any] = []
    sentinels: set[int] = set()
    deadline = time.monotonic() + 15
    try:
        while len(sentinels) < partitions:
            assert time.monotonic() < deadline, f"sentinels of {topic} not read"
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            headers = dict(msg.headers() or [])
            if "sentinel" in headers:
                if headers["sentinel"] == marker:
                    sentinels.add(msg.partition())
            else:
                seen.append(msg)
    finally:
        consumer.close()
    return seen


class Listener:
    """A TransactionListener whose answers the test chooses; records what it was asked."""

    def __init__(self, execute: Any = "COMMIT_MESSAGE", check: Any = "COMMIT_MESSAGE") -> None:
        from rmqkafka.client import LocalTransactionState

        self.execute_answer = execute if callable(execute) else LocalTransactionState[execute]
        self.check_answer = check if callable(check) else LocalTransactionState[check]
        self.executed: list[tuple[Any, Any]] = []
        self.checked: list[Any] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, message: Any, arg: Any) -> Any:
        with self.lock:
            self.executed.append((message, arg))
        answer = self.execute_answer
        return answer(message) if callable(answer) else answer

    def check_local_transaction(self, message: Any) -> Any:
        with self.lock:
            self.checked.append(message)
        answer = self.check_answer
        return answer(message) if callable(answer) else answer

    def checks_of(self, uniq_key: str) -> list[Any]:
        with self.lock:
            return [m for m in self.checked if m.uniq_key == uniq_key]


def producer(bootstrap: str, group: str, listener: Any, **options: Any) -> Any:
    from rmqkafka.client import TransactionProducer

    return TransactionProducer(bootstrap, group, listener, config={"log_level": 0},
                               consumer_config=FAST_GROUP, **options)


# -- the producer ----------------------------------------------------------------------------
def test_commit_is_visible_once(bootstrap: str) -> None:
    from rmqkafka.client import (
        LocalTransactionState,
        TransactionOutcome,
        TransactionSendError,
    )

    create_topic(bootstrap, "orders")
    listener = Listener(execute="COMMIT_MESSAGE")
    with producer(bootstrap, "shop", listener) as tx:
        result = tx.send_message_in_transaction("orders", b'{"id": 1}', key=b"order-1",
                                                headers={"trace": b"t-1"}, arg="my-arg")
    assert result.outcome is TransactionOutcome.COMMITTED and result.committed
    assert result.local_state is LocalTransactionState.COMMIT_MESSAGE
    assert len(result.uniq_key) == 32 and result.topic == "orders"
    [(message, arg)] = listener.executed
    assert arg == "my-arg"
    assert (message.topic, message.partition, message.key, message.value, message.headers, message.uniq_key,
            message.check_times) == ("orders", result.partition, b"order-1", b'{"id": 1}', [("trace", b"t-1")],
                                     result.uniq_key, 0)
    [msg] = visible(bootstrap, "orders")
    assert (msg.partition(), msg.key(), msg.value()) == (result.partition, b"order-1", b'{"id": 1}')
    assert msg.offset() != result.half_offset  # the half message's offset stays a gap
    headers = dict(msg.headers())
    assert headers["trace"] == b"t-1" and headers["UNIQ_KEY"] == result.uniq_key.encode()
    assert headers["PGROUP"] == b"shop" and "TRAN_MSG" not in headers
    state = status(bootstrap)
    assert (state["pending"], state["committed"], state["checks_sent"]) == (0, 1, 0)
    assert listener.checked == []
    with producer(bootstrap, "shop", listener) as tx, pytest.raises(TransactionSendError, match="PARTITION"):
        tx.send_message_in_transaction("orders", b"v", partition=7)  # "orders" has 2
    assert len(listener.executed) == 1  # no local transaction without a half message
    with pytest.raises(ValueError, match="legal Kafka topic name"):
        producer(bootstrap, "shop floor", listener)  # rmq_trans_check.shop floor: no client could consume it


def test_rollback_is_never_visible(bootstrap: str) -> None:
    from rmqkafka.client import TransactionOutcome

    create_topic(bootstrap, "orders")
    listener = Listener(execute="ROLLBACK_MESSAGE")
    with producer(bootstrap, "shop", listener) as tx:
        result = tx.send_message_in_transaction("orders", b"v", key=b"k", partition=1)
        assert result.outcome is TransactionOutcome.ROLLED_BACK and result.partition == 1
        time.sleep(2.0)  # past transactionTimeOut and two check passes: nothing is checked
    assert visible(bootstrap, "orders") == []
    state = status(bootstrap)
    assert (state["pending"], state["rolled_back"], state["committed"], state["checks_sent"]) == (0, 1, 0, 0)
    assert listener.checked == []


def test_unknown_then_a_check_commits(bootstrap: str) -> None:
    from rmqkafka.client import LocalTransactionState, TransactionOutcome

    create_topic(bootstrap, "orders")

    def fail(message: Any) -> Any:
        if message.key == b"boom":
            raise RuntimeError("the database went away")  # counts as UNKNOW
        return LocalTransactionState.UNKNOWN  # the alias of UNKNOW

    listener = Listener(execute=fail, check="COMMIT_MESSAGE")
    with producer(bootstrap, "shop", listener) as tx:
        unknown = tx.send_message_in_transaction("orders", b"v1", key=b"quiet", headers=[("h", b"1")])
        raised = tx.send_message_in_transaction("orders", b"v2", key=b"boom")
        for result in (unknown, raised):
            assert result.local_state is LocalTransactionState.UNKNOW
            assert result.outcome is TransactionOutcome.LEFT_FOR_CHECK and result.left_for_check
        assert visible(bootstrap, "orders") == []  # undecided: invisible
        wait_for(lambda: status(bootstrap)["pending"] == 0, what="the checks' commits")
    checks = listener.checks_of(unknown.uniq_key)
    assert checks and all(m.check_times >= 1 for m in checks)
    assert (checks[0].topic, checks[0].partition, checks[0].key, checks[0].value, checks[0].headers) == (
        "orders", unknown.partition, b"quiet", b"v1", [("h", b"1")])
    assert listener.checks_of(raised.uniq_key)
    seen = visible(bootstrap, "orders")
    assert sorted((m.key(), m.value()) for m in seen) == [(b"boom", b"v2"), (b"quiet", b"v1")]
    state = status(bootstrap)
    assert (state["committed"], state["rolled_back"], state["rolled_back_unchecked"]) == (2, 0, 0)


def test_end_after_a_check_answered_is_refused(bootstrap: str) -> None:
    """The local transaction outlasts transactionTimeOut: the check thread commits the
    message first, and the producer's own COMMIT is then refused (END_REFUSED), once."""
    from rmqkafka.client import LocalTransactionState, TransactionOutcome

    create_topic(bootstrap, "orders")
    answered = threading.Event()

    def slow(message: Any) -> Any:
        if message.key != b"k":
            return LocalTransactionState.COMMIT_MESSAGE
        assert answered.wait(15), "no check came"
        wait_for(lambda: status(bootstrap)["committed"] == 1, what="the check's commit")
        return LocalTransactionState.COMMIT_MESSAGE

    def check(message: Any) -> Any:
        answered.set()
        return LocalTransactionState.COMMIT_MESSAGE

    listener = Listener(execute=slow, check=check)
    with producer(bootstrap, "shop", listener) as tx:
        result = tx.send_message_in_transaction("orders", b"v", key=b"k")
        after = tx.send_message_in_transaction("orders", b"v2", key=b"k2")  # the refusal broke nothing
    assert result.outcome is TransactionOutcome.END_REFUSED, result
    assert result.error and result.error.startswith("INVALID_RECORD")
    assert after.outcome is TransactionOutcome.COMMITTED
    assert sorted((m.key(), m.value()) for m in visible(bootstrap, "orders")) == [(b"k", b"v"), (b"k2", b"v2")]


# A member of group "shop" that sends one half message, says UNKNOW, prints its UNIQ_KEY and
# waits to be killed.
KILLED_MEMBER = """
import sys, time
from rmqkafka.client import LocalTransactionState, TransactionProducer

class Unknown:
    def execute_local_transaction(self, message, arg):
        return LocalTransactionState.UNKNOW
    def check_local_transaction(self, message):
        return LocalTransactionState.UNKNOW

tx = TransactionProducer(sys.argv[1], "shop", Unknown(), config={"log_level": 0},
                         consumer_config={"session.timeout.ms": 1500, "heartbeat.interval.ms": 300}).start()
result = tx.send_message_in_transaction("orders", b"paid", key=b"order-7", headers={"trace": b"t-7"})
print(result.uniq_key, result.partition, result.outcome.value, flush=True)
time.sleep(60)
"""


def test_killed_producer_is_checked_by_another_member(bootstrap: str) -> None:
    create_topic(bootstrap, "orders")
    listener = Listener(execute="ROLLBACK_MESSAGE", check="COMMIT_MESSAGE")
    with producer(bootstrap, "shop", listener) as survivor:
        child = subprocess.Popen([sys.executable, "-c", KILLED_MEMBER, bootstrap], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert child.stdout is not None
            line = child.stdout.readline().decode()
            assert line, f"the member printed nothing: {child.communicate(timeout=5)[1].decode()}"
            uniq_key, partition, outcome = line.split()
            assert outcome == "left_for_check"
            assert visible(bootstrap, "orders") == []
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        assert status(bootstrap)["pending"] == 1
        wait_for(lambda: status(bootstrap)["pending"] == 0, what="the survivor's commit")
        assert survivor.checks_answered >= 1
    [asked, *_] = listener.checks_of(uniq_key)
    assert (asked.key, asked.value, asked.headers, asked.partition) == (b"order-7", b"paid", [("trace", b"t-7")],
                                                                        int(partition))
    assert listener.executed == []
    [msg] = visible(bootstrap, "orders")
    assert (msg.key(), msg.value(), msg.partition()) == (b"order-7", b"paid", int(partition))
    assert dict(msg.headers())["UNIQ_KEY"] == uniq_key.encode()
    state = status(bootstrap)
    assert (state["committed"], state["rolled_back_unchecked"]) == (1, 0)


def test_unanswered_checks_roll_back(broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = tmp_path / "three-checks.properties"
    config.write_text(BROKER_CONFIG.replace("transactionCheckMax=60", "transactionCheckMax=3"))
    bootstrap = broker_factory(config_file=config).bootstrap_servers
    create_topic(bootstrap, "orders")
    listener = Listener(execute="UNKNOW", check="UNKNOW")
    with producer(bootstrap, "shop", listener) as tx:
        result = tx.send_message_in_transaction("orders", b"v", key=b"k")
        wait_for(lambda: status(bootstrap)["rolled_back_unchecked"] == 1, what="the rollback after 3 checks")
        wait_for(lambda: {m.check_times for m in listener.checks_of(result.uniq_key)} == {1, 2, 3},
                 what="checks 1, 2 and 3")
    state = status(bootstrap)
    assert (state["pending"], state["checks_sent"], state["committed"], state["rolled_back"]) == (0, 3, 0, 0)
    assert visible(bootstrap, "orders") == []


def test_raw_end_for_an_unknown_key_is_refused(bootstrap: str) -> None:
    from confluent_kafka import KafkaError, Producer

    create_topic(bootstrap, "orders")
    raw = Producer({"bootstrap.servers": bootstrap, "log_level": 0, "linger.ms": 0})

    def send(headers: list[tuple[str, bytes]]) -> Any:
        report: list[Any] = []
        raw.produce("orders", value=b"v", partition=0, headers=headers, on_delivery=lambda e, m: report.append(e))
        raw.flush(10)
        return report[0]

    ids = [("PGROUP", b"raw"), ("UNIQ_KEY", b"K-1")]
    err = send([("TRAN_END", b"COMMIT"), *ids])
    assert err is not None and err.code() == KafkaError.INVALID_RECORD
    assert send([("TRAN_MSG", b"true"), *ids]) is None
    assert send([("TRAN_END", b"COMMIT"), *ids]) is None
    err = send([("TRAN_END", b"ROLLBACK"), *ids])  # ended already: refused, still committed
    assert err is not None and err.code() == KafkaError.INVALID_RECORD
    assert [m.value() for m in visible(bootstrap, "orders")] == [b"v"]
    assert status(bootstrap)["committed"] == 1


# -- the docs' example -------------------------------------------------------------------------
def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("order_service_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_order_service_example(bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from confluent_kafka import Producer

    from rmqkafka.client import LocalTransactionState, TransactionMessage

    example = load_example()
    create_topic(bootstrap, "order-created")
    db = str(tmp_path / "orders.db")
    outcomes = example.create_orders(bootstrap, db, [
        {"id": "o-1", "item": "book", "quantity": 2},
        {"id": "o-2", "item": "pen", "quantity": 0},
        {"id": "o-1", "item": "book", "quantity": 2},
    ])
    assert outcomes == ["committed", "rolled_back", "rolled_back"]
    assert "order o-2: rolled_back" in capsys.readouterr().out
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id, item, quantity FROM orders").fetchall() == [("o-1", "book", 2)]
    [event] = visible(bootstrap, "order-created")
    assert (event.key(), json.loads(event.value())) == (b"o-1", {"id": "o-1", "item": "book", "quantity": 2})
    assert dict(event.headers())["source"] == b"order-service"

    listener = example.OrderListener(db)

    def ask(order_id: str) -> Any:
        return listener.check_local_transaction(TransactionMessage("order-created", 0, None,
                                                                   json.dumps({"id": order_id}).encode()))

    assert ask("o-1") is LocalTransactionState.COMMIT_MESSAGE
    assert ask("o-9") is LocalTransactionState.ROLLBACK_MESSAGE

    # The service died between its database commit (o-3) and its end record, and before its
    # database commit (o-4): the half messages wait; the next service instance's checks decide.
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO orders VALUES ('o-3', 'lamp', 1)")
    raw = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    for order_id in ("o-3", "o-4"):
        raw.produce("order-created", key=order_id, value=json.dumps({"id": order_id}).encode(),
                    headers=[("TRAN_MSG", b"true"), ("PGROUP", b"order-service"), ("UNIQ_KEY", order_id.encode())])
    assert raw.flush(10) == 0
    with example.TransactionProducer(bootstrap, "order-service", listener, config={"log_level": 0}):
        wait_for(lambda: status(bootstrap)["pending"] == 0, what="the example's check answers")
    assert sorted(m.key() for m in visible(bootstrap, "order-created")) == [b"o-1", b"o-3"]
    state = status(bootstrap)
    assert (state["committed"], state["rolled_back"], state["rolled_back_unchecked"]) == (2, 3, 0)
