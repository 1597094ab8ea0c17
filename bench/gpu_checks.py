#!/usr/bin/env python3
"""Every GPU check in one run, each within its own time budget (scripts/gpu/run-checks.sh
runs this from a GPU bundle; it also runs from a build tree).

  cuda-kernels   the CUDA kernels against the CPU reference (kernels_cuda_tests)
  gemm           own fp32/bf16 GEMMs against cuBLAS (gpu_gemm_bench; bf16 >= 60%)
  trainer        the reference trainer on one GPU with NCCL under `rankscope profile`:
                 kernels and copies (CUPTI), the NCCL profiler plugin loaded, the trainer's
                 kernel names, no drops, a median step utilization between 1% and 100%
                 from `analyze`
                 (NCCL shows its profiler no collective of a 1-rank communicator, and
                 refuses two ranks on one GPU: collectives need a machine with two GPUs)
  cuda-memory    the trainer on one GPU under `rankscope profile`: CUPTI's memory activity
                 (memory2) as the counter lane "cuda memory: device (gpu 0)", its peak > 0
  cupti-timing   CUPTI's kernel times against CUDA events and the host clock
                 (cupti_timing_check.py)
  torch-compare  a 1-rank NCCL DDP job (samples/pytorch/ddp_train.py): kernel counts per
                 name against torch.profiler (exact), total kernel time within 2%
                 (torch_compare.py)
  ddp-gloo-cuda  the same job with 2 ranks on one GPU over Gloo with CUDA tensors, under
                 `rankscope profile` and analyzed (every step found); and under
                 torch.profiler, whose traces `rankscope analyze` reads too
  pytorch-hook   the sample on one GPU under `rankscope profile --pytorch`: a step per
                 optimizer step, torch's NVTX op ranges (emit_nvtx), >= 90% of the
                 kernels joined to the aten:: op that launched them
  overhead       the collector's cost on the trainer's median step time, <= 3%
                 (training_overhead.py)

With --out DIR: each check's output in DIR/<check>.log, the verdicts in DIR/results.json,
a report in DIR/summary.md (the shape of bench/results/gpu-<date>.md), and the real traces
of the profiled jobs, gzipped, in DIR/traces/ (torch.profiler's and rankscope's of the same
jobs: test data), rewritten after every check. No check runs past --total-budget (540 s);
SIGTERM ends the current check and keeps the reports. Exits 0 when every check passes, 1
when one does not (failed, ran past its budget, or could not run), 2 when there is no GPU
or the arguments are wrong.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sqlite3
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree

from bench_env import BudgetExceeded, RunFailed, clean_environment, find_program, gzip_copy, kill_tagged, \
    launch_ranks, profile_ranks, rank_file_summary, run, why_failed

HERE = os.path.dirname(os.path.abspath(__file__))
# Kernels of kernels/cuda/ that any fp32 SGD training step launches.
TRAINER_KERNELS = ("SgemmKernel", "BiasActivationForwardKernel", "BiasActivationBackwardKernel",
                   "SoftmaxCrossEntropyForwardKernel", "SoftmaxCrossEntropyBackwardKernel", "SgdKernel")
TRACE_LIMIT_BYTES = 5 * 1000 * 1000
# Marks every process a check starts, so that one which outlives its check can be found.
TAG_VARIABLE = "GPU_CHECK_TAG"


def ddp_train_script():
    """samples/pytorch/ddp_train.py in a source tree, or beside this file in a bundle."""
    for path in (os.path.join(HERE, "ddp_train.py"), os.path.join(HERE, "..", "samples", "pytorch", "ddp_train.py")):
        if os.path.exists(path):
            return os.path.abspath(path)
    return os.path.join(HERE, "ddp_train.py")


class Check:
    """What a check gets: the programs, a deadline that every command it runs obeys, and
    where its traces go."""

    def __init__(self, tree, deadline, traces_dir, tag, extra_library_dirs):
        self.tree = tree
        self.deadline = deadline
        self.traces_dir = traces_dir
        self.tag = (TAG_VARIABLE, tag)
        self.env = dict(clean_environment(), **{TAG_VARIABLE: tag})
        self.extra_library_dirs = extra_library_dirs
        self.lines = []

    def program(self, name):
        return find_program(self.tree, name)

    def say(self, text):
        self.lines.append(text)

    def run(self, cmd, env=None):
        return run(cmd, deadline=self.deadline, env=env or self.env, tag=self.tag)

    def profile(self, command, run_dir, ranks=1, env=None):
        """The command's ranks under `rankscope profile`; rankscope's summary said."""
        done = profile_ranks(self.program("rankscope"), command, run_dir, ranks=ranks, env=env or self.env,
                             deadline=self.deadline, tag=self.tag)
        self.say(done.stderr.rstrip())

    def launch(self, cmd_of_rank, ranks, env=None):
        return launch_ranks(cmd_of_rank, ranks, env or self.env, deadline=self.deadline, tag=self.tag)

    def keep(self, source, name):
        """Keeps a real trace, gzipped, when --out was given."""
        if self.traces_dir and os.path.exists(source):
            gzip_copy(source, os.path.join(self.traces_dir, name))

    def script(self, name, *args, env=None):
        """(verdict, headline) of a bench script: exit 0 PASS, 1 FAIL, 2 NOT RUN; its last
        output line is the headline."""
        done = self.run([sys.executable, os.path.join(HERE, name), "--build-dir", self.tree, *args], env=env)
        self.say(done.stdout.rstrip())
        if done.stderr.strip():
            self.say(done.stderr.rstrip())
        out_lines = [line for line in done.stdout.splitlines() if line.strip()]
        # The script's own message on stderr says why it did not pass.
        own = [line for line in done.stderr.splitlines() if line.startswith(name + ":")]
        verdict = {0: "PASS", 1: "FAIL", 2: "NOT RUN"}.get(done.returncode, "ERROR")
        if verdict in ("PASS", "FAIL") and out_lines and not own:
            return verdict, out_lines[-1]
        return verdict, own[-1] if own else why_failed(done)


def describe_rank(check, label, summary):
    meta = summary["meta"]
    check.say(f"{label}: cupti {meta.get('cupti.status')} (version {meta.get('cupti.version')}, clock "
              f"{meta.get('cupti.clock')}); nccl plugin: {meta.get('nccl.profiler', 'not loaded')}")
    check.say("  rows: " + ", ".join(f"{table} {n}" for table, n in summary["counts"].items()))
    check.say("  top kernels (count, total ms):")
    for name, n, total in summary["names"][:8]:
        check.say(f"  {n:7d} {total / 1e6:10.3f}  {name[:110]}")
    check.say("  collectives: " + (", ".join(f"{op} x{n} ({(b or 0) / 2**20:.1f} MiB)"
                                             for op, n, b in summary["collectives"]) or "none"))
    check.say("  drops: " + (", ".join(f"{s}: {r} {n}" for s, r, n in summary["drops"]) or "none"))


def analyze(check, target):
    """(exit code, JSON report or None) of `rankscope analyze target`, its text report said."""
    rankscope = check.program("rankscope")
    text = check.run([rankscope, "analyze", target])
    check.say(text.stdout.rstrip())
    if text.stderr.strip():
        check.say(text.stderr.rstrip())
    done = check.run([rankscope, "analyze", target, "--format", "json"])
    report = json.loads(done.stdout) if done.returncode in (0, 1) and done.stdout.strip() else None
    return done.returncode, report


def step_utilization(rank):
    """A rank's median utilization over its aggregated steps, the figure the text report
    prints; its whole-trace one when it has no steps. The whole-trace window starts at the
    first device activity, so start-up (model to GPU, rendezvous) dilutes it in a short job."""
    stats = rank.get("step_stats", {}).get("utilization_pct")
    return stats["median"] if stats and stats.get("count") else rank["totals"].get("utilization_pct")


def utilization_problems(report, what):
    problems = []
    for rank in report["ranks"]:
        value = step_utilization(rank)
        if value is None or not 1.0 <= value <= 100.0:
            problems.append(f"{what}: rank {rank['rank']} utilization {value} is not realistic")
    return problems


def verdict_of(problems, headline):
    return ("PASS", headline) if not problems else ("FAIL", "; ".join(problems))


# ---- the checks ------------------------------------------------------------------------


def check_cuda_kernels(check):
    with tempfile.TemporaryDirectory() as tmp:
        xml_path = os.path.join(tmp, "tests.xml")
        done = check.run([check.program("kernels_cuda_tests"), f"--gtest_output=xml:{xml_path}"])
        check.say(done.stdout.rstrip())
        if not os.path.exists(xml_path):
            return "ERROR", f"kernels_cuda_tests wrote no report ({why_failed(done)})"
        suite = xml.etree.ElementTree.parse(xml_path).getroot()
    tests, failures, errors = (int(suite.get(key, 0)) for key in ("tests", "failures", "errors"))
    skipped = sum(1 for case in suite.iter("testcase") if case.find("skipped") is not None)
    headline = f"{tests} tests, {failures + errors} failed, {skipped} skipped"
    if done.returncode != 0 or failures or errors:
        return "FAIL", headline
    if tests == 0 or skipped:
        return "FAIL", headline + " (on a GPU machine nothing may skip)"
    return "PASS", headline


def check_gemm(check):
    env = dict(check.env)
    if check.extra_library_dirs:
        env["LD_LIBRARY_PATH"] = ":".join([*check.extra_library_dirs, env.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    done = check.run([check.program("gpu_gemm_bench")], env=env)
    check.say(done.stdout.rstrip())
    if done.stderr.strip():
        check.say(done.stderr.rstrip())
    verdict = {0: "PASS", 1: "FAIL", 2: "NOT RUN"}.get(done.returncode, "ERROR")
    last = (done.stdout.strip().splitlines() or ["no output"])[-1]
    return verdict, last if verdict == "PASS" else why_failed(done)


def profile_nccl_trainer(check, tmp, steps):
    """The trainer on one GPU over NCCL under `rankscope profile`, into tmp/run: the run
    directory, or the FAIL verdict when it failed."""
    run_dir = os.path.join(tmp, "run")
    try:
        check.profile([check.program("rankscope-trainer"), "--steps", str(steps), "--backend", "nccl"], run_dir)
    except RunFailed as error:
        check.say(error.output)
        return None, ("FAIL", f"the profiled trainer failed ({error})")
    return run_dir, None


def check_trainer(check, steps=50):
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, failed = profile_nccl_trainer(check, tmp, steps)
        if failed:
            return failed
        rank_file = os.path.join(run_dir, "rank-0.sqlite")
        check.keep(rank_file, "rankscope-trainer-nccl-1rank-rank0.sqlite.gz")
        summary = rank_file_summary(rank_file)
        describe_rank(check, "rank 0", summary)
        code, report = analyze(check, run_dir)
    problems = []
    meta = summary["meta"]
    if meta.get("cupti.status") != "on":
        problems.append(f"CUPTI not on ({meta.get('cupti.status')})")
    for table in ("kernels", "memcpys"):
        if summary["counts"][table] == 0:
            problems.append(f"no {table}")
    # NCCL returns before its profiler sees a collective of a 1-rank communicator
    # (ncclLaunchOneRank), and refuses two ranks on one GPU: with one GPU, that the plugin
    # was loaded is what can be checked; collectives recorded are a bonus.
    if not meta.get("nccl.profiler", "").startswith("v"):
        problems.append(f"NCCL profiler plugin not loaded ({meta.get('nccl.profiler', 'no nccl.profiler meta')})")
    # Demangled names carry namespaces and template arguments around the function's name.
    missing = [k for k in TRAINER_KERNELS if not any(k in name for name, _, _ in summary["names"])]
    if missing:
        problems.append("trainer kernels missing from the names: " + ", ".join(missing))
    if any(n for _, _, n in summary["drops"]):
        problems.append("events dropped")
    if report is None:
        problems.append(f"rankscope analyze failed (exit code {code})")
    else:
        problems += utilization_problems(report, "rankscope analyze")
    utilization = step_utilization(report["ranks"][0]) if report and report["ranks"] else None
    return verdict_of(problems, f"{summary['counts']['kernels']} kernels, {summary['counts']['memcpys']} copies, "
                                f"NCCL plugin {meta.get('nccl.profiler')} (NCCL {meta.get('nccl.version')}; "
                                f"{summary['counts']['collectives']} collectives: 1 rank), 0 dropped, "
                                f"step utilization {utilization:.1f}%" if utilization is not None
                                else "step utilization unknown")


def check_cuda_memory(check, steps=5):
    """The trainer on one GPU under `rankscope profile`: its cudaMalloc'd buffers, seen by
    CUPTI's memory activity (MEMORY2), as the bytes live on a counter lane (kind 4)."""
    lane_name = "cuda memory: device (gpu 0)"
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, failed = profile_nccl_trainer(check, tmp, steps)
        if failed:
            return failed
        db = sqlite3.connect(f"file:{os.path.join(run_dir, 'rank-0.sqlite')}?mode=ro", uri=True)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        counters = db.execute("SELECT l.name, count(s.id), max(s.value) FROM lanes l LEFT JOIN counter_samples s "
                              "ON s.lane = l.id WHERE l.kind = 4 GROUP BY l.id ORDER BY l.name").fetchall()
        db.close()
    check.say(f"cupti.kinds: {meta.get('cupti.kinds')}; failed: {meta.get('cupti.kinds_failed', 'none')}; "
              f"releases clamped: {meta.get('cupti.memory_releases_clamped', 0)}")
    for name, samples, peak in counters:
        check.say(f"  {name}: {samples} samples, peak {(peak or 0) / 2**20:.1f} MiB")
    problems = []
    if meta.get("cupti.status") != "on":
        problems.append(f"CUPTI not on ({meta.get('cupti.status')})")
    if "memory2" not in meta.get("cupti.kinds", "").split(","):
        problems.append(f"memory2 not enabled (cupti.kinds_failed: {meta.get('cupti.kinds_failed', 'none')})")
    device = [(samples, peak) for name, samples, peak in counters if name == lane_name]
    if not device:
        problems.append(f"no counter lane named '{lane_name}'")
    elif not max(peak or 0 for _, peak in device) > 0:
        problems.append(f"'{lane_name}' never exceeds 0 bytes")
    samples = sum(n for n, _ in device)
    peak = max((p or 0 for _, p in device), default=0)
    return verdict_of(problems, f"'{lane_name}': {samples} samples, peak {peak / 2**20:.1f} MiB; "
                                f"{len(counters)} counter lanes")


