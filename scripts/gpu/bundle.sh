#!/usr/bin/env bash
# Builds the GPU bundle: everything the GPU checks need, in one folder that runs on a bare
# GPU machine (torch and CUDA there, none of our Debian libraries). Run it here, on the CPU
# machine, after scripts/install-deps.sh; carry the folder to the GPU machine and run
# scripts/gpu/run-checks.sh BUNDLE OUTDIR there.
#
#   scripts/gpu/bundle.sh [--out DIR] [--from-build BUILD_DIR]
#
# Builds the release preset's GPU targets (CUDA for sm_90), then copies into DIR (default
# .gpu-bundle, which git ignores), stripped:
#   bin/  rankscope, rankscope-trainer, kernels_cuda_tests, gpu_gemm_bench, cupti_timing
#   lib/  librankscope_collector.so, the CUPTI it loads, and every shared library these
#         need beyond glibc, libstdc++, libgcc_s, the CUDA driver, NCCL and cuBLAS (the GPU
#         machine has those last two in torch's site-packages: run-checks.sh finds them)
#   py/   the check scripts and samples/pytorch/ddp_train.py
#   run-checks.sh, check_bundle.py, MANIFEST.txt (commit, toolkit, files)
# Programs find lib/ through an $ORIGIN-relative RPATH (patchelf), so nothing else in the
# host's processes sees our libraries. --from-build packages an existing build tree
# instead of building (the CI test uses the dev tree). The bundle must stay under 56 MiB
# (the device tool carries 64 MiB with the repository); check_bundle.py verifies that and
# every library's resolution before the bundle replaces an earlier one, and DIR is replaced
# only when it is an earlier bundle. Exits 1 with one line on any failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

