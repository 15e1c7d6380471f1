// The replay loop of ringcache-sim: splits requests into cache blocks, drives one CachePolicy
// per (policy, size) configuration, charges the cost model, and collects the statistics the
// table and JSON report print.
//
// Units: `requests` are trace requests; every other count (reads, writes, hits, misses, ...) is
// in block accesses, one per cache block a request touches.
//
// Per block access, in this order (the chain's completion time is the block's finish time):
//   1. dirty blocks the policy evicted are written to their home data nodes (LCR paper 004 Alg. 2
//      and 3 flush the victim before serving the request);
//   2. a read that missed (or was bypassed or rejected) is read from the data node; a write that
//      was bypassed or rejected is written to the data node;
//   3. a read hit on the SSD costs an SSD read;
//   4. each SSD write the policy reports (fill, cached write, RAM demotion) costs an SSD write.
// The request completes when its slowest block does; its response time is completion - arrival.
// Arrival is the trace time × time_scale, or later with a finite iodepth (request i is issued
// no earlier than request i - iodepth completes).
//
// Thread-safety: Runner functions are reentrant; each call owns its policy and device model.
#ifndef RINGCACHE_TOOLS_SIM_RUNNER_H_
#define RINGCACHE_TOOLS_SIM_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/statusor.h"
#include "cachenode/policy/types.h"
#include "cachenode/policy/write_budget.h"
#include "tools/sim/cost_model.h"
#include "tools/sim/trace.h"

namespace ringcache::sim {

// What a policy is built from. `load` outlives the policy (owned by the runner).
struct PolicyRequest {
  std::string spec;
  uint64_t capacity_blocks = 0;  // all tiers
  uint64_t ram_blocks = 0;       // RAM tier, for tiered specs (0 = the registry's default)
  const policy::LoadView* load = nullptr;
  // The cache node's RAM placement ("uarc", "lru") over a driver spec: the node's two tiers
  // (policy/node_tiers.h). Empty: the spec alone. Complete policies ignore it.
  std::string placement;
  // The run's SSD write budget (policy/write_budget.h), or null: the policy sends misses around
  // while it says so, and the runner charges it every SSD block write.
  std::shared_ptr<policy::WriteBudget> write_budget;
};
using PolicyFactory = std::function<absl::StatusOr<std::unique_ptr<policy::CachePolicy>>(
    const PolicyRequest&)>;

// Opens a fresh pass over the trace (each configuration replays from the start).
using SourceFactory = std::function<absl::StatusOr<std::unique_ptr<RequestSource>>()>;

struct RunOptions {
  uint32_t block_size = 4096;
  CostConfig cost;              // cost.block_size is overwritten with block_size
  double time_scale = 1.0;      // arrival = trace time × time_scale
  uint32_t iodepth = 0;         // 0: open loop (trace timestamps only)
  std::string placement;        // PolicyRequest::placement for every policy of the run
  uint64_t max_requests = 0;    // 0: the whole trace
  bool drain = false;           // charge an HDD write for each block still dirty at the end
  bool track_occupancy = false;  // per-VDI cached blocks (two Lookup() calls per access)
  uint64_t occupancy_samples = 64;  // time-average occupancy over this many evenly spaced points
  // An SSD write budget in bytes per day (0: none), refilled on the trace's clock (arrival
  // times), with a bucket of budget_burst_s of it (policy/write_budget.h).
  double ssd_budget_bytes_per_day = 0;
  double budget_burst_s = 3600;
  // Called about once a second with a one-line progress text (no newline). May be empty.
  std::function<void(const std::string&)> progress;
};

struct VdiStats {
  std::string name;
  uint64_t requests = 0;
  uint64_t accesses = 0;
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t hits = 0;
  uint64_t read_hits = 0;    // hits of read accesses (what a cache node counts as hits)
  uint64_t misses = 0;
  uint64_t bypassed = 0;
  uint64_t ssd_writes = 0;
  uint64_t hdd_reads = 0;
  uint64_t hdd_writes = 0;   // write-arounds of this VDI + destages of its dirty victims
  uint64_t evictions = 0;    // blocks of this VDI that left the cache
  double response_us_sum = 0;
  int64_t occupancy = 0;           // blocks cached at the end (track_occupancy)
  double occupancy_mean = 0;       // time-averaged (track_occupancy)
  // The policy's own view of this VDI's queue at the end (VBQ, paper 002 eq. 1-5); has_queue is
  // false for policies with one global queue.
  bool has_queue = false;
  uint64_t queue_accesses = 0;  // A_m
  uint64_t queue_blocks = 0;    // blocks in the queue
  double queue_max = 0;         // L_m
  double queue_upper = 0;       // U_i
  double queue_lower = 0;       // D_i
  double admit_first = -1;      // adaptive sieve: first read misses admitted (-1: none)
  double admit_bar = -1;        // frequency gate: mean estimate of recent victims (-1: none)
  double region_margin = -1;    // region test's margin (sieve(region_adapt=1); -1: none)
  double budget_margin = -1;    // write budget's margin (sieve(budget=B); -1: none)
};

struct SimResult {
  std::string policy;        // the spec as given
  std::string policy_name;   // CachePolicy::name()
  uint64_t capacity_blocks = 0;
  uint64_t ram_blocks = 0;
  uint32_t block_size = 0;

