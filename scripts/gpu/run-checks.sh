#!/usr/bin/env bash
# Every GPU check in one command, on a GPU machine, from a bundle of scripts/gpu/bundle.sh:
#
#   run-checks.sh [--dry-run] [--only CHECKS] BUNDLE OUTDIR
#
# 1. Finds the host's NCCL and cuBLAS: torch's site-packages (nvidia/**), then
#    /usr/local/cuda, then the loader's cache (RANKSCOPE_NCCL_DIR, RANKSCOPE_CUBLAS_DIR
#    override). Only NCCL's folder goes on LD_LIBRARY_PATH; cuBLAS's only for gpu_gemm_bench.
# 2. Checks that the bundle's programs load with a clean environment (`rankscope --version`,
#    `rankscope-trainer --help`, `cupti_timing` and `kernels_cuda_tests --gtest_list_tests`;
#    `gpu_gemm_bench` with cuBLAS only warns) and that every library resolves
#    (check_bundle.py; on a full run with a GPU a library problem is a warning in
#    environment.txt, since the checks themselves show what it breaks).
# 3. Without a GPU: says so in one line and exits 2. With --dry-run: stops here.
# 4. Runs bench/gpu_checks.py from the bundle (--only: a comma-separated subset): every
#    check within its own time budget and all within 540 s, the output in
#    OUTDIR/checks.log, verdicts in OUTDIR/results.json,
#    the report in OUTDIR/summary.md (commit it as bench/results/gpu-<date>.md), the real
#    traces of the profiled jobs, gzipped, in OUTDIR/traces/.
# Exits 0 when every check passes, 1 when one does not or the bundle does not load here,
# 2 for bad arguments or no GPU. OUTDIR must be new or empty: nothing earlier is overwritten.
set -uo pipefail