def losses_against_ddp(check, name, ddp_args, args, steps=20):
    """The trainer as DDP and then as `name` (its own `args`) on one GPU over NCCL, the same
    batches each step: `name`'s losses against DDP's."""
    losses = {}
    with tempfile.TemporaryDirectory() as tmp:
        for parallel, extra in (("ddp", ddp_args), (name, args)):
            metrics = os.path.join(tmp, f"{parallel}.json")
            try:
                check.run([check.program("rankscope-trainer"), "--parallel", parallel, "--backend", "nccl",
                           "--steps", str(steps), "--clip-grad-norm", "1.0", "--metrics-out", metrics,
                           "--rdzv", "file:" + os.path.join(tmp, "rdzv-" + parallel)] + extra)
            except RunFailed as error:
                check.say(error.output)
                return "FAIL", f"--parallel {parallel} failed ({error})"
            with open(metrics) as f:
                losses[parallel] = [step["loss"] for step in json.load(f)["steps"]]
    problems = []
    if len(losses[name]) != steps or len(losses["ddp"]) != steps:
        problems.append(f"{len(losses['ddp'])} DDP and {len(losses[name])} {name} steps, not {steps}")
    worst = max((abs(a - b) for a, b in zip(losses["ddp"], losses[name])), default=float("inf"))
    # One rank: the same sums in the same order but for the gradient copies; float rounding.
    if worst > 1e-4:
        problems.append(f"{name}'s losses differ from DDP's by up to {worst:.2e}")
    check.say(f"losses, DDP: {losses['ddp'][:3]} ... {losses['ddp'][-1:]}, {name}: {losses[name][:3]} ... "
              f"{losses[name][-1:]}")
    return verdict_of(problems, f"{steps} steps of --parallel {name} over NCCL: losses within {worst:.1e} of DDP's")


