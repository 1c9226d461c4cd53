#!/usr/bin/env bash
# Runs the 256 MiB round-trip test again and again beside load that starves the server of CPU
# and disk: busy loops, a writer that forces a sync per megabyte, and (as root, where the kernel
# has a block-I/O controller) a slow disk: the test and its server write to the disk at most
# SLOW_DISK_MBPS. Prints one line per run, the client's error and the server's slowest store
# writes for each failure, and a summary; exits 1 if any run failed.
#
#   tests/stress_upload.sh [RUNS] [BUILD_DIR]      (defaults: 20, build)
#
# Environment: BURNERS (default 2) busy loops; DISK_WRITER=0 leaves the disk writer out;
# SLOW_DISK_MBPS (default 4; 0 for none) caps synced writes to the test directory's disk;
# FILTER picks other tests of server_integration_test; KEEP_DIR=DIR keeps each failed run's log
# and trace (HLOCACHE_TRACE_FILE: both sides' I/O and the store's write times) there.
set -uo pipefail
runs=${1:-20}
build=${2:-build}
burners=${BURNERS:-2}
slow_mbps=${SLOW_DISK_MBPS:-4}
filter=${FILTER:-ServerTest.RoundTripsFromOneByteTo256MiB}
binary="$build/tests/server_integration_test"
if [[ ! -x $binary ]]; then
  echo "stress_upload: no $binary (build first)" >&2
  exit 1
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/hlocache-stress.XXXXXX")
pids=()
cgroup=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  [[ -n $cgroup ]] && rmdir "$cgroup" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT

for ((i = 0; i < burners; ++i)); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
if [[ ${DISK_WRITER:-1} != 0 ]]; then
  # On the disk the tests use, so its syncs queue behind these.
  sh -c "while :; do dd if=/dev/zero of='$scratch/dd' bs=1M count=512 oflag=sync 2>/dev/null; done" &
  pids+=($!)
fi

# The slow disk: a block-I/O cgroup (v1 blkio or v2 io) that caps the writes of what runs in it.
# Synced writes (LevelDB's table flushes, its log syncs) are throttled; what the page cache
# absorbs is not, as on a real disk that is slow to sync.
run_prefix=()
disk_note="no slow disk"
if [[ $slow_mbps != 0 ]]; then
  dev=$(stat -c '%Hd:%Ld' "$scratch")
  [[ -e /sys/dev/block/$dev/partition ]] && dev=$(basename "$(readlink -f "/sys/dev/block/$dev/..")" |
    xargs -I{} cat /sys/class/block/{}/dev)
  bps=$((slow_mbps * 1024 * 1024))
  if [[ -w /sys/fs/cgroup/blkio ]]; then
    cgroup=/sys/fs/cgroup/blkio/hlocache-stress-$$
    mkdir -p "$cgroup" && echo "$dev $bps" >"$cgroup/blkio.throttle.write_bps_device"
  elif [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] && grep -qw io /sys/fs/cgroup/cgroup.controllers; then
    cgroup=/sys/fs/cgroup/hlocache-stress-$$
    echo +io >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
    mkdir -p "$cgroup" && echo "$dev wbps=$bps" >"$cgroup/io.max"
  fi
  if [[ -n $cgroup && -d $cgroup ]]; then
    run_prefix=(sh -c "echo \$\$ > '$cgroup/cgroup.procs' && exec \"\$@\"" sh)
    disk_note="disk writes capped at $slow_mbps MiB/s"
  else
    cgroup=""
    disk_note="no slow disk (no writable block-I/O cgroup here)"
  fi
fi

passed=0
for ((run = 1; run <= runs; ++run)); do
  log="$scratch/run-$run.log"
  trace="$scratch/run-$run.trace"
  start=$(date +%s.%N)
  if HLOCACHE_TRACE_FILE="$trace" timeout 900 "${run_prefix[@]}" "$binary" \
    --gtest_filter="$filter" >"$log" 2>&1; then
    passed=$((passed + 1))
    verdict=pass
  else
    verdict=FAIL
  fi
  slowest=""
  if [[ -s $trace ]]; then
    slowest=$(grep -o 'store-write [0-9]* ms' "$trace" | awk '{print $2}' | sort -n | tail -1)
    [[ -n $slowest ]] && slowest=", slowest chunk write $slowest ms"
  fi
  printf 'run %2d: %s in %.1f s%s\n' "$run" "$verdict" "$(echo "$(date +%s.%N) - $start" | bc)" "$slowest"
  if [[ $verdict == FAIL ]]; then
    grep -E 'Failure|Expected|Actual|payload|cut short|hlocache:' "$log" | head -12 | sed 's/^/    /'
    [[ -s $trace ]] && grep -E 'fail|error|deadline|timeout|reply|test client' "$trace" | tail -8 | sed 's/^/    trace: /'
    if [[ -n ${KEEP_DIR:-} ]]; then
      mkdir -p "$KEEP_DIR" && cp "$log" "$trace" "$KEEP_DIR/" 2>/dev/null
    fi
  fi
done
echo "stress_upload: $passed of $runs passed ($burners busy loops, disk writer ${DISK_WRITER:-1}, $disk_note)"
[[ $passed == "$runs" ]]
