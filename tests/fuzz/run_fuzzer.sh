#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time over its seed corpus (read only: new inputs
# go to a temporary directory). Exits non-zero, naming the crashing input, when the target
# crashes, leaks, hangs or trips a sanitizer.
# Usage: run_fuzzer.sh FUZZER SECONDS SEED_DIR...
set -euo pipefail
fuzzer=$1
seconds=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
# The target writes its scratch files under TMPDIR: inside $work, removed with it.
if ! TMPDIR="$work" "$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=1048576 \
     -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" "$@" 2> "$work/log"; then
  tail -n 60 "$work/log" >&2
  for artifact in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$artifact" ] || continue
    kept="$(dirname "$fuzzer")/$(basename "$artifact")"
    cp "$artifact" "$kept"
    echo "run_fuzzer.sh: $(basename "$fuzzer") failed; the input is kept in $kept" >&2
  done
  exit 1
fi
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "$work/log" | tail -n 3