def check_fsdp_nccl(check):
    """--parallel fsdp on one GPU over NCCL (all-gathers and reduce-scatters on the
    communication stream, each waited for by the compute stream): its losses against DDP's."""
    return losses_against_ddp(check, "fsdp", ["--accum", "2"], ["--accum", "2"])


def check_pipeline_nccl(check):
    """--parallel pipeline on one GPU (one stage: NCCL cannot hold two ranks on one GPU), 4
    micro-batches with their activation sets on the device: its losses against DDP's with 4
    accumulation steps."""
    return losses_against_ddp(check, "pipeline", ["--accum", "4"], ["--micro-batches", "4"])


def check_cupti_timing(check):
    return check.script("cupti_timing_check.py", *(["--keep", check.traces_dir] if check.traces_dir else []))


def check_torch_compare(check):
    return check.script("torch_compare.py", "--script", ddp_train_script(),
                        *(["--keep", check.traces_dir] if check.traces_dir else []))


def steps_problems(report, steps, what):
    found = report.get("steps", {}).get("steps_found")
    return [] if found == steps else [f"{what}: {found} steps found, {steps} expected "
                                      f"({report.get('steps', {}).get('source')})"]


def check_ddp_gloo_cuda(check, ranks=2, steps=20):
    """2 ranks on one GPU over Gloo with CUDA tensors (NCCL refuses two ranks on one GPU)."""
    job = [sys.executable, ddp_train_script(), "--backend", "gloo", "--steps", str(steps), "--warmup", "3"]
    env = dict(check.env, GLOO_SOCKET_IFNAME="lo")  # the machine may have no other network
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        try:
            check.profile(job, run_dir, ranks=ranks, env=env)
        except RunFailed as error:
            check.say(error.output)
            return "FAIL", f"the profiled job failed ({error})"
        for rank in range(ranks):
            rank_file = os.path.join(run_dir, f"rank-{rank}.sqlite")
            check.keep(rank_file, f"rankscope-ddp-gloo-cuda-{ranks}rank-rank{rank}.sqlite.gz")
            summary = rank_file_summary(rank_file)
            describe_rank(check, f"rank {rank}", summary)
            if summary["meta"].get("cupti.status") != "on":
                problems.append(f"rank {rank}: CUPTI not on ({summary['meta'].get('cupti.status')})")
            # Gloo reduces CUDA tensors through host memory: the copies must be there.
            for table in ("kernels", "memcpys"):
                if summary["counts"][table] == 0:
                    problems.append(f"rank {rank}: no {table}")
            if any(n for _, _, n in summary["drops"]):
                problems.append(f"rank {rank}: events dropped")
        code, report = analyze(check, run_dir)
        if code != 0 or report is None:
            problems.append(f"rankscope analyze of the profiled run exited {code}")
        else:
            problems += utilization_problems(report, "rankscope analyze")
            problems += steps_problems(report, steps, "rankscope analyze")

        check.say(f"== the same job under torch.profiler ({ranks} ranks)")
        traces = os.path.join(tmp, "torch")
        os.makedirs(traces)
        pattern = os.path.join(traces, "rank{rank}.json")  # what ddp_train.py --torch-profile DIR writes
        results = check.launch(lambda rank: [*job, "--torch-profile", traces], ranks, env=env)
        for rank, (code, err) in enumerate(results):
            if code != 0:
                problems.append(f"torch.profiler rank {rank} failed (exit code {code}): {err.strip()[-300:]}")
        if all(code == 0 for code, _ in results):
            for rank in range(ranks):
                check.keep(pattern.replace("{rank}", str(rank)),
                           f"torch-profiler-ddp-gloo-cuda-{ranks}rank-rank{rank}.json.gz")
            code, kineto_report = analyze(check, traces)
            if code != 0 or kineto_report is None:
                problems.append(f"rankscope analyze of the torch.profiler traces exited {code}")
            else:
                problems += steps_problems(kineto_report, steps, "the torch.profiler traces")
    utilization = ", ".join(f"{step_utilization(r) or 0:.1f}%" for r in report["ranks"]) \
        if report else "?"
    return verdict_of(problems, f"{ranks} ranks profiled and analyzed (utilization {utilization}); "
                                f"torch.profiler traces analyzed too")


