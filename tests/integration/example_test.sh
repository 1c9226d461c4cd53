#!/usr/bin/env bash
# The example training process (client/examples/train_step.cc): the first run compiles its graph
# into a fresh cache directory, the second finds it there; both run their steps and exit 0.
set -euo pipefail
TRAIN_STEP=$1
CORPUS=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
GRAPH="$CORPUS/torch_xla/bert__bert_single_graph_2.hlo"

first=$("$TRAIN_STEP" "$DIR/cache" "$GRAPH" 2)
echo "$first"
grep -q ": compiled here, ready in" <<<"$first" || { echo "FAIL: first run did not compile"; exit 1; }
grep -q "^step 1:" <<<"$first" || { echo "FAIL: first run did not run its steps"; exit 1; }
second=$("$TRAIN_STEP" "$DIR/cache" "$GRAPH" 2)
echo "$second"
grep -q ": local, ready in" <<<"$second" || { echo "FAIL: second run missed the cache"; exit 1; }
[ "$(head -c 40 <<<"$first" | cut -d: -f1)" = "$(head -c 40 <<<"$second" | cut -d: -f1)" ] ||
  { echo "FAIL: the two runs disagree on the key"; exit 1; }
echo "example: ok"
