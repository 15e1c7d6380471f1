#!/usr/bin/env bash
# Starts, stops and shows a static ringcache cluster of separate processes on 127.0.0.1:
# data nodes, cache nodes and a gateway, described by a static cluster file.
#
#   deploy/cluster.sh up [--cluster-file FILE] [--dir DIR] [--cache-nodes K] [--data-nodes M]
#                        [--base-port P] [--ssd-size S] [--ram-size R] [--hdd-emulation]
#                        [--replication N] [--create-vdi NAME:SIZE]... [--etcd] [--tls]
#                        [--gateways G] [--coordinators C] [--datanode-down-out S]
#                        [--rebalance-mb-s R] [--rebalance-busy-mb-s R] [--fault-seams]
#   deploy/cluster.sh status [--dir DIR]
#   deploy/cluster.sh down   [--dir DIR]
#   deploy/cluster.sh kill   ROLE ID... [--dir DIR]   kill -9 daemons, wait until they are gone
#   deploy/cluster.sh stop   ROLE ID... [--dir DIR]   stop daemons (SIGTERM), wait until gone
#   deploy/cluster.sh start  ROLE ID... [--dir DIR]   (re)start daemons, wait until they are ready
#                                                    (`start etcd`, `stop etcd`: cluster mode's etcd)
#   deploy/cluster.sh add    ROLE ID    [--dir DIR]   start a new cache or data node (cluster mode)
#
# Without --cluster-file, `up` writes DIR/cluster.yaml for K cache nodes and M data nodes with
# ports from P (default 17000): data node i gRPC P+100+i / metrics P+200+i, cache node i gRPC
# P+300+i / metrics P+400+i, gateway NBD P+9 (10809 with --base-port 10800), admin P+10,
# metrics P+11; the default replication of new VDIs is N (default min(M, 3)). ROLE is datanode,
# cachenode or gateway; `start` runs a daemon from the same cluster file and state as `up` did.
# With --etcd (cluster mode, membership/README.md) `up` also starts etcd on 127.0.0.1:P-1 (peer
# port P-2, data under DIR/etcd), names it in the cluster file (etcd_endpoints) so that every
# daemon registers there and the gateway follows the cache nodes; `down` stops it last.
# `add cachenode|datanode ID` (cluster mode only) starts a node that the cluster file does not list,
# with the ports of the scheme above for its id (1..99) and `up`'s sizes (kept in DIR/cluster.env),
# from its own file DIR/added/ROLE-ID.yaml (the cluster file plus its entry; the gateway's file
# stays as it is): it registers in etcd, and the gateway takes it in (cache node: it joins the
# ring; data node: replicas rebalance to it). Added nodes are listed in DIR/added_nodes; status,
# kill, start, up and down handle them like the others.
# --gateways G (default 1) runs G gateways: gateway 1 on the ports above, gateway i >= 2 with NBD
# P+500+i, admin P+600+i, metrics P+700+i. With --etcd they are stateless front ends that follow
# the coordinator (membership/README.md "Control plane"); gateways 1..C (--coordinators, default
# G) stand for election as the coordinator, the others run with --coordinator false.
# --datanode-down-out S: the gateways take a data node out of the data ring after S seconds
# unreachable (default 600; docs/durability.md); --rebalance-mb-s R: their replica copies' speed,
# --rebalance-busy-mb-s R: that speed while the data nodes serve clients.
# --fault-seams (fault tests): data and cache node i read injected disk faults (a slow or full
# disk, common/disk_faults.h) from DIR/faults/datanode-i and DIR/faults/cachenode-i.
# With --tls every port is secured (docs/security.md): `up` makes a throwaway CA and one
# certificate per daemon under DIR/tls (ringcachectl tls), runs gRPC, block data and etcd with
# mutual TLS, NBD with TLS required and /metrics over HTTPS (client certificates required); NBD
# clients use DIR/tls/client (qemu: tls-creds-x509 dir=DIR/tls/client; nbdinfo:
# nbds://HOST:PORT/VDI?tls-certificates=DIR/tls/client), ringcachectl --tls-dir DIR/tls/admin.
# State, logs and pids live under DIR (default ./ringcache-cluster).
# Binaries come from $RINGCACHE_BIN (default ./build/<dir>), read by every command: `start` with
# another RINGCACHE_BIN runs a daemon of another build (tests/upgrade: a rolling upgrade).
set -euo pipefail

