#!/usr/bin/env bash
# The test command: installs what is missing, builds with warnings as errors, and runs
# every test; then builds and runs them again under AddressSanitizer + UBSan, and under
# ThreadSanitizer; then runs the importers' libFuzzer targets for a bounded time (clang).
# RANKSCOPE_SKIP_SANITIZERS=1 skips those three rounds. Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

cmake --preset dev
cmake --build --preset dev
ctest --preset dev

if [ "${RANKSCOPE_SKIP_SANITIZERS:-0}" != "1" ]; then
  for preset in asan tsan fuzz; do
    cmake --preset "$preset"
    cmake --build --preset "$preset"
    ctest --preset "$preset"
  done
fi
