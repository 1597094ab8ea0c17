#!/usr/bin/env bash
# The scaling gate of a CI job: sweep the reference trainer on the CPU at 1 and 2 ranks,
# compare with the committed baseline, and leave the reports a person reads in the pull
# request. Exit status: 0 no regression, 1 a regression, 2 bad input (rankscope compare's)
# or a sweep that failed (a run that crashed or did not finish is not a verdict on scaling).
#
#   samples/ci/scaling-gate.sh                      # gate against samples/ci/baseline.json
#   samples/ci/scaling-gate.sh --refresh-baseline   # re-measure and replace the baseline
#
# A regression is measured again before the job fails: on a shared runner a whole run can
# be slow, and that rarely happens twice in a row; a real regression repeats.
#
# Environment: RANKSCOPE_BUILD (default build/release), RANKSCOPE_BASELINE (default
# samples/ci/baseline.json), RANKSCOPE_ARTIFACTS (default rankscope-ci), RANKSCOPE_TOLERANCE
# (default 40%: what a shared 2-core runner needs; see samples/ci/README.md),
# RANKSCOPE_TRAINER_ARGS (extra trainer arguments, e.g. "--extra-step-delay-ms 40" to see
# the gate catch a slowdown).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${RANKSCOPE_BUILD:-$root/build/release}"
baseline="${RANKSCOPE_BASELINE:-$root/samples/ci/baseline.json}"
artifacts="${RANKSCOPE_ARTIFACTS:-rankscope-ci}"
tolerance="${RANKSCOPE_TOLERANCE:-40%}"
rankscope="$build/cli/rankscope"
trainer="$build/trainer/rankscope-trainer"

refresh=0
case "${1:-}" in
  "") ;;
  --refresh-baseline) refresh=1 ;;
  *) echo "scaling-gate: unknown argument '$1' (expected nothing or --refresh-baseline)" >&2; exit 2 ;;
esac
for program in "$rankscope" "$trainer"; do
  if [ ! -x "$program" ]; then
    echo "scaling-gate: $program is missing: build first (cmake --preset release && cmake --build --preset release)" >&2
    exit 2
  fi
done

# The workload: what the baseline measured. Change it only together with the baseline.
workload=(--steps 30 --batch 128 --width 512 --depth 4 --bucket-mb 1 --quiet)
read -r -a extra_args <<< "${RANKSCOPE_TRAINER_ARGS:-}"

sweep() {  # sweep DIR: the workload at 1 and 2 ranks, into DIR; exits 2 when it fails
  local code=0
  "$rankscope" sweep --ranks 1,2 -o "$1" --force -- "$trainer" "${workload[@]}" "${extra_args[@]}" || code=$?
  if [ "$code" != 0 ]; then
    echo "scaling-gate: the sweep into $1 failed (rankscope sweep exited $code; its output is above): no verdict" >&2
    exit 2
  fi
}
compare() {  # compare DIR: exit status 0, 1 or 2, with the reports for people and CI
  "$rankscope" compare --baseline "$baseline" "$1" --tolerance "$tolerance" \
    --junit "$artifacts/compare.xml" --markdown "$artifacts/compare.md"
}

mkdir -p "$artifacts"
sweep "$artifacts/sweep"

if [ "$refresh" = 1 ]; then
  cp "$artifacts/sweep/scaling.json" "$baseline"
  echo "scaling-gate: wrote a new baseline to $baseline; review it and commit it with the change that explains it"
  exit 0
fi

measured="$artifacts/sweep"
status=0
compare "$measured" || status=$?
if [ "$status" = 1 ]; then
  echo "scaling-gate: a regression; measuring once more to confirm it"
  measured="$artifacts/confirm"
  sweep "$measured"
  status=0
  compare "$measured" || status=$?
  if [ "$status" = 0 ]; then echo "scaling-gate: the second measurement passes: the first was noise"; fi
fi
cp "$measured/scaling.html" "$artifacts/scaling.html"
cp "$measured/scaling.png" "$artifacts/scaling.png"
echo "scaling-gate: reports in $artifacts/ (scaling.html, scaling.png, compare.md, compare.xml)"
exit "$status"
