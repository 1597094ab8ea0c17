#!/usr/bin/env bash
# The demo: installs what is missing, builds (release preset), profiles a 4-rank run of the
# reference DDP trainer on the CPU (Gloo all-reduce overlapped with the backward pass),
# prints the analysis, writes the HTML report and renders the viewer's timeline to a PNG. RANKSCOPE_DEMO_RANKS and
# RANKSCOPE_DEMO_STEPS change the size; the run directory is ./rankscope-demo (replaced on
# each run).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release

ranks="${RANKSCOPE_DEMO_RANKS:-4}"
steps="${RANKSCOPE_DEMO_STEPS:-30}"
build=build/release
"$build/cli/rankscope" profile --force -o rankscope-demo -n "$ranks" -- \
  "$build/trainer/rankscope-trainer" --steps "$steps" --batch 64 --width 1024 --depth 4 \
  --bucket-mb 2 --first-bucket-mb 1

echo
"$build/cli/rankscope" analyze rankscope-demo
"$build/cli/rankscope" analyze rankscope-demo --format html --out rankscope-demo/report.html
echo "demo: the HTML report is $(pwd)/rankscope-demo/report.html"
# The viewer, headless: the same run as a timeline picture (open it interactively with
# $build/gui/app/rankscope-gui rankscope-demo).
QT_QPA_PLATFORM=offscreen "$build/gui/app/rankscope-gui" rankscope-demo --screenshot rankscope-demo/timeline.png \
  --size 1600x900