def check_pytorch_hook_cuda(check, steps=10, warmup=2):
    """`rankscope profile --pytorch` of the sample on one GPU (NCCL): steps from the optimizer,
    torch's NVTX op ranges (emit_nvtx), and the kernels joined to the ops that launched them."""
    job = [sys.executable, ddp_train_script(), "--steps", str(steps), "--warmup", str(warmup)]
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        done = check.run([check.program("rankscope"), "profile", "--pytorch", "-n", "1", "-o", run_dir, "--", *job])
        check.say(done.stderr.rstrip())
        if done.returncode != 0:
            return "FAIL", f"the --pytorch run failed ({why_failed(done)})"
        rank_file = os.path.join(run_dir, "rank-0.sqlite")
        check.keep(rank_file, "rankscope-pytorch-hook-nccl-1rank-rank0.sqlite.gz")
        db = sqlite3.connect(f"file:{rank_file}?mode=ro", uri=True)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        kernels = db.execute("SELECT count(*) FROM kernels").fetchone()[0]
        # A kernel is joined to an op when its launch call carries the id of an NVTX range
        # named like one of torch's ops (emit_nvtx: "aten::mm, seq = 12", ...).
        joined = db.execute(
            "SELECT count(*) FROM kernels k JOIN api_calls a ON a.correlation_id = k.correlation_id "
            "JOIN nvtx_ranges r ON r.correlation_id = a.external_id AND a.external_id != 0 "
            "JOIN strings s ON s.id = r.name WHERE s.value LIKE 'aten::%'").fetchone()[0]
        db.close()
        code, report = analyze(check, run_dir)
    for key in ("pytorch.hook", "pytorch.steps", "pytorch.ops"):
        check.say(f"{key}: {meta.get(key)}")
        if not meta.get(key, "").startswith("on"):
            problems.append(f"{key} is {meta.get(key)!r}")
    if meta.get("cupti.status") != "on":
        problems.append(f"CUPTI not on ({meta.get('cupti.status')})")
    if kernels == 0 or joined < 0.9 * kernels:
        problems.append(f"{joined} of {kernels} kernels joined to an aten:: op range (target >= 90%)")
    if report is None:
        problems.append(f"rankscope analyze failed (exit code {code})")
    else:
        problems += steps_problems(report, steps + warmup, "rankscope analyze")
    return verdict_of(problems, f"{kernels} kernels, {joined} joined to aten:: op ranges; "
                                f"{meta.get('pytorch.steps')}; {meta.get('pytorch.ops')}")


