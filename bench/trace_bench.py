#!/usr/bin/env python3
"""Runs bench/trace_bench with interleaved repetitions and checks the trace-store targets.

Targets (issue "Project skeleton and the trace store"):
  writer  >= 1M events/s, and >= 70% of a bare prepared-insert loop over the same rows
  reader  >= 5M events/s into memory
Figures are medians over repetitions that run interleaved in one process, so the writer
and the bare loop see the same machine load. Exits 1 when a target is missed.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default="build/release/bench/trace_bench")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--events", type=int, default=1 << 20)
    args = parser.parse_args()

    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [args.binary, f"--events={args.events}",
               f"--benchmark_repetitions={args.repetitions}",
               "--benchmark_enable_random_interleaving=true",
               "--benchmark_report_aggregates_only=false",
               f"--benchmark_out={out.name}", "--benchmark_out_format=json"]
        print("$ " + " ".join(cmd), flush=True)
        try:
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        except (OSError, subprocess.CalledProcessError) as error:
            print(f"trace_bench.py: running {args.binary} failed: {error} "
                  "(build it first: cmake --preset release && cmake --build --preset release)", file=sys.stderr)
            return 2
        report = json.load(open(out.name))

    rates = {}
    for run in report["benchmarks"]:
        if run.get("run_type") != "iteration":
            continue
        name = run["name"].split("/")[0]
        rates.setdefault(name, []).append(run["items_per_second"])
    median = {name: statistics.median(values) for name, values in rates.items()}

    writer, bare, reader = median["BM_Writer"], median["BM_BareInsert"], median["BM_ReaderLoadAll"]
    checks = [
        ("writer events/s", writer, 1e6, f"{writer / 1e6:.2f}M"),
        ("writer / bare insert", writer / bare, 0.70, f"{writer / bare:.2f}"),
        ("reader events/s", reader, 5e6, f"{reader / 1e6:.2f}M"),
    ]
    print(f"\nmedians of {args.repetitions} interleaved repetitions, {args.events} events each")
    print(f"  bare prepared-insert loop: {bare / 1e6:.2f}M events/s")
    failed = False
    for label, value, target, shown in checks:
        ok = value >= target
        failed |= not ok
        print(f"  {label:<22} {shown:>8}   target >= {target / 1e6 if target >= 1e6 else target:g}"
              f"{'M' if target >= 1e6 else ''}   {'ok' if ok else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
