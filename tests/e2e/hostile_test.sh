#!/usr/bin/env bash
# The hostile-client suite (docs/security.md, "Hostile clients"): a real TLS cluster from
# `deploy/cluster.sh up --etcd --tls`, and tests/e2e/hostile_clients.py tries what a client that
# lies, floods or holds the wrong certificate could: no certificate, another CA's, an expired one,
# a valid one without rights to the export, the NBD client certificate against etcd and the admin
# port, oversized and truncated frames on the NBD, gRPC and block data ports, a byte a second,
# 10,000 idle connections from one address. It prints `security: tried=N refused=N` and fails
# unless every attempt is refused and, at the end, a well-behaved client (qemu-io) still reads
# what it wrote before the attack and writes and reads anew.
#
#   tests/e2e/hostile_test.sh BUILD_DIR        (KEEP=1 keeps the cluster's directory)
set -euo pipefail

BUILD=$(cd "${1:?usage: hostile_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-hostile.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own
command -v etcd > /dev/null || { echo "SKIP: no etcd"; exit 77; }
command -v openssl > /dev/null || { echo "SKIP: no openssl (for the expired certificate)"; exit 77; }

log() { echo "[hostile] $(date +%T) $*"; }
fail() {
  echo "[hostile] FAIL: $*" >&2
  tail -n 20 "$WORK"/cluster/logs/gateway-1.log >&2 || true
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
cleanup() {
  set +e
  cluster down > /dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

T=$WORK/cluster/tls
CTL_BIN=$BUILD/tools/ctl/ringcachectl
CTL=("$CTL_BIN" --gateway "127.0.0.1:$((BASE+10))" --tls-dir "$T/admin" --timeout 10)
qio() {  # qemu-io as the cluster's NBD client (client-0) on the export `disk`
  qemu-io --object "tls-creds-x509,id=tls0,dir=$T/client,endpoint=client" \
    --image-opts "driver=nbd,host=127.0.0.1,port=$((BASE+9)),export=disk,tls-creds=tls0" \
    "${@/#/-c}"
}
qio_ok() {  # what commands...: qemu-io that must succeed and print no error
  local what=$1 out
  shift
  out=$(qio "$@" 2>&1) || fail "$what: $out"
  if grep -qi "fail\|error\|pattern verification" <<< "$out"; then fail "$what: $out"; fi
}

cluster up --etcd --tls --base-port "$BASE" --cache-nodes 2 --data-nodes 2 --replication 2 \
  --ssd-size 64MiB --ram-size 8MiB --create-vdi disk:64MiB \
  > "$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "cluster up --etcd --tls"; }
log "cluster up with --etcd --tls on base port $BASE"

# The certificates of the attackers: bob (a client of the cluster's CA, not on the export's
# list), client-0 of another CA, and expired-1 (on the list, but its validity ended in 2021).
"$CTL_BIN" tls issue --ca "$T/ca" --role client --name bob --out "$T/bob" > /dev/null
"$CTL_BIN" tls init-ca --dir "$WORK/other-ca" --cluster ringcache > /dev/null
"$CTL_BIN" tls issue --ca "$WORK/other-ca" --role client --name client-0 --out "$T/other" > /dev/null
mkdir -p "$WORK/expired-ca" "$T/expired"
touch "$WORK/expired-ca/index.txt"
echo 1000 > "$WORK/expired-ca/serial"
cat > "$WORK/expired-ca/ca.cnf" << CNF
[ca]
default_ca = expired
[expired]
database = $WORK/expired-ca/index.txt
new_certs_dir = $WORK/expired-ca
serial = $WORK/expired-ca/serial
default_md = sha256
policy = any
x509_extensions = ext
[any]
organizationName = supplied
organizationalUnitName = supplied
commonName = supplied
[ext]
basicConstraints = CA:FALSE
keyUsage = digitalSignature
extendedKeyUsage = clientAuth, serverAuth
CNF
openssl ecparam -genkey -name prime256v1 -noout -out "$T/expired/key.pem" 2> /dev/null
chmod 600 "$T/expired/key.pem"
openssl req -new -key "$T/expired/key.pem" -subj "/O=ringcache/OU=client/CN=expired-1" \
  -out "$WORK/expired-ca/req.pem"
openssl ca -batch -config "$WORK/expired-ca/ca.cnf" -cert "$T/ca/ca-cert.pem" \
  -keyfile "$T/ca/ca-key.pem" -startdate 20200101000000Z -enddate 20210101000000Z -notext \
  -in "$WORK/expired-ca/req.pem" -out "$T/expired/cert.pem" > "$WORK/expired-ca/log" 2>&1 ||
  { cat "$WORK/expired-ca/log"; fail "openssl ca: the expired certificate"; }
cp "$T/ca/ca-cert.pem" "$T/expired/ca-cert.pem"
"${CTL[@]}" vdi allow disk client-0 > /dev/null || fail "vdi allow disk client-0"
"${CTL[@]}" vdi allow disk expired-1 > /dev/null || fail "vdi allow disk expired-1"

# Before the attack: 4 MiB of 0x33 and the marker block (64 KiB of 0x5a at 8 MiB).
qio_ok "write before the attack" "write -P 0x33 0 4M" "write -P 0x5a 8M 64k"
log "4 MiB and a marker block written with the client certificate; attacking"

ready_field() {  # ROLE ID FIELD
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
    "$WORK/cluster/ready/$1-$2.json" "$3"
}
status=0
python3 "$ROOT/tests/e2e/hostile_clients.py" --tls "$T" --ctl "$CTL_BIN" \
  --nbd $((BASE+9)) --admin $((BASE+10)) --etcd "127.0.0.1:$((BASE-1))" --export disk \
  --data-port "$(ready_field cachenode 1 data_port)" --cache-grpc "$(ready_field cachenode 1 grpc_port)" \
  --data-grpc "$(ready_field datanode 1 grpc_port)" \
  --gateway-pid "$(cat "$WORK/cluster/pids/gateway-1.pid")" \
  --cache-pid "$(cat "$WORK/cluster/pids/cachenode-1.pid")" \
  --marker-offset $((8 << 20)) --marker-byte $((0x5a)) --slow-offset $((12 << 20)) | tee "$WORK/attacks.log" || status=$?
grep -q "^security: tried=" "$WORK/attacks.log" || fail "the suite printed no summary"
[ "$status" = 0 ] || fail "an attempt was not refused (above)"

# Revocation without a restart: carol (NBD) and admin-2 (admin API) work, are revoked (crl.pem
# into the gateway's --tls-dir, SIGHUP), and are refused from then on, while an NBD connection
# of client-0 opened before the SIGHUP goes on serving and client-0 and admin connect anew.
"$CTL_BIN" tls issue --ca "$T/ca" --role client --name carol --out "$T/carol" > /dev/null
"$CTL_BIN" tls issue --ca "$T/ca" --role admin --name admin-2 --out "$T/admin-2" > /dev/null
"${CTL[@]}" vdi allow disk carol > /dev/null || fail "vdi allow disk carol"
as_carol() {
  qemu-io --object "tls-creds-x509,id=tls0,dir=$T/carol,endpoint=client" \
    --image-opts "driver=nbd,host=127.0.0.1,port=$((BASE+9)),export=disk,tls-creds=tls0" \
    -c "read -P 0x33 0 64k" 2>&1
}
out=$(as_carol) || fail "carol before her revocation: $out"
"$CTL_BIN" --gateway "127.0.0.1:$((BASE+10))" --tls-dir "$T/admin-2" --timeout 10 vdi list \
  > /dev/null 2>&1 || fail "admin-2 before its revocation"
GW_PID=$(cat "$WORK/cluster/pids/gateway-1.pid")
python3 - "$ROOT/tests/e2e" "$T" $((BASE+9)) "$GW_PID" "$T/gateway-1" "$CTL_BIN" \
  "$T/carol/cert.pem" "$T/admin-2/cert.pem" << 'PY' || fail "revocation on SIGHUP (above)"
import os, shutil, signal, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
import hostile_clients as h
tls, port, pid, gw_dir, ctl = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
c = h.Nbd(port)
c.starttls(h.tls_context("client", tls))
c.go("disk")
subprocess.run([ctl, "tls", "revoke", "--ca", os.path.join(tls, "ca"), *sys.argv[7:]], check=True)
shutil.copy(os.path.join(tls, "ca", "crl.pem"), os.path.join(gw_dir, "crl.pem"))
os.kill(pid, signal.SIGHUP)
time.sleep(1)
c.request(h.CMD_READ, 0, 4096)
error, _ = c.simple_reply()
data = h.recv_exact(c.sock, 4096)
c.close()
if error or data != b"\x33" * 4096:
    sys.exit(f"the connection opened before SIGHUP read error {error} or other bytes")
print("[hostile] an NBD connection opened before the SIGHUP still reads its data")
PY
grep -q "SIGHUP: TLS credentials reloaded" "$WORK/cluster/logs/gateway-1.log" ||
  fail "the gateway did not log the reload"
out=$(as_carol) && fail "carol was served after her revocation: $out"
grep -q "client certificate refused: .*revoked" "$WORK/cluster/logs/gateway-1.log" ||
  fail "carol refused, but the gateway logged no revoked certificate: $out"
if out=$("$CTL_BIN" --gateway "127.0.0.1:$((BASE+10))" --tls-dir "$T/admin-2" --timeout 5 vdi list 2>&1); then
  fail "admin-2 was served after its revocation: $out"
fi
"${CTL[@]}" vdi list > /dev/null || fail "the admin certificate after the SIGHUP"
qio_ok "client-0 after the SIGHUP" "read -P 0x33 0 64k"
log "revocation: carol (NBD) and admin-2 (admin API) refused after crl.pem and SIGHUP; an open connection kept"

# After: every daemon still up, and the well-behaved client finds its data and writes anew.
out=$("${CTL[@]}" status 2>&1) || fail "ringcachectl status after the attack: $out"
grep -q "5 up" <<< "$out" || fail "not every daemon is up after the attack: $out"
qio_ok "read back after the attack" "read -P 0x33 0 4M" "read -P 0x5a 8M 64k" "read -P 0 12M 4k"
qio_ok "write and read after the attack" "write -P 0x77 16M 1M" "read -P 0x77 16M 1M"
log "after the attack: every daemon up; the client read its data back and wrote anew"
log "PASS"
