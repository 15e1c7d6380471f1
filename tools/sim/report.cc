// Table and JSON output. See report.h.
#include "tools/sim/report.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json_quote.h"

namespace ringcache::sim {
namespace {

// Lays out rows as columns: the first column left-aligned, the rest right-aligned.
std::string Columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      std::string pad(width[i] - row[i].size(), ' ');
      line += i == 0 ? row[i] + pad : pad + row[i];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Num(uint64_t v) { return absl::StrCat(v); }
std::string Fix(double v, int digits) { return absl::StrFormat("%.*f", digits, v); }

std::string JsonDouble(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.9g", v);
}

}  // namespace

std::string FormatTable(const std::vector<SimResult>& results, const ReportOptions& options) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"policy",   "size",   "ram",     "hit%",   "hits_ram",
                                   "hits_ssd", "misses", "ssd_wr",  "repl",   "hdd_rd",
                                   "hdd_wr",   "bypass", "vtime_s", "resp_us", "meta_B/blk"};
  if (options.timing) head.push_back("Mreq/s");
  rows.push_back(head);
  for (const SimResult& r : results) {
    double meta = r.cached_at_end == 0 ? 0 : double(r.metadata_bytes) / r.cached_at_end;
    std::vector<std::string> row = {r.policy,
                                    Num(r.capacity_blocks),
                                    Num(r.ram_blocks),
                                    Fix(100.0 * r.hit_ratio(), 2),
                                    Num(r.hits_ram),
                                    Num(r.hits_ssd),
                                    Num(r.misses),
                                    Num(r.ssd_writes),
                                    Num(r.replacements),
                                    Num(r.hdd_reads),
                                    Num(r.hdd_writes),
                                    Num(r.bypassed),
                                    Fix(r.virtual_time_s, 3),
                                    Fix(r.mean_response_us, 1),
                                    Fix(meta, 1)};
    if (options.timing) row.push_back(Fix(r.requests_per_second / 1e6, 2));
    rows.push_back(std::move(row));
  }
  return Columns(rows);
}

std::string FormatVdiTable(const std::vector<SimResult>& results, bool with_occupancy) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"policy", "size",   "vdi",    "name",   "requests", "accesses",
                                   "hit%",   "misses", "ssd_wr", "hdd_wr", "evicted",  "resp_us"};
  if (with_occupancy) {
    head.push_back("blocks_end");
    head.push_back("blocks_mean");
  }
  bool queues = false;
  for (const SimResult& r : results) {
    for (const VdiStats& s : r.per_vdi) queues |= s.has_queue;
  }
  if (queues) {
    for (const char* h : {"A_m", "q_blocks", "L_m", "U_i", "D_i", "U-D"}) head.push_back(h);
  }
  rows.push_back(head);
  for (const SimResult& r : results) {
    for (size_t v = 0; v < r.per_vdi.size(); ++v) {
      const VdiStats& s = r.per_vdi[v];
      if (s.accesses == 0) continue;
      std::vector<std::string> row = {
          r.policy,        Num(r.capacity_blocks), Num(v),
          s.name,          Num(s.requests),        Num(s.accesses),
          Fix(100.0 * s.hits / s.accesses, 2),     Num(s.misses),
          Num(s.ssd_writes), Num(s.hdd_writes),    Num(s.evictions),
          Fix(s.requests == 0 ? 0 : s.response_us_sum / s.requests, 1)};
      if (with_occupancy) {
        row.push_back(absl::StrCat(s.occupancy));
        row.push_back(Fix(s.occupancy_mean, 1));
      }
      if (queues && s.has_queue) {
        row.push_back(Num(s.queue_accesses));
        row.push_back(Num(s.queue_blocks));
        row.push_back(Fix(s.queue_max, 1));
        row.push_back(Fix(s.queue_upper, 4));
        row.push_back(Fix(s.queue_lower, 4));
        row.push_back(Fix(s.queue_upper - s.queue_lower, 4));
      } else if (queues) {
        for (int i = 0; i < 6; ++i) row.push_back("-");
      }
      rows.push_back(std::move(row));
    }
  }
  return Columns(rows);
}

std::string FormatBudgetTable(const std::vector<SimResult>& free,
                              const std::vector<SimResult>& budgeted, double burst_s) {
  std::string out = absl::StrFormat(
      "# SSD write budget: each configuration without it and with it (a bucket of %.0f s of the "
      "rate; allowed = rate x the trace's span + one bucket)\n",
      burst_s);
  out += absl::StrFormat("%-34s %10s %12s %12s %12s %9s %9s %9s %10s\n", "policy", "size",
                         "allowed", "writes-free", "writes-held", "held/lim", "hit%-free",
                         "hit%-held", "cost(pts)");
  for (size_t i = 0; i < free.size() && i < budgeted.size(); ++i) {
    const SimResult& f = free[i];
    const SimResult& b = budgeted[i];
    const double allowed = b.budget_blocks_per_s * (b.arrival_span_s + burst_s);
    out += absl::StrFormat("%-34s %10d %12.0f %12d %12d %9.2f %9.2f %9.2f %10.2f\n", b.policy,
                           b.capacity_blocks, allowed, f.ssd_writes, b.ssd_writes,
                           allowed > 0 ? b.ssd_writes / allowed : 0.0, 100 * f.hit_ratio(),
                           100 * b.hit_ratio(), 100 * (f.hit_ratio() - b.hit_ratio()));
  }
  return out;
}

