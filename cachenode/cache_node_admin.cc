// The cache node's administration: per-VDI registration, policy and mode, flush, drops and
// invalidation, usage and statistics, and the metrics they publish. The data path (reads,
// writes, trims) is in cache_node.cc; cache_node.h has the locking order.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "cachenode/cache_node.h"
#include "cachenode/policy/registry.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

// ---------------------------------------------------------------------------------------------
// VDI registration, policy and metrics

void CacheNode::AddNodeGauges() {
  const metrics::Labels node{{"node", absl::StrCat(config_.node_id)}};
  registry_->AddCallbackGauge("ringcache_cachenode_cached_blocks", "Blocks held by the cache.",
                              node, [this] { return static_cast<double>(cached_blocks()); });
  registry_->AddCallbackGauge(
      "ringcache_cachenode_dirty_bytes", "Dirty bytes not yet destaged.", node,
      [this] { return static_cast<double>(dirty_blocks() * config_.block_size); });
  registry_->AddCallbackGauge("ringcache_cachenode_free_slots", "Free SSD slots.", node,
                              [this] { return static_cast<double>(slots_->free_slots()); });
  registry_->AddCallbackGauge(
      "ringcache_cachenode_device_failed",
      "1 after the SSD file failed a write or fdatasync (sticky: the node is fenced).", node,
      [this] { return slots_->failed().ok() ? 0.0 : 1.0; });
  registry_->AddCallbackGauge(
      "ringcache_cachenode_quarantined",
      "1 while the node lost ownership and waits to be re-admitted (persisted).", node,
      [this] { return owner_->quarantined() ? 1.0 : 0.0; });
  registry_->AddCallbackCounter(
      "ringcache_cachenode_ssd_written_bytes_total",
      "Bytes written to the SSD's slots since wear records began (kept in <state>.wear).", node,
      [this] { return static_cast<double>(wear().written_bytes); });
  if (budget_ != nullptr) {
    registry_->AddCallbackGauge("ringcache_cachenode_ssd_budget_bytes_per_day",
                                "The SSD write budget (its rating), bytes per day.", node,
                                [this] { return config_.ssd_budget_bytes_per_day; });
    registry_->AddCallbackGauge(
        "ringcache_cachenode_ssd_budget_fill",
        "The write budget's bucket: 1 full, under 0.5 admission tightens, <= 0 spent.", node,
        [this] { return wear().fill; });
    registry_->AddCallbackGauge(
        "ringcache_cachenode_ssd_budget_state",
        "0 open, 1 tight (only second misses enter), 2 closed (every miss goes around).", node,
        [this] {
          const std::optional<policy::WriteBudget::Snapshot> b = map_->BudgetSnapshot();
          return b ? static_cast<double>(b->state) : 0.0;
        });
    registry_->AddCallbackGauge("ringcache_cachenode_ssd_write_rate_bytes_per_second",
                                "SSD writes, averaged over about an hour.", node,
                                [this] { return wear().rate_bytes_per_s; });
    registry_->AddCallbackGauge(
        "ringcache_cachenode_ssd_life_days_left",
        "Days until the rating's life (budget x 365 x ssd_rated_years) is written at the "
        "current rate (-1: no writes yet).",
        node, [this] { return wear().life_days; });
    registry_->AddCallbackCounter("ringcache_cachenode_ssd_budget_around_total",
                                  "Misses the write budget sent around the cache.", node,
                                  [this] { return static_cast<double>(wear().around); });
  }
  registry_->AddCallbackGauge("ringcache_cachenode_ring_epoch",
                              "Highest cache ring epoch seen (fencing token of new writes).", node,
                              [this] { return static_cast<double>(owner_->epoch()); });
}

