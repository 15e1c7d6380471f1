# Sourced by e2e tests: qemu-io pattern rounds over a 256 MiB export. The sourcing script defines
# qio "COMMAND" (one qemu-io command against its export) and fail "MESSAGE".
#
# 64 runs of 64 KiB spread over the disk (every object, so every cache node owns some); the
# pattern byte of run i is derived from the round's seed.

write_round() {  # seed
  local i
  for i in $(seq 0 63); do
    qio "write -P $(( ($1 + i) % 250 + 1 )) $(( i * 4 ))M 64k" > /dev/null || fail "write $i"
  done
}

check_round() {  # seed
  local i out
  for i in $(seq 0 63); do
    out=$(qio "read -P $(( ($1 + i) % 250 + 1 )) $(( i * 4 ))M 64k" 2>&1) || fail "read $i: $out"
    if echo "$out" | grep -q "Pattern verification failed"; then fail "stale data at run $i: $out"; fi
  done
}

# The client write loops' layout: loop write k puts pattern (k % 250) + 1 at (k % 64) * 4 MiB
# + 1 MiB (between the rounds' runs; a second loop running at the same time uses + 2 MiB).
check_loop_slots() {  # OPS [BASE_MIB]: writes the loop has made (its slots at + BASE_MIB, default
                      # 1); the last write to each slot must read back
  local ops=$1 base=${2:-1} first k out
  first=$(( ops > 64 ? ops - 64 : 0 ))
  for k in $(seq "$first" $((ops - 1))); do
    out=$(qio "read -P $(( k % 250 + 1 )) $(( (k % 64) * 4 + base ))M 64k" 2>&1) ||
      fail "read of loop write $k: $out"
    if echo "$out" | grep -q "Pattern verification failed"; then fail "loop write $k lost: $out"; fi
  done
}
