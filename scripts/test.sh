#!/usr/bin/env bash
# The test command: installs what is missing, then runs four rounds, each a configure, a
# build and ctest, and stops at the first that fails:
#   asan    AddressSanitizer + UBSan, every test (no viewer, CUDA or benchmarks)
#   ci-dev  everything (viewer, CUDA host code, benchmarks), warnings as errors, but the
#           test programs asan ran; the tests the asan round did not run (the viewer's, the
#           benchmarks' smoke runs, CUDA host code): a test that passed under the sanitizers
#           is neither rebuilt nor run again
#   tsan    ThreadSanitizer: only the suites that run threads (the tsan presets' lists)
#   fuzz    the importers' libFuzzer targets for a bounded time (clang)
# Each round prints its durations ("round asan: configure 9 s, build 612 s, tests 58 s").
# RANKSCOPE_SKIP_SANITIZERS=1 runs only the ci-dev round, every test. Exits non-zero when a
# test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
bash scripts/install-deps.sh
echo "test.sh: dependencies: $((SECONDS - started)) s"

# Tests in parallel, two at a time (the machine CI runs on has two cores); the end-to-end
# suites that need the machine to themselves (e2e.*) are RUN_SERIAL and run alone; the two
# fuzz targets run side by side, one core each.
test_jobs="${RANKSCOPE_TEST_JOBS:-2}"

summary=()
round() {  # round PRESET [CTEST ARGS...]: configure, build and test with the presets of that name
  local preset=$1 t0 t1 t2 t3 status=0
  shift
  t0=$SECONDS
  cmake --preset "$preset"
  t1=$SECONDS
  # built_already=1: the caller built what the round needs (ci-dev after asan).
  [ "${built_already:-0}" = 1 ] || cmake --build --preset "$preset"
  t2=$SECONDS
  ctest --preset "$preset" --parallel "$test_jobs" "$@" || status=$?
  t3=$SECONDS
  summary+=("round $preset: configure $((t1 - t0)) s, build $((t2 - t1)) s, tests $((t3 - t2)) s$( ((status == 0)) || echo ", FAILED")")
  echo "test.sh: ${summary[-1]}"
  return "$status"
}
finish() {
  local status=$?
  if ((${#summary[@]} > 0)); then
    echo "test.sh: ${#summary[@]} round(s) in $((SECONDS - started)) s, dependencies included:"
    printf '  %s\n' "${summary[@]}"
  fi
  exit "$status"
}
trap finish EXIT

if [ "${RANKSCOPE_SKIP_SANITIZERS:-0}" = "1" ]; then
  round ci-dev
  exit 0
fi
round asan
# ci-dev configures and builds before its round (its test list is known only then): everything
# but the test programs asan already ran (scripts/ci_dev_plan.py).
t_build=$SECONDS
cmake --preset ci-dev >/dev/null
ci_dev_plan=$(python3 scripts/ci_dev_plan.py targets build/ci-dev build/asan)
mapfile -t ci_dev_targets <<< "$ci_dev_plan"
cmake --build build/ci-dev --target "${ci_dev_targets[@]}"
summary+=("ci-dev build before its round (${#ci_dev_targets[@]} targets): $((SECONDS - t_build)) s")
only_ci_dev=$(mktemp)
python3 scripts/ci_dev_plan.py tests build/ci-dev build/asan > "$only_ci_dev"
echo "test.sh: ci-dev runs the $(($(tr ',' '\n' < "$only_ci_dev" | wc -l) - 3)) tests the asan round did not"
built_already=1 round ci-dev -I "$only_ci_dev"
for preset in tsan fuzz; do
  round "$preset"
done
