"""Issue #8: ``rmqk views create|list|describe|delete`` and what the other commands do with
views, against a real broker process.

Like tests/integration/test_cli_admin.py: one broker for the module, commands run in-process
through click's CliRunner, the start-up contract (lazy import, unreachable broker) through
``python -m rmqkafka``. Checked: tables and ``--json``; one-line ``rmqk: error: ...`` with
status 2 for bad command lines and 1 for refusals (bad expression with its column, missing
source, name taken); ``views delete`` never deletes a topic; ``topics list`` leaves views
out; ``topics delete`` of a source names its views; ``produce`` to a view fails; ``groups
describe`` shows the lag of a group on a view.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from rmqkafka.adapter.embedded import EmbeddedBroker

    broker = EmbeddedBroker(data_dir=tmp_path_factory.mktemp("cli-views-broker"))
    with broker:
        yield broker
    if broker.stderr:
        sys.stderr.write(f"--- broker stderr ---\n{broker.stderr}\n")


@pytest.fixture
def bootstrap(kafka: Any) -> str:
    return kafka.bootstrap_servers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def rmqk(*args: str, input: str | None = None) -> Result:
    from rmqkafka.cli import main

    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False, prog_name="rmqk")


def ok(*args: str, input: str | None = None) -> Result:
    result = rmqk(*args, input=input)
    assert result.exit_code == 0, f"rmqk {' '.join(args)} -> {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def fails(status: int, *args: str, input: str | None = None) -> str:
    """Run a command that must fail with ``status``; returns its single stderr error line."""
    result = rmqk(*args, input=input)
    assert result.exit_code == status, f"rmqk {' '.join(args)} -> {result.exit_code} (wanted {status})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    errors = [line for line in result.stderr.splitlines() if line.startswith("rmqk: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return errors[0]


def errors_of(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("rmqk: error:")]


def table(text: str) -> list[dict[str, str]]:
    """The first plain table in ``text`` (header line in capitals) as dicts."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"[A-Z#][A-Z#-]*(  +[A-Z#][A-Z#-]*)*", line.strip()))
    header = lines[start]
    names = header.split()
    starts = [header.index(n) if i == 0 else header.index("  " + n) + 2 for i, n in enumerate(names)]
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(dict(zip(names, [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])])))
    return rows


def source_topic(bootstrap: str, partitions: int = 3) -> str:
    name = unique("orders")
    ok("topics", "create", name, "--partitions", str(partitions), "-b", bootstrap)
    return name


def produce(bootstrap: str, topic: str, lines: list[str], *extra: str) -> Result:
    return rmqk("produce", topic, "-b", bootstrap, *extra, input="".join(f"{line}\n" for line in lines))


# ---------------------------------------------------------------------------------------------
# registration and start-up


def test_views_command_is_registered_lazily() -> None:
    assert re.search(r"^\s+views\s", ok("--help").stdout, re.MULTILINE)
    help_text = ok("views", "--help").stdout
    for sub in ("create", "list", "describe", "delete"):
        assert re.search(rf"^\s+{sub}\s", help_text, re.MULTILINE), help_text
    code = "import sys, rmqkafka.cli; print('rmqkafka.cli.views' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=True)
    assert out.stdout.strip() == "False"


