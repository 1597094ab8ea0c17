#!/usr/bin/env python3
"""Other tools' traces at speed (issues "Interop" and 24), side by side in one run.

Four modes (--only picks some; each generates its data once and reuses it while its
parameters match, under BUILD_DIR/bench-data/ or --dir):

import      one synthetic PyTorch-profiler (Kineto) trace of about --import-mb MB (200),
            imported end to end (`import_bench import`: interop::ImportTraces) alternating
            with a bare simdjson walk of the same file. Target: the import reads at least
            --target-mb-per-s (100) MB/s of JSON.
analyze-set an --ranks (8) rank set of Kineto traces shaped like HTA's df_index_resolver test
            trace (about 216,000 events and 53.7 MB of JSON per rank), analyzed by the real
            CLI (`rankscope analyze DIR --format json --out /dev/null`) alternating with a bare
            simdjson walk of the same files on as many threads as the analyzer uses (and, with
            --gzip, both again on the .json.gz copy: read + inflate + walk). Targets: analyze
            wall <= 2x the bare walk; analyze wall <= 1/20 of HTA's on the same set.
huge        one Kineto trace of --huge-gb GB (6), streamed to disk by the generator, analyzed
            once. Target: peak RSS <= 1 GiB + 64 bytes per event.
view        the analyze-set opened in the viewer (`rankscope-gui DIR --screenshot`: load, the
            Run tab's analysis, one frame) alternating with the route the viewer took before
            issue 24 (`rankscope import DIR -o RUN`, then `rankscope-gui RUN --screenshot`).
            Target: the direct open's wall <= 1/2 of import + open. Needs rankscope-gui
            (RANKSCOPE_BUILD_GUI) in the build; without it the mode says so and is skipped.

Every timed run is a fresh process: wall time, CPU time and peak RSS come from os.wait4's
rusage of that child. Exits 1 when a target is missed; --smoke (ctest) runs every mode at a
tiny size once, in a temporary directory, and checks only that everything works.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

# HTA 0.6's `TraceAnalysis(trace_dir=...)` load, `get_temporal_breakdown()` and
# `get_comm_comp_overlap()` (visualize=False) on the default analyze-set (8 ranks of 215,337
# events, 53.5 MB each) took 22.3 s of wall time, the median of 3 runs of a fresh Python
# process on the project's 2-core VM, measured for issue 24 (HTA from its source with
# Debian's python3-pandas; bench/README.md says how to repeat it with --hta-python).
HTA_WALL_S = 22.3
# The set HTA_WALL_S belongs to: a set made with other parameters or by another version of
# the generator gets no HTA verdict unless --hta-python measures one.
HTA_SET = {"ranks": 8, "events_per_rank": 215_000, "generator": 2}
TARGET_ANALYZE_OVER_WALK = 2.0
TARGET_SPEEDUP_OVER_HTA = 20.0
TARGET_VIEW_OVER_IMPORT_AND_OPEN = 0.5
# Peak RSS bound of the huge mode: a fixed 1 GiB (the process, the libraries, the buffers a
# streaming reader keeps whatever the file's size) plus 64 bytes per event (what the
# analysis keeps per event: a rank file's lean rows and the merged intervals are about
# 25-40 bytes each, as analyze_bench measures). A reader that holds the file's text or all of
# its events at once cannot stay inside it.
HUGE_FIXED_BYTES = 1 << 30
HUGE_BYTES_PER_EVENT = 64

HTA_SCRIPT = """
import sys
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
analyzer.get_temporal_breakdown(visualize=False)
analyzer.get_comm_comp_overlap(visualize=False)
"""


class BenchError(RuntimeError):
    """Ends the bench with one line (exit 1)."""


# ---- running a child and measuring it ---------------------------------------------------------

class Measured:
    def __init__(self, wall_s, cpu_s, peak_rss_kib, code, out, err):
        self.wall_s, self.cpu_s, self.peak_rss_kib = wall_s, cpu_s, peak_rss_kib
        self.code, self.out, self.err = code, out, err

    def last_json(self):
        lines = [line for line in self.out.splitlines() if line.startswith("{")]
        if not lines:
            raise BenchError(f"no result line in: {self.out.strip()[-300:]}")
        return json.loads(lines[-1])

    def why(self):
        lines = [line for line in (self.err + "\n" + self.out).splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower()]
        return f"exit code {self.code}: " + ((errors or lines or ["no output"])[-1])[:400]


def measure(cmd):
    """Runs cmd in a fresh process; its wall time, CPU time (user + system) and peak RSS from
    os.wait4's rusage (children it waited for included)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        pid = os.posix_spawn(cmd[0], cmd, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                                           (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
        wall = time.monotonic() - start
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode(errors="replace"))
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, os.waitstatus_to_exitcode(status), *texts)


