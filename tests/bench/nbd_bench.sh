#!/usr/bin/env bash
# NBD benchmark of ringcache against anchors measured in the same run (issue 4 §7; results and
# method in docs/benchmarks.md). Not a ctest test: it prints numbers, it asserts nothing.
#
#   Part A — raw speed with the working set cached. fio (ioengine=nbd) runs 4K random read QD1,
#     4K random read QD32, 1M sequential read QD4, 4K random write QD32 and QD1 and 1M
#     sequential write QD4 over a 256 MiB working set against
#       qemu-nbd     qemu-nbd serving a raw file in the same temp dir (same disk), page cache on;
#       qemu-nbd-wt  the same with --cache=writethrough (every write durable before its reply,
#                    as ringcache's writes are), for the write workloads only;
#       ringcache-local   gateway + 2 cache nodes + 3 data nodes in one process;
#       cluster           the same topology as separate processes (deploy/cluster.sh).
#     The working set is written once, destaged (dirty bytes wait to reach 0) and read once, so
#     every later read is a cache hit; the block hit % column shows it.
#   Part B — data nodes with HDD emulation (5 ms per request, one FIFO spindle each). A 512 MiB
#     VDI on 2 cache nodes of 64 MiB SSD + 16 MiB RAM (160 MiB of cache) gets a Zipf(1.2) workload
#     whose hot set fits the cache: first in passthrough mode (no caching: the baseline), then
#     in writeback mode after a warm-up run of the same workload.
#   Part T — the cost of TLS (docs/security.md): the Part A workloads on qemu-nbd, ringcache-local
#     and the cluster, each once in plaintext and once under TLS, back to back in the same run:
#     qemu-nbd --tls-creds (x509), ringcache-local --tls-dir (NBD STARTTLS required), and
#     `cluster.sh up --tls` (NBD, gRPC between the daemons and the block data port all under
#     mutual TLS; static membership). fio's nbd engine connects with nbds:// and a client
#     certificate (tls_client_home). The ratio column is TLS / plaintext of the same server.
#
# Usage: tests/bench/nbd_bench.sh [--quick] [--only A|B|T|...] [--out DIR] [--runtime S] [--keep]
#                                 [--ram-size SIZE]
#   --quick      3 s runs and a short warm-up (a smoke run; numbers are noisy)
#   --only PARTS the parts to run, e.g. A, T or AB (default ABT)
#   --out DIR    where the raw fio JSON, logs, results.tsv and report.md go
#                (default /tmp/nbd-bench-results.<time>)
#   --runtime S  seconds per measured run (default 12)
#   --keep       keep the temp dir with the servers' data and logs
#   --ram-size S Part A RAM tier per cache node (default 64MiB, ringcache-local's default; for
#                what-if runs such as 0 = SSD tier only)
#   --b-replication N  Part B VDI replication (default 3, the product default)
# Environment: RINGCACHE_BIN (default <repo>/build) with tools/ringcache-local,
#   tools/ctl/ringcachectl (Part B), datanode/, cachenode/ and gateway/ daemons (cluster).
#   NBD_BENCH_SERVER_ENV: extra VAR=VALUE words put in the environment of the ringcache servers
#   only (what-if runs, e.g. LD_PRELOAD=...).
# Every process it starts is stopped on exit (also on Ctrl-C); ports come from a random free
# range; scratch data lives in a mktemp dir under /tmp.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${RINGCACHE_BIN:-$ROOT/build}
REPORT="python3 $ROOT/tests/bench/nbd_bench_report.py"
LOCAL_BIN=$BIN/tools/ringcache-local
CTL_BIN=$BIN/tools/ctl/ringcachectl

QUICK=0
ONLY=ABT
OUT=""
RUNTIME=""
KEEP=0
RAM_A=64MiB
B_REPL=3
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; shift ;;
    --only) ONLY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --runtime) RUNTIME=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --ram-size) RAM_A=$2; shift 2 ;;
    --b-replication) B_REPL=$2; shift 2 ;;
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    *) echo "nbd_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $ONLY =~ ^[ABT]+$ ]] || { echo "nbd_bench.sh: --only takes parts A, B, T (e.g. AT)" >&2; exit 2; }
if [ -z "$RUNTIME" ]; then RUNTIME=$([ $QUICK = 1 ] && echo 3 || echo 12); fi
WARM_B=$([ $QUICK = 1 ] && echo 10 || echo 45)   # Part B warm-up seconds
WS=256M          # Part A working set (fits 2 x (1 GiB SSD + 64 MiB RAM) many times over)
MULTI_WS=64M     # Part A, 4 VDIs at once (cluster): each VDI's size and working set
B_VDI_SIZE=512M  # Part B VDI
B_SSD=64MiB      # Part B cache per node (x2 nodes)
B_RAM=16MiB

