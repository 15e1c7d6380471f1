// ringcache-sim: replays block traces (MSR, SPC, FIU, binary, or synthetic generators) through
// the policy engine, several policies and cache sizes per run, and reports hits, SSD and HDD
// traffic, virtual time and response time as a table or JSON. Subcommands: gen (write a synthetic
// trace), convert (text trace to binary), info (describe a trace), replay (a trace over NBD against
// a live system, beside the prediction: replay.h). See tools/sim/README.md.
//
// Exit status: 0 success, 1 runtime failure (I/O, malformed input with --strict, a policy
// error), 2 usage error (bad flags or flag values).
//
// Thread-safety: single-threaded program.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cachenode/policy/write_budget.h"
#include "tools/sim/binary_format.h"
#include "tools/sim/generators.h"
#include "tools/sim/policy_factory.h"
#include "tools/sim/report.h"
#include "tools/sim/replay.h"
#include "tools/sim/runner.h"
#include "tools/sim/sizes.h"
#include "tools/sim/trace_io.h"
#include "common/version.h"

namespace ringcache::sim {
namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

struct InputFlags {
  std::string trace;
  std::string format = "auto";
  std::vector<std::string> gens;
  bool strict = false;
  bool quiet = false;
};

struct RunFlags {
  std::vector<std::string> policies;
  std::vector<std::string> sizes;
  std::string ram;
  double ram_ratio = -1;
  std::string block_size = "4096";
  std::string object_size = "4MiB";
  CostConfig cost;
  double hdd_us = -1;
  std::string node_speed;
  double time_scale = 1.0;
  uint32_t iodepth = 0;
  uint64_t max_requests = 0;
  bool drain = false;
  bool occupancy = false;
  bool per_vdi = false;
  bool json = false;
  bool no_timing = false;
  std::string placement;
  std::string ssd_budget;
  double budget_burst = 3600;
};

int Usage(const std::string& msg) {
  std::cerr << "ringcache-sim: " << msg << "\nRun with --help for usage.\n";
  return kExitUsage;
}

int Fail(const absl::Status& s) {
  std::cerr << "ringcache-sim: " << s.message() << "\n";
  return kExitRuntime;
}

// Splits comma-separated list flags; each element may itself be repeated flags.
std::vector<std::string> SplitList(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    for (absl::string_view p : absl::StrSplit(item, ',', absl::SkipWhitespace())) {
      out.emplace_back(absl::StripAsciiWhitespace(p));
    }
  }
  return out;
}

// Splits the --policy list at commas outside parentheses: a spec may carry parameters,
// "lru+sieve(threshold=2,len=4096)" (cachenode/policy/registry.h grammar).
std::vector<std::string> SplitPolicies(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    int depth = 0;
    std::string cur;
    for (char c : item) {
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (c == ',' && depth <= 0) {
        std::string t(absl::StripAsciiWhitespace(cur));
        if (!t.empty()) out.push_back(t);
        cur.clear();
        continue;
      }
      cur += c;
    }
    std::string t(absl::StripAsciiWhitespace(cur));
    if (!t.empty()) out.push_back(t);
  }
  return out;
}

TextReaderOptions TextOptions(const InputFlags& in) {
  TextReaderOptions o;
  o.strict = in.strict;
  return o;
}

