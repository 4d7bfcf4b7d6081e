"""``rmqk transactions half list|describe`` against a real broker process.

Half messages (RocketMQ transaction messages, rmqsemantics/half_records.py) are produced by a
plain confluent-kafka producer with the headers ``TRAN_MSG=true``, ``PGROUP`` and
``UNIQ_KEY``, and ended with an end record (``TRAN_END=COMMIT|ROLLBACK``) to the same topic.
The back-check test starts its own broker with ``transactionCheckInterval=300`` and
``transactionTimeOut=200`` so that a half message is checked within a second.

Commands run in-process through click's CliRunner, as in test_cli_transactions.py.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

QUIET = {"log_level": 0}


def rmqk(*args: str) -> Result:
    from rmqkafka.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False, prog_name="rmqk")


def ok(*args: str) -> Result:
    result = rmqk(*args)
    assert result.exit_code == 0, f"rmqk {' '.join(args)} -> {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def fails(status: int, *args: str) -> Result:
    result = rmqk(*args)
    assert result.exit_code == status, f"rmqk {' '.join(args)} -> {result.exit_code} (wanted {status})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    errors = [line for line in result.stderr.splitlines() if line.startswith("rmqk: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return result


def rows(text: str, header: str) -> list[dict[str, str]]:
    """The rows of the table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = lines[start].split()
    found = []
    for line in lines[start + 1:]:
        cells = line.split()
        if len(cells) != len(names):
            break
        found.append(dict(zip(names, cells)))
    return found


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def _send(bootstrap: str, topic: str, records: list[tuple[int, list[tuple[str, bytes]]]]) -> None:
    """Produce (partition, headers) records with value b"v"; every delivery must succeed."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0, **QUIET})
    errors: list[Any] = []
    for partition, headers in records:
        producer.produce(topic, b"v", partition=partition, headers=headers,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(10) == 0
    assert errors == []


def half(group: str, key: str) -> list[tuple[str, bytes]]:
    return [("TRAN_MSG", b"true"), ("PGROUP", group.encode()), ("UNIQ_KEY", key.encode())]


def end(group: str, key: str, decision: str) -> list[tuple[str, bytes]]:
    return [("TRAN_END", decision.encode()), ("PGROUP", group.encode()), ("UNIQ_KEY", key.encode())]


def counters(text: str) -> dict[str, int]:
    """The counters of ``list``'s first line ("3 pending, 0 committed, ... (settings)")."""
    line = text.splitlines()[0].split(" (")[0]
    return {label: int(n) for n, label in (re.fullmatch(r"(\d+) (.+)", part).groups() for part in line.split(", "))}


