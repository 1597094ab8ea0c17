#!/usr/bin/env bash
# The demo: installs what is missing, builds (release preset), and profiles a 2-rank run of
# the reference DDP trainer on the CPU (Gloo all-reduce overlapped with the backward pass).
# RANKSCOPE_DEMO_RANKS and RANKSCOPE_DEMO_STEPS change the size; the run directory is
# ./rankscope-demo (replaced on each run).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

ranks="${RANKSCOPE_DEMO_RANKS:-2}"
steps="${RANKSCOPE_DEMO_STEPS:-30}"
build=build/release
"$build/cli/rankscope" profile --force -o rankscope-demo -n "$ranks" -- \
  "$build/trainer/rankscope-trainer" --steps "$steps" --batch 64 --width 1024 --depth 4
