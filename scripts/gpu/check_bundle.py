#!/usr/bin/env python3
"""Checks that a GPU bundle (scripts/gpu/bundle.sh) carries every shared library its
programs need: each ELF file's NEEDED entries must name a library in the bundle's lib/, or
one the host provides (glibc, libstdc++, libgcc_s; the CUDA driver; NCCL and cuBLAS, which
run-checks.sh finds in torch's site-packages), and the dynamic loader, asked through `ldd`
with a clean environment, must resolve every bundled name to the bundle's own copy, with no
"not found" and no missing symbol version.

  check_bundle.py BUNDLE [--host-lib-dir DIR]... [--require-host-libs] [--max-mib 56]
  check_bundle.py --host-sonames      the libraries the host provides, one per line
                                      (bundle.sh copies every other one)

--host-lib-dir adds where the host's NCCL or cuBLAS lie; --require-host-libs (on the GPU
machine) makes a host library that ldd cannot find a problem too. Prints one line per
problem and exits 1 when there is one; 0 with a one-line summary otherwise; 2 for bad
arguments.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

# Libraries every glibc system has: the bundle must not carry these.
HOST_BASE = {
    "linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0",
    "librt.so.1", "libresolv.so.2", "libutil.so.1", "libstdc++.so.6", "libgcc_s.so.1",
}
# Libraries the GPU machine provides, and where run-checks.sh looks for them.
HOST_PROVIDED = {
    "libcuda.so.1": "the CUDA driver",
    "libnccl.so.2": "NCCL, in torch's site-packages",
    "libcublas.so.13": "cuBLAS, in torch's site-packages (about 600 MB with cuBLASLt)",
    "libcublasLt.so.13": "cuBLASLt, in torch's site-packages",
}
REQUIRED_FILES = ("bin/rankscope", "bin/rankscope-trainer", "bin/kernels_cuda_tests", "bin/gpu_gemm_bench",
                  "bin/cupti_timing", "lib/librankscope_collector.so", "run-checks.sh", "py/gpu_checks.py",
                  "py/ddp_train.py", "MANIFEST.txt")


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def elf_files(bundle):
    files = []
    for folder in ("bin", "lib"):
        directory = os.path.join(bundle, folder)
        if os.path.isdir(directory):
            files += [os.path.join(directory, name) for name in sorted(os.listdir(directory))
                      if is_elf(os.path.join(directory, name))]
    return files


def needed(path):
    out = subprocess.run(["readelf", "-d", "--wide", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def versions_needed(path):
    """The GLIBC_/GLIBCXX_/CXXABI_ versions `path` needs."""
    out = subprocess.run(["readelf", "-V", "--wide", path], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"Name: ((?:GLIBC|GLIBCXX|CXXABI)_[0-9.]+)", out))


def newest(versions, prefix):
    numbers = [tuple(int(p) for p in v[len(prefix) + 1:].split(".")) for v in versions if v.startswith(prefix + "_")]
    return f"{prefix}_{'.'.join(map(str, max(numbers)))}" if numbers else None


def resolve(path, library_dirs):
    """{soname: resolved path or None} and the loader's complaints, from ldd in a clean
    environment (PATH, and LD_LIBRARY_PATH only when library_dirs are given)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if library_dirs:
        env["LD_LIBRARY_PATH"] = ":".join(library_dirs)
    done = subprocess.run(["ldd", path], capture_output=True, text=True, env=env)
    resolved, complaints = {}, []
    for line in (done.stdout + done.stderr).splitlines():
        line = line.strip()
        if "not found" in line and "version" in line:
            complaints.append(line)
            continue
        match = re.match(r"(\S+) => (not found|\S+)", line)
        if match:
            resolved[match.group(1)] = None if match.group(2) == "not found" else match.group(2)
    if done.returncode != 0 and not resolved:
        complaints.append(f"ldd failed: {(done.stderr or done.stdout).strip()}")
    return resolved, complaints


def check(bundle, host_dirs, require_host, max_mib):
    problems = []
    bundle = os.path.realpath(bundle)
    for required in REQUIRED_FILES:
        if not os.path.exists(os.path.join(bundle, required)):
            problems.append(f"{required} is missing")
    lib_dir = os.path.join(bundle, "lib")
    bundled = set(os.listdir(lib_dir)) if os.path.isdir(lib_dir) else set()
    if not any(name.startswith("libcupti.so.") for name in bundled):
        problems.append("lib/ has no libcupti.so.N (the collector loads CUPTI from there)")
    files = elf_files(bundle)
    host_needed, versions = set(), set()
    # Without binutils (a bare GPU machine may lack it) ldd's answer alone is checked.
    have_readelf = shutil.which("readelf") is not None
    for path in files:
        name = os.path.relpath(path, bundle)
        for soname in needed(path) if have_readelf else []:
            if soname in HOST_PROVIDED:
                host_needed.add(soname)
            elif soname not in bundled and soname not in HOST_BASE:
                problems.append(f"{name} needs {soname}, which is neither in lib/ nor provided by the host")
        versions |= versions_needed(path) if have_readelf else set()
        resolved, complaints = resolve(path, host_dirs)
        problems += [f"{name}: {complaint}" for complaint in complaints]
        for soname, target in resolved.items():
            if soname in bundled:
                if target is None or not os.path.realpath(target).startswith(lib_dir + os.sep):
                    problems.append(f"{name}: {soname} resolves to {target or 'nothing'}, not to the bundle's "
                                    "lib/ (is its RPATH $ORIGIN-relative?)")
            elif target is None and (require_host or soname not in HOST_PROVIDED):
                where = HOST_PROVIDED.get(soname, "the base system")
                problems.append(f"{name}: {soname} not found ({where})")
    size = sum(os.path.getsize(os.path.join(root, f)) for root, _, names in os.walk(bundle) for f in names)
    if size > max_mib * 2**20:
        problems.append(f"the bundle is {size / 2**20:.1f} MiB, over its {max_mib:g} MiB limit")
    requirements = ", ".join(v for v in (newest(versions, "GLIBC"), newest(versions, "GLIBCXX")) if v)
    if not have_readelf:
        requirements = "(no readelf here: NEEDED entries and versions unread, ldd checked)"
    summary = (f"check_bundle: {bundle}: {len(files)} ELF files, {len(bundled)} in lib/, {size / 2**20:.1f} MiB; "
               f"needs {requirements or 'no versioned glibc'} and from the host "
               f"{', '.join(sorted(host_needed)) or 'nothing else'}")
    return problems, summary


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", nargs="?")
    parser.add_argument("--host-sonames", action="store_true")
    parser.add_argument("--host-lib-dir", action="append", default=[], metavar="DIR")
    parser.add_argument("--require-host-libs", action="store_true")
    # 60 MiB by the issue; the device tool carries at most 64 MiB with the repository (~4 MiB).
    parser.add_argument("--max-mib", type=float, default=56.0)
    args = parser.parse_args()
    if args.host_sonames:
        print("\n".join(sorted(HOST_BASE | set(HOST_PROVIDED))))
        return 0
    if not args.bundle or not os.path.isdir(args.bundle):
        print(f"check_bundle: error: {args.bundle or 'no bundle named'}: name a bundle's directory", file=sys.stderr)
        return 2
    problems, summary = check(args.bundle, args.host_lib_dir, args.require_host_libs, args.max_mib)
    for problem in problems:
        print(f"check_bundle: {problem}", file=sys.stderr)
    print(summary if not problems else f"check_bundle: {len(problems)} problem(s) in {args.bundle}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