cmd=${1:-}
shift || true
case "$cmd" in
  -h|--help|help) sed -n '2,48p' "$0"; exit 0 ;;
  up|status|down|kill|stop|start|add) ;;
  *) sed -n '2,48p' "$0" >&2; echo "cluster.sh: unknown command '$cmd'" >&2; exit 2 ;;
esac
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
TLS=""
G=1
C=""
DOWN_OUT=""
REBALANCE_MBS=""
BUSY_MBS=""
FAULT_SEAMS=""
CREATE=()
POS=()
SET=" "  # the settings given on the command line (the others may come from DIR/cluster.env)
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster-file) FILE=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --cache-nodes) K=$2; shift 2 ;;
    --data-nodes) M=$2; shift 2 ;;
    --base-port) BASE=$2; SET+="BASE "; shift 2 ;;
    --ssd-size) SSD=$2; SET+="SSD "; shift 2 ;;
    --ram-size) RAM=$2; SET+="RAM "; shift 2 ;;
    --hdd-emulation) HDD="--hdd-emulation"; SET+="HDD "; shift ;;
    --replication) REPL=$2; shift 2 ;;
    --etcd) ETCD=1; shift ;;
    --tls) TLS=1; SET+="TLS "; shift ;;
    --gateways) G=$2; SET+="G "; shift 2 ;;
    --coordinators) C=$2; SET+="C "; shift 2 ;;
    --datanode-down-out) DOWN_OUT=$2; SET+="DOWN_OUT "; shift 2 ;;
    --rebalance-mb-s) REBALANCE_MBS=$2; SET+="REBALANCE_MBS "; shift 2 ;;
    --rebalance-busy-mb-s) BUSY_MBS=$2; SET+="BUSY_MBS "; shift 2 ;;
    --fault-seams) FAULT_SEAMS=1; SET+="FAULT_SEAMS "; shift ;;
    --create-vdi) CREATE+=(--create-vdi "$2"); shift 2 ;;
    -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
    -*) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
    *) POS+=("$1"); shift ;;
  esac
done

