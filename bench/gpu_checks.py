#!/usr/bin/env python3
"""The collector's GPU checks (issue "Collector II"), on a machine with an NVIDIA GPU.

1. The reference trainer on one GPU under `rankscope profile`: kernels, copies and NCCL
   collectives recorded (CUPTI and the NCCL profiler plugin), the trainer's kernel names
   among them, no events dropped, and `rankscope analyze` reporting a utilization between
   1% and 100%.
2. bench/torch_compare.py: kernel counts per name against torch.profiler, total kernel time
   within 2% (needs PyTorch with CUDA; reported as not run without it).
3. bench/training_overhead.py: step time with and without the collector, median <= 3%.

Prints every figure and one verdict line per check; exits 1 when a check fails, 2 when the
machine cannot run them (no GPU: the trainer falls back to the CPU).
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# Kernels of kernels/cuda/ that any fp32 SGD training step launches.
TRAINER_KERNELS = ("SgemmKernel", "BiasActivationForwardKernel", "BiasActivationBackwardKernel",
                   "SoftmaxCrossEntropyForwardKernel", "SoftmaxCrossEntropyBackwardKernel", "SgdKernel")


def check_trainer(build, steps):
    rankscope = os.path.join(build, "cli", "rankscope")
    trainer = os.path.join(build, "trainer", "rankscope-trainer")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        done = subprocess.run([rankscope, "profile", "-n", "1", "-o", run_dir, "--", trainer, "--steps", str(steps),
                               "--backend", "nccl"], capture_output=True, text=True)
        print(done.stderr.strip())
        if done.returncode != 0:
            return None, "the profiled trainer failed"
        db = sqlite3.connect(f"file:{os.path.join(run_dir, 'rank-0.sqlite')}?mode=ro", uri=True)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        count = lambda table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        counts = {t: count(t) for t in ("kernels", "memcpys", "memsets", "api_calls", "syncs", "collectives",
                                        "collective_parts", "overheads", "nvtx_ranges")}
        names = db.execute("SELECT s.value, count(*), sum(k.end_ns - k.start_ns) FROM kernels k JOIN strings s "
                           "ON s.id = k.name GROUP BY k.name ORDER BY 3 DESC").fetchall()
        collectives = db.execute("SELECT e.name, count(*), sum(c.bytes) FROM collectives c JOIN enums e "
                                 "ON e.type = 'collective_op' AND e.value = c.op GROUP BY c.op").fetchall()
        drops = db.execute("SELECT source, reason, sum(count) FROM drops GROUP BY source, reason").fetchall()
        db.close()
        analysis = subprocess.run([rankscope, "analyze", run_dir, "--format", "json"], capture_output=True, text=True)
        report = json.loads(analysis.stdout) if analysis.returncode in (0, 1) else None
        text = subprocess.run([rankscope, "analyze", run_dir], capture_output=True, text=True).stdout

    print(f"cupti: {meta.get('cupti.status')} (version {meta.get('cupti.version')}, clock {meta.get('cupti.clock')}, "
          f"kinds {meta.get('cupti.kinds')}); nccl plugin: {meta.get('nccl.profiler', 'not loaded')}")
    print("rows: " + ", ".join(f"{table} {n}" for table, n in counts.items()))
    print("top kernels (count, total ms):")
    for name, n, total in names[:12]:
        print(f"  {n:7d} {total / 1e6:10.3f}  {name[:110]}")
    print("collectives: " + (", ".join(f"{op} x{n} ({(b or 0) / 2**20:.1f} MiB)" for op, n, b in collectives) or "none"))
    print("drops: " + (", ".join(f"{s}: {r} {n}" for s, r, n in drops) or "none"))
    print(text)
    problems = []
    if meta.get("cupti.status") != "on":
        problems.append(f"CUPTI not on ({meta.get('cupti.status')})")
    for table in ("kernels", "memcpys", "collectives"):
        if counts[table] == 0:
            problems.append(f"no {table}")
    # Demangled names carry namespaces and template arguments around the function's name.
    missing = [k for k in TRAINER_KERNELS if not any(k in name for name, _, _ in names)]
    if missing:
        problems.append("trainer kernels missing from the names: " + ", ".join(missing))
    if any(n for _, _, n in drops):
        problems.append("events dropped")
    utilization = None
    if report is not None:
        utilization = report["ranks"][0]["totals"].get("utilization_pct")
        print(f"utilization (rankscope analyze, whole trace): {utilization}")
        if utilization is None or not 1.0 <= utilization <= 100.0:
            problems.append(f"utilization {utilization} is not realistic")
    else:
        problems.append("rankscope analyze failed")
    return problems, None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release")
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    probe = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True) if any(
        os.access(os.path.join(p, "nvidia-smi"), os.X_OK) for p in os.environ.get("PATH", "").split(":")) else None
    if probe is None or probe.returncode != 0:
        print("gpu_checks.py: no NVIDIA GPU here (nvidia-smi -L failed or is missing)", file=sys.stderr)
        return 2
    print(probe.stdout.strip())
    failed = False

    print("== check 1: the reference trainer on one GPU under rankscope profile")
    problems, error = check_trainer(args.build_dir, args.steps)
    if error:
        print(f"check 1: FAIL ({error})")
        failed = True
    else:
        print("check 1: " + ("PASS" if not problems else "FAIL (" + "; ".join(problems) + ")"))
        failed |= bool(problems)

    print("== check 2: kernels against torch.profiler")
    code = subprocess.run([sys.executable, os.path.join(HERE, "torch_compare.py"), "--build-dir", args.build_dir]).returncode
    print("check 2: " + {0: "PASS", 1: "FAIL"}.get(code, "NOT RUN (see above)"))
    failed |= code == 1

    print("== check 3: the collector's overhead on the trainer's step time")
    code = subprocess.run([sys.executable, os.path.join(HERE, "training_overhead.py"), "--build-dir",
                           args.build_dir]).returncode
    print("check 3: " + {0: "PASS", 1: "FAIL"}.get(code, "NOT RUN (see above)"))
    failed |= code == 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
