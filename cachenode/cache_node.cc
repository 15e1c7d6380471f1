// The cache node's front: requests in, plans from the BlockMap under object stripes, I/O outside
// the map's lock. See cache_node.h for the locking order and invariants.
#include "cachenode/cache_node.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "cachenode/policy/registry.h"
#include "common/errors.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "datanode/client/log_replay.h"

namespace ringcache::cachenode {

// LoadView for LCR: a block's load is the greatest load among its object's home data nodes (its
// destage writes all of them and is done when the slowest is).
class CacheNode::PoolLoad : public policy::LoadView {
 public:
  PoolLoad(datanode::DataNodePool* pool, const VdiTable* vdis) : pool_(pool), vdis_(vdis) {}
  double HomeLoad(const policy::BlockKey& key) const override {
    const std::optional<VdiLayout> l = vdis_->Layout(key.vdi);
    if (!l) return 0;
    return pool_->HomeLoad(key.vdi, key.block / l->blocks_per_object, l->replication);
  }

 private:
  datanode::DataNodePool* const pool_;
  const VdiTable* const vdis_;
};

double CacheNodeConfig::DirtyCap() const {
  if (dirty_cap != 0) return dirty_cap;
  return std::max(0.9, (dirty_high_watermark + 1) / 2);
}

absl::Status CacheNodeConfig::Validate() const {
  if (node_id == 0) return absl::InvalidArgumentError("cache node id must be non-zero");
  RC_RETURN_IF_ERROR((SlotStoreOptions{ssd_path, ssd_bytes, block_size}).Validate());
  if (state_dir.empty() && IsBlockDevicePath(ssd_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SSD ", ssd_path,
                     " is a block device: give a state directory (--state-dir) for the "
                     "node's state files; nothing is written beside a device node"));
  }
  if (slot_reserve < 0 || slot_reserve > 0.5) {
    return absl::InvalidArgumentError("slot_reserve must be in [0, 0.5]");
  }
  if (!(dirty_low_watermark >= 0 && dirty_low_watermark < dirty_high_watermark &&
        dirty_high_watermark <= 1)) {
    return absl::InvalidArgumentError("need 0 <= dirty_low_watermark < dirty_high_watermark <= 1");
  }
  if (dirty_cap != 0 && !(dirty_cap > dirty_high_watermark && dirty_cap <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dirty_cap ", dirty_cap, ": need dirty_high_watermark (",
                     dirty_high_watermark, ") < dirty_cap <= 1, or 0 for the default"));
  }
  if (vdi_dirty_cap < 0 || vdi_dirty_cap > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("vdi_dirty_cap ", vdi_dirty_cap, ": need 0 (no per-VDI cap) to 1"));
  }
  if (dirty_age_target_ms < 0) {
    return absl::InvalidArgumentError("dirty_age_target_ms must be >= 0 (0: no aging destage)");
  }
  if (ssd_budget_bytes_per_day < 0 || !std::isfinite(ssd_budget_bytes_per_day)) {
    return absl::InvalidArgumentError("ssd_budget_bytes_per_day must be >= 0 (0: no budget)");
  }
  if (!(ssd_budget_burst_s > 0) || !(ssd_rated_years > 0)) {
    return absl::InvalidArgumentError("ssd_budget_burst_s and ssd_rated_years must be > 0");
  }
  if (forced_destage_duty <= 0 || forced_destage_duty > 1) {
    return absl::InvalidArgumentError("forced_destage_duty must be in (0, 1]");
  }
  if (idle_window_ms <= 0 || idle_ops_per_s < 0 || forced_destage_mb_s <= 0) {
    return absl::InvalidArgumentError(
        "idle_window_ms and forced_destage_mb_s must be positive, idle_ops_per_s >= 0");
  }
  if (destage_max_blocks == 0) return absl::InvalidArgumentError("destage_max_blocks must be >= 1");
  if (destage_batch_runs == 0 || destage_batch_runs > 64) {
    return absl::InvalidArgumentError("destage_batch_runs must be in [1, 64]");
  }
  RC_RETURN_IF_ERROR(policy::MakePlacement(placement, 0).status());
  return absl::OkStatus();
}

