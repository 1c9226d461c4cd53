#!/usr/bin/env bash
# Runs the parser fuzzer for a bounded time, seeded with small corpus modules. Crashing inputs
# are kept in $FUZZ_ARTIFACTS (default ./fuzz-artifacts) to reproduce with `FUZZER FILE`.
# Usage: run_fuzz.sh FUZZER CORPUS_DIR SECONDS
set -euo pipefail
FUZZER=$1
CORPUS=$2
SECONDS_TO_RUN=$3
ARTIFACTS=${FUZZ_ARTIFACTS:-$PWD/fuzz-artifacts}
mkdir -p "$ARTIFACTS"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/seeds" "$WORK/new"
# Small modules make better seeds; large ones slow every iteration.
find "$CORPUS/hlo" "$CORPUS/torch_xla" "$CORPUS/invalid" -name '*.hlo' -size -8k \
  -exec cp {} "$WORK/seeds/" \;
# Inputs that once failed are replayed first, every run.
cp "$(dirname "$0")"/regressions/* "$WORK/seeds/"
cd "$WORK"
# A fixed seed and run count make the suite's run reproducible; FUZZ_SEED=0 (random) and a larger
# FUZZ_RUNS explore further.
"$FUZZER" -seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-300000}" -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$ARTIFACTS/" new seeds
