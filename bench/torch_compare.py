#!/usr/bin/env python3
"""rankscope's kernels against torch.profiler's (issue "Collector II", GPU check 2).

Runs samples/pytorch/ddp_train.py twice on one GPU with world size 1 and the same seed and
steps: once under `rankscope profile`, once with --torch-profile (torch.profiler, which
takes CUPTI itself, so the two cannot share a process). It then compares the kernels of the
measured steps:
- rankscope: kernels whose launching API call started inside the NVTX range "measured"
  (backward kernels are launched by PyTorch's autograd thread, so the range's id would not
  reach them: the launch time does);
- torch.profiler: the trace's events of category "kernel".
Targets: the same count for every kernel name; total kernel time within 2%.

Needs a CUDA GPU and PyTorch with CUDA. Exits 1 when a target is missed, 2 when it cannot
run (no PyTorch, no GPU, a run failed). --self-test checks the reading and comparing on small
hand-made inputs (ctest runs it; no GPU needed).
"""
import argparse
import collections
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

from bench_env import RunFailed, SelfTest, clean_environment, existing_directory, find_program, free_port, \
    gzip_copy, hand_made_rank_file, profile_ranks, rank_environment, why_failed


def rankscope_kernels(rank_file):
    """(name -> count, total kernel ns) of the kernels launched inside the range 'measured'."""
    db = sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True)
    window = db.execute("SELECT r.start_ns, r.end_ns FROM nvtx_ranges r JOIN strings s ON s.id = r.name "
                        "WHERE s.value = 'measured'").fetchone()
    if window is None:
        raise RuntimeError(f"{rank_file} has no NVTX range 'measured' (was NVTX recorded?)")
    rows = db.execute(
        "SELECT coalesce(s.value, ''), k.end_ns - k.start_ns FROM kernels k LEFT JOIN strings s ON s.id = k.name "
        "WHERE k.correlation_id IN (SELECT correlation_id FROM api_calls WHERE start_ns >= ? AND start_ns < ?)",
        window).fetchall()
    meta = dict(db.execute("SELECT key, value FROM meta"))
    db.close()
    if meta.get("cupti.status") != "on":
        raise RuntimeError(f"CUPTI was not on in {rank_file}: {meta.get('cupti.status', 'no status')}")
    counts = collections.Counter(name for name, _ in rows)
    return counts, sum(duration for _, duration in rows)


def torch_kernels(trace_file):
    """(name -> count, total kernel ns) of a torch.profiler Chrome trace."""
    with open(trace_file) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    counts = collections.Counter(e["name"] for e in kernels)
    # Kineto writes microseconds with three decimals: whole nanoseconds.
    return counts, sum(round(float(e["dur"]) * 1000) for e in kernels)


def compare(ours, theirs, time_tolerance_percent):
    """Lines describing every difference, and whether the targets hold."""
    (our_counts, our_ns), (their_counts, their_ns) = ours, theirs
    lines = []
    for name in sorted(set(our_counts) | set(their_counts)):
        if our_counts[name] != their_counts[name]:
            lines.append(f"  count differs: {our_counts[name]:6d} rankscope, {their_counts[name]:6d} torch.profiler: "
                         f"{name[:120]}")
    counts_agree = not lines
    difference = 100.0 * (our_ns - their_ns) / their_ns if their_ns else float("inf")
    times_agree = abs(difference) <= time_tolerance_percent
    lines.append(f"kernels: {sum(our_counts.values())} rankscope, {sum(their_counts.values())} torch.profiler, "
                 f"{len(their_counts)} names; counts per name {'agree' if counts_agree else 'DIFFER'}")
    lines.append(f"total kernel time: rankscope {our_ns / 1e6:.3f} ms, torch.profiler {their_ns / 1e6:.3f} ms "
                 f"({difference:+.2f}%, target within {time_tolerance_percent:g}%)")
    return lines, counts_agree and times_agree