CacheNode::CacheNode(const CacheNodeConfig& config, datanode::DataNodePool* pool, Clock* clock,
                     metrics::Registry* registry)
    : config_(config), pool_(pool), clock_(clock), registry_(registry) {
  slot_waits_ = registry_->GetCounter("ringcache_cachenode_slot_waits_total",
                                      "Times a write waited for a free SSD slot.",
                                      {{"node", absl::StrCat(config.node_id)}});
  policy_switches_ = registry_->GetCounter("ringcache_cachenode_policy_switches_total",
                                           "Per-VDI cache policy switches applied.",
                                           {{"node", absl::StrCat(config.node_id)}});
}

absl::StatusOr<std::unique_ptr<CacheNode>> CacheNode::Create(const CacheNodeConfig& config,
                                                             datanode::DataNodePool* pool,
                                                             Clock* clock,
                                                             metrics::Registry* registry) {
  RC_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<CacheNode> node(new CacheNode(config, pool, clock, registry));
  RC_RETURN_IF_ERROR(node->Init());
  return node;
}

absl::Status CacheNode::Init() {
  RC_ASSIGN_OR_RETURN(owner_, Ownership::Load(config_.StateBase()));
  // The VDI table first, so recovered blocks are counted and placed by their VDI's layout.
  vdis_ = std::make_unique<VdiTable>(config_.node_id, config_.block_size,
                                     config_.StateBase() + ".vdis", registry_);
  const std::vector<uint32_t> known = vdis_->Load();
  std::unique_ptr<File> file;
  if (config_.open_ssd_file) {
    RC_ASSIGN_OR_RETURN(file, config_.open_ssd_file(config_.ssd_path));
  }
  std::vector<RecoveredSlot> recovered;
  RC_ASSIGN_OR_RETURN(slots_,
                      SlotStore::Open({config_.ssd_path, config_.ssd_bytes, config_.block_size,
                                       config_.node_id, config_.cluster_id},
                                      &recovered, &recovery_, std::move(file)));
  // A store resized online keeps its own size (a pending shrink: its target), whatever the
  // configuration says.
  const uint32_t usable = slots_->usable_slots();
  if (slots_->num_slots() != config_.ssd_bytes / config_.block_size) {
    spdlog::warn(
        "cache node {}: the SSD tier was resized online to {} bytes{}; the configured size ({} "
        "bytes) is not used (set it to the store's size in the node's configuration)",
        config_.node_id, uint64_t{slots_->num_slots()} * config_.block_size,
        slots_->shrink_target() != 0
            ? absl::StrCat(", shrinking to ", uint64_t{usable} * config_.block_size)
            : "",
        config_.ssd_bytes);
  }
  const size_t reserve = ReserveFor(usable);
  if (reserve >= usable) {
    return absl::InvalidArgumentError("SSD too small for its slot reserve");
  }
  load_view_ = std::make_unique<PoolLoad>(pool_, vdis_.get());
  policy::PolicyContext ctx;
  // Membership is bounded by SSD slots so that every block can keep one: a dirty block always
  // does (invariant 1), a block promoted to RAM keeps its slot as a shadow copy. An exclusive
  // placement adds the RAM tier's blocks; slot pressure then sheds members (AllocateSlots).
  ctx.capacity_blocks = usable - reserve;
  ctx.ram_blocks = RamBytesAtStart() / config_.block_size;
  ctx.load = load_view_.get();
  RC_ASSIGN_OR_RETURN(auto placement, policy::MakePlacement(config_.placement, ctx.ram_blocks));
  ctx = policy::NodeMembershipContext(ctx, *placement);
  if (config_.ssd_budget_bytes_per_day > 0) {
    const policy::WriteBudgetConfig bc = policy::WriteBudgetConfig::ForRating(
        config_.ssd_budget_bytes_per_day, config_.block_size, config_.ssd_budget_burst_s,
        ctx.capacity_blocks);
    RC_RETURN_IF_ERROR(bc.Validate());
    budget_ = std::make_shared<policy::WriteBudget>(bc);
    ctx.write_budget = budget_;
    if (policy::IsCompletePolicy(config_.policy)) {
      spdlog::warn("cache node {}: policy '{}' is a complete policy: it runs without the SSD "
                   "write budget (a driver spec, e.g. the default, applies it)",
                   config_.node_id, config_.policy);
    }
  }
  if (absl::StatusOr<std::string> w = ReadStateFile(config_.StateBase() + ".wear"); w.ok()) {
    uint64_t n = 0;
    if (absl::SimpleAtoi(absl::StripPrefix(absl::StripAsciiWhitespace(*w), "ssd_written_bytes "),
                         &n)) {
      wear_base_bytes_ = n;
    } else {
      spdlog::warn("cache node {}: {}.wear is not a wear record; SSD wear counts from 0",
                   config_.node_id, config_.StateBase());
    }
  }
  RC_ASSIGN_OR_RETURN(auto policy, policy::MakePolicy(config_.policy, ctx));
  policy_ctx_ = ctx;
  const metrics::Labels node{{"node", absl::StrCat(config_.node_id)}};
  map_ = std::make_unique<BlockMap>(
      std::move(policy), std::move(placement), config_.block_size, vdis_.get(), clock_,
      registry_->GetCounter("ringcache_cachenode_evictions_total", "Blocks evicted by the policy.",
                            node),
      registry_->GetCounter("ringcache_cachenode_slot_pressure_evictions_total",
                            "Blocks evicted because the SSD slots ran out before the "
                            "policy's capacity (exclusive RAM tier).",
                            node));
  map_->set_slot_headroom(static_cast<uint32_t>(reserve));
  if (budget_ != nullptr) {
    map_->set_write_budget(budget_, [slots = slots_.get()] { return slots->blocks_written(); });
  }
  map_->set_stream_read_blocks(
      static_cast<uint32_t>(config_.stream_read_bytes / config_.block_size));
  repair_ = std::make_unique<SlotRepair>(config_.node_id, config_.block_size, slots_.get(),
                                         map_.get(), pool_, clock_, registry_);
  AdoptRecovered(std::move(recovered));
  for (uint32_t id : known) {
    absl::StatusOr<VdiInfo> v = vdis_->Get(id);
    if (!v.ok()) continue;
    AddVdiGauges(v->geometry);
    if (absl::Status s = ApplyShare(v->geometry); !s.ok()) {
      spdlog::warn("{} (runs without it until the gateway registers the VDI again)",
                   std::string(s.message()));
    }
    // A VDI's own policy, as it ran before the restart (its queue starts over, not its blocks).
    if (!v->policy.empty()) {
      if (absl::Status s = map_->SetVdiPolicy(id, v->policy, policy_ctx_); !s.ok()) {
        spdlog::warn("cache node {}: VDI {} keeps the node policy: its own '{}' cannot run: {}",
                     config_.node_id, v->geometry.name(), v->policy, std::string(s.message()));
        (void)vdis_->SetPolicy(id, "");
      }
    }
    SetPolicyGauge(v->geometry, "", map_->VdiPolicy(id));
  }
  spdlog::info(
      "cache node {}: {} SSD slots of {} bytes, recovered {} blocks ({} dirty, {} stale, "
      "{} torn/corrupt dropped), policy {}, placement {}",
      config_.node_id, slots_->num_slots(), config_.block_size, recovery_.slots_valid,
      recovery_.slots_dirty, recovery_.stale_versions, recovery_.torn_or_corrupt, config_.policy,
      config_.placement);
  AddNodeGauges();
  // The data ring this node last saved may be older than the cluster's (it was down while the
  // ring changed), or gone with a wiped state directory (the cluster file's ring then): every
  // data node keeps the newest ring the gateway published; take it before anything goes home.
  if (absl::StatusOr<bool> newer = pool_->AdoptNewestKeptRing(); !newer.ok()) {
    spdlog::warn("cache node {}: could not ask the data nodes for the current data ring: {}",
                 config_.node_id, newer.status().ToString());
  } else if (*newer) {
    RC_RETURN_IF_ERROR(datanode::SaveDataRing(DataRingPath(config_.StateBase()), pool_->ring()));
  }
  const std::string seq_path = config_.StateBase() + ".logseq";
  uint64_t min_seq = 0;
  if (!slots_->created()) RC_RETURN_IF_ERROR(CheckStoreIsCurrent());
  if (slots_->created() || ::access(seq_path.c_str(), F_OK) != 0) {
    RC_ASSIGN_OR_RETURN(min_seq, AdoptIncarnation(slots_->created()));
  }
  registry_->AddCallbackGauge(
      "ringcache_cachenode_store_info",
      "The SSD store's identity: its incarnation (made at creation).",
      {{"node", absl::StrCat(config_.node_id)}, {"incarnation", slots_->incarnation()}},
      [] { return 1.0; });
  RC_ASSIGN_OR_RETURN(log_, WriteLog::Open({config_.node_id, seq_path, 200, min_seq}, pool_,
                                           registry_, [this] { return map_->LiveLogSeqs(); }));
  // The sequence mark is above the old incarnation's now: the takeover is complete.
  RC_RETURN_IF_ERROR(slots_->MarkAdopted());
  DestagerOptions dopt;
  dopt.node_id = config_.node_id;
  dopt.block_size = config_.block_size;
  dopt.destage_max_blocks = config_.destage_max_blocks;
  dopt.destage_batch_runs = config_.destage_batch_runs;
  dopt.relog_after_ms = config_.relog_after_ms;
  dopt.planner = {config_.idle_ops_per_s,       config_.idle_window_ms,
                  config_.dirty_high_watermark, config_.dirty_low_watermark,
                  config_.forced_destage_mb_s,  config_.forced_destage_duty,
                  usable,                       config_.dirty_age_target_ms,
                  config_.DirtyCap()};
  dopt.planner.vdi_dirty_cap = config_.vdi_dirty_cap;
  DestagerContext dctx{
      map_.get(), vdis_.get(), slots_.get(), repair_.get(), log_.get(),
      pool_,      &stripes_,   owner_.get(), clock_,        [this] { return CheckOwner(); }};
  writer_ = std::make_unique<BlockWriter>(config_.node_id, config_.block_size, map_.get(),
                                          slots_.get(), log_.get(), pool_, owner_.get());
  destager_ = std::make_unique<Destager>(dopt, dctx, registry_);
  destager_->Start();
  if (const uint32_t target = slots_->shrink_target(); target != 0) {
    // A shrink the last run did not finish: its blocks past the target leave now.
    spdlog::info("cache node {}: resuming the shrink of the SSD tier to {} slots",
                 config_.node_id, target);
    map_->EvictSlotsFrom(target);
    absl::MutexLock l(&policy_mu_);
    StartShrinkWatch();
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CacheNode::AdoptIncarnation(bool new_store) {
  const absl::Time deadline = absl::Now() + absl::Milliseconds(config_.incarnation_wait_ms);
  absl::Time next_log = absl::InfinitePast();
  spdlog::warn(
      "cache node {}: new store incarnation {} ({}): asking the data nodes for the "
      "node's sequence mark{}",
      config_.node_id, slots_->incarnation(),
      new_store ? "a new or wiped SSD" : "the sequence mark file is missing",
      new_store ? " and replaying the old incarnation's log home before serving" : "");
  for (;;) {
    absl::Status failed;
    absl::StatusOr<datanode::WriterState> state = pool_->QueryWriter(config_.node_id);
    if (state.ok() && new_store) {
      // The old incarnation's dirty blocks live on only in its log records: they go home
      // (conditionally: never over a newer home copy) before this one serves any object.
      const datanode::WriterState& st = *state;
      absl::StatusOr<datanode::ReplayStats> replay =
          datanode::ReplayCacheNodeLog(pool_, config_.node_id, [&st](uint32_t vdi) {
            auto it = st.replication.find(vdi);
            return it == st.replication.end() ? 0u : it->second;
          });
      if (replay.ok()) {
        spdlog::warn(
            "cache node {}: the old incarnation's log is home: {} blocks written, {} "
            "already home, {} of deleted VDIs",
            config_.node_id, replay->blocks_written, replay->blocks_skipped,
            replay->blocks_orphaned);
        // From now on this store is the node's current one: the old one, put back, is stale.
        failed = pool_->PutWriterIncarnation(config_.node_id, slots_->incarnation(), false);
      } else {
        failed = replay.status();
      }
    } else if (!state.ok()) {
      failed = state.status();
    }
    if (failed.ok()) {
      spdlog::info("cache node {}: sequences start above {}", config_.node_id, state->high_water);
      return state->high_water + 1;
    }
    if (absl::Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "cache node ", config_.node_id,
          " has a new store incarnation and needs every data "
          "node to answer before it serves (its old log must go home first); gave up after ",
          config_.incarnation_wait_ms / 1000, " s: ", failed.message()));
    }
    if (absl::Now() >= next_log) {
      spdlog::warn("cache node {}: waiting for the data nodes: {}", config_.node_id,
                   std::string(failed.message()));
      next_log = absl::Now() + absl::Seconds(10);
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
}

absl::Status CacheNode::CheckStoreIsCurrent() {
  const std::string& mine = slots_->incarnation();
  // Waits a little for a first answer (the data nodes may be starting too), never for all.
  const absl::Time give_up =
      absl::Now() + std::min(absl::Seconds(10), absl::Milliseconds(config_.incarnation_wait_ms));
  absl::flat_hash_map<uint32_t, std::string> held = pool_->WriterIncarnations(config_.node_id);
  while (held.empty() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(500));
    held = pool_->WriterIncarnations(config_.node_id);
  }
  for (const auto& [node, current] : held) {
    if (current.empty() || current == mine) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "cache node ", config_.node_id, ": the SSD store ", config_.ssd_path, " is incarnation ",
        mine, ", but data node ", node, " records incarnation ", current,
        " as the node's current store: a newer SSD took this node over since (and sent the old "
        "one's dirty blocks home), so the blocks on this one are stale. Start the node on an "
        "empty store (remove or replace ",
        config_.ssd_path, ") or on its current SSD"));
  }
  if (held.empty()) {
    spdlog::warn(
        "cache node {}: no data node answered: could not check that SSD store {} is "
        "the node's current one",
        config_.node_id, mine);
  }
  // A store started before incarnations were recorded (or a data node on a new disk) gets it.
  if (absl::Status s = pool_->PutWriterIncarnation(config_.node_id, mine, true); !s.ok()) {
    spdlog::warn("cache node {}: could not record its store incarnation: {}", config_.node_id,
                 s.ToString());
  }
  return absl::OkStatus();
}

