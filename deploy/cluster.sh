#!/usr/bin/env bash
# Starts, stops and shows a static ringcache cluster of separate processes on 127.0.0.1:
# data nodes, cache nodes and a gateway, described by a static cluster file.
#
#   deploy/cluster.sh up [--cluster-file FILE] [--dir DIR] [--cache-nodes K] [--data-nodes M]
#                        [--base-port P] [--ssd-size S] [--ram-size R] [--hdd-emulation]
#                        [--replication N] [--create-vdi NAME:SIZE]... [--etcd]
#   deploy/cluster.sh status [--dir DIR]
#   deploy/cluster.sh down   [--dir DIR]
#   deploy/cluster.sh kill   ROLE ID... [--dir DIR]   kill -9 daemons, wait until they are gone
#   deploy/cluster.sh start  ROLE ID... [--dir DIR]   (re)start daemons, wait until they are ready
#
# Without --cluster-file, `up` writes DIR/cluster.yaml for K cache nodes and M data nodes with
# ports from P (default 17000): data node i gRPC P+100+i / metrics P+200+i, cache node i gRPC
# P+300+i / metrics P+400+i, gateway NBD P+9 (10809 with --base-port 10800), admin P+10,
# metrics P+11; the default replication of new VDIs is N (default min(M, 3)). ROLE is datanode,
# cachenode or gateway; `start` runs a daemon from the same cluster file and state as `up` did.
# With --etcd (cluster mode, membership/README.md) `up` also starts etcd on 127.0.0.1:P-1 (peer
# port P-2, data under DIR/etcd), names it in the cluster file (etcd_endpoints) so that every
# daemon registers there and the gateway follows the cache nodes; `down` stops it last.
# State, logs and pids live under DIR (default ./ringcache-cluster).
# Binaries come from $RINGCACHE_BIN (default ./build/<dir>).
set -euo pipefail

cmd=${1:-}
shift || true
DIR=./ringcache-cluster
FILE=""
K=3
M=3
BASE=17000
SSD=256MiB
RAM=32MiB
HDD=""
REPL=""
ETCD=""
CREATE=()
POS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster-file) FILE=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --cache-nodes) K=$2; shift 2 ;;
    --data-nodes) M=$2; shift 2 ;;
    --base-port) BASE=$2; shift 2 ;;
    --ssd-size) SSD=$2; shift 2 ;;
    --ram-size) RAM=$2; shift 2 ;;
    --hdd-emulation) HDD="--hdd-emulation"; shift ;;
    --replication) REPL=$2; shift 2 ;;
    --etcd) ETCD=1; shift ;;
    --create-vdi) CREATE+=(--create-vdi "$2"); shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    -*) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
    *) POS+=("$1"); shift ;;
  esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${RINGCACHE_BIN:-$ROOT/build}
bin() {
  case "$1" in
    ringcache-datanode) echo "$BIN/datanode/ringcache-datanode" ;;
    ringcache-cachenode) echo "$BIN/cachenode/ringcache-cachenode" ;;
    ringcache-gateway) echo "$BIN/gateway/ringcache-gateway" ;;
  esac
}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
[ -n "$FILE" ] || FILE=$DIR/cluster.yaml

# Lists "role id" for every node of the cluster file (one flow mapping per line).
members() {
  sed -n 's/^ *- *{ *role: *\([a-z]*\), *id: *\([0-9]*\).*/\1 \2/p' "$FILE"
}

pidfile() { echo "$DIR/pids/$1-$2.pid"; }

# A process is alive if it exists and is not a zombie (killed daemons may linger unreaped when
# their parent shell is gone and the container's init does not reap).
alive() {
  local f
  f=$(pidfile "$1" "$2")
  [ -f "$f" ] || return 1
  local st
  st=$(ps -o stat= -p "$(cat "$f")" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st:0:1}" != Z ]
}