def check_overhead(check):
    return check.script("training_overhead.py", "--pairs", "9", "--split", "--trainer-args", "--steps 200",
                        "--require-cupti")


CHECKS = (
    ("cuda-kernels", "CUDA kernels against the CPU reference", 45, check_cuda_kernels),
    ("gemm", "own GEMMs against cuBLAS (bf16 >= 60%)", 60, check_gemm),
    ("trainer", "the trainer on one GPU under rankscope profile", 45, check_trainer),
    ("cuda-memory", "CUPTI memory activity: the trainer's device bytes live as a counter", 30, check_cuda_memory),
    ("cupti-timing", "CUPTI's kernel times against CUDA events and the host clock", 30, check_cupti_timing),
    ("torch-compare", "1-rank NCCL DDP: kernels against torch.profiler", 90, check_torch_compare),
    ("ddp-gloo-cuda", "2-rank DDP on one GPU over Gloo, profiled and analyzed", 120, check_ddp_gloo_cuda),
    ("pytorch-hook", "--pytorch on one GPU: steps, op ranges, kernels joined to ops", 60, check_pytorch_hook_cuda),
    ("fsdp-nccl", "--parallel fsdp on one GPU over NCCL: losses equal DDP's", 45, check_fsdp_nccl),
    ("pipeline-nccl", "--parallel pipeline on one GPU over NCCL: losses equal DDP's", 45, check_pipeline_nccl),
    ("overhead", "the collector's overhead on the trainer's step time (<= 3%)", 120, check_overhead),
)


