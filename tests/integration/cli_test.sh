#!/usr/bin/env bash
# Drives the real `hlocache` binary: key, canon, why, the store commands, compile and run, their
# output formats and exit codes.
# Usage: cli_test.sh HLOCACHE_BINARY CORPUS_DIR
set -uo pipefail
BIN=$1
CORPUS=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
# expect_rc WANT DESCRIPTION -- command...
expect_rc() {
  local want=$1 what=$2
  shift 3
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [[ $rc -eq $want ]]; then pass; else fail "$what: exit $rc, want $want; stderr: $(head -c 300 "$WORK/err")"; fi
}
expect_grep() {
  local pattern=$1 file=$2 what=$3
  if grep -Eq -- "$pattern" "$file"; then pass; else fail "$what: /$pattern/ not in $(head -c 300 "$file")"; fi
}

SMALL="$CORPUS/torch_xla/mlp__single_mlp.hlo"
OTHER="$CORPUS/torch_xla/misc__linear.hlo"
ELIDED=$(grep -l 'constant({...})' "$CORPUS"/hlo/*.hlo | head -1)

# key: sha256sum-style lines, exit 0.
expect_rc 0 "key two files" -- "$BIN" key --target cpu-x86-64-v3 "$SMALL" "$OTHER"
cp "$WORK/out" "$WORK/keys"
[[ $(wc -l <"$WORK/keys") -eq 2 ]] && pass || fail "key prints one line per file"
expect_grep "^v1-[0-9a-f]{32}  $SMALL\$" "$WORK/keys" "key line format"
KEY_SMALL=$(head -1 "$WORK/keys" | cut -d' ' -f1)

# stdin gives the same key.
"$BIN" key --target cpu-x86-64-v3 - <"$SMALL" >"$WORK/out" 2>&1
[[ "$(cut -d' ' -f1 "$WORK/out")" == "$KEY_SMALL" ]] && pass || fail "stdin key differs"
expect_grep '^v1-[0-9a-f]{32}  -$' "$WORK/out" "stdin key names '-'"

# A rename of every name plus stripped metadata: same key (what PyTorch/XLA does across runs).
sed -E 's/SyncTensorsGraph\.[0-9]+/SyncTensorsGraph.999/g; s/\.([0-9]+)\b/_r\1/g; s/, metadata=\{[^}]*\}//g' \
  "$SMALL" >"$WORK/renamed.hlo"
KEY_RENAMED=$("$BIN" key --target cpu-x86-64-v3 "$WORK/renamed.hlo" | cut -d' ' -f1)
[[ "$KEY_RENAMED" == "$KEY_SMALL" ]] && pass || fail "renamed module keys differently"
expect_rc 0 "why on the same program" -- "$BIN" why "$SMALL" "$WORK/renamed.hlo"
expect_grep "same key" "$WORK/out" "why says same"

# Target, compiler id and options are part of the key.
K_V4=$("$BIN" key --target cpu-x86-64-v4 "$SMALL" | cut -d' ' -f1)
[[ "$K_V4" != "$KEY_SMALL" ]] && pass || fail "target not in key"
K_OPT=$("$BIN" key --target cpu-x86-64-v3 --option fast-math=1 "$SMALL" | cut -d' ' -f1)
[[ "$K_OPT" != "$KEY_SMALL" ]] && pass || fail "option not in key"
K_CID=$("$BIN" key --target cpu-x86-64-v3 --compiler-id other-1 "$SMALL" | cut -d' ' -f1)
[[ "$K_CID" != "$KEY_SMALL" ]] && pass || fail "compiler id not in key"

# why names the part and the first differing lines with their source lines.
sed '0,/ multiply(/s// divide(/' "$SMALL" >"$WORK/changed.hlo"
expect_rc 1 "why on different programs" -- "$BIN" why "$SMALL" "$WORK/changed.hlo"
expect_grep "keys differ in: graph" "$WORK/out" "why names the graph part"
expect_grep "B canonical: .*divide\(" "$WORK/out" "why shows B's canonical line"
expect_grep "B source: +$WORK/changed.hlo:[0-9]+: .*divide\(" "$WORK/out" "why shows B's source line"
expect_grep "A source: +$SMALL:[0-9]+: .*multiply\(" "$WORK/out" "why shows A's source line"

# canon is idempotent and keys the same.
expect_rc 0 "canon" -- "$BIN" canon "$SMALL"
cp "$WORK/out" "$WORK/c1.hlo"
"$BIN" canon "$WORK/c1.hlo" >"$WORK/c2.hlo" 2>&1
cmp -s "$WORK/c1.hlo" "$WORK/c2.hlo" && pass || fail "canon is not idempotent"
K_CANON=$("$BIN" key --target cpu-x86-64-v3 "$WORK/c1.hlo" | cut -d' ' -f1)
[[ "$K_CANON" == "$KEY_SMALL" ]] && pass || fail "canonical text keys differently"

# Elided constants need consent.
expect_rc 1 "elided constants refused" -- "$BIN" key "$ELIDED"
expect_grep "^$ELIDED:[0-9]+:[0-9]+: error: constant has elided values" "$WORK/err" "elided error"
expect_rc 0 "elided constants allowed" -- "$BIN" key --allow-elided-constants "$ELIDED"

# Errors: one line, FILE:LINE:COL, exit 1, other files still keyed.
expect_rc 1 "invalid module" -- "$BIN" key "$CORPUS/invalid/undefined_operand.hlo" "$SMALL"
expect_grep "undefined_operand.hlo:4:174: error: undefined operand" "$WORK/err" "undefined operand located"
[[ $(wc -l <"$WORK/err") -eq 1 ]] && pass || fail "error is not one line"
expect_grep "^v1-.*  $SMALL\$" "$WORK/out" "good file still keyed"
head -c 4096 "$BIN" >"$WORK/junk.hlo"
expect_rc 1 "binary junk" -- "$BIN" key "$WORK/junk.hlo"
expect_grep "junk.hlo:1:[0-9]+: error: " "$WORK/err" "junk located"
head -c 3000 "$SMALL" >"$WORK/truncated.hlo"
expect_rc 1 "truncated file" -- "$BIN" key "$WORK/truncated.hlo"
expect_grep "truncated.hlo:[0-9]+:[0-9]+: error: " "$WORK/err" "truncated located"
expect_rc 1 "missing file" -- "$BIN" key "$WORK/nope.hlo"
expect_grep "nope.hlo: No such file" "$WORK/err" "missing file named"
: >"$WORK/empty.hlo"
expect_rc 1 "empty file" -- "$BIN" key "$WORK/empty.hlo"

# Bad usage exits 2.
expect_rc 2 "no arguments" -- "$BIN"
expect_rc 2 "key without files" -- "$BIN" key
expect_rc 2 "unknown flag" -- "$BIN" key --frobnicate "$SMALL"
expect_rc 2 "bad option syntax" -- "$BIN" key --option novalue "$SMALL"
expect_rc 1 "bad target name" -- "$BIN" key --target 'cpu x86' "$SMALL"
expect_rc 0 "help" -- "$BIN" --help
expect_grep "stats" "$WORK/out" "help lists the commands the full executable answers"
expect_rc 0 "key's help" -- "$BIN" key --help
expect_grep "--allow-elided-constants" "$WORK/out" "key's help lists its flags"
expect_rc 0 "version" -- "$BIN" --version
expect_grep "^hlocache [0-9]" "$WORK/out" "version line"

# Two executables: `hlocache` keys in its own process, linked without the network, storage and
# FUSE libraries (what its start-up time is for), and execs hlocache-full for the rest.
if command -v readelf >/dev/null; then
  readelf -d "$BIN" >"$WORK/dynamic" 2>&1
  expect_grep "NEEDED.*libxxhash" "$WORK/dynamic" "hlocache's dynamic section read"
  if grep -Eq "NEEDED.*(httplib|libssl|libcrypto|leveldb|sqlite|fuse|curl|zstd|dnnl)" "$WORK/dynamic"; then
    fail "hlocache loads libraries keying does not need: $(grep NEEDED "$WORK/dynamic" | tr -s ' ' | tr '\n' ' ')"
  else pass; fi
fi
mkdir -p "$WORK/alone"
cp "$BIN" "$WORK/alone/hlocache"
expect_rc 0 "key without hlocache-full beside it" -- "$WORK/alone/hlocache" key --target cpu-x86-64-v3 "$SMALL"
expect_grep "^$KEY_SMALL  $SMALL\$" "$WORK/out" "the lone hlocache keys alike"
expect_rc 0 "canon without hlocache-full" -- "$WORK/alone/hlocache" canon "$SMALL"
expect_rc 1 "other commands need hlocache-full" -- "$WORK/alone/hlocache" stats --dir "$WORK/nostore"
expect_grep "^hlocache: cannot run .*hlocache-full" "$WORK/err" "names the missing executable"
# A flag only the full command knows, after a key command: handed over, and still keyed.
expect_rc 0 "key with --s3-endpoint" -- "$BIN" key --target cpu-x86-64-v3 --s3-endpoint http://127.0.0.1:9 "$SMALL"
expect_grep "^$KEY_SMALL  $SMALL\$" "$WORK/out" "key through hlocache-full"
# Installed, hlocache-full lies in libexec: `cmake --install` of this build, then a command of each kind.
if command -v cmake >/dev/null && [[ -f "$(dirname "$BIN")/cmake_install.cmake" ]]; then
  cmake --install "$(dirname "$BIN")" --prefix "$WORK/prefix" >"$WORK/install.log" 2>&1 || fail "cmake --install: $(tail -3 "$WORK/install.log")"
  [[ ! -e "$WORK/prefix/bin/hlocache-full" ]] && pass || fail "hlocache-full installed into bin"
  expect_rc 0 "installed key" -- "$WORK/prefix/bin/hlocache" key --target cpu-x86-64-v3 "$SMALL"
  expect_grep "^$KEY_SMALL  $SMALL\$" "$WORK/out" "the installed hlocache keys alike"
  expect_rc 0 "installed serve --dry-run" -- "$WORK/prefix/bin/hlocache" serve --dry-run --dir "$WORK/srv"
  expect_grep "would serve" "$WORK/out" "the installed hlocache hands serve to hlocache-full"
fi

# Store maintenance: a directory that is not a store is refused, never created.
expect_rc 1 "stats of no store" -- "$BIN" stats --dir "$WORK/nostore"
expect_grep "no store at $WORK/nostore" "$WORK/err" "stats names the missing store"
[[ ! -e "$WORK/nostore" ]] && pass || fail "stats created a store"
mkdir -p "$WORK/plain"
expect_rc 1 "verify of a plain directory" -- "$BIN" verify --dir "$WORK/plain"
[[ -z "$(ls -A "$WORK/plain")" ]] && pass || fail "verify wrote into a plain directory"
expect_rc 2 "gc with a bad size" -- "$BIN" gc --dir "$WORK/plain" --max-size 10Q
expect_grep "unknown size unit" "$WORK/err" "gc explains the size"
expect_rc 2 "gc without a size" -- "$BIN" gc --dir "$WORK/plain"

# compile and run: an artifact from a worker process, a run checked against the interpreter.
CORE="$CORPUS/hlo/xla__backends__cpu__benchmarks__hlo__layer_norm_1x4096x768_bf16.hlo"
expect_rc 0 "compile" -- "$BIN" compile "$CORE" -o "$WORK/small.hloart"
expect_grep "^v1-[0-9a-f]{32}  $WORK/small.hloart  [0-9]+ bytes  [0-9.]+ s\$" "$WORK/out" "compile line"
[[ "$(head -c 8 "$WORK/small.hloart" | tail -c 7)" == "HLOART"$'\n' || -s "$WORK/small.hloart" ]] && pass || fail "compile wrote no artifact"
expect_rc 0 "run --check" -- "$BIN" run --check "$CORE"
expect_grep "^check: match" "$WORK/out" "run --check matches"
expect_grep "^result 0  bf16\[1,4096,768\]  xxh3=[0-9a-f]{32}$" "$WORK/out" "run prints result shapes"
expect_rc 0 "run a compiled artifact" -- "$BIN" run --artifact "$WORK/small.hloart" --inputs zeros "$CORE"
cp "$WORK/out" "$WORK/run_zeros"
expect_rc 0 "run again" -- "$BIN" run --artifact "$WORK/small.hloart" --inputs zeros "$CORE"
cmp -s <(grep '^result' "$WORK/out") <(grep '^result' "$WORK/run_zeros") && pass || fail "runs on the same inputs differ"
printf 'ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT s = f32[4] custom-call(a), custom_call_target="lapack_sgetrf"\n}\n' >"$WORK/custom.hlo"
expect_rc 1 "compile an unsupported op" -- "$BIN" compile "$WORK/custom.hlo"
expect_grep "custom.hlo:3: the CPU code generator does not support 'custom-call'" "$WORK/err" "unsupported op named with its line"
expect_rc 1 "compile elided constants" -- "$BIN" compile "$ELIDED"
expect_grep "cannot be compiled" "$WORK/err" "elided constants cannot be compiled"
printf 'ENTRY e {\n  a = f32[4] parameter(0)\n  ROOT s = f32[4] add(a, b)\n}\n' >"$WORK/bad.hlo"
expect_rc 1 "compile a parse error" -- "$BIN" compile "$WORK/bad.hlo"
expect_grep "bad.hlo:3:[0-9]+: error: undefined operand" "$WORK/err" "parse error located"
expect_rc 1 "run with bad inputs" -- "$BIN" run --inputs nope --artifact x "$CORE"
expect_grep "must be random or zeros" "$WORK/err" "run explains --inputs"
# An f32 dot calls the host's BLAS, which the loader provides: a host without one refuses the
# artifact at load, with a line naming what is missing.
printf 'ENTRY e {\n  a = f32[8,16] parameter(0)\n  b = f32[4,16] parameter(1)\n  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n' >"$WORK/dot.hlo"
expect_rc 0 "compile an f32 dot" -- "$BIN" compile "$WORK/dot.hlo" -o "$WORK/dot.hloart"
expect_rc 0 "run an f32 dot through BLAS" -- "$BIN" run --artifact "$WORK/dot.hloart" --check "$WORK/dot.hlo"
expect_grep "^check: match" "$WORK/out" "the BLAS dot matches the interpreter"
expect_rc 1 "run an f32 dot without BLAS" -- env HLOCACHE_BLAS_LIBRARY=/nonexistent/libblas.so.3 \
  "$BIN" run --artifact "$WORK/dot.hloart" "$WORK/dot.hlo"
expect_grep "calls BLAS: no BLAS library with cblas_sgemm on this host" "$WORK/err" "a host without BLAS is told so"
rm -f "$WORK/dot.hloart"
# GPU targets: built by NVRTC on this machine, which has no GPU; running says what is missing.
expect_rc 1 "compile without NVRTC" -- env HLOCACHE_NVRTC_LIBRARY=/nonexistent/libnvrtc.so \
  "$BIN" compile --target cuda-sm_90 "$CORE" -o "$WORK/gpu.hloart"
expect_grep "NVRTC is missing" "$WORK/err" "a cuda target without NVRTC says so"
if "$BIN" key --target cuda-sm_90 "$CORE" >/dev/null 2>&1 && ldconfig -p | grep -q libnvrtc; then
  expect_rc 0 "compile for cuda-sm_90" -- "$BIN" compile --target cuda-sm_90 "$CORE" -o "$WORK/gpu.hloart"
  [[ -s "$WORK/gpu.hloart" ]] && pass || fail "no GPU artifact"
  expect_rc 1 "run a GPU artifact without a driver" -- env HLOCACHE_CUDA_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 \
    "$BIN" run --artifact "$WORK/gpu.hloart" --check "$CORE"
  expect_grep "no CUDA driver" "$WORK/err" "running without a driver says so"
  if "$BIN" run --target cuda-sm_90 --check "$CORE" >"$WORK/out" 2>"$WORK/err"; then
    expect_grep "^check: match" "$WORK/out" "a GPU run matches the interpreter"
  else
    expect_grep "no (CUDA driver|GPU)" "$WORK/err" "running without a GPU says so"
  fi
  # The runtime's answers to what a driver says, through a stand-in driver.
  cc -shared -fPIC -o "$WORK/libcuda_fake.so" "$(dirname "$0")/data/fake_libcuda.c" && pass || fail "build the fake driver"
  expect_rc 1 "run with no GPU" -- env HLOCACHE_CUDA_DRIVER_LIBRARY="$WORK/libcuda_fake.so" FAKE_CUDA=nodevice \
    "$BIN" run --artifact "$WORK/gpu.hloart" "$CORE"
  expect_grep "^hlocache run: no GPU: " "$WORK/err" "no GPU is said as such"
  expect_rc 1 "run on another GPU" -- env HLOCACHE_CUDA_DRIVER_LIBRARY="$WORK/libcuda_fake.so" FAKE_CUDA=sm_86 \
    "$BIN" run --artifact "$WORK/gpu.hloart" "$CORE"
  expect_grep "this executable is for sm_90; GPU 0 \(Fake GPU\) is sm_86" "$WORK/err" "a GPU of another architecture is named"
  expect_rc 1 "run where the driver refuses the cubin" -- env HLOCACHE_CUDA_DRIVER_LIBRARY="$WORK/libcuda_fake.so" \
    FAKE_CUDA=sm_90 FAKE_CUDA_LOG="$WORK/driver.log" "$BIN" run --artifact "$WORK/gpu.hloart" "$CORE"
  expect_grep "cuModuleLoadData: device kernel image is invalid" "$WORK/err" "the driver's error is passed on"
  [[ $(grep -c '^retain$' "$WORK/driver.log") -eq 1 && $(grep -c '^release$' "$WORK/driver.log") -eq 1 ]] && pass || fail "the context is released after a failure: $(cat "$WORK/driver.log")"
  expect_rc 1 "compile an unsupported op for a GPU" -- "$BIN" compile --target cuda-sm_80 "$WORK/custom.hlo"
  expect_grep "custom.hlo:3: the CUDA code generator does not support 'custom-call'" "$WORK/err" "GPU: unsupported op named"
  rm -f "$WORK/gpu.hloart"
fi
[[ -z "$(ls -a "$WORK" | grep -E '\.tmp\.|\.hloart$' | grep -v '^small.hloart$')" ]] && pass || fail "compile left files behind: $(ls "$WORK")"

echo "cli: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
