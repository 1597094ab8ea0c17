#!/usr/bin/env python3
"""How many pairs `rankscope ab` needs to catch a step-time regression on this machine.

For planted slowdowns of 1%, 3% and 10% of the trainer's step time, as CPU work
(--extra-step-work-ms: a sleep would cost less on the loaded machine, whose hog uses the time),
and for none (A against itself), runs `rankscope ab --metric step_time_ns` with up to
--pairs pairs, on a quiet machine and then with a CPU hog started mid-run (one busy process
per core, each pinned to its core, from 2 s on). Prints, per case, the pairs run, the seconds, the ratio
B/A with its interval and the verdict. Exits 1 on a miss: a false alarm (A against itself
regressed, quiet or loaded), or a 10% slowdown not caught within --pairs pairs.

    python3 bench/ab_bench.py --build-dir build/release [--pairs 40] [--only quiet|loaded]
"""
import argparse
import multiprocessing
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_env import find_program  # noqa: E402

WORKLOAD = ["--steps", "30", "--batch", "128", "--width", "512", "--depth", "4", "--bucket-mb", "1", "--quiet",
            "--threads", "1"]
CHANGES_PCT = (0, 1, 3, 10)


def step_time_ms(trainer):
    """The trainer's own median step time, the fastest of three runs without the collector."""
    times = []
    for _ in range(3):
        done = subprocess.run([trainer, *WORKLOAD], capture_output=True, text=True, timeout=300)
        found = re.search(r"step time median ([0-9.]+) ms", done.stderr + done.stdout)
        if done.returncode != 0 or not found:
            sys.exit(f"ab_bench: the trainer failed or printed no step time: {done.stderr.strip()[-300:]}")
        times.append(float(found.group(1)))
    return min(times)


def spin():
    while True:
        pass


class Hog:
    """One busy process per core, each pinned to its core, from `start_after` seconds on, until
    stopped. Unpinned, two could share a core and leave another free for a while: whatever
    runs there runs twice as fast as elsewhere, for seconds, a bimodal noise; pinned, every
    other process shares a core with one busy one all the time."""

    def __init__(self, start_after):
        self.start_after = start_after
        self.processes = []

    def __enter__(self):
        def start():
            time.sleep(self.start_after)
            for cpu in sorted(os.sched_getaffinity(0)):
                p = multiprocessing.Process(target=spin, daemon=True)
                p.start()
                os.sched_setaffinity(p.pid, {cpu})
                self.processes.append(p)
        self.thread = threading.Thread(target=start, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.thread.join()
        for p in self.processes:
            p.terminate()
            p.join()


def run_ab(rankscope, trainer, delay_ms, pairs, out_dir):
    a = shlex.join([trainer, *WORKLOAD])
    b = shlex.join([trainer, *WORKLOAD, "--extra-step-work-ms", f"{delay_ms:.3f}"]) if delay_ms > 0 else a
    started = time.monotonic()
    done = subprocess.run([rankscope, "ab", "--a", a, "--b", b, "--ranks", "1", "--pairs", str(pairs),
                           "--metric", "step_time_ns", "-o", out_dir], capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        sys.exit(f"ab_bench: rankscope ab failed: {done.stderr.strip()[-400:]}")
    row = re.search(r"^\s+1\s+step_time_ns\s+(\d+)\s+(\S+)\s+(\[[^\]]*\]|-)\s+\S+\s+(.+)$", done.stdout, re.M)
    used = re.search(r"B against A, (\d+) pairs", done.stdout)
    if not row or not used:
        sys.exit(f"ab_bench: no step_time_ns row in:\n{done.stdout}")
    return {"pairs": int(used.group(1)), "seconds": seconds, "ratio": row.group(2), "interval": row.group(3),
            "verdict": row.group(4).strip()}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release")
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--only", choices=("quiet", "loaded"))
    args = parser.parse_args()
    rankscope = find_program(args.build_dir, "rankscope")
    trainer = find_program(args.build_dir, "rankscope-trainer")
    step_ms = step_time_ms(trainer)
    print(f"trainer step time {step_ms:.2f} ms (median, without the collector); up to {args.pairs} pairs per case")
    print(f"{'machine':<7} {'change':>6} {'work':>8} {'pairs':>5} {'seconds':>8} {'B/A':>7} {'interval':>18}  verdict")
    misses = []
    for machine in ("quiet", "loaded"):
        if args.only and machine != args.only:
            continue
        for pct in CHANGES_PCT:
            delay = step_ms * pct / 100.0
            with tempfile.TemporaryDirectory() as tmp:
                if machine == "loaded":
                    with Hog(start_after=2.0):
                        result = run_ab(rankscope, trainer, delay, args.pairs, os.path.join(tmp, "ab"))
                else:
                    result = run_ab(rankscope, trainer, delay, args.pairs, os.path.join(tmp, "ab"))
            print(f"{machine:<7} {pct:>5}% {delay:>6.2f}ms {result['pairs']:>5} {result['seconds']:>8.0f} "
                  f"{result['ratio']:>7} {result['interval']:>18}  {result['verdict']}", flush=True)
            if pct == 0 and result["verdict"] == "regressed":
                misses.append(f"{machine}: a false alarm, A against itself regressed")
            if pct == 10 and result["verdict"] != "regressed":
                misses.append(f"{machine}: a 10% slowdown not caught in {result['pairs']} pairs ({result['verdict']})")
    for miss in misses:
        print(f"MISS {miss}")
    print("PASS" if not misses else "FAIL")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
