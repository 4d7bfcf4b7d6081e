"""The code examples of the documentation site run, as a reader would run them.

Examples live as files in docs/examples/ that the pages include (pymdownx.snippets), so the
text a reader copies is the text run here, against real brokers started by the pytest plugin.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer

sys.path.insert(0, str(Path(__file__).parent))
from confluent_reads import poll_records  # noqa: E402

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
    result = subprocess.run(
        [sys.executable, "-m", "pytest", str(EXAMPLES / "pytest_plugin_example.py"), "-q",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", os.devnull, "--durations=0",
         "--durations-min=0"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout
    # The round trip's own time (pytest's "call" phase: not the interpreter, nor the session
    # broker's start in "setup"). Iterating the consumer to its end would wait out
    # consumer_timeout_ms every time; next(consumer) returns with the record, so a passing
    # call takes less than that timeout however loaded the machine is.
    timeout_s = int(re.search(r"consumer_timeout_ms=(\d+)", (EXAMPLES / "pytest_plugin_example.py").read_text())[1]) / 1000
    call = re.search(r"^([\d.]+)s call .*test_round_trip$", result.stdout, re.MULTILINE)
    assert call, result.stdout
    assert float(call[1]) < timeout_s, f"the round trip took {call[1]} s"


def test_the_embedded_broker_example_survives_its_kill(tmp_path: Path) -> None:
    script = tmp_path / "embedded_broker.py"
    shutil.copy(EXAMPLES / "embedded_broker.py", script)
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "b'kept'\n"


def test_the_readme_shows_the_example_that_runs_here() -> None:
    block = readme_block("### In a test suite (pytest plugin)")
    assert "def test_round_trip" in block
    assert block in (EXAMPLES / "pytest_plugin_example.py").read_text()
    block = readme_block("### RocketMQ semantics with any Kafka client")
    assert block == (EXAMPLES / "rocketmq_headers.py").read_text()
    # the other uses show a part of the example files their pages include and the tests run
    # (tests/integration/test_docker_image.py, tests/spark/test_docs_spark_examples.py)
    for heading, example in (("### With testcontainers", "testcontainers_example.py"),
                             ("### From Spark", "spark_data_source.py")):
        block = readme_block(heading)
        assert block.count("\n") >= 5 and block in (EXAMPLES / example).read_text(), heading
    readme = (ROOT / "README.md").read_text()
    compose = readme.split("### As a server (compose)\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert compose == (EXAMPLES / "compose_pipeline.sh").read_text()


def test_every_example_file_is_included_by_a_page() -> None:
    pages = "".join(page.read_text() for page in (ROOT / "docs").rglob("*.md"))
    for example in sorted(EXAMPLES.iterdir()):
        if example.suffix in (".py", ".sh"):
            assert f'--8<-- "{example.name}"' in pages, f"docs/examples/{example.name} is on no page"


def test_the_rocketmq_headers_example_delivers_each_record_when_it_is_due(broker, tmp_path: Path) -> None:
    result = run_example("rocketmq_headers.py", broker.bootstrap_servers, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "docs-example",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["orders"])
    try:  # 90 s: the 10 s delay level, on a loaded machine
        seen = [message.value() for message in poll_records(consumer, 3, timeout=90)]
    finally:
        consumer.close()
    # the tagged record at once, the timers when due: the 1.5 s timer before the 10 s level
    assert seen == [b"tagged", b"in 1.5 s", b"remind me"]