def test_unreachable_broker_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "rmqkafka", "views", "list", "-b", f"127.0.0.1:{port}"],
        capture_output=True, text=True, env=os.environ.copy(), timeout=30, stdin=subprocess.DEVNULL, check=False,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"rmqk: error: cannot reach broker at 127.0.0.1:{port}"), proc.stderr
    assert proc.stderr.count("\n") == 1
    assert time.monotonic() - started < 4.0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("views", "create", "v", "--source", "t"), "give exactly one of --tags and --sql"),
        (("views", "create", "v", "--source", "t", "--tags", "A", "--sql", "a > 1"), "give exactly one of --tags and --sql"),
        (("views", "create", "v", "--tags", "A"), "Missing option '-s' / '--source'"),
        (("views", "create", "--source", "t", "--tags", "A"), "Missing argument 'NAME'"),
        (("views", "describe"), "Missing argument"),
        (("views", "delete"), "Missing argument"),
        (("views", "frobnicate"), "No such command 'frobnicate'"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_bad_command_lines_exit_2(bootstrap: str, args: tuple[str, ...], needle: str) -> None:
    line = fails(2, *args, "-b", bootstrap)
    assert needle in line, line


# ---------------------------------------------------------------------------------------------
# create, list, describe, delete


def test_views_create_list_describe_delete(bootstrap: str) -> None:
    source = source_topic(bootstrap, partitions=3)
    tagged, sql = unique("tagged"), unique("sql")
    created = ok("views", "create", tagged, "--source", source, "--tags", "TagA ||TagB", "-b", bootstrap)
    assert created.stdout == f"created view {tagged} over {source} (3 partitions)\n"
    doc = json.loads(ok("views", "create", sql, "-s", source, "--sql", "amount > 100 and region = 'eu'", "--json", "-b", bootstrap).stdout)
    assert doc == {"view": sql, "source": source, "kind": "sql", "expression": "amount > 100 and region = 'eu'",
                   "created": True, "validated": False, "existed": False, "partitions": 3}

    rows = {r["VIEW"]: r for r in table(ok("views", "list", "-b", bootstrap).stdout)}
    assert rows[tagged] == {"VIEW": tagged, "SOURCE": source, "KIND": "tags", "EXPRESSION": "TagA ||TagB"}
    assert rows[sql]["EXPRESSION"] == "amount > 100 and region = 'eu'"
    assert source not in rows  # topics are not views
    listed = {d["view"]: d for d in json.loads(ok("views", "list", "--json", "-b", bootstrap).stdout)}
    assert listed[tagged] == {"view": tagged, "source": source, "kind": "tags", "expression": "TagA ||TagB",
                              "filter": "TagA || TagB", "partitions": 3}
    assert listed[sql]["filter"] == "amount > 100 AND region = 'eu'"

    text = ok("views", "describe", tagged, "-b", bootstrap).stdout
    assert re.fullmatch(
        rf"View: {tagged}  ViewId: [A-Za-z0-9_-]{{22}}  Source: {source}  Partitions: 3\n"
        r"  rmq.view.tags: TagA \|\|TagB\n  rmq.view.filter: TagA \|\| TagB\n", text), text
    [described] = json.loads(ok("views", "describe", sql, "--json", "-b", bootstrap).stdout)
    assert described["view"] == sql and described["source"] == source and described["partitions"] == 3
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", described["view_id"])

    # topics list / describe (all) leave views out; a view named explicitly is described
    names = ok("topics", "list", "-b", bootstrap).stdout.splitlines()
    assert source in names and tagged not in names and sql not in names
    assert {t["topic"] for t in json.loads(ok("topics", "list", "--json", "-b", bootstrap).stdout)}.isdisjoint({tagged, sql})
    assert tagged not in {d["topic"] for d in json.loads(ok("topics", "describe", "--json", "-b", bootstrap).stdout)}
    [as_topic] = json.loads(ok("topics", "describe", tagged, "--json", "-b", bootstrap).stdout)
    assert as_topic["configs"] == {"rmq.view.source": source, "rmq.view.tags": "TagA ||TagB"}
    assert as_topic["partition_count"] == 3

    deleted = ok("views", "delete", tagged, sql, "-b", bootstrap)
    assert deleted.stdout == f"deleted view {tagged}\ndeleted view {sql}\n"
    assert ok("views", "list", "--json", "-b", bootstrap).stdout.count(source) == 0
    assert source in ok("topics", "list", "-b", bootstrap).stdout.splitlines()


def test_views_create_errors(bootstrap: str) -> None:
    source = source_topic(bootstrap)
    line = fails(1, "views", "create", unique("bad"), "-s", source, "--sql", "a = = 1", "-b", bootstrap)
    assert re.fullmatch(
        r"rmqk: error: cannot create view '[^']+': invalid SQL92 expression at column 5: expected a property, "
        r"a literal or '\(' but found '=' \(INVALID_CONFIG\)", line), line
    line = fails(1, "views", "create", unique("bad"), "-s", source, "--tags", " || ", "-b", bootstrap)
    assert "invalid tag expression: it names no tag" in line and "INVALID_CONFIG" in line
    missing = unique("missing")
    line = fails(1, "views", "create", unique("v"), "-s", missing, "--tags", "A", "-b", bootstrap)
    assert f"the source topic '{missing}' does not exist" in line
    line = fails(1, "views", "create", source, "-s", source, "--tags", "A", "-b", bootstrap)
    assert f"a topic named '{source}' already exists (TOPIC_ALREADY_EXISTS)" in line

    view = unique("v")
    ok("views", "create", view, "-s", source, "--tags", "A", "-b", bootstrap)
    line = fails(1, "views", "create", unique("v"), "-s", view, "--tags", "A", "-b", bootstrap)
    assert f"the source '{view}' is a view; a view's source must be a topic" in line
    line = fails(1, "views", "create", view, "-s", source, "--tags", "A", "-b", bootstrap)
    assert f"a view named '{view}' already exists" in line
    # --if-not-exists: fine for the same definition, an error for another one or a topic
    assert ok("views", "create", view, "-s", source, "--tags", "A", "--if-not-exists", "-b", bootstrap).stdout == f"view {view} already exists\n"
    line = fails(1, "views", "create", view, "-s", source, "--tags", "B", "--if-not-exists", "-b", bootstrap)
    assert line == (f"rmqk: error: cannot create view '{view}': a view with that name exists with another "
                    f"definition (source '{source}', tags 'A')")
    line = fails(1, "views", "create", source, "-s", source, "--tags", "A", "--if-not-exists", "-b", bootstrap)
    assert line == f"rmqk: error: cannot create view '{source}': a topic with that name exists"
    # --dry-run validates and creates nothing
    dry = unique("dry")
    assert ok("views", "create", dry, "-s", source, "--sql", "a > 1", "--dry-run", "-b", bootstrap).stdout == (
        f"view {dry} can be created (dry run, nothing changed)\n")
    assert dry not in ok("views", "list", "-b", bootstrap).stdout
    assert "INVALID_CONFIG" in fails(1, "views", "create", dry, "-s", source, "--sql", "a >", "--dry-run", "-b", bootstrap)


def test_views_describe_and_delete_errors(bootstrap: str) -> None:
    source = source_topic(bootstrap)
    view, missing = unique("v"), unique("missing")
    ok("views", "create", view, "-s", source, "--tags", "A", "-b", bootstrap)
    result = rmqk("views", "describe", view, source, missing, "-b", bootstrap)
    assert result.exit_code == 1 and result.stdout.startswith(f"View: {view}  ViewId: ")
    assert errors_of(result) == [f"rmqk: error: '{source}' is a topic, not a view; view '{missing}' does not exist"]

    # views delete never deletes a topic
    result = rmqk("views", "delete", source, missing, view, "-b", bootstrap)
    assert result.exit_code == 1 and result.stdout == f"deleted view {view}\n"
    assert errors_of(result) == [
        f"rmqk: error: cannot delete view '{source}': it is a topic, not a view (use rmqk topics delete)",
        f"rmqk: error: cannot delete view '{missing}': it does not exist",
    ]
    assert source in ok("topics", "list", "-b", bootstrap).stdout.splitlines()
    assert ok("views", "delete", view, "--if-exists", "-b", bootstrap).stdout == f"view {view} does not exist\n"
    assert json.loads(ok("views", "delete", view, "--if-exists", "--json", "-b", bootstrap).stdout) == [{"view": view, "deleted": False}]


def test_topics_commands_on_views(bootstrap: str) -> None:
    source = source_topic(bootstrap, partitions=2)
    a, b = sorted([unique("va"), unique("vb")])
    ok("views", "create", a, "-s", source, "--tags", "A", "-b", bootstrap)
    ok("views", "create", b, "-s", source, "--sql", "x IS NULL", "-b", bootstrap)
    line = fails(1, "topics", "delete", source, "-b", bootstrap)
    assert line == (f"rmqk: error: cannot delete topic '{source}': it is the source of view(s) {a}, {b}; "
                    f"delete them first (rmqk views delete {a} {b})")
    line = fails(1, "topics", "alter", a, "--config", "retention.ms=1000", "-b", bootstrap)
    assert "views are immutable; delete and create it again (INVALID_REQUEST)" in line
    line = fails(1, "topics", "alter", a, "--partitions", "4", "-b", bootstrap)
    assert f"a view has its source's partitions; grow '{source}' instead (INVALID_PARTITIONS)" in line
    # growing the source grows the views
    ok("topics", "alter", source, "--partitions", "4", "-b", bootstrap)
    assert {d["view"]: d["partitions"] for d in json.loads(ok("views", "list", "--json", "-b", bootstrap).stdout)}[a] == 4
    # deleting the source with its views in one command works (the broker deletes views first)
    assert ok("topics", "delete", source, a, b, "-b", bootstrap).stdout == (
        f"deleted topic {source}\ndeleted topic {a}\ndeleted topic {b}\n")


def test_produce_to_a_view_fails(bootstrap: str) -> None:
    source = source_topic(bootstrap, partitions=1)
    view = unique("v")
    ok("views", "create", view, "-s", source, "--tags", "A", "-b", bootstrap)
    result = produce(bootstrap, view, ["one", "two"])
    assert result.exit_code == 1, result.stdout + result.stderr
    assert errors_of(result) == [
        "rmqk: error: line 1: not produced: Broker: Invalid topic (TOPIC_EXCEPTION)",
        "rmqk: error: line 2: not produced: Broker: Invalid topic (TOPIC_EXCEPTION)",
        f"rmqk: error: 2 of 2 records failed: '{view}' is a view (read-only) over topic '{source}'; produce to '{source}'",
    ]
    assert "Traceback" not in result.stderr
    assert produce(bootstrap, source, ["ok"]).exit_code == 0


# ---------------------------------------------------------------------------------------------
# groups on views (LOG-END-OFFSET needs ListOffsets on a view)


def test_groups_describe_shows_lag_on_a_view(bootstrap: str) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    source = source_topic(bootstrap, partitions=2)
    view, group = unique("v"), unique("g")
    ok("views", "create", view, "-s", source, "--tags", "A", "-b", bootstrap)
    assert produce(bootstrap, source, [f"m{i}" for i in range(6)], "--partition", "0").exit_code == 0
    assert produce(bootstrap, source, [f"n{i}" for i in range(4)], "--partition", "1").exit_code == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(view, 0, 2), TopicPartition(view, 1, 4)])]).values()
    assert all(tp.error is None for tp in future.result(timeout=15).topic_partitions)

    [doc] = json.loads(ok("groups", "describe", group, "--json", "-b", bootstrap).stdout)
    by_partition = {(p["topic"], p["partition"]): p for p in doc["partitions"]}
    # a view's offsets are its source's: the log end offset is the source's, so is the lag
    assert by_partition[(view, 0)]["current_offset"] == 2
    assert (by_partition[(view, 0)]["log_end_offset"], by_partition[(view, 0)]["lag"]) == (6, 4)
    assert (by_partition[(view, 1)]["log_end_offset"], by_partition[(view, 1)]["lag"]) == (4, 0)
    assert doc["total_lag"] == 4
