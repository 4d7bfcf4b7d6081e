"""Retention on the shared commitlog: write amplification of the moves and what they cost.

Usage:  python -m bench.retention [--quick] [--ratio 0.5] [--long-share 0.5]

A 1-hour topic and a 1-second topic share one commitlog (storage.MessageStore, no network,
an injected clock: simulated time runs much faster than real time). Every 100 ms of
simulated time each topic gets one batch (the byte split between them set by
``--long-share``); retention runs every 5 s of simulated time, for 2.5 simulated hours
(steady state: the 1-hour topic's records expire too). Printed: bytes produced, bytes moved
by retention (write amplification = moved / produced), the commitlog's size at the end
against the live bytes (the 1-hour topic's last hour), segments deleted, and the CPU time
of appends and of retention runs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from aiokafka.record.default_records import DefaultRecordBatchBuilder

from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

HOUR = 3_600_000
STEP_MS = 100
CHECK_MS = 5000
BATCH_BYTES = 2048


def batch(size: int, timestamp: int) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    builder.append(0, timestamp=timestamp, key=None, value=b"x" * size, headers=[])
    return bytes(builder.build())


def run(hours: float, ratio: float, long_share: float, segment_bytes: int) -> dict:
    clock = ManualClock()
    with tempfile.TemporaryDirectory() as tmp:
        store = MessageStore(StorageConfig(data_dir=Path(tmp), segment_bytes=segment_bytes, retention_ms=None,
                                           retention_move_ratio=ratio, disk_reserve_bytes=0), clock)
        store.open()
        store.create_topic("long", 1, {"retention.ms": str(HOUR)})
        store.create_topic("short", 1, {"retention.ms": "1000"})
        long_size = max(1, int(2 * BATCH_BYTES * long_share))
        short_size = max(1, 2 * BATCH_BYTES - long_size)
        produced = 0
        append_cpu = retention_cpu = 0.0
        steps = int(hours * HOUR / STEP_MS)
        for step in range(steps):
            now = clock.now_ms()
            began = time.process_time()
            for topic, size in (("long", long_size), ("short", short_size)):
                data = batch(size, now)
                store.append(topic, 0, data, max_batch_bytes=1 << 20)
                produced += len(data)
            append_cpu += time.process_time() - began
            clock.advance(STEP_MS)
            if (step * STEP_MS) % CHECK_MS == 0:
                began = time.process_time()
                store.apply_retention()
                retention_cpu += time.process_time() - began
        long_log = store.partition("long", 0)
        live = sum(size for size in _batch_sizes(long_log))
        stats = store.retention.stats
        result = dict(
            simulated_hours=hours, ratio=ratio, long_share=long_share, segment_bytes=segment_bytes,
            produced_mb=produced / 1e6, moved_mb=stats.bytes_moved / 1e6,
            write_amplification=stats.bytes_moved / produced, reclaimed_mb=stats.bytes_reclaimed / 1e6,
            segments_deleted=stats.segments_deleted, commitlog_mb=store.commitlog.size_bytes() / 1e6,
            live_mb=live / 1e6, runs=stats.runs, append_cpu_s=append_cpu, retention_cpu_s=retention_cpu,
            retention_cpu_ms_per_run=1000 * retention_cpu / max(1, stats.runs),
        )
        store.close_sync()
        return result


def _batch_sizes(plog):
    from rmqkafka.storage.retention import batch_starts

    return [size for _, _, size in batch_starts(plog, plog.log_start_offset, plog.next_offset)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="simulate 1.2 hours instead of 2.5")
    parser.add_argument("--ratio", type=float, default=0.5, help="retention_move_ratio (default 0.5)")
    parser.add_argument("--long-share", type=float, default=0.5,
                        help="share of the produced bytes going to the 1-hour topic (default 0.5)")
    parser.add_argument("--segment-bytes", type=int, default=4 << 20)
    args = parser.parse_args()
    result = run(1.2 if args.quick else 2.5, args.ratio, args.long_share, args.segment_bytes)
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key:<{width}}  {value:.3f}" if isinstance(value, float) else f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
