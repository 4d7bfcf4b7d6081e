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

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"


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
    readme = (ROOT / "README.md").read_text()
    block = readme.split("### In a test suite", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "def test_round_trip" in block
    assert block in (EXAMPLES / "pytest_plugin_example.py").read_text()