# Builtins where the fault runs call it (kill, stop, start, status, down: hundreds of times a
# run): on a 2-core machine a fork costs milliseconds, and the subshells, `seq`, `cat`, `sed` and
# `grep` of each call once came to about sixty processes (docs/testing.md, "Processes and
# hand-offs"). The absolute paths without a subshell: cd there and back (CDPATH unset: a cd it
# finds prints, and may go elsewhere).
unset CDPATH
here=$PWD
case "$0" in */*) cd "${0%/*}/.." ;; *) cd .. ;; esac
ROOT=$PWD
cd "$here"
BIN=${RINGCACHE_BIN:-$ROOT/build}
bin_of() {  # role -> BIN_OF, the daemon's executable
  case "$1" in
    datanode) BIN_OF=$BIN/datanode/ringcache-datanode ;;
    cachenode) BIN_OF=$BIN/cachenode/ringcache-cachenode ;;
    gateway) BIN_OF=$BIN/gateway/ringcache-gateway ;;
  esac
}
[ -d "$DIR" ] || mkdir -p "$DIR"
cd "$DIR"
DIR=$PWD
cd "$here"
[ -n "$FILE" ] || FILE=$DIR/cluster.yaml
ADDED=$DIR/added_nodes  # "role id" of the nodes started by `add`

# The settings `up` used (base port, sizes, HDD emulation), for `add` and `start`; the command
# line wins.
if [ -f "$DIR/cluster.env" ]; then
  while IFS='=' read -r key value; do
    case "$SET" in *" $key "*) continue ;; esac
    case "$key" in
      BASE) BASE=$value ;;
      SSD) SSD=$value ;;
      RAM) RAM=$value ;;
      HDD) HDD=$value ;;
      TLS) TLS=$value ;;
      G) G=$value ;;
      C) C=$value ;;
      DOWN_OUT) DOWN_OUT=$value ;;
      REBALANCE_MBS) REBALANCE_MBS=$value ;;
      BUSY_MBS) BUSY_MBS=$value ;;
      FAULT_SEAMS) FAULT_SEAMS=$value ;;
    esac
  done < "$DIR/cluster.env"
fi
save_env() {
  printf 'BASE=%s\nSSD=%s\nRAM=%s\nHDD=%s\nTLS=%s\nG=%s\nC=%s\nDOWN_OUT=%s\nREBALANCE_MBS=%s\nBUSY_MBS=%s\nFAULT_SEAMS=%s\n' \
    "$BASE" "$SSD" "$RAM" "$HDD" "$TLS" "$G" "$C" "$DOWN_OUT" "$REBALANCE_MBS" "$BUSY_MBS" "$FAULT_SEAMS" \
    > "$DIR/cluster.env"
}

# --tls: the cluster's CA (made once) and a certificate directory per holder, made on first use:
# DIR/tls/ROLE-ID for daemons (with web.yml, the daemon's /metrics HTTPS configuration),
# DIR/tls/admin for ringcachectl, DIR/tls/client for NBD clients, DIR/tls/etcd.
ctl() { "$BIN/tools/ctl/ringcachectl" "$@"; }
tls_dir() {  # role id|name -> prints the directory, making it if missing
  local role=$1 name=$2 dir
  case "$role" in
    admin|client|etcd) dir=$DIR/tls/$role ;;
    *) dir=$DIR/tls/$role-$name ;;
  esac
  if [ ! -f "$DIR/tls/ca/ca-cert.pem" ]; then
    ctl tls init-ca --dir "$DIR/tls/ca" --cluster ringcache > /dev/null
  fi
  if [ ! -f "$dir/cert.pem" ]; then
    ctl tls issue --ca "$DIR/tls/ca" --role "$role" --name "$role-$name" --ip 127.0.0.1 \
      --dns localhost --out "$dir" > /dev/null
    cat > "$dir/web.yml" <<WEB
tls_server_config:
  cert_file: $dir/cert.pem
  key_file: $dir/key.pem
  client_ca_file: $dir/ca-cert.pem
  client_auth_type: RequireAndVerifyClientCert
WEB
  fi
  echo "$dir"
}

# Lists "role id" for every node of the cluster file (one flow mapping per line), then for every
# node started by `add`. Read all of it: under pipefail a `grep -q` that stops early fails the
# pipeline with SIGPIPE.
MEMBER_RE='^ *- *\{ *role: *([a-z]*), *id: *([0-9]*)'
member_list() {  # -> MEMBERS: "role id" of each node, read with builtins
  local line
  MEMBERS=()
  if [ -f "$FILE" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
      if [[ "$line" =~ $MEMBER_RE ]]; then MEMBERS+=("${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"); fi
    done < "$FILE"
  fi
  if [ -f "$ADDED" ]; then
    while IFS= read -r line || [ -n "$line" ]; do MEMBERS+=("$line"); done < "$ADDED"
  fi
}
members() {
  member_list
  [ ${#MEMBERS[@]} -eq 0 ] || printf '%s\n' "${MEMBERS[@]}"
}

# Whether "role id" is a member (of the cluster file or added), without a process.
is_member() {
  local m
  member_list
  for m in "${MEMBERS[@]}"; do [ "$m" != "$1 $2" ] || return 0; done
  return 1
}

is_added() {
  local line
  [ -f "$ADDED" ] || return 1
  while IFS= read -r line || [ -n "$line" ]; do
    [ "$line" = "$1 $2" ] && return 0
  done < "$ADDED"
  return 1
}

# The cluster file entry of a node that `add` starts: the ports of the scheme for its id.
added_entry() {  # role id
  case "$1" in
    datanode)
      echo "{role: datanode, id: $2, listen: 127.0.0.1:$((BASE+100+$2)), http_listen: 127.0.0.1:$((BASE+200+$2))}" ;;
    cachenode)
      echo "{role: cachenode, id: $2, listen: 127.0.0.1:$((BASE+300+$2)), http_listen: 127.0.0.1:$((BASE+400+$2)), ssd_bytes: $SSD, ram_bytes: $RAM}" ;;
  esac
}

# Writes DIR/added/ROLE-ID.yaml, the file an added node runs from: the cluster file (as it is now:
# same etcd, data dir and peers) with the node's entry as the first of its nodes; prints its path.
added_file() {  # role id
  local f=$DIR/added/$1-$2.yaml indent
  mkdir -p "$DIR/added"
  indent=$(grep -m1 -o '^ *- *{' "$FILE" | sed 's/{$//')
  awk -v entry="${indent:-  - }$(added_entry "$1" "$2")" \
    '{ print } /^nodes:/ { print entry }' "$FILE" > "$f"
  echo "$f"
}

pidfile() { echo "$DIR/pids/$1-$2.pid"; }
pid_of() {  # role id -> PID, the pid its pid file names ("" without one)
  PID=""
  read -r PID 2> /dev/null < "$DIR/pids/$1-$2.pid" || true
}

# nap SECONDS: sleeps without starting a process (a read that times out on a pipe no one writes
# to). The wait loops below poll every 0.05-0.1 s, and a `sleep` process each time cost the
# fault runs, which restart daemons all the time, seconds of CPU on a loaded machine. The
# daemons do not inherit the pipe ({NAP_FD}<&- where they start).
exec {NAP_FD}<> <(:)
nap() { read -r -t "$1" -u "$NAP_FD" _ || true; }

# A process is alive if it exists and is not a zombie (killed daemons may linger unreaped when
# their parent shell is gone and the container's init does not reap).
# Bash builtins only: the wait loops ask this ten times a second, and on a loaded 2-core machine
# the subshells, cat and ps it once ran per call were a good part of the tests' CPU.
alive() {
  local f="$DIR/pids/$1-$2.pid" pid="" st=""
  [ -f "$f" ] || return 1
  read -r pid < "$f" || [ -n "$pid" ] || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  read -r st 2> /dev/null < "/proc/$pid/stat" || return 1
  st=${st##*) }  # /proc/PID/stat: "PID (COMM) STATE ...", COMM may hold ") "
  [ -n "$st" ] && [ "${st:0:1}" != Z ]
}

write_cluster_file() {
  {
    echo "# ringcache static cluster file (written by deploy/cluster.sh)"
    echo "cluster_id: rc-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
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
    for i in $(seq 2 "$G"); do
      echo "  - {role: gateway, id: $i, nbd_listen: 127.0.0.1:$((BASE+500+i)), admin_listen: 127.0.0.1:$((BASE+600+i)), http_listen: 127.0.0.1:$((BASE+700+i))}"
    done
  } > "$FILE"
}

# The etcd endpoint named by the cluster file (first of etcd_endpoints), or nothing.
etcd_endpoint() {
  sed -n 's/^etcd_endpoints: *//p' "$FILE" | cut -d, -f1 | tr -d ' "'
}

