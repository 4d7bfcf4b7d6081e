"""The serving process tunes the cyclic garbage collector and glibc's allocator once it has
started, and raises its open files limit before it opens the store (rmqk serve)."""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys

import pytest
from rmqkafka.cli import serve


def test_serving_freezes_start_up_objects_and_collects_the_young_generation_less_often():
    before = gc.get_threshold()
    try:
        serve._tune_collector()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (serve.GC_YOUNG_THRESHOLD, before[1], before[2])
        assert serve.GC_YOUNG_THRESHOLD > before[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


_FAULTS_PER_READ = r"""
import os, sys
from rmqkafka.cli import serve
tuned = serve._tune_allocator() if sys.argv[1] == "tuned" else None
def minor_faults():
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[7])
fd = os.open(sys.argv[2], os.O_RDONLY)
def fetch():  # what a Fetch does: batches read into new bytes objects, sent, then freed
    return [os.pread(fd, 1 << 20, 0) for _ in range(8)]
for _ in range(5):  # warm up: the heap grows once
    fetch()
before = minor_faults()
for _ in range(50):
    fetch()
print(tuned, (minor_faults() - before) / 400)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/stat"),
                    reason="glibc's mallopt and Linux's /proc")
def test_serving_reuses_the_memory_of_read_batches(tmp_path):
    data = tmp_path / "segment"
    data.write_bytes(os.urandom(1 << 20))
    faults = {}
    for mode in ("tuned", "default"):
        out = subprocess.run([sys.executable, "-c", _FAULTS_PER_READ, mode, str(data)],
                             capture_output=True, text=True, check=True, timeout=120).stdout.split()
        faults[mode] = float(out[1])
        if mode == "tuned":
            assert out[0] == "True"
    # 1 MB is 256 pages: faulted in anew on each read without the tuning, reused with it
    assert faults["tuned"] < 8 and faults["default"] > 128, faults


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX resource limits")
def test_serving_raises_the_open_files_soft_limit_to_the_hard_one():
    import resource

    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = before[1]
    target = serve.OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else hard
    lowered = min(256, target)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))  # lowering needs no privilege
    try:
        raised = serve._raise_open_files_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (target, hard)
        assert raised == ((lowered, target) if lowered < target else None)
        assert serve._raise_open_files_limit() is None  # already at the hard limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)


@pytest.mark.skipif(not os.path.exists("/proc/self/limits"), reason="Linux's /proc")
def test_the_serving_process_runs_with_the_hard_open_files_limit(tmp_path):
    """rmqk serve started with a low soft limit (as a login shell's 1,024) raises it."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "rmqkafka", "serve", "--port", "0", "--data-dir", str(tmp_path / "data"),
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
    try:
        assert "started" in process.stdout.readline()
        with open(f"/proc/{process.pid}/limits") as f:
            row = next(line for line in f if line.startswith("Max open files")).split()
        expected = serve.OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else hard
        assert int(row[3]) == expected, row
    finally:
        process.terminate()
        process.wait(timeout=30)