void CacheNode::AdoptRecovered(std::vector<RecoveredSlot> recovered) {
  for (const RecoveredSlot& r : recovered) {
    if (r.damaged && !repair_->RepairRecoveredSlot(r).ok()) {
      slots_->Release(r.slot).IgnoreError();
      continue;  // keep the older version, if any
    }
    Leftovers left;
    map_->AdoptRecovered(r, &left);
    for (uint32_t slot : left.slots) slots_->Release(slot).IgnoreError();
  }
}

CacheNode::~CacheNode() {
  {
    absl::MutexLock l(&shrink_mu_);
    shrink_stop_ = true;
  }
  if (shrink_thread_.joinable()) shrink_thread_.join();
  if (destager_) destager_->Stop();
  log_.reset();
  if (slots_) (void)slots_->Sync();
  if (slots_ && map_) SaveWear(/*force=*/true);
}

absl::StatusOr<uint32_t> CacheNode::RelogRecords(const absl::flat_hash_set<uint64_t>& seqs) {
  if (destager_ == nullptr) return absl::FailedPreconditionError("the node is not serving");
  return destager_->RelogRecords(seqs);
}

absl::Status CacheNode::SetDataRing(const datanode::DataRing& ring) {
  absl::MutexLock l(&data_ring_mu_);
  const uint64_t before = pool_->ring().epoch;
  RC_RETURN_IF_ERROR(pool_->SetRing(ring));
  RC_RETURN_IF_ERROR(datanode::SaveDataRing(DataRingPath(config_.StateBase()), pool_->ring()));
  if (ring.epoch == before) return absl::OkStatus();
  spdlog::info("data ring epoch {}: {} members{}", ring.epoch, ring.members.size(),
               ring.target.empty() ? ""
                                   : absl::StrCat(", writes also to the ", ring.target.size(),
                                                  " members of the target ring"));
  return absl::OkStatus();
}

