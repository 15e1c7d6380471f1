#!/bin/bash
# Interop test of the NBD server with the real Debian clients: nbdinfo, qemu-io, qemu-img,
# nbdcopy and fio (ioengine=nbd), against nbd-test-server (the real NbdServer over in-memory
# exports). Registered with ctest as NbdClients by gateway/CMakeLists.txt.
#
# Usage: nbd_clients_test.sh NBD_TEST_SERVER_BINARY [PROMTOOL]
# Exit: 0 pass, 1 fail, 77 skipped (a client is not installed). Everything it creates lives in a
# temporary directory that is removed on exit (kept, with the server log, when a check fails).
set -euo pipefail

server_bin=$1
promtool=${2:-}
for tool in nbdinfo qemu-io qemu-img nbdcopy fio python3; do
  if ! command -v "$tool" > /dev/null; then
    echo "SKIP: $tool is not installed (deploy/install-deps.sh installs it)"
    exit 77
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/nbd_clients.XXXXXX")
server_pid=""
failed=1
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2> /dev/null; then
    kill -TERM "$server_pid" 2> /dev/null || true
    wait "$server_pid" 2> /dev/null || true
  fi
  if [[ $failed -eq 0 ]]; then
    rm -rf "$work"
  else
    echo "--- server log (kept in $work) ---"
    tail -n 50 "$work/server.log" 2> /dev/null || true
  fi
}
trap cleanup EXIT

step() { echo "== $*"; }
fail() {
  echo "FAIL: $*"
  exit 1
}
# Runs a client with a bound on its run time.
run() { timeout 120 "$@"; }

"$server_bin" --listen 127.0.0.1:0 --export disk:256M --export copy:256M --export map:64M \
  --export fio:64M --export small:1M:4096 --ready-file "$work/ready.json" \
  --http-listen 127.0.0.1:0 > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
  [[ -s "$work/ready.json" ]] && break
  kill -0 "$server_pid" 2> /dev/null || fail "nbd-test-server exited during start-up"
  sleep 0.1
done
[[ -s "$work/ready.json" ]] || fail "nbd-test-server did not become ready"
port=$(sed -n 's/.*"nbd_port":\([0-9]*\).*/\1/p' "$work/ready.json")
http_port=$(sed -n 's/.*"http_port":\([0-9]*\).*/\1/p' "$work/ready.json")
base="nbd://127.0.0.1:$port"
echo "nbd-test-server pid $server_pid on port $port"

step "nbdinfo --json reports the capabilities and block sizes"
run nbdinfo --json "$base/disk" > "$work/info.json"
python3 - "$work/info.json" << 'EOF'
import json, sys
info = json.load(open(sys.argv[1]))
e = info["exports"][0]
assert info["protocol"] == "newstyle-fixed", info["protocol"]
for flag in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn", "can_cache",
             "can_df", "can_fast_zero"):
    assert e[flag] is True, (flag, e[flag])
assert e["is_read_only"] is False
assert e["export-size"] == 256 << 20, e["export-size"]
assert e["block_size_minimum"] == 512, e["block_size_minimum"]
assert e["block_size_preferred"] == 4096, e["block_size_preferred"]
assert e["block_size_maximum"] == 32 << 20, e["block_size_maximum"]
assert "base:allocation" in e["contexts"], e["contexts"]
EOF

step "nbdinfo --list lists every export"
run nbdinfo --list --json "$base" > "$work/list.json"
python3 - "$work/list.json" << 'EOF'
import json, sys
names = sorted(e["export-name"] for e in json.load(open(sys.argv[1]))["exports"])
assert names == ["copy", "disk", "fio", "map", "small"], names
EOF

step "an unknown export is refused"
if run nbdinfo "$base/missing" > "$work/missing.txt" 2>&1; then
  fail "nbdinfo accepted an unknown export"
fi
grep -qi "missing\|unknown\|not" "$work/missing.txt" || fail "no useful error: $(cat "$work/missing.txt")"
if run qemu-io -f raw -c "read 0 512" "$base/missing" > /dev/null 2>&1; then
  fail "qemu-io opened an unknown export"
fi

step "qemu-io write -P / read -P at unaligned offsets"
run qemu-io -f raw \
  -c "write -P 0x5a 1000 5000" -c "read -P 0x5a 1000 5000" -c "read -P 0 0 1000" \
  -c "read -P 0 6000 2192" -c "write -P 0x33 4095 2" -c "read -P 0x33 4095 2" \
  -c "read -P 0x5a 1000 3095" -c "write -P 0x71 33554431 3" -c "read -P 0x71 33554431 3" \
  -c "write -z 2000 100" -c "read -P 0 2000 100" -c "flush" \
  "$base/disk" > "$work/qemu-io.txt" 2>&1 || fail "qemu-io failed: $(cat "$work/qemu-io.txt")"
