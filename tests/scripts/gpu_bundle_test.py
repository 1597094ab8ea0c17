#!/usr/bin/env python3
"""scripts/gpu/ on the CPU machine: the bundle made from this build tree carries every
library its programs need and finds them itself; the dependency check catches a missing
library and a lost RPATH; run-checks.sh refuses bad arguments and, without a GPU, says so
in one line and exits 2 after loading the bundle; bench/gpu_checks.py, given a stand-in
nvidia-smi, reports each check's verdict, its files and a budget it ran past.

  gpu_bundle_test.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

BUILD_DIR = SOURCE_DIR = ""


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)


def lines(text):
    return [line for line in text.splitlines() if line.strip()]


class BundleTest(unittest.TestCase):
    tmp = bundle = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpu-bundle-test-")
        cls.bundle = os.path.join(cls.tmp, "bundle")
        cls.made = run(["bash", os.path.join(SOURCE_DIR, "scripts/gpu/bundle.sh"), "--from-build", BUILD_DIR,
                        "--out", cls.bundle])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy_of_bundle(self, name):
        copy = os.path.join(self.tmp, name)
        shutil.copytree(self.bundle, copy, symlinks=True)
        return copy

    def check(self, bundle, *args):
        return run([sys.executable, os.path.join(SOURCE_DIR, "scripts/gpu/check_bundle.py"), bundle, *args])

    def test_bundle_is_made_and_passes_its_check(self):
        self.assertEqual(self.made.returncode, 0, self.made.stdout + self.made.stderr)
        self.assertIn("check_bundle:", self.made.stdout)
        for name in ("bin/rankscope", "bin/rankscope-trainer", "bin/kernels_cuda_tests", "bin/gpu_gemm_bench",
                     "bin/cupti_timing", "lib/librankscope_collector.so", "lib/libsqlite3.so.0", "lib/libfmt.so.9",
                     "py/gpu_checks.py", "py/ddp_train.py", "run-checks.sh", "MANIFEST.txt"):
            self.assertTrue(os.path.exists(os.path.join(self.bundle, name)), name)
        self.assertTrue(any(n.startswith("libcupti.so.") for n in os.listdir(os.path.join(self.bundle, "lib"))))
        self.assertTrue(os.path.isfile(os.path.join(self.bundle, "lib", "rankscope-pytorch", "sitecustomize.py")))
        self.assertFalse([n for n in os.listdir(self.tmp) if n.startswith(".gpu-bundle-staging")])

    def test_every_needed_library_resolves_inside_the_bundle_or_to_the_host_set(self):
        """Reads every ELF file's NEEDED entries and ldd's answer in a clean environment."""
        done = self.check(self.bundle)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        bundled = set(os.listdir(os.path.join(self.bundle, "lib")))
        host = {"linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0",
                "librt.so.1", "libresolv.so.2", "libutil.so.1", "libstdc++.so.6", "libgcc_s.so.1", "libcuda.so.1",
                "libnccl.so.2", "libcublas.so.13", "libcublasLt.so.13"}
        for folder in ("bin", "lib"):
            for name in os.listdir(os.path.join(self.bundle, folder)):
                path = os.path.join(self.bundle, folder, name)
                if os.path.isdir(path):  # lib/rankscope-pytorch: the PyTorch hook's Python files
                    continue
                with open(path, "rb") as f:
                    if f.read(4) != b"\x7fELF":
                        continue
                elf = run(["readelf", "-d", "--wide", path]).stdout
                needed = [line.split("[")[1].rstrip("]") for line in elf.splitlines() if "(NEEDED)" in line]
                for soname in needed:
                    self.assertTrue(soname in bundled or soname in host, f"{folder}/{name} needs {soname}")
                resolved = run(["ldd", path], env={"PATH": os.environ["PATH"]}).stdout
                for line in resolved.splitlines():
                    parts = line.split()
                    if len(parts) >= 3 and parts[1] == "=>" and parts[0] in bundled:
                        self.assertTrue(os.path.realpath(parts[2]).startswith(os.path.realpath(self.bundle)),
                                        f"{folder}/{name}: {line.strip()}")
                    self.assertNotIn("not found", line if parts and parts[0] not in host else "",
                                     f"{folder}/{name}: {line.strip()}")

    def test_the_check_catches_a_missing_library(self):
        broken = self.copy_of_bundle("missing-library")
        os.remove(os.path.join(broken, "lib", "libfmt.so.9"))
        done = self.check(broken)
        self.assertEqual(done.returncode, 1)
        self.assertIn("needs libfmt.so.9, which is neither in lib/ nor provided by the host", done.stderr)

    def test_the_check_catches_a_program_that_does_not_look_in_the_bundle(self):
        broken = self.copy_of_bundle("no-rpath")
        self.assertEqual(run(["patchelf", "--remove-rpath", os.path.join(broken, "bin", "rankscope")]).returncode, 0)
        done = self.check(broken)
        self.assertEqual(done.returncode, 1)
        self.assertIn("bin/rankscope: libsqlite3.so.0 resolves to", done.stderr)
        self.assertIn("not to the bundle's lib/", done.stderr)

    def test_the_check_catches_a_bundle_over_its_size_limit(self):
        done = self.check(self.bundle, "--max-mib", "1")
        self.assertEqual(done.returncode, 1)
        self.assertIn("over its 1 MiB limit", done.stderr)

    def test_a_failed_bundle_keeps_the_earlier_one_and_a_folder_not_a_bundle_is_never_replaced(self):
        earlier = os.path.join(self.tmp, "kept")
        os.makedirs(os.path.join(earlier, "bin"))
        for name in ("MANIFEST.txt", "bin/marker"):
            with open(os.path.join(earlier, name), "w") as f:
                f.write("earlier bundle")
        other = os.path.join(self.tmp, "not-a-bundle")
        os.makedirs(other)
        with open(os.path.join(other, "notes.txt"), "w") as f:
            f.write("keep me")
        for out, build, message in ((earlier, "/nonexistent", "/nonexistent is not a configured build tree"),
                                    (other, BUILD_DIR, "exists and is not a GPU bundle")):
            done = run(["bash", os.path.join(SOURCE_DIR, "scripts/gpu/bundle.sh"), "--from-build", build,
                        "--out", out])
            self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
            self.assertEqual(len(lines(done.stderr)), 1, done.stderr)
            self.assertTrue(done.stderr.startswith("bundle.sh: error: "), done.stderr)
            self.assertIn(message, done.stderr)
        self.assertTrue(os.path.exists(os.path.join(earlier, "bin", "marker")))
        for args in (["--out"], ["--from-build"], ["--frobnicate"]):
            done = run(["bash", os.path.join(SOURCE_DIR, "scripts/gpu/bundle.sh"), *args])
            self.assertEqual(done.returncode, 2, f"{args}: {done.stderr}")
            self.assertEqual(len(lines(done.stderr)), 1, f"{args}: {done.stderr}")
            self.assertTrue(done.stderr.startswith("bundle.sh: error: "), done.stderr)
        self.assertEqual(os.listdir(other), ["notes.txt"])

    def run_checks(self, *args, env=None):
        return run(["bash", os.path.join(self.bundle, "run-checks.sh"), *args], env=env)

    def test_dry_run_without_a_gpu_loads_the_bundle_and_says_so_in_one_line(self):
        env = dict(os.environ, PATH=":".join(p for p in os.environ["PATH"].split(":")
                                              if not os.path.exists(os.path.join(p, "nvidia-smi"))))
        done = self.run_checks("--dry-run", self.bundle, env=env)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertEqual(done.stdout, "")
        self.assertEqual(len(lines(done.stderr)), 1, done.stderr)
        self.assertIn("run-checks: no NVIDIA GPU on this machine", done.stderr)
        self.assertIn("the bundle loads (rankscope ", done.stderr)

    def test_a_bundle_that_does_not_load_is_reported_before_anything_runs(self):
        broken = self.copy_of_bundle("unloadable")
        os.remove(os.path.join(broken, "lib", "libsqlite3.so.0"))
        done = self.run_checks("--dry-run", broken)
        self.assertEqual(done.returncode, 1)
        self.assertEqual(len(lines(done.stderr)), 1, done.stderr)
        # This machine has its own libsqlite3, so the programs start: the library check says it.
        self.assertIn("run-checks: the bundle does not load here: check_bundle: bin/rankscope needs libsqlite3.so.0",
                      done.stderr)

    def test_with_a_gpu_the_checks_run_from_the_bundle_and_report(self):
        """The path of the real run: run-checks.sh's GPU branch and the bundle's own programs
        and scripts (a stand-in nvidia-smi; the checks then find no GPU and say so)."""
        out = os.path.join(self.tmp, "run-checks-out")
        done = self.run_checks("--only", "cuda-kernels,trainer,cupti-timing", self.bundle, out,
                               env=stand_in_nvidia_smi(os.path.join(self.tmp, "gpu")))
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        with open(os.path.join(out, "results.json")) as f:
            results = json.load(f)
        self.assertEqual([(c["name"], c["verdict"]) for c in results["checks"]],
                         [("cuda-kernels", "FAIL"), ("trainer", "FAIL"), ("cupti-timing", "NOT RUN")])
        self.assertIn("cupti_timing: no usable GPU", results["checks"][2]["headline"])
        self.assertTrue(results["bundle"].startswith("rankscope GPU bundle: commit "), results)
        for name in ("environment.txt", "checks.log", "summary.md", "nvidia-smi.txt", "trainer.log"):
            self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        self.assertIn("run-checks: exit 1; the report is", done.stdout)

    def test_bad_arguments_are_one_line_and_exit_two(self):
        out = os.path.join(self.tmp, "not-empty")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "earlier.txt"), "w") as f:
            f.write("keep me")
        for args in ([], [self.bundle], ["--frobnicate", self.bundle, "x"], [self.tmp, os.path.join(self.tmp, "o")],
                     [self.bundle, out], ["--only"]):
            done = self.run_checks(*args)
            self.assertEqual(done.returncode, 2, f"{args}: {done.stderr}")
            self.assertEqual(len(lines(done.stderr)), 1, f"{args}: {done.stderr}")
            self.assertTrue(done.stderr.startswith("run-checks: error: "), done.stderr)
        with open(os.path.join(out, "earlier.txt")) as f:
            self.assertEqual(f.read(), "keep me")


def stand_in_nvidia_smi(folder):
    """An environment whose PATH starts with a stand-in nvidia-smi that reports one GPU."""
    fake = os.path.join(folder, "bin", "nvidia-smi")
    os.makedirs(os.path.dirname(fake))
    with open(fake, "w") as f:
        f.write("#!/bin/sh\ncase \"$1\" in -L) echo 'GPU 0: Stand-in (UUID: GPU-0)';;\n"
                "--query-gpu=*) echo 'Stand-in, 0.0, 0 MiB';; *) echo stand-in;; esac\n")
    os.chmod(fake, stat.S_IRWXU)
    return dict(os.environ, PATH=os.path.dirname(fake) + ":" + os.environ["PATH"])


class GpuChecksWithoutGpuTest(unittest.TestCase):
    """bench/gpu_checks.py's bookkeeping, with a stand-in nvidia-smi: the checks themselves
    find no GPU and fail or do not run, and must say so."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpu-checks-test-")
        self.env = stand_in_nvidia_smi(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def gpu_checks(self, *args):
        return run([sys.executable, os.path.join(SOURCE_DIR, "bench/gpu_checks.py"), "--build-dir", BUILD_DIR, *args],
                   env=self.env)

    def test_each_verdict_and_file_is_written(self):
        out = os.path.join(self.tmp, "out")
        done = self.gpu_checks("--only", "cuda-kernels,trainer,cupti-timing", "--out", out)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        with open(os.path.join(out, "results.json")) as f:
            results = json.load(f)
        verdicts = {c["name"]: c["verdict"] for c in results["checks"]}
        self.assertEqual(verdicts, {"cuda-kernels": "FAIL", "trainer": "FAIL", "cupti-timing": "NOT RUN"})
        headlines = {c["name"]: c["headline"] for c in results["checks"]}
        self.assertIn("skipped (on a GPU machine nothing may skip)", headlines["cuda-kernels"])
        self.assertIn("--backend nccl needs a GPU", headlines["trainer"])
        self.assertIn("cupti_timing: no usable GPU", headlines["cupti-timing"])
        self.assertEqual(results["device"], "Stand-in, 0.0, 0 MiB")
        with open(os.path.join(out, "summary.md")) as f:
            summary = f.read()
        self.assertIn("| cupti-timing: CUPTI's kernel times against CUDA events and the host clock | NOT RUN |",
                      summary)
        for name in ("cuda-kernels.log", "trainer.log", "cupti-timing.log", "nvidia-smi.txt"):
            self.assertTrue(os.path.exists(os.path.join(out, name)), name)
        again = self.gpu_checks("--only", "trainer", "--out", out)
        self.assertEqual(again.returncode, 2)
        self.assertIn("holds an earlier report", again.stderr)

    def test_a_check_past_its_budget_is_stopped_with_everything_it_started(self):
        checks = subprocess.Popen([sys.executable, os.path.join(SOURCE_DIR, "bench/gpu_checks.py"), "--build-dir",
                                   BUILD_DIR, "--only", "overhead", "--budget", "2"], env=self.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = checks.communicate(timeout=120)
        self.assertEqual(checks.returncode, 1, out + err)
        self.assertIn("overhead: TIMEOUT", out)
        # Every process of the check carries GPU_CHECK_TAG=<pid of gpu_checks.py>-<check>.
        tag = f"GPU_CHECK_TAG={checks.pid}-overhead".encode()
        survivors = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if tag in f.read().split(b"\0"):
                        survivors.append(entry)
            except OSError:
                continue
        self.assertEqual(survivors, [], "processes outlived the check")

    def test_sigterm_ends_the_current_check_and_keeps_the_reports(self):
        """What happens when the machine's time runs out mid-run (`timeout` sends SIGTERM)."""
        out = os.path.join(self.tmp, "out")
        checks = subprocess.Popen([sys.executable, os.path.join(SOURCE_DIR, "bench/gpu_checks.py"), "--build-dir",
                                   BUILD_DIR, "--only", "cupti-timing,overhead", "--out", out], env=self.env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(out, "cupti-timing.log")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the overhead check is running its trainers now
        checks.send_signal(signal.SIGTERM)
        out_text, err_text = checks.communicate(timeout=60)
        self.assertEqual(checks.returncode, 1, out_text + err_text)
        with open(os.path.join(out, "results.json")) as f:
            verdicts = {c["name"]: c["verdict"] for c in json.load(f)["checks"]}
        self.assertEqual(verdicts, {"cupti-timing": "NOT RUN", "overhead": "STOPPED"})

    def test_no_gpu_and_an_unknown_check_exit_two(self):
        done = run([sys.executable, os.path.join(SOURCE_DIR, "bench/gpu_checks.py"), "--build-dir", BUILD_DIR],
                   env=dict(os.environ, PATH="/usr/bin:/bin"))
        self.assertEqual(done.returncode, 2)
        self.assertIn("no NVIDIA GPU here", done.stderr)
        done = self.gpu_checks("--only", "warp-drive")
        self.assertEqual(done.returncode, 2)
        self.assertIn("unknown check(s) warp-drive", done.stderr)


if __name__ == "__main__":
    BUILD_DIR, SOURCE_DIR = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1], verbosity=2)