// Builds the factory that opens a fresh pass over the input. Usage errors come back as
// kInvalidArgument, file errors with their own codes.
absl::StatusOr<SourceFactory> MakeSourceFactory(const InputFlags& in) {
  if (in.trace.empty() == in.gens.empty()) {
    return absl::InvalidArgumentError("give exactly one of a TRACE file or --gen SPEC");
  }
  if (!in.gens.empty()) {
    // Validate now so a bad spec is a usage error.
    absl::StatusOr<std::unique_ptr<RequestSource>> probe = MakeGenerators(in.gens);
    if (!probe.ok()) return probe.status();
    std::vector<std::string> gens = in.gens;
    return SourceFactory([gens]() { return MakeGenerators(gens); });
  }
  absl::StatusOr<TraceFormat> format = ParseTraceFormat(in.format);
  if (!format.ok()) return format.status();
  TraceFormat f = *format;
  if (f == TraceFormat::kAuto) {
    absl::StatusOr<TraceFormat> detected = DetectTraceFormat(in.trace);
    if (!detected.ok()) return absl::Status(absl::StatusCode::kFailedPrecondition,
                                            detected.status().message());
    f = *detected;
  }
  std::string path = in.trace;
  TextReaderOptions opts = TextOptions(in);
  // Every configuration re-reads the file: only the first pass prints malformed lines.
  auto passes = std::make_shared<int>(0);
  return SourceFactory([path, f, opts, passes]() {
    TextReaderOptions o = opts;
    if ((*passes)++ > 0) o.report = [](const std::string&) {};
    return OpenTraceFile(path, f, o);
  });
}

int ExitFor(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kInvalidArgument) return Usage(std::string(s.message()));
  return Fail(s);
}

void ReportMalformed(const SourceStats& stats) {
  if (stats.malformed > 0) {
    std::cerr << "ringcache-sim: skipped " << stats.malformed << " malformed line(s); first: "
              << stats.first_error << "\n";
  }
}