def run_checked(cmd):
    done = measure(cmd)
    if done.code != 0:
        raise BenchError(f"{' '.join(cmd)} failed, {done.why()}")
    return done


# ---- data sets, made once ----------------------------------------------------------------------

def generator_version(bench):
    return int(run_checked([bench, "generator-version"]).out.strip())


def ensure_data(bench, directory, variant, params, files, smoke_reuse_check=False):
    """Makes `files` ({name: generate arguments}) in `directory` unless its params-VARIANT.json
    holds exactly `params` (with the generator's version), then returns what generate said
    about each file. Each variant (json, json.gz) has its own params file beside the trace
    folders, never inside them (a folder of traces is read whole). Other parameters replace
    the files the old params file lists; a non-empty directory without a params file of ours
    is refused, never overwritten."""
    wanted = dict(params, variant=variant, generator=generator_version(bench))
    params_file = os.path.join(directory, f"params-{variant}.json")
    if os.path.exists(params_file):
        with open(params_file) as f:
            old = json.load(f)
        if old.get("params") == wanted and all(os.path.exists(os.path.join(directory, n)) for n in files):
            print(f"  reusing {directory} ({variant})")
            return old["files"]
        for name in old.get("files", {}):
            path = os.path.join(directory, name)
            if os.path.exists(path):
                os.remove(path)
        os.remove(params_file)
    elif os.path.isdir(directory) and os.listdir(directory) and not any(
            n.startswith("params-") and n.endswith(".json") for n in os.listdir(directory)):
        raise BenchError(f"{directory} holds files but no params-*.json of ours: give another --dir or empty it")
    if smoke_reuse_check:
        raise BenchError(f"{directory} ({variant}) was not reused on the second look")
    for name in files:
        os.makedirs(os.path.dirname(os.path.join(directory, name)), exist_ok=True)
    free = shutil.disk_usage(directory).free
    needed = params.get("bytes_needed", 0)
    if needed and free < needed * 1.05:
        raise BenchError(f"{directory}: {needed / 1e9:.1f} GB needed, {free / 1e9:.1f} GB free")
    start = time.monotonic()

    def generate(item):
        name, arguments = item
        return name, run_checked([bench, "generate", os.path.join(directory, name)] + arguments).last_json()

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        made = dict(pool.map(generate, files.items()))
    with open(params_file + ".tmp", "w") as f:
        json.dump({"params": wanted, "files": made}, f, indent=1)
    os.replace(params_file + ".tmp", params_file)
    print(f"  generated {directory} ({variant}) in {time.monotonic() - start:.1f} s")
    return made


# ---- the modes ---------------------------------------------------------------------------------

def fmt_rate(value, unit):
    return f"{value / 1e6:.2f}M {unit}" if value >= 1e6 else f"{value / 1e3:.0f}K {unit}"


