#!/usr/bin/env bash
# Runs the experiments of docs/experiments.md and prints their tables (Markdown). Each
# experiment reproduces, in direction, one paper's headline on a synthetic workload shaped like
# the paper's; the doc explains the workloads and the results.
#
#   tools/sim/experiments.sh [BUILD_DIR] [EXPERIMENT...]
# EXPERIMENT is one of rpac uarc sieve cmf lcr vbq default budget (default: all). Deterministic: the same build
# prints the same tables (no wall-clock numbers).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-sim}
shift || true
SIM=$BUILD/tools/sim/ringcache-sim
TABLE="python3 $ROOT/tools/sim/sim_table.py"
if [ ! -x "$SIM" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" --target ringcache-sim -j1
fi
WHICH=("$@")
[ ${#WHICH[@]} -eq 0 ] && WHICH=(rpac uarc sieve cmf lcr vbq default budget)

# run COLS [--vdi VCOLS] -- SIM-ARGS...: prints the command, then the table.
run() {
  local cols=$1; shift
  local vdi=()
  if [ "$1" = "--vdi" ]; then vdi=(--vdi "$2"); shift 2; fi
  [ "$1" = "--" ] && shift
  local shown=""
  for a in "$@"; do
    case "$a" in *[\ \(\)\;\&\|]*) shown+=" '$a'" ;; *) shown+=" $a" ;; esac
  done
  echo
  echo '```'
  echo "\$ ringcache-sim$shown --json --quiet --no-timing"
  echo '```'
  echo
  "$SIM" "$@" --json --quiet --no-timing | $TABLE --cols "$cols" "${vdi[@]}"
}

rpac() {
  echo "## E1 RPAC (paper 000): replacements vs LRU/FIFO/ARC at small caches"
  local G="hotspot:blocks=1000000,areas=8,area=16384,window=512,density=0.5,cycle=20000,hot=0.6,requests=1000000,seed=1"
  run "policy,size_blocks,hit%,hits,replacements,replacements/lru,hits/lru" -- \
    --gen "$G" --policy "lru,fifo,arc,lru+rpac(cycle=10000),fifo+rpac(cycle=10000),opt" \
    --size 1024,2048,4096,8192
  echo
  echo "### E1b RPAC sensitivity to the decay cycle T (400k requests)"
  local G2="hotspot:blocks=1000000,areas=8,area=16384,window=512,density=0.5,cycle=20000,hot=0.6,requests=400000,seed=1"
  run "policy,size_blocks,hit%,replacements,replacements/lru" -- \
    --gen "$G2" --policy "lru,lru+rpac(cycle=5000),lru+rpac(cycle=10000),lru+rpac(cycle=20000),lru+rpac(cycle=40000),lru+rpac" \
    --size 2048,4096
}

uarc() {
  echo "## E2 UARC vs IARC (paper 001): equal RAM and SSD, read-only"
  echo
  echo "### E2a Zipf(0.9) over 200k blocks"
  run "policy,size_blocks,ram_blocks,hit%,hits_ram,hits_ssd,hits/iarc,ssd_writes,virtual_time_s" -- \
    --gen "zipf:blocks=200000,theta=0.9,requests=1000000,seed=2" --policy iarc,garc,uarc \
    --size 0.5%,2%,8%,32% --ram-ratio 1
  echo
  echo "### E2b Zipf(0.8) hot set plus a 30k-block loop"
  run "policy,size_blocks,ram_blocks,hit%,hits_ram,hits_ssd,hits/iarc,ssd_writes,virtual_time_s" -- \
    --gen "zipf:blocks=100000,theta=0.8,requests=600000,iat_us=100,seed=3" \
    --gen "scan:blocks=30000,requests=400000,iat_us=150,base=200000,seed=4" \
    --policy iarc,garc,uarc --size 0.5%,2%,8%,32% --ram-ratio 1
}

sieve() {
  echo "## E3 Sieve admission (papers 001 and 002): SSD allocations vs hits, read-only"
  echo
  echo "### E3a Zipf(1.0) over 1M blocks (a long tail of one-time blocks)"
  run "policy,size_blocks,hit%,hits/lru,ssd_writes,lru/ssd_writes" -- \
    --gen "zipf:blocks=1000000,theta=1.0,requests=2000000,seed=5" \
    --policy "lru,lru+sieve,lru+sieve(threshold=4),lru+sieve(threshold=8),opt" --size 0.5%,2%,8%
  echo
  echo "### E3b Moving hot spots (the E1 workload): popularity changes every cycle"
  run "policy,size_blocks,hit%,hits/lru,ssd_writes,lru/ssd_writes" -- \
    --gen "hotspot:blocks=1000000,areas=8,area=16384,window=512,density=0.5,cycle=20000,hot=0.6,requests=1000000,seed=1" \
    --policy "lru,lru+sieve,lru+sieve(len=8192),lru+sieve(threshold=3,len=32768)" --size 2048,8192
}

cmf() {
  echo "## E4 CMF (paper 003): an 8 GiB sequential write onto a 5 GiB write-back cache"
  local G="seqwrite:blocks=2097152,size=16,loops=1,iat_us=0"
  local C="policy,ssd_writes,hdd_writes,bypassed,dirty_at_end,virtual_time_s,makespan_s,makespan_s/none,mean_response_us"
  echo
  echo "### E4a HDD streams at 29 us per 4 KiB (paper 003 Fig. 1: 8 GB in 59 s), SSD as paper 001 Table I, one channel"
  run "$C" -- --gen "$G" --policy none,lru,lru+cmf --size 5GiB --hdd-seq-us 29 --iodepth 1
  echo
  echo "### E4b The same with an 8-channel SSD"
  run "$C" -- --gen "$G" --policy none,lru,lru+cmf --size 5GiB --hdd-seq-us 29 --iodepth 1 --ssd-channels 8
  echo
  echo "### E4c Flat HDD cost (paper 001 Table I: every HDD access 5 ms, no streaming)"
  run "$C" -- --gen "$G" --policy none,lru,lru+cmf --size 5GiB --iodepth 1
}

lcr() {
  echo "## E5 LCR (paper 004): mean response time with skewed data-node load"
  local C="policy,size_blocks,hit%,hdd_writes,mean_response_us,mean_response_us/lru,max_response_us"
  for iat in 1500 2500; do
    echo
    echo "### E5 write-heavy Zipf, 8 data nodes, node 0 four times slower, one request every $iat us"
    run "$C" -- --gen "zipf:blocks=100000,theta=0.9,requests=300000,write=0.9,iat_us=$iat,seed=6" \
      --policy "lru,cflru,lru+lcr,lru+lcr(window=32),lru+lcr(window=512)" --size 5000,20000 \
      --data-nodes 8 --node-speed 4,1,1,1,1,1,1,1
  done
  echo
  echo "### E5c Control: the same (1500 us) with equal data nodes"
  run "$C" -- --gen "zipf:blocks=100000,theta=0.9,requests=300000,write=0.9,iat_us=1500,seed=6" \
    --policy "lru,cflru,lru+lcr" --size 5000,20000 --data-nodes 8
}

vbq() {
  echo "## E6 VBQ (paper 002): space per VDI and eq. 6"
  local G="multi:vdis=3,rates=84/21/50,write=0.59/0.91/0.70,blocks=100000/400000/100000,theta=0.9/0.3/0.9,requests=1000000,seed=7"
  run "policy,size_blocks,hit%" -- --gen "$G" \
    --policy "lru,vbq+lru,vbq(umax=0.95,umin=0.90,dmax=0.89,dmin=0.84)+lru,vbq+lru+sieve" \
    --size 5%,20%
  echo
  echo "### E6b Per VDI (vdi0 = usr, vdi1 = rsrch, vdi2 = web)"
  run "policy,size_blocks" --vdi "name,share%,hit%,occupancy_mean,occupancy_end,A_m,L_m,U_i,D_i,U-D" -- \
    --gen "$G" --policy "lru,vbq+lru,vbq(umax=0.95,umin=0.90,dmax=0.89,dmin=0.84)+lru" \
    --size 5%,20% --occupancy
}

# Paper 002's three VDIs (E6's workload) and one read-mostly Zipf(0.99) disk: E7b and E7d, and
# E7f runs them again with the node's tiers.
E7_MIX="multi:vdis=3,rates=84/21/50,write=0.59/0.91/0.70,blocks=100000/400000/100000,theta=0.9/0.3/0.9,requests=1000000,seed=7"
E7_ZIPF="zipf:blocks=200000,theta=0.99,requests=1000000,write=0.1,seed=3"

# E7's workloads, each at 1, 5, 20 and 50% of its working set, under the policies $1 (a comma
# list) with the columns $2. The MSR CSV is written to $3.
e7_tables() {
  local P=$1 C=$2 T=$3
  # Three disks in MSR Cambridge CSV (written from generated requests): a Zipf(0.9) disk with 30%
  # writes, a flatter Zipf(0.7) disk with 50% writes, and a disk that only scans.
  "$SIM" gen -q -o "$T/three.bin" \
    "zipf:blocks=100000,theta=0.9,requests=400000,write=0.3,vdi=0,iat_us=100,seed=11" \
    "zipf:blocks=200000,theta=0.7,requests=300000,write=0.5,vdi=1,iat_us=133,seed=12" \
    "scan:blocks=300000,requests=300000,vdi=2,iat_us=133,seed=13"
  python3 - "$T/three.bin" "$T/three.csv" << 'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
count = struct.unpack_from("<Q", data, 16)[0]
with open(sys.argv[2], "w") as out:
    for i in range(count):
        t, off, lo, vdi = struct.unpack_from("<QQII", data, 64 + 24 * i)
        op = "Write" if lo >> 31 else "Read"
        out.write("%d,host%d,0,%s,%d,%d,100\n" % (128166372000000000 + t * 10, vdi, op, off,
                                                   lo & 0x7FFFFFFF))
PY
  echo
  echo "### E7a Three disks, MSR CSV (one disk scans)"
  run "$C" -- "$T/three.csv" --policy "$P" --size 1%,5%,20%,50%
  echo
  echo "### E7b Paper 002's three VDIs (E6's workload, 59-91% writes)"
  run "$C" -- --gen "$E7_MIX" --policy "$P" --size 1%,5%,20%,50%
  echo
  echo "### E7c A Zipf(0.99) disk, a uniform disk and a sequential writer"
  run "$C" -- --gen "zipf:blocks=50000,theta=0.99,requests=400000,write=0.2,vdi=0,iat_us=100,seed=21" \
    --gen "uniform:blocks=1000000,requests=400000,write=0.2,vdi=1,iat_us=100,seed=22" \
    --gen "seqwrite:blocks=200000,requests=200000,vdi=2,iat_us=200,seed=23" \
    --policy "$P" --size 1%,5%,20%,50%
  echo
  echo "### E7d One read-mostly Zipf(0.99) disk"
  run "$C" -- --gen "$E7_ZIPF" --policy "$P" --size 1%,5%,20%,50%
  echo
  echo "### E7e Moving hot spots (E1's workload, read-only)"
  run "$C" -- --gen "hotspot:blocks=1000000,areas=8,area=16384,window=512,density=0.5,cycle=20000,hot=0.6,requests=1000000,seed=1" \
    --policy "$P" --size 1%,5%,20%,50%
}

NEW_DEFAULT="vbq(share=utility)+arc+sieve(freq=1,region_adapt=1,seen=1,writes=1)+lcr"
E7_COLS="policy,size_blocks,hit%,gap:arc|s3fifo,ssd_writes,ssd_writes/lru,hdd_writes/lru"

# E7: the default policy against LRU, ARC, S3-FIFO and the previous default, on five workloads.
default() {
  echo "## E7 The default policy: hits of the best online policy, SSD writes well below LRU's"
  local NEW=$NEW_DEFAULT
  local OLD="vbq(share=utility)+arc+sieve(freq=1,region_adapt=1)+lcr"
  local P="${E7_POLICIES:-lru,arc,s3fifo,$OLD,$NEW}"
  local T
  T=$(mktemp -d)
  e7_tables "$P" "$E7_COLS" "$T"
  echo
  echo "### E7f The node's tiers: a RAM tier of 1/16 of the SSD; placement uarc, exclusive, sieved"
  local PT="$NEW,vbq(share=utility)+arc+lcr"
  local CT="policy,size_blocks,ram_blocks,hit%,hits_ram,ssd_writes"
  for pl in uarc "uarc(exclusive)" "uarc(sieve=1)"; do
    echo
    echo "placement $pl, paper 002's mix (E7b):"
    run "$CT" -- --gen "$E7_MIX" --policy "$PT" --size 5%,20% --placement "$pl" --ram-ratio 0.0625
    echo
    echo "placement $pl, one read-mostly Zipf(0.99) disk (E7d):"
    run "$CT" -- --gen "$E7_ZIPF" --policy "$PT" --size 5%,20% --placement "$pl" --ram-ratio 0.0625
  done
  rm -rf "$T"
}

# E7m: the default under write budgets (sieve(budget=B), SSD block writes per read hit).
budget() {
  echo "## E7m The write budget: the default with budget=B"
  local P="lru,arc,s3fifo,$NEW_DEFAULT"
  for b in 8 3 1 0.5; do P+=",${NEW_DEFAULT/writes=1)/writes=1,budget=$b)}"; done
  local T
  T=$(mktemp -d)
  e7_tables "$P" "$E7_COLS" "$T"
  rm -rf "$T"
}

echo "# ringcache-sim experiments ($(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown))"
for e in "${WHICH[@]}"; do
  echo
  "$e"
done