void CacheNode::RelieveSlotPressure(uint32_t need) {
  Leftovers left;
  map_->RelieveSlotPressure(slots_->free_slots(), need, &left);
  for (uint32_t s : left.slots) slots_->Release(s).IgnoreError();
}

absl::Status CacheNode::AllocateSlots(uint32_t n, std::vector<uint32_t>* out, absl::Time deadline) {
  // An exclusive node's slots can run out while its policy has room: free shadow slots, or shed
  // members for the reclaimer to free, before they do, keeping the slot reserve free (a no-op
  // otherwise).
  RelieveSlotPressure(n);
  for (int attempt = 0;; ++attempt) {
    absl::Status s = slots_->AllocateMany(n, out);
    if (s.code() != absl::StatusCode::kResourceExhausted) return s;
    if (attempt == 0) slot_waits_->Increment();
    // Again every 0.5 s, in case the blocks shed were dirty and slow to go.
    if (attempt % 50 == 49) RelieveSlotPressure(n);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("no SSD slot freed before the request's deadline");
    }
    if (attempt > 6000) {
      return absl::ResourceExhaustedError("no SSD slots freed within 60 s");
    }
    clock_->SleepFor(absl::Milliseconds(10));
  }
}

// ---------------------------------------------------------------------------------------------
// Reads