def import_mode(args, bench, data):
    mb = args.import_mb
    name = "trace.json.gz" if args.gzip else "trace.json"
    directory = os.path.join(data, f"kineto-import-{mb:g}mb")
    made = ensure_data(bench, directory, "json.gz" if args.gzip else "json", {"mode": "import", "mb": mb},
                       {name: ["--bytes", str(int(mb * 1e6))] + (["--gzip"] if args.gzip else [])})[name]
    trace = os.path.join(directory, name)
    print(f"import: {made['events']:,} events, {made['bytes'] / 1e6:.1f} MB of JSON"
          f"{', gzipped to ' + format(os.path.getsize(trace) / 1e6, '.1f') + ' MB' if args.gzip else ''}")
    rates = {"parse": [], "import": []}
    for i in range(args.runs):
        for mode in ("parse", "import"):
            result = run_checked([bench, mode, trace]).last_json()
            if result["events"] <= 0:
                raise BenchError(f"{mode} read no events")
            rates[mode].append(result["mb_per_s"])
            print(f"  run {i} {mode:6s}: {result['seconds']:.3f} s, {result['mb_per_s']:.1f} MB/s, "
                  f"{result['events']:,} events", flush=True)
    parse, imported = statistics.median(rates["parse"]), statistics.median(rates["import"])
    print(f"  median: bare walk {parse:.1f} MB/s, import {imported:.1f} MB/s, import / walk {imported / parse:.2f}")
    passed = imported >= args.target_mb_per_s
    print(f"  import speed {imported:.1f} MB/s (target >= {args.target_mb_per_s:g} MB/s): "
          f"{'(smoke)' if args.smoke else 'PASS' if passed else 'FAIL'}")
    return args.smoke or passed


def validate_report(report_path, ranks, steps):
    """The analysis saw the set as generated: every rank, the world size, every step."""
    with open(report_path) as f:
        report = json.load(f)
    run, found = report["run"], report["steps"]["steps_found"]
    if run["ranks"] != list(range(ranks)) or run["world_size"] != ranks or found != steps:
        raise BenchError(f"the report does not match the set: ranks {run['ranks']}, world size "
                         f"{run['world_size']}, {found} steps (generated: {ranks} ranks, {steps} steps)")


def ensure_set(args, bench, data, variants):
    """The analyze-set's traces: (directory, {name: what the generator made})."""
    ranks, events = args.ranks, args.set_events
    directory = os.path.join(data, f"kineto-set-{ranks}x{events}")
    params = {"mode": "analyze-set", "ranks": ranks, "events": events}
    made = {}
    for variant in variants:
        files = {f"{variant}/rank-{r}.{variant}":
                 ["--events", str(events), "--rank", str(r), "--world-size", str(ranks)]
                 + (["--gzip"] if variant == "json.gz" else []) for r in range(ranks)}
        made.update(ensure_data(bench, directory, variant, params, files))
        if args.smoke:
            ensure_data(bench, directory, variant, params, files, smoke_reuse_check=True)
    return directory, made