int DoRun(const InputFlags& in, RunFlags& rf) {
  absl::StatusOr<SourceFactory> open = MakeSourceFactory(in);
  if (!open.ok()) return ExitFor(open.status());

  std::vector<std::string> policies = SplitPolicies(rf.policies);
  std::vector<std::string> sizes = SplitList(rf.sizes);
  if (policies.empty()) return Usage("--policy is required (e.g. --policy lru,arc)");
  if (sizes.empty()) return Usage("--size is required (e.g. --size 1GiB,10%)");

  RunOptions opt;
  absl::StatusOr<uint64_t> bs = ParseBytes(rf.block_size);
  if (!bs.ok() || *bs < 512 || *bs > (1u << 24) || *bs % 512 != 0) {
    return Usage("--block-size must be a multiple of 512 between 512 B and 16 MiB");
  }
  opt.block_size = static_cast<uint32_t>(*bs);
  absl::StatusOr<uint64_t> os = ParseBytes(rf.object_size);
  if (!os.ok()) return Usage(std::string(os.status().message()));
  opt.cost = rf.cost;
  opt.cost.object_size = *os;
  if (rf.hdd_us >= 0) opt.cost.hdd_read_us = opt.cost.hdd_write_us = rf.hdd_us;
  for (const std::string& s : SplitList({rf.node_speed})) {
    double v = 0;
    if (!absl::SimpleAtod(s, &v)) return Usage(absl::StrCat("bad --node-speed value '", s, "'"));
    opt.cost.node_speed.push_back(v);
  }
  opt.cost.block_size = opt.block_size;
  if (absl::Status s = opt.cost.Validate(); !s.ok()) return Usage(std::string(s.message()));
  if (!(rf.time_scale >= 0)) return Usage("--time-scale must be >= 0");
  opt.time_scale = rf.time_scale;
  opt.iodepth = rf.iodepth;
  opt.placement = rf.placement;
  opt.max_requests = rf.max_requests;
  opt.drain = rf.drain;
  opt.track_occupancy = rf.occupancy;
  if (!in.quiet) {
    opt.progress = [](const std::string& line) { std::cerr << "progress: " << line << "\n"; };
  }

  bool need_ws = !rf.ram.empty() && SizeIsRelative(rf.ram);
  for (const std::string& s : sizes) need_ws |= SizeIsRelative(s);
  bool need_next_use = false;
  for (const std::string& p : policies) need_next_use |= IsOfflineSpec(p);

  TraceSummary summary;
  if (need_ws || need_next_use) {
    absl::StatusOr<TraceSummary> sum =
        SummarizeTrace(*open, opt.block_size, need_next_use, opt.max_requests);
    if (!sum.ok()) return Fail(sum.status());
    summary = *std::move(sum);
  }
  std::vector<uint64_t> capacities;
  for (const std::string& s : sizes) {
    absl::StatusOr<uint64_t> c = ParseCacheSize(s, opt.block_size, summary.unique_blocks);
    if (!c.ok()) return Usage(absl::StrCat("--size: ", c.status().message()));
    capacities.push_back(*c);
  }
  uint64_t ram_blocks = 0;
  if (!rf.ram.empty() && rf.ram_ratio >= 0) return Usage("give --ram or --ram-ratio, not both");
  if (!rf.ram.empty()) {
    absl::StatusOr<uint64_t> r = ParseCacheSize(rf.ram, opt.block_size, summary.unique_blocks);
    if (!r.ok()) return Usage(absl::StrCat("--ram: ", r.status().message()));
    ram_blocks = *r;
  }
  // RAM blocks for a given SSD size.
  auto ram_for = [&](uint64_t cap) -> uint64_t {
    if (rf.ram_ratio < 0) return ram_blocks;
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(rf.ram_ratio * cap)));
  };

  ReportOptions ropt;
  ropt.timing = !rf.no_timing;
  PolicyFactory factory = RegistryPolicyFactory();
  // Build every policy once before replaying, so a bad spec is a usage error up front.
  for (const std::string& p : policies) {
    CostConfig probe_cost = opt.cost;
    DeviceModel probe_load(probe_cost);
    for (uint64_t cap : capacities) {
      absl::StatusOr<std::unique_ptr<policy::CachePolicy>> probe =
          factory(PolicyRequest{p, cap, ram_for(cap), &probe_load, opt.placement, nullptr});
      if (!probe.ok()) {
        return Usage(absl::StrCat("policy '", p, "': ", probe.status().message()));
      }
    }
  }
  // --ssd-budget: the budget of each size (drive writes per day are of that cache's size).
  auto budget_for = [&](uint64_t cap) -> absl::StatusOr<double> {
    if (rf.ssd_budget.empty()) return 0.0;
    return policy::BudgetBytesPerDay(
        rf.ssd_budget, cap * opt.block_size,
        [](std::string_view t) { return ParseBytes(absl::string_view(t.data(), t.size())); });
  };
  if (!rf.ssd_budget.empty()) {
    if (!(rf.budget_burst > 0)) return Usage("--budget-burst must be > 0");
    for (uint64_t cap : capacities) {
      if (absl::StatusOr<double> b = budget_for(cap); !b.ok()) {
        return Usage(std::string(b.status().message()));
      }
    }
  }
  opt.budget_burst_s = rf.budget_burst;
  std::vector<SimResult> results, free_results;
  SourceStats last_stats;
  for (const std::string& p : policies) {
    for (uint64_t cap : capacities) {
      // With a budget each configuration runs twice: without it (for the cost) and with it.
      for (int pass = rf.ssd_budget.empty() ? 1 : 0; pass < 2; ++pass) {
        RunOptions run = opt;
        run.ssd_budget_bytes_per_day = pass == 0 ? 0 : *budget_for(cap);
        absl::StatusOr<SimResult> r =
            RunOne(*open, factory, p, cap, ram_for(cap), run,
                   IsOfflineSpec(p) ? &summary.next_use : nullptr);
        if (!r.ok()) {
          return Fail(absl::Status(r.status().code(),
                                   absl::StrCat("policy '", p, "': ", r.status().message())));
        }
        if (pass == 0) {
          free_results.push_back(*std::move(r));
          continue;
        }
        if (rf.json) {
          std::cout << FormatJson(*r, ropt) << "\n" << std::flush;
        }
        results.push_back(*std::move(r));
      }
    }
  }
  if (!rf.json) {
    const SimResult& f = results.front();
    std::cout << absl::StrFormat(
        "# %d requests, %d block accesses (%d reads, %d writes), block size %d B%s\n",
        f.requests, f.accesses, f.reads, f.writes, opt.block_size,
        summary.unique_blocks > 0
            ? absl::StrFormat(", %d unique blocks", summary.unique_blocks)
            : std::string());
    std::cout << FormatTable(results, ropt);
    if (rf.per_vdi) std::cout << "\n" << FormatVdiTable(results, rf.occupancy);
    if (!free_results.empty()) {
      std::cout << "\n" << FormatBudgetTable(free_results, results, rf.budget_burst);
    }
  }
  ReportMalformed(results.front().source_stats);
  return 0;
}