absl::Status CacheNode::ReadBlocks(const VdiInfo& v, uint64_t object, uint32_t first,
                                   uint32_t count, char* out) {
  std::vector<ReadPlan> plan;
  map_->PlanRead(v, object, first, count, &plan);
  v.counters->reads += count;
  destager_->NoteForeground(count);
  std::string scratch;
  char* buf = out;
  if (buf == nullptr) {  // prefetch
    scratch.resize(uint64_t{count} * config_.block_size);
    buf = scratch.data();
  }
  RC_RETURN_IF_ERROR(ServeCached(v, object, first, &plan, buf));
  RC_RETURN_IF_ERROR(FetchMisses(v, object, first, plan, buf));
  FillAndPromote(v, object, first, plan, buf);
  return absl::OkStatus();
}

absl::Status CacheNode::ServeCached(const VdiInfo& v, uint64_t object, uint32_t first,
                                    std::vector<ReadPlan>* plan, char* buf) {
  const uint32_t bs = config_.block_size;
  std::vector<SlotRepair::BlockRead> from_ssd;
  for (uint32_t i = 0; i < plan->size(); ++i) {
    ReadPlan& p = (*plan)[i];
    char* dst = buf + uint64_t{i} * bs;
    if (p.ram) {
      std::memcpy(dst, p.ram->data(), bs);
    } else if (p.slot >= 0) {
      from_ssd.push_back({v.KeyOf(object, first + i), object, first + i,
                          static_cast<uint32_t>(p.slot), p.dirty, dst, absl::OkStatus()});
    } else if (!p.miss) {
      p.miss = true;  // a member with no storage yet (being filled by nobody): fetch
    }
  }
  if (from_ssd.empty()) return absl::OkStatus();
  // One scatter read per run of adjacent slots (a large request's blocks usually are).
  repair_->ReadBlocks(&from_ssd);
  for (SlotRepair::BlockRead& b : from_ssd) {
    if (b.status.ok()) continue;
    if (b.dirty) return b.status;
    // A clean copy is also on the data nodes: drop the bad slot and fetch again.
    ReadPlan& p = (*plan)[b.block_in_object - first];
    p.miss = true;
    p.admit = false;
    p.promote = false;
    writer_->Invalidate(b.key).IgnoreError();
  }
  return absl::OkStatus();
}

