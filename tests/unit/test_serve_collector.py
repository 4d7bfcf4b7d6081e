"""The serving process tunes the cyclic garbage collector and glibc's allocator once it has
started (rmqk serve)."""

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
