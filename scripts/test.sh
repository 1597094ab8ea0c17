#!/usr/bin/env bash
# The test command: installs what is missing, builds with warnings as errors, and runs
# every test; then builds and runs them again under AddressSanitizer + UBSan.
# RANKSCOPE_SKIP_ASAN=1 skips the second round. Exits non-zero when any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

cmake --preset dev
cmake --build --preset dev
ctest --preset dev

if [ "${RANKSCOPE_SKIP_ASAN:-0}" != "1" ]; then
  cmake --preset asan
  cmake --build --preset asan
  ctest --preset asan
fi
