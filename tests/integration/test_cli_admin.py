"""Issue #3: the admin command line (``rmqk topics|produce|consume|groups``) against a real broker.

The commands are Kafka clients (confluent-kafka), so every test here drives a real broker
process (:class:`rmqkafka.adapter.embedded.EmbeddedBroker`, one for the module; each test uses its
own topics and groups). Most commands run in-process through click's CliRunner (a
subprocess costs ~0.5 s of interpreter and librdkafka start-up); the contract that needs a
real process (exit status and timing of an unreachable broker, progress on stderr, a group
member that keeps running, the lazy imports) runs ``python -m rmqkafka`` as a subprocess.

What is checked: tables and ``--json`` of each command; one-line ``rmqk: error: ...`` with
status 2 for bad command lines and status 1 for broker-side refusals and unreachable
brokers; produce/consume round trips with keys, headers and tags; start positions (offset,
tail, timestamp); committed offsets and LAG of a group; reset-offsets dry run vs execute;
refusal while a group has active members.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]



# ---------------------------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from rmqkafka.adapter.embedded import EmbeddedBroker

    broker = EmbeddedBroker(data_dir=tmp_path_factory.mktemp("cli-admin-broker"))
    with broker:
        yield broker
    if broker.stderr:
        sys.stderr.write(f"--- broker stderr ---\n{broker.stderr}\n")


@pytest.fixture
def bootstrap(kafka: Any) -> str:
    return kafka.bootstrap_servers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def rmqk(*args: str, input: bytes | str | None = None) -> Result:
    """Run ``rmqk ARGS`` in-process (click's CliRunner); stdout and stderr are kept apart."""
    from rmqkafka.cli import main

    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False, prog_name="rmqk")


def ok(*args: str, input: bytes | str | None = None) -> Result:
    result = rmqk(*args, input=input)
    assert result.exit_code == 0, f"rmqk {' '.join(args)} -> {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def fails(status: int, *args: str, input: bytes | str | None = None) -> str:
    """Run a command that must fail with ``status``; returns its single stderr error line."""
    result = rmqk(*args, input=input)
    assert result.exit_code == status, f"rmqk {' '.join(args)} -> {result.exit_code} (wanted {status})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    errors = [line for line in result.stderr.splitlines() if line.startswith("rmqk: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return errors[0]


def run_process(*args: str, input: bytes | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmqkafka", *args],
        check=False,
        input=input.decode() if input is not None else None,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=timeout,
    )


def table(text: str) -> list[dict[str, str]]:
    """Parse the first plain table in ``text`` (header line in capitals) into dicts."""
    lines = [line for line in text.splitlines()]
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"[A-Z#][A-Z#-]*(  +[A-Z#][A-Z#-]*)*", line.strip()))
    header = lines[start]
    names = header.split()
    starts = [header.index(n) if i == 0 else header.index("  " + n) + 2 for i, n in enumerate(names)]
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        rows.append(dict(zip(names, cells)))
    return rows


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def produce_lines(bootstrap: str, topic: str, lines: list[str], *extra: str) -> dict[str, Any]:
    result = ok("produce", topic, "-b", bootstrap, "--json", *extra, input="".join(f"{line}\n" for line in lines))
    return json.loads(result.stdout)


def consume_json(bootstrap: str, topic: str, *extra: str) -> list[dict[str, Any]]:
    result = ok("consume", topic, "-b", bootstrap, "--json", "--exit-at-end", *extra)
    return [json.loads(line) for line in result.stdout.splitlines()]


# ---------------------------------------------------------------------------------------------
# start-up cost and unreachable brokers


def test_cli_module_does_not_import_clients() -> None:
    code = "import sys, rmqkafka.cli; print(sorted(m for m in sys.modules if m.startswith(('confluent_kafka', 'rmqkafka.cli.'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=True).stdout
    assert out.strip() == "[]"  # serve too is imported only when it runs


