#!/usr/bin/env bash
# A throwaway Ceph cluster for tests: one monitor, two BlueStore OSDs on files, and a RADOS
# Gateway (S3) on a loopback port, all under one directory, run as the calling user (root).
# The gateway listens on $CEPH_RGW_ADDRESS instead where it is set (a test whose hosts live in
# network namespaces runs the cluster in one of its own, and names that namespace's address).
#
#   ceph_cluster.sh start DIR [RGW_PORT]   starts it, with a bucket hlocache-test; writes DIR/env
#                                          (the S3 endpoint and keys, as AWS_* variables)
#   ceph_cluster.sh stop DIR               stops every daemon it started (SIGTERM, then KILL)
#   ceph_cluster.sh kill-osd DIR ID        SIGKILLs one OSD; start-osd DIR ID starts it again
#   ceph_cluster.sh stop-rgw DIR / start-rgw DIR
#
# Authentication between daemons is off (auth ... required = none): the cluster lives for one
# test on loopback. The gateway still checks S3 signatures against the user it creates.
# Replication: size 2, min size 1, so one OSD may die without losing a write.
set -euo pipefail

cmd=${1:?usage: ceph_cluster.sh start|stop|kill-osd|start-osd|stop-rgw|start-rgw DIR}
D=${2:?a directory}
D=$(realpath -m "$D")
CONF="$D/ceph.conf"

need() {
  for p in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
    command -v "$p" >/dev/null || { echo "ceph_cluster: $p is not installed" >&2; exit 77; }
  done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local secs=$1 what=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= end)); then echo "ceph_cluster: $what not ready after ${secs}s" >&2; return 1; fi
    sleep 0.2
  done
}

start_osd() {
  ceph-osd -c "$CONF" -i "$1" 2>>"$D/log/start.osd.$1.log"
}

start_rgw() {
  radosgw -c "$CONF" -n client.rgw.gw 2>>"$D/log/start.rgw.log"
  wait_for 60 "the gateway" curl -sf -o /dev/null "http://$(cat "$D/rgw_address"):$(cat "$D/rgw_port")/"
}

case "$cmd" in
start)
  need
  mkdir -p "$D"/{run,log,mon.a,rgw}
  MON_PORT=$(free_port)
  RGW_PORT=${3:-$(free_port)}
  RGW_ADDRESS=${CEPH_RGW_ADDRESS:-127.0.0.1}
  echo "$RGW_PORT" > "$D/rgw_port"
  echo "$RGW_ADDRESS" > "$D/rgw_address"
  FSID=$(cat /proc/sys/kernel/random/uuid)
  cat > "$CONF" <<CONF
[global]
fsid = $FSID
mon host = 127.0.0.1:$MON_PORT
mon initial members = a
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
ms mon client mode = crc
ms client mode = crc
ms service mode = crc
ms cluster mode = crc
ms mon service mode = crc
ms mon cluster mode = crc
ms bind ipv6 = false
run dir = $D/run
admin socket = $D/run/\$name.asok
pid file = $D/run/\$name.pid
log file = $D/log/\$name.log
keyring = $D/keyring
osd pool default size = 2
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool delete = true
mon data avail warn = 1
mon data avail crit = 0
mon warn on pool no redundancy = false
osd objectstore = bluestore
bluestore block create = true
bluestore block size = 2147483648
bluestore fsck on mkfs = false
osd memory target = 536870912
bluestore cache autotune = false
bluestore cache size = 67108864
osd op num shards = 1
osd op num threads per shard = 2
osd heartbeat grace = 6
mon osd min down reporters = 1
osd heartbeat interval = 2
[mon.a]
mon data = $D/mon.a
[osd]
osd data = $D/osd.\$id
[client.rgw.gw]
rgw frontends = beast endpoint=$RGW_ADDRESS:$RGW_PORT
rgw data = $D/rgw
rgw thread pool size = 32
CONF
  : > "$D/keyring"
  monmaptool --create --add a "127.0.0.1:$MON_PORT" --fsid "$FSID" "$D/monmap" >/dev/null
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$D/monmap" 2>"$D/log/mkfs.mon.log"
  ceph-mon -c "$CONF" -i a
  wait_for 30 "the monitor" ceph -c "$CONF" --connect-timeout 5 mon stat
  for id in 0 1; do
    uuid=$(cat /proc/sys/kernel/random/uuid)
    ceph -c "$CONF" osd new "$uuid" "$id" >/dev/null
    mkdir -p "$D/osd.$id"
    ceph-osd -c "$CONF" -i "$id" --mkfs --osd-uuid "$uuid" 2>"$D/log/mkfs.osd.$id.log"
    start_osd "$id"
  done
  wait_for 60 "two OSDs" bash -c "ceph -c '$CONF' osd stat 2>/dev/null | grep -q '2 up'"
  start_rgw
  AK=HLOCACHETESTKEY$(od -An -N4 -tx4 /dev/urandom | tr -d ' ' | tr a-f A-F)
  SK=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
  radosgw-admin -c "$CONF" user create --uid=hlocache --display-name=hlocache \
    --access-key="$AK" --secret-key="$SK" >/dev/null
  # The bucket the tests use (path-style, as a custom endpoint is addressed).
  curl -sf -X PUT -H 'Content-Length: 0' -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
    --aws-sigv4 aws:amz:us-east-1:s3 --user "$AK:$SK" "http://$RGW_ADDRESS:$RGW_PORT/hlocache-test"
  cat > "$D/env" <<ENV
AWS_ENDPOINT_URL_S3=http://$RGW_ADDRESS:$RGW_PORT
AWS_ACCESS_KEY_ID=$AK
AWS_SECRET_ACCESS_KEY=$SK
AWS_REGION=us-east-1
ENV
  echo "ceph_cluster: up in ${SECONDS}s, S3 at http://$RGW_ADDRESS:$RGW_PORT"
  ;;
stop)
  for f in "$D"/run/*.pid; do
    [ -e "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    alive=0
    for f in "$D"/run/*.pid; do
      [ -e "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1
    done
    ((alive)) || break
    sleep 0.2
  done
  for f in "$D"/run/*.pid; do
    [ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
  done
  ;;
kill-osd) kill -9 "$(cat "$D/run/osd.${3:?an OSD id}.pid")" ;;
start-osd)
  start_osd "${3:?an OSD id}"
  wait_for 120 "two OSDs" bash -c "ceph -c '$CONF' osd stat 2>/dev/null | grep -q '2 up'"
  ;;
stop-rgw)
  pid=$(cat "$D/run/client.rgw.gw.pid")
  kill "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  ;;
start-rgw) start_rgw ;;
*) echo "ceph_cluster: unknown command $cmd" >&2; exit 2 ;;
esac
