#!/usr/bin/env bash
# TLS on every port, end to end, with real clients (docs/security.md). A cluster-mode cluster
# started by `deploy/cluster.sh up --etcd --tls` (throwaway CA, mutual TLS everywhere):
#   - qemu-io and qemu-img with tls-creds-x509, nbdinfo and nbdcopy with nbds:// write and read;
#   - a plaintext client and a client of another CA are refused, with the reason;
#   - a raw client: options before STARTTLS get NBD_REP_ERR_TLS_REQD, NBD_OPT_EXPORT_NAME before
#     it ends the session, and plaintext injected after STARTTLS is never taken as an option;
#   - per-VDI access lists by client identity and read-only exports (ringcachectl vdi access,
#     allow, deny); a client without a certificate opens public exports only;
#   - the admin API refuses plaintext and non-admin certificates;
#   - etcd runs with a role per component: an NBD client's certificate reads and writes nothing,
#     a cache node's reads but writes only cache node registrations;
#   - /metrics answers HTTPS with a client certificate only;
#   - a cache node with a certificate of another CA cannot join, one with a certificate of another
#     role stops at start, and the gRPC and block data ports refuse raw TLS peers of a role they
#     do not admit;
# and ringcache-local: TLS-PSK clients (qemu tls-creds-psk, nbdinfo tls-psk-file), and a
# plaintext listener off loopback refused without --insecure.
#
#   tests/e2e/tls_test.sh BUILD_DIR
set -euo pipefail

