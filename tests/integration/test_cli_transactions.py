"""``rmqk transactions list|describe`` against a real broker, driven by a confluent
transactional producer (as in test_transactions.py).

Commands run in-process through click's CliRunner, as in test_cli_delays.py. The broker
aborts a transaction past its timeout within about a second, so ``list --hanging`` is tested
only for not listing a fresh open transaction; the age computation is unit-tested below.
Likewise ``find-hanging``: this broker refuses a transactional produce to a partition that
is not in the producer's transaction and keeps coordinator state and markers in one
commitlog, so no client can leave a hanging transaction; the integration test checks that
an open transaction past ``--max-transaction-timeout 0`` is a candidate the coordinator
accounts for, and the decision itself is unit-tested below.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rmqkafka.cli.transactions import hanging_among, is_hanging, open_candidates, transaction_duration_ms

pytestmark = [pytest.mark.timeout(120)]


def rmqk(*args: str) -> Result:
    from rmqkafka.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False, prog_name="rmqk")


def ok(*args: str) -> Result:
    result = rmqk(*args)
    assert result.exit_code == 0, f"rmqk {' '.join(args)} -> {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(10)


def _producer(bootstrap: str, txn_id: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
                         "transaction.timeout.ms": 60000, "log_level": 0})
    producer.init_transactions(30)
    return producer


@pytest.fixture
def open_txn(broker: Any) -> Any:
    """(bootstrap, txn id, topic, producer) with a transaction open on partitions 0 and 1."""
    bootstrap = broker.bootstrap_servers
    topic = f"txcli-{uuid.uuid4().hex[:8]}"
    txn_id = f"txcli-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, topic, 2)
    producer = _producer(bootstrap, txn_id)
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce(topic, b"v", partition=partition)
    assert producer.flush(10) == 0
    yield bootstrap, txn_id, topic, producer
    producer.flush(5)


# ---------------------------------------------------------------------------------------------
# integration


@pytest.mark.integration
def test_open_transaction_then_commit(open_txn: Any) -> None:
    bootstrap, txn_id, topic, producer = open_txn
    b = ("-b", bootstrap)

    listed = ok("transactions", "list", *b).stdout
    header, *rows = listed.splitlines()
    assert header.split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    [row] = [r.split() for r in rows if r.split()[0] == txn_id]
    assert row[3] == "Ongoing"
    producer_id = int(row[2])

    [entry] = [t for t in json.loads(ok("transactions", "list", "--json", *b).stdout) if t["transactional_id"] == txn_id]
    assert entry["transaction_state"] == "Ongoing" and entry["producer_id"] == producer_id

    text = ok("transactions", "describe", txn_id, *b).stdout
    header, row_text = text.splitlines()
    assert "TopicPartitions" in header and "TransactionTimeoutMs" in header
    assert "Ongoing" in row_text.split()
    assert row_text.split()[-1] == f"{topic}-0,{topic}-1"

    [d] = json.loads(ok("transactions", "describe", "--json", txn_id, *b).stdout)
    assert d["transactional_id"] == txn_id and d["transaction_state"] == "Ongoing"
    assert d["producer_id"] == producer_id and d["transaction_timeout_ms"] == 60000
    assert sorted(d["topic_partitions"]) == [f"{topic}-0", f"{topic}-1"]
    assert d["transaction_start_time_ms"] > 0 and d["current_transaction_duration_ms"] >= 0

    # --state and --producer-id filters
    ongoing = json.loads(ok("transactions", "list", "--json", "--state", "Ongoing", *b).stdout)
    assert txn_id in [t["transactional_id"] for t in ongoing]
    assert all(t["transaction_state"] == "Ongoing" for t in ongoing)
    committed = json.loads(ok("transactions", "list", "--json", "--state", "CompleteCommit", *b).stdout)
    assert txn_id not in [t["transactional_id"] for t in committed]
    other = json.loads(ok("transactions", "list", "--json", "--producer-id", str(producer_id + 1000), *b).stdout)
    assert txn_id not in [t["transactional_id"] for t in other]

    # a fresh open transaction is not hanging
    hanging = json.loads(ok("transactions", "list", "--hanging", "--json", *b).stdout)
    assert txn_id not in [t["transactional_id"] for t in hanging]
    assert ok("transactions", "list", "--hanging", *b).stdout.split()[0] == "TransactionalId"

    producer.commit_transaction(10)
    [d] = json.loads(ok("transactions", "describe", "--json", txn_id, *b).stdout)
    assert d["transaction_state"] == "CompleteCommit"
    committed = json.loads(ok("transactions", "list", "--json", "--state", "CompleteCommit", *b).stdout)
    assert txn_id in [t["transactional_id"] for t in committed]
    ongoing = json.loads(ok("transactions", "list", "--json", "--state", "Ongoing", *b).stdout)
    assert txn_id not in [t["transactional_id"] for t in ongoing]


@pytest.mark.integration
def test_describe_producers_and_find_hanging(open_txn: Any) -> None:
    bootstrap, txn_id, topic, producer = open_txn
    b = ("-b", bootstrap)
    [d] = json.loads(ok("transactions", "describe", "--json", txn_id, *b).stdout)
    [state] = json.loads(ok("transactions", "describe-producers", "--topic", topic, "--partition", "1", "--json", *b).stdout)
    assert state["producer_id"] == d["producer_id"] and state["producer_epoch"] == d["producer_epoch"]
    assert (state["current_transaction_start_offset"], state["last_sequence"], state["coordinator_epoch"]) == (0, 0, -1)
    header, row = ok("transactions", "describe-producers", "--topic", topic, "--partition", "0", *b).stdout.splitlines()
    assert header.split() == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                              "CurrentTransactionStartOffset"]
    assert row.split()[-1] == "0"

    # open for longer than 0 minutes, so a candidate; its coordinator holds both partitions
    time.sleep(0.01)
    assert json.loads(ok("transactions", "find-hanging", "--max-transaction-timeout", "0", "--json", *b).stdout) == []
    assert ok("transactions", "find-hanging", "--topic", topic, *b).stdout.split() == [
        "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp",
        "Duration(min)"]

    producer.commit_transaction(10)
    [state] = json.loads(ok("transactions", "describe-producers", "--topic", topic, "--partition", "1", "--json", *b).stdout)
    assert (state["current_transaction_start_offset"], state["coordinator_epoch"]) == (-1, 0)
    assert rmqk("transactions", "describe-producers", "--topic", topic, "--partition", "2", *b).exit_code == 1
    result = rmqk("transactions", "find-hanging", "--partition", "0", *b)
    assert result.exit_code == 2 and "--partition needs --topic" in result.stderr


@pytest.mark.integration
def test_describe_unknown_transactional_id(broker: Any) -> None:
    result = rmqk("transactions", "describe", "no-such-txn", "-b", broker.bootstrap_servers)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip() == "rmqk: error: transactional id 'no-such-txn' not found"


@pytest.mark.integration
def test_unknown_state_and_duplicate_ids(open_txn: Any) -> None:
    bootstrap, txn_id, _, _ = open_txn
    result = ok("transactions", "list", "--state", "Sleeping", "--json", "-b", bootstrap)
    assert "'Sleeping'" in result.stderr
    assert txn_id not in [t["transactional_id"] for t in json.loads(result.stdout)]
    described = json.loads(ok("transactions", "describe", txn_id, txn_id, "--json", "-b", bootstrap).stdout)
    assert [d["transactional_id"] for d in described] == [txn_id]


@pytest.mark.integration
def test_describe_without_a_transaction_started(broker: Any) -> None:
    bootstrap = broker.bootstrap_servers
    txn_id = f"txcli-idle-{uuid.uuid4().hex[:8]}"
    producer = _producer(bootstrap, txn_id)  # InitProducerId only: state Empty, start time -1
    [d] = json.loads(ok("transactions", "describe", "--json", txn_id, "-b", bootstrap).stdout)
    assert d["transaction_state"] == "Empty" and d["topic_partitions"] == []
    assert d["transaction_start_time_ms"] == -1 and d["current_transaction_duration_ms"] is None
    row = ok("transactions", "describe", txn_id, "-b", bootstrap).stdout.splitlines()[1].split()
    assert row[1:] == [txn_id, str(d["producer_id"]), "0", "Empty", "60000", "-1", "-", "-"]
    assert not producer.flush(1)


def test_tls_is_refused() -> None:
    result = rmqk("transactions", "list", "-X", "security.protocol=SSL")
    assert result.exit_code == 2
    assert "plain TCP" in result.stderr


def test_describe_needs_an_id() -> None:
    result = rmqk("transactions", "describe")
    assert result.exit_code == 2
    assert result.stderr.startswith("rmqk: error: ")


def test_unreachable_broker() -> None:
    result = rmqk("transactions", "list", "-b", "127.0.0.1:1", "--timeout", "2")
    assert result.exit_code == 1
    assert result.stderr.startswith("rmqk: error: ")


# ---------------------------------------------------------------------------------------------
# unit: the age computation behind --hanging


def test_transaction_duration() -> None:
    assert transaction_duration_ms(-1, 10_000) is None
    assert transaction_duration_ms(4_000, 10_000) == 6_000
    assert transaction_duration_ms(12_000, 10_000) == 0  # clock skew: never negative


def test_is_hanging() -> None:
    base = {"transaction_state": "Ongoing", "transaction_start_time_ms": 1_000, "transaction_timeout_ms": 5_000}
    assert not is_hanging(base, 6_000)  # exactly at the timeout
    assert is_hanging(base, 6_001)
    assert not is_hanging(dict(base, transaction_state="CompleteCommit"), 60_000)
    assert not is_hanging(dict(base, transaction_state="PrepareCommit"), 60_000)
    assert not is_hanging(dict(base, transaction_start_time_ms=-1), 60_000)


# ---------------------------------------------------------------------------------------------
# unit: find-hanging's decision


def _open(producer_id: int, epoch: int = 0, partition: int = 0, last: int = 0, start: int = 5) -> dict[str, Any]:
    return {"topic": "t", "partition": partition, "producer_id": producer_id, "producer_epoch": epoch,
            "last_timestamp": last, "current_transaction_start_offset": start}


def test_open_candidates() -> None:
    producers = [_open(1, last=1_000), _open(2, last=1_000, start=-1), _open(3, last=9_000)]
    assert [s["producer_id"] for s in open_candidates(producers, 10_000, 5_000)] == [1]
    assert [s["producer_id"] for s in open_candidates(producers, 10_000, 0)] == [1, 3]


def test_hanging_among() -> None:
    def described(pid: int, epoch: int, *parts: str) -> dict[str, Any]:
        return {"producer_id": pid, "producer_epoch": epoch, "topic_partitions": list(parts)}

    candidates = [_open(1), _open(2), _open(3, epoch=1), _open(4, partition=1), _open(5), _open(6)]
    ids = {2: "b", 3: "c", 4: "d", 5: "e", 6: "f"}
    descriptions = {"b": described(2, 0, "t-0"),  # accounted for
                    "c": described(3, 2, "t-0"),  # the coordinator moved on to a newer epoch
                    "d": described(4, 0, "t-0"),  # its transaction lacks the partition
                    "f": described(7, 0, "t-0")}  # the id now belongs to another producer
    # 1: no coordinator knows it; 5: listed a moment ago, gone when described
    assert [s["producer_id"] for s in hanging_among(candidates, ids, descriptions)] == [1, 3, 4, 5, 6]