def self_test() -> int:
    """The readers and the comparison on a rank file's tables and a Kineto trace made by hand."""
    test = SelfTest("torch_compare.py")
    expect = test.expect
    with tempfile.TemporaryDirectory() as tmp:
        rank_file = os.path.join(tmp, "rank-0.sqlite")
        hand_made_rank_file(
            rank_file,
            "CREATE TABLE nvtx_ranges(id INTEGER PRIMARY KEY, name INTEGER, start_ns INTEGER, end_ns INTEGER);"
            "CREATE TABLE api_calls(id INTEGER PRIMARY KEY, correlation_id INTEGER, start_ns INTEGER, end_ns INTEGER);"
            "CREATE TABLE kernels(id INTEGER PRIMARY KEY, name INTEGER, correlation_id INTEGER, start_ns INTEGER, "
            "end_ns INTEGER);"
            "INSERT INTO strings VALUES(1, 'measured'), (2, 'gemm'), (3, 'relu');"
            "INSERT INTO nvtx_ranges VALUES(1, 1, 1000, 9000);"
            # Launched before the range (warm-up), inside it (two threads), and executing after it.
            "INSERT INTO api_calls VALUES(1, 7, 500, 600), (2, 8, 1200, 1300), (3, 9, 2000, 2100), (4, 10, 8000, 8100);"
            "INSERT INTO kernels VALUES(1, 2, 7, 700, 900), (2, 2, 8, 1400, 2400), (3, 3, 9, 2500, 3000), "
            "(4, 2, 10, 8200, 9800);")
        ours = rankscope_kernels(rank_file)
        expect(ours == (collections.Counter({"gemm": 2, "relu": 1}), 1000 + 500 + 1600),
               f"rankscope_kernels read {ours}")
        trace_file = os.path.join(tmp, "torch.json")
        with open(trace_file, "w") as f:
            json.dump({"traceEvents": [
                {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1.0, "dur": 1.0},
                {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 5.0, "dur": 1.6},
                {"ph": "X", "cat": "kernel", "name": "relu", "ts": 3.0, "dur": 0.5},
                {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 0.0, "dur": 9.0},
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 9.0}]}, f)
        theirs = torch_kernels(trace_file)
        expect(theirs == (collections.Counter({"gemm": 2, "relu": 1}), 3100), f"torch_kernels read {theirs}")
        expect(compare(ours, theirs, 2.0)[1], "equal runs do not compare as equal")
        expect(not compare((ours[0] + collections.Counter({"relu": 1}), ours[1]), theirs, 2.0)[1],
               "a kernel count that differs passes")
        expect(not compare((ours[0], int(ours[1] * 1.03)), theirs, 2.0)[1], "3% more kernel time passes")
        expect(compare((ours[0], int(ours[1] * 1.015)), theirs, 2.0)[1], "1.5% more kernel time fails")
    return test.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release", help="a build tree or a GPU bundle")
    parser.add_argument("--script", default=os.path.join(os.path.dirname(__file__), "..", "samples", "pytorch",
                                                         "ddp_train.py"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--time-tolerance-percent", type=float, default=2.0)
    parser.add_argument("--keep", metavar="DIR", type=existing_directory,
                        help="keep both runs' traces here, gzipped (the real-trace test data)")
    parser.add_argument("--self-test", action="store_true", help="check the comparison on hand-made inputs")
    args = parser.parse_args()
    if args.self_test:
        return self_test()

    probe = subprocess.run([args.python, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != "True":
        print("torch_compare.py: needs PyTorch with a usable CUDA GPU "
              f"({'no PyTorch' if probe.returncode else 'torch.cuda.is_available() is False'})", file=sys.stderr)
        return 2
    rankscope = find_program(args.build_dir, "rankscope")
    if not os.path.exists(rankscope):
        print(f"torch_compare.py: {rankscope} is missing (build the release preset first)", file=sys.stderr)
        return 2

    script = [args.python, os.path.abspath(args.script), "--steps", str(args.steps)]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        try:
            profile_ranks(rankscope, script, run_dir)
        except RunFailed as error:
            print(error.output.rstrip(), file=sys.stderr)
            print(f"torch_compare.py: the profiled run failed ({error})", file=sys.stderr)
            return 2
        trace_dir = os.path.join(tmp, "torch")
        os.makedirs(trace_dir)
        trace_file = os.path.join(trace_dir, "rank0.json")  # what ddp_train.py --torch-profile DIR writes
        env = rank_environment(clean_environment(), 0, 1, free_port())
        torch_run = subprocess.run([*script, "--torch-profile", trace_dir], env=env, capture_output=True, text=True)
        if torch_run.returncode != 0:
            print(torch_run.stderr.rstrip(), file=sys.stderr)
            print(f"torch_compare.py: the torch.profiler run failed ({why_failed(torch_run)})", file=sys.stderr)
            return 2
        rank_file = os.path.join(run_dir, "rank-0.sqlite")
        if args.keep:
            gzip_copy(trace_file, os.path.join(args.keep, "torch-profiler-ddp-nccl-1rank.json.gz"))
            gzip_copy(rank_file, os.path.join(args.keep, "rankscope-ddp-nccl-1rank-rank0.sqlite.gz"))
        try:
            lines, ok = compare(rankscope_kernels(rank_file), torch_kernels(trace_file), args.time_tolerance_percent)
        except (RuntimeError, KeyError, ValueError) as error:
            print(f"torch_compare.py: {error}", file=sys.stderr)
            return 2
    print("\n".join(lines[:-2]))
    print(f"{lines[-2]}; {lines[-1]}: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
