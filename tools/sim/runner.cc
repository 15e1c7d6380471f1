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

namespace {

// One (policy, size) replay: owns the policy, the device model and the counters.
class Replay {
 public:
  Replay(const RunOptions& options, const CostConfig& cost, const std::vector<uint64_t>* next_use)
      : opt_(options), cost_(cost), dev_(cost), next_use_(next_use),
        slots_(options.iodepth, 0.0) {
    out_.evicted.reserve(256);
  }

  // Builds the policy through `make_policy`, with this replay's device model as its LoadView.
  absl::Status Init(const PolicyFactory& make_policy, const std::string& spec,
                    uint64_t capacity_blocks, uint64_t ram_blocks) {
    if (opt_.ssd_budget_bytes_per_day > 0) {
      const policy::WriteBudgetConfig bc = policy::WriteBudgetConfig::ForRating(
          opt_.ssd_budget_bytes_per_day, opt_.block_size, opt_.budget_burst_s, capacity_blocks);
      if (absl::Status s = bc.Validate(); !s.ok()) return s;
      budget_ = std::make_shared<policy::WriteBudget>(bc);
      res_.budget_blocks_per_s = bc.blocks_per_second;
    }
    absl::StatusOr<std::unique_ptr<CachePolicy>> made = make_policy(
        PolicyRequest{spec, capacity_blocks, ram_blocks, &dev_, opt_.placement, budget_});
    if (!made.ok()) return made.status();
    policy_ = *std::move(made);
    if (policy_ == nullptr) {
      return absl::InternalError(absl::StrCat("policy factory returned null for '", spec, "'"));
    }
    res_.policy = spec;
    res_.policy_name = std::string(policy_->name());
    res_.capacity_blocks = capacity_blocks;
    res_.ram_blocks = ram_blocks;
    res_.block_size = opt_.block_size;
    return absl::OkStatus();
  }

  // Replays every request of `src` (up to max_requests).
  absl::Status Run(RequestSource& src) {
    std::vector<Request> batch(kBatch);
    start_ = std::chrono::steady_clock::now();
    last_progress_ = start_;
    const double cpu_start = ThreadCpuSeconds();
    while (true) {
      absl::StatusOr<size_t> got = src.Read(absl::MakeSpan(batch));
      if (!got.ok()) return got.status();
      if (*got == 0) break;
      for (size_t i = 0; i < *got; ++i) {
        if (opt_.max_requests > 0 && res_.requests == opt_.max_requests) {
          return Stop(cpu_start);
        }
        if (absl::Status s = OneRequest(batch[i]); !s.ok()) return s;
      }
    }
    return Stop(cpu_start);
  }

  // Fills the end-of-run fields and returns the result.
  SimResult Finish(const RequestSource& src) {
    res_.dirty_at_end = policy_->dirty_count();
    res_.cached_at_end = policy_->size();
    res_.metadata_bytes = policy_->MetadataBytes();
    if (budget_ != nullptr) {
      const policy::WriteBudget::Snapshot b = budget_->snapshot();
      res_.budget_around = b.around_reads + b.around_writes;
    }
    if (res_.requests > 0) res_.arrival_span_s = (last_arrival_ - first_arrival_) / 1e6;
    double serial_us = dev_.serial_us();
    if (opt_.drain) {
      res_.hdd_writes += res_.dirty_at_end;
      serial_us += static_cast<double>(res_.dirty_at_end) * cost_.hdd_write_us;
    }
    res_.virtual_time_s = serial_us / 1e6;
    res_.makespan_s = dev_.makespan_us() / 1e6;
    res_.mean_response_us = res_.requests == 0 ? 0 : response_sum_ / res_.requests;
    res_.node_ops = dev_.node_ops();
    for (double b : dev_.node_busy_us()) res_.node_busy_s.push_back(b / 1e6);
    res_.ssd_busy_s = dev_.ssd_busy_us() / 1e6;
    if (res_.wall_s > 0) {
      res_.requests_per_second = res_.requests / res_.wall_s;
      res_.accesses_per_second = res_.accesses / res_.wall_s;
    }
    if (res_.cpu_s > 0) res_.requests_per_cpu_second = res_.requests / res_.cpu_s;
    res_.source_stats = src.stats();
    std::vector<std::string> names = src.VdiNames();
    for (size_t v = 0; v < vdis_.size(); ++v) {
      vdis_[v].name =
          v < names.size() && !names[v].empty() ? names[v] : absl::StrCat("vdi", v);
      if (opt_.track_occupancy && occupancy_samples_ > 0) {
        vdis_[v].occupancy_mean = occupancy_sum_[v] / static_cast<double>(occupancy_samples_);
      }
    }
    AddQueueStats();
    res_.per_vdi = std::move(vdis_);
    return std::move(res_);
  }