int DoGen(const std::vector<std::string>& specs, const std::string& out, bool quiet) {
  if (specs.empty()) return Usage("gen needs at least one generator spec");
  if (out.empty()) return Usage("gen needs -o FILE");
  absl::StatusOr<std::unique_ptr<RequestSource>> src = MakeGenerators(specs);
  if (!src.ok()) return ExitFor(src.status());
  uint32_t unit = 0;
  for (const std::string& s : specs) {
    absl::StatusOr<GeneratorSpec> g = ParseGeneratorSpec(s);
    if (g.ok() && g->params.count("unit") == 0) unit = 4096;
  }
  absl::StatusOr<uint64_t> n = WriteBinaryTrace(**src, out, unit);
  if (!n.ok()) return Fail(n.status());
  if (!quiet) std::cerr << "wrote " << *n << " requests to " << out << "\n";
  return 0;
}

int DoConvert(const InputFlags& in, const std::string& out) {
  absl::StatusOr<TraceFormat> format = ParseTraceFormat(in.format);
  if (!format.ok()) return Usage(std::string(format.status().message()));
  absl::StatusOr<std::unique_ptr<RequestSource>> src =
      OpenTraceFile(in.trace, *format, TextOptions(in));
  if (!src.ok()) return Fail(src.status());
  absl::StatusOr<uint64_t> n = WriteBinaryTrace(**src, out);
  if (!n.ok()) return Fail(n.status());
  ReportMalformed((*src)->stats());
  if (!in.quiet) std::cerr << "wrote " << *n << " requests to " << out << "\n";
  return 0;
}

struct ReplayFlags {
  std::string nbd;
  std::string gateway;
  std::string policy;
  std::string size;
  std::string placement;
  std::string ram;
  double speed = 0;
};

