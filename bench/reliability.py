"""Reliability suite (issue 12, "Keep the figures"): kill -9 cycles, fuzzing, one check per fault.

Usage:  python -m bench.reliability [--cycles 50] [--fuzz-frames N] [--fuzz-seconds S]
                                    [--skip kill,fuzz,faults] [--json out.json]

1. kill -9 cycles (bench/reliability_kill.py): a ``--flush sync`` broker SIGKILLed at random
   moments under an idempotent confluent-kafka producer and a committing group member, then
   read back: acknowledged records lost, duplicated or misplaced, offset gaps, committed
   offsets going backwards.
2. fuzzing (bench/reliability_fuzz.py): malformed frames of every advertised API over many
   connections while a well-behaved client produces and consumes: frames, minutes, broker
   crashes, client errors, RSS peak.
3. faults (bench/reliability_faults.py): decompression bomb, pipelined unread fetches, bad
   offset deltas, huge partition counts, ListOffsets -10, a one-byte-a-second request, a
   damaged consume-queue file, a power loss on a full disk, a CreateTopics flood; each pass
   or fail.

Every section runs real broker processes (``rmqk serve``) on data directories under a
temporary directory. The exit status is 1 if any invariant failed.
tests/integration/test_reliability_suite.py runs a short version in CI.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from .reliability_faults import FAULTS, FaultResult, run_fault
from .reliability_fuzz import FuzzReport, run_fuzz
from .reliability_kill import KillReport, run_kill_cycles

SECTIONS = ("kill", "fuzz", "faults")


def print_kill(report: KillReport) -> None:
    print(f"kill -9 cycles            {report.cycles} (flush sync, idempotent producer, committing group)")
    print(f"acknowledged records      {report.acknowledged}  (stored {report.stored})")
    print(f"lost / duplicated         {report.lost} / {report.duplicated}")
    print(f"misplaced / offset gaps   {report.misplaced} / {report.gaps}")
    print(f"committed-offset regress. {report.commit_regressions}  ({report.commits} commits, "
          f"{report.consumed} records consumed, caught up: {report.consumer_caught_up})")
    print(f"stalled cycles            {report.stalls}")
    print(f"wall time                 {report.seconds} s")


def print_fuzz(report: FuzzReport) -> None:
    print(f"frames sent               {report.frames}  ({report.malformed} malformed, "
          f"{report.connections} connections)")
    print(f"minutes                   {report.seconds / 60:.1f}")
    print(f"broker crashes            {report.crashes}")
    print(f"connections left open     {report.unclosed}")
    print(f"well-behaved client       {report.client_rounds} rounds, {report.client_errors} errors, "
          f"slowest {report.client_max_latency_ms} ms")
    print(f"broker RSS                {report.rss_start_mb} MB at start, peak {report.rss_peak_mb} MB")
    for sample in report.client_error_samples:
        print(f"  client error: {sample}")


def print_faults(results: list[FaultResult]) -> None:
    for result in results:
        if result.skipped:
            print(f"{result.name:<25} skip  {result.skipped}")
            continue
        print(f"{result.name:<25} {'pass' if result.passed else 'FAIL'}  {result.detail}")


def run(args: argparse.Namespace, workdir: Path) -> tuple[dict, list[str]]:
    """Run the chosen sections; returns the figures and every failed invariant."""
    figures: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "command": " ".join(["python -m bench.reliability", *sys.argv[1:]]),
                     "machine": f"{platform.machine()}, {platform.python_version()}"}
    failures: list[str] = []
    if "kill" not in args.skip:
        print("== kill -9 cycles", flush=True)
        kill = run_kill_cycles(workdir, cycles=args.cycles)
        print_kill(kill)
        figures["kill"] = kill.as_dict()
        failures += [f"kill: {f}" for f in kill.failures()]
    if "fuzz" not in args.skip:
        print("== fuzzing", flush=True)
        fuzz = run_fuzz(workdir, frames=args.fuzz_frames, seconds=args.fuzz_seconds)
        print_fuzz(fuzz)
        figures["fuzz"] = fuzz.as_dict()
        failures += [f"fuzz: {f}" for f in fuzz.failures()]
    if "faults" not in args.skip:
        print("== faults", flush=True)
        results = [run_fault(name, workdir) for name in FAULTS]
        print_faults(results)
        figures["faults"] = [r.as_dict() for r in results]
        failures += [f"fault {r.name}: {r.detail}" for r in results if not r.passed]
    return figures, failures


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50, help="kill -9 cycles (default 50)")
    parser.add_argument("--fuzz-frames", type=int, default=None,
                        help="stop fuzzing after this many frames (default: no limit)")
    parser.add_argument("--fuzz-seconds", type=float, default=180.0,
                        help="stop fuzzing after this many seconds (default 180)")
    parser.add_argument("--skip", type=lambda s: set(s.split(",")), default=set(),
                        help=f"comma-separated sections to skip: {', '.join(SECTIONS)}")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.skip - set(SECTIONS):
        parser.error(f"--skip: unknown sections {', '.join(sorted(args.skip - set(SECTIONS)))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rmqk-reliability-") as workdir:
        figures, failures = run(args, Path(workdir))
    figures["failures"] = failures
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print("== result:", "every invariant held" if not failures else "FAILED: " + "; ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