out=.gpu-bundle
build=""
while (($#)); do
  case "$1" in
    --out|--from-build)
      [ -n "${2:-}" ] || { echo "bundle.sh: error: $1 needs a directory (see --help)" >&2; exit 2; }
      if [ "$1" = --out ]; then out=$2; else build=$2; fi
      shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

fail() { echo "bundle.sh: error: $*" >&2; exit 1; }
for tool in patchelf readelf strip ldd python3; do
  command -v "$tool" >/dev/null || fail "$tool is missing: run scripts/install-deps.sh"
done
if [ -e "$out" ] && [ ! -f "$out/MANIFEST.txt" ]; then
  fail "$out exists and is not a GPU bundle: name a new folder (nothing was replaced)"
fi

programs=(rankscope rankscope-trainer kernels_cuda_tests gpu_gemm_bench cupti_timing)
if [ -z "$build" ]; then
  build=build/release
  cmake --preset release >/dev/null || fail "cmake --preset release failed"
  cmake --build --preset release --target "${programs[@]}" rankscope_collector ||
    fail "building the GPU targets failed (is the CUDA 13 toolkit installed? nvcc must be on PATH)"
fi
[ -f "$build/compile_commands.json" ] || fail "$build is not a configured build tree"
# The CUDA kernels' compile command says which nvcc and which GPU code went in.
cuda_command=$(grep -o '"command": "[^"]*kernels/cuda/gemm\.cu[^"]*"' "$build/compile_commands.json" | head -1 || true)
[ -n "$cuda_command" ] ||
  fail "$build was configured without CUDA (no nvcc found): install the CUDA 13 toolkit and reconfigure"
[[ "$cuda_command" == *sm_90* ]] || fail "$build does not build sm_90 code for the H100/H200"
nvcc=$(grep -o '[^ "]*nvcc' <<<"$cuda_command" | head -1)
gpu_code=$(grep -o -- '--generate-code=[^ ]*\|-arch[= ][^ ]*' <<<"$cuda_command" | tr '\n' ' ')
cupti=$(sed -n 's/^RANKSCOPE_CUPTI_LIBRARY:[A-Z]*=//p' "$build/CMakeCache.txt")
[ -n "$cupti" ] && [ -e "$cupti" ] || fail "$build found no libcupti (RANKSCOPE_CUPTI_LIBRARY): install CUPTI"

# Where each program lies in the build tree: bench/bench_env.py's table, which the check
# scripts use too.
declare -A path_of=()
while read -r name path; do
  path_of[$name]=$path
done < <(python3 -c 'import sys; sys.path.insert(0, "bench"); from bench_env import BUILD_TREE_PATHS as p
for name, path in p.items(): print(name, path)')
for program in "${programs[@]}"; do
  [ -x "$build/${path_of[$program]}" ] || fail "$build/${path_of[$program]} is missing: build it first"
done
[ -f "$build/${path_of[librankscope_collector.so]}" ] || fail "$build/${path_of[librankscope_collector.so]} is missing"

# Assembled beside the destination, and moved there only once it passes its check.
out_parent=$(dirname "$out")
mkdir -p "$out_parent"
staging=$(mktemp -d "$out_parent/.gpu-bundle-staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
chmod 755 "$staging"
mkdir -p "$staging/bin" "$staging/lib" "$staging/py"

for program in "${programs[@]}"; do
  cp "$build/${path_of[$program]}" "$staging/bin/$program"
done
cp "$build/${path_of[librankscope_collector.so]}" "$staging/lib/"
cupti_soname=$(readelf -d "$cupti" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
cp -L "$cupti" "$staging/lib/${cupti_soname:-$(basename "$cupti")}"  # dlopen'ed by the collector
strip --strip-unneeded "$staging"/bin/* "$staging/lib/librankscope_collector.so"

# Every library the loader finds for our files, except what the host provides.
mapfile -t host_sonames < <(python3 scripts/gpu/check_bundle.py --host-sonames)
declare -A from_host=()
for soname in "${host_sonames[@]}"; do from_host[$soname]=1; done
for file in "$staging"/bin/* "$staging"/lib/*; do
  ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' || true
done | sort -u >"$staging/needed.txt"
while read -r soname path; do
  if [ -z "${from_host[$soname]:-}" ] && [ ! -e "$staging/lib/$soname" ]; then
    cp -L "$path" "$staging/lib/$soname" || fail "cannot copy $path into the bundle"
  fi
done <"$staging/needed.txt"
rm "$staging/needed.txt"

# Our programs look in ../lib, libraries beside themselves; DT_RPATH (not RUNPATH) also
# covers the libraries' own dependencies and comes before LD_LIBRARY_PATH.
for file in "$staging"/bin/*; do
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$file"
done
cupti_name=${cupti_soname:-$(basename "$cupti")}
for file in "$staging"/lib/*; do
  [ "$(basename "$file")" = "$cupti_name" ] && continue  # NVIDIA's, as shipped: it needs only glibc
  patchelf --force-rpath --set-rpath '$ORIGIN' "$file"
done

# The PyTorch hook (`profile --pytorch`), where rankscope looks for it: beside the collector.
cp -r "$build/collector/rankscope-pytorch" "$staging/lib/"

cp bench/gpu_checks.py bench/torch_compare.py bench/training_overhead.py bench/cupti_timing_check.py \
  bench/bench_env.py samples/pytorch/ddp_train.py "$staging/py/"
cp scripts/gpu/run-checks.sh scripts/gpu/check_bundle.py "$staging/"

{
  echo "rankscope GPU bundle: commit $(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(
    git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'), built $(date -u '+%Y-%m-%d %H:%M UTC') from $build"
  echo "nvcc: $nvcc ($("$nvcc" --version | tail -1)); GPU code: $gpu_code"
  echo "CUPTI: $cupti"
  echo "build type: $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
  echo "from the host: glibc, libstdc++, libgcc_s, libcuda.so.1, libnccl.so.2, libcublas.so.13, libcublasLt.so.13"
  echo "files:"
  (cd "$staging" && find . -type f ! -name MANIFEST.txt -printf '%P %s\n' | sort)
} >"$staging/MANIFEST.txt"

python3 scripts/gpu/check_bundle.py "$staging" || fail "the bundle failed its check (above); nothing was replaced"
rm -rf "$out"
mv "$staging" "$out"
trap - EXIT
echo "bundle.sh: $out ($(du -sm "$out" | cut -f1) MiB): on the GPU machine run scripts/gpu/run-checks.sh $out OUTDIR"