absl::Status CacheNode::FetchMisses(const VdiInfo& v, uint64_t object, uint32_t first,
                                    const std::vector<ReadPlan>& plan, char* buf) {
  const uint32_t bs = config_.block_size;
  const auto count = static_cast<uint32_t>(plan.size());
  for (uint32_t i = 0; i < count;) {
    if (!plan[i].miss) {
      ++i;
      continue;
    }
    uint32_t j = i;
    while (j < count && plan[j].miss) ++j;
    RC_ASSIGN_OR_RETURN(datanode::BlockRun run, pool_->Read(v.id(), object, first + i, j - i,
                                                            v.geometry.replication(), bs));
    std::memcpy(buf + uint64_t{i} * bs, run.data.data(), run.data.size());
    i = j;
  }
  return absl::OkStatus();
}

void CacheNode::FillAndPromote(const VdiInfo& v, uint64_t object, uint32_t first,
                               const std::vector<ReadPlan>& plan, const char* buf) {
  const uint32_t bs = config_.block_size;
  for (uint32_t i = 0; i < plan.size(); ++i) {
    const ReadPlan& p = plan[i];
    if (!p.admit && !p.promote) continue;
    const BlockKey key = v.KeyOf(object, first + i);
    const char* data = buf + uint64_t{i} * bs;
    if (!map_->FillOrPromote(key, p.promote, std::make_shared<const std::string>(data, bs))) {
      continue;
    }
    // Clean fill: no sync needed (a torn clean slot fails its checksum and is dropped). Never
    // wait for a slot here (a stripe is held); without one the block is simply not cached.
    auto slot = slots_->Allocate();
    const bool written = slot.ok() && slots_->WriteSlot(*slot, key, false, data).ok();
    if (written) ++v.counters->ssd_writes;
    if (!map_->PlaceFilled(key, written ? std::optional<uint32_t>(*slot) : std::nullopt) &&
        slot.ok()) {
      slots_->Release(*slot).IgnoreError();
    }
  }
}

