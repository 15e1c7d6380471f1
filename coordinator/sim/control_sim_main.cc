// ringcache-control-sim: runs the control plane simulation (coordinator/sim/control_sim.h) over
// a range of seeds and prints what it found; a failing seed is printed with its first broken
// invariant and reproduces exactly with --seed N --trace.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "coordinator/sim/control_sim.h"

int main(int argc, char** argv) {
  CLI::App app{"Deterministic simulation of ringcache's control plane: the real transition core "
               "under crashes, pauses, partial partitions, coordinator changes and reordered "
               "messages. Exit 0 if every seed kept every invariant, 1 otherwise."};
  uint64_t seed = 1, seeds = 1;
  double fault_s = 20, settle_s = 40;
  bool trace = false, no_seal = false, no_term = false, no_hold = false;
  app.add_option("--seed", seed, "first seed")->capture_default_str();
  app.add_option("--seeds", seeds, "how many seeds, from --seed on")->capture_default_str();
  app.add_option("--fault-seconds", fault_s, "simulated seconds of faults and load")
      ->capture_default_str();
  app.add_option("--settle-seconds", settle_s, "then simulated seconds to settle")
      ->capture_default_str();
  app.add_flag("--trace", trace, "print every event of a failing seed (or of --seeds 1)");
  app.add_flag("--no-log-seal", no_seal, "test seam: replay without sealing the log first");
  app.add_flag("--no-term-fence", no_term, "test seam: nodes ignore coordinator terms");
  app.add_flag("--no-reweight-hold", no_hold,
               "test seam: a reweight does not hold the requests of the objects it moves");
  CLI11_PARSE(app, argc, argv);
  uint64_t failed = 0, acked = 0, changes = 0, terms = 0, refused = 0, sealed = 0;
  for (uint64_t s = seed; s < seed + seeds; ++s) {
    ringcache::coordinator::sim::SimOptions o;
    o.seed = s;
    o.fault_seconds = fault_s;
    o.settle_seconds = settle_s;
    o.trace = trace;
    o.no_log_seal = no_seal;
    o.no_term_fence = no_term;
    o.no_reweight_hold = no_hold;
    const auto r = ringcache::coordinator::sim::RunControlSim(o);
    acked += r.writes_acked;
    changes += r.changes_done;
    terms += r.term_changes;
    refused += r.steps_refused;
    sealed += r.appends_sealed;
    if (!r.ok || (trace && seeds == 1)) {
      if (!r.ok) {
        ++failed;
        std::printf("seed %llu: %s\n", static_cast<unsigned long long>(s), r.violation.c_str());
      }
      if (trace) {
        for (const auto& line : r.trace) std::printf("  %s\n", line.c_str());
      }
    }
  }
  std::printf("control-sim: seeds=%llu failed=%llu writes_acked=%llu changes=%llu "
              "term_changes=%llu steps_refused=%llu appends_sealed=%llu\n",
              static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(failed),
              static_cast<unsigned long long>(acked), static_cast<unsigned long long>(changes),
              static_cast<unsigned long long>(terms), static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(sealed));
  return failed == 0 ? 0 : 1;
}