void CacheNode::AddVdiGauges(const v1::VdiGeometry& vdi) {
  const metrics::Labels lb{{"vdi", vdi.name()}, {"node", absl::StrCat(config_.node_id)}};
  // One field of this VDI's row of the policy's VdiStats, or `none` without a row.
  auto stat = [this, id = vdi.vdi_id()](auto field, double none) {
    return [this, id, field, none] {
      for (const auto& p : map_->VdiStats()) {
        if (p.vdi == id) return static_cast<double>(p.*field);
      }
      return none;
    };
  };
  // VBQ state (paper 002 eq. 1-5): queue length, L_m, U_i, D_i of this VDI's queue.
  auto vbq = [&stat](auto field) { return stat(field, 0.0); };
  registry_->AddCallbackGauge("ringcache_vdi_queue_max_blocks",
                              "VBQ maximum queue length L_m in blocks (paper 002 eq. 2).", lb,
                              vbq(&policy::VdiStats::max_blocks));
  registry_->AddCallbackGauge("ringcache_vdi_queue_upper_bound",
                              "VBQ upper bound U_i as a fraction of L_m (eq. 4).", lb,
                              vbq(&policy::VdiStats::upper));
  registry_->AddCallbackGauge("ringcache_vdi_queue_lower_bound",
                              "VBQ lower bound D_i as a fraction of L_m (eq. 5).", lb,
                              vbq(&policy::VdiStats::lower));
  registry_->AddCallbackGauge("ringcache_vdi_queue_blocks", "Blocks in the VDI's queue.", lb,
                              vbq(&policy::VdiStats::blocks));
  registry_->AddCallbackGauge(
      "ringcache_vdi_admission_first_miss_fraction",
      "Adaptive sieve (sieve(adapt=1)): fraction of first read misses admitted at once; -1 "
      "without it.",
      lb, stat(&policy::VdiStats::admit_first, -1.0));
  registry_->AddCallbackGauge(
      "ringcache_vdi_admission_victim_frequency",
      "Frequency gate (sieve(freq=1)): mean estimated recent accesses of the VDI's recent "
      "victims, the bar a first read miss must pass by the margin; -1 without the gate or "
      "before the VDI's first eviction.",
      lb, stat(&policy::VdiStats::admit_bar, -1.0));
  registry_->AddCallbackGauge(
      "ringcache_vdi_admission_region_margin",
      "Frequency gate's region test (sieve(region_adapt=1)): the margin a first read miss's "
      "region must beat a recent victim's by, moved by what the blocks it admitted did; -1 "
      "when fixed or before the test admitted anything of the VDI.",
      lb, stat(&policy::VdiStats::region_margin, -1.0));
  registry_->AddCallbackGauge(
      "ringcache_vdi_admission_budget_margin",
      "Write budget (sieve(budget=B)): how many accesses more every admission test asks of a "
      "missed block, raised while the VDI's admissions cost more SSD writes per read hit than "
      "B; -1 without a budget or before anything of the VDI was admitted under it.",
      lb, stat(&policy::VdiStats::budget_margin, -1.0));
  registry_->AddCallbackGauge(
      "ringcache_vdi_oldest_dirty_seconds",
      "How long the VDI's oldest dirty block on this node has waited for its destage.", lb,
      [this, id = vdi.vdi_id()] {
        return absl::ToDoubleSeconds(map_->OldestDirtyAge(id));
      });
}