BUILD=$(cd "${1:?usage: tls_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-tls.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own
command -v etcd > /dev/null || { echo "SKIP: no etcd"; exit 77; }

log() { echo "[tls] $(date +%T) $*"; }
fail() {
  echo "[tls] FAIL: $*" >&2
  tail -n 20 "$WORK"/cluster/logs/gateway-1.log >&2 || true
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
LOCAL_PID=""
cleanup() {
  set +e
  [ -n "$LOCAL_PID" ] && kill "$LOCAL_PID" 2> /dev/null && wait "$LOCAL_PID" 2> /dev/null
  cluster down > /dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

T=$WORK/cluster/tls
NBD=127.0.0.1:$((BASE+9))
CTL_BIN=$BUILD/tools/ctl/ringcachectl
CTL=("$CTL_BIN" --gateway "127.0.0.1:$((BASE+10))" --tls-dir "$T/admin" --timeout 10)
qio() {  # [-r] CLIENT_DIR VDI COMMAND...   (-r: open read-only)
  local ro=()
  if [ "$1" = -r ]; then ro=(-r); shift; fi
  local dir=$1 vdi=$2
  shift 2
  qemu-io "${ro[@]}" --object "tls-creds-x509,id=tls0,dir=$dir,endpoint=client" \
    --image-opts "driver=nbd,host=127.0.0.1,port=$((BASE+9)),export=$vdi,tls-creds=tls0" \
    "${@/#/-c}"
}

cluster up --etcd --tls --base-port "$BASE" --cache-nodes 3 --data-nodes 3 --replication 2 \
  --ssd-size 64MiB --ram-size 8MiB --create-vdi disk:64MiB --create-vdi secret:16MiB \
  > "$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "cluster up --tls"; }
log "cluster up with --etcd --tls on base port $BASE"

# ---- Real clients over TLS -------------------------------------------------------------------
out=$(qio "$T/client" disk "write -P 0x11 0 1M" "write -P 0x22 40M 256k" 2>&1) || fail "qemu-io write: $out"
out=$(qio "$T/client" disk "read -P 0x11 0 1M" "read -P 0x22 40M 256k" 2>&1) || fail "qemu-io read: $out"
echo "$out" | grep -q "Pattern verification failed" && fail "qemu-io read back wrong data: $out"
out=$(qemu-img info --object "tls-creds-x509,id=tls0,dir=$T/client,endpoint=client" \
  --image-opts "driver=nbd,host=127.0.0.1,port=$((BASE+9)),export=disk,tls-creds=tls0" 2>&1) ||
  fail "qemu-img info: $out"
echo "$out" | grep -q "virtual size: 64 MiB" || fail "qemu-img info: $out"
out=$(nbdinfo "nbds://$NBD/disk?tls-certificates=$T/client" 2>&1) || fail "nbdinfo: $out"
echo "$out" | grep -q "with TLS" || fail "nbdinfo does not report TLS: $out"
nbdcopy "nbds://$NBD/disk?tls-certificates=$T/client" "$WORK/disk.raw" || fail "nbdcopy"
cmp <(head -c 1048576 "$WORK/disk.raw") <(head -c 1048576 /dev/zero | tr '\0' '\021') ||
  fail "nbdcopy copied other bytes than qemu-io wrote"
log "qemu-io, qemu-img, nbdinfo and nbdcopy over TLS: ok"

# ---- Refused clients -------------------------------------------------------------------------
if out=$(nbdinfo "nbd://$NBD/disk" 2>&1); then fail "a plaintext client was served: $out"; fi
out=$(qemu-img info "nbd://$NBD/disk" 2>&1) && fail "qemu-img without TLS was served"
echo "$out" | grep -q "TLS is required" || fail "plaintext refusal does not say why: $out"
"$CTL_BIN" tls init-ca --dir "$WORK/other-ca" --cluster ringcache > /dev/null
"$CTL_BIN" tls issue --ca "$WORK/other-ca" --role client --name mallory --out "$WORK/mallory" \
  > /dev/null
if out=$(nbdinfo "nbds://$NBD/disk?tls-certificates=$WORK/mallory" 2>&1); then
  fail "a client of another CA was served: $out"
fi
log "plaintext and wrong-CA NBD clients refused"

# ---- A raw client: the protocol's STARTTLS rules ---------------------------------------------
python3 - "$BASE" << 'PY' || fail "raw STARTTLS checks"
import socket, struct, sys
port = int(sys.argv[1]) + 9
OPT = 0x49484156454F5054
def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.recv(18, socket.MSG_WAITALL)
    s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
    return s
def option(s, opt, data=b""):
    s.sendall(struct.pack(">QII", OPT, opt, len(data)) + data)
def reply(s):
    head = s.recv(20, socket.MSG_WAITALL)
    if len(head) < 20:
        return None
    magic, opt, typ, length = struct.unpack(">QIII", head)
    s.recv(length, socket.MSG_WAITALL)
    return typ
TLS_REQD, ACK = (1 << 31) | 5, 1
go = struct.pack(">I", 4) + b"disk" + struct.pack(">H", 0)
s = connect()
for opt, data in ((7, go), (6, go), (3, b""), (8, b"")):  # GO, INFO, LIST, STRUCTURED_REPLY
    option(s, opt, data)
    t = reply(s)
    assert t == TLS_REQD, f"option {opt} before STARTTLS answered {t:#x}, want TLS_REQD"
option(s, 1, b"disk")  # EXPORT_NAME cannot be refused: the server must hang up
assert s.recv(1) == b"", "NBD_OPT_EXPORT_NAME before STARTTLS was not refused"
s.close()
# Injection: STARTTLS and a plaintext GO in one packet. The GO must not be answered; the
# server reads it as (broken) TLS and closes.
s = connect()
s.sendall(struct.pack(">QII", OPT, 5, 0) + struct.pack(">QII", OPT, 7, len(go)) + go)
assert reply(s) == ACK, "STARTTLS not acknowledged"
rest = b""
try:
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        rest += chunk
except (ConnectionResetError, socket.timeout):
    pass
assert struct.pack(">Q", 0x3e889045565a9) not in rest, "plaintext after STARTTLS was answered"
print("raw STARTTLS rules: ok")
PY
log "raw client: TLS_REQD before STARTTLS, EXPORT_NAME refused, no plaintext after STARTTLS"

# ---- Access lists and read-only exports --------------------------------------------------------
"$CTL_BIN" tls issue --ca "$T/ca" --role client --name bob --out "$WORK/bob" > /dev/null
"${CTL[@]}" vdi access secret --allow client-0 --read-only on > /dev/null || fail "vdi access"
grep -q "ro client-0" <<< "$("${CTL[@]}" vdi list)" || fail "vdi list does not show the access"
out=$(qio -r "$T/client" secret "read 0 64k" 2>&1) || fail "the allowed client cannot read: $out"
# The export says read-only (NBD_FLAG_READ_ONLY): qemu will not open it for writing; the server
# answers writes EPERM (NbdServerTest covers that with a raw client).
out=$(qio "$T/client" secret "write -P 1 0 64k" 2>&1) && fail "a read-only export was opened rw"
echo "$out" | grep -qi "permission denied\|read-only\|read only" ||
  fail "a write to a read-only export was not refused: $out"
if out=$(qio -r "$WORK/bob" secret "read 0 64k" 2>&1); then fail "bob opened secret: $out"; fi
echo "$out" | grep -q "may not open" || fail "the refusal does not say why: $out"
out=$(qio "$WORK/bob" disk "read -P 0x11 0 64k" 2>&1) || fail "bob cannot read the open export: $out"
grep -q '"secret"' <<< "$(nbdinfo --list "nbds://$NBD/?tls-certificates=$WORK/bob" 2>&1)" &&
  fail "bob's export list shows secret"
# A client without a certificate opens nothing but public exports.
mkdir -p "$WORK/anon" && cp "$T/client/ca-cert.pem" "$WORK/anon/"
if out=$(qio -r "$WORK/anon" disk "read 0 64k" 2>&1); then
  fail "a client without a certificate opened disk: $out"
fi
echo "$out" | grep -q "needs a client certificate" || fail "the refusal does not say why: $out"
"${CTL[@]}" vdi access disk --public on | grep -q "rw public" || fail "vdi access --public on"
out=$(qio -r "$WORK/anon" disk "read -P 0x11 0 64k" 2>&1) ||
  fail "a public export refused a client without a certificate: $out"
# Public or not, a certificate that is sent must be of the cluster's CA: mallory's, offered by a
# client that trusts the cluster CA, is refused.
mkdir -p "$WORK/forged" && cp "$T/client/ca-cert.pem" "$WORK/forged/"
cp "$WORK/mallory/client-cert.pem" "$WORK/mallory/client-key.pem" "$WORK/forged/"
if out=$(qio -r "$WORK/forged" disk "read 0 64k" 2>&1); then
  fail "a certificate of another CA opened a public export: $out"
fi
# Only client certificates are NBD identities: a node's key opens nothing.
mkdir -p "$WORK/nodekey" && cp "$T/client/ca-cert.pem" "$WORK/nodekey/"
cp "$T/cachenode-1/cert.pem" "$WORK/nodekey/client-cert.pem"
install -m 600 "$T/cachenode-1/key.pem" "$WORK/nodekey/client-key.pem"
if out=$(qio -r "$WORK/nodekey" disk "read 0 64k" 2>&1); then
  fail "a cache node's certificate opened an export: $out"
fi
"${CTL[@]}" vdi access disk --public off > /dev/null
# One identity at a time: bob read-only, then off the list again; the last one stays.
"${CTL[@]}" vdi access secret --read-only off > /dev/null
"${CTL[@]}" vdi allow secret bob --read-only | grep -q "client-0,bob(ro)" || fail "vdi allow"
out=$(qio -r "$WORK/bob" secret "read 0 64k" 2>&1) || fail "bob (allowed ro) cannot read: $out"
out=$(qio "$WORK/bob" secret "write -P 2 0 64k" 2>&1) && fail "bob (allowed ro) wrote: $out"
out=$(qio "$T/client" secret "write -P 2 0 64k" "read -P 2 0 64k" 2>&1) ||
  fail "client-0 (allowed rw) cannot write: $out"
"${CTL[@]}" vdi deny secret bob > /dev/null || fail "vdi deny"
qio -r "$WORK/bob" secret "read 0 64k" > /dev/null 2>&1 && fail "bob read secret after vdi deny"
out=$("${CTL[@]}" vdi deny secret client-0 2>&1) && fail "the last identity was denied: $out"
echo "$out" | grep -q "last identity" || fail "denying the last identity: $out"
"${CTL[@]}" vdi access secret --allow-any --read-only off > /dev/null
out=$(qio "$WORK/bob" secret "write -P 3 0 64k" "read -P 3 0 64k" 2>&1) ||
  fail "secret not writable after --allow-any --read-only off: $out"
log "access lists and read-only exports: ok"

# ---- Admin API and /metrics --------------------------------------------------------------------
if out=$("$CTL_BIN" --gateway "127.0.0.1:$((BASE+10))" --timeout 5 vdi list 2>&1); then
  fail "the admin API answered a plaintext client: $out"
fi
if out=$("$CTL_BIN" --gateway "127.0.0.1:$((BASE+10))" --timeout 5 --tls-dir "$T/client" \
    vdi list 2>&1); then
  fail "the admin API answered a client (not admin) certificate: $out"
fi
A=$T/admin
# Read whole, then searched: `curl | grep -q` fails under pipefail when grep exits first (curl:
# "Failed writing body").
out=$(curl -sSf --cacert "$A/ca-cert.pem" --cert "$A/cert.pem" --key "$A/key.pem" \
  "https://127.0.0.1:$((BASE+11))/metrics") || fail "/metrics over HTTPS with a client certificate"
grep -q '^ringcache_nbd' <<< "$out" || fail "/metrics over HTTPS has no ringcache_nbd series"
curl -sf --cacert "$A/ca-cert.pem" "https://127.0.0.1:$((BASE+11))/metrics" > /dev/null &&
  fail "/metrics answered without a client certificate"
curl -sf "http://127.0.0.1:$((BASE+11))/metrics" > /dev/null && fail "/metrics answered plaintext"
log "admin API and /metrics refuse what they must"

# ---- etcd: one role per component; an NBD client's certificate may do nothing ------------------
ETCD_EP=127.0.0.1:$((BASE-1))
etcd_as() {  # HOLDER etcdctl-args...
  local d=$T/$1
  shift
  ETCDCTL_API=3 etcdctl --endpoints "https://$ETCD_EP" --command-timeout=5s \
    --cacert "$d/ca-cert.pem" --cert "$d/cert.pem" --key "$d/key.pem" "$@" 2>&1
}
out=$(etcd_as client get --prefix /ringcache/vdis) && fail "etcd: a client certificate read the catalog: $out"
grep -q "permission denied" <<< "$out" || fail "etcd refused a client certificate, but not for permission: $out"
out=$(etcd_as client put /ringcache/vdis/evil x) && fail "etcd: a client certificate wrote the catalog: $out"
out=$(etcd_as cachenode-1 get --prefix --keys-only /ringcache/vdis/) || fail "etcd: a cache node cannot read: $out"
grep -q "^/ringcache/vdis/disk" <<< "$out" || fail "etcd: a cache node does not see the catalog: $out"
out=$(etcd_as cachenode-1 put /ringcache/vdis/evil x) && fail "etcd: a cache node wrote the catalog: $out"
out=$(etcd_as datanode-1 put /ringcache/nodes/cache/9 x) && fail "etcd: a data node registered a cache node: $out"
out=$("$CTL_BIN" --etcd "$ETCD_EP" --tls-dir "$T/client" etcd enable-auth 2>&1) &&
  fail "etcd: a client certificate changed etcd's users: $out"
rc=0
"$CTL_BIN" --etcd "$ETCD_EP" --tls-dir "$T/admin" etcd add-user --role client hv-1 > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "etcd add-user --role client: want a usage error (2), got $rc"
log "etcd: client certificates refused, cache and data nodes write only their registrations"

# ---- A cache node with a certificate of another CA cannot join ---------------------------------
"$CTL_BIN" tls issue --ca "$WORK/other-ca" --role cachenode --name cachenode-4 \
  --ip 127.0.0.1 --out "$T/cachenode-4" > /dev/null
cp "$T/cachenode-1/web.yml" "$T/cachenode-4/web.yml"
if cluster add cachenode 4 > "$WORK/add.log" 2>&1; then
  fail "a cache node with a foreign certificate was started: $(cat "$WORK/add.log")"
fi
sleep 2
"${CTL[@]}" node list | grep -E "^cachenode +4 .* up" && fail "cache node 4 joined"
log "a cache node of another CA cannot join"

# ---- Wrong roles: same CA, a certificate of another role -----------------------------------------
# A daemon given another role's certificate stops at start and says which to issue.
"$CTL_BIN" tls issue --ca "$T/ca" --role client --name cachenode-5 --ip 127.0.0.1 \
  --out "$T/cachenode-5" > /dev/null
cp "$T/cachenode-1/web.yml" "$T/cachenode-5/web.yml"
if cluster add cachenode 5 > "$WORK/add5.log" 2>&1; then
  fail "a cache node with a client certificate was started: $(cat "$WORK/add5.log")"
fi
grep -q "this daemon is a cachenode" "$WORK/cluster/logs/cachenode-5.log" ||
  fail "the wrong-role refusal does not say why: $(tail -3 "$WORK/cluster/logs/cachenode-5.log")"
# A peer that presents one anyway (a raw TLS client with the cluster's CA) is refused by the port:
# data nodes admit cache nodes and gateways, cache nodes (gRPC and block data) gateways only.
probe() {  # PORT CERT_DIR h2|raw -> prints "accepted" or "refused: why"
  python3 - "$@" << 'PY'
import socket, ssl, sys
port, d, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ctx = ssl.create_default_context(cafile=f"{d}/ca-cert.pem")
ctx.check_hostname = False
ctx.load_cert_chain(f"{d}/cert.pem", f"{d}/key.pem")
if mode == "h2":
    ctx.set_alpn_protocols(["h2"])
try:
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)) as t:
        if mode == "h2":  # the HTTP/2 preface and an empty SETTINGS frame: gRPC answers SETTINGS
            t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
        print("accepted" if t.recv(1) else "refused: closed")
except ssl.SSLError as e:
    print(f"refused: {e.reason or e}")
except (ConnectionError, socket.timeout) as e:
    print(f"refused: {e!r}" if not isinstance(e, socket.timeout) else "no answer in 10 s")
PY
}
expect_probe() {  # WANT PORT CERT_DIR MODE WHAT
  local got
  got=$(probe "$2" "$3" "$4")
  case "$got" in "$1"*) ;; *) fail "$5: want $1, got '$got'" ;; esac
}
DATA_PORT=$(sed -n 's/.*"data_port": *\([0-9]*\).*/\1/p' "$WORK/cluster/ready/cachenode-1.json")
[ -n "$DATA_PORT" ] || fail "no data_port in the ready file of cache node 1"
expect_probe accepted $((BASE+101)) "$T/cachenode-1" h2 "data node gRPC, cache node certificate"
expect_probe refused $((BASE+101)) "$T/client" h2 "data node gRPC, client certificate"
expect_probe refused $((BASE+101)) "$T/admin" h2 "data node gRPC, admin certificate"
expect_probe accepted $((BASE+301)) "$T/gateway-1" h2 "cache node gRPC, gateway certificate"
expect_probe refused $((BASE+301)) "$T/cachenode-2" h2 "cache node gRPC, cache node certificate"
expect_probe refused $((BASE+301)) "$T/datanode-1" h2 "cache node gRPC, data node certificate"
expect_probe refused "$DATA_PORT" "$T/cachenode-2" raw "cache node block data, cache node cert"
expect_probe refused "$DATA_PORT" "$T/client" raw "cache node block data, client certificate"
expect_probe refused "$DATA_PORT" "$WORK/mallory" raw "cache node block data, foreign CA"
log "wrong roles: a client-role cache node stops at start; ports refuse peers of other roles"

