// The replay loop. See runner.h.
#include "tools/sim/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringcache::sim {
namespace {

using policy::Access;
using policy::BlockKey;
using policy::CachePolicy;
using policy::Outcome;
using policy::Tier;

constexpr size_t kBatch = 4096;
constexpr uint32_t kMaxVdi = 1u << 20;
constexpr uint64_t kOccupancyEvery = 1024;  // accesses between occupancy samples

absl::Status VdiTooLarge(uint32_t vdi) {
  return absl::InvalidArgumentError(
      absl::StrCat("VDI id ", vdi, " is too large for the simulator (limit ", kMaxVdi, ")"));
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// CPU time of the calling thread: on a shared host it excludes time spent descheduled.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

bool IsOfflineSpec(absl::string_view spec) {
  for (absl::string_view part : absl::StrSplit(spec, '+')) {
    // "opt" or "opt(bypass=false)" (registry grammar).
    absl::string_view name = absl::StripAsciiWhitespace(part.substr(0, part.find('(')));
    if (name == "opt") return true;
  }
  return false;
}

absl::StatusOr<TraceSummary> SummarizeTrace(const SourceFactory& open, uint32_t block_size,
                                            bool want_next_use, uint64_t max_requests) {
  absl::StatusOr<std::unique_ptr<RequestSource>> src = open();
  if (!src.ok()) return src.status();
  TraceSummary sum;
  absl::flat_hash_map<BlockKey, uint64_t> last_seen;
  std::vector<Request> batch(kBatch);
  bool stop = false;
  while (!stop) {
    absl::StatusOr<size_t> n = (*src)->Read(absl::MakeSpan(batch));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    for (size_t i = 0; i < *n; ++i) {
      if (max_requests > 0 && sum.requests == max_requests) {
        stop = true;
        break;
      }
      const Request& r = batch[i];
      if (r.vdi >= kMaxVdi) return VdiTooLarge(r.vdi);
      ++sum.requests;
      uint64_t first = r.offset / block_size;
      uint64_t last = (r.offset + r.length - 1) / block_size;
      for (uint64_t b = first; b <= last; ++b) {
        uint64_t idx = sum.accesses++;
        auto [it, inserted] = last_seen.try_emplace(BlockKey{r.vdi, b}, idx);
        if (inserted) {
          ++sum.unique_blocks;
          if (sum.unique_per_vdi.size() <= r.vdi) sum.unique_per_vdi.resize(r.vdi + 1, 0);
          ++sum.unique_per_vdi[r.vdi];
        } else {
          if (want_next_use) sum.next_use[it->second] = idx;
          it->second = idx;
        }
        if (want_next_use) sum.next_use.push_back(policy::kNever);
      }
    }
  }
  sum.vdi_names = (*src)->VdiNames();
  sum.source_stats = (*src)->stats();
  return sum;
}

absl::StatusOr<SimResult> RunOne(const SourceFactory& open, const PolicyFactory& make_policy,
                                 const std::string& spec, uint64_t capacity_blocks,
                                 uint64_t ram_blocks, const RunOptions& options,
                                 const std::vector<uint64_t>* next_use) {
  CostConfig cost = options.cost;
  cost.block_size = options.block_size;
  if (absl::Status s = cost.Validate(); !s.ok()) return s;
  if (options.block_size == 0) return absl::InvalidArgumentError("block size is 0");
  DeviceModel dev(cost);

  PolicyRequest preq{spec, capacity_blocks, ram_blocks, &dev};
  absl::StatusOr<std::unique_ptr<CachePolicy>> made = make_policy(preq);
  if (!made.ok()) return made.status();
  std::unique_ptr<CachePolicy> policy = *std::move(made);
  if (policy == nullptr) {
    return absl::InternalError(absl::StrCat("policy factory returned null for '", spec, "'"));
  }
  if (IsOfflineSpec(spec) && next_use == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("'", spec, "' needs next_use"));
  }

  absl::StatusOr<std::unique_ptr<RequestSource>> opened = open();
  if (!opened.ok()) return opened.status();
  RequestSource& src = **opened;

  SimResult res;
  res.policy = spec;
  res.policy_name = std::string(policy->name());
  res.capacity_blocks = capacity_blocks;
  res.ram_blocks = ram_blocks;
  res.block_size = options.block_size;

  std::vector<VdiStats> vdis;
  std::vector<double> occupancy_sum;
  uint64_t occupancy_samples = 0;
  std::vector<double> slots(options.iodepth, 0.0);
  std::vector<Request> batch(kBatch);
  Outcome out;
  out.evicted.reserve(256);
  Access a;
  double response_sum = 0;
  const uint32_t bs = options.block_size;
  const bool track = options.track_occupancy;
  const double scale = options.time_scale;

  auto start = std::chrono::steady_clock::now();
  const double cpu_start = ThreadCpuSeconds();
  auto last_progress = start;
  bool stop = false;

  while (!stop) {
    absl::StatusOr<size_t> got = src.Read(absl::MakeSpan(batch));
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    for (size_t i = 0; i < *got; ++i) {
      if (options.max_requests > 0 && res.requests == options.max_requests) {
        stop = true;
        break;
      }
      const Request& r = batch[i];
      if (r.vdi >= vdis.size()) {
        if (r.vdi >= kMaxVdi) return VdiTooLarge(r.vdi);
        vdis.resize(r.vdi + 1);
        if (track) occupancy_sum.resize(r.vdi + 1, 0.0);
      }
      VdiStats& vs = vdis[r.vdi];
      double arrival = static_cast<double>(r.time_us) * scale;
      double* slot = nullptr;
      if (!slots.empty()) {
        slot = &slots[res.requests % slots.size()];
        arrival = std::max(arrival, *slot);
      }
      dev.SetNow(arrival);
      const uint64_t now_us = static_cast<uint64_t>(arrival);
      const bool is_read = r.op == policy::Op::kRead;
      double finish = arrival;
      uint64_t first = r.offset / bs;
      uint64_t last = (r.offset + r.length - 1) / bs;

      for (uint64_t b = first; b <= last; ++b) {
        a.key = BlockKey{r.vdi, b};
        a.op = r.op;
        a.now_us = now_us;
        a.seq = res.accesses;
        a.next_use = next_use != nullptr && res.accesses < next_use->size()
                         ? (*next_use)[res.accesses]
                         : policy::kNever;
        bool cached_before = track && policy->Lookup(a.key) != Tier::kNone;
        policy->OnAccess(a, &out);
        ++res.accesses;
        ++vs.accesses;

        double t = arrival;
        for (const policy::Eviction& e : out.evicted) {
          if (e.key.vdi < vdis.size()) ++vdis[e.key.vdi].evictions;
          if (track && !(e.key == a.key) && e.key.vdi < vdis.size()) {
            --vdis[e.key.vdi].occupancy;
          }
          if (e.dirty) {
            t = dev.HddWrite(e.key, t);
            ++res.dirty_evictions;
            ++res.hdd_writes;
            if (e.key.vdi < vdis.size()) ++vdis[e.key.vdi].hdd_writes;
          }
        }
        res.replacements += out.evicted.size();

        if (out.hit == Tier::kRam) {
          ++res.hits_ram;
          ++vs.hits;
        } else if (out.hit == Tier::kSsd) {
          ++res.hits_ssd;
          ++vs.hits;
          if (is_read) {
            ++res.read_hits_ssd;
            t = dev.SsdRead(t);
          }
        } else {
          ++res.misses;
          ++vs.misses;
          if (is_read) {
            t = dev.HddRead(a.key, t);
            ++res.hdd_reads;
            ++vs.hdd_reads;
          } else if (out.bypassed || out.rejected) {
            t = dev.HddWrite(a.key, t);
            ++res.hdd_writes;
            ++vs.hdd_writes;
          }
        }
        if (out.hit != Tier::kNone && !is_read && out.bypassed) {
          // A write hit that the policy sent around the cache still reaches the data node.
          t = dev.HddWrite(a.key, t);
          ++res.hdd_writes;
          ++vs.hdd_writes;
        }
        if (out.bypassed) {
          ++res.bypassed;
          ++vs.bypassed;
        }
        res.rejected += out.rejected;
        res.admitted += out.admitted;
        res.promotions += out.promotions;
        for (uint32_t w = 0; w < out.ssd_writes; ++w) t = dev.SsdWrite(t);
        res.ssd_writes += out.ssd_writes;
        vs.ssd_writes += out.ssd_writes;
        if (is_read) {
          ++res.reads;
          ++vs.reads;
        } else {
          ++res.writes;
          ++vs.writes;
        }
        if (track) {
          bool cached_after = policy->Lookup(a.key) != Tier::kNone;
          vs.occupancy += int64_t{cached_after} - int64_t{cached_before};
          if (res.accesses % kOccupancyEvery == 0) {
            for (size_t v = 0; v < vdis.size(); ++v) occupancy_sum[v] += vdis[v].occupancy;
            ++occupancy_samples;
          }
        }
        if (t > finish) finish = t;
      }

      double response = finish - arrival;
      response_sum += response;
      vs.response_us_sum += response;
      if (response > res.max_response_us) res.max_response_us = response;
      if (slot != nullptr) *slot = finish;
      ++vs.requests;
      ++res.requests;

      if ((res.requests & 0xffff) == 0 && options.progress) {
        auto now = std::chrono::steady_clock::now();
        if (now - last_progress >= std::chrono::seconds(1)) {
          last_progress = now;
          double el = Seconds(now - start);
          options.progress(absl::StrFormat(
              "%s size=%d: %d requests, %.2fM req/s, hit ratio %.4f", spec, capacity_blocks,
              res.requests, res.requests / el / 1e6, res.hit_ratio()));
        }
      }
    }
  }
  res.wall_s = Seconds(std::chrono::steady_clock::now() - start);
  res.cpu_s = ThreadCpuSeconds() - cpu_start;

  res.dirty_at_end = policy->dirty_count();
  res.cached_at_end = policy->size();
  res.metadata_bytes = policy->MetadataBytes();
  double serial_us = dev.serial_us();
  if (options.drain) {
    res.hdd_writes += res.dirty_at_end;
    serial_us += static_cast<double>(res.dirty_at_end) * cost.hdd_write_us;
  }
  res.virtual_time_s = serial_us / 1e6;
  res.makespan_s = dev.makespan_us() / 1e6;
  res.mean_response_us = res.requests == 0 ? 0 : response_sum / res.requests;
  res.node_ops = dev.node_ops();
  for (double b : dev.node_busy_us()) res.node_busy_s.push_back(b / 1e6);
  res.ssd_busy_s = dev.ssd_busy_us() / 1e6;
  if (res.wall_s > 0) {
    res.requests_per_second = res.requests / res.wall_s;
    res.accesses_per_second = res.accesses / res.wall_s;
  }
  if (res.cpu_s > 0) res.requests_per_cpu_second = res.requests / res.cpu_s;
  res.source_stats = src.stats();
  std::vector<std::string> names = src.VdiNames();
  for (size_t v = 0; v < vdis.size(); ++v) {
    vdis[v].name = v < names.size() && !names[v].empty() ? names[v] : absl::StrCat("vdi", v);
    if (track && occupancy_samples > 0) {
      vdis[v].occupancy_mean = occupancy_sum[v] / static_cast<double>(occupancy_samples);
    }
  }
#ifdef RC_SIM_HAVE_VDI_STATS
  std::vector<policy::VdiStats> queues;
  policy->AppendVdiStats(&queues);
  for (const policy::VdiStats& q : queues) {
    if (q.vdi >= vdis.size()) continue;
    VdiStats& v = vdis[q.vdi];
    v.has_queue = true;
    v.queue_accesses = q.accesses;
    v.queue_blocks = q.blocks;
    v.queue_max = q.max_blocks;
    v.queue_upper = q.upper;
    v.queue_lower = q.lower;
  }
#endif
  res.per_vdi = std::move(vdis);
  return res;
}

}  // namespace ringcache::sim