absl::Status CacheNode::ApplyShare(const v1::VdiGeometry& vdi) {
  const double min = vdi.ssd_min_permille() / 1000.0;
  const double max = vdi.ssd_max_permille() == 0 ? 1.0 : vdi.ssd_max_permille() / 1000.0;
  absl::Status s = map_->SetVdiShare(vdi.vdi_id(), min, max);
  // No share asked for: a node policy without per-VDI queues is fine.
  if (!s.ok() && min == 0 && max == 1) return absl::OkStatus();
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cache node ", config_.node_id, ": VDI ",
                                               vdi.name(), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status CacheNode::RegisterVdi(const v1::VdiGeometry& vdi) {
  // The share first: one the node cannot give refuses the registration, changing nothing.
  RC_RETURN_IF_ERROR(ApplyShare(vdi));
  RC_ASSIGN_OR_RETURN(const bool fresh, vdis_->Register(vdi));
  if (fresh) {
    AddVdiGauges(vdi);
    SetPolicyGauge(vdi, "", map_->VdiPolicy(vdi.vdi_id()));
  }
  return vdis_->Save();
}

void CacheNode::SetPolicyGauge(const v1::VdiGeometry& vdi, const std::string& old,
                               const std::string& policy) {
  const std::string node = absl::StrCat(config_.node_id);
  if (!old.empty()) {
    registry_->RemoveSeries({{"vdi", vdi.name()}, {"node", node}, {"policy", old}});
  }
  registry_->AddCallbackGauge(
      "ringcache_vdi_policy_info", "The cache policy a VDI runs under (value 1; label policy).",
      {{"vdi", vdi.name()}, {"node", node}, {"policy", policy}}, [] { return 1.0; });
}

absl::Status CacheNode::SetPolicy(uint32_t vdi, const std::string& spec_in) {
  const std::string spec = policy::CanonicalVdiPolicy(spec_in);
  absl::MutexLock l(&policy_mu_);
  RC_ASSIGN_OR_RETURN(const VdiInfo v, vdis_->Get(vdi));
  if (v.policy == spec) return absl::OkStatus();
  const std::string before = map_->VdiPolicy(vdi);
  RC_RETURN_IF_ERROR(map_->SetVdiPolicy(vdi, spec, policy_ctx_));
  RC_RETURN_IF_ERROR(vdis_->SetPolicy(vdi, spec));
  RC_RETURN_IF_ERROR(vdis_->Save());
  const std::string after = map_->VdiPolicy(vdi);
  SetPolicyGauge(v.geometry, before, after);
  policy_switches_->Increment();
  spdlog::info("cache node {}: VDI {} policy {} -> {}", config_.node_id, v.geometry.name(), before,
               after);
  return absl::OkStatus();
}

std::string CacheNode::PolicyOf(uint32_t vdi) const { return map_->VdiPolicy(vdi); }

// ---------------------------------------------------------------------------------------------
// Modes, flush, membership changes

std::optional<SlotKey> CacheNode::NextDestageForTest() {
  const std::optional<BlockKey> key = map_->NextDirty();
  if (key) map_->RequeueDirty(*key, /*front=*/true);
  return key;
}

absl::Status CacheNode::Flush(uint32_t vdi) { return destager_->Flush(vdi, nullptr); }

absl::Status CacheNode::FlushMoving(const ring::Ring& ring) { return destager_->Flush(0, &ring); }

absl::Status CacheNode::SetMode(uint32_t vdi, CacheMode mode) {
  RC_RETURN_IF_ERROR(vdis_->SetMode(vdi, mode));
  RC_RETURN_IF_ERROR(vdis_->Save());
  // Leaving write-back: no new dirty blocks appear from now on; destage the existing ones.
  if (mode != CacheMode::kWriteBack) RC_RETURN_IF_ERROR(Flush(vdi));
  return absl::OkStatus();
}

absl::StatusOr<CacheMode> CacheNode::GetMode(uint32_t vdi) const {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  return v.mode;
}

absl::Status CacheNode::DropVdi(uint32_t vdi_id) {
  RC_ASSIGN_OR_RETURN(VdiInfo info, vdis_->Get(vdi_id));
  std::vector<BlockKey> keys;
  map_->ForEach([&](const BlockKey& k, const BlockEntry&) {
    if (k.vdi == vdi_id) keys.push_back(k);
  });
  for (const BlockKey& k : keys) RC_RETURN_IF_ERROR(InvalidateUnderStripe(k));
  RC_RETURN_IF_ERROR(slots_->Sync());
  {
    // Its own policy goes with it: a VDI registered again starts on the node's.
    absl::MutexLock l(&policy_mu_);
    RC_RETURN_IF_ERROR(map_->SetVdiPolicy(vdi_id, "", policy_ctx_));
  }
  // And its share of the cache: a deleted VDI's minimum must not hold space for nobody.
  (void)map_->SetVdiShare(vdi_id, 0, 1);
  vdis_->Erase(vdi_id);
  // Its ringcache_vdi_* series leave /metrics (they come back if the VDI is registered again).
  registry_->RemoveSeries({{"vdi", info.geometry.name()}, {"node", absl::StrCat(config_.node_id)}});
  return vdis_->Save();
}

void CacheNode::SetDestagePlannedHookForTest(std::function<void()> hook) {
  destager_->SetPlannedHookForTest(std::move(hook));
}

void CacheNode::SetDestageGate(std::function<bool()> gate) {
  absl::MutexLock l(&gate_mu_);
  destage_gate_ = std::move(gate);
}

absl::StatusOr<CacheNode::DropResult> CacheNode::DropBlocks(bool drop_dirty,
                                                            const ring::Ring* ring) {
  DropResult r;
  std::vector<BlockKey> keys;
  map_->ForEach([&](const BlockKey& k, const BlockEntry& e) {
    if (ring != nullptr) {
      if (const auto l = vdis_->Layout(k.vdi)) {
        const uint64_t object = k.block / l->blocks_per_object;
        if (ring->Owner(ring::ObjectKey{k.vdi, object}) == config_.node_id) return;
      }
    }
    if (e.dirty && !drop_dirty) {
      ++r.dirty_kept;
      return;
    }
    keys.push_back(k);
  });
  for (const BlockKey& k : keys) RC_RETURN_IF_ERROR(InvalidateUnderStripe(k));
  RC_RETURN_IF_ERROR(slots_->Sync());
  r.dropped = keys.size();
  spdlog::info("cache node {}: dropped {} cached blocks ({}), kept {} dirty", config_.node_id,
               r.dropped, ring == nullptr ? "all" : "objects owned elsewhere", r.dirty_kept);
  return r;
}

absl::StatusOr<CacheNode::DropResult> CacheNode::InvalidateVdi(uint32_t vdi) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  const uint64_t blocks_per_object = v.geometry.object_size() / config_.block_size;
  std::vector<BlockKey> keys;
  map_->ForEach([&](const BlockKey& k, const BlockEntry&) {
    if (k.vdi == vdi) keys.push_back(k);
  });
  DropResult r;
  for (const BlockKey& k : keys) {
    absl::MutexLock stripe(&stripes_.Of(vdi, k.block / blocks_per_object));
    // Dirtied since the scan (writes take the stripe lock): the only copy, keep it.
    if (map_->DirtyBlock(k).has_value()) {
      ++r.dirty_kept;
      continue;
    }
    RC_RETURN_IF_ERROR(writer_->Invalidate(k));
    ++r.dropped;
  }
  RC_RETURN_IF_ERROR(slots_->Sync());
  spdlog::info("cache node {}: VDI {} invalidated: dropped {} clean blocks, kept {} dirty",
               config_.node_id, v.geometry.name(), r.dropped, r.dirty_kept);
  return r;
}

