"""``rmqk delays`` and ``rmqk dlq list|resend`` against a real broker process.

Each test starts its own broker (``broker_factory``) with a ``server.properties`` of short
delay levels, so that the scheduler's counters and the DLQ topics belong to the test:
levels 1..16 are 1 s (retries wait level 3 + RECONSUME_TIMES, so 1 s), level 17 is 10 min
and level 18 is 1 h (records that stay pending while the test looks at them);
``timerPrecisionMs=100``.

Dead letters are made quickly: ``rmq_retry.<group>`` is created with
``rmq.max.reconsume.times=1`` and records are produced to it with ``RECONSUME_TIMES=1`` (as
a consumer's second nack would be): the broker moves them to ``rmq_dlq.<group>`` at once,
with ``RECONSUME_TIMES=2``. A record resent with ``RECONSUME_TIMES=0`` is then retried once
(1 s) and comes back in ``rmq_retry.<group>`` with ``RECONSUME_TIMES=1``.

Commands run in-process through click's CliRunner, as in test_cli_admin.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

LEVELS = " ".join(["1s"] * 16 + ["10m", "1h"])
PROPERTIES = f"messageDelayLevel={LEVELS}\ntimerPrecisionMs=100\n"


# ---------------------------------------------------------------------------------------------
# helpers


@pytest.fixture
def bootstrap(broker_factory: Callable[..., Any], tmp_path: Path) -> str:
    config = tmp_path / "server.properties"
    config.write_text(PROPERTIES)
    return broker_factory(config_file=config).bootstrap_servers


def rmqk(*args: str) -> Result:
    from rmqkafka.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False, prog_name="rmqk")


def ok(*args: str) -> Result:
    result = rmqk(*args)
    assert result.exit_code == 0, f"rmqk {' '.join(args)} -> {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


def fails(status: int, *args: str) -> str:
    """Run a command that must fail with ``status``; returns its single stderr error line."""
    result = rmqk(*args)
    assert result.exit_code == status, f"rmqk {' '.join(args)} -> {result.exit_code} (wanted {status})\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    errors = [line for line in result.stderr.splitlines() if line.startswith("rmqk: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return errors[0]


def tables(text: str) -> list[list[dict[str, str]]]:
    """Every plain table in ``text`` (a header line in capitals, rows up to a blank line)."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        header = lines[i]
        if not re.fullmatch(r"[A-Z#][A-Z#-]*(  +[A-Z#][A-Z#-]*)*", header.strip()):
            i += 1
            continue
        names = header.split()
        starts = [header.index(n) if k == 0 else header.index("  " + n) + 2 for k, n in enumerate(names)]
        rows = []
        i += 1
        while i < len(lines) and lines[i].strip():
            line = lines[i]
            rows.append(dict(zip(names, [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])])))
            i += 1
        found.append(rows)
    return found


