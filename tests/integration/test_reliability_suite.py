"""The reliability suite of issue 12 in short (``python -m bench.reliability`` runs it in full
and states its figures in docs/operations/reliability.md): 5 kill -9 cycles, about 20,000 fuzzed frames, and every
fault check, each against real broker processes and real client libraries."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for bench/

from bench.reliability_faults import FAULTS
from bench.reliability_fuzz import run_fuzz
from bench.reliability_kill import run_kill_cycles

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(120)]


def test_kill_9_cycles_lose_nothing_acknowledged(tmp_path):
    report = run_kill_cycles(tmp_path, cycles=5)
    assert report.acknowledged > 0 and report.commits > 0
    assert report.failures() == [], report


def test_fuzzing_never_crashes_the_broker_or_disturbs_a_good_client(tmp_path):
    report = run_fuzz(tmp_path, frames=20_000, seconds=40)
    assert report.frames >= 5_000, report  # the 40 s cap must not hide a broker that stalled
    assert report.failures() == [], report


@pytest.mark.parametrize("name", list(FAULTS))
def test_fault(tmp_path, name):
    result = FAULTS[name](tmp_path)
    if result.skipped:
        pytest.skip(result.skipped)
    assert result.passed, result.detail
