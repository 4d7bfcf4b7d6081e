"""Issue #13 (the CLI): ``rmqk --version`` and the progress bars of long commands.

Why real processes: what is promised is about file descriptors (a bar on stderr only when
stderr is a terminal or when forced, stdout byte-for-byte the same) and start-up cost (no
broker, no tqdm imported by commands that draw nothing), which an in-process runner cannot
show. The broker is the pytest plugin's session broker (``rmqkafka_broker``), so this module
also uses the plugin in the project's own suite.
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BAR = re.compile(r"\d+%\|")  # tqdm's "45%|" of a bar with a total


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RMQK_PROGRESS"}
    env.update(extra)
    return env


def run(*args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(
        [sys.executable, "-m", "rmqkafka", *args],
        input=input, stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True, env=env or _env(), timeout=60, check=False,
    )
    assert result.returncode == 0, f"rmqk {' '.join(args)} -> {result.returncode}\n{result.stderr.decode()}"
    return result


# ---------------------------------------------------------------------------------------------
# --version


def test_version_prints_the_distribution_version_without_loading_the_broker() -> None:
    out = run("--version")
    assert out.stdout.decode() == f"rmqk {version('rmqkafka')}\n" and out.stderr == b""
    assert run("-V").stdout == out.stdout
    code = (
        "import sys\nfrom rmqkafka.cli import main\n"
        "try:\n    main(['--version'], prog_name='rmqk')\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
        "print(sorted(m for m in sys.modules if m.startswith(('rmqkafka.cli.', 'rmqkafka.adapter', 'asyncio', 'tqdm', 'confluent_kafka'))), file=sys.stderr)\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=True)
    assert loaded.stdout.startswith("rmqk ") and loaded.stderr.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# bars on stderr, stdout unchanged


def test_produce_file_bar_only_when_forced(rmqkafka_admin: Any, tmp_path: Path) -> None:
    bootstrap = rmqkafka_admin.bootstrap_servers
    data = tmp_path / "records.txt"
    data.write_bytes(b"".join(b"record-%d\n" % i for i in range(5000)))
    quiet_topic, loud_topic, env_topic = (rmqkafka_admin.create_topic() for _ in range(3))

    quiet = run("produce", quiet_topic, "-b", bootstrap, "-f", str(data))  # stderr is a pipe: no bar
    loud = run("produce", loud_topic, "-b", bootstrap, "-f", str(data), "--progress")
    forced_by_env = run("produce", env_topic, "-b", bootstrap, "-f", str(data), env=_env(RMQK_PROGRESS="1"))

    assert quiet.stderr == b""
    for result, topic in ((loud, loud_topic), (forced_by_env, env_topic)):
        text = result.stderr.decode()
        assert BAR.search(text) and "100%|" in text and "5,000 records" in text, text
        assert text.startswith("\rproduce:") and text.endswith("\n"), text  # a forced bar off a terminal keeps its last line
        assert result.stdout.replace(topic.encode(), b"T") == quiet.stdout.replace(quiet_topic.encode(), b"T")
    assert quiet.stdout == f"produced 5000 records to {quiet_topic}: partition 0 offsets 0-4999\n".encode()

    # stdin redirected from a file is a file too: a bar in bytes
    with data.open("rb") as stdin:
        piped = subprocess.run([sys.executable, "-m", "rmqkafka", "produce", env_topic, "-b", bootstrap, "--progress"],
                               stdin=stdin, capture_output=True, env=_env(), timeout=60, check=True)
    assert "100%|" in piped.stderr.decode()


def test_consume_bar_to_the_end_and_stdout_unchanged(rmqkafka_admin: Any) -> None:
    bootstrap = rmqkafka_admin.bootstrap_servers
    topic = rmqkafka_admin.create_topic(partitions=3)
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(3000))
    run("produce", topic, "-b", bootstrap, "-k", ":", input=lines)

    plain = run("consume", topic, "-b", bootstrap, "--from-beginning", "-e", "--print-key")
    loud = run("consume", topic, "-b", bootstrap, "--from-beginning", "-e", "--print-key", "--progress")
    assert plain.stderr.decode() == "rmqk: consumed 3000 records\n"
    # the same bytes on stdout (partitions interleave in any order, each in offset order)
    assert sorted(loud.stdout.splitlines()) == sorted(plain.stdout.splitlines()) and len(plain.stdout.splitlines()) == 3000
    text = loud.stderr.decode()
    assert "100%|" in text and "3000/3000 [" in text and "offsets/s" in text and "3,000 records" in text, text
    assert text.splitlines()[-1] == "rmqk: consumed 3000 records"

    off = run("consume", topic, "-b", bootstrap, "--from-beginning", "-e", "--no-progress", env=_env(RMQK_PROGRESS="1"))
    assert off.stderr.decode() == "rmqk: consumed 3000 records\n"  # the flag wins over the environment
    counted = run("consume", topic, "-b", bootstrap, "--from-beginning", "-c", "10", "--progress")
    assert "10/10 [" in counted.stderr.decode() and "records/s" in counted.stderr.decode()


def test_reset_offsets_bar_across_many_partitions(rmqkafka_admin: Any) -> None:
    bootstrap = rmqkafka_admin.bootstrap_servers
    topic = rmqkafka_admin.create_topic(partitions=120)
    group = rmqkafka_admin.unique_name("g")
    args = ("groups", "reset-offsets", group, "-t", topic, "--to-latest", "-b", bootstrap)

    dry = run(*args)
    assert dry.stderr.decode() == "rmqk: dry run: no offsets were changed; add --execute to commit them\n"
    loud = run(*args, "--progress")
    assert loud.stdout == dry.stdout and len(dry.stdout.splitlines()) == 121
    assert "240/240 [" in loud.stderr.decode() and "steps/s" in loud.stderr.decode()  # earliest and latest of 120 partitions
    executed = run(*args, "--execute", "--progress")
    assert "360/360 [" in executed.stderr.decode()  # ... and the commit


# ---------------------------------------------------------------------------------------------
# on a terminal


def _with_terminal_stderr(args: list[str], chunks: list[bytes], pause: float, env: dict[str, str]) -> tuple[bytes, bytes]:
    """Run ``rmqk ARGS`` with stderr on a pseudo-terminal, feeding stdin ``chunks`` with
    ``pause`` seconds between them; returns (stdout, what the terminal got)."""
    leader, follower = pty.openpty()
    seen = bytearray()

    def drain() -> None:  # read while it runs: Linux drops what is unread when the other end closes
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed
                return
            if not data:
                return
            seen.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.Popen([sys.executable, "-m", "rmqkafka", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    assert proc.stdin is not None and proc.stdout is not None
    for i, chunk in enumerate(chunks):
        if i:
            time.sleep(pause)
        proc.stdin.write(chunk)
        proc.stdin.flush()
    proc.stdin.close()
    stdout = proc.stdout.read()
    assert proc.wait(60) == 0
    reader.join(10)
    os.close(leader)
    return stdout, bytes(seen)


def test_terminal_bar_appears_only_for_long_work(rmqkafka_admin: Any) -> None:
    bootstrap = rmqkafka_admin.bootstrap_servers
    topic = rmqkafka_admin.create_topic()
    args = ["produce", topic, "-b", bootstrap]
    lines = [b"".join(b"a%d\n" % i for i in range(10)), b"".join(b"b%d\n" % i for i in range(10))]

    stdout, terminal = _with_terminal_stderr(args, lines, 2.5, _env())  # > start-up + AUTO_DELAY: a bar, then removed
    assert b"produce: " in terminal and b"records/s" in terminal, terminal
    assert stdout == f"produced 20 records to {topic}: partition 0 offsets 0-19\n".encode()
    _, quick = _with_terminal_stderr(args, lines, 0.0, _env())  # done at once: nothing drawn
    assert b"produce:" not in quick, quick
    _, disabled = _with_terminal_stderr(args, lines, 2.5, _env(RMQK_PROGRESS="0"))
    assert b"produce:" not in disabled, disabled


def test_quick_work_never_imports_tqdm() -> None:
    code = (
        "import io, sys\nfrom rmqkafka.cli.progress import Progress\n"
        "class Tty(io.StringIO):\n    def isatty(self):\n        return True\n"
        "meter = Progress(None, 'sent', stream=Tty())\nmeter.add(100)\nmeter.done()\n"
        "assert 'tqdm' not in sys.modules\n"
        "meter = Progress(True, 'sent', stream=io.StringIO())\nmeter.done()\nassert 'tqdm' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], env=_env(), check=True)
    stream = io.StringIO()
    meter = __import__("rmqkafka.cli.progress", fromlist=["Progress"]).Progress(None, "sent", stream=stream)
    meter.add(5)
    meter.done()
    assert stream.getvalue() == ""  # not a terminal and not forced
