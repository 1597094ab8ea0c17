#!/usr/bin/env bash
# The A/B scaling gate of a CI job: the base commit's build (A) and the candidate's (B) run the
# reference trainer in alternating pairs on the same runner, at 1 and 2 CPU ranks, and
# `rankscope ab` judges B against A on the pairs, so a runner that is slower today slows
# both sides alike. Exit status: 0 no regression, 1 a regression, 2 bad input or a failing run.
#
#   samples/ci/ab-gate.sh BASE_BUILD [HEAD_BUILD]   # build directories (default HEAD_BUILD: build/release)
#
# Environment: RANKSCOPE_ARTIFACTS (default rankscope-ab), RANKSCOPE_AB_BUDGET (default 15m),
# RANKSCOPE_AB_PAIRS (default 20), RANKSCOPE_AB_RANKS (default 1,2), RANKSCOPE_TOLERANCE
# (default 2%), RANKSCOPE_AB_WORKLOAD (the trainer's arguments; default the workload of
# scaling-gate.sh), RANKSCOPE_TRAINER_ARGS (extra arguments for B only, e.g.
# "--extra-step-delay-ms 5" to see the gate catch a slowdown).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "ab-gate: usage: samples/ci/ab-gate.sh BASE_BUILD [HEAD_BUILD]" >&2
  exit 2
fi
base="$1"
head="${2:-$root/build/release}"
artifacts="${RANKSCOPE_ARTIFACTS:-rankscope-ab}"
for program in "$base/trainer/rankscope-trainer" "$head/trainer/rankscope-trainer" "$head/cli/rankscope"; do
  if [ ! -x "$program" ]; then
    echo "ab-gate: $program is missing: build both commits first (cmake --preset release && cmake --build --preset release)" >&2
    exit 2
  fi
done

workload="${RANKSCOPE_AB_WORKLOAD:---steps 30 --batch 128 --width 512 --depth 4 --bucket-mb 1 --quiet}"
mkdir -p "$artifacts"
status=0
"$head/cli/rankscope" ab \
  --a "$base/trainer/rankscope-trainer $workload" \
  --b "$head/trainer/rankscope-trainer $workload ${RANKSCOPE_TRAINER_ARGS:-}" \
  --ranks "${RANKSCOPE_AB_RANKS:-1,2}" --pairs "${RANKSCOPE_AB_PAIRS:-20}" --budget "${RANKSCOPE_AB_BUDGET:-15m}" \
  --tolerance "${RANKSCOPE_TOLERANCE:-2%}" -o "$artifacts/runs" --force \
  --junit "$artifacts/ab.xml" --markdown "$artifacts/ab.md" || status=$?
echo "ab-gate: reports in $artifacts/ (ab.md, ab.xml; the runs in runs/, their output in runs/ab.log)"
exit "$status"