class Stopped(BaseException):
    """SIGTERM arrived (the machine's time is up): the current check ends, the reports stay."""


def stop_on_sigterm(signum, frame):
    raise Stopped()


def gpu_description():
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, str(error)
    if done.returncode != 0 or not done.stdout.strip():
        return None, (done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}").splitlines()[0]
    return done.stdout.strip().splitlines()[0], None


def torch_description():
    code = ("import sys, torch; print(f'{sys.executable}: torch {torch.__version__} (CUDA {torch.version.cuda}, NCCL '"
            "f'{\".\".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else \"-\"})')")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return f"{sys.executable}: importing torch took over 60 s"
    if done.returncode != 0:
        return f"{sys.executable}: no usable PyTorch ({(done.stderr.strip().splitlines() or ['?'])[-1]})"
    return done.stdout.strip()


def write_reports(out, header, results, traces_dir):
    traces = []
    if traces_dir:
        for name in sorted(os.listdir(traces_dir)):
            traces.append({"file": f"traces/{name}", "bytes": os.path.getsize(os.path.join(traces_dir, name))})
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(header, checks=[{k: v for k, v in r.items() if k != "output"} for r in results],
                       traces=traces), f, indent=1)
        f.write("\n")
    lines = [f"# GPU checks, {header['date']}", ""]
    lines += [f"- {key}: {header[key]}" for key in ("device", "software", "bundle", "command") if header.get(key)]
    lines += ["", "| check | verdict | result | seconds (budget) |", "|---|---|---|---|"]
    for r in results:
        result = r["headline"].replace("|", "\\|")
        lines.append(f"| {r['name']}: {r['title']} | {r['verdict']} | {result} | "
                     f"{r['seconds']:.0f} ({r['budget_s']:g}) |")
    if traces:
        lines += ["", "Real traces (gzipped; torch.profiler's and rankscope's of the same jobs):", "",
                  "| file | bytes |", "|---|---|"]
        for trace in traces:
            over = " (over the 5 MB limit for test data)" if trace["bytes"] > TRACE_LIMIT_BYTES else ""
            lines.append(f"| {trace['file']} | {trace['bytes']}{over} |")
    for r in results:
        lines += ["", f"## {r['name']}: {r['verdict']}", "", "```text", r["output"].rstrip(), "```"]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", default="build/release", help="a build tree or a GPU bundle")
    parser.add_argument("--out", metavar="DIR", help="logs, results.json, summary.md and traces/ (a folder "
                                                     "without an earlier report)")
    parser.add_argument("--only", metavar="NAMES", help="comma-separated checks to run (default: all)")
    parser.add_argument("--library-dir", action="append", default=[], metavar="DIR",
                        help="where the host's cuBLAS is, for gpu_gemm_bench (repeatable)")
    parser.add_argument("--command", default="", help="the command line to name in summary.md")
    parser.add_argument("--budget", type=float, metavar="S", help="give every check S seconds instead (tests)")
    parser.add_argument("--total-budget", type=float, default=540, metavar="S",
                        help="seconds for the whole run; a check never runs past it (default: %(default)s)")
    args = parser.parse_args()
    names = [c[0] for c in CHECKS]
    selected = args.only.split(",") if args.only else names
    unknown = [n for n in selected if n not in names]
    if unknown:
        print(f"gpu_checks.py: error: unknown check(s) {', '.join(unknown)}; the checks are {', '.join(names)}",
              file=sys.stderr)
        return 2
    earlier = [n for n in ("results.json", "summary.md", "traces")
               if args.out and os.path.exists(os.path.join(args.out, n))]
    if args.out and (earlier or (os.path.exists(args.out) and not os.path.isdir(args.out))):
        print(f"gpu_checks.py: error: --out {args.out} holds an earlier report "
              f"({', '.join(earlier) or 'not a folder'}); name a new folder", file=sys.stderr)
        return 2
    end_of_run = time.monotonic() + args.total_budget
    device, why_not = gpu_description()
    if device is None:
        print(f"gpu_checks.py: no NVIDIA GPU here (nvidia-smi: {why_not})", file=sys.stderr)
        return 2
    traces_dir = None
    if args.out:
        traces_dir = os.path.join(args.out, "traces")
        os.makedirs(traces_dir)
        with open(os.path.join(args.out, "nvidia-smi.txt"), "w") as f:
            f.write(subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout)
    header = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "device": device, "software": torch_description(), "command": args.command}
    manifest = os.path.join(args.build_dir, "MANIFEST.txt")
    if os.path.exists(manifest):
        with open(manifest) as f:
            header["bundle"] = f.readline().strip()
    print(f"device: {device}\nsoftware: {header['software']}", flush=True)

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    results = []
    stopped = False
    for name, title, budget, function in CHECKS:
        if name not in selected:
            continue
        budget = args.budget if args.budget is not None else budget
        left = end_of_run - time.monotonic()
        if stopped or left < 10:
            why = "stopped by SIGTERM" if stopped else f"the run's {args.total_budget:g} s were spent"
            results.append({"name": name, "title": title, "verdict": "NOT RUN", "headline": why, "seconds": 0,
                            "budget_s": budget, "output": ""})
            continue
        print(f"== {name}: {title} (budget {min(budget, left):.0f} s)", flush=True)
        tag = f"{os.getpid()}-{name}"
        check = Check(args.build_dir, time.monotonic() + min(budget, left), traces_dir, tag, args.library_dir)
        started = time.monotonic()
        try:
            verdict, headline = function(check)
        except BudgetExceeded as error:
            verdict, headline = "TIMEOUT", str(error)
            check.say(error.output)
        except Stopped:
            verdict, headline, stopped = "STOPPED", "stopped by SIGTERM (the machine's time ran out)", True
        except Exception as error:  # a check's bug must not cost the other checks
            verdict, headline = "ERROR", f"{type(error).__name__}: {error}"
            check.say(traceback.format_exc())
        kill_tagged(TAG_VARIABLE, tag)
        seconds = time.monotonic() - started
        output = "\n".join(line for line in check.lines if line)
        print(output, flush=True)
        print(f"{name}: {verdict} ({headline}) in {seconds:.0f} s", flush=True)
        results.append({"name": name, "title": title, "verdict": verdict, "headline": headline,
                        "seconds": round(seconds, 1), "budget_s": budget, "output": output})
        if args.out:  # after every check, so that a run cut short keeps what it found
            with open(os.path.join(args.out, f"{name}.log"), "w") as f:
                f.write(output + "\n")
            write_reports(args.out, header, results, traces_dir)
    if args.out:
        write_reports(args.out, header, results, traces_dir)
    passed = sum(r["verdict"] == "PASS" for r in results)
    print("verdicts: " + ", ".join(f"{r['name']} {r['verdict']}" for r in results))
    print(f"gpu_checks.py: {passed} of {len(results)} checks passed" +
          (f"; report in {os.path.join(args.out, 'summary.md')}" if args.out else ""))
    return 0 if passed == len(results) else 1

if __name__ == "__main__":
    sys.exit(main())