def test_help_lists_client_commands() -> None:
    result = ok("--help")
    for name in ("topics", "produce", "consume", "groups", "serve"):
        assert re.search(rf"^\s+{name}\s", result.stdout, re.MULTILINE), result.stdout
    assert "reset-offsets" in ok("groups", "--help").stdout


@pytest.mark.parametrize(
    "args",
    [
        ("topics", "list"),
        ("topics", "create", "t"),
        ("produce", "t"),
        ("consume", "t"),
        ("groups", "list"),
        ("groups", "describe", "g"),
    ],
    ids=lambda a: "-".join(a),
)
def test_unreachable_broker_fails_fast_with_one_line(args: tuple[str, ...]) -> None:
    port = closed_port()
    started = time.monotonic()
    proc = run_process(*args, "--bootstrap-server", f"127.0.0.1:{port}", input=b"x\n" if args[0] == "produce" else None)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"rmqk: error: cannot reach broker at 127.0.0.1:{port}"), proc.stderr
    assert "Connection refused" in proc.stderr
    assert elapsed < 4.0, f"took {elapsed:.1f} s"


def test_silent_server_times_out_after_timeout() -> None:
    """A server that accepts connections but never answers: the --timeout bounds the wait."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    try:
        port = server.getsockname()[1]
        started = time.monotonic()
        proc = run_process("topics", "list", "-b", f"127.0.0.1:{port}", "--timeout", "1.5")
        elapsed = time.monotonic() - started
    finally:
        server.close()
        for conn in accepted:
            conn.close()
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"rmqk: error: broker at 127.0.0.1:{port} did not answer within 1.5 s"), proc.stderr
    assert proc.stderr.count("\n") == 1
    assert 1.4 < elapsed < 5.0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("topics", "list", "-b", "nohostport"), "invalid --bootstrap-server 'nohostport'"),
        (("topics", "list", "-b", "h:99999"), "invalid --bootstrap-server"),
        (("topics", "list", "--timeout", "0"), "--timeout"),
        (("topics", "create", "t", "--partitions", "0"), "--partitions"),
        (("topics", "create", "t", "--config", "retention.ms"), "invalid --config 'retention.ms': expected KEY=VALUE"),
        (("topics", "create"), "Missing argument"),
        (("topics", "alter", "t"), "nothing to alter"),
        (("topics", "frobnicate"), "No such command 'frobnicate'"),
        (("produce", "t", "--header", "novalue"), "invalid --header 'novalue'"),
        (("produce", "t", "--acks", "2"), "--acks"),
        (("produce", "t", "--key-separator", ""), "--key-separator must not be empty"),
        (("consume", "t", "--from-beginning", "--offset", "3"), "--from-beginning and --offset cannot be used together"),
        (("consume", "t", "--offset", "soon"), "is not an offset"),
        (("consume", "t", "--timestamp", "yesterday"), "invalid --timestamp 'yesterday'"),
        (("consume", "t", "--group", "g", "--partition", "0"), "--partition cannot be used with --group"),
        (("consume", "t", "--json", "--print-key"), "choose one of --format, --json"),
        (("consume", "t", "-X", "no.such.property=1"), "invalid client configuration"),
        (("groups", "reset-offsets", "g", "--topic", "t"), "give exactly one of --to-earliest"),
        (("groups", "reset-offsets", "g", "--to-latest"), "give --topic (repeatable) or --all-topics"),
        (("groups", "reset-offsets", "g", "--topic", "t:x", "--to-latest"), "partitions must be numbers"),
        (("groups", "reset-offsets", "g", "--topic", "t", "--to-datetime", "noon", "--execute"), "invalid --to-datetime"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_bad_command_lines_exit_2_with_one_line(bootstrap: str, args: tuple[str, ...], needle: str) -> None:
    if "-b" not in args:
        args = (*args, "-b", bootstrap)
    line = fails(2, *args)
    assert needle in line, line


# ---------------------------------------------------------------------------------------------
# topics


def test_topics_create_list_describe_delete(bootstrap: str) -> None:
    a, b = unique("orders"), unique("audit")
    created = ok("topics", "create", a, "--partitions", "3", "--config", "retention.ms=86400000", "-b", bootstrap)
    assert created.stdout == f"created topic {a} with 3 partitions\n"
    as_json = json.loads(ok("topics", "create", b, "-b", bootstrap, "--json").stdout)
    assert as_json == [{"topic": b, "created": True, "validated": False, "existed": False, "partitions": 1}]

    names = ok("topics", "list", "-b", bootstrap).stdout.splitlines()
    assert a in names and b in names and names == sorted(names)
    listed = {t["topic"]: t["partitions"] for t in json.loads(ok("topics", "list", "-b", bootstrap, "--json").stdout)}
    assert listed[a] == 3 and listed[b] == 1

    produce_lines(bootstrap, a, ["one", "two"], "--partition", "2")
    text = ok("topics", "describe", a, "-b", bootstrap).stdout
    first = text.splitlines()[0]
    assert first.startswith(f"Topic: {a}  TopicId: ")
    assert "Partitions: 3  ReplicationFactor: 1  Configs: retention.ms=86400000" in first
    rows = table(text)
    assert [r["PARTITION"] for r in rows] == ["0", "1", "2"]
    assert rows[2] == {
        "PARTITION": "2", "LEADER": "0", "REPLICAS": "0", "ISR": "0",
        "EARLIEST-OFFSET": "0", "LATEST-OFFSET": "2", "RECORDS": "2",
    }
    [doc] = json.loads(ok("topics", "describe", a, "-b", bootstrap, "--json").stdout)
    assert doc["topic"] == a and doc["partition_count"] == 3 and doc["replication_factor"] == 1
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", doc["topic_id"])
    assert doc["configs"] == {"retention.ms": "86400000"}  # only what differs from the defaults
    assert doc["partitions"][2] == {"partition": 2, "leader": 0, "replicas": [0], "isr": [0], "earliest_offset": 0, "latest_offset": 2}
    assert doc["retention"] == {
        "retention.ms": {"value": "86400000", "source": "topic"},
        "retention.bytes": {"value": "-1", "source": "default"},
        "cleanup.policy": {"value": "delete", "source": "default"},
        "rule": "per partition",
    }
    assert "Retention: retention.ms=86400000 (topic)  retention.bytes=-1 (default)" in text.splitlines()[1]
    [other] = json.loads(ok("topics", "describe", b, "-b", bootstrap, "--json").stdout)
    assert other["retention"]["retention.ms"]["source"] != "topic"
    assert other["retention"]["rule"] == "broker log.retention.* on commitlog segments"
    all_configs = json.loads(ok("topics", "describe", b, "--all-configs", "-b", bootstrap, "--json").stdout)[0]["configs"]
    assert "cleanup.policy" in all_configs and "retention.ms" in all_configs

    deleted = ok("topics", "delete", a, b, "-b", bootstrap)
    assert deleted.stdout == f"deleted topic {a}\ndeleted topic {b}\n"
    assert a not in ok("topics", "list", "-b", bootstrap).stdout.splitlines()


def test_topics_errors(bootstrap: str) -> None:
    name = unique("dup")
    ok("topics", "create", name, "-b", bootstrap)
    line = fails(1, "topics", "create", name, "-b", bootstrap)
    assert line == f"rmqk: error: cannot create topic '{name}': topic '{name}' already exists (TOPIC_ALREADY_EXISTS)"
    assert ok("topics", "create", name, "--if-not-exists", "-b", bootstrap).stdout == f"topic {name} already exists\n"

    line = fails(1, "topics", "create", unique("cfg"), "--config", "no.such.config=1", "-b", bootstrap)
    assert "Unknown topic config name: no.such.config" in line and "INVALID_CONFIG" in line
    line = fails(1, "topics", "create", unique("cfg"), "--config", "retention.ms=soon", "-b", bootstrap)
    assert "retention.ms" in line and "INVALID_CONFIG" in line
    line = fails(1, "topics", "create", "bad name!", "-b", bootstrap)
    assert "cannot create topic 'bad name!'" in line

    missing = unique("missing")
    assert fails(1, "topics", "describe", missing, "-b", bootstrap) == f"rmqk: error: topic '{missing}' does not exist"
    assert fails(1, "topics", "delete", missing, "-b", bootstrap) == f"rmqk: error: cannot delete topic '{missing}': it does not exist"
    assert ok("topics", "delete", missing, "--if-exists", "-b", bootstrap).stdout == f"topic {missing} does not exist\n"
    assert fails(1, "topics", "alter", missing, "--partitions", "2", "-b", bootstrap) == f"rmqk: error: topic '{missing}' does not exist"

    dry = unique("dry")
    assert json.loads(ok("topics", "create", dry, "--dry-run", "-b", bootstrap, "--json").stdout)[0]["validated"] is True
    assert dry not in ok("topics", "list", "-b", bootstrap).stdout.splitlines()


def test_topics_alter(bootstrap: str) -> None:
    name = unique("grow")
    ok("topics", "create", name, "--partitions", "2", "-b", bootstrap)
    assert ok("topics", "alter", name, "--partitions", "5", "-b", bootstrap).stdout == f"altered topic {name}: partitions 2 -> 5\n"
    assert fails(1, "topics", "alter", name, "--partitions", "3", "-b", bootstrap) == (
        f"rmqk: error: topic '{name}' has 5 partitions; the count can only grow"
    )
    ok("topics", "alter", name, "--config", "retention.ms=60000", "--config", "max.message.bytes=2000000", "-b", bootstrap)
    configs = json.loads(ok("topics", "describe", name, "-b", bootstrap, "--json").stdout)[0]["configs"]
    assert configs == {"max.message.bytes": "2000000", "retention.ms": "60000"}
    result = json.loads(ok("topics", "alter", name, "--delete-config", "retention.ms", "-b", bootstrap, "--json").stdout)
    assert result == {"topic": name, "dry_run": False, "set": {}, "deleted": ["retention.ms"]}
    doc = json.loads(ok("topics", "describe", name, "-b", bootstrap, "--json").stdout)[0]
    assert doc["configs"] == {"max.message.bytes": "2000000"} and doc["partition_count"] == 5
    line = fails(1, "topics", "alter", name, "--config", "retention.ms=abc", "-b", bootstrap)
    assert "cannot alter configs of topic" in line and "INVALID_CONFIG" in line
    ok("topics", "alter", name, "--partitions", "8", "--dry-run", "-b", bootstrap)
    assert json.loads(ok("topics", "describe", name, "-b", bootstrap, "--json").stdout)[0]["partition_count"] == 5


# ---------------------------------------------------------------------------------------------
# produce and consume


def test_produce_consume_round_trip_with_keys_headers_and_tag(bootstrap: str) -> None:
    topic = unique("rt")
    ok("topics", "create", topic, "--partitions", "2", "-b", bootstrap)
    lines = ["k1:v1", "k2:v2", "k1:with:colons", ":empty key"]
    summary = produce_lines(bootstrap, topic, lines, "--key-separator", ":", "--header", "src=cli", "--header", "n=1", "--tag", "TagA")
    assert summary["produced"] == 4 and summary["failed"] == 0
    assert sum(p["count"] for p in summary["partitions"]) == 4

    records = consume_json(bootstrap, topic, "--from-beginning")
    assert sorted((r["key"], r["value"]) for r in records) == sorted([("k1", "v1"), ("k2", "v2"), ("k1", "with:colons"), ("", "empty key")])
    for r in records:
        assert r["headers"] == [{"key": "src", "value": "cli"}, {"key": "n", "value": "1"}, {"key": "TAGS", "value": "TagA"}]
        assert r["topic"] == topic and r["timestamp_type"] == "CreateTime"
    by_key = {}
    for r in records:
        by_key.setdefault(r["key"], set()).add(r["partition"])
    assert len(by_key["k1"]) == 1  # same key, same partition

    text = ok(
        "consume", topic, "-b", bootstrap, "--from-beginning", "--exit-at-end", "--partition", str(records[0]["partition"]),
        "--print-partition", "--print-offset", "--print-headers", "--print-key",
    ).stdout
    first = text.splitlines()[0].split("\t")
    assert first[:3] == [f"Partition:{records[0]['partition']}", "Offset:0", "src:cli,n:1,TAGS:TagA"]
    formatted = ok("consume", topic, "-b", bootstrap, "--from-beginning", "-e", "--format", "%k=%s@%p/%o [%h]").stdout.splitlines()
    assert min(formatted).startswith("=empty key@")
    assert any(re.fullmatch(r"k1=v1@\d/\d \[src=cli,n=1,TAGS=TagA\]", line) for line in formatted)
    plain = ok("consume", topic, "-b", bootstrap, "--from-beginning", "-e").stdout.splitlines()
    assert sorted(plain) == sorted(["v1", "v2", "with:colons", "empty key"])


def test_produce_text_summary_and_record_errors(bootstrap: str) -> None:
    topic = unique("sum")
    ok("topics", "create", topic, "-b", bootstrap)
    result = ok("produce", topic, "-b", bootstrap, input="a\nb\r\nc")
    assert result.stdout == f"produced 3 records to {topic}: partition 0 offsets 0-2\n"
    assert consume_json(bootstrap, topic, "--from-beginning")[1]["value"] == "b"  # CRLF stripped

    result = rmqk("produce", topic, "-b", bootstrap, "--key-separator", "=", input="k=v\nno separator\nk=w\n")
    assert result.exit_code == 2
    assert result.stdout == f"produced 2 records to {topic}: partition 0 offsets 3-4; 1 lines skipped\n"
    assert "rmqk: error: line 2: no key separator '='; line skipped" in result.stderr

    assert fails(1, "produce", topic, "--partition", "3", "-b", bootstrap, input="x\n") == (
        f"rmqk: error: topic '{topic}' has no partition 3 (it has 1)"
    )


def test_produce_from_file_with_options(bootstrap: str, tmp_path: Path) -> None:
    topic = unique("file")
    ok("topics", "create", topic, "--partitions", "3", "-b", bootstrap)
    path = tmp_path / "records.txt"
    path.write_text("".join(f"line {i}\n" for i in range(50)))
    summary = json.loads(
        ok("produce", topic, "--file", str(path), "--partition", "1", "--acks", "1", "--compression", "zstd", "-b", bootstrap, "--json").stdout
    )
    assert summary == {
        "topic": topic, "produced": 50, "failed": 0, "skipped_lines": 0,
        "partitions": [{"partition": 1, "first_offset": 0, "last_offset": 49, "count": 50}],
    }
    records = consume_json(bootstrap, topic, "--from-beginning")
    assert [r["value"] for r in records] == [f"line {i}" for i in range(50)]
    blind = ok("produce", topic, "--acks", "0", "--partition", "2", "-b", bootstrap, input="x\ny\n")
    assert blind.stdout == f"produced 2 records to {topic}: partition 2: 2 records (acks=0: offsets unknown)\n"
    absent = tmp_path / "absent.txt"
    assert fails(2, "produce", topic, "--file", str(absent), "-b", bootstrap) == f"rmqk: error: cannot read {absent}: No such file or directory"


def test_consume_start_positions(bootstrap: str) -> None:
    topic = unique("pos")
    ok("topics", "create", topic, "-b", bootstrap)
    produce_lines(bootstrap, topic, [f"m{i}" for i in range(10)])
    values = lambda *extra: [r["value"] for r in consume_json(bootstrap, topic, *extra)]
    assert values("--from-beginning") == [f"m{i}" for i in range(10)]
    assert values("--offset", "7") == ["m7", "m8", "m9"]
    assert values("--offset", "-2") == ["m8", "m9"]
    assert values("--offset", "100") == []  # clamped to the end
    assert values("--offset", "beginning", "--max-messages", "3") == ["m0", "m1", "m2"]
    assert values() == []  # default: new records only
    group = unique("g")  # with a group, an explicit start overrides the committed offsets
    assert values("--group", group, "--offset", "7") == ["m7", "m8", "m9"]
    assert committed(bootstrap, group) == {0: 10}
    assert values("--group", group, "--offset", "-4") == ["m6", "m7", "m8", "m9"]
    assert values("--group", group) == []  # resumes from the commit
    assert fails(1, "consume", unique("absent"), "-b", bootstrap, "-e").endswith("does not exist")
    assert fails(1, "consume", topic, "-b", bootstrap, "-e", "--partition", "4") == f"rmqk: error: topic '{topic}' has no partition 4 (it has 1)"


def test_consume_by_timestamp(bootstrap: str) -> None:
    topic = unique("ts")
    ok("topics", "create", topic, "-b", bootstrap)
    produce_lines(bootstrap, topic, ["old-1", "old-2"])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce_lines(bootstrap, topic, ["new-1", "new-2"])

    by_ms = consume_json(bootstrap, topic, "--timestamp", str(cut))
    assert [r["value"] for r in by_ms] == ["new-1", "new-2"]
    assert all(r["timestamp"] >= cut for r in by_ms)
    iso = datetime.fromtimestamp(cut / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert [r["value"] for r in consume_json(bootstrap, topic, "--timestamp", iso)] == ["new-1", "new-2"]
    assert [r["value"] for r in consume_json(bootstrap, topic, "--timestamp", "2001-01-01T00:00:00+00:00")] == ["old-1", "old-2", "new-1", "new-2"]
    assert consume_json(bootstrap, topic, "--timestamp", str(int(time.time() * 1000) + 3_600_000)) == []


def test_progress_on_stderr_only_when_asked(bootstrap: str) -> None:
    topic = unique("prog")
    ok("topics", "create", topic, "-b", bootstrap)
    data = b"".join(b"%d\n" % i for i in range(20000))
    quiet = run_process("produce", topic, "-b", bootstrap, input=data)
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = run_process("consume", topic, "-b", bootstrap, "--from-beginning", "-e", "--progress")
    assert loud.returncode == 0
    assert loud.stdout.splitlines() == [str(i) for i in range(20000)]
    assert loud.stderr.splitlines()[-1] == "rmqk: consumed 20000 records"


def test_progress_meter_redraws_in_place_on_a_terminal() -> None:
    from rmqkafka.cli.common import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    meter = Progress(None, "sent", stream=stream, delay=0)
    for _ in range(5):
        time.sleep(0.002)
        meter.add(10)
    meter.done()
    out = stream.getvalue()
    assert out.startswith("\rsent: ") and "50 records" in out and "records/s" in out
    assert out.endswith("\r") and "\n" not in out  # the bar is removed; no line is left behind
    off = io.StringIO()  # not a terminal: nothing unless --progress
    meter = Progress(None, "sent", stream=off)
    meter.add(5)
    meter.done()
    assert off.getvalue() == ""


# ---------------------------------------------------------------------------------------------
# groups


def group_doc(bootstrap: str, group: str) -> dict[str, Any]:
    [doc] = json.loads(ok("groups", "describe", group, "-b", bootstrap, "--json").stdout)
    return doc


def committed(bootstrap: str, group: str) -> dict[int, int | None]:
    return {p["partition"]: p["current_offset"] for p in group_doc(bootstrap, group)["partitions"]}


def test_group_lag_after_partial_consumption(bootstrap: str) -> None:
    topic, group = unique("lag"), unique("g")
    ok("topics", "create", topic, "-b", bootstrap)
    produce_lines(bootstrap, topic, [f"m{i}" for i in range(10)])
    got = ok("consume", topic, "-g", group, "--from-beginning", "--max-messages", "3", "-b", bootstrap)
    assert got.stdout.splitlines() == ["m0", "m1", "m2"]
    assert got.stderr == "rmqk: consumed 3 records\n"

    listed = {g["group"]: g for g in json.loads(ok("groups", "list", "-b", bootstrap, "--json").stdout)}
    assert listed[group]["state"] == "Empty"
    rows = {r["GROUP"]: r for r in table(ok("groups", "list", "-b", bootstrap).stdout)}
    assert rows[group]["STATE"] == "Empty"

    doc = group_doc(bootstrap, group)
    assert doc["state"] == "Empty" and doc["members"] == [] and doc["total_lag"] == 7
    assert doc["partitions"] == [
        {"topic": topic, "partition": 0, "current_offset": 3, "log_end_offset": 10, "lag": 7, "consumer_id": None, "host": None, "client_id": None}
    ]
    text = ok("groups", "describe", group, "-b", bootstrap).stdout
    assert table(text)[0]["TOTAL-LAG"] == "7"
    assert table(text.split("\n\n")[-1]) == [
        {"GROUP": group, "TOPIC": topic, "PARTITION": "0", "CURRENT-OFFSET": "3", "LOG-END-OFFSET": "10", "LAG": "7", "CONSUMER-ID": "-", "HOST": "-", "CLIENT-ID": "-"}
    ]

    # More records raise the lag; the group then resumes exactly where it committed.
    produce_lines(bootstrap, topic, ["m10", "m11"])
    assert group_doc(bootstrap, group)["total_lag"] == 9
    rest = ok("consume", topic, "-g", group, "-e", "-b", bootstrap).stdout.splitlines()
    assert rest == [f"m{i}" for i in range(3, 12)]
    assert group_doc(bootstrap, group)["partitions"][0]["lag"] == 0

    assert fails(1, "groups", "describe", unique("nogroup"), "-b", bootstrap).endswith("does not exist")


def test_groups_reset_offsets(bootstrap: str) -> None:
    topic, group = unique("reset"), unique("g")
    ok("topics", "create", topic, "-b", bootstrap)
    produce_lines(bootstrap, topic, [f"old{i}" for i in range(5)])
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce_lines(bootstrap, topic, [f"new{i}" for i in range(5)])
    ok("consume", topic, "-g", group, "--from-beginning", "--max-messages", "3", "-b", bootstrap)
    assert committed(bootstrap, group) == {0: 3}

    dry = rmqk("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "-b", bootstrap)
    assert dry.exit_code == 0
    assert table(dry.stdout) == [{"GROUP": group, "TOPIC": topic, "PARTITION": "0", "CURRENT-OFFSET": "3", "NEW-OFFSET": "0"}]
    assert "dry run" in dry.stderr
    assert committed(bootstrap, group) == {0: 3}  # nothing changed

    ok("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", "-b", bootstrap)
    assert committed(bootstrap, group) == {0: 0}
    ok("groups", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute", "-b", bootstrap)
    assert committed(bootstrap, group) == {0: 10}
    plan = json.loads(ok("groups", "reset-offsets", group, "--topic", topic, "--to-datetime", str(cut), "--execute", "--json", "-b", bootstrap).stdout)
    assert plan == {"group": group, "executed": True, "partitions": [{"topic": topic, "partition": 0, "current_offset": 10, "new_offset": 5}]}
    assert committed(bootstrap, group) == {0: 5}
    assert ok("consume", topic, "-g", group, "-e", "-b", bootstrap).stdout.splitlines() == [f"new{i}" for i in range(5)]

    iso = datetime.fromtimestamp(cut / 1000, tz=UTC).isoformat()
    ok("groups", "reset-offsets", group, "--all-topics", "--to-datetime", iso, "--execute", "-b", bootstrap)
    assert committed(bootstrap, group) == {0: 5}
    ok("groups", "reset-offsets", group, "--topic", f"{topic}:0", "--shift-by", "-2", "--execute", "-b", bootstrap)
    assert committed(bootstrap, group) == {0: 3}
    shifted = rmqk("groups", "reset-offsets", group, "--topic", topic, "--shift-by", "-100", "--execute", "-b", bootstrap)
    assert shifted.exit_code == 0 and "outside 0..10; using 0" in shifted.stderr
    assert committed(bootstrap, group) == {0: 0}
    ok("groups", "reset-offsets", group, "--topic", topic, "--to-offset", "7", "--execute", "-b", bootstrap)
    assert committed(bootstrap, group) == {0: 7}

    assert fails(1, "groups", "reset-offsets", group, "--topic", unique("absent"), "--to-latest", "-b", bootstrap).endswith("does not exist")
    assert fails(1, "groups", "reset-offsets", group, "--topic", f"{topic}:3", "--to-latest", "-b", bootstrap).endswith("has no partition 3 (it has 1)")

    # A group that never existed can be given offsets (as in Kafka).
    fresh = unique("fresh")
    ok("groups", "reset-offsets", fresh, "--topic", topic, "--to-offset", "4", "--execute", "-b", bootstrap)
    assert committed(bootstrap, fresh) == {0: 4}

    assert ok("groups", "delete", group, fresh, "-b", bootstrap).stdout == f"deleted group {group}\ndeleted group {fresh}\n"
    assert fails(1, "groups", "delete", group, "-b", bootstrap) == f"rmqk: error: cannot delete group '{group}': it does not exist"


def test_groups_with_an_active_member(bootstrap: str) -> None:
    topic, group = unique("active"), unique("g")
    ok("topics", "create", topic, "--partitions", "2", "-b", bootstrap)
    produce_lines(bootstrap, topic, ["x", "y", "z"])
    member = subprocess.Popen(
        [sys.executable, "-m", "rmqkafka", "consume", topic, "-g", group, "--from-beginning", "-b", bootstrap],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            docs = json.loads(rmqk("groups", "describe", group, "-b", bootstrap, "--json").stdout or "[]")
            if (
                docs
                and docs[0]["state"] == "Stable"
                and docs[0]["members"]
                and docs[0]["partitions"]
                and all(p["lag"] == 0 or p["log_end_offset"] == 0 for p in docs[0]["partitions"])
            ):
                break
            assert time.monotonic() < deadline, f"group never became stable: {docs}"
            time.sleep(0.3)
        doc = docs[0]
        [m] = doc["members"]
        assert m["client_id"] == "rmqk" and m["host"]
        assert sorted(a["partition"] for a in m["assignment"]) == [0, 1]
        assert {p["consumer_id"] for p in doc["partitions"]} == {m["consumer_id"]}
        text = ok("groups", "describe", group, "-b", bootstrap).stdout
        members = table(text.split("\n\n")[1])
        assert members[0]["CONSUMER-ID"] == m["consumer_id"] and members[0]["#PARTITIONS"] == "2"
        assert members[0]["ASSIGNMENT"] == f"{topic}:0,1"
        assert table(text)[0]["STATE"] == "Stable" and table(text)[0]["PROTOCOL-TYPE"] == "consumer"

        for execute in ("--dry-run", "--execute"):
            line = fails(1, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest", execute, "-b", bootstrap)
            assert line == f"rmqk: error: group '{group}' has 1 active member (state Stable); stop its consumers before resetting offsets"
        assert fails(1, "groups", "delete", group, "-b", bootstrap) == f"rmqk: error: cannot delete group '{group}': it has active members"
    finally:
        member.send_signal(signal.SIGTERM)
        out, err = member.communicate(timeout=30)
    assert member.returncode == 0, err
    assert sorted(out.splitlines()) == ["x", "y", "z"]
    assert err.strip().splitlines()[-1] == "rmqk: consumed 3 records"
    # The member committed on its way out and left; now the group can be reset and deleted.
    assert group_doc(bootstrap, group)["members"] == []
    ok("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", "-b", bootstrap)
    ok("groups", "delete", group, "-b", bootstrap)
