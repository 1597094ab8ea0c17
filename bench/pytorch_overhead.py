#!/usr/bin/env python3
"""What `rankscope profile --pytorch` costs a PyTorch job's step time on the CPU (issue
"Any PyTorch job", benchmark). Target: <= 5%.

The sample DDP job (samples/pytorch/ddp_train.py, Gloo, 2 ranks) runs in interleaved pairs
in one run, so both halves see the same machine: bare (the script starts the ranks itself
with torchrun's variables), then under `rankscope profile --pytorch -n 2` (the collector
preloaded and the PyTorch hook recording steps, collectives and compute). A run's step time
is the median step time rank 0 prints (DDP ranks keep the same pace). The overhead of a pair
is profiled / bare - 1; the verdict takes the median over pairs. The profiled runs must have
recorded every optimizer step.

Needs Debian's python3-torch (run with --python to use another interpreter). Exits 1 when
the target is missed, 2 when it cannot run. --smoke runs one short pair and checks only that
every step works.
"""
import argparse
import os
import re
import sqlite3
import statistics
import sys
import tempfile

from bench_env import clean_environment, find_program, launch_ranks, run

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "..", "samples", "pytorch", "ddp_train.py")
TARGET_PERCENT = 5.0


def median_step_ms(stderr):
    found = re.search(r"median step ([0-9.]+) ms", stderr)
    if not found:
        raise RuntimeError("the job printed no median step time: " + (stderr.strip().splitlines() or ["no output"])[-1])
    return float(found.group(1))


def bare_run(job, ranks):
    results = launch_ranks(lambda rank: job, ranks, clean_environment())
    for rank, (code, err) in enumerate(results):
        if code != 0:
            raise RuntimeError(f"bare rank {rank} failed (exit code {code}): {err.strip()[-300:]}")
    return median_step_ms(results[0][1])


def profiled_run(rankscope, job, ranks, run_dir, steps_expected):
    done = run([rankscope, "profile", "--pytorch", "-n", str(ranks), "-o", run_dir, "--force", "--", *job],
               env=clean_environment())
    if done.returncode != 0:
        raise RuntimeError(f"the profiled run failed (exit code {done.returncode}): {done.stderr.strip()[-300:]}")
    db = sqlite3.connect(f"file:{os.path.join(run_dir, 'rank-0.sqlite')}?mode=ro", uri=True)
    steps = db.execute("SELECT count(*) FROM nvtx_ranges r JOIN strings s ON s.id = r.name "
                       "WHERE s.value = 'step'").fetchone()[0]
    db.close()
    if steps != steps_expected:
        raise RuntimeError(f"the profiled run recorded {steps} steps on rank 0, not {steps_expected}")
    return median_step_ms(done.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", required=True, help="a build tree (release for figures)")
    parser.add_argument("--python", default="/usr/bin/python3", help="an interpreter with torch (default: %(default)s)")
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="one short pair: every step works, no verdict")
    args = parser.parse_args()
    if args.smoke:
        args.pairs, args.steps = 1, 4
    rankscope = find_program(args.build_dir, "rankscope")
    if not os.path.exists(rankscope):
        print(f"pytorch_overhead.py: {rankscope} is missing (build first)", file=sys.stderr)
        return 2
    if run([args.python, "-c", "import torch"]).returncode != 0:
        print(f"pytorch_overhead.py: {args.python} cannot import torch (install python3-torch)", file=sys.stderr)
        return 2
    warmup = 3
    job = [args.python, SAMPLE, "--steps", str(args.steps), "--warmup", str(warmup), "--width", str(args.width)]
    overheads = []
    with tempfile.TemporaryDirectory() as tmp:
        for pair in range(args.pairs):
            try:
                bare = bare_run(job, args.ranks)
                profiled = profiled_run(rankscope, job, args.ranks, os.path.join(tmp, "run"), warmup + args.steps)
            except RuntimeError as error:
                print(f"pytorch_overhead.py: {error}", file=sys.stderr)
                return 2
            overheads.append(100.0 * (profiled / bare - 1.0))
            print(f"pair {pair + 1}: bare {bare:.3f} ms, --pytorch {profiled:.3f} ms per step "
                  f"({overheads[-1]:+.1f}%)")
    median = statistics.median(overheads)
    print(f"--pytorch overhead on the step time: median {median:+.1f}% over {len(overheads)} pair(s) "
          f"(range {min(overheads):+.1f}% to {max(overheads):+.1f}%; target <= {TARGET_PERCENT:g}%)", end="")
    if args.smoke:
        print(": smoke run, no verdict")
        return 0
    met = median <= TARGET_PERCENT
    print(f": {'PASS' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
