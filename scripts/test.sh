#!/usr/bin/env bash
# The test command: installs what is missing, builds with warnings as errors, and runs
# every test; then builds and runs them again under AddressSanitizer + UBSan, and under
# ThreadSanitizer. RANKSCOPE_SKIP_SANITIZERS=1 skips those two rounds. Exits non-zero when
# any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

cmake --preset dev
cmake --build --preset dev
ctest --preset dev

if [ "${RANKSCOPE_SKIP_SANITIZERS:-0}" != "1" ]; then
  for preset in asan tsan; do
    cmake --preset "$preset"
    cmake --build --preset "$preset"
    ctest --preset "$preset"
  done
fi
