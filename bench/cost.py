"""Broker cost benchmark: CPU per record and per byte, produce and consume, beside the mock.

Usage:  python -m bench.cost [--quick] [--records N] [--flush async|sync] [--rounds R]

For 100-byte and 1-KiB values on 4 partitions (acks=all, confluent-kafka as the client, the same
produce and consume loops as ``bench.broker_vs_mock``):
- broker CPU per record (us) and per GB of values (CPU-s), read from the broker process's own
  user + system time (psutil) across each phase, so the figure depends less on what else runs
  on the machine than throughput does;
- wall throughput (records/s, MB/s) and the broker's busy share of the wall time;
- records per request and broker CPU per request (us) of the phase's Produce or Fetch
  requests, counted by the broker's metrics port: what a record costs is mostly what its
  request costs divided by the records the client put in it; "sys" is the kernel's share of
  the broker's CPU (system time: socket and file syscalls);
- the librdkafka mock cluster's throughput for the same workload, in the same run.
Prints a table and then one JSON line (``{"bench": "cost", ...}``) for scripts.

The mock keeps only ~5 MB per partition, so its workload is capped at 100,000 x 100 B and
16,000 x 1 KiB records; ours takes ``--records`` (100 B) and a tenth of it (1 KiB). With
``--rounds`` > 1 each phase is repeated on a new topic and the median round is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid

from .broker_vs_mock import consume, produce
from .common import MockCluster, create_topic, metrics_url, start_broker

SIZES = (100, 1024)
MOCK_CAP = {100: 100_000, 1024: 16_000}


def broker_cpu_seconds(pid: int) -> float:
    return sum(broker_cpu_times(pid))


def broker_cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of the broker process so far."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user, times.system


def start_profiler(pid: int, directory: str, name: str, native: bool = False) -> subprocess.Popen:
    """py-spy sampling the broker into ``directory``/``name``.txt (collapsed stacks, one line
    per stack with its sample count: ``sort -t' ' -k2 -n`` or a flame graph tool reads it)."""
    os.makedirs(directory, exist_ok=True)
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    process = subprocess.Popen([spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "250",
                                *(["--native"] if native else ["--nonblocking"]),
                                "-o", os.path.join(directory, f"{name}.txt")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches before the phase starts
    return process


def stop_profiler(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    process.wait(timeout=30)


_REQUEST_COUNT = re.compile(r'^rmqk_request_duration_seconds_count\{api="(\w+)"\} (\S+)$', re.MULTILINE)
PHASE_API = {"produce": "Produce", "consume": "Fetch"}


def request_counts(url: str) -> dict[str, float]:
    """Requests answered so far, per Kafka API (the broker's request-duration histograms)."""
    text = urllib.request.urlopen(url, timeout=30).read().decode()
    return {api: float(n) for api, n in _REQUEST_COUNT.findall(text)}


def counts(args) -> dict[int, int]:
    return {100: args.records, 1024: max(1, args.records // 10)}


def measure_broker(broker, args) -> dict[str, dict[str, float]]:
    """Per phase ("produce 100B", ...): seconds, records, bytes and broker CPU seconds
    (the median round by CPU)."""
    pid = broker.process.pid
    url = metrics_url(broker)
    warm = f"cost-warmup-{uuid.uuid4().hex[:8]}"  # first-use costs (imports, files) are not per record
    create_topic(broker.bootstrap, warm, False)
    produce(broker.bootstrap, warm, 20_000, 100)
    consume(broker.bootstrap, warm, 20_000)
    phases: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for size, count in counts(args).items():
            topic = f"cost-{size}-{uuid.uuid4().hex[:8]}"
            create_topic(broker.bootstrap, topic, False)
            for phase, run in (("produce", lambda: produce(broker.bootstrap, topic, count, size)),
                               ("consume", lambda: consume(broker.bootstrap, topic, count))):
                profiler = start_profiler(pid, args.profile, f"{phase}-{size}", args.native) if args.profile else None
                requests_before = request_counts(url).get(PHASE_API[phase], 0.0)
                user_before, system_before = broker_cpu_times(pid)
                seconds = run()
                user, system = broker_cpu_times(pid)
                cpu = user + system - user_before - system_before
                requests = request_counts(url).get(PHASE_API[phase], 0.0) - requests_before
                if profiler is not None:
                    stop_profiler(profiler)
                phases.setdefault(f"{phase} {size}B", []).append(
                    {"seconds": seconds, "records": count, "bytes": count * size, "cpu": cpu,
                     "requests": requests, "system": system - system_before})
    return {name: sorted(rounds, key=lambda r: r["cpu"])[len(rounds) // 2] for name, rounds in phases.items()}


def measure_mock(args) -> dict[str, float]:
    """Records/s per phase on librdkafka's mock cluster."""
    mock = MockCluster()
    rates: dict[str, float] = {}
    for size, count in counts(args).items():
        count = min(count, MOCK_CAP[size])
        topic = f"cost-{size}-{uuid.uuid4().hex[:8]}"
        create_topic(mock.bootstrap, topic, True)
        rates[f"produce {size}B"] = count / produce(mock.bootstrap, topic, count, size)
        rates[f"consume {size}B"] = count / consume(mock.bootstrap, topic, count)
    return rates


def summarise(ours: dict[str, dict[str, float]], mock: dict[str, float]) -> dict[str, dict[str, float]]:
    rows = {}
    for name, r in ours.items():
        rate = r["records"] / r["seconds"]
        rows[name] = {
            "records": r["records"],
            "broker_cpu_us_per_record": r["cpu"] / r["records"] * 1e6,
            "broker_cpu_s_per_gb": r["cpu"] / (r["bytes"] / 1e9),
            "broker_busy": r["cpu"] / r["seconds"],
            "broker_system_share": r["system"] / r["cpu"] if r["cpu"] else 0.0,
            "records_per_request": r["records"] / r["requests"] if r["requests"] else 0.0,
            "broker_cpu_us_per_request": r["cpu"] / r["requests"] * 1e6 if r["requests"] else 0.0,
            "records_per_s": rate,
            "mb_per_s": r["bytes"] / r["seconds"] / 1e6,
            "mock_records_per_s": mock.get(name, 0.0),
            "vs_mock": rate / mock[name] if mock.get(name) else 0.0,
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--quick", action="store_true", help="100,000 x 100 B and 10,000 x 1 KiB, one round")
    parser.add_argument("--records", type=int, default=400_000,
                        help="100-byte records per round (1-KiB records: a tenth); default 400000")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per phase; the median is reported")
    parser.add_argument("--flush", choices=("async", "sync"), default="async", help="the broker's --flush")
    parser.add_argument("--profile", metavar="DIR",
                        help="sample the broker with py-spy during each phase into DIR/<phase>.txt "
                             "(pip install py-spy); the sampling costs broker CPU, so figures of a "
                             "profiled run are not comparable")
    parser.add_argument("--native", action="store_true",
                        help="with --profile: py-spy --native (C frames too; pauses the broker to sample)")
    parser.add_argument("--no-mock", action="store_true", help="skip the librdkafka mock cluster")
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds = 100_000, 1

    broker = start_broker(flush=args.flush, extra=["--metrics-port", "0"])
    try:
        ours = measure_broker(broker, args)
        rss = broker.rss_mb()
    finally:
        broker.stop()
    mock = {} if args.no_mock else measure_mock(args)
    rows = summarise(ours, mock)

    load = os.getloadavg()[0]
    print(f"workload: 4 partitions, acks=all, flush {args.flush}, {counts(args)[100]} x 100 B and "
          f"{counts(args)[1024]} x 1 KiB records, {args.rounds} round(s); client confluent-kafka "
          f"(librdkafka); load average {load:.2f} on {os.cpu_count()} cores")
    print(f"{'phase':13} {'records':>8} {'us/record':>10} {'CPU-s/GB':>9} {'busy':>6} "
          f"{'records/s':>11} {'MB/s':>7} {'mock rec/s':>11} {'vs mock':>8} {'rec/req':>8} {'us/req':>7} {'sys':>5}")
    for name, row in rows.items():
        print(f"{name:13} {row['records']:8d} {row['broker_cpu_us_per_record']:10.3f} "
              f"{row['broker_cpu_s_per_gb']:9.2f} {row['broker_busy']:6.0%} {row['records_per_s']:11.0f} "
              f"{row['mb_per_s']:7.1f} {row['mock_records_per_s']:11.0f} {row['vs_mock']:8.2f} "
              f"{row['records_per_request']:8.0f} {row['broker_cpu_us_per_request']:7.0f} {row['broker_system_share']:5.0%}")
    print(f"broker RSS after the workload: {rss:.1f} MB")
    print(json.dumps({"bench": "cost", "flush": args.flush, "rounds": args.rounds, "load_average": load,
                      "rss_mb": round(rss, 1), "phases": {k: {f: round(v, 4) for f, v in row.items()}
                                                          for k, row in rows.items()}}))


if __name__ == "__main__":
    main()
