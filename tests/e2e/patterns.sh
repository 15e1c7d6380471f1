# Sourced by e2e tests: qemu-io pattern rounds over a 256 MiB export. The sourcing script defines
# qio COMMAND... (one qemu-io process running each COMMAND in turn on one connection to its
# export; its exit status is 1 when any of them failed) and fail "MESSAGE".
#
# 64 runs of 64 KiB spread over the disk (every object, so every cache node owns some); the
# pattern byte of run i is derived from the round's seed. A round is one qemu-io process: 64 of
# them, one per run, took about a CPU-second per round on the loaded test machine
# (docs/testing.md, "The CPU of each test").

# qio_at URI COMMAND...: one qemu-io on the raw export URI running each COMMAND in turn (what
# the sourcing scripts' qio calls with their export).
qio_at() {
  local uri=$1 a=() c
  shift
  for c in "$@"; do a+=(-c "$c"); done
  qemu-io -f raw "$uri" "${a[@]}"
}

# qio_round WHAT COMMAND...: runs the commands in one qemu-io; fails naming WHAT and, for a
# pattern that did not verify, the 4 MiB slot of the first bad offset.
qio_round() {
  local what=$1 out bad
  shift
  if ! out=$(qio "$@" 2>&1) || grep -qi "failed\|error" <<< "$out"; then
    bad=$(grep -m1 -o "Pattern verification failed at offset [0-9]*" <<< "$out" |
      awk '{ print $NF }')
    if [ -n "$bad" ]; then
      fail "$what: stale data in slot $(( bad / (4 << 20) )) (offset $bad):" \
        "$(grep -m1 -i "failed" <<< "$out")"
    fi
    fail "$what: $(grep -i -m3 "failed\|error" <<< "$out" || echo "$out" | tail -3)"
  fi
}

write_round() {  # seed
  local i cmds=()
  for i in $(seq 0 63); do cmds+=("write -P $(( ($1 + i) % 250 + 1 )) $(( i * 4 ))M 64k"); done
  qio_round "write round $1" "${cmds[@]}"
}

check_round() {  # seed
  local i cmds=()
  for i in $(seq 0 63); do cmds+=("read -P $(( ($1 + i) % 250 + 1 )) $(( i * 4 ))M 64k"); done
  qio_round "check of round $1" "${cmds[@]}"
}

# The client write loops' layout: loop write k puts pattern (k % 250) + 1 at (k % 64) * 4 MiB
# + 1 MiB (between the rounds' runs; a second loop running at the same time uses + 2 MiB).
check_loop_slots() {  # OPS [BASE_MIB]: writes the loop has made (its slots at + BASE_MIB, default
                      # 1); the last write to each slot must read back
  local ops=$1 base=${2:-1} first k cmds=()
  first=$(( ops > 64 ? ops - 64 : 0 ))
  for k in $(seq "$first" $((ops - 1))); do
    cmds+=("read -P $(( k % 250 + 1 )) $(( (k % 64) * 4 + base ))M 64k")
  done
  [ ${#cmds[@]} -eq 0 ] ||
    qio_round "the loop's last writes (writes $first to $((ops - 1)))" "${cmds[@]}"
}

# The pause of a client write loop after each write it verified (seconds). A loop is a client
# that must see no error and whose longest stall between two writes is printed and bounded (20
# s and more), not a load: unpaced, two loops' qemu-io starts took a third of the CPU of a
# network-namespace run, and longer the more its neighbours slowed it down.
LOOP_PAUSE=${LOOP_PAUSE:-0.25}