for tool in fio qemu-nbd python3 curl ss; do
  command -v "$tool" > /dev/null || { echo "nbd_bench.sh: $tool is not installed" >&2; exit 1; }
done
[ -x "$LOCAL_BIN" ] || { echo "nbd_bench.sh: $LOCAL_BIN missing (build ringcache-local)" >&2; exit 1; }
if [[ $ONLY == *[BT]* ]] && [ ! -x "$CTL_BIN" ]; then
  echo "nbd_bench.sh: Parts B and T need $CTL_BIN (cache modes, certificates, flush)" >&2
  exit 1
fi

WORK=$(mktemp -d /tmp/nbd-bench.XXXXXX)
[ -n "$OUT" ] || OUT=/tmp/nbd-bench-results.$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RESULTS=$OUT/results.tsv
printf 'part\tworkload\tsystem\tiops\tp50_us\tp99_us\tblock_reads\tblock_hits\tserver_cpu_us_per_op\tfio_cpu_pct\tload1\tother_cpu_pct\n' > "$RESULTS"

# Replaces the calling (background) subshell by a ringcache server with NBD_BENCH_SERVER_ENV
# added to its environment, so that $! is the server's own pid.
# shellcheck disable=SC2086
server_exec() { exec env ${NBD_BENCH_SERVER_ENV:-} "$@"; }

# ---- processes and clean-up --------------------------------------------------------------------
PIDS=()          # servers started in the background, stopped by stop_pid / cleanup
FIO_PID=""       # the fio being waited for
FIO_TLS_HOME=""  # Part T: the home of a TLS fio (tls_client_home), empty for plaintext
CLUSTER_DIR=""   # set while a cluster is up
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$FIO_PID" ]; then stop_pid "$FIO_PID"; fi
  for p in "${PIDS[@]}"; do stop_pid "$p"; done
  if [ -n "$CLUSTER_DIR" ]; then
    RINGCACHE_BIN=$BIN "$ROOT/deploy/cluster.sh" down --dir "$CLUSTER_DIR" > /dev/null 2>&1 || true
  fi
  if [ $KEEP = 1 ]; then echo "scratch kept in $WORK"; else rm -rf "$WORK"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# True if the process exists and is not a zombie (a crashed child stays one until reaped).
alive() {
  local st
  st=$(ps -o stat= -p "$1" 2> /dev/null) || return 1
  [ -n "$st" ] && [ "${st:0:1}" != Z ]
}

# Stops one process this script started: SIGTERM, then SIGKILL after 10 s.
stop_pid() {
  local p=$1
  kill -0 "$p" 2> /dev/null || return 0
  kill -TERM "$p" 2> /dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$p" 2> /dev/null || break
    sleep 0.1
  done
  kill -KILL "$p" 2> /dev/null || true
  wait "$p" 2> /dev/null || true
  local keep=()
  for q in "${PIDS[@]}"; do [ "$q" = "$p" ] || keep+=("$q"); done
  PIDS=("${keep[@]+"${keep[@]}"}")
}

# Picks a base port B such that nothing listens on [B, B+999].
pick_base() {
  for _ in $(seq 1 50); do
    local b=$(( (20 + RANDOM % 40) * 1000 ))
    if [ -z "$(ss -Htln "( sport >= :$b and sport <= :$((b + 999)) )" 2> /dev/null)" ]; then
      echo "$b"
      return 0
    fi
  done
  echo "nbd_bench.sh: no free port range found" >&2
  return 1
}
BASE=$(pick_base)

wait_port() {  # port pid
  for _ in $(seq 1 300); do
    if ss -Htln "( sport = :$1 )" 2> /dev/null | grep -q .; then return 0; fi
    kill -0 "$2" 2> /dev/null || { echo "nbd_bench.sh: server exited during start-up" >&2; return 1; }
    sleep 0.1
  done
  echo "nbd_bench.sh: port $1 not listening after 30 s" >&2
  return 1
}