CacheNode::Usage CacheNode::usage() const {
  Usage u;
  // While a shrink runs: the target's slots, and the blocks still past it count as used.
  const uint32_t usable = slots_->usable_slots();
  const uint32_t past = slots_->shrink_target() != 0 ? slots_->used_past_target() : 0;
  u.ssd_bytes = uint64_t{usable} * config_.block_size;
  u.ssd_used_bytes = uint64_t{usable - slots_->free_slots() + past} * config_.block_size;
  u.dirty_bytes = map_->dirty_blocks() * config_.block_size;
  for (const VdiInfo& v : vdis_->All()) {
    u.hits += v.counters->hits_ram + v.counters->hits_ssd;
    u.misses += v.counters->misses;
  }
  return u;
}

CacheNode::Wear CacheNode::wear() const {
  Wear w;
  w.written_bytes = wear_base_bytes_ + slots_->blocks_written() * config_.block_size;
  w.budget_bytes_per_day = config_.ssd_budget_bytes_per_day;
  const std::optional<policy::WriteBudget::Snapshot> b = map_->BudgetSnapshot();
  if (!b) return w;
  w.state = std::string(policy::BudgetStateName(b->state));
  w.fill = b->fill;
  w.rate_bytes_per_s = b->rate_blocks_per_s * config_.block_size;
  w.around = b->around_reads + b->around_writes;
  // What the rating allows over its life (budget x 365 x years), less what was written, at the
  // rate of the last hour or so.
  const double rated = w.budget_bytes_per_day * 365 * config_.ssd_rated_years;
  if (w.rate_bytes_per_s > 0) {
    w.life_days = std::max(0.0, rated - static_cast<double>(w.written_bytes)) /
                  (w.rate_bytes_per_s * 86400);
  }
  return w;
}