  uint64_t requests = 0;
  uint64_t accesses = 0;
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t hits_ram = 0;
  uint64_t hits_ssd = 0;
  uint64_t read_hits_ssd = 0;
  uint64_t misses = 0;
  uint64_t bypassed = 0;
  uint64_t rejected = 0;
  uint64_t admitted = 0;
  uint64_t ssd_writes = 0;
  uint64_t promotions = 0;
  uint64_t replacements = 0;      // blocks evicted (each made room for another)
  uint64_t dirty_evictions = 0;
  uint64_t hdd_reads = 0;
  uint64_t hdd_writes = 0;
  uint64_t dirty_at_end = 0;
  uint64_t cached_at_end = 0;
  uint64_t metadata_bytes = 0;
  // With an SSD write budget (RunOptions::ssd_budget_bytes_per_day): its rate, the misses it
  // sent around, and the span of arrival times it refilled over.
  double budget_blocks_per_s = 0;
  uint64_t budget_around = 0;
  double arrival_span_s = 0;

  double virtual_time_s = 0;      // serial, paper 001
  double makespan_s = 0;          // queueing model: last completion
  double mean_response_us = 0;    // queueing model, per request
  double max_response_us = 0;
  std::vector<uint64_t> node_ops;  // per data node
  std::vector<double> node_busy_s;
  double ssd_busy_s = 0;

  double wall_s = 0;                  // replay loop only (no pre-pass)
  double cpu_s = 0;                   // the replay thread's CPU time
  double requests_per_second = 0;     // requests / wall_s
  double requests_per_cpu_second = 0;  // requests / cpu_s: steadier on a shared host
  double accesses_per_second = 0;

  std::vector<VdiStats> per_vdi;
  SourceStats source_stats;  // the trace reader's counters (malformed lines)

  double hit_ratio() const {
    return accesses == 0 ? 0 : static_cast<double>(hits_ram + hits_ssd) / accesses;
  }
};

// A one-pass summary of a trace: sizes for "N%" cache sizes and next_use for OPT.
struct TraceSummary {
  uint64_t requests = 0;
  uint64_t accesses = 0;
  uint64_t unique_blocks = 0;
  std::vector<uint64_t> unique_per_vdi;
  // next_use[i] = index of the next access to the same block as access i, kNever if none.
  // Filled only when asked for.
  std::vector<uint64_t> next_use;
  std::vector<std::string> vdi_names;
  SourceStats source_stats;
};

// Reads the whole trace once. `max_requests` as in RunOptions.
absl::StatusOr<TraceSummary> SummarizeTrace(const SourceFactory& open, uint32_t block_size,
                                            bool want_next_use, uint64_t max_requests = 0);

// Replays the trace through one policy. `next_use` (may be null) must come from SummarizeTrace on
// the same trace and block size; it fills Access::next_use.
absl::StatusOr<SimResult> RunOne(const SourceFactory& open, const PolicyFactory& make_policy,
                                 const std::string& spec, uint64_t capacity_blocks,
                                 uint64_t ram_blocks, const RunOptions& options,
                                 const std::vector<uint64_t>* next_use);

// Reports whether a policy spec is the offline OPT (needs next_use).
bool IsOfflineSpec(absl::string_view spec);

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_RUNNER_H_