std::string FormatJson(const SimResult& r, const ReportOptions& options) {
  std::vector<std::string> f;
  auto add = [&](std::string_view k, std::string v) {
    f.push_back(absl::StrCat(JsonQuote(k), ":", v));
  };
  add("policy", JsonQuote(r.policy));
  add("policy_name", JsonQuote(r.policy_name));
  add("size_blocks", Num(r.capacity_blocks));
  add("ram_blocks", Num(r.ram_blocks));
  add("block_size", Num(r.block_size));
  add("requests", Num(r.requests));
  add("accesses", Num(r.accesses));
  add("reads", Num(r.reads));
  add("writes", Num(r.writes));
  add("hits_ram", Num(r.hits_ram));
  add("hits_ssd", Num(r.hits_ssd));
  add("misses", Num(r.misses));
  add("hit_ratio", JsonDouble(r.hit_ratio()));
  add("ssd_writes", Num(r.ssd_writes));
  add("admitted", Num(r.admitted));
  add("rejected", Num(r.rejected));
  add("promotions", Num(r.promotions));
  add("replacements", Num(r.replacements));
  add("dirty_evictions", Num(r.dirty_evictions));
  add("hdd_reads", Num(r.hdd_reads));
  add("hdd_writes", Num(r.hdd_writes));
  add("bypassed", Num(r.bypassed));
  add("dirty_at_end", Num(r.dirty_at_end));
  add("cached_at_end", Num(r.cached_at_end));
  add("metadata_bytes", Num(r.metadata_bytes));
  if (r.budget_blocks_per_s > 0) {
    add("budget_blocks_per_s", JsonDouble(r.budget_blocks_per_s));
    add("budget_around", Num(r.budget_around));
    add("arrival_span_s", JsonDouble(r.arrival_span_s));
  }
  add("metadata_bytes_per_block",
      JsonDouble(r.cached_at_end == 0 ? 0 : double(r.metadata_bytes) / r.cached_at_end));
  add("virtual_time_s", JsonDouble(r.virtual_time_s));
  add("makespan_s", JsonDouble(r.makespan_s));
  add("mean_response_us", JsonDouble(r.mean_response_us));
  add("max_response_us", JsonDouble(r.max_response_us));
  add("ssd_busy_s", JsonDouble(r.ssd_busy_s));
  std::vector<std::string> ops, busy;
  for (uint64_t o : r.node_ops) ops.push_back(Num(o));
  for (double b : r.node_busy_s) busy.push_back(JsonDouble(b));
  add("node_ops", absl::StrCat("[", absl::StrJoin(ops, ","), "]"));
  add("node_busy_s", absl::StrCat("[", absl::StrJoin(busy, ","), "]"));
  if (options.timing) {
    add("wall_s", JsonDouble(r.wall_s));
    add("cpu_s", JsonDouble(r.cpu_s));
    add("requests_per_second", JsonDouble(r.requests_per_second));
    add("requests_per_cpu_second", JsonDouble(r.requests_per_cpu_second));
    add("accesses_per_second", JsonDouble(r.accesses_per_second));
  }
  std::vector<std::string> vdis;
  for (size_t v = 0; v < r.per_vdi.size(); ++v) {
    const VdiStats& s = r.per_vdi[v];
    if (s.accesses == 0) continue;
    vdis.push_back(absl::StrCat(
        "{\"vdi\":", v, ",\"name\":", JsonQuote(s.name), ",\"requests\":", s.requests,
        ",\"accesses\":", s.accesses, ",\"reads\":", s.reads, ",\"writes\":", s.writes,
        ",\"hits\":", s.hits, ",\"misses\":", s.misses,
        ",\"hit_ratio\":", JsonDouble(double(s.hits) / s.accesses), ",\"bypassed\":", s.bypassed,
        ",\"ssd_writes\":", s.ssd_writes, ",\"hdd_reads\":", s.hdd_reads,
        ",\"hdd_writes\":", s.hdd_writes, ",\"evictions\":", s.evictions,
        ",\"mean_response_us\":",
        JsonDouble(s.requests == 0 ? 0 : s.response_us_sum / s.requests),
        ",\"occupancy_end\":", s.occupancy, ",\"occupancy_mean\":", JsonDouble(s.occupancy_mean),
        s.has_queue
            ? absl::StrCat(",\"queue\":{\"accesses\":", s.queue_accesses,
                           ",\"blocks\":", s.queue_blocks,
                           ",\"max_blocks\":", JsonDouble(s.queue_max),
                           ",\"upper\":", JsonDouble(s.queue_upper),
                           ",\"lower\":", JsonDouble(s.queue_lower),
                           s.admit_first >= 0
                               ? absl::StrCat(",\"admit_first\":", JsonDouble(s.admit_first))
                               : std::string(),
                           s.admit_bar >= 0
                               ? absl::StrCat(",\"admit_bar\":", JsonDouble(s.admit_bar))
                               : std::string(),
                           s.region_margin >= 0
                               ? absl::StrCat(",\"region_margin\":", JsonDouble(s.region_margin))
                               : std::string(),
                           s.budget_margin >= 0
                               ? absl::StrCat(",\"budget_margin\":", JsonDouble(s.budget_margin))
                               : std::string(),
                           "}")
            : std::string(),
        "}"));
  }
  add("per_vdi", absl::StrCat("[", absl::StrJoin(vdis, ","), "]"));
  return absl::StrCat("{", absl::StrJoin(f, ","), "}");
}

}  // namespace ringcache::sim
