// Output of ringcache-sim: a readable table, a per-VDI table, and JSON (one object per line, one
// line per (policy, size) result).
//
// Thread-safety: pure functions.
#ifndef RINGCACHE_TOOLS_SIM_REPORT_H_
#define RINGCACHE_TOOLS_SIM_REPORT_H_

#include <string>
#include <vector>

#include "tools/sim/runner.h"

namespace ringcache::sim {

struct ReportOptions {
  bool timing = true;  // include wall-clock columns/fields (requests_per_second); off for goldens
};

// Returns the summary table, one row per result, with a header line.
std::string FormatTable(const std::vector<SimResult>& results, const ReportOptions& options);
// Returns one table of per-VDI rows for every result.
// Each configuration run without and with an SSD write budget (ringcache-sim --ssd-budget):
// the blocks the budget allowed, the SSD writes of both runs, and the hit ratio it cost.
std::string FormatBudgetTable(const std::vector<SimResult>& free,
                              const std::vector<SimResult>& budgeted, double burst_s);
std::string FormatVdiTable(const std::vector<SimResult>& results, bool with_occupancy);
// Returns one JSON object (no trailing newline).
std::string FormatJson(const SimResult& result, const ReportOptions& options);

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_REPORT_H_