bool CacheNode::IsStored(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len) {
  absl::StatusOr<VdiInfo> v = vdis_->Get(vdi);
  if (!v.ok() || len == 0 || uint64_t{offset} + len > v->geometry.object_size()) return false;
  const uint32_t bs = config_.block_size;
  const uint32_t first = offset / bs, last = (offset + len - 1) / bs;
  return map_->AllStored(*v, object, first, last - first + 1);
}

absl::Status CacheNode::CheckRange(uint32_t vdi, uint32_t offset, uint32_t len) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("read beyond the object");
  }
  return absl::OkStatus();
}

absl::Status CacheNode::Read(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                             char* out) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0) return absl::OkStatus();
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("read beyond the object");
  }
  const uint32_t first = offset / bs, last = (offset + len - 1) / bs;
  const uint32_t count = last - first + 1;
  absl::MutexLock stripe(&stripes_.Of(vdi, object));
  if (offset % bs == 0 && len % bs == 0) return ReadBlocks(v, object, first, count, out);
  std::string tmp(uint64_t{count} * bs, '\0');
  RC_RETURN_IF_ERROR(ReadBlocks(v, object, first, count, tmp.data()));
  std::memcpy(out, tmp.data() + (offset - uint64_t{first} * bs), len);
  return absl::OkStatus();
}

absl::Status CacheNode::Prefetch(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0) return absl::OkStatus();
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("prefetch beyond the object");
  }
  absl::MutexLock stripe(&stripes_.Of(vdi, object));
  const uint32_t first = offset / bs, last = (offset + len - 1) / bs;
  return ReadBlocks(v, object, first, last - first + 1, nullptr);
}

absl::Status CacheNode::Allocation(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                                   std::vector<bool>* allocated) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0 || uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("block status range outside the object");
  }
  const uint32_t first = offset / bs, count = (offset + len - 1) / bs - first + 1;
  absl::MutexLock stripe(&stripes_.Of(vdi, object));
  RC_ASSIGN_OR_RETURN(*allocated,
                      pool_->Presence(vdi, object, first, count, v.geometry.replication()));
  map_->MarkDirty(v, object, first, allocated);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Writes

absl::Status CacheNode::InvalidateUnderStripe(const BlockKey& key) {
  const std::optional<VdiLayout> l = vdis_->Layout(key.vdi);
  const uint64_t object = l ? key.block / l->blocks_per_object : 0;
  absl::MutexLock stripe(&stripes_.Of(key.vdi, object));
  return writer_->Invalidate(key);
}

absl::Status CacheNode::Write(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                              const char* data, absl::Time deadline) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0) return absl::OkStatus();
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("write beyond the object");
  }
  // Chunks of at most kChunk blocks: each takes its SSD slots before its stripe lock (the
  // reclaimer frees slots under stripe locks), then writes with one group-committed sync.
  constexpr uint32_t kChunk = 32;
  const uint32_t first = offset / bs, last = (offset + len - 1) / bs;
  for (uint32_t cb = first; cb <= last; cb += kChunk) {
    const uint32_t count = std::min(last, cb + kChunk - 1) - cb + 1;
    const uint64_t cstart = std::max<uint64_t>(offset, uint64_t{cb} * bs);
    const uint64_t cend = std::min<uint64_t>(uint64_t{offset} + len, uint64_t{cb + count} * bs);
    RC_RETURN_IF_ERROR(
        WriteChunk(v, object, cb, count, cstart, cend, data + (cstart - offset), deadline));
  }
  return absl::OkStatus();
}