def analyze_set_mode(args, bench, rankscope, data):
    ranks, events = args.ranks, args.set_events
    variants = ["json"] + (["json.gz"] if args.gzip else [])
    directory, made = ensure_set(args, bench, data, variants)
    plain = [made[f"json/rank-{r}.json"] for r in range(ranks)]
    total_events = sum(m["events"] for m in plain)
    total_bytes = sum(m["bytes"] for m in plain)
    steps = plain[0]["steps"]
    gz_mb = sum(os.path.getsize(os.path.join(directory, n)) for n in made if n.endswith(".gz")) / 1e6
    threads = args.threads or os.cpu_count() or 1
    print(f"analyze-set: {ranks} ranks x {plain[0]['events']:,} events ({plain[0]['bytes'] / 1e6:.1f} MB of JSON "
          f"each, {steps} steps); {total_events:,} events, {total_bytes / 1e6:.1f} MB in all"
          f"{f', {gz_mb:.1f} MB gzipped' if args.gzip else ''}; {args.runs} interleaved runs, "
          f"walk on {threads} threads")

    def walk_cmd(variant):
        traces = sorted(os.path.join(directory, name) for name in made if name.startswith(variant + "/"))
        return [bench, "parse", "--threads", str(threads)] + traces

    def analyze_cmd(variant, out="/dev/null"):
        return [rankscope, "analyze", os.path.join(directory, variant), "--format", "json", "--out", out]

    # Untimed first round: warms the page cache, and checks that the walk counts every event
    # and that the analysis reads the set as generated.
    with tempfile.TemporaryDirectory(prefix="import-bench-") as tmp:
        for variant in variants:
            walked = run_checked(walk_cmd(variant)).last_json()
            if walked["events"] != total_events:
                raise BenchError(f"the walk of {variant} counted {walked['events']:,} events, "
                                 f"generated {total_events:,}")
            report = os.path.join(tmp, "report.json")
            run_checked(analyze_cmd(variant, report))
            validate_report(report, ranks, steps)

    kinds = [(f"walk {v}", walk_cmd(v)) for v in variants] + [(f"analyze {v}", analyze_cmd(v)) for v in variants]
    hta_cmd = [args.hta_python, "-c", HTA_SCRIPT, os.path.join(directory, "json")] if args.hta_python else None
    if hta_cmd:
        kinds.append(("HTA json", hta_cmd))
    results = {name: [] for name, _ in kinds}
    for i in range(args.runs):
        for name, cmd in kinds:
            done = measure(cmd)
            if done.code != 0:
                raise BenchError(f"run {i} {name} failed, {done.why()}")
            results[name].append(done)
            print(f"  run {i} {name:15s} {done.wall_s:6.2f} s wall, {done.cpu_s:6.2f} s CPU, "
                  f"peak RSS {done.peak_rss_kib / 1024:6.0f} MiB", flush=True)

    def med(name, key):
        return statistics.median(getattr(m, key) for m in results[name])

    print(f"  median of {args.runs}          wall s   CPU s  peak RSS    events/s        MB/s  RSS B/event")
    for name, _ in kinds:
        wall, rss = med(name, "wall_s"), med(name, "peak_rss_kib") * 1024
        print(f"  {name:20s} {wall:8.2f} {med(name, 'cpu_s'):7.2f} {rss / 2**20:6.0f} MiB "
              f"{fmt_rate(total_events / wall, 'ev/s'):>13s} {total_bytes / 1e6 / wall:8.1f} MB/s "
              f"{rss / total_events:8.1f}")

    ok = True

    def verdict(what, passed, detail):
        nonlocal ok
        print(f"  {what}: {detail}: {'(smoke)' if args.smoke else 'PASS' if passed else 'FAIL'}")
        ok = ok and (args.smoke or passed)

    for variant in variants:
        ratio = med(f"analyze {variant}", "wall_s") / med(f"walk {variant}", "wall_s")
        floor = "read + inflate + walk" if variant == "json.gz" else "read + walk"
        verdict(f"analyze {variant} / bare walk ({floor})", ratio <= TARGET_ANALYZE_OVER_WALK,
                f"{ratio:.2f}x (target <= {TARGET_ANALYZE_OVER_WALK:g}x)")
    analyze_wall = med("analyze json", "wall_s")
    if hta_cmd:
        hta_wall, source = med("HTA json", "wall_s"), f"measured here, median of {args.runs}"
    elif {"ranks": ranks, "events_per_rank": events, "generator": generator_version(bench)} == HTA_SET:
        hta_wall, source = HTA_WALL_S, "HTA 0.6 on this set, measured for issue 24 (HTA_WALL_S)"
    else:
        hta_wall = None
        print(f"  analyze vs HTA: no figure for this set (HTA_WALL_S is for {HTA_SET}); give --hta-python")
    if hta_wall is not None:
        verdict(f"analyze json vs HTA {hta_wall:.1f} s ({source})",
                analyze_wall <= hta_wall / TARGET_SPEEDUP_OVER_HTA,
                f"{hta_wall / analyze_wall:.1f}x faster (target >= {TARGET_SPEEDUP_OVER_HTA:g}x, "
                f"analyze <= {hta_wall / TARGET_SPEEDUP_OVER_HTA:.2f} s)")
    return ok


