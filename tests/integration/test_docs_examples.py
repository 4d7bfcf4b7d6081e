"""The code examples of the documentation site run, as a reader would run them.

Examples live as files in docs/examples/ that the pages include (pymdownx.snippets), so the
text a reader copies is the text run here, against real brokers started by the pytest plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
DOCUMENTED_ADDRESS = "localhost:9092"  # what the examples connect to; a test's broker replaces it


def run_example(name: str, bootstrap: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run docs/examples/NAME as a script, connected to ``bootstrap`` instead of port 9092."""
    source = (EXAMPLES / name).read_text()
    assert DOCUMENTED_ADDRESS in source
    script = tmp_path / name
    script.write_text(source.replace(DOCUMENTED_ADDRESS, bootstrap))
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def readme_block(after: str) -> str:
    """The first Python code block of the README after the line ``after``."""
    readme = (ROOT / "README.md").read_text()
    return readme.split(after + "\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def test_the_pytest_plugin_example_passes_without_waiting_out_its_consumer_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(EXAMPLES / "pytest_plugin_example.py"), "-q",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", os.devnull],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    took = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    # the consumer's timeout (30 s) bounds only a failing run: a passing one returns with the
    # record, so it takes far less (a generous bound for a loaded two-core machine)
    assert took < 30, f"{took:.1f} s"


def test_the_readme_shows_the_example_that_runs_here() -> None:
    block = readme_block("### In a test suite (pytest plugin)")
    assert "def test_round_trip" in block
    assert block in (EXAMPLES / "pytest_plugin_example.py").read_text()
    block = readme_block("### RocketMQ semantics with any Kafka client")
    assert block == (EXAMPLES / "rocketmq_headers.py").read_text()


def test_the_rocketmq_headers_example_delivers_each_record_when_it_is_due(broker, tmp_path: Path) -> None:
    result = run_example("rocketmq_headers.py", broker.bootstrap_servers, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "docs-example",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 90  # the 10 s delay level, on a loaded machine
    try:
        while len(seen) < 3 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    # the tagged record at once, the timers when due: the 1.5 s timer before the 10 s level
    assert seen == [b"tagged", b"in 1.5 s", b"remind me"]