absl::Status CacheNode::WriteChunk(const VdiInfo& v, uint64_t object, uint32_t cb, uint32_t count,
                                   uint64_t cstart, uint64_t cend, const char* src,
                                   absl::Time deadline) {
  const uint32_t bs = config_.block_size;
  std::vector<uint32_t> slots;
  // A write-back write is held back while the node is near its dirty cap (never refused).
  if (v.mode == CacheMode::kWriteBack) destager_->ThrottleWrite(v, deadline);
  if (v.mode == CacheMode::kWriteBack || v.mode == CacheMode::kWriteThrough) {
    RC_RETURN_IF_ERROR(AllocateSlots(count, &slots, deadline));
  }
  absl::Status st;
  {
    absl::MutexLock stripe(&stripes_.Of(v.id(), object));
    if (absl::Now() > deadline) {  // waited too long for the stripe: the client gave up
      st = absl::DeadlineExceededError("request deadline passed before the write started");
    }
    if (st.ok()) st = CheckOwner();
    const char* run = src;
    std::string tmp;
    const bool head_partial = cstart % bs != 0;
    const bool tail_partial = cend % bs != 0;
    if (st.ok() && (head_partial || tail_partial)) {
      // Read-modify-write of the partial edge blocks.
      tmp.assign(uint64_t{count} * bs, '\0');
      if (head_partial) st = ReadBlocks(v, object, cb, 1, tmp.data());
      if (st.ok() && tail_partial && (count > 1 || !head_partial)) {
        st = ReadBlocks(v, object, cb + count - 1, 1, tmp.data() + uint64_t{count - 1} * bs);
      }
      std::memcpy(tmp.data() + (cstart - uint64_t{cb} * bs), src, cend - cstart);
      run = tmp.data();
    }
    if (st.ok()) {
      v.counters->writes += count;
      destager_->NoteForeground(count);
      st = writer_->WriteRun(v, object, cb, count, run, &slots);
    }
  }
  for (uint32_t s : slots) slots_->Release(s).IgnoreError();  // not used
  return st;
}

absl::Status CacheNode::CheckOwner() {
  if (absl::Status d = slots_->failed(); !d.ok()) {
    // Sticky: persist the loss of ownership, so a restart (even on a repaired device) waits to
    // be re-admitted instead of destaging blocks whose log the gateway replayed meanwhile.
    if (!owner_->quarantined()) {
      spdlog::error(
          "cache node {}: {}; fencing this node: its dirty blocks are recovered from "
          "their log replicas",
          config_.node_id, std::string(d.message()));
      owner_->Quarantine(absl::StrCat("device failed: ", d.message())).IgnoreError();
    }
    return TypedError(ErrorKind::kFenced, absl::StrCat("fenced: ", d.message()));
  }
  RC_RETURN_IF_ERROR(owner_->Check());
  std::function<bool()> gate;
  {
    absl::MutexLock l(&gate_mu_);
    gate = destage_gate_;
  }
  if (!gate || gate()) return absl::OkStatus();
  return TypedError(ErrorKind::kFenced, "fenced: etcd lease not valid (nothing was written)");
}

void CacheNode::ObserveEpoch(uint64_t epoch) {
  if (absl::Status s = owner_->ObserveEpoch(epoch); !s.ok()) {
    spdlog::warn("cache node {}: cannot persist ring epoch {}: {}", config_.node_id, epoch,
                 s.ToString());
  }
}

absl::Status CacheNode::Readmit(uint64_t epoch) { return owner_->Readmit(epoch); }

absl::Status CacheNode::Trim(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                             bool zero) {
  RC_ASSIGN_OR_RETURN(VdiInfo v, vdis_->Get(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0) return absl::OkStatus();
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("trim beyond the object");
  }
  // Whole blocks are dropped everywhere; partial edges are zeroed (WRITE_ZEROES) or left alone
  // (TRIM is advisory).
  const uint32_t full_first = (offset + bs - 1) / bs;
  const uint32_t full_end = (offset + len) / bs;  // exclusive
  if (zero) {
    const uint32_t end = offset + len;
    auto zero_partial = [&](uint32_t from, uint32_t to) -> absl::Status {
      if (from >= to) return absl::OkStatus();
      std::string z(to - from, '\0');
      return Write(vdi, object, from, to - from, z.data());
    };
    if (full_first > full_end) {  // inside one block
      return zero_partial(offset, end);
    }
    RC_RETURN_IF_ERROR(zero_partial(offset, std::min(end, full_first * bs)));
    RC_RETURN_IF_ERROR(zero_partial(std::max(offset, full_end * bs), end));
  }
  if (full_first >= full_end) return absl::OkStatus();
  absl::MutexLock stripe(&stripes_.Of(vdi, object));
  RC_RETURN_IF_ERROR(CheckOwner());
  return writer_->TrimRun(v, object, full_first, full_end);
}

}  // namespace ringcache::cachenode