def view_mode(args, bench, rankscope, gui, data):
    if not os.path.exists(gui):
        print(f"view: skipped, {gui} is not built (RANKSCOPE_BUILD_GUI=OFF?)")
        return True
    directory, made = ensure_set(args, bench, data, ["json"])
    traces = os.path.join(directory, "json")
    total_events = sum(m["events"] for m in made.values())
    print(f"view: the analyze-set ({args.ranks} ranks, {total_events:,} events) opened in rankscope-gui "
          f"(offscreen, --screenshot); {args.runs} interleaved runs")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    results = {"open directly": [], "import + open": []}
    with tempfile.TemporaryDirectory(prefix="import-bench-view-") as tmp:
        picture = os.path.join(tmp, "frame.png")
        run_dir = os.path.join(tmp, "run")
        for i in range(args.runs):
            direct = measure([gui, traces, "--screenshot", picture])
            if direct.code != 0:
                raise BenchError(f"run {i}: rankscope-gui {traces} failed, {direct.why()}")
            shutil.rmtree(run_dir, ignore_errors=True)
            imported = measure([rankscope, "import", traces, "-o", run_dir])
            if imported.code != 0:
                raise BenchError(f"run {i}: rankscope import failed, {imported.why()}")
            opened = measure([gui, run_dir, "--screenshot", picture])
            if opened.code != 0:
                raise BenchError(f"run {i}: rankscope-gui {run_dir} failed, {opened.why()}")
            results["open directly"].append((direct.wall_s, direct.cpu_s, direct.peak_rss_kib))
            results["import + open"].append((imported.wall_s + opened.wall_s, imported.cpu_s + opened.cpu_s,
                                             max(imported.peak_rss_kib, opened.peak_rss_kib)))
            print(f"  run {i}: open directly {direct.wall_s:.2f} s; import {imported.wall_s:.2f} s + "
                  f"open {opened.wall_s:.2f} s", flush=True)
    print(f"  median of {args.runs}          wall s   CPU s  peak RSS  RSS B/event")
    for name, rows in results.items():
        wall, cpu, rss = (statistics.median(row[k] for row in rows) for k in range(3))
        print(f"  {name:20s} {wall:8.2f} {cpu:7.2f} {rss / 1024:6.0f} MiB {rss * 1024 / total_events:8.1f}")
    ratio = (statistics.median(r[0] for r in results["open directly"])
             / statistics.median(r[0] for r in results["import + open"]))
    passed = ratio <= TARGET_VIEW_OVER_IMPORT_AND_OPEN
    print(f"  open directly / import + open: {ratio:.2f} (target <= {TARGET_VIEW_OVER_IMPORT_AND_OPEN:g}): "
          f"{'(smoke)' if args.smoke else 'PASS' if passed else 'FAIL'}")
    return args.smoke or passed