usage="usage: run-checks.sh [--dry-run] [--only CHECKS] BUNDLE OUTDIR"
dry_run=0
only=()
positional=()
while (($#)); do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --only)
      [ -n "${2:-}" ] || { echo "run-checks: error: --only needs a list of checks; $usage" >&2; exit 2; }
      only=(--only "$2"); shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run-checks: error: unknown option '$1'; $usage" >&2; exit 2 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
bundle="${positional[0]:-}"
out="${positional[1]:-}"
if [ -z "$bundle" ] || ((${#positional[@]} > 2)) || { [ -z "$out" ] && ((!dry_run)); }; then
  echo "run-checks: error: $usage" >&2
  exit 2
fi
if [ ! -x "$bundle/bin/rankscope" ] || [ ! -f "$bundle/py/gpu_checks.py" ]; then
  echo "run-checks: error: $bundle is not a GPU bundle (no bin/rankscope or py/gpu_checks.py): make one with scripts/gpu/bundle.sh" >&2
  exit 2
fi
bundle=$(cd "$bundle" && pwd)
if [ -n "$out" ] && [ -e "$out" ] && { [ ! -d "$out" ] || [ -n "$(ls -A "$out")" ]; }; then
  echo "run-checks: error: $out exists and is not an empty directory: name a new one" >&2
  exit 2
fi
python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "run-checks: error: no $python on PATH (set PYTHON)" >&2; exit 2; }

# The folder holding SONAME: torch's site-packages first (where a pip-installed PyTorch keeps
# NVIDIA's libraries), then the CUDA toolkit; empty when only the loader's cache has it.
host_library_dir() {
  "$python" - "$1" <<'PY'
import glob, importlib.util, os, sys
name = sys.argv[1]
spec = importlib.util.find_spec("torch")  # finds torch without importing it
roots = [os.path.dirname(os.path.dirname(spec.origin))] if spec and spec.origin else []
for root in roots:
    hits = sorted(glob.glob(os.path.join(root, "nvidia", "**", name), recursive=True))
    hits += sorted(glob.glob(os.path.join(root, "torch", "lib", name)))
    if hits:
        print(os.path.dirname(os.path.realpath(hits[0])))
        sys.exit(0)
for folder in ("/usr/local/cuda/lib64", "/usr/local/cuda/lib"):
    if os.path.exists(os.path.join(folder, name)):
        print(folder)
        sys.exit(0)
PY
}
nccl_dir=${RANKSCOPE_NCCL_DIR:-$(host_library_dir libnccl.so.2)}
cublas_dir=${RANKSCOPE_CUBLAS_DIR:-$(host_library_dir libcublas.so.13)}
host_dirs=()
[ -n "$nccl_dir" ] && host_dirs+=(--host-lib-dir "$nccl_dir")
[ -n "$cublas_dir" ] && host_dirs+=(--host-lib-dir "$cublas_dir")

# Loads with nothing of this shell's environment but PATH, HOME and NCCL's folder.
clean_run() {
  env -i PATH="/usr/local/bin:/usr/bin:/bin" HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="$nccl_dir" "$@"
}
# Whether a program starts: the loader found its libraries (exit 127 or its message: not).
starts() {
  local output
  output=$("$@" 2>&1 >/dev/null)
  local code=$?
  if ((code == 127)) || grep -q "error while loading shared libraries" <<<"$output"; then
    echo "$(head -1 <<<"$output")"
    return 1
  fi
}
if ! version=$(clean_run "$bundle/bin/rankscope" --version 2>&1); then
  echo "run-checks: the bundle does not load here: rankscope --version: $(head -1 <<<"$version")" >&2
  exit 1
fi
for program in "rankscope-trainer --help" "cupti_timing" "kernels_cuda_tests --gtest_list_tests"; do
  read -r -a words <<<"$program"
  if ! why=$(starts clean_run "$bundle/bin/${words[0]}" "${words[@]:1}"); then
    echo "run-checks: the bundle does not load here: $program: $why" >&2
    exit 1
  fi
done
gemm_warning=""
if ! why=$(starts env -i PATH="$PATH" LD_LIBRARY_PATH="$cublas_dir" "$bundle/bin/gpu_gemm_bench" --help); then
  gemm_warning="run-checks: warning: gpu_gemm_bench does not start here ($why): the gemm check will fail"
fi

no_gpu=""
if ! command -v nvidia-smi >/dev/null; then
  no_gpu="nvidia-smi is not installed"
elif ! gpu=$(nvidia-smi -L 2>&1) || [[ "$gpu" != GPU* ]]; then
  no_gpu="nvidia-smi -L: $(head -1 <<<"${gpu:-no output}")"
fi
if [ -n "$no_gpu" ]; then
  if ! libraries=$("$python" "$bundle/check_bundle.py" "$bundle" "${host_dirs[@]}" 2>&1); then
    echo "run-checks: the bundle does not load here: $(head -1 <<<"$libraries")" >&2
    exit 1
  fi
  echo "run-checks: no NVIDIA GPU on this machine ($no_gpu); the bundle loads (rankscope $version); no check was run" >&2
  exit 2
fi
gpu=$(head -1 <<<"$gpu")
libraries=$("$python" "$bundle/check_bundle.py" "$bundle" "${host_dirs[@]}" --require-host-libs 2>&1)
libraries_ok=$?
if ((dry_run)); then
  if ((libraries_ok != 0)) || [ -n "$gemm_warning" ]; then
    echo "run-checks: dry run: the bundle's libraries do not all resolve here:" >&2
    echo "$libraries" >&2
    [ -n "$gemm_warning" ] && echo "$gemm_warning" >&2
    exit 1
  fi
  echo "run-checks: dry run: the bundle loads (rankscope $version) and $gpu is here; no check was run"
  exit 0
fi

mkdir -p "$out" || { echo "run-checks: error: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
{
  nvidia-smi
  echo "rankscope $version; NCCL from ${nccl_dir:-the ld.so cache}; cuBLAS from ${cublas_dir:-the ld.so cache}"
  echo "$libraries"
  ((libraries_ok == 0)) || echo "run-checks: warning: library problems above; running the checks anyway"
  [ -n "$gemm_warning" ] && echo "$gemm_warning"
  head -1 "$bundle/MANIFEST.txt"
} 2>&1 | tee "$out/environment.txt"

export LD_LIBRARY_PATH="${nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RANKSCOPE_COLLECTOR_LIB="$bundle/lib/librankscope_collector.so"
export PYTHONUNBUFFERED=1
library_dirs=()
[ -n "$cublas_dir" ] && library_dirs+=(--library-dir "$cublas_dir")
"$python" "$bundle/py/gpu_checks.py" --build-dir "$bundle" --out "$out" "${library_dirs[@]}" "${only[@]}" \
  --command "scripts/gpu/run-checks.sh $bundle $out" 2>&1 | tee "$out/checks.log"
status=${PIPESTATUS[0]}
echo "run-checks: exit $status; the report is $out/summary.md"
exit "$status"