# The cluster file's etcd_prefix (default /ringcache).
etcd_prefix() {
  local p
  p=$(sed -n 's/^etcd_prefix: *//p' "$FILE" | tr -d ' "')
  echo "${p:-/ringcache}"
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
  local scheme=http sec=() check=()
  if [ -n "$TLS" ]; then
    local e a
    e=$(tls_dir etcd 0)
    a=$(tls_dir admin 0)
    scheme=https
    sec=(--cert-file "$e/cert.pem" --key-file "$e/key.pem" --trusted-ca-file "$e/ca-cert.pem"
         --client-cert-auth --peer-cert-file "$e/cert.pem" --peer-key-file "$e/key.pem"
         --peer-trusted-ca-file "$e/ca-cert.pem" --peer-client-cert-auth)
    check=(--cacert "$a/ca-cert.pem" --cert "$a/cert.pem" --key "$a/key.pem")
  fi
  etcd --name ringcache --data-dir "$DIR/etcd" --listen-client-urls "$scheme://$ep" \
    --advertise-client-urls "$scheme://$ep" --listen-peer-urls "$scheme://127.0.0.1:$((port-1))" \
    --initial-advertise-peer-urls "$scheme://127.0.0.1:$((port-1))" \
    --initial-cluster "ringcache=$scheme://127.0.0.1:$((port-1))" "${sec[@]}" \
    >> "$DIR/logs/etcd.log" 2>&1 {NAP_FD}<&- &
  echo $! > "$DIR/pids/etcd-0.pid"
  for ((try = 0; try < 300; try++)); do
    if ETCDCTL_API=3 etcdctl --endpoints "$scheme://$ep" --command-timeout=1s "${check[@]}" \
        endpoint health > /dev/null 2>&1; then
      # With TLS, etcd knows callers by their certificate's CN: one role per component, the
      # admin certificate as root, authentication on (docs/security.md, "etcd").
      if [ -n "$TLS" ] && ! ctl --etcd "$ep" --etcd-prefix "$(etcd_prefix)" --tls-dir "$a" \
          etcd enable-auth > /dev/null; then
        echo "cluster.sh: could not turn on etcd's authentication" >&2
        exit 1
      fi
      return 0
    fi
    if ! alive etcd 0; then break; fi
    nap 0.1
  done
  echo "cluster.sh: etcd on $ep did not come up; log:" >&2
  tail -20 "$DIR/logs/etcd.log" >&2
  exit 1
}

