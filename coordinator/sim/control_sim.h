// ControlSim: a deterministic simulation of the control plane (docs/design.md §7, "The control
// plane"). The real transition core (coordinator/ring_change.h) drives a simulated cluster —
// two gateways that elect a coordinator, three cache nodes, three data nodes, etcd and a
// network — under client writes and reads, while a seeded schedule crashes and restarts cache
// nodes, pauses them (SIGSTOP), cuts one off from the coordinator and etcd but not from the
// other gateway (a partial partition), pauses the coordinator at any step (its term ends; it
// wakes up in the middle of a change), gives a cache node a new ring weight (an operator's
// resize: a reweight, objects handed over to and from it), and delays and reorders every
// message.
//
// The cluster follows the rules of the real daemons, reduced to what the control plane needs:
// ring epochs on requests (stale ones refused), leases (a node acts as owner only while its own
// conservative view of its lease is valid), quarantine after a restart, coordinator terms on
// control steps (refused once a newer term was seen), log seals before a replay, versioned
// conditional writes home, destage and reclaim. Each simulated daemon is a model, not the
// daemon; the transition core is the real code.
//
// Invariants, checked after every event:
//   - at most one cache node accepts writes of an object at one ring epoch;
//   - the newest acknowledged version of every object is durable: in a log record on a data
//     node or at home (no log record is dropped before its block is home);
// and at the end, after the faults heal and the cluster settles, every object reads back at
// (at least) its newest acknowledged version through either gateway.
//
// A run is a pure function of its seed: a failing seed reproduces exactly
// (ringcache-control-sim --seed N --trace).
//
// Thread-safety: one simulation per object; not thread-safe.
#ifndef RINGCACHE_COORDINATOR_SIM_CONTROL_SIM_H_
#define RINGCACHE_COORDINATOR_SIM_CONTROL_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ringcache::coordinator::sim {

struct SimOptions {
  uint64_t seed = 1;
  double fault_seconds = 20.0;   // simulated time with faults and load
  double settle_seconds = 40.0;  // then healed, load stopped, until the cluster is quiet
  int objects = 6;
  bool trace = false;            // keep a line per event (SimResult::trace)
  // Test seams: run without a fence, to show that the invariants catch its absence.
  bool no_log_seal = false;
  bool no_term_fence = false;
  bool no_reweight_hold = false;  // a reweight does not hold the requests of moving objects
  bool reweights = true;          // the operator reweights cache nodes now and then
};

struct SimResult {
  bool ok = true;
  std::string violation;         // the first invariant broken, with the time it happened
  uint64_t events = 0;
  uint64_t writes_acked = 0;
  uint64_t changes_done = 0;     // removals, joins and reweights finished
  uint64_t term_changes = 0;
  uint64_t steps_refused = 0;    // control steps refused as of an ended term
  uint64_t appends_sealed = 0;   // log appends refused by a seal
  std::vector<std::string> trace;
};

SimResult RunControlSim(const SimOptions& options);

}  // namespace ringcache::coordinator::sim

#endif  // RINGCACHE_COORDINATOR_SIM_CONTROL_SIM_H_