def huge_mode(args, rankscope, bench, data):
    gb = args.huge_gb
    directory = os.path.join(data, f"kineto-huge-{gb:g}gb")
    generate = ["--bytes", str(int(gb * 1e9)), "--rank", "0", "--world-size", "1"]
    made = ensure_data(bench, directory, "json", {"mode": "huge", "gb": gb, "bytes_needed": int(gb * 1e9)},
                       {"trace.json": generate})["trace.json"]
    trace = os.path.join(directory, "trace.json")
    events = made["events"]
    bound = HUGE_FIXED_BYTES + HUGE_BYTES_PER_EVENT * events
    print(f"huge: {made['bytes'] / 1e6:,.0f} MB of JSON, {events:,} events, {made['steps']} steps; "
          f"peak RSS bound {bound / 2**30:.2f} GiB (1 GiB + {HUGE_BYTES_PER_EVENT} B/event)")
    with tempfile.TemporaryDirectory(prefix="import-bench-") as tmp:
        report = os.path.join(tmp, "report.json")
        # The smoke run keeps the report to check it; the timed run writes it nowhere.
        out = report if args.smoke else "/dev/null"
        done = measure([rankscope, "analyze", trace, "--format", "json", "--out", out])
        if done.code == 0 and args.smoke:
            validate_report(report, 1, made["steps"])
    if done.code != 0:
        print(f"  rankscope analyze failed after {done.wall_s:.2f} s, {done.why()}: FAIL")
        return False
    rss = done.peak_rss_kib * 1024
    print(f"  rankscope analyze: {done.wall_s:.2f} s wall, {done.cpu_s:.2f} s CPU, "
          f"{fmt_rate(events / done.wall_s, 'events/s')}, {made['bytes'] / 1e6 / done.wall_s:.1f} MB/s, "
          f"peak RSS {rss / 2**20:.0f} MiB ({rss / events:.1f} B/event)")
    passed = rss <= bound
    print(f"  peak RSS {rss / 2**30:.2f} GiB (bound {bound / 2**30:.2f} GiB): "
          f"{'(smoke)' if args.smoke else 'PASS' if passed else 'FAIL'}")
    return args.smoke or passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release")
    parser.add_argument("--dir", help="where the generated traces live (default: BUILD_DIR/bench-data)")
    parser.add_argument("--only", default="import,analyze-set,huge,view",
                        help="modes to run, comma-separated: import, analyze-set, huge, view")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gzip", action="store_true",
                        help="import: a .json.gz trace instead; analyze-set: the .json.gz copy too")
    parser.add_argument("--import-mb", type=float, default=200.0)
    parser.add_argument("--target-mb-per-s", type=float, default=100.0)
    parser.add_argument("--ranks", type=int, default=HTA_SET["ranks"])
    parser.add_argument("--set-events", type=int, default=HTA_SET["events_per_rank"],
                        help="events per rank: each file ends with the step that reaches it")
    parser.add_argument("--threads", type=int, default=0, help="threads of the bare walk (default: hardware threads)")
    parser.add_argument("--hta-python", help="a Python that can `import hta`: run HTA on the set and use its time")
    parser.add_argument("--huge-gb", type=float, default=6.0)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    modes = [m.strip() for m in args.only.split(",") if m.strip()]
    unknown = [m for m in modes if m not in ("import", "analyze-set", "huge", "view")]
    if unknown:
        parser.error(f"unknown mode {unknown[0]!r} in --only")
    if args.smoke:
        args.runs, args.import_mb, args.ranks, args.set_events, args.huge_gb = 1, 0.5, 2, 9_000, 0.004
        args.gzip = True

    bench = os.path.join(args.build_dir, "bench", "import_bench")
    rankscope = os.path.join(args.build_dir, "cli", "rankscope")
    gui = os.path.join(args.build_dir, "gui", "app", "rankscope-gui")
    for program in (bench, rankscope):
        if not os.path.exists(program):
            print(f"import_bench.py: {program} is missing (build first: cmake --preset release && "
                  "cmake --build build/release --target import_bench rankscope)", file=sys.stderr)
            return 2
    tmp = tempfile.TemporaryDirectory(prefix="import-bench-") if args.smoke and not args.dir else None
    data = tmp.name if tmp else (args.dir or os.path.join(args.build_dir, "bench-data"))
    ok = True
    try:
        if "import" in modes:
            ok = import_mode(args, bench, data) and ok
        if "analyze-set" in modes:
            ok = analyze_set_mode(args, bench, rankscope, data) and ok
        if "huge" in modes and args.huge_gb > 0:
            ok = huge_mode(args, rankscope, bench, data) and ok
        if "view" in modes:
            ok = view_mode(args, bench, rankscope, gui, data) and ok
    except (BenchError, OSError, ValueError, KeyError) as e:
        print(f"import_bench.py: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp:
            tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