write_cluster_file() {
  {
    echo "# ringcache static cluster file (written by deploy/cluster.sh)"
    echo "data_dir: $DIR/state"
    echo "replication: ${REPL:-$(( M < 3 ? M : 3 ))}"
    echo "block_size: 4096"
    echo "nodes:"
    for i in $(seq 1 "$M"); do
      echo "  - {role: datanode, id: $i, listen: 127.0.0.1:$((BASE+100+i)), http_listen: 127.0.0.1:$((BASE+200+i))}"
    done
    for i in $(seq 1 "$K"); do
      echo "  - {role: cachenode, id: $i, listen: 127.0.0.1:$((BASE+300+i)), http_listen: 127.0.0.1:$((BASE+400+i)), ssd_bytes: $SSD, ram_bytes: $RAM}"
    done
    echo "  - {role: gateway, id: 1, nbd_listen: 127.0.0.1:$((BASE+9)), admin_listen: 127.0.0.1:$((BASE+10)), http_listen: 127.0.0.1:$((BASE+11))}"
  } > "$FILE"
}

# The etcd endpoint named by the cluster file (first of etcd_endpoints), or nothing.
etcd_endpoint() {
  sed -n 's/^etcd_endpoints: *//p' "$FILE" | cut -d, -f1 | tr -d ' "'
}

