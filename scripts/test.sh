#!/usr/bin/env bash
# The test command: installs what is missing, then runs four rounds, each a configure, a
# build and ctest, and stops at the first that fails:
#   ci-dev  everything (viewer, CUDA host code, benchmarks), warnings as errors, every test
#   asan    AddressSanitizer + UBSan, every test (no viewer, CUDA or benchmarks)
#   tsan    ThreadSanitizer: only the suites that run threads (the tsan presets' lists)
#   fuzz    the importers' libFuzzer targets for a bounded time (clang)
# Each round prints its durations ("round asan: configure 9 s, build 612 s, tests 58 s").
# RANKSCOPE_SKIP_SANITIZERS=1 runs only the first round. Exits non-zero when a test fails.
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
round() {  # round PRESET: configure, build and test with the presets of that name
  local preset=$1 t0 t1 t2 t3 status=0
  t0=$SECONDS
  cmake --preset "$preset"
  t1=$SECONDS
  cmake --build --preset "$preset"
  t2=$SECONDS
  ctest --preset "$preset" --parallel "$test_jobs" || status=$?
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

round ci-dev
if [ "${RANKSCOPE_SKIP_SANITIZERS:-0}" != "1" ]; then
  for preset in asan tsan fuzz; do
    round "$preset"
  done
fi
