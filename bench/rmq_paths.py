"""What the RocketMQ paths cost the broker per record, in-process (issue 24).

Usage:  python -m bench.rmq_paths [--records N] [--rounds R] [--profile DIR]

Each case appends N records (default 40,000) of 100 B through ``Semantics.append`` (the
produce path below the Kafka codec: the store's checks, the scheduler's diverting, the half
messages' table) on a fresh store in a temporary directory, in producer batches of 1,000
records over 4 partitions, with the serving process's collector settings (rmqk serve):

* plain: one ``UNIQ_KEY`` header;
* half: ``TRAN_MSG=true``, ``PGROUP``, ``UNIQ_KEY`` (the half message is parked);
* half+end: each batch of half messages, then a batch of their ``TRAN_END=COMMIT`` records
  (the committed messages appended, op records written): per half message;
* timer (near): ``TIMER_DELIVER_MS`` one second apart from a minute ahead (a wheel slot
  each, on neighbouring slots);
* timer (30 days): ``TIMER_DELIVER_MS`` spread over the next 30 days (most beyond the
  wheel's window, in its last slot).

Reported: process CPU time (user + system, ``time.process_time``) per record, the median of
R rounds (default 3), and the cyclic collector's share; the broker's own event loop, codec
and sockets are not in it (bench.half_messages and bench.timers measure those end to end).
``--profile DIR`` writes a py-spy flame graph per case (py-spy must be installed).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rmqkafka.cli.serve import GC_YOUNG_THRESHOLD
from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.parked_records import build_batch
from rmqkafka.rmqsemantics.semantics import Semantics
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

T0 = 1_750_000_000_000
BATCH = 1000
PARTITIONS = 4
VALUE = b"x" * 100
HOUR_MS = 3_600_000
CASES = ("plain", "half", "half+end", "timer (near)", "timer (30 days)")


def headers_of(case: str, i: int) -> list[list[tuple[str, bytes]]]:
    """The header lists of record ``i``'s batches: one, or a half message and its end."""
    key = b"k%08d" % i
    if case == "plain":
        return [[("UNIQ_KEY", key)]]
    half = [("TRAN_MSG", b"true"), ("PGROUP", b"bench-group"), ("UNIQ_KEY", key)]
    if case == "half":
        return [half]
    if case == "half+end":
        return [half, [("TRAN_END", b"COMMIT"), ("PGROUP", b"bench-group"), ("UNIQ_KEY", key)]]
    if case == "timer (near)":
        return [[("TIMER_DELIVER_MS", b"%d" % (T0 + 60_000 + i * 1000))]]
    return [[("TIMER_DELIVER_MS", b"%d" % (T0 + 60_000 + (i * 7919 % 100_000) * 25_920))]]


def batches(case: str, count: int) -> list[tuple[int, bytes]]:
    out = []
    for start in range(0, count, BATCH):
        partition = start // BATCH % PARTITIONS
        rows = [headers_of(case, i) for i in range(start, min(count, start + BATCH))]
        for kind in range(len(rows[0])):
            value = VALUE if kind == 0 else b""
            out.append((partition, build_batch((T0 - 1000, None, value, r[kind]) for r in rows)))
    return out


def run_case(case: str, count: int) -> dict[str, float]:
    data_dir = Path(tempfile.mkdtemp(prefix="rmqk-bench-"))
    try:
        clock = ManualClock(T0)
        store = MessageStore(StorageConfig(data_dir=data_dir, flush_interval_ms=HOUR_MS,
                                           retention_check_interval_ms=HOUR_MS), clock)
        semantics = Semantics(SemanticsConfig(transaction_timeout_ms=HOUR_MS), store, data_dir, clock)
        store.open()
        store.create_topic("t", PARTITIONS, {})
        meta = store.topics.get("t")
        work = batches(case, count)
        collector = [0.0, 0.0]

        def timed(phase: str, _info: dict) -> None:
            if phase == "start":
                collector[1] = time.process_time()
            else:
                collector[0] += time.process_time() - collector[1]

        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        gc.callbacks.append(timed)
        try:
            began = time.process_time()
            for partition, batch in work:
                semantics.append(meta, partition, batch, max_batch_bytes=1 << 20)
            spent = time.process_time() - began
        finally:
            gc.callbacks.remove(timed)
            gc.unfreeze()
        store.close_sync()
        return {"us": spent / count * 1e6, "gc_us": collector[0] / count * 1e6}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", choices=CASES, help="one case only (used by --profile)")
    parser.add_argument("--profile", metavar="DIR", help="a py-spy flame graph per case into DIR")
    args = parser.parse_args()
    cases = [args.case] if args.case else list(CASES)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        for case in cases:
            name = case.replace(" ", "_").replace("(", "").replace(")", "").replace("+", "_")
            subprocess.run(["py-spy", "record", "-r", "500", "-o", os.path.join(args.profile, f"{name}.svg"), "--",
                            sys.executable, "-m", "bench.rmq_paths", "--case", case, "--rounds", "1",
                            "--records", str(args.records)], check=True)
        return
    results = {}
    print(f"{args.records} records x 100 B, batches of {BATCH}, {PARTITIONS} partitions; median of {args.rounds}")
    print(f"{'case':18} {'us/record':>10} {'gc us':>7} {'x plain':>8}")
    for case in cases:
        rounds = [run_case(case, args.records) for _ in range(args.rounds)]
        results[case] = {key: statistics.median(r[key] for r in rounds) for key in ("us", "gc_us")}
        plain = results.get("plain", {}).get("us")
        ratio = f"{results[case]['us'] / plain:8.1f}" if plain else f"{'-':>8}"
        print(f"{case:18} {results[case]['us']:10.2f} {results[case]['gc_us']:7.2f} {ratio}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