# Starts etcd for the cluster file's etcd_endpoints (adding 127.0.0.1:P-1 to the file first if it
# names none) unless it runs already, and waits until it answers.
start_etcd() {
  if ! grep -q '^etcd_endpoints:' "$FILE"; then
    echo "etcd_endpoints: 127.0.0.1:$((BASE-1))" >> "$FILE"
  fi
  local ep port
  ep=$(etcd_endpoint)
  port=${ep##*:}
  if alive etcd 0; then return 0; fi
  command -v etcd > /dev/null || { echo "cluster.sh: --etcd needs etcd (etcd-server)" >&2; exit 2; }
  etcd --name ringcache --data-dir "$DIR/etcd" --listen-client-urls "http://$ep" \
    --advertise-client-urls "http://$ep" --listen-peer-urls "http://127.0.0.1:$((port-1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((port-1))" \
    --initial-cluster "ringcache=http://127.0.0.1:$((port-1))" >> "$DIR/logs/etcd.log" 2>&1 &
  echo $! > "$(pidfile etcd 0)"
  for _ in $(seq 1 300); do
    if ETCDCTL_API=3 etcdctl --endpoints "$ep" --command-timeout=1s endpoint health \
        > /dev/null 2>&1; then
      return 0
    fi
    if ! alive etcd 0; then break; fi
    sleep 0.1
  done
  echo "cluster.sh: etcd on $ep did not come up; log:" >&2
  tail -20 "$DIR/logs/etcd.log" >&2
  exit 1
}

start_one() {  # role id
  local role=$1 id=$2 extra=()
  if alive "$role" "$id"; then return 0; fi
  if [ "$role" = datanode ] && [ -n "$HDD" ]; then extra+=("$HDD"); fi
  if [ "$role" = gateway ] && [ ${#CREATE[@]} -gt 0 ]; then extra+=("${CREATE[@]}"); fi
  rm -f "$DIR/ready/$role-$id.json"
  "$(bin "ringcache-$role")" --cluster "$FILE" --id "$id" --ready-file "$DIR/ready/$role-$id.json" \
    "${extra[@]}" >> "$DIR/logs/$role-$id.log" 2>&1 &
  echo $! > "$(pidfile "$role" "$id")"
}

wait_ready() {  # role id
  for _ in $(seq 1 600); do
    [ -f "$DIR/ready/$1-$2.json" ] && return 0
    if ! alive "$1" "$2"; then
      echo "cluster.sh: $1 $2 exited; log:" >&2
      tail -20 "$DIR/logs/$1-$2.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "cluster.sh: $1 $2 not ready after 60 s" >&2
  return 1
}

# Checks the positional arguments of kill/start: ROLE then at least one id of the cluster file.
role_ids() {
  if [ ${#POS[@]} -lt 2 ]; then
    echo "cluster.sh $cmd: want ROLE ID..." >&2
    exit 2
  fi
  local id
  for id in "${POS[@]:1}"; do
    if ! members | grep -qx "${POS[0]} $id"; then
      echo "cluster.sh $cmd: no ${POS[0]} $id in $FILE" >&2
      exit 2
    fi
  done
}

if [ ${#POS[@]} -gt 0 ] && [ "$cmd" != kill ] && [ "$cmd" != start ]; then
  echo "cluster.sh: unknown argument ${POS[0]}" >&2
  exit 2
fi

case "$cmd" in
  up)
    mkdir -p "$DIR/pids" "$DIR/logs" "$DIR/ready"
    [ -f "$FILE" ] || write_cluster_file
    if [ -n "$ETCD" ]; then start_etcd; fi
    for role in datanode cachenode gateway; do
      while read -r r id; do
        if [ "$r" = "$role" ]; then start_one "$r" "$id"; fi
      done < <(members)
      while read -r r id; do
        if [ "$r" = "$role" ]; then wait_ready "$r" "$id"; fi
      done < <(members)
    done
    "$0" status --dir "$DIR" --cluster-file "$FILE"
    ;;
  status)
    bad=0
    while read -r r id; do
      if alive "$r" "$id"; then
        echo "$r $id: up (pid $(cat "$(pidfile "$r" "$id")"), ready $(cat "$DIR/ready/$r-$id.json" 2>/dev/null | tr -d '\n'))"
      else
        echo "$r $id: down"
        bad=1
      fi
    done < <(members)
    if [ -f "$(pidfile etcd 0)" ]; then
      if alive etcd 0; then
        echo "etcd: up (pid $(cat "$(pidfile etcd 0)"), $(etcd_endpoint))"
      else
        echo "etcd: down"
        bad=1
      fi
    fi
    gw=$(grep -o 'nbd_listen: *[0-9.:]*' "$FILE" | head -1 | awk '{print $2}')
    echo "NBD: nbd://$gw/<vdi>   admin: $(grep -o 'admin_listen: *[0-9.:]*' "$FILE" | head -1 | awk '{print $2}')"
    exit $bad
    ;;
  kill)
    role_ids
    for id in "${POS[@]:1}"; do
      if alive "${POS[0]}" "$id"; then kill -9 "$(cat "$(pidfile "${POS[0]}" "$id")")"; fi
    done
    for id in "${POS[@]:1}"; do
      for _ in $(seq 1 100); do
        alive "${POS[0]}" "$id" || break
        sleep 0.05
      done
      if alive "${POS[0]}" "$id"; then
        echo "cluster.sh: ${POS[0]} $id still alive after kill -9" >&2
        exit 1
      fi
      echo "${POS[0]} $id: killed"
    done
    ;;
  start)
    role_ids
    for id in "${POS[@]:1}"; do start_one "${POS[0]}" "$id"; done
    for id in "${POS[@]:1}"; do
      wait_ready "${POS[0]}" "$id"
      echo "${POS[0]} $id: up (pid $(cat "$(pidfile "${POS[0]}" "$id")"))"
    done
    ;;
  down)
    for role in gateway cachenode datanode; do
      while read -r r id; do
        [ "$r" = "$role" ] || continue
        if alive "$r" "$id"; then kill "$(cat "$(pidfile "$r" "$id")")"; fi
      done < <(members)
      for _ in $(seq 1 100); do
        any=0
        while read -r r id; do
          if [ "$r" = "$role" ] && alive "$r" "$id"; then any=1; fi
        done < <(members)
        [ $any = 0 ] && break
        sleep 0.1
      done
    done
    if alive etcd 0; then  # last: the daemons revoked their leases in it
      kill "$(cat "$(pidfile etcd 0)")"
      for _ in $(seq 1 100); do
        alive etcd 0 || break
        sleep 0.1
      done
    fi
    rm -f "$DIR"/pids/*.pid
    echo "cluster down"
    ;;
  *)
    sed -n '2,22p' "$0"
    exit 2
    ;;
esac