start_one() {  # role id
  local role=$1 id=$2 extra=() file=$FILE
  if alive "$role" "$id"; then return 0; fi
  if [ "$role" = datanode ] && [ -n "$HDD" ]; then extra+=("$HDD"); fi
  if [ "$role" != gateway ] && [ -n "$FAULT_SEAMS" ]; then
    [ -d "$DIR/faults" ] || mkdir -p "$DIR/faults"
    extra+=(--disk-faults-file "$DIR/faults/$role-$id")
  fi
  if [ "$role" = gateway ] && [ ${#CREATE[@]} -gt 0 ]; then extra+=("${CREATE[@]}"); fi
  if [ "$role" = gateway ] && [ "$id" -gt "${C:-$G}" ]; then extra+=(--coordinator false); fi
  if [ "$role" = gateway ] && [ -n "$DOWN_OUT" ]; then extra+=(--datanode-down-out "$DOWN_OUT"); fi
  if [ "$role" = gateway ] && [ -n "$REBALANCE_MBS" ]; then
    extra+=(--rebalance-mb-s "$REBALANCE_MBS")
  fi
  if [ "$role" = gateway ] && [ -n "$BUSY_MBS" ]; then extra+=(--rebalance-busy-mb-s "$BUSY_MBS"); fi
  if is_added "$role" "$id"; then file=$(added_file "$role" "$id"); fi
  if [ -n "$TLS" ]; then
    local t
    t=$(tls_dir "$role" "$id")
    extra+=(--tls-dir "$t" --metrics-web-config "$t/web.yml")
    if [ -n "$(etcd_endpoint)" ] && [ ! -f "$t/etcd-user" ]; then  # its user in etcd, once
      ctl --etcd "$(etcd_endpoint)" --etcd-prefix "$(etcd_prefix)" --tls-dir "$(tls_dir admin 0)" \
        etcd add-user --role "$role" "$role-$id" && touch "$t/etcd-user"
    fi
  fi
  rm -f "$DIR/ready/$role-$id.json"
  bin_of "$role"
  "$BIN_OF" --cluster "$file" --id "$id" --ready-file "$DIR/ready/$role-$id.json" \
    "${extra[@]}" >> "$DIR/logs/$role-$id.log" 2>&1 {NAP_FD}<&- &
  echo $! > "$DIR/pids/$role-$id.pid"
}

wait_ready() {  # role id
  for ((try = 0; try < 600; try++)); do
    [ -f "$DIR/ready/$1-$2.json" ] && return 0
    if ! alive "$1" "$2"; then
      echo "cluster.sh: $1 $2 exited; log:" >&2
      tail -20 "$DIR/logs/$1-$2.log" >&2
      return 1
    fi
    nap 0.1
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
    if ! is_member "${POS[0]}" "$id"; then
      echo "cluster.sh $cmd: no ${POS[0]} $id in $FILE" >&2
      exit 2
    fi
  done
}

# Checks the positional arguments of add: ROLE (cachenode or datanode) and one new id; checks
# that the cluster runs in cluster mode.
add_args() {
  if [ ${#POS[@]} -ne 2 ] || { [ "${POS[0]}" != cachenode ] && [ "${POS[0]}" != datanode ]; }; then
    echo "cluster.sh add: want ROLE ID with ROLE cachenode or datanode" >&2
    exit 2
  fi
  if ! [[ "${POS[1]}" =~ ^[1-9][0-9]?$ ]]; then
    echo "cluster.sh add: ID must be 1..99 (its ports are P+100+ID ... P+400+ID)" >&2
    exit 2
  fi
  if [ ! -f "$FILE" ] || [ ! -f "$DIR/cluster.env" ]; then
    echo "cluster.sh add: no cluster in $DIR (start one with \`cluster.sh up --etcd\`)" >&2
    exit 2
  fi
  if ! grep -q '^etcd_endpoints:' "$FILE"; then
    echo "cluster.sh add: the cluster in $DIR runs without etcd; a node that is not in the" \
      "cluster file can only join in cluster mode (start the cluster with \`cluster.sh up --etcd\`)" >&2
    exit 2
  fi
  if [ -f "$(pidfile etcd 0)" ] && ! alive etcd 0; then
    echo "cluster.sh add: etcd is down (\`cluster.sh up --etcd\` starts it again)" >&2
    exit 1
  fi
  if is_member "${POS[0]}" "${POS[1]}"; then
    if is_added "${POS[0]}" "${POS[1]}"; then
      echo "cluster.sh add: ${POS[0]} ${POS[1]} was added already (\`cluster.sh start ${POS[0]} ${POS[1]}\` restarts it)" >&2
    else
      echo "cluster.sh add: ${POS[0]} ${POS[1]} is in $FILE already" >&2
    fi
    exit 2
  fi
}

if [ ${#POS[@]} -gt 0 ] && [ "$cmd" != kill ] && [ "$cmd" != stop ] && [ "$cmd" != start ] && [ "$cmd" != add ]; then
  echo "cluster.sh: unknown argument ${POS[0]}" >&2
  exit 2
fi

case "$cmd" in
  up)
    mkdir -p "$DIR/pids" "$DIR/logs" "$DIR/ready"
    if [ ! -f "$FILE" ]; then
      write_cluster_file
      save_env
    fi
    [ -f "$DIR/cluster.env" ] || save_env
    if [ -n "$TLS" ]; then  # the CA, and the certificates of ringcachectl and NBD clients
      tls_dir admin 0 > /dev/null
      tls_dir client 0 > /dev/null
    fi
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
      what=""
      if is_added "$r" "$id"; then what=" (added)"; fi
      if alive "$r" "$id"; then
        pid_of "$r" "$id"
        ready=""
        read -r -d '' ready 2> /dev/null < "$DIR/ready/$r-$id.json" || true
        echo "$r $id$what: up (pid $PID, ready ${ready//$'\n'/})"
      else
        echo "$r $id$what: down"
        bad=1
      fi
    done < <(members)
    if [ -f "$DIR/pids/etcd-0.pid" ]; then
      if alive etcd 0; then
        pid_of etcd 0
        echo "etcd: up (pid $PID, $(etcd_endpoint))"
      else
        echo "etcd: down"
        bad=1
      fi
    fi
    gw=$(grep -o 'nbd_listen: *[0-9.:]*' "$FILE" | head -1 | awk '{print $2}')
    admin=$(grep -o 'admin_listen: *[0-9.:]*' "$FILE" | head -1 | awk '{print $2}')
    if [ -n "$TLS" ]; then
      echo "NBD: nbds://$gw/<vdi>?tls-certificates=$DIR/tls/client   admin: $admin" \
        "(ringcachectl --tls-dir $DIR/tls/admin)"
    else
      echo "NBD: nbd://$gw/<vdi>   admin: $admin"
    fi
    exit $bad
    ;;
  kill|stop)
    if [ "${POS[0]:-}" = etcd ]; then POS=(etcd 0); else role_ids; fi
    if [ "$cmd" = kill ]; then sig=-9; else sig=-TERM; fi
    for id in "${POS[@]:1}"; do
      if alive "${POS[0]}" "$id"; then pid_of "${POS[0]}" "$id"; kill "$sig" "$PID"; fi
    done
    for id in "${POS[@]:1}"; do
      pid_of "${POS[0]}" "$id"
      pid=$PID
      # Dead once ps shows no live leader and no other thread is left: a leader thread can
      # be a zombie while the others still exit, holding the process's ports and files (a
      # restart at once then fails with "Address already in use" or on RocksDB's LOCK). A
      # big process (a sanitizer build on a loaded machine) can take many seconds to unmap.
      gone() {
        local tasks=()
        [ -z "$pid" ] || tasks=("/proc/$pid/task/"*)
        ! alive "${POS[0]}" "$id" && { [ ! -e "${tasks[0]:-}" ] || [ "${#tasks[@]}" -le 1 ]; }
      }
      # Gone twice in a row, 50 ms apart: looked at the instant after a kill -9 (this script
      # reaches here within a millisecond), a process being torn down once read as gone and
      # then not (2026-12-01, a fault run: "still alive" a second after the kill). The minute
      # is counted by the clock.
      seen=0
      end=$((SECONDS + 61))  # SECONDS counts whole seconds: 60 to 61 s
      while [ "$SECONDS" -lt "$end" ]; do
        if gone; then
          seen=$((seen + 1))
          [ "$seen" -lt 2 ] || break
        else
          seen=0
        fi
        nap 0.05
      done
      if [ "$seen" -lt 2 ]; then
        echo "cluster.sh: ${POS[0]} $id still alive 60 s after kill $sig" >&2
        exit 1
      fi
      if [ "$cmd" = kill ]; then echo "${POS[0]} $id: killed"; else echo "${POS[0]} $id: stopped"; fi
    done
    ;;
  start)
    if [ "${POS[0]:-}" = etcd ]; then  # cluster mode's etcd alone (a restore, docs/upgrades.md)
      start_etcd
      pid_of etcd 0
      echo "etcd: up (pid $PID)"
      exit 0
    fi
    role_ids
    for id in "${POS[@]:1}"; do start_one "${POS[0]}" "$id"; done
    for id in "${POS[@]:1}"; do
      wait_ready "${POS[0]}" "$id"
      pid_of "${POS[0]}" "$id"
      echo "${POS[0]} $id: up (pid $PID)"
    done
    ;;
  add)
    add_args
    mkdir -p "$DIR/pids" "$DIR/logs" "$DIR/ready"
    echo "${POS[0]} ${POS[1]}" >> "$ADDED"
    start_one "${POS[0]}" "${POS[1]}"
    if ! wait_ready "${POS[0]}" "${POS[1]}"; then
      # Not recorded: a failed add leaves nothing behind for status, start or down.
      kill "$(cat "$(pidfile "${POS[0]}" "${POS[1]}")")" 2> /dev/null || true
      grep -vx "${POS[0]} ${POS[1]}" "$ADDED" > "$ADDED.tmp" || true
      mv "$ADDED.tmp" "$ADDED"
      exit 1
    fi
    echo "${POS[0]} ${POS[1]} (added): up (pid $(cat "$(pidfile "${POS[0]}" "${POS[1]}")"), $(sed -n 's/^ *- *{role: [a-z]*, id: [0-9]*, listen: \([0-9.:]*\).*/\1/p' "$DIR/added/${POS[0]}-${POS[1]}.yaml" | head -1))"
    ;;
  down)
    for role in gateway cachenode datanode; do
      while read -r r id; do
        [ "$r" = "$role" ] || continue
        if alive "$r" "$id"; then pid_of "$r" "$id"; kill "$PID"; fi
      done < <(members)
      for ((try = 0; try < 100; try++)); do
        any=0
        while read -r r id; do
          if [ "$r" = "$role" ] && alive "$r" "$id"; then any=1; fi
        done < <(members)
        [ $any = 0 ] && break
        nap 0.1
      done
    done
    if alive etcd 0; then  # last: the daemons revoked their leases in it
      pid_of etcd 0
      kill "$PID"
      for ((try = 0; try < 100; try++)); do
        alive etcd 0 || break
        nap 0.1
      done
    fi
    rm -f "$DIR"/pids/*.pid
    echo "cluster down"
    ;;
  *)
    sed -n '2,29p' "$0"
    exit 2
    ;;
esac
