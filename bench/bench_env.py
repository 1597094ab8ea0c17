"""What the benchmark and GPU-check scripts share: where the programs are (a build tree or a
GPU bundle), a clean environment for runs without the collector, a free port, ranks started
the way torchrun starts them, and commands run within a time budget."""
import argparse
import gzip
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time

# Where each program lies in a build tree; a GPU bundle (scripts/gpu/bundle.sh) has them all
# in bin/, and the collector in lib/.
BUILD_TREE_PATHS = {
    "rankscope": "cli/rankscope",
    "rankscope-trainer": "trainer/rankscope-trainer",
    "kernels_cuda_tests": "tests/kernels/kernels_cuda_tests",
    "gpu_gemm_bench": "bench/gpu_gemm_bench",
    "cupti_timing": "bench/cupti_timing",
    "librankscope_collector.so": "collector/librankscope_collector.so",
}


def find_program(tree, name):
    """The path of program `name` in `tree`, a build directory or a GPU bundle."""
    folder = "lib" if name.endswith(".so") else "bin"
    bundled = os.path.join(tree, folder, name)
    if os.path.exists(bundled):
        return bundled
    return os.path.join(tree, BUILD_TREE_PATHS[name])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_environment():
    """This process's environment without the collector's injection or a launcher's ranks."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANKSCOPE_", "NVTX_INJECTION", "CUDA_INJECTION", "NCCL_PROFILER"))}
    for name in ("LD_PRELOAD", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    # A bundle's run-checks.sh names the collector explicitly; profiled runs keep that.
    if "RANKSCOPE_COLLECTOR_LIB" in os.environ:
        env["RANKSCOPE_COLLECTOR_LIB"] = os.environ["RANKSCOPE_COLLECTOR_LIB"]
    return env


def rank_environment(env, rank, ranks, port):
    """torchrun's variables for one of `ranks` local ranks."""
    return dict(env, RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks),
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))


class BudgetExceeded(RuntimeError):
    """A command ran past the time it was given; it and its process group were killed."""


def _stop_group(process):
    """SIGTERM to the command's process group (rankscope profile forwards it to its ranks),
    then SIGKILL to whatever is left after 10 s."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run(cmd, *, deadline=None, env=None, cwd=None):
    """Runs cmd to completion, its output captured as text, in a process group of its own;
    stops it and raises BudgetExceeded when time.monotonic() passes `deadline`."""
    process = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.1)
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_group(process)
        process.communicate()
        raise BudgetExceeded(f"{os.path.basename(cmd[0])} ran past its time budget and was stopped")
    return subprocess.CompletedProcess(cmd, process.returncode, out, err)


def launch_ranks(cmd_of_rank, ranks, env, *, deadline=None):
    """Starts `ranks` local ranks with torchrun's variables (cmd_of_rank(rank) is each one's
    command) and waits for all; returns [(exit code, stderr)] in rank order. Past the
    deadline every rank is stopped and BudgetExceeded raised."""
    port = free_port()
    processes = [subprocess.Popen(cmd_of_rank(rank), env=rank_environment(env, rank, ranks, port),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True) for rank in range(ranks)]
    results = []
    try:
        for process in processes:
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.1)
            _, err = process.communicate(timeout=timeout)
            results.append((process.returncode, err))
    except subprocess.TimeoutExpired:
        for process in processes:
            _stop_group(process)
        raise BudgetExceeded(f"{ranks} ranks of {os.path.basename(cmd_of_rank(0)[0])} ran past their time budget")
    return results


def gzip_copy(source, destination):
    """Writes a gzipped copy of `source` (level 9: test data stays small)."""
    with open(source, "rb") as src, gzip.open(destination, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)


def why_failed(done):
    """One line saying why a command (often `rankscope profile -- PROGRAM`) failed: the
    program's own last line before rankscope's summary, else the last line there is."""
    lines = [line.strip() for line in (done.stdout + "\n" + done.stderr).splitlines() if line.strip()]
    if "rankscope: summary" in lines:
        lines = lines[:lines.index("rankscope: summary")]
    own = [line for line in lines if not line.startswith("rankscope: ")]
    return f"exit code {done.returncode}: " + ((own or lines or ["no output"])[-1])[:300]


class RunFailed(RuntimeError):
    """A profiled command failed; str() says why in one line, `output` holds its stderr."""

    def __init__(self, why, output):
        super().__init__(why)
        self.output = output


def profile_ranks(rankscope, command, run_dir, *, ranks=1, env=None, deadline=None):
    """`rankscope profile -n RANKS -o RUN_DIR -- COMMAND`; returns the finished process, or
    raises RunFailed (or BudgetExceeded past the deadline)."""
    done = run([rankscope, "profile", "-n", str(ranks), "-o", run_dir, "--", *command],
               env=env if env is not None else clean_environment(), deadline=deadline)
    if done.returncode != 0:
        raise RunFailed(why_failed(done), done.stderr)
    return done


def existing_directory(path):
    """An argparse type: a folder that exists."""
    if not os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is not a directory")
    return path


class SelfTest:
    """A script's --self-test: collects the expectations that failed, then says PASS or FAIL."""

    def __init__(self, name):
        self.name = name
        self.failures = []

    def expect(self, condition, what):
        if not condition:
            self.failures.append(what)

    def finish(self):
        for failure in self.failures:
            print(f"{self.name} --self-test: {failure}", file=sys.stderr)
        print(f"{self.name} --self-test: " + ("FAIL" if self.failures else "PASS"))
        return 1 if self.failures else 0


def hand_made_rank_file(path, script):
    """A rank file with the meta and strings tables (cupti.status 'on') and whatever else
    `script` (SQL) creates and inserts: the few columns a self-test reads."""
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                     "CREATE TABLE strings(id INTEGER PRIMARY KEY, value TEXT NOT NULL);"
                     "INSERT INTO meta VALUES('cupti.status', 'on');" + script)
    db.commit()
    db.close()
