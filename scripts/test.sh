#!/usr/bin/env bash
# The test command: installs what is missing, then runs four rounds, each a configure, a
# build and ctest, and stops at the first that fails:
#   asan    AddressSanitizer + UBSan, every test (no viewer, CUDA or benchmarks)
#   ci-dev  everything (viewer, CUDA host code, benchmarks), warnings as errors; the tests
#           the asan round did not run (the viewer's, the benchmarks' smoke runs, CUDA host
#           code): a test that passed under the sanitizers is not run again
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
# The ctest numbers of the tests in build dir $1 that build dir $2 does not have (by name),
# as ctest's -I file: what ci-dev runs after the asan round.
tests_not_in() {
  python3 - "$1" "$2" <<'PY'
import re, subprocess, sys
def tests(build):
    listing = subprocess.run(["ctest", "--test-dir", build, "-N"], capture_output=True, text=True, check=True).stdout
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*Test\s+#(\d+): (.*)$", listing, re.M)}
mine, theirs = tests(sys.argv[1]), tests(sys.argv[2])
print(",".join(["0", "0", "0"] + [str(n) for name, n in sorted(mine.items(), key=lambda item: item[1])
                                   if name not in theirs]))
PY
}

round() {  # round PRESET [CTEST ARGS...]: configure, build and test with the presets of that name
  local preset=$1 t0 t1 t2 t3 status=0
  shift
  t0=$SECONDS
  cmake --preset "$preset"
  t1=$SECONDS
  cmake --build --preset "$preset"
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
# ci-dev configures and builds first (its round then finds it built): its test list is known
# only then.
t_build=$SECONDS
cmake --preset ci-dev >/dev/null && cmake --build --preset ci-dev
summary+=("ci-dev build before its round: $((SECONDS - t_build)) s")
only_ci_dev=$(mktemp)
tests_not_in build/ci-dev build/asan > "$only_ci_dev"
echo "test.sh: ci-dev runs the $(($(tr ',' '\n' < "$only_ci_dev" | wc -l) - 3)) tests the asan round did not"
round ci-dev -I "$only_ci_dev"
for preset in tsan fuzz; do
  round "$preset"
done
