#!/usr/bin/env bash
# Runs a fuzz target for a bounded time, seeded with the small files of the directories named
# (for the HLO parser, corpus modules and the inputs that once failed it). Crashing inputs are
# kept in $FUZZ_ARTIFACTS (default ./fuzz-artifacts) to reproduce with `FUZZER FILE`.
# Usage: run_fuzz.sh FUZZER SECONDS SEED_DIR...
# A longer, random exploration than the suite's: FUZZ_SEED=0 FUZZ_RUNS=100000000 run_fuzz.sh ...
set -euo pipefail
FUZZER=$1
SECONDS_TO_RUN=$2
shift 2
ARTIFACTS=${FUZZ_ARTIFACTS:-$PWD/fuzz-artifacts}
mkdir -p "$ARTIFACTS"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/seeds" "$WORK/new"
# Small files make better seeds; large ones slow every iteration. Names are kept apart by the
# directory they came from.
n=0
for dir in "$@"; do
  n=$((n + 1))
  while IFS= read -r -d '' f; do
    cp "$f" "$WORK/seeds/$n-$(basename "$f")"
  done < <(find "$dir" -type f -size -8k -print0)
done
cd "$WORK"
# A fixed seed and run count make the suite's run reproducible; FUZZ_SEED=0 (random) and a larger
# FUZZ_RUNS explore further. FUZZ_FLAGS: a target's own libFuzzer flags (a memory limit).
# shellcheck disable=SC2086
"$FUZZER" ${FUZZ_FLAGS:-} -seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-300000}" -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$ARTIFACTS/" new seeds
