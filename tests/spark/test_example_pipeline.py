"""The example pipeline (``python -m rmqkafka.spark_connector.examples.order_pipeline``) end to end.

Each run is a fresh subprocess (its own JVM and SparkSession, nothing shared with the other
Spark test modules) against an :class:`rmqkafka.adapter.embedded.EmbeddedBroker` started by this
module; it must exit 0 and print totals equal to what it produced.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "pyspark", reason="pyspark is not importable; install the test extra: pip install -e '.[test]'"
)
pytest.importorskip("pyarrow", reason="pyarrow is not importable; pip install -e '.[test]'")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime for Spark: put java on PATH or set JAVA_HOME",
                allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
MODULE = "rmqkafka.spark_connector.examples.order_pipeline"


def run_pipeline(*args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess[str], float]:
    # No PYSPARK_PYTHON: the pipeline must give Spark's workers its own interpreter.
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", MODULE, "--master", "local[2]", *args],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=timeout,
    )
    return proc, time.monotonic() - started


def totals(stdout: str) -> dict[str, Any]:
    produced = re.search(r"^produced: orders=(\d+) amount=([\d.]+)$", stdout, re.MULTILINE)
    stats = re.search(
        r"^order-stats: orders=(\d+) amount=([\d.]+) rows=(\d+) records=(\d+)$", stdout, re.MULTILINE
    )
    assert produced and stats, stdout
    per_tag = {
        m[1]: (int(m[2]), int(m[3]), Decimal(m[4]), int(m[5]), Decimal(m[6]))
        for m in re.finditer(r"^(\w+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)$", stdout, re.MULTILINE)
    }
    return {
        "produced": (int(produced[1]), Decimal(produced[2])),
        "stats": (int(stats[1]), Decimal(stats[2])),
        "rows": int(stats[3]),
        "records": int(stats[4]),
        "per_tag": per_tag,
    }


def check_run(proc: subprocess.CompletedProcess[str], orders: int, tags: set[str],
              windows: int) -> dict[str, Any]:
    detail = f"stdout:\n{proc.stdout}\nstderr (tail):\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, detail
    assert "check: OK" in proc.stdout, detail
    t = totals(proc.stdout)
    assert t["produced"][0] == orders
    assert t["stats"] == t["produced"]
    assert set(t["per_tag"]) == tags
    for tag, (n_windows, count, amount, p_count, p_amount) in t["per_tag"].items():
        assert (count, amount) == (p_count, p_amount), tag
        assert n_windows == windows, tag
    assert sum(v[1] for v in t["per_tag"].values()) == orders
    assert t["rows"] == windows * len(tags)
    view = re.search(r"^tag '(\w+)' through a broker-side view: orders=(\d+) amount=([\d.]+) "
                     r"\(produced (\d+) / ([\d.]+)\)$", proc.stdout, re.MULTILINE)
    assert view, detail
    assert view[1] == min(tags) and int(view[2]) == t["per_tag"][view[1]][3] > 0
    assert (view[2], view[3]) == (view[4], view[5])
    return t


def test_zero_setup_batch_run_totals_equal_what_was_produced() -> None:
    # No --bootstrap-servers: the example starts (and stops) an embedded broker itself.
    # 240 orders over 40 s of event time in 10 s windows -> 4 windows per tag.
    proc, seconds = run_pipeline("--orders", "240", "--span-seconds", "40",
                                 "--window", "10 seconds")
    assert "started an embedded broker on 127.0.0.1:" in proc.stdout, proc.stdout
    t = check_run(proc, 240, {"book", "food", "toy"}, windows=4)
    assert t["records"] == t["rows"]  # batch: one record per (window, tag)
    assert "spark batch on local[2]" in proc.stdout
    assert seconds < 100, f"pipeline took {seconds:.0f}s"


def test_streaming_run_over_several_micro_batches_counts_only_its_own_records(
    broker: Any,
) -> None:
    from confluent_kafka import Producer

    # Records already in both topics (an earlier run) must not leak into this run's totals:
    # the pipeline reads by the offsets it takes around its own produce and write.
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(25):
        producer.produce("orders-s", key=b"old", headers=[("TAGS", b"book")],
                         value=b'{"order_id":"old-%d","customer":"old","amount":99.99,'
                               b'"event_time":1767225600000}' % i)
        producer.produce("order-stats-s", key=b"book@2026-01-01T00:00:00Z",
                         value=b'{"tag":"book","window_start":"2026-01-01T00:00:00Z",'
                               b'"orders":1000,"amount":"1.00"}')
    assert producer.flush(30) == 0

    proc, seconds = run_pipeline(
        "--bootstrap-servers", broker.bootstrap_servers, "--orders", "150",
        "--span-seconds", "30", "--streaming", "--max-offsets-per-trigger", "60",
        "--orders-topic", "orders-s", "--stats-topic", "order-stats-s",
    )
    t = check_run(proc, 150, {"book", "food", "toy"}, windows=3)
    batches = re.search(r"availableNow, (\d+) micro-batches", proc.stdout)
    assert batches and int(batches[1]) >= 3, proc.stdout  # 150 records, 60 per trigger
    assert t["records"] >= t["rows"]  # windows spanning micro-batches: several partials
    assert seconds < 100, f"pipeline took {seconds:.0f}s"


def test_cluster_master_without_bootstrap_servers_is_refused() -> None:
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, "-m", MODULE, "--master", "spark://nowhere:7077"],
        cwd=ROOT, env=env, check=False, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "needs --bootstrap-servers" in proc.stderr
