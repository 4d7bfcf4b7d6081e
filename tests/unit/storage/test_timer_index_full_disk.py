"""The timer wheel on a full disk (issue 20): the wheel file is sparse, and on a full tmpfs
a read of a slot never written, on ext4 a write, used to kill the broker with SIGBUS (the
wheel was memory-mapped, and a page fault that cannot get a page has no other way to fail).
Now every slot is read and written with pread/pwrite: a read of a hole is zeros, a write
that finds no room is ENOSPC (an OSError the append path answers KAFKA_STORAGE_ERROR), and
the index is as it was before the refused add.

Each check runs in a child process, so that a SIGBUS fails the test instead of killing
pytest. Needs root to mount the tmpfs (the ``small_fs`` fixture skips elsewhere).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent('''
    import errno, sys
    from pathlib import Path
    from bench.small_filesystem import SmallFilesystem
    from rmqkafka.storage.timer_index import TimerIndex

    fs = SmallFilesystem(Path(sys.argv[1]))
    index = TimerIndex(fs.path / "timers", wheel_slots=200_000, segment_units=1024)
    index.open(read_slot=0, log_length=None)
    index.add_many([(1000, 1), (2000, 2)], read_slot=0)
    index.flush()
    fs.fill()
    assert index.slot_count(150_000) == 0          # a slot never written: a hole
    assert index.entries(1) == [(1000, 1)]
    refused = 0
    for n, second in enumerate(range(100_000, 200_000, 171)):   # new wheel pages, log units
        try:
            index.add_many([(second * 1000, 10 + n)], read_slot=0)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            assert index.slot_count(second) == 0, "a refused add left its unit in the wheel"
            refused += 1
    assert refused, "the file system never refused a write"
    assert index.entries(1) == [(1000, 1)] and index.entries(2) == [(2000, 2)]
    fs.free()
    index.add_many([(199_999_000, 99)], read_slot=0)
    assert index.entries(199_999) == [(199_999_000, 99)]
    index.flush()
    index.close()
    print("refused", refused)
''')


def test_a_full_disk_refuses_wheel_writes_with_enospc_instead_of_sigbus(small_fs):
    done = subprocess.run([sys.executable, "-c", CHILD, str(small_fs.path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=False)
    if done.returncode < 0:
        raise AssertionError(f"killed by {signal.Signals(-done.returncode).name}; stderr:\n{done.stderr}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused ")