 private:
  absl::Status Stop(double cpu_start) {
    res_.wall_s = Seconds(std::chrono::steady_clock::now() - start_);
    res_.cpu_s = ThreadCpuSeconds() - cpu_start;
    return absl::OkStatus();
  }

  // Replays one request: arrival, its blocks, its response time.
  absl::Status OneRequest(const Request& r) {
    if (r.vdi >= vdis_.size()) {
      if (r.vdi >= kMaxVdi) return VdiTooLarge(r.vdi);
      vdis_.resize(r.vdi + 1);
      if (opt_.track_occupancy) occupancy_sum_.resize(r.vdi + 1, 0.0);
    }
    VdiStats& vs = vdis_[r.vdi];
    double arrival = static_cast<double>(r.time_us) * opt_.time_scale;
    double* slot = nullptr;
    if (!slots_.empty()) {
      slot = &slots_[res_.requests % slots_.size()];
      arrival = std::max(arrival, *slot);
    }
    dev_.SetNow(arrival);
    if (res_.requests == 0) first_arrival_ = arrival;
    last_arrival_ = std::max(last_arrival_, arrival);
    double finish = arrival;
    const uint64_t first = r.offset / opt_.block_size;
    const uint64_t last = (r.offset + r.length - 1) / opt_.block_size;
    for (uint64_t b = first; b <= last; ++b) {
      finish = std::max(finish, OneBlock(r, b, arrival, vs));
    }
    double response = finish - arrival;
    response_sum_ += response;
    vs.response_us_sum += response;
    res_.max_response_us = std::max(res_.max_response_us, response);
    if (slot != nullptr) *slot = finish;
    ++vs.requests;
    ++res_.requests;
    if ((res_.requests & 0xffff) == 0 && opt_.progress) MaybeProgress();
    return absl::OkStatus();
  }

  // Replays one block access and charges the cost model in the order runner.h documents.
  // Returns the time the block's work completes.
  double OneBlock(const Request& r, uint64_t block, double arrival, VdiStats& vs) {
    a_.key = BlockKey{r.vdi, block};
    a_.op = r.op;
    a_.now_us = static_cast<uint64_t>(arrival);
    a_.seq = res_.accesses;
    a_.next_use = next_use_ != nullptr && res_.accesses < next_use_->size()
                      ? (*next_use_)[res_.accesses]
                      : policy::kNever;
    const bool track = opt_.track_occupancy;
    const bool cached_before = track && policy_->Lookup(a_.key) != Tier::kNone;
    policy_->OnAccess(a_, &out_);
    if (budget_ != nullptr) budget_->Spend(out_.ssd_writes, a_.now_us);
    ++res_.accesses;
    ++vs.accesses;
    const bool is_read = r.op == policy::Op::kRead;

    double t = arrival;
    t = ChargeEvictions(t);                 // 1. destage dirty victims
    if (out_.hit != Tier::kNone && is_read) ++vs.read_hits;
    if (out_.hit == Tier::kRam) {           // 2.-3. serve the block
      ++res_.hits_ram;
      ++vs.hits;
    } else if (out_.hit == Tier::kSsd) {
      ++res_.hits_ssd;
      ++vs.hits;
      if (is_read) {
        ++res_.read_hits_ssd;
        t = dev_.SsdRead(t);
      }
    } else {
      ++res_.misses;
      ++vs.misses;
      if (is_read) {
        t = dev_.HddRead(a_.key, t);
        ++res_.hdd_reads;
        ++vs.hdd_reads;
      } else if (out_.bypassed || out_.rejected) {
        t = WriteAround(t, vs);
      }
    }
    // A write hit that the policy sent around the cache still reaches the data node.
    if (out_.hit != Tier::kNone && !is_read && out_.bypassed) t = WriteAround(t, vs);
    if (out_.bypassed) {
      ++res_.bypassed;
      ++vs.bypassed;
    }
    res_.rejected += out_.rejected;
    res_.admitted += out_.admitted;
    res_.promotions += out_.promotions;
    for (uint32_t w = 0; w < out_.ssd_writes; ++w) t = dev_.SsdWrite(t);  // 4. SSD writes
    res_.ssd_writes += out_.ssd_writes;
    vs.ssd_writes += out_.ssd_writes;
    if (is_read) {
      ++res_.reads;
      ++vs.reads;
    } else {
      ++res_.writes;
      ++vs.writes;
    }
    if (track) {
      const bool cached_after = policy_->Lookup(a_.key) != Tier::kNone;
      vs.occupancy += int64_t{cached_after} - int64_t{cached_before};
      if (res_.accesses % kOccupancyEvery == 0) SampleOccupancy();
    }
    return t;
  }