// replay: the trace over NBD against a live system, then (with --policy and --size) the
// simulator's prediction for the same trace, side by side per VDI.
int DoReplay(const InputFlags& in, const RunFlags& rf, const ReplayFlags& xf) {
  absl::StatusOr<SourceFactory> open = MakeSourceFactory(in);
  if (!open.ok()) return ExitFor(open.status());
  if (xf.policy.empty() != xf.size.empty()) {
    return Usage("give --policy and --size together (the live cache's policy and capacity)");
  }
  absl::StatusOr<uint64_t> bs = ParseBytes(rf.block_size);
  if (!bs.ok() || *bs < 512 || *bs % 512 != 0) return Usage("bad --block-size");
  ReplayOptions ro;
  ro.nbd_uri = xf.nbd;
  ro.speed = xf.speed;
  ro.max_requests = rf.max_requests;
  ro.block_size = static_cast<uint32_t>(*bs);
  ro.gateway = xf.gateway;
  if (!in.quiet) {
    ro.progress = [](const std::string& line) { std::cerr << "progress: " << line << "\n"; };
  }
  // The prediction's settings first: a bad spec is a usage error before any I/O.
  uint64_t cap = 0, ram = 0;
  RunOptions opt;
  if (!xf.policy.empty()) {
    absl::StatusOr<uint64_t> c = ParseCacheSize(xf.size, ro.block_size, 0);
    if (!c.ok()) return Usage(absl::StrCat("--size: ", c.status().message()));
    cap = *c;
    opt.block_size = ro.block_size;
    opt.cost.block_size = ro.block_size;
    opt.max_requests = rf.max_requests;
    opt.placement = xf.placement;
    if (!xf.ram.empty()) {
      absl::StatusOr<uint64_t> r = ParseCacheSize(xf.ram, ro.block_size, 0);
      if (!r.ok()) return Usage(absl::StrCat("--ram: ", r.status().message()));
      ram = *r;
    }
    if (ram > 0 && xf.placement.empty()) return Usage("--ram needs --placement (uarc or lru)");
    PolicyRequest check{xf.policy, cap, ram, nullptr, xf.placement, nullptr};
    if (absl::StatusOr<std::unique_ptr<policy::CachePolicy>> p = RegistryPolicyFactory()(check);
        !p.ok()) {
      return ExitFor(p.status());
    }
  }
  absl::StatusOr<ReplayResult> live = ReplayOverNbd(*open, ro);
  if (!live.ok()) return ExitFor(live.status());

  // The prediction: one cache, or with a gateway whose ring has several cache nodes, one cache
  // per node, each seeing the blocks of the objects the ring gives it (--size, --ram per node).
  std::optional<SimResult> sim;
  size_t nodes = 1;
  if (!xf.policy.empty()) {
    PolicyFactory factory = RegistryPolicyFactory();
    if (!xf.gateway.empty()) {
      std::vector<std::string> exports;
      for (const ReplayVdi& v : live->vdis) exports.push_back(v.requests > 0 ? v.export_name : "");
      absl::StatusOr<ClusterLayout> layout = ReadClusterLayout(xf.gateway, exports);
      if (!layout.ok()) return ExitFor(layout.status());
      nodes = layout->ring.size();
      // Each cache sees the cluster's VDI ids, as the node's policy does (RenamedPolicy).
      using PolicyOr = absl::StatusOr<std::unique_ptr<policy::CachePolicy>>;
      factory = [ids = layout->vdi_ids, inner = RegistryPolicyFactory()](
                    const PolicyRequest& req) -> PolicyOr {
        PolicyOr p = inner(req);
        if (!p.ok()) return p.status();
        return std::unique_ptr<policy::CachePolicy>(
            std::make_unique<RenamedPolicy>(*std::move(p), ids));
      };
      if (nodes > 1) {
        absl::StatusOr<ShardedPolicy::Route> route = RingRoute(*layout, ro.block_size);
        if (!route.ok()) return ExitFor(route.status());
        factory =
            [one = factory, nodes, route = *std::move(route)](
                const PolicyRequest& req) -> absl::StatusOr<std::unique_ptr<policy::CachePolicy>> {
          std::vector<std::unique_ptr<policy::CachePolicy>> shards;
          for (size_t i = 0; i < nodes; ++i) {
            absl::StatusOr<std::unique_ptr<policy::CachePolicy>> p = one(req);
            if (!p.ok()) return p.status();
            shards.push_back(*std::move(p));
          }
          return std::unique_ptr<policy::CachePolicy>(
              std::make_unique<ShardedPolicy>(std::move(shards), route));
        };
      }
    }
    absl::StatusOr<SimResult> r = RunOne(*open, factory, xf.policy, cap, ram, opt, nullptr);
    if (!r.ok()) return ExitFor(r.status());
    sim = *std::move(r);
  }

  const auto pct = [](uint64_t a, uint64_t b) {
    return b == 0 ? 0.0 : 100.0 * static_cast<double>(a) / static_cast<double>(b);
  };
  struct Row {
    std::string vdi, name;
    uint64_t requests = 0, reads = 0, writes = 0;
    bool live = false;
    uint64_t live_reads = 0, live_hits = 0, live_ssd = 0;
    bool sim = false;
    uint64_t sim_reads = 0, sim_hits = 0, sim_ssd = 0;
  };
  std::vector<Row> rows;
  Row total{"all", "-"};
  total.live = !xf.gateway.empty();
  total.sim = sim.has_value();
  for (const ReplayVdi& v : live->vdis) {
    if (v.requests == 0) continue;
    Row r{absl::StrCat(v.vdi), v.export_name, v.requests, v.read_blocks, v.write_blocks};
    r.live = v.have_live;
    r.live_reads = v.live_reads;
    r.live_hits = v.live_read_hits;
    r.live_ssd = v.live_ssd_writes;
    if (sim && v.vdi < sim->per_vdi.size()) {
      const VdiStats& s = sim->per_vdi[v.vdi];
      r.sim = true;
      r.sim_reads = s.reads;
      r.sim_hits = s.read_hits;
      r.sim_ssd = s.ssd_writes;
    }
    total.requests += r.requests;
    total.reads += r.reads;
    total.writes += r.writes;
    total.live_reads += r.live_reads;
    total.live_hits += r.live_hits;
    total.live_ssd += r.live_ssd;
    total.sim_reads += r.sim_reads;
    total.sim_hits += r.sim_hits;
    total.sim_ssd += r.sim_ssd;
    rows.push_back(r);
  }
  rows.push_back(total);
  const auto num = [](bool have, double v, int prec) {
    return have ? absl::StrFormat("%.*f", prec, v) : std::string("-");
  };
  if (rf.json) {
    for (const Row& r : rows) {
      std::cout << absl::StrFormat(
          "{\"vdi\":\"%s\",\"export\":\"%s\",\"requests\":%d,\"read_blocks\":%d,"
          "\"write_blocks\":%d,\"live_reads\":%d,\"live_read_hit_pct\":%s,"
          "\"live_ssd_writes\":%d,\"sim_read_hit_pct\":%s,\"sim_ssd_writes\":%d,"
          "\"wall_s\":%.3f}\n",
          r.vdi, r.name, r.requests, r.reads, r.writes, r.live_reads,
          r.live ? absl::StrFormat("%.4f", pct(r.live_hits, r.live_reads)) : "null", r.live_ssd,
          r.sim ? absl::StrFormat("%.4f", pct(r.sim_hits, r.sim_reads)) : "null", r.sim_ssd,
          live->wall_s);
    }
    return 0;
  }
  std::cout << absl::StrFormat(
      "# replayed %d requests over NBD in %.1f s%s\n", live->requests, live->wall_s,
      sim ? absl::StrCat("; prediction: ", xf.policy, " at ", xf.size, " blocks",
                         nodes > 1 ? absl::StrCat(" on each of ", nodes, " cache nodes") : "")
          : std::string());
  std::cout << absl::StrFormat("%-4s %-12s %9s %9s %9s %10s %10s %8s %11s %11s\n", "vdi",
                               "export", "requests", "reads", "writes", "live_hit%", "sim_hit%",
                               "diff_pt", "live_ssd_wr", "sim_ssd_wr");
  for (const Row& r : rows) {
    const double lh = pct(r.live_hits, r.live_reads), sh = pct(r.sim_hits, r.sim_reads);
    std::cout << absl::StrFormat(
        "%-4s %-12s %9d %9d %9d %10s %10s %8s %11s %11s\n", r.vdi, r.name, r.requests, r.reads,
        r.writes, num(r.live, lh, 2), num(r.sim, sh, 2), num(r.live && r.sim, lh - sh, 2),
        r.live ? absl::StrCat(r.live_ssd) : "-", r.sim ? absl::StrCat(r.sim_ssd) : "-");
  }
  return 0;
}