if grep -qiE "fail|error" "$work/qemu-io.txt"; then
  fail "qemu-io: $(cat "$work/qemu-io.txt")"
fi
# An export with a 4 KiB minimum block: qemu does read-modify-write for the sub-block request.
run qemu-io -f raw -c "write -P 0x77 100 10" -c "read -P 0x77 100 10" -c "read -P 0 0 100" \
  "$base/small" > "$work/qemu-io-small.txt" 2>&1 || fail "qemu-io (small) failed"
if grep -qiE "fail|error" "$work/qemu-io-small.txt"; then
  fail "qemu-io (small): $(cat "$work/qemu-io-small.txt")"
fi

step "qemu-img convert a 256 MiB random image in and out, qemu-img compare"
head -c 256M /dev/urandom > "$work/src.img"
run qemu-img convert -n -f raw -O raw "$work/src.img" "$base/disk"
run qemu-img compare -f raw -F raw "$work/src.img" "$base/disk" > "$work/compare.txt" ||
  fail "qemu-img compare: $(cat "$work/compare.txt")"
grep -q "Images are identical" "$work/compare.txt" || fail "$(cat "$work/compare.txt")"
run qemu-img convert -f raw -O raw "$base/disk" "$work/out.img"
cmp "$work/src.img" "$work/out.img" || fail "image read back with qemu-img differs"
rm -f "$work/out.img"

step "nbdcopy --connections=4 in and out, checksums equal"
run nbdcopy --connections=4 --flush "$work/src.img" "$base/copy"
run nbdcopy --connections=4 "$base/copy" "$work/copy-out.img"
src_sum=$(sha256sum < "$work/src.img")
out_sum=$(sha256sum < "$work/copy-out.img")
[[ "$src_sum" == "$out_sum" ]] || fail "nbdcopy round trip changed the data"
rm -f "$work/copy-out.img" "$work/src.img"

step "qemu-img map shows never-written ranges as holes"
run qemu-io -f raw -c "write -P 0x11 1M 64K" -c "write -P 0x22 10M 4K" -c "write -P 0x33 20M 1M" \
  -c "discard 20M 512K" "$base/map" > /dev/null
run qemu-img map --output=json -f raw "$base/map" > "$work/map.json"
python3 - "$work/map.json" << 'EOF'
import json, sys
M = 1 << 20
written = [(1 * M, 64 << 10), (10 * M, 4 << 10), (20 * M + M // 2, M // 2)]
ranges = json.load(open(sys.argv[1]))
assert sum(r["length"] for r in ranges) == 64 * M, ranges
def covered(start, length):
    return any(start < s + l and s < start + length for s, l in written)
for r in ranges:
    if covered(r["start"], r["length"]):
        assert r["data"] is True and r["zero"] is False, r
        assert any(r["start"] >= s and r["start"] + r["length"] <= s + l for s, l in written), r
    else:
        assert r["data"] is False and r["zero"] is True, r
data = sorted((r["start"], r["length"]) for r in ranges if r["data"])
assert data == written, data
EOF

step "fio ioengine=nbd random writes, verify=crc32c, iodepth 32, 2 jobs"
# Run from $work: fio may drop state files into its working directory.
(cd "$work" && run fio --name=nbd-verify --ioengine=nbd --uri="$base/fio" --rw=randwrite \
  --bs=4k --size=32m --offset_increment=32m --iodepth=32 --numjobs=2 --verify=crc32c \
  --do_verify=1 --verify_fatal=1 --verify_state_save=0 --group_reporting \
  --output="$work/fio.txt") ||
  fail "fio failed: $(cat "$work/fio.txt")"
grep -q "err= 0" "$work/fio.txt" || fail "fio reported errors: $(cat "$work/fio.txt")"

step "metrics"
if command -v curl > /dev/null; then
  curl -sf "http://127.0.0.1:$http_port/metrics" > "$work/metrics.txt"
  grep -q 'ringcache_nbd_requests_total{command="write",result="ok",vdi="[^"]*"}' "$work/metrics.txt" ||
    fail "no NBD request metrics"
  if [[ -n "$promtool" ]]; then
    "$promtool" check metrics < "$work/metrics.txt" || fail "promtool check metrics"
  fi
fi

step "SIGTERM stops the server cleanly"
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
[[ $status -eq 0 ]] || fail "nbd-test-server exited with $status"

failed=0
echo "PASS"