v1::SsdWear CacheNode::WearProto() const {
  const Wear w = wear();
  v1::SsdWear p;
  p.set_written_bytes(w.written_bytes);
  p.set_budget_bytes_per_day(w.budget_bytes_per_day);
  p.set_budget_state(w.state);
  p.set_budget_fill(w.fill);
  p.set_write_rate(w.rate_bytes_per_s);
  p.set_life_days(w.life_days);
  p.set_budget_around(w.around);
  return p;
}

void CacheNode::SaveWear(bool force) {
  absl::MutexLock l(&wear_mu_);
  const int64_t now = clock_->NowMicros();
  if (!force && wear_saved_us_ != 0 && now - wear_saved_us_ < 60'000'000) return;
  wear_saved_us_ = now;
  const std::string path = config_.StateBase() + ".wear";
  if (absl::Status s = WriteFileAtomically(
          path, absl::StrCat("ssd_written_bytes ", wear().written_bytes, "\n"));
      !s.ok()) {
    spdlog::warn("cache node {}: could not keep the SSD wear record: {}", config_.node_id,
                 s.ToString());
  }
}

uint64_t CacheNode::dirty_blocks() const { return map_->dirty_blocks(); }

uint64_t CacheNode::cached_blocks() const { return map_->cached_blocks(); }

void CacheNode::Stats(uint32_t vdi, std::vector<v1::VdiCacheStats>* out) const {
  const std::vector<policy::VdiStats> ps = map_->VdiStats();
  for (const VdiInfo& v : vdis_->All()) {
    const uint32_t id = v.id();
    if (vdi != 0 && id != vdi) continue;
    v1::VdiCacheStats s;
    s.set_vdi_id(id);
    s.set_hits_ram(v.counters->hits_ram);
    s.set_hits_ssd(v.counters->hits_ssd);
    s.set_misses(v.counters->misses);
    s.set_bypassed(v.counters->bypassed);
    s.set_dirty_bytes(static_cast<uint64_t>(std::max<int64_t>(0, v.counters->dirty_blocks)) *
                      config_.block_size);
    s.set_mode(static_cast<v1::CacheMode>(static_cast<int>(v.mode) + 1));
    s.set_policy(map_->VdiPolicy(id));
    s.set_ssd_writes(v.counters->ssd_writes);
    s.set_reads(v.counters->reads);
    s.set_writes(v.counters->writes);
    s.set_oldest_dirty_ms(
        static_cast<uint64_t>(absl::ToInt64Milliseconds(map_->OldestDirtyAge(id))));
    for (const auto& p : ps) {
      if (p.vdi != id) continue;
      s.set_queue_length(p.blocks);
      s.set_max_length(p.max_blocks);
      s.set_upper_bound(p.upper);
      s.set_lower_bound(p.lower);
      if (p.admit_first >= 0) s.set_admit_first(p.admit_first);
      if (p.admit_bar >= 0) s.set_admit_bar(p.admit_bar);
      if (p.region_margin >= 0) s.set_admit_region_margin(p.region_margin);
      if (p.budget_margin >= 0) s.set_admit_budget_margin(p.budget_margin);
    }
    out->push_back(s);
  }
}

}  // namespace ringcache::cachenode