# ---- ringcache-local: PSK clients, and plaintext off loopback ------------------------------------
printf 'alice:%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$WORK/keys.psk"
mkdir -p "$WORK/psk" && cp "$WORK/keys.psk" "$WORK/psk/keys.psk"
# A secret others can read is refused, naming the file and the fix.
chmod 644 "$WORK/keys.psk"
set +e
out=$(timeout 30 "$BUILD/tools/ringcache-local" --data-dir "$WORK/local0" --nbd-listen "127.0.0.1:$((BASE+1))" \
  --admin-listen "127.0.0.1:$((BASE+2))" --http-listen "127.0.0.1:$((BASE+3))" \
  --nbd-tls-psk "$WORK/keys.psk" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "ringcache-local started with a PSK file of mode 0644"
grep -q "chmod 600 $WORK/keys.psk" <<< "$out" || fail "no chmod advice for a 0644 PSK file: $out"
chmod 600 "$WORK/keys.psk"
"$BUILD/tools/ringcache-local" --data-dir "$WORK/local" --nbd-listen "127.0.0.1:$((BASE+1))" \
  --admin-listen "127.0.0.1:$((BASE+2))" --http-listen "127.0.0.1:$((BASE+3))" \
  --create-vdi d:16MiB --nbd-tls-psk "$WORK/keys.psk" --ready-file "$WORK/local.ready" \
  > "$WORK/local.log" 2>&1 &
LOCAL_PID=$!
for _ in $(seq 1 300); do [ -f "$WORK/local.ready" ] && break; sleep 0.1; done
[ -f "$WORK/local.ready" ] || fail "ringcache-local with PSK did not start: $(cat "$WORK/local.log")"
out=$(qemu-io --object "tls-creds-psk,id=tls0,dir=$WORK/psk,endpoint=client,username=alice" \
  --image-opts "driver=nbd,host=127.0.0.1,port=$((BASE+1)),export=d,tls-creds=tls0" \
  -c "write -P 7 0 64k" -c "read -P 7 0 64k" 2>&1) || fail "qemu-io with PSK: $out"
out=$(nbdinfo "nbds://alice@127.0.0.1:$((BASE+1))/d?tls-psk-file=$WORK/keys.psk" 2>&1) ||
  fail "nbdinfo with PSK: $out"
printf 'alice:%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$WORK/wrong.psk"
nbdinfo "nbds://alice@127.0.0.1:$((BASE+1))/d?tls-psk-file=$WORK/wrong.psk" > /dev/null 2>&1 &&
  fail "a wrong PSK was accepted"
kill "$LOCAL_PID"; wait "$LOCAL_PID" 2> /dev/null || true; LOCAL_PID=""
log "TLS-PSK: qemu-io and nbdinfo served, a wrong key refused, a PSK file of mode 0644 refused"

set +e
out=$("$BUILD/tools/ringcache-local" --data-dir "$WORK/local2" --nbd-listen "0.0.0.0:$((BASE+1))" \
  --admin-listen "127.0.0.1:$((BASE+2))" --http-listen "127.0.0.1:$((BASE+3))" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || fail "plaintext NBD on 0.0.0.0 without --insecure: exit $rc, want 2 ($out)"
echo "$out" | grep -q "insecure" || fail "the refusal does not name --insecure: $out"
log "plaintext off loopback refused without --insecure"
log "PASS"