log() { echo "[$(date +%T)] $*"; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# ---- fio ---------------------------------------------------------------------------------------
# Runs fio once. Arguments: json-name uri rw bs iodepth [extra fio options...]. Time-based runs
# pass --time_based --runtime themselves.
fio_run() {
  local name=$1 uris=$2 rw=$3 bs=$4 qd=$5 rc=0 i=0 u
  shift 5
  # One job per URI (a space-separated list), reported as one group.
  local jobs=()
  for u in $uris; do
    i=$((i + 1))
    jobs+=(--name="$name-$i" --ioengine=nbd --uri="$u" --rw="$rw" --bs="$bs" --iodepth="$qd"
           --norandommap --randrepeat=0 "$@")
  done
  # In the background and waited for, so that a signal interrupts the wait at once (cleanup
  # then stops fio too). With FIO_TLS_HOME (Part T) fio runs as a TLS client (tls_client_home).
  local run=() output=$OUT/$name.json
  if [ -n "${FIO_TLS_HOME:-}" ]; then
    output=$FIO_TLS_HOME/out/$name.json
    run=(env HOME="$FIO_TLS_HOME")
    [ "$(id -u)" != 0 ] || run=(setpriv --reuid=nobody --regid=nogroup --clear-groups "${run[@]}")
  fi
  "${run[@]}" fio --group_reporting --output-format=json --output="$output" "${jobs[@]}" \
    > "$OUT/$name.stdout" 2>&1 &
  FIO_PID=$!
  wait "$FIO_PID" || rc=$?
  FIO_PID=""
  [ "$output" = "$OUT/$name.json" ] || mv -f "$output" "$OUT/$name.json" 2> /dev/null || true
  if [ $rc != 0 ]; then
    echo "nbd_bench.sh: fio $name failed (exit $rc):" >&2
    grep -v 'io_u error' "$OUT/$name.stdout" | tail -5 >&2 || true
    for p in "${PIDS[@]+"${PIDS[@]}"}"; do
      alive "$p" || echo "nbd_bench.sh: server pid $p has died; see the logs in $OUT" >&2
    done
    return 1
  fi
}

# Measures one workload and appends a results line. Arguments:
#   part workload system uri rw bs qd size metrics-vdi "metrics-urls" "server-pids" [extra...]
measure() {
  local part=$1 wl=$2 sys=$3 uri=$4 rw=$5 bs=$6 qd=$7 size=$8 vdi=$9 urls=${10} pids=${11}
  shift 11
  local name="$part-$wl-$sys" m0="" m1="" s0 s1 c0 c1 w0 w1 ld
  ld=$(load1)
  # shellcheck disable=SC2086
  if [ -n "$urls" ]; then m0=$($REPORT metrics "$vdi" $urls); fi
  # shellcheck disable=SC2086
  read -r s0 c0 < <($REPORT cputicks $pids)
  w0=$(date +%s.%N)
  fio_run "$name" "$uri" "$rw" "$bs" "$qd" --size="$size" --time_based --runtime="$RUNTIME" \
    --thread "$@"
  w1=$(date +%s.%N)
  # shellcheck disable=SC2086
  read -r s1 c1 < <($REPORT cputicks $pids)
  # shellcheck disable=SC2086
  if [ -n "$urls" ]; then m1=$($REPORT metrics "$vdi" $urls); fi
  local iops p50 p99 fcpu scpu other reads="-" hits="-"
  read -r iops p50 p99 fcpu scpu other < <($REPORT fio "$OUT/$name.json" $((s1 - s0)) \
    $((c1 - c0)) "$(awk "BEGIN{print $w1 - $w0}")")
  if [ -n "$urls" ]; then
    local r0 hr0 hs0 r1 hr1 hs1
    read -r r0 hr0 hs0 _ _ <<< "$m0"
    read -r r1 hr1 hs1 _ _ <<< "$m1"
    reads=$((r1 - r0))
    hits=$((hr1 + hs1 - hr0 - hs0))
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$part" "$wl" "$sys" "$iops" \
    "$p50" "$p99" "$reads" "$hits" "$scpu" "$fcpu" "$ld" "$other" >> "$RESULTS"
  log "  $wl on $sys: $iops IOPS, p50 $p50 µs, p99 $p99 µs (block reads $reads, hits $hits, other CPU $other%)"
}

# Waits until the VDI has no dirty bytes left on any cache node (idle destage), up to 300 s.
wait_clean() {  # vdi urls...
  local vdi=$1
  shift
  for _ in $(seq 1 600); do
    local dirty
    dirty=$($REPORT metrics "$vdi" "$@" | awk '{print $5}')
    [ "$dirty" = 0 ] && return 0
    sleep 0.5
  done
  echo "nbd_bench.sh: $vdi still has dirty bytes after 300 s" >&2
  return 1
}

# Runs the Part A workloads against one system. Arguments: system uri vdi "urls" "pids" [part]
part_a_workloads() {
  local sys=$1 uri=$2 vdi=$3 urls=$4 pids=$5 part=${6:-A}
  measure "$part" randread-4k-qd1 "$sys" "$uri" randread 4k 1 $WS "$vdi" "$urls" "$pids"
  measure "$part" randread-4k-qd32 "$sys" "$uri" randread 4k 32 $WS "$vdi" "$urls" "$pids"
  measure "$part" seqread-1m-qd4 "$sys" "$uri" read 1M 4 $WS "$vdi" "$urls" "$pids"
  measure "$part" randwrite-4k-qd32 "$sys" "$uri" randwrite 4k 32 $WS "$vdi" "$urls" "$pids"
  # Each write workload starts on a clean cache (where its metrics are known): else it runs
  # beside the destage of the one before (12 s of QD32 writes leave ~150 MiB dirty), and its
  # latency measures that contention, not the write path.
  # shellcheck disable=SC2086
  [ -z "$urls" ] || wait_clean "$vdi" $urls
  measure "$part" randwrite-4k-qd1 "$sys" "$uri" randwrite 4k 1 $WS "$vdi" "$urls" "$pids"
  # shellcheck disable=SC2086
  [ -z "$urls" ] || wait_clean "$vdi" $urls
  measure "$part" seqwrite-1m-qd4 "$sys" "$uri" write 1M 4 $WS "$vdi" "$urls" "$pids"
}

# Fills the working set (1M sequential writes), runs the settle hook (makes the writes durable /
# waits for destage), then reads the working set once. Arguments: name uri [settle-hook]
warm_a() {  # name uris [settle-hook] [size]
  fio_run "A-fill-$1" "$2" write 1M 8 --size="${4:-$WS}"
  [ -z "${3:-}" ] || "$3"
  fio_run "A-warmread-$1" "$2" read 1M 8 --size="${4:-$WS}"
}

# ---- Part A ------------------------------------------------------------------------------------
part_a() {
  log "Part A: working set $WS cached, $RUNTIME s per run, port base $BASE"
  # (a) qemu-nbd over a raw file in the same temp dir (same file system and disk as ringcache).
  local img=$WORK/qemu-disk.raw qport=$((BASE + 1)) qpid
  truncate -s $WS "$img"
  qemu-nbd -f raw -t --shared=8 -x disk --bind 127.0.0.1 -p $qport --cache=writeback \
    --aio=threads "$img" > "$OUT/qemu-nbd.log" 2>&1 &
  qpid=$!
  PIDS+=("$qpid")
  wait_port $qport "$qpid"
  sync_img() { sync "$img"; }
  warm_a qemu-nbd "nbd://127.0.0.1:$qport/disk" sync_img
  part_a_workloads qemu-nbd "nbd://127.0.0.1:$qport/disk" "" "" "$qpid"
  stop_pid "$qpid"
  # The same file served with --cache=writethrough: writes are durable before the reply.
  qemu-nbd -f raw -t --shared=8 -x disk --bind 127.0.0.1 -p $qport --cache=writethrough \
    --aio=threads "$img" > "$OUT/qemu-nbd-wt.log" 2>&1 &
  qpid=$!
  PIDS+=("$qpid")
  wait_port $qport "$qpid"
  local wl name rw bs qd
  for wl in "randwrite-4k-qd32 randwrite 4k 32" "randwrite-4k-qd1 randwrite 4k 1" \
            "seqwrite-1m-qd4 write 1M 4"; do
    read -r name rw bs qd <<< "$wl"
    measure A "$name" qemu-nbd-wt "nbd://127.0.0.1:$qport/disk" "$rw" "$bs" "$qd" $WS "" "" \
      "$qpid"
  done
  stop_pid "$qpid"
  rm -f "$img"

  # (b) ringcache-local: 2 cache nodes (1 GiB SSD + 64 MiB RAM each), 3 data nodes, defaults.
  local lp=$((BASE + 20)) lpid
  server_exec "$LOCAL_BIN" --data-dir "$WORK/local-a" --create-vdi bench:$WS --cache-nodes 2 \
    --data-nodes 3 --ssd-size 1GiB --ram-size "$RAM_A" --nbd-listen 127.0.0.1:$lp \
    --admin-listen 127.0.0.1:$((lp + 1)) --http-listen 127.0.0.1:$((lp + 2)) \
    --ready-file "$WORK/local-a.ready" > "$OUT/ringcache-local-a.log" 2>&1 &
  lpid=$!
  PIDS+=("$lpid")
  wait_port $lp "$lpid"
  local lurl="http://127.0.0.1:$((lp + 2))/metrics"
  wait_local_clean() { wait_clean bench "$lurl"; }
  warm_a ringcache-local "nbd://127.0.0.1:$lp/bench" wait_local_clean
  part_a_workloads ringcache-local "nbd://127.0.0.1:$lp/bench" bench "$lurl" "$lpid"
  stop_pid "$lpid"
  rm -rf "$WORK/local-a"

  # (c) the same topology as separate processes.
  local cb=$((BASE + 500))
  CLUSTER_DIR=$WORK/cluster
  # shellcheck disable=SC2086
  env RINGCACHE_BIN="$BIN" ${NBD_BENCH_SERVER_ENV:-} "$ROOT/deploy/cluster.sh" up \
    --dir "$CLUSTER_DIR" --base-port $cb --cache-nodes 2 --data-nodes 3 --ssd-size 1GiB --ram-size "$RAM_A" \
    --create-vdi bench:$WS --create-vdi multi1:$MULTI_WS --create-vdi multi2:$MULTI_WS \
    --create-vdi multi3:$MULTI_WS --create-vdi multi4:$MULTI_WS > "$OUT/cluster-up.log" 2>&1 || {
      cat "$OUT/cluster-up.log" >&2
      return 1
    }
  local cpids="" curls="http://127.0.0.1:$((cb + 401))/metrics http://127.0.0.1:$((cb + 402))/metrics"
  for f in "$CLUSTER_DIR"/pids/*.pid; do cpids="$cpids $(cat "$f")"; done
  # shellcheck disable=SC2086
  wait_cluster_clean() { wait_clean bench $curls; }
  warm_a cluster "nbd://127.0.0.1:$((cb + 9))/bench" wait_cluster_clean
  part_a_workloads cluster "nbd://127.0.0.1:$((cb + 9))/bench" bench "$curls" "$cpids"
  # Scaling past one client: 4 fio jobs, each on its own VDI, reported as one.
  local multi="" v
  for v in 1 2 3 4; do multi+="nbd://127.0.0.1:$((cb + 9))/multi$v "; done
  wait_multi_clean() { for v in 1 2 3 4; do wait_clean multi$v $curls; done; }
  warm_a cluster-multi4 "$multi" wait_multi_clean $MULTI_WS
  measure A randread-4k-qd32-4vdis cluster "$multi" randread 4k 32 $MULTI_WS multi1 "$curls" \
    "$cpids"
  cp "$CLUSTER_DIR"/logs/*.log "$OUT/" 2> /dev/null || true
  RINGCACHE_BIN=$BIN "$ROOT/deploy/cluster.sh" down --dir "$CLUSTER_DIR" > /dev/null
  CLUSTER_DIR=""
  rm -rf "$WORK/cluster"
}

# ---- Part T ------------------------------------------------------------------------------------
# fio's nbd engine hands its URI to libnbd, which refuses a tls-certificates=DIR query (local file
# access) and reads the client's certificates from its default directory instead:
# $HOME/.pki/libnbd, or /etc/pki/libnbd for root. So a TLS fio gets a home of its own holding
# CERT_DIR's CA and client certificate, and runs as nobody when this script runs as root (the
# key is a throwaway one). Prints the home.
tls_client_home() {  # CERT_DIR (made by `ringcachectl tls issue --role client`)
  local h
  chmod 711 "$WORK"  # nobody may pass through (not list) the scratch directory
  h=$(mktemp -d "$WORK/fio-home.XXXXXX")
  mkdir -p "$h/.pki/libnbd" "$h/out"
  cp "$1/ca-cert.pem" "$1/client-cert.pem" "$1/client-key.pem" "$h/.pki/libnbd/"
  chmod 755 "$h" "$h/.pki" "$h/.pki/libnbd"
  chmod 644 "$h/.pki/libnbd/"*
  chmod 1777 "$h/out"
  echo "$h"
}

# Part T: one server's workloads, plaintext or TLS. Arguments: plain|tls system uri settle-hook
# client-cert-dir vdi "urls" "pids"; records the system as SYSTEM or SYSTEM+tls.
t_measure() {
  local mode=$1 sys=$2
  [ "$mode" = plain ] || sys=$sys+tls
  FIO_TLS_HOME=$([ "$mode" = plain ] || tls_client_home "$5")
  warm_a "T-$sys" "$3" "$4"
  part_a_workloads "$sys" "$3" "$6" "$7" "$8" T
  FIO_TLS_HOME=""
}

part_t() {
  log "Part T: the cost of TLS, working set $WS cached, $RUNTIME s per run, port base $BASE"
  # One throwaway CA: a server certificate (qemu-nbd reads server-cert.pem/server-key.pem, the
  # ringcache gateway cert.pem/key.pem) and a client certificate for fio's libnbd.
  local ca=$WORK/tls-ca srv=$WORK/tls-server cli=$WORK/tls-client qt=$WORK/tls-qemu
  "$CTL_BIN" tls init-ca --dir "$ca" --cluster bench > /dev/null
  "$CTL_BIN" tls issue --ca "$ca" --role gateway --name bench-gateway --ip 127.0.0.1 \
    --out "$srv" > /dev/null
  "$CTL_BIN" tls issue --ca "$ca" --role client --name bench-client --out "$cli" > /dev/null
  mkdir -p "$qt"
  cp "$srv/ca-cert.pem" "$qt/ca-cert.pem"
  cp "$srv/cert.pem" "$qt/server-cert.pem"
  cp "$srv/key.pem" "$qt/server-key.pem"

  # (a) qemu-nbd on a raw file, plaintext then x509 TLS (client certificates verified).
  local img=$WORK/qemu-disk-t.raw qport=$((BASE + 40)) qpid mode sec uri
  truncate -s $WS "$img"
  sync_t() { sync "$img"; }
  for mode in plain tls; do
    sec=()
    uri="nbd://127.0.0.1:$qport/disk"
    if [ $mode = tls ]; then
      sec=(--object "tls-creds-x509,id=tls0,dir=$qt,endpoint=server,verify-peer=on"
           --tls-creds tls0)
      uri="nbds://127.0.0.1:$qport/disk"
    fi
    qemu-nbd -f raw -t --shared=8 -x disk --bind 127.0.0.1 -p $qport --cache=writeback \
      --aio=threads "${sec[@]}" "$img" > "$OUT/qemu-nbd-t-$mode.log" 2>&1 &
    qpid=$!
    PIDS+=("$qpid")
    wait_port $qport "$qpid"
    t_measure $mode qemu-nbd "$uri" sync_t "$cli" "" "" "$qpid"
    stop_pid "$qpid"
  done
  rm -f "$img"

  # (b) ringcache-local (Part A's topology), plaintext then NBD TLS required.
  local lp=$((BASE + 50)) lpid lurl="http://127.0.0.1:$((BASE + 52))/metrics"
  t_local_clean() { wait_clean bench "$lurl"; }
  for mode in plain tls; do
    sec=()
    uri="nbd://127.0.0.1:$lp/bench"
    if [ $mode = tls ]; then
      sec=(--tls-dir "$srv" --nbd-tls require)
      uri="nbds://127.0.0.1:$lp/bench"
    fi
    server_exec "$LOCAL_BIN" --data-dir "$WORK/local-t" --create-vdi bench:$WS --cache-nodes 2 \
      --data-nodes 3 --ssd-size 1GiB --ram-size "$RAM_A" --nbd-listen 127.0.0.1:$lp \
      --admin-listen 127.0.0.1:$((lp + 1)) --http-listen 127.0.0.1:$((lp + 2)) "${sec[@]}" \
      --ready-file "$WORK/local-t.ready" > "$OUT/ringcache-local-t-$mode.log" 2>&1 &
    lpid=$!
    PIDS+=("$lpid")
    wait_port $lp "$lpid"
    t_measure $mode ringcache-local "$uri" t_local_clean "$cli" bench "$lurl" "$lpid"
    stop_pid "$lpid"
    rm -rf "$WORK/local-t"
  done

  # (c) the cluster (separate processes), plaintext then `cluster.sh up --tls`: every hop under
  # mutual TLS. Its /metrics want a client certificate too, so the settle step is a flush.
  local cb=$((BASE + 600)) cpids f ctl
  for mode in plain tls; do
    sec=()
    [ $mode = plain ] || sec=(--tls)
    CLUSTER_DIR=$WORK/cluster-t
    # shellcheck disable=SC2086
    env RINGCACHE_BIN="$BIN" ${NBD_BENCH_SERVER_ENV:-} "$ROOT/deploy/cluster.sh" up \
      --dir "$CLUSTER_DIR" --base-port $cb --cache-nodes 2 --data-nodes 3 --ssd-size 1GiB \
      --ram-size "$RAM_A" --create-vdi bench:$WS "${sec[@]}" > "$OUT/cluster-t-$mode-up.log" 2>&1 || {
        cat "$OUT/cluster-t-$mode-up.log" >&2
        return 1
      }
    cpids=""
    for f in "$CLUSTER_DIR"/pids/*.pid; do cpids="$cpids $(cat "$f")"; done
    ctl=("$CTL_BIN" --gateway 127.0.0.1:$((cb + 10)))
    uri="nbd://127.0.0.1:$((cb + 9))/bench"
    if [ $mode = tls ]; then
      ctl+=(--tls-dir "$CLUSTER_DIR/tls/admin")
      uri="nbds://127.0.0.1:$((cb + 9))/bench"
    fi
    t_cluster_flush() { "${ctl[@]}" --timeout 300 flush > /dev/null; }
    t_measure $mode cluster "$uri" t_cluster_flush "$CLUSTER_DIR/tls/client" "" "" "$cpids"
    cp "$CLUSTER_DIR/logs/gateway-1.log" "$OUT/cluster-t-$mode-gateway.log" 2> /dev/null || true
    RINGCACHE_BIN=$BIN "$ROOT/deploy/cluster.sh" down --dir "$CLUSTER_DIR" > /dev/null
    CLUSTER_DIR=""
    rm -rf "$WORK/cluster-t"
  done
}

# ---- Part B ------------------------------------------------------------------------------------
part_b() {
  log "Part B: HDD emulation (5 ms), Zipf(1.2) over a $B_VDI_SIZE VDI (replication $B_REPL), cache 2 x ($B_SSD SSD + $B_RAM RAM)"
  local lp=$((BASE + 30)) lpid
  server_exec "$LOCAL_BIN" --data-dir "$WORK/local-b" --create-vdi zipf:$B_VDI_SIZE --cache-nodes 2 \
    --data-nodes 3 --replication "$B_REPL" --ssd-size $B_SSD --ram-size $B_RAM --hdd-emulation \
    --hdd-seek-ms 5 --nbd-listen 127.0.0.1:$lp --admin-listen 127.0.0.1:$((lp + 1)) \
    --http-listen 127.0.0.1:$((lp + 2)) --ready-file "$WORK/local-b.ready" \
    > "$OUT/ringcache-local-b.log" 2>&1 &
  lpid=$!
  PIDS+=("$lpid")
  wait_port $lp "$lpid"
  local uri="nbd://127.0.0.1:$lp/zipf" url="http://127.0.0.1:$((lp + 2))/metrics"
  local ctl=("$CTL_BIN" --gateway 127.0.0.1:$((lp + 1)))
  # Fill the whole VDI in passthrough mode: writes go around the cache straight to the three
  # (emulated-HDD) home replicas, so the cache starts empty and every block exists at home.
  "${ctl[@]}" vdi set-mode zipf passthrough > /dev/null
  log "  filling $B_VDI_SIZE through passthrough (write-around to the HDD replicas)"
  fio_run B-fill "$uri" write 4M 4 --size=$B_VDI_SIZE
  log "  filled: $($REPORT fio "$OUT/B-fill.json" | awk '{printf "%.0f MiB/s", $1 * 4}')"
  # Zipf traces (tests/bench/nbd_bench_report.py zipf-trace): the same hot set in every trace
  # (a fixed rank->block permutation), a different sample sequence per run, so the measured runs
  # never replay what the warm-up already read. (fio's own zipf:1.2 draws the hot set's position
  # from the job's random seed, so every run without a fixed seed has a new hot set, and with one
  # it replays the same sequence.)
  local blocks=$(( $(numfmt --from=iec $B_VDI_SIZE) / 4096 )) n=$((RUNTIME * 20000))
  $REPORT zipf-info $blocks 1.2 $(( 2 * ($(numfmt --from=iec ${B_SSD%iB}) / 4096) * 98 / 100 )) \
    4096 | tee "$OUT/B-zipf.txt"
  trace() {  # name seed read_pct count
    $REPORT zipf-trace "$WORK/$1.iolog" $blocks 1.2 "$4" "$2" "$3" 4096 zipf
  }
  trace pt-r 1 100 $n
  trace pt-rw 2 70 $n
  trace warm 3 100 $((WARM_B * 20000))
  trace wb-r 4 100 $n
  trace wb-rw 5 70 $n
  local replay=(--replay_no_stall=1)
  local mixed=(--unified_rw_reporting=mixed)
  measure B zipf-randread-4k-qd32 passthrough "$uri" randread 4k 32 $B_VDI_SIZE zipf "$url" \
    "$lpid" --read_iolog="$WORK/pt-r.iolog" "${replay[@]}"
  measure B zipf-randrw70-4k-qd32 passthrough "$uri" randrw 4k 32 $B_VDI_SIZE zipf "$url" \
    "$lpid" --read_iolog="$WORK/pt-rw.iolog" "${replay[@]}" "${mixed[@]}"
  # Writeback (the default mode): warm with a trace from the same distribution so the sieve
  # admits the hot set (a block enters the cache on its second read miss), then measure.
  "${ctl[@]}" vdi set-mode zipf writeback > /dev/null
  log "  warming writeback with $WARM_B s of Zipf reads"
  fio_run B-warm "$uri" randread 4k 32 --size=$B_VDI_SIZE --time_based --runtime="$WARM_B" \
    --read_iolog="$WORK/warm.iolog" "${replay[@]}"
  log "  warm-up: $($REPORT fio "$OUT/B-warm.json" | awk '{print $1}') IOPS"
  measure B zipf-randread-4k-qd32 writeback "$uri" randread 4k 32 $B_VDI_SIZE zipf "$url" \
    "$lpid" --read_iolog="$WORK/wb-r.iolog" "${replay[@]}"
  measure B zipf-randrw70-4k-qd32 writeback "$uri" randrw 4k 32 $B_VDI_SIZE zipf "$url" \
    "$lpid" --read_iolog="$WORK/wb-rw.iolog" "${replay[@]}" "${mixed[@]}"
  "${ctl[@]}" stats --vdi zipf > "$OUT/B-stats.txt" 2>&1 || true
  stop_pid "$lpid"
  rm -rf "$WORK/local-b"
}

{
  echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/{print $2}') GiB RAM, /tmp on $(df --output=source /tmp | tail -1)"
  echo "fio $(fio --version | sed 's/fio-//'), $(qemu-nbd --version | head -1), load at start: $(cat /proc/loadavg)"
  echo "ringcache HEAD $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?'), binaries from $BIN (ringcache-local built $(date -r "$LOCAL_BIN" '+%F %T'))"
  echo "server environment: ${NBD_BENCH_SERVER_ENV:-(none)}; Part A RAM tier per cache node: $RAM_A"
} | tee "$OUT/machine.txt"
START=$(date +%s)
if [[ $ONLY == *A* ]]; then part_a; fi
if [[ $ONLY == *B* ]]; then part_b; fi
if [[ $ONLY == *T* ]]; then part_t; fi
echo "load at end: $(cat /proc/loadavg); $(( $(date +%s) - START )) s" | tee -a "$OUT/machine.txt"
echo
$REPORT report "$RESULTS"
$REPORT report "$RESULTS" --markdown > "$OUT/report.md"
echo "raw fio JSON, logs and report.md in $OUT"
