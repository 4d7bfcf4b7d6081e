"""The Spark examples of the documentation run as a reader runs them: the data source example
(docs/examples/spark_data_source.py, on the Spark page) and each command of the example
pipeline (docs/examples/order_pipeline.sh, on the compose page), each a fresh Python process
with its own JVM, against a test broker where they name ``localhost:9092``."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is not importable; install the test extra: pip install -e '.[test]'")
pytest.importorskip("pyarrow", reason="pyarrow is not importable; pip install -e '.[test]'")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    print("no Java runtime for Spark: the documentation's Spark examples are not run")
    pytest.skip("no Java runtime for Spark: put java on PATH or set JAVA_HOME", allow_module_level=True)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
DOCUMENTED_ADDRESS = "localhost:9092"


def spark_env() -> dict[str, str]:
    # as a reader's shell: no PYSPARK_PYTHON, the example gives Spark's workers its interpreter
    return {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}


def test_the_data_source_example_copies_a_topic(broker: Any, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(30):
        producer.produce("orders", key=f"k{i % 3}".encode(), value=f"order-{i}".encode(), headers=[("TAGS", b"book")])
    assert producer.flush(30) == 0
    source = (EXAMPLES / "spark_data_source.py").read_text()
    assert source.count(DOCUMENTED_ADDRESS) == 2
    script = tmp_path / "spark_data_source.py"
    script.write_text(source.replace(DOCUMENTED_ADDRESS, broker.bootstrap_servers))
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=spark_env(), capture_output=True,
                         text=True, timeout=400, check=False)
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    assert "copied 30 records" in run.stdout, run.stdout

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "copy-check",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["copy"])
    copied: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(copied) < 30 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                copied.append((message.key(), message.value()))
    finally:
        consumer.close()
    assert sorted(copied) == sorted((f"k{i % 3}".encode(), f"order-{i}".encode()) for i in range(30))


def pipeline_commands() -> list[list[str]]:
    commands = []
    for line in (EXAMPLES / "order_pipeline.sh").read_text().splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            assert argv[:3] == ["python", "-m", "rmqkafka.spark_connector.examples.order_pipeline"], line
            commands.append(argv)
    return commands


@pytest.mark.parametrize("index", range(3))
def test_each_example_pipeline_command_checks_ok(index: int, broker: Any) -> None:
    commands = pipeline_commands()
    assert len(commands) == 3
    argv = [sys.executable, *commands[index][1:]]
    argv = [broker.bootstrap_servers if arg == DOCUMENTED_ADDRESS else arg for arg in argv]
    # the default topics (orders, order-stats) are shared by the commands that use this broker:
    # the pipeline counts only what it produced itself, so a second run must still check OK
    run = subprocess.run(argv, cwd=ROOT, env=spark_env(), capture_output=True, text=True, timeout=400, check=False)
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    assert "check: OK" in run.stdout, run.stdout
