#!/usr/bin/env bash
# Binary-level tests of ringcache-sim, registered with ctest by tools/sim/CMakeLists.txt.
#   cli_test.sh SIM DATA_DIR CASE
# Golden cases compare stdout with DATA_DIR/expected/CASE.txt; with RC_SIM_REGEN=1 they rewrite
# the expected file instead (review the diff before committing it).
set -uo pipefail
SIM=$1
DATA=$2
CASE=$3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL [$CASE]: $*" >&2; exit 1; }

# Drops the policy engine's metadata byte counts (its memory layout is not a simulator result and
# changes with unrelated policy work): JSON fields metadata_bytes*, table column meta_B/blk.
normalize() {
  python3 -c '
import json, sys
col = None
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith("{"):
        r = json.loads(line)
        for k in [k for k in r if k.startswith("metadata_bytes")]:
            del r[k]
        print(json.dumps(r, sort_keys=True))
        continue
    cells = line.split()
    if "meta_B/blk" in cells:
        col = cells.index("meta_B/blk")
    elif not cells or cells[0] == "policy":
        col = None
    if col is not None and len(cells) > col:
        del cells[col]
        line = "  ".join(cells)
    print(line)
'
}

golden() {  # golden NAME -- command...
  local name=$1; shift
  "$@" >"$TMP/raw.txt" 2>"$TMP/err.txt" || { cat "$TMP/err.txt" >&2; fail "exit status $?"; }
  normalize <"$TMP/raw.txt" >"$TMP/out.txt"
  if [ "${RC_SIM_REGEN:-}" = 1 ]; then
    cp "$TMP/out.txt" "$DATA/expected/$name.txt"; echo "regenerated $name"; return 0
  fi
  diff -u "$DATA/expected/$name.txt" "$TMP/out.txt" || fail "output differs from expected/$name.txt"
}

expect_exit() {  # expect_exit CODE PATTERN -- command...
  local code=$1 pattern=$2; shift 2
  "$@" >"$TMP/out.txt" 2>"$TMP/err.txt"
  local got=$?
  [ "$got" = "$code" ] || { cat "$TMP/err.txt" >&2; fail "'$*' exited $got, want $code"; }
  grep -q -- "$pattern" "$TMP/err.txt" || { cat "$TMP/err.txt" >&2; fail "stderr lacks '$pattern'"; }
}

POLICIES="lru,fifo,arc,s3fifo,lru+sieve,vbq+lru+sieve,lru+rpac,uarc,opt"
case "$CASE" in
  msr_table)
    golden msr_table "$SIM" "$DATA/msr_tiny.csv" --policy "$POLICIES" --size 2,4,8 --ram 2 \
      --no-timing --quiet --per-vdi ;;
  spc_json)
    golden spc_json "$SIM" "$DATA/spc_tiny.spc" --policy lru,arc,opt --size 3,50% --json \
      --no-timing --quiet ;;
  fiu_gzip_table)
    gzip -n -c "$DATA/fiu_tiny.txt" >"$TMP/fiu.txt.gz"
    golden fiu_gzip_table "$SIM" "$TMP/fiu.txt.gz" --policy "$POLICIES" --size 2,4 --ram 1 \
      --no-timing --quiet ;;
  gen_table)
    golden gen_table "$SIM" --gen "multi:vdis=3,blocks=500/1000/2000,rates=4/2/1,write=0.3,requests=20000,seed=3" \
      --policy lru,vbq+lru,vbq+lru+sieve,opt --size 5%,20% --no-timing --quiet --per-vdi --occupancy ;;
  convert_roundtrip)
    "$SIM" convert "$DATA/fiu_tiny.txt" "$TMP/fiu.bin" --quiet 2>/dev/null || fail "convert failed"
    "$SIM" "$DATA/fiu_tiny.txt" --policy lru,opt --size 4 --no-timing -q --per-vdi >"$TMP/a.txt" || fail "run text"
    "$SIM" "$TMP/fiu.bin" --policy lru,opt --size 4 --no-timing -q --per-vdi >"$TMP/b.txt" || fail "run bin"
    diff -u "$TMP/a.txt" "$TMP/b.txt" || fail "binary replay differs from text replay"
    "$SIM" gen "zipf:blocks=100,requests=500,seed=2" -o "$TMP/z.bin" -q || fail "gen"
    "$SIM" --gen "zipf:blocks=100,requests=500,seed=2" --policy lru --size 10 --no-timing -q >"$TMP/c.txt"
    "$SIM" "$TMP/z.bin" --policy lru --size 10 --no-timing -q >"$TMP/d.txt"
    diff -u "$TMP/c.txt" "$TMP/d.txt" || fail "generated file replay differs from --gen replay" ;;
  usage_errors)
    expect_exit 2 "not expected"   "$SIM" "$DATA/msr_tiny.csv" --policy lru --size 4 --bogus
    expect_exit 2 "is 0 blocks"    "$SIM" "$DATA/msr_tiny.csv" --policy lru --size 0
    expect_exit 2 "bad size"       "$SIM" "$DATA/msr_tiny.csv" --policy lru --size 12QB
    expect_exit 2 "policy 'nope'"  "$SIM" "$DATA/msr_tiny.csv" --policy nope --size 4
    expect_exit 2 "--policy is required" "$SIM" "$DATA/msr_tiny.csv" --size 4
    expect_exit 2 "exactly one"    "$SIM" --policy lru --size 4
    expect_exit 2 "unknown generator" "$SIM" --gen "zipff:blocks=1" --policy lru --size 4
    expect_exit 2 "block-size"     "$SIM" "$DATA/msr_tiny.csv" --policy lru --size 4 --block-size 1000
    expect_exit 2 "replicas"       "$SIM" "$DATA/msr_tiny.csv" --policy lru --size 4 --replicas 3
    "$SIM" --help >"$TMP/help.txt" 2>&1 || fail "--help exited non-zero"
    grep -q "Generators" "$TMP/help.txt" || fail "--help lacks the generator list" ;;
  runtime_errors)
    expect_exit 1 "no_such"        "$SIM" "$DATA/no_such.csv" --policy lru --size 4
    expect_exit 1 "msr_malformed.csv:3: Type must be Read or Write" \
      "$SIM" "$DATA/msr_malformed.csv" --policy lru --size 4 --strict
    # Without --strict: skipped, counted, reported with file:line, exit 0.
    expect_exit 0 "skipped 5 malformed line" "$SIM" "$DATA/msr_malformed.csv" --policy lru --size 4 -q
    grep -q "msr_malformed.csv:7: DiskNumber" "$TMP/err.txt" || fail "no file:line report" ;;
  *) fail "unknown case" ;;
esac
echo "ok [$CASE]"