int DoInfo(const InputFlags& in, const std::string& block_size) {
  absl::StatusOr<SourceFactory> open = MakeSourceFactory(in);
  if (!open.ok()) return ExitFor(open.status());
  absl::StatusOr<uint64_t> bs = ParseBytes(block_size);
  if (!bs.ok() || *bs < 512 || *bs % 512 != 0) return Usage("bad --block-size");
  absl::StatusOr<TraceSummary> sum = SummarizeTrace(*open, static_cast<uint32_t>(*bs), false);
  if (!sum.ok()) return Fail(sum.status());
  std::cout << absl::StrFormat(
      "requests %d\naccesses %d\nunique_blocks %d\nworking_set_bytes %d\n", sum->requests,
      sum->accesses, sum->unique_blocks, sum->unique_blocks * *bs);
  for (size_t v = 0; v < sum->unique_per_vdi.size(); ++v) {
    if (sum->unique_per_vdi[v] == 0) continue;
    std::string name = v < sum->vdi_names.size() ? sum->vdi_names[v] : "";
    std::cout << absl::StrFormat("vdi %d %s unique_blocks %d\n", v, name,
                                 sum->unique_per_vdi[v]);
  }
  ReportMalformed(sum->source_stats);
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "ringcache-sim: replay block traces through ringcache's cache policies.\n"
      "  ringcache-sim TRACE|--gen SPEC --policy LIST --size LIST [options]\n"
      "  ringcache-sim gen SPEC... -o FILE.bin\n"
      "  ringcache-sim convert IN OUT\n"
      "  ringcache-sim info TRACE|--gen SPEC"};
  app.set_version_flag("--version", VersionLine("ringcache-sim"));
  app.footer(GeneratorHelp());
  InputFlags in;
  RunFlags rf;

  app.add_option("trace", in.trace, "Trace file (MSR CSV, SPC, FIU, binary; gzip ok)");
  app.add_option("--format", in.format, "Trace format: auto, msr, spc, fiu, bin")
      ->capture_default_str();
  app.add_option("--gen", in.gens, "Synthetic generator spec (repeat to merge by time)");
  app.add_option("--policy,-p", rf.policies, "Policies, comma-separated (e.g. lru,arc,opt)");
  app.add_option("--size,-s", rf.sizes, "Cache sizes: blocks, bytes (1GiB) or % of working set");
  app.add_option("--ram", rf.ram, "RAM tier size for tiered policies (same syntax as --size)");
  app.add_option("--ram-ratio", rf.ram_ratio, "RAM tier = this x each --size (e.g. 1 for R = S)");
  app.add_option("--block-size", rf.block_size, "Cache block size")->capture_default_str();
  app.add_option("--object-size", rf.object_size, "Object size (data-node placement unit)")
      ->capture_default_str();
  app.add_option("--ssd-read-us", rf.cost.ssd_read_us, "SSD read latency")->capture_default_str();
  app.add_option("--ssd-write-us", rf.cost.ssd_write_us, "SSD write latency")
      ->capture_default_str();
  app.add_option("--hdd-read-us", rf.cost.hdd_read_us, "HDD (data node) read latency")
      ->capture_default_str();
  app.add_option("--hdd-write-us", rf.cost.hdd_write_us, "HDD (data node) write latency")
      ->capture_default_str();
  app.add_option("--hdd-us", rf.hdd_us, "Set both HDD latencies");
  app.add_option("--hdd-seq-us", rf.cost.hdd_seq_us,
                 "Cost of an HDD op that continues the node's previous block (<0: off)")
      ->capture_default_str();
  app.add_option("--ssd-channels", rf.cost.ssd_channels, "Parallel SSD servers")
      ->capture_default_str();
  app.add_option("--data-nodes", rf.cost.data_nodes, "Data nodes (M)")->capture_default_str();
  app.add_option("--replicas", rf.cost.replicas, "Home replicas per object (N)")
      ->capture_default_str();
  app.add_option("--node-speed", rf.node_speed,
                 "Per-node service-time factors, comma-separated (e.g. 4,1,1,1)");
  app.add_option("--time-scale", rf.time_scale, "Arrival time = trace time x this")
      ->capture_default_str();
  app.add_option("--iodepth", rf.iodepth, "Max requests in flight (0 = open loop)")
      ->capture_default_str();
  app.add_option("--max-requests", rf.max_requests, "Stop after this many requests (0 = all)");
  app.add_flag("--drain", rf.drain, "Charge HDD writes for blocks still dirty at the end");
  app.add_flag("--occupancy", rf.occupancy, "Track blocks cached per VDI (slower)");
  app.add_flag("--per-vdi", rf.per_vdi, "Print the per-VDI table");
  app.add_option("--placement", rf.placement,
                 "Run driver specs as the cache node does: this RAM placement (uarc, lru) over "
                 "--ram blocks, beside the spec's membership (complete policies ignore it)");
  app.add_option("--ssd-budget", rf.ssd_budget,
                 "SSD write budget: drive writes per day of each cache size (0.5dwpd) or a size "
                 "per day (10GiB/day), on the trace's clock; each configuration also runs "
                 "without it, and a table prints the writes held and the hit ratio it cost");
  app.add_option("--budget-burst", rf.budget_burst,
                 "Seconds of the budget's rate the bucket holds")->capture_default_str();
  app.add_flag("--json", rf.json, "One JSON object per (policy, size) on stdout");
  app.add_flag("--no-timing", rf.no_timing, "Leave out wall-clock numbers (stable output)");
  app.add_flag("--strict", in.strict, "A malformed trace line is fatal");
  app.add_flag("--quiet,-q", in.quiet, "No progress lines on stderr");

  CLI::App* gen = app.add_subcommand("gen", "Write a synthetic trace in the binary format");
  std::vector<std::string> gen_specs;
  std::string gen_out;
  gen->add_option("spec", gen_specs, "Generator specs (merged by time)")->required();
  gen->add_option("-o,--output", gen_out, "Output .bin file")->required();
  gen->add_flag("--quiet,-q", in.quiet, "No summary line on stderr");

  CLI::App* convert = app.add_subcommand("convert", "Convert a trace to the binary format");
  std::string conv_in, conv_out;
  convert->add_option("in", conv_in, "Input trace")->required();
  convert->add_option("out", conv_out, "Output .bin file")->required();
  convert->add_option("--format", in.format, "Input format: auto, msr, spc, fiu, bin");
  convert->add_flag("--strict", in.strict, "A malformed line is fatal");
  convert->add_flag("--quiet,-q", in.quiet, "No summary line on stderr");

  CLI::App* info = app.add_subcommand("info", "Describe a trace (requests, working set, VDIs)");
  std::string info_in;
  info->add_option("trace", info_in, "Trace file");
  info->add_option("--gen", in.gens, "Generator spec instead of a file");
  info->add_option("--format", in.format, "Trace format");

  CLI::App* replay = app.add_subcommand(
      "replay",
      "Replay a trace against a live ringcache over NBD; with --gateway, --policy and --size, "
      "compare its hit ratio and SSD writes with the simulator's prediction");
  ReplayFlags xf;
  replay->add_option("trace", in.trace, "Trace file");
  replay->add_option("--gen", in.gens, "Generator spec instead of a file");
  replay->add_option("--format", in.format, "Trace format");
  replay->add_option("--nbd", xf.nbd,
                     "NBD URI of the export, e.g. nbd://127.0.0.1:10809/disk; '{vdi}' in it is "
                     "the trace's VDI id (t{vdi}: t0, t1, ...)")
      ->required();
  replay->add_option("--speed", xf.speed,
                     "Replay at trace time / SPEED (2: twice as fast); 0 = back to back")
      ->capture_default_str();
  replay->add_option("--gateway", xf.gateway,
                     "Gateway admin address (host:port) to read the live cache's counters from");
  replay->add_option("--policy", xf.policy, "The live cache's policy spec, for the prediction");
  replay->add_option("--size", xf.size,
                     "The live cache's capacity in blocks (per cache node), for the prediction");
  replay->add_option("--placement", xf.placement,
                     "The live cache's RAM placement (uarc, lru), for the prediction");
  replay->add_option("--ram", xf.ram,
                     "The live cache's RAM tier in blocks (per cache node), for the prediction");
  replay->add_option("--max-requests", rf.max_requests, "Stop after this many requests");
  replay->add_option("--block-size", rf.block_size, "Cache block size")->capture_default_str();
  replay->add_flag("--json", rf.json, "One JSON object per VDI (and one for all)");
  replay->add_flag("--quiet,-q", in.quiet, "No progress lines on stderr");

  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that exit 0.
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }

  if (gen->parsed()) return DoGen(gen_specs, gen_out, in.quiet);
  if (convert->parsed()) {
    in.trace = conv_in;
    return DoConvert(in, conv_out);
  }
  if (replay->parsed()) return DoReplay(in, rf, xf);
  if (info->parsed()) {
    in.trace = info_in;
    return DoInfo(in, rf.block_size);
  }
  return DoRun(in, rf);
}

}  // namespace
}  // namespace ringcache::sim

int main(int argc, char** argv) { return ringcache::sim::Main(argc, argv); }
