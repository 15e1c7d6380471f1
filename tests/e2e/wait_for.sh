# shellcheck shell=bash
# Sourced by the e2e scripts: waiting for a condition without spending the machine on it.
#
#   wait_for SECONDS WHAT COMMAND...
#
# runs COMMAND (its output discarded) until it succeeds. Between tries it sleeps 0.1 s, then 0.2,
# 0.4, and from then on 0.5 s: most conditions hold at once or within a second, the others take
# seconds (a restart, a lease, a replay), and every try of those starts ringcachectl, etcdctl or
# python3, about a tenth of a CPU-second each on the loaded machine (docs/testing.md, "Waiting").
# It gives up, calling the script's `fail "timed out after SECONDS s waiting for: WHAT"`, once it
# has slept SECONDS in all: the time the tries themselves take is not counted, as the loops it
# replaced counted tries, so a wait is never shorter than it was on a loaded machine.
# WAIT_FOR_GUARD, when set, is a command run after each failed try, output shown: it calls fail
# itself when waiting longer makes no sense (a load generator that died, the test's deadline).
# The sleeps start no process: a read that times out on a pipe no one writes to.
exec {WAIT_FOR_NAP_FD}<> <(:)
wait_for() {
  local secs=$1 what=$2 slept=0 step=1
  shift 2
  until "$@" > /dev/null 2>&1; do
    [ "$slept" -lt $((secs * 10)) ] || fail "timed out after ${secs}s waiting for: $what"
    if [ -n "${WAIT_FOR_GUARD:-}" ]; then $WAIT_FOR_GUARD "$what"; fi
    read -r -t "0.$step" -u "$WAIT_FOR_NAP_FD" _ || true
    slept=$((slept + step))
    case $step in 1) step=2 ;; 2) step=4 ;; *) step=5 ;; esac
  done
}

# nap SECONDS: the same sleep for the scripts' own loops (a client loop's pause): no process.
nap() { read -r -t "$1" -u "$WAIT_FOR_NAP_FD" _ || true; }

# says_failed TEXT: true when a client's output names a failure ("failed" or "error", any case),
# what `grep -qi "failed\|error" <<< TEXT` asks, in bash alone. A client loop asks it several
# times a second for minutes, and each grep (a fork and an exec) cost 10-20 ms of CPU on the
# loaded 2-core machine (docs/testing.md, "Waiting").
says_failed() {
  case ${1,,} in *failed* | *error*) return 0 ;; esac
  return 1
}