  // Counts the evictions of the last access; destages the dirty ones in order from `t`.
  double ChargeEvictions(double t) {
    for (const policy::Eviction& e : out_.evicted) {
      VdiStats* owner = e.key.vdi < vdis_.size() ? &vdis_[e.key.vdi] : nullptr;
      if (owner != nullptr) {
        ++owner->evictions;
        // The accessed block's own state is taken from Lookup (it may be evicted and re-added).
        if (opt_.track_occupancy && !(e.key == a_.key)) --owner->occupancy;
      }
      if (e.dirty) {
        t = dev_.HddWrite(e.key, t);
        ++res_.dirty_evictions;
        ++res_.hdd_writes;
        if (owner != nullptr) ++owner->hdd_writes;
      }
    }
    res_.replacements += out_.evicted.size();
    return t;
  }

  double WriteAround(double t, VdiStats& vs) {
    ++res_.hdd_writes;
    ++vs.hdd_writes;
    return dev_.HddWrite(a_.key, t);
  }

  void SampleOccupancy() {
    for (size_t v = 0; v < vdis_.size(); ++v) occupancy_sum_[v] += vdis_[v].occupancy;
    ++occupancy_samples_;
  }

  void MaybeProgress() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_progress_ < std::chrono::seconds(1)) return;
    last_progress_ = now;
    double el = Seconds(now - start_);
    opt_.progress(absl::StrFormat("%s size=%d: %d requests, %.2fM req/s, hit ratio %.4f",
                                  res_.policy, res_.capacity_blocks, res_.requests,
                                  res_.requests / el / 1e6, res_.hit_ratio()));
  }

  // Copies the policy's own per-VDI queue state (VBQ) into the rows.
  void AddQueueStats() {
#ifdef RC_SIM_HAVE_VDI_STATS
    std::vector<policy::VdiStats> queues;
    policy_->AppendVdiStats(&queues);
    for (const policy::VdiStats& q : queues) {
      if (q.vdi >= vdis_.size()) continue;
      VdiStats& v = vdis_[q.vdi];
      v.has_queue = true;
      v.queue_accesses = q.accesses;
      v.queue_blocks = q.blocks;
      v.queue_max = q.max_blocks;
      v.queue_upper = q.upper;
      v.queue_lower = q.lower;
      v.admit_first = q.admit_first;
      v.admit_bar = q.admit_bar;
      v.region_margin = q.region_margin;
      v.budget_margin = q.budget_margin;
    }
#endif
  }

  const RunOptions& opt_;
  CostConfig cost_;
  DeviceModel dev_;
  const std::vector<uint64_t>* next_use_;
  std::shared_ptr<policy::WriteBudget> budget_;  // before policy_: the policy holds it too
  std::unique_ptr<CachePolicy> policy_;
  SimResult res_;
  std::vector<VdiStats> vdis_;
  std::vector<double> occupancy_sum_;
  uint64_t occupancy_samples_ = 0;
  std::vector<double> slots_;  // completion times of the last iodepth requests
  Outcome out_;
  Access a_;
  double response_sum_ = 0;
  double first_arrival_ = 0, last_arrival_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_progress_;
};

}  // namespace

absl::StatusOr<SimResult> RunOne(const SourceFactory& open, const PolicyFactory& make_policy,
                                 const std::string& spec, uint64_t capacity_blocks,
                                 uint64_t ram_blocks, const RunOptions& options,
                                 const std::vector<uint64_t>* next_use) {
  if (options.block_size == 0) return absl::InvalidArgumentError("block size is 0");
  CostConfig cost = options.cost;
  cost.block_size = options.block_size;
  if (absl::Status s = cost.Validate(); !s.ok()) return s;
  if (IsOfflineSpec(spec) && next_use == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("'", spec, "' needs next_use"));
  }
  Replay replay(options, cost, next_use);
  if (absl::Status s = replay.Init(make_policy, spec, capacity_blocks, ram_blocks); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<RequestSource>> src = open();
  if (!src.ok()) return src.status();
  if (absl::Status s = replay.Run(**src); !s.ok()) return s;
  return replay.Finish(**src);
}

}  // namespace ringcache::sim
