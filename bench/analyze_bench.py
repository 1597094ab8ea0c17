#!/usr/bin/env python3
"""Analyzer benchmark (issue: analyze a synthetic 8-rank, 10M-event run end to end).

Generates the run once (analyze_bench generate; reused while its parameters match), then
interleaves fresh processes of the bare SQLite loop over the rows the analyzer reads
(analyze_bench sqlite) and the analyzer itself, load plus every metric plus the JSON
report (analyze_bench analyze), so each peak RSS belongs to one mode. Prints medians, the
ratio analyzer / bare SQLite and the analyzer's peak memory per event.

Targets: load plus every metric at >= 11M events/s and >= 0.75 of the bare SQLite loop measured
beside it, >= 8.6M events/s with the JSON report, and <= 40 bytes of peak memory per event;
with --critical-path (every step's graph and path), at most 30% more time than without.
Exits 1 when a target is missed. --smoke runs a tiny run once and checks only that everything
works.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

TARGET_EVENTS_PER_S = 11_000_000
TARGET_RATIO_TO_SQLITE = 0.75
TARGET_WITH_JSON_EVENTS_PER_S = 8_600_000
TARGET_BYTES_PER_EVENT = 40
TARGET_PATH_OVER_ANALYZE = 1.30  # analyze --critical-path, load + metrics + the graphs (issue 28)


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout


def measure(binary, mode, run_dir, threads):
    # "path": the analyzer with --critical-path.
    cmd = [binary, "analyze", run_dir, "--critical-path"] if mode == "path" else [binary, mode, run_dir]
    if threads:
        cmd += ["--threads", str(threads)]
    lines = [line for line in run(cmd).splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(cmd)} printed no result")
    return json.loads(lines[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release")
    parser.add_argument("--dir", help="where the synthetic run lives (default: under the build directory)")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="threads of both modes (default: hardware threads)")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.ranks, args.events, args.runs = 2, 20_000, 1

    binary = os.path.join(args.build_dir, "bench", "analyze_bench")
    if not os.path.exists(binary):
        print(f"analyze_bench.py: {binary} is missing (build first: cmake --preset release && "
              "cmake --build --preset release)", file=sys.stderr)
        return 2

    tmp = None
    if args.dir:
        run_dir = args.dir
    elif args.smoke:
        tmp = tempfile.TemporaryDirectory(prefix="analyze-bench-")
        run_dir = tmp.name
    else:
        run_dir = os.path.join(args.build_dir, "bench-data", f"analyze-{args.ranks}x{args.events}")
    try:
        return bench(args, binary, run_dir)
    except (RuntimeError, ValueError, KeyError) as e:
        print(f"analyze_bench.py: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp:
            tmp.cleanup()


def bench(args, binary, run_dir) -> int:
    generate = [binary, "generate", run_dir, "--ranks", str(args.ranks), "--events", str(args.events)]
    print(run(generate).strip())
    if args.smoke and "reusing" not in run(generate):
        raise RuntimeError("a second generate did not reuse the run")

    results = {"sqlite": [], "analyze": [], "path": []}
    for _ in range(args.runs):
        for mode in results:
            results[mode].append(measure(binary, mode, run_dir, args.threads))

    ok = True
    for r in results["sqlite"] + results["analyze"]:
        if r["events"] != args.events:
            raise RuntimeError(f"{r['mode']} counted {r['events']} events, expected {args.events}")
    for r in results["analyze"]:
        if r["progress_reported"] != r["ranks"]:
            print(f"  note: AnalyzeOptions::progress last reported {r['progress_reported']} of {r['ranks']} ranks")
        if r["report_events"] != r["events"]:
            print(f"  note: the report says {r['report_events']:,} events were read, the files hold {r['events']:,}")
        if r["ranks"] != args.ranks or r["steps"] <= 0 or r["matched_collectives"] <= 0:
            raise RuntimeError(f"implausible report: {r['ranks']} ranks, {r['steps']} steps, "
                               f"{r['matched_collectives']} matched collectives")

    def med(mode, key):
        return statistics.median(r[key] for r in results[mode])

    def runs(mode, key, scale, fmt):
        return ", ".join(format(r[key] / scale, fmt) for r in results[mode])

    # The issue's figure is load plus every metric (analyze_s); the JSON report is shown apart.
    for r in results["analyze"] + results["path"]:
        r["metrics_events_per_s"] = r["events"] / r["analyze_s"]
    for r in results["path"]:
        if r["path_steps"] <= 0:
            raise RuntimeError(f"--critical-path measured {r['path_steps']} steps")
    sqlite_rate, analyze_rate = med("sqlite", "events_per_s"), med("analyze", "metrics_events_per_s")
    with_json_rate = med("analyze", "events_per_s")
    bytes_per_event = med("analyze", "bytes_per_event")
    threads = results["analyze"][0]["threads"]
    print(f"{args.ranks} ranks, {args.events:,} events, {threads} threads; median of {args.runs} interleaved runs:")
    print(f"  bare SQLite loop, same rows   {sqlite_rate / 1e6:7.2f}M events/s   "
          f"(runs: {runs('sqlite', 'events_per_s', 1e6, '.2f')}; peak RSS {med('sqlite', 'peak_rss_kib') / 1024:.0f} MiB)")
    print(f"  analyzer, load+metrics        {analyze_rate / 1e6:7.2f}M events/s   "
          f"(runs: {runs('analyze', 'metrics_events_per_s', 1e6, '.2f')}; {med('analyze', 'analyze_s'):.2f} s)")
    print(f"  ... and the JSON report       {with_json_rate / 1e6:7.2f}M events/s   "
          f"(runs: {runs('analyze', 'events_per_s', 1e6, '.2f')}; {med('analyze', 'seconds'):.2f} s)")
    print(f"  analyzer / bare SQLite        {analyze_rate / sqlite_rate:7.2f}   "
          f"(CPU seconds: analyzer {med('analyze', 'cpu_s'):.2f}, bare SQLite {med('sqlite', 'cpu_s'):.2f})")
    print(f"  analyzer CPU seconds          rank workers {med('analyze', 'workers_cpu_s'):.2f}, then serial: "
          f"cross-rank and run metrics {med('analyze', 'serial_cpu_s'):.2f}, JSON {med('analyze', 'json_cpu_s'):.2f}")
    print(f"  analyzer peak memory          {bytes_per_event:7.1f} bytes/event   "
          f"(runs: {runs('analyze', 'bytes_per_event', 1, '.1f')}; peak RSS {med('analyze', 'peak_rss_kib') / 1024:.0f} "
          f"MiB, {med('analyze', 'rss_before_kib') / 1024:.0f} MiB before)")
    path_s, plain_s = med("path", "analyze_s"), med("analyze", "analyze_s")
    print(f"  with --critical-path          {med('path', 'metrics_events_per_s') / 1e6:7.2f}M events/s   "
          f"(runs: {runs('path', 'metrics_events_per_s', 1e6, '.2f')}; {path_s:.2f} s, {path_s / plain_s - 1:+.0%} on "
          f"analyze; {med('path', 'path_steps'):.0f} steps; peak {med('path', 'bytes_per_event'):.1f} bytes/event)")
    if not args.smoke:
        for what, passed, target in (
                ("critical path", path_s <= TARGET_PATH_OVER_ANALYZE * plain_s,
                 f"<= {TARGET_PATH_OVER_ANALYZE - 1:.0%} on top of analyze"),
                ("throughput", analyze_rate >= TARGET_EVENTS_PER_S, f">= {TARGET_EVENTS_PER_S / 1e6:g}M events/s"),
                ("vs bare SQLite", analyze_rate >= TARGET_RATIO_TO_SQLITE * sqlite_rate,
                 f">= {TARGET_RATIO_TO_SQLITE:g} of the bare loop"),
                ("with JSON", with_json_rate >= TARGET_WITH_JSON_EVENTS_PER_S,
                 f">= {TARGET_WITH_JSON_EVENTS_PER_S / 1e6:g}M events/s"),
                ("peak memory", bytes_per_event <= TARGET_BYTES_PER_EVENT, f"<= {TARGET_BYTES_PER_EVENT} bytes/event")):
            print(f"  {what:14s} {'PASS' if passed else 'FAIL'}   target {target}")
            ok = ok and passed
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
