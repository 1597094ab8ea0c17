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
import tempfile
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
    """A command ran past the time it was given and was stopped; `output` holds what it had
    printed by then."""

    def __init__(self, message, output=""):
        super().__init__(message)
        self.output = output


def kill_tagged(tag_variable, tag):
    """SIGKILLs every process whose environment holds TAG_VARIABLE=TAG (what a stopped
    command left running in process groups of their own, such as rankscope's ranks), and
    waits up to 5 s for them to go."""
    needle = f"{tag_variable}={tag}".encode()
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    os.kill(int(entry), signal.SIGKILL)
                    killed.append(entry)
        except OSError:
            continue
    give_up = time.monotonic() + 5
    while killed and time.monotonic() < give_up:
        killed = [pid for pid in killed if os.path.exists(f"/proc/{pid}")]
        time.sleep(0.05)


def _stop(process, tag):
    """SIGTERM to the process's group (rankscope profile forwards it to its ranks), SIGKILL
    to what is left after 10 s, then to every process carrying the tag."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    if tag:
        kill_tagged(*tag)


def _read_back(files):
    texts = []
    for f in files:
        f.seek(0)
        texts.append(f.read().decode(errors="replace"))
    return texts


def run(cmd, *, deadline=None, env=None, cwd=None, tag=None):
    """Runs cmd to completion, its output captured as text, in a process group of its own.
    Past time.monotonic() `deadline` it is stopped (with every process whose environment
    holds the (variable, value) pair `tag`) and BudgetExceeded raised with its output so far.
    Output goes through temporary files, so a descendant holding a pipe open cannot hang us."""
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        process = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out_file, stderr=err_file, start_new_session=True)
        try:
            process.wait(timeout=None if deadline is None else max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _stop(process, tag)
            out, err = _read_back((out_file, err_file))
            raise BudgetExceeded(f"{os.path.basename(cmd[0])} ran past its time budget and was stopped",
                                 (out + err).rstrip())
        out, err = _read_back((out_file, err_file))
    return subprocess.CompletedProcess(cmd, process.returncode, out, err)


def launch_ranks(cmd_of_rank, ranks, env, *, deadline=None, tag=None, grace_s=15):
    """Starts `ranks` local ranks with torchrun's variables (cmd_of_rank(rank) is each one's
    command) and waits for all; returns [(exit code, stderr)] in rank order. When a rank
    fails, the others get `grace_s` seconds before they are stopped (a survivor would wait
    for it in a collective). Past the deadline every rank is stopped and BudgetExceeded
    raised with their stderr so far."""
    port = free_port()
    err_files = [tempfile.TemporaryFile() for _ in range(ranks)]
    try:
        processes = [subprocess.Popen(cmd_of_rank(rank), env=rank_environment(env, rank, ranks, port),
                                      stdout=subprocess.DEVNULL, stderr=err_files[rank], start_new_session=True)
                     for rank in range(ranks)]
        stop_at = deadline
        while any(p.poll() is None for p in processes):
            now = time.monotonic()
            if any(p.returncode not in (None, 0) for p in processes):
                stop_at = min(stop_at or now + grace_s, now + grace_s)
            if stop_at is not None and now >= stop_at:
                for process in processes:
                    if process.poll() is None:
                        _stop(process, tag)
                if deadline is not None and now >= deadline:
                    errs = _read_back(err_files)
                    raise BudgetExceeded(f"{ranks} ranks of {os.path.basename(cmd_of_rank(0)[0])} ran past their "
                                         "time budget", "\n".join(e.rstrip() for e in errs))
            time.sleep(0.05)
        return [(process.returncode, err) for process, err in zip(processes, _read_back(err_files))]
    finally:
        for f in err_files:
            f.close()


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


def profile_ranks(rankscope, command, run_dir, *, ranks=1, env=None, deadline=None, tag=None, trace=None):
    """`rankscope profile -n RANKS -o RUN_DIR [--trace TRACE] -- COMMAND`; returns the
    finished process, or raises RunFailed (or BudgetExceeded past the deadline)."""
    traced = ["--trace", trace] if trace else []
    done = run([rankscope, "profile", "-n", str(ranks), "-o", run_dir, *traced, "--", *command],
               env=env if env is not None else clean_environment(), deadline=deadline, tag=tag)
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


def rank_file_summary(path):
    """meta, row counts, drops and kernel names of one rank file."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta"))
        counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("kernels", "memcpys", "memsets", "api_calls", "syncs", "collectives", "collective_parts",
                            "overheads", "nvtx_ranges")}
        names = db.execute("SELECT s.value, count(*), sum(k.end_ns - k.start_ns) FROM kernels k JOIN strings s "
                           "ON s.id = k.name GROUP BY k.name ORDER BY 3 DESC").fetchall()
        collectives = db.execute("SELECT e.name, count(*), sum(c.bytes) FROM collectives c JOIN enums e "
                                 "ON e.type = 'collective_op' AND e.value = c.op GROUP BY c.op").fetchall()
        drops = db.execute("SELECT source, reason, sum(count) FROM drops GROUP BY source, reason").fetchall()
    finally:
        db.close()
    return {"meta": meta, "counts": counts, "names": names, "collectives": collectives, "drops": drops}