def produce(bootstrap: str, topic: str, records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Produce records (``key``, ``value``, ``headers``, ``partition``, ``timestamp``) in one
    flush; returns (partition, offset) of each, failing on any delivery error."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
    reports: list[Any] = [None] * len(records)
    for i, record in enumerate(records):
        extra = {k: record[k] for k in ("partition", "timestamp") if k in record}
        producer.produce(topic, value=record.get("value"), key=record.get("key"), headers=record.get("headers"),
                         on_delivery=lambda err, msg, i=i: reports.__setitem__(i, (err, msg)), **extra)
    assert producer.flush(10) == 0
    assert all(r is not None and r[0] is None for r in reports), reports
    return [(r[1].partition(), r[1].offset()) for r in reports]


def read_all(bootstrap: str, topic: str, partitions: int = 1, expect: int | None = None, wait: float = 10.0) -> list[Any]:
    """Every record of ``topic`` (waiting up to ``wait`` s for ``expect`` records)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-reader", "enable.auto.commit": False, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + wait
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                out.append(msg)
            elif msg is None and expect is None and out:
                break
            if expect is not None and len(out) >= expect:
                consumer.poll(0.3)  # nothing more should come
                break
    finally:
        consumer.close()
    return out


def headers_of(msg: Any) -> dict[str, bytes | None]:
    return dict(msg.headers() or [])


def status(bootstrap: str) -> dict[str, Any]:
    return json.loads(ok("delays", "--json", "-b", bootstrap).stdout)


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def make_dead_letters(bootstrap: str, group: str, records: list[dict[str, Any]]) -> None:
    """Put ``records`` into ``rmq_dlq.<group>`` through the retry topic (see the module doc)."""
    ok("topics", "create", f"rmq_retry.{group}", "--partitions", "1", "-c", "rmq.max.reconsume.times=1", "-b", bootstrap)
    for record in records:
        record["headers"] = [*record.get("headers", []), ("RECONSUME_TIMES", b"1")]
    produce(bootstrap, f"rmq_retry.{group}", records)
    wait_for(lambda: len(read_all(bootstrap, f"rmq_dlq.{group}", expect=len(records), wait=0.5)) == len(records),
             f"{len(records)} dead letters in rmq_dlq.{group}")


def origin(topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    return [("ORIGIN_TOPIC", topic.encode()), ("ORIGIN_PARTITION", str(partition).encode()),
            ("ORIGIN_OFFSET", str(offset).encode())]


# ---------------------------------------------------------------------------------------------
# registration


def test_commands_are_registered_lazily() -> None:
    text = ok("--help").stdout
    assert re.search(r"^\s+delays\s", text, re.MULTILINE) and re.search(r"^\s+dlq\s", text, re.MULTILINE), text
    help_text = ok("dlq", "--help").stdout
    assert re.search(r"^\s+list\s", help_text, re.MULTILINE) and re.search(r"^\s+resend\s", help_text, re.MULTILINE)
    assert "--by [hour|day]" in ok("delays", "--help").stdout
    code = "import sys, rmqkafka.cli; print(sorted(m for m in sys.modules if m.startswith(('rmqkafka.cli.', 'rmqkafka.client', 'confluent_kafka'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# rmqk delays


def test_delays_shows_levels_timers_and_counters(bootstrap: str) -> None:
    ok("topics", "create", "orders", "--partitions", "1", "-b", bootstrap)
    now = int(time.time() * 1000)
    in_2h, in_3d = now + 2 * 3_600_000, now + 3 * 86_400_000
    produced = produce(bootstrap, "orders", [
        {"key": b"plain", "value": b"p0"},
        {"key": b"soon", "value": b"d1", "headers": [("DELAY", b"1"), ("trace", b"t1")], "timestamp": now - 5000},
        {"key": b"timer-soon", "value": b"t", "headers": [("TIMER_DELAY_MS", b"300")]},
        {"key": b"l17", "value": b"x", "headers": [("DELAY", b"17")]},
        {"key": b"l18a", "value": b"x", "headers": [("DELAY", b"18")]},
        {"key": b"l18b", "value": b"x", "headers": [("DELAY", b"18")]},
        {"key": b"t2h-a", "value": b"x", "headers": [("TIMER_DELIVER_MS", str(in_2h).encode())]},
        {"key": b"t2h-b", "value": b"x", "headers": [("TIMER_DELIVER_MS", str(in_2h).encode())]},
        {"key": b"t3d", "value": b"x", "headers": [("TIMER_DELIVER_MS", str(in_3d).encode())]},
    ])
    assert [offset for _, offset in produced] == list(range(9))  # one batch, offsets as produced
    doc = wait_for(lambda: (s := status(bootstrap))["delivered"] >= 2 and s, "the two short delays")

    # --json: the broker's document as it is
    assert set(doc) >= {"levels", "timers_pending", "timers_by_hour", "timers_done_before_ms",
                        "delivered", "dropped", "dead_lettered", "cancelled"}
    assert [lv["level"] for lv in doc["levels"]] == list(range(1, 19))
    assert [lv["delay_ms"] for lv in doc["levels"]] == [1000] * 16 + [600_000, 3_600_000]
    depths = {lv["level"]: lv["depth"] for lv in doc["levels"] if lv["depth"]}
    assert depths == {17: 1, 18: 2}
    level18 = doc["levels"][17]
    assert now + 3_600_000 <= level18["next_due_ms"] <= int(time.time() * 1000) + 3_600_000
    assert doc["levels"][0]["delivered_up_to"] == 1 and doc["levels"][0]["next_due_ms"] is None
    assert doc["timers_pending"] == 3
    assert doc["timers_by_hour"] == (
        {str(in_2h // 3_600_000): 2, str(in_3d // 3_600_000): 1}
    )
    assert (doc["delivered"], doc["dropped"], doc["dead_lettered"], doc["cancelled"]) == (2, 0, 0, 0)

    # the table
    text = ok("delays", "-b", bootstrap).stdout
    levels, hours = tables(text)
    assert [r["LEVEL"] for r in levels] == [str(n) for n in range(1, 19)]
    assert levels[0] == {"LEVEL": "1", "DELAY": "1s", "DEPTH": "0", "NEXT-DUE": "-", "DELIVERED-UP-TO": "1"}
    assert (levels[16]["DELAY"], levels[16]["DEPTH"]) == ("10m", "1")
    assert (levels[17]["DELAY"], levels[17]["DEPTH"]) == ("1h", "2")
    for level, pattern in ((17, r"9m\d+s|10m"), (18, r"59m\d+s|1h")):
        due = datetime.fromtimestamp(doc["levels"][level - 1]["next_due_ms"] / 1000).isoformat(timespec="seconds")
        assert re.fullmatch(rf"{re.escape(due)} \(in ({pattern})\)", levels[level - 1]["NEXT-DUE"]), levels[level - 1]
    assert "\ntimers pending: 3 (all due before " in text

    def hour(ms: int) -> str:
        return datetime.fromtimestamp(ms // 3_600_000 * 3600).strftime("%Y-%m-%dT%H:%M")

    assert hours == [{"DUE-HOUR": hour(in_2h), "TIMERS": "2"}, {"DUE-HOUR": hour(in_3d), "TIMERS": "1"}]
    assert text.rstrip().endswith("since the broker started: 2 delivered, 0 dropped, 0 dead-lettered, 0 cancelled")

    _, days = tables(ok("delays", "--by", "day", "-b", bootstrap).stdout)

    def day(ms: int) -> str:
        return datetime.fromtimestamp(ms // 3_600_000 * 3600).strftime("%Y-%m-%d")

    expected = [(day(in_2h), 2), (day(in_3d), 1)]
    assert days == [{"DUE-DAY": d, "TIMERS": str(n)} for d, n in expected]

    # what the consumer sees (as docs/guides/delays.md says): the produced batch keeps its
    # offsets with gaps where records were parked; a delivered record has a new offset, its
    # CreateTime, no DELAY/TIMER header, and REAL_TOPIC / REAL_QID / PARKED_AT
    seen = {m.key(): m for m in read_all(bootstrap, "orders", expect=3)}
    assert set(seen) == {b"plain", b"soon", b"timer-soon"}
    assert seen[b"plain"].offset() == 0 and seen[b"plain"].headers() is None
    soon, timer = seen[b"soon"], seen[b"timer-soon"]
    assert soon.offset() >= 9 and timer.offset() >= 9
    assert soon.timestamp() == (1, now - 5000)
    h = headers_of(soon)
    assert soon.headers()[0] == ("trace", b"t1") and "DELAY" not in h
    assert (h["REAL_TOPIC"], h["REAL_QID"], h["PARKED_AT"]) == (b"orders", b"0", b"SCHEDULE_TOPIC_XXXX-0@0")
    assert now + 1000 <= int(h["TIMER_OUT_MS"]) <= int(time.time() * 1000)  # when it was due
    assert "TIMER_DELAY_MS" not in headers_of(timer)
    assert headers_of(timer)["PARKED_AT"].startswith(b"rmq_sys_wheel_timer-0@")


def test_delays_usage_errors(bootstrap: str) -> None:
    assert "Invalid value for '--by'" in fails(2, "delays", "--by", "week", "-b", bootstrap)


# ---------------------------------------------------------------------------------------------
# rmqk dlq list


def test_dlq_list(bootstrap: str) -> None:
    # a group without a DLQ topic: a notice, nothing listed, exit 0, and no topic created
    result = ok("dlq", "list", "nobody", "-b", bootstrap)
    assert result.stdout == ""
    assert result.stderr == "rmqk: group nobody has no dead letters (topic rmq_dlq.nobody does not exist)\n"
    assert json.loads(ok("dlq", "list", "nobody", "--json", "-b", bootstrap).stdout) == []
    assert "rmq_dlq.nobody" not in ok("topics", "list", "-b", bootstrap).stdout.splitlines()

    stamp = int(time.time() * 1000) - 60_000
    make_dead_letters(bootstrap, "g", [
        {"key": b"order-1", "value": b'{"id": 1}', "timestamp": stamp, "headers": [("trace", b"a"), *origin("orders", 2, 41)]},
        {"key": None, "value": b"line one\nline two " + b"x" * 60, "timestamp": stamp + 1},
        {"key": b"bin", "value": b"\xff\xfe\x00", "timestamp": stamp + 2, "headers": [("ORIGIN_TOPIC", b"orders")]},
    ])
    [rows] = tables(ok("dlq", "list", "g", "-b", bootstrap).stdout)
    local = datetime.fromtimestamp(stamp / 1000).isoformat(timespec="seconds")
    assert rows[0] == {"PARTITION": "0", "OFFSET": "0", "TIMESTAMP": local, "KEY": "order-1", "RECONSUME-TIMES": "2",
                       "ORIGIN": "orders-2@41", "RESENT": "no", "VALUE": '{"id": 1}'}
    assert rows[1]["KEY"] == "-" and rows[1]["ORIGIN"] == "-"
    assert rows[1]["VALUE"] == "line one\\nline two " + "x" * 18 + "..."
    assert rows[2]["ORIGIN"] == "orders" and rows[2]["VALUE"] == "<3 bytes, binary>"

    docs = json.loads(ok("dlq", "list", "g", "--json", "-b", bootstrap).stdout)
    assert [d["offset"] for d in docs] == [0, 1, 2]
    first = docs[0]
    assert {k: first[k] for k in ("partition", "timestamp", "timestamp_type", "key", "value", "reconsume_times",
                                  "origin_topic", "origin_partition", "origin_offset", "resent")} == {
        "partition": 0, "timestamp": stamp, "timestamp_type": "CreateTime", "key": "order-1", "value": '{"id": 1}',
        "reconsume_times": 2, "origin_topic": "orders", "origin_partition": 2, "origin_offset": 41, "resent": False,
    }
    assert [h["key"] for h in first["headers"]][:5] == ["trace", "ORIGIN_TOPIC", "ORIGIN_PARTITION", "ORIGIN_OFFSET", "RECONSUME_TIMES"]
    assert docs[2]["value"] == {"base64": "//4A"} and docs[2]["origin_partition"] is None

    limited = ok("dlq", "list", "g", "--limit", "1", "-b", bootstrap)
    assert [r["OFFSET"] for r in tables(limited.stdout)[0]] == ["0"]
    assert limited.stderr == "rmqk: showing the first 1 records; rmq_dlq.g holds up to 3 (--limit 0 shows all)\n"
    assert len(json.loads(ok("dlq", "list", "g", "--limit", "0", "--json", "-b", bootstrap).stdout)) == 3


# ---------------------------------------------------------------------------------------------
# rmqk dlq resend


def test_dlq_resend_to_the_retry_topic_once(bootstrap: str) -> None:
    stamp = int(time.time() * 1000) - 60_000
    make_dead_letters(bootstrap, "g", [
        {"key": b"k0", "value": b"v0", "timestamp": stamp, "headers": [("trace", b"a"), *origin("orders", 0, 5)]},
        {"key": b"k1", "value": b"v1", "timestamp": stamp + 1},
    ])
    dry = ok("dlq", "resend", "g", "--dry-run", "-b", bootstrap)
    assert [(r["OFFSET"], r["SENT-TO"]) for r in tables(dry.stdout)[0]] == [("0", "rmq_retry.g"), ("1", "rmq_retry.g")]
    assert "dry run: would resend 2 dead letters of group g to rmq_retry.g; nothing sent" in dry.stderr

    first = ok("dlq", "resend", "g", "-b", bootstrap)
    rows = tables(first.stdout)[0]
    assert [(r["PARTITION"], r["OFFSET"], r["KEY"], r["RECONSUME-TIMES"]) for r in rows] == [("0", "0", "k0", "2"), ("0", "1", "k1", "2")]
    assert all(re.fullmatch(r"rmq_retry\.g-0@\d+", r["SENT-TO"]) for r in rows), rows
    assert first.stderr == "rmqk: resent 2 dead letters of group g to rmq_retry.g; position of rmq_dlq_resend.g: rmq_dlq.g-0@2\n"

    # a second run sends nothing
    again = ok("dlq", "resend", "g", "-b", bootstrap)
    assert again.stdout == ""
    assert again.stderr.startswith("rmqk: nothing to resend: every dead letter of group g in rmq_dlq.g was resent already")
    doc = json.loads(ok("dlq", "resend", "g", "--json", "-b", bootstrap).stdout)
    assert doc["resent"] == [] and doc["to"] == "rmq_retry.g" and doc["resend_group"] == "rmq_dlq_resend.g"
    assert [d["resent"] for d in json.loads(ok("dlq", "list", "g", "--json", "-b", bootstrap).stdout)] == [True, True]
    [described] = json.loads(ok("groups", "describe", "rmq_dlq_resend.g", "--json", "-b", bootstrap).stdout)
    assert [(p["topic"], p["partition"], p["current_offset"]) for p in described["partitions"]] == [("rmq_dlq.g", 0, 2)]

    # the group gets them again from rmq_retry.g after the first retry's delay, RECONSUME_TIMES 1
    back = {m.key(): m for m in read_all(bootstrap, "rmq_retry.g", expect=2)}
    assert set(back) == {b"k0", b"k1"}
    h0 = headers_of(back[b"k0"])
    assert (back[b"k0"].value(), back[b"k0"].timestamp()) == (b"v0", (1, stamp))
    assert h0["RECONSUME_TIMES"] == b"1" and h0["trace"] == b"a"
    assert (h0["ORIGIN_TOPIC"], h0["ORIGIN_PARTITION"], h0["ORIGIN_OFFSET"]) == (b"orders", b"0", b"5")
    assert headers_of(back[b"k1"])["RECONSUME_TIMES"] == b"1" and back[b"k1"].timestamp() == (1, stamp + 1)

    # a new dead letter: only it is resent
    produce(bootstrap, "rmq_retry.g", [{"key": b"k2", "value": b"v2", "headers": [("RECONSUME_TIMES", b"1")]}])
    wait_for(lambda: len(read_all(bootstrap, "rmq_dlq.g", expect=3, wait=0.5)) == 3, "the third dead letter")
    third = json.loads(ok("dlq", "resend", "g", "--json", "-b", bootstrap).stdout)
    assert [(e["offset"], e["key"], e["to_topic"], e["sent"]) for e in third["resent"]] == [(2, "k2", "rmq_retry.g", True)]
    assert third["position"] == {"0": 3}

    # moving the position back (as docs/guides/retries.md says) makes the next run resend everything
    ok("groups", "reset-offsets", "rmq_dlq_resend.g", "-t", "rmq_dlq.g", "--to-earliest", "--execute", "-b", bootstrap)
    doc = json.loads(ok("dlq", "resend", "g", "--dry-run", "--json", "-b", bootstrap).stdout)
    assert [e["offset"] for e in doc["resent"]] == [0, 1, 2] and doc["position"] is None


def test_dlq_resend_to_origin_and_by_offset(bootstrap: str) -> None:
    ok("topics", "create", "orders", "--partitions", "3", "-b", bootstrap)
    stamp = int(time.time() * 1000) - 60_000
    make_dead_letters(bootstrap, "g", [
        {"key": b"k0", "value": b"v0", "timestamp": stamp, "headers": [("trace", b"a"), *origin("orders", 2, 7)]},
        {"key": b"k1", "value": b"v1", "timestamp": stamp + 1, "headers": [("ORIGIN_TOPIC", b"orders")]},
        {"key": b"k2", "value": b"v2", "timestamp": stamp + 2},  # no origin
    ])
    # the selection holds a record without ORIGIN_TOPIC: refused as a whole, nothing sent
    line = fails(1, "dlq", "resend", "g", "--to-origin", "-b", bootstrap)
    assert line == ("rmqk: error: cannot resend to the origin: rmq_dlq.g-0@2 has no ORIGIN_TOPIC header (nothing was "
                    "sent; resend without --to-origin to use the retry topic, or select records with --offset)")
    line = fails(1, "dlq", "resend", "g", "--to-origin", "--offset", "2", "-b", bootstrap)
    assert "rmq_dlq.g-0@2 has no ORIGIN_TOPIC header" in line
    assert read_all(bootstrap, "orders", partitions=3, wait=1.0) == []
    assert "group 'rmq_dlq_resend.g' does not exist" in fails(1, "groups", "describe", "rmq_dlq_resend.g", "-b", bootstrap)

    # the two with an origin, chosen by offset
    result = ok("dlq", "resend", "g", "--to-origin", "--offset", "0", "--offset", "1", "-b", bootstrap)
    rows = tables(result.stdout)[0]
    assert re.fullmatch(r"orders-2@\d+", rows[0]["SENT-TO"]) and re.fullmatch(r"orders-\d@\d+", rows[1]["SENT-TO"]), rows
    assert result.stderr == "rmqk: resent 2 dead letters of group g to their origin topics\n"
    copies = {m.key(): m for m in read_all(bootstrap, "orders", partitions=3, expect=2)}
    assert copies[b"k0"].partition() == 2
    assert copies[b"k0"].value() == b"v0" and copies[b"k0"].timestamp() == (1, stamp)
    h0 = headers_of(copies[b"k0"])
    assert "RECONSUME_TIMES" not in h0 and "RECONSUME_TIMES" not in headers_of(copies[b"k1"])
    assert (h0["trace"], h0["ORIGIN_TOPIC"], h0["ORIGIN_PARTITION"], h0["ORIGIN_OFFSET"]) == (b"a", b"orders", b"2", b"7")

    # --offset leaves the resend position alone: the default run still resends all three
    assert [d["resent"] for d in json.loads(ok("dlq", "list", "g", "--json", "-b", bootstrap).stdout)] == [False] * 3
    doc = json.loads(ok("dlq", "resend", "g", "--json", "-b", bootstrap).stdout)
    assert [e["offset"] for e in doc["resent"]] == [0, 1, 2] and doc["position"] == {"0": 3}


def test_dlq_resend_refusals(bootstrap: str) -> None:
    result = ok("dlq", "resend", "nobody", "-b", bootstrap)
    assert result.stdout == ""
    assert result.stderr == "rmqk: nothing to resend: group nobody has no dead letters (topic rmq_dlq.nobody does not exist)\n"
    assert "--partition selects the partition of --offset" in fails(2, "dlq", "resend", "g", "--partition", "1", "-b", bootstrap)
    assert "--limit cannot be used with --offset" in fails(2, "dlq", "resend", "g", "--offset", "1", "--limit", "1", "-b", bootstrap)
    assert "Missing argument 'GROUP'" in fails(2, "dlq", "resend", "-b", bootstrap)

    make_dead_letters(bootstrap, "g", [{"key": b"k0", "value": b"v0", "headers": origin("gone", 0, 1)},
                                       {"key": b"k1", "value": b"v1"}])
    assert fails(1, "dlq", "resend", "g", "--offset", "5", "--offset", "7", "-b", bootstrap) == (
        "rmqk: error: no dead letter at offsets 5, 7 of rmq_dlq.g-0 (it holds offsets 0..1)")
    assert "topic 'gone' does not exist" in fails(1, "dlq", "resend", "g", "--to-origin", "--offset", "0", "-b", bootstrap)
    assert "has no partition 3" in fails(1, "dlq", "resend", "g", "--offset", "0", "--partition", "3", "-b", bootstrap)

    # --limit: the position moves past the records sent only
    doc = json.loads(ok("dlq", "resend", "g", "--limit", "1", "--json", "-b", bootstrap).stdout)
    assert [e["offset"] for e in doc["resent"]] == [0] and doc["position"] == {"0": 1}
    doc = json.loads(ok("dlq", "resend", "g", "--json", "-b", bootstrap).stdout)
    assert [e["offset"] for e in doc["resent"]] == [1] and doc["position"] == {"0": 2}
