#!/usr/bin/env python3
"""The Kineto importer's speed (issue "Interop"), side by side in one run.

Generates a synthetic PyTorch-profiler trace once (about 200 MB of JSON: nested CPU ops,
their launches, kernels on two streams, NCCL kernels, copies, ProfilerStep annotations, in
Kineto's newer form with 3-decimal microseconds), then runs, alternately and each in a
fresh process: `parse` (simdjson walking every event and reading the fields an importer
reads: the floor) and `import` (rankscope's import end to end: parse, convert, write the
rank file). Prints medians, MB/s of JSON text, and import / parse. Target: the import reads
at least 100 MB/s. Exits 1 when the target is missed; --smoke runs a tiny trace once.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release")
    parser.add_argument("--events", type=int, default=800_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gzip", action="store_true", help="time a .json.gz trace instead")
    parser.add_argument("--target-mb-per-s", type=float, default=100.0)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.events, args.runs = 2_000, 1
    bench = os.path.join(args.build_dir, "bench", "import_bench")
    if not os.path.exists(bench):
        print(f"import_bench.py: {bench} is missing (build first: cmake --preset release && "
              "cmake --build --preset release)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json.gz" if args.gzip else "trace.json")
        made = run([bench, "generate", trace, "--events", str(args.events)] + (["--gzip"] if args.gzip else []))
        print(f"trace: {made['events']:,} events, {made['bytes'] / 1e6:.1f} MB of JSON"
              f"{', gzipped to ' + format(os.path.getsize(trace) / 1e6, '.1f') + ' MB' if args.gzip else ''}")
        rates = {"parse": [], "import": []}
        for i in range(args.runs):
            for mode in ("parse", "import"):
                result = run([bench, mode, trace])
                rates[mode].append(result["mb_per_s"])
                print(f"run {i} {mode:6s}: {result['seconds']:.3f} s, {result['mb_per_s']:.1f} MB/s, "
                      f"{result['events']:,} events", flush=True)
    parse, imported = statistics.median(rates["parse"]), statistics.median(rates["import"])
    print(f"median: parse {parse:.1f} MB/s, import {imported:.1f} MB/s, import / parse {imported / parse:.2f}")
    verdict = "PASS" if imported >= args.target_mb_per_s else "FAIL"
    print(f"import speed {imported:.1f} MB/s (target >= {args.target_mb_per_s:g} MB/s): "
          f"{'(smoke)' if args.smoke else verdict}")
    return 0 if args.smoke or verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
