#!/usr/bin/env python3
"""Collector benchmarks (issue "Collector I"), side by side in one run.

1. Cost of an NVTX push+pop pair on the application thread, with no injection, with an
   injection whose handlers do nothing, and with the collector. Runs are interleaved
   (none, empty, collector, none, ...) and medians reported. Target: collector <= 60 ns.
2. Two threads making 2M NVTX calls per second together (a push and a pop are one call
   each, so 1M ranges/s) for 10 s under the collector. Target: zero drops, and every
   range in the rank file.
Exits 1 when a target is missed. --smoke runs tiny sizes and checks only that it works.
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile


def run(cmd, env):
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return out.stdout.split()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release")
    parser.add_argument("--repetitions", type=int, default=7)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=2_000_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.repetitions, args.pairs, args.rate, args.seconds = 1, 20_000, 200_000, 0.2

    loop = os.path.join(args.build_dir, "bench", "nvtx_loop")
    empty = os.path.join(args.build_dir, "bench", "libnvtx_empty_injection.so")
    collector = os.path.join(args.build_dir, "collector", "librankscope_collector.so")
    for path in (loop, empty, collector):
        if not os.path.exists(path):
            print(f"collector_bench.py: {path} is missing (build first: cmake --preset release && "
                  "cmake --build --preset release)", file=sys.stderr)
            return 2

    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSCOPE_", "NVTX_INJECTION"))}
    base.pop("LD_PRELOAD", None)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        def collector_env(name):
            run_dir = os.path.join(tmp, name)
            os.mkdir(run_dir)
            return dict(base, RANKSCOPE_RUN_DIR=run_dir, RANKSCOPE_RUN_ID="bench", RANK="0", WORLD_SIZE="1",
                        NVTX_INJECTION64_PATH=collector, LD_PRELOAD=collector), run_dir

        variants = {"no injection": lambda i: (base, None),
                    "empty injection": lambda i: (dict(base, NVTX_INJECTION64_PATH=empty), None),
                    "collector": lambda i: collector_env(f"pairs{i}")}
        results = {name: [] for name in variants}
        for i in range(args.repetitions):
            for name, make_env in variants.items():
                env, _ = make_env(i)
                words = run([loop, "pairs", str(args.pairs)], env)
                results[name].append(float(words[words.index("ns_per_pair") + 1]))
        medians = {name: statistics.median(values) for name, values in results.items()}
        print(f"NVTX push+pop pair, median of {args.repetitions} interleaved runs of {args.pairs} pairs:")
        for name, value in medians.items():
            print(f"  {name:16s} {value:7.1f} ns/pair   (runs: {', '.join(f'{v:.1f}' for v in results[name])})")
        added = medians["collector"] - medians["empty injection"]
        print(f"  collector - empty injection = {added:.1f} ns/pair (the collector's own work)")
        if not args.smoke and medians["collector"] > 60:
            print("  MISSED: target <= 60 ns per pair")
            ok = False

        env, run_dir = collector_env("rate")
        words = run([loop, "rate", "2", str(args.rate), str(args.seconds)], env)
        calls = int(words[words.index("calls") + 1])
        elapsed = float(words[words.index("seconds") + 1])
        db = sqlite3.connect(os.path.join(run_dir, "rank-0.sqlite"))
        ranges = db.execute("SELECT count(*) FROM nvtx_ranges").fetchone()[0]
        drops = db.execute("SELECT coalesce(sum(count), 0) FROM drops").fetchone()[0]
        closed = db.execute("SELECT value FROM meta WHERE key = 'closed_cleanly'").fetchone()[0]
        db.close()
        print(f"Two threads at {args.rate:,.0f} NVTX calls/s for {args.seconds:g} s: {calls:,} calls "
              f"({calls / elapsed:,.0f}/s achieved), {ranges:,} ranges in the file, {drops} dropped, "
              f"closed cleanly: {closed}")
        if drops != 0 or ranges * 2 != calls or closed != "1":
            print("  MISSED: target zero drops and every range recorded")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