def _visible(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes | None]]:
    """(partition, UNIQ_KEY) of every record a consumer reads from ``topic`` up to its end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}",
                         "enable.partition.eof": True, **QUIET})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, at_end = [], set()
    deadline = time.monotonic() + 10
    while len(at_end) < partitions and time.monotonic() < deadline:
        for msg in consumer.consume(100, 0.5):
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            seen.append((msg.partition(), dict(msg.headers() or []).get("UNIQ_KEY")))
    consumer.close()
    return seen


# ---------------------------------------------------------------------------------------------


def test_list_describe_and_end(broker: Any) -> None:
    bootstrap = broker.bootstrap_servers
    topic = f"half-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, topic, 2)

    empty = ok("transactions", "half", "list", "-b", bootstrap)
    assert counters(empty.stdout)["pending"] == 0
    assert rows(empty.stdout, "UniqKey") == []

    _send(bootstrap, topic, [(0, half("orders", "k-1")), (1, half("orders", "k-2")), (1, half("billing", "k-3"))])
    listed = ok("transactions", "half", "list", "-b", bootstrap)
    first = listed.stdout.splitlines()[0]
    assert counters(listed.stdout) == {"pending": 3, "committed": 0, "rolled back": 0,
                                       "rolled back after max checks": 0, "checks sent": 0}, first
    assert "transactionTimeOut 6000 ms" in first
    table = rows(listed.stdout, "UniqKey")
    assert listed.stdout.splitlines()[1].split() == ["UniqKey", "Group", "Topic", "Partition", "AgeMs", "Checks"]
    # oldest first, by half offset: the two partitions' batches may have arrived in either order
    assert sorted((r["UniqKey"], r["Group"], r["Topic"], r["Partition"], r["Checks"]) for r in table) == [
        ("k-1", "orders", topic, "0", "0"), ("k-2", "orders", topic, "1", "0"), ("k-3", "billing", topic, "1", "0")]
    assert all(int(r["AgeMs"]) >= 0 for r in table)
    assert "more pending than shown" not in listed.stdout

    only = ok("transactions", "half", "list", "--group", "billing", "-b", bootstrap)
    assert [r["UniqKey"] for r in rows(only.stdout, "UniqKey")] == ["k-3"]

    document = json.loads(ok("transactions", "half", "list", "--json", "-b", bootstrap).stdout)
    assert document["pending"] == 3 and document["committed"] == 0
    assert [e["uniq_key"] for e in document["oldest"]] == [r["UniqKey"] for r in table]
    assert [e["half_offset"] for e in document["oldest"]] == sorted(e["half_offset"] for e in document["oldest"])
    assert {"half_offset", "stored_ms", "age_ms", "first_check_ms"} <= set(document["oldest"][0])
    filtered = json.loads(ok("transactions", "half", "list", "--json", "--group", "orders", "-b", bootstrap).stdout)
    assert sorted(e["uniq_key"] for e in filtered["oldest"]) == ["k-1", "k-2"]

    described = ok("transactions", "half", "describe", "orders", "k-2", "k-1", "-b", bootstrap)
    got = rows(described.stdout, "UniqKey")
    assert [(r["UniqKey"], r["Group"], r["Topic"], r["Partition"], r["Checks"]) for r in got] == [
        ("k-2", "orders", topic, "1", "0"), ("k-1", "orders", topic, "0", "0")]
    assert int(got[0]["FirstCheckMs"]) == int(got[0]["StoredMs"]) + 6000
    entries = json.loads(ok("transactions", "half", "describe", "billing", "k-3", "--json", "-b", bootstrap).stdout)
    assert len(entries) == 1 and entries[0]["uniq_key"] == "k-3" and entries[0]["partition"] == 1

    # k-1 and k-3 belong to other groups than asked: not pending there
    wrong = fails(1, "transactions", "half", "describe", "billing", "k-1", "-b", bootstrap)
    assert "rmqk: error: half message UNIQ_KEY k-1 of group billing is not pending " \
           "(unknown, or already committed or rolled back)" in wrong.stderr

    # commit k-1, roll back k-3: they leave the list; k-1 becomes visible, k-3 never does
    _send(bootstrap, topic, [(1, end("orders", "k-1", "COMMIT")), (0, end("billing", "k-3", "ROLLBACK"))])
    after = ok("transactions", "half", "list", "-b", bootstrap)
    assert counters(after.stdout) == {"pending": 1, "committed": 1, "rolled back": 1,
                                      "rolled back after max checks": 0, "checks sent": 0}
    assert [r["UniqKey"] for r in rows(after.stdout, "UniqKey")] == ["k-2"]
    gone = fails(1, "transactions", "half", "describe", "orders", "k-1", "k-2", "-b", bootstrap)
    assert [r["UniqKey"] for r in rows(gone.stdout, "UniqKey")] == ["k-2"]  # the pending one is still shown
    assert "half message UNIQ_KEY k-1 of group orders is not pending" in gone.stderr
    both = fails(1, "transactions", "half", "describe", "billing", "k-3", "nope", "--json", "-b", bootstrap)
    assert json.loads(both.stdout) == []
    assert "half messages UNIQ_KEY k-3, nope of group billing are not pending" in both.stderr
    assert _visible(bootstrap, topic, 2) == [(0, b"k-1")]


def test_more_pending_than_shown(broker: Any) -> None:
    bootstrap = broker.bootstrap_servers
    topic = f"half-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, topic, 1)
    _send(bootstrap, topic, [(0, half("bulk" if i % 2 else "other", f"m-{i:04d}")) for i in range(1005)])
    limit = len(json.loads(ok("transactions", "half", "list", "--json", "-b", bootstrap).stdout)["oldest"])
    assert 0 < limit < 1005  # the broker lists the oldest STATUS_LIMIT (100 at the time of writing)
    listed = ok("transactions", "half", "list", "-b", bootstrap)
    table = rows(listed.stdout, "UniqKey")
    assert [r["UniqKey"] for r in table] == [f"m-{i:04d}" for i in range(limit)]
    assert listed.stdout.splitlines()[-1] == (
        f"{1005 - limit} more pending than shown: the broker lists only the oldest {limit} of 1005")
    grouped = ok("transactions", "half", "list", "--group", "bulk", "-b", bootstrap)
    assert [r["UniqKey"] for r in rows(grouped.stdout, "UniqKey")] == [f"m-{i:04d}" for i in range(1, limit, 2)]
    assert "(those of group bulk among them)" in grouped.stdout.splitlines()[-1]
    # describe asks by name: not limited to the oldest 1000
    described = ok("transactions", "half", "describe", "bulk", "m-1003", "m-0001", "-b", bootstrap)
    assert [r["UniqKey"] for r in rows(described.stdout, "UniqKey")] == ["m-1003", "m-0001"]


def test_back_check_counted(broker_factory: Callable[..., Any], tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    # transactionCheckMax: the default 15 checks (4.7 s) ran out on a loaded machine before the
    # CLI calls below answered the check, and the message was rolled back under them
    config.write_text("transactionCheckInterval=300\ntransactionTimeOut=200\ntransactionCheckMax=1000\n")
    bootstrap = broker_factory(config_file=config).bootstrap_servers
    topic = f"half-{uuid.uuid4().hex[:8]}"
    _create(bootstrap, topic, 1)
    _send(bootstrap, topic, [(0, half("checked", "c-1"))])
    deadline = time.monotonic() + 15
    while True:
        [row] = rows(ok("transactions", "half", "describe", "checked", "c-1", "-b", bootstrap).stdout, "UniqKey")
        if int(row["Checks"]) >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert int(row["Checks"]) >= 1
    listed = ok("transactions", "half", "list", "-b", bootstrap)
    assert counters(listed.stdout)["checks sent"] >= 1
    assert "transactionTimeOut 200 ms, transactionCheckInterval 300 ms" in listed.stdout.splitlines()[0]
    [listed_row] = rows(listed.stdout, "UniqKey")
    assert listed_row["UniqKey"] == "c-1" and int(listed_row["Checks"]) >= 1
    # the producer answers the check: committed, no longer pending
    _send(bootstrap, topic, [(0, end("checked", "c-1", "COMMIT"))])
    after = ok("transactions", "half", "list", "-b", bootstrap)
    assert counters(after.stdout)["pending"] == 0 and counters(after.stdout)["committed"] == 1


def test_describe_refuses_tls_properties() -> None:
    result = fails(2, "transactions", "half", "describe", "g", "k", "-X", "security.protocol=SSL",
                   "-b", "127.0.0.1:1")
    assert "plain TCP only" in result.stderr


def test_list_unreachable_broker() -> None:
    result = fails(1, "transactions", "half", "list", "-b", "127.0.0.1:1", "--timeout", "2")
    assert "127.0.0.1:1" in result.stderr
