// The cache node's data path: policy decisions under mu_, I/O outside it, object stripes for
// per-object ordering, a reclaimer for evictions and demotions, a destager for idle/forced
// write-back. See cache_node.h for the locking order and invariants.
#include "cachenode/cache_node.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cachenode/policy/registry.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

// LoadView for LCR: a block's load is the least load among its object's home data nodes.
class CacheNode::PoolLoad : public policy::LoadView {
 public:
  PoolLoad(DataNodePool* pool, const CacheNode* node) : pool_(pool), node_(node) {}
  double HomeLoad(const policy::BlockKey& key) const override {
    // Called under node->mu_ (from the policy), so read the VDI table directly.
    // REQUIRES: node_->mu_ held — the policy calls this from OnAccess, which runs under mu_.
    auto it = node_->vdis_.find(key.vdi);
    if (it == node_->vdis_.end()) return 0;
    const uint64_t per_obj = it->second.geometry.object_size() / it->second.geometry.block_size();
    return pool_->HomeLoad(key.vdi, key.block / per_obj, it->second.geometry.replication());
  }

 private:
  DataNodePool* const pool_;
  const CacheNode* const node_;
};

const char* CacheModeName(CacheMode m) {
  switch (m) {
    case CacheMode::kWriteBack: return "writeback";
    case CacheMode::kWriteThrough: return "writethrough";
    case CacheMode::kWriteAround: return "writearound";
    case CacheMode::kPassThrough: return "passthrough";
  }
  return "unknown";
}

absl::StatusOr<CacheMode> ParseCacheMode(const std::string& s) {
  if (s == "writeback") return CacheMode::kWriteBack;
  if (s == "writethrough") return CacheMode::kWriteThrough;
  if (s == "writearound") return CacheMode::kWriteAround;
  if (s == "passthrough") return CacheMode::kPassThrough;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown cache mode '", s, "' (writeback, writethrough, writearound, passthrough)"));
}

absl::Status CacheNodeConfig::Validate() const {
  if (node_id == 0) return absl::InvalidArgumentError("cache node id must be non-zero");
  RC_RETURN_IF_ERROR((SlotStoreOptions{ssd_path, ssd_bytes, block_size}).Validate());
  if (slot_reserve < 0 || slot_reserve > 0.5) {
    return absl::InvalidArgumentError("slot_reserve must be in [0, 0.5]");
  }
  if (!(dirty_low_watermark >= 0 && dirty_low_watermark < dirty_high_watermark &&
        dirty_high_watermark <= 1)) {
    return absl::InvalidArgumentError(
        "need 0 <= dirty_low_watermark < dirty_high_watermark <= 1");
  }
  if (forced_destage_duty <= 0 || forced_destage_duty > 1) {
    return absl::InvalidArgumentError("forced_destage_duty must be in (0, 1]");
  }
  if (idle_window_ms <= 0 || idle_ops_per_s < 0 || forced_destage_mb_s <= 0) {
    return absl::InvalidArgumentError(
        "idle_window_ms and forced_destage_mb_s must be positive, idle_ops_per_s >= 0");
  }
  if (destage_max_blocks == 0) return absl::InvalidArgumentError("destage_max_blocks must be >= 1");
  RC_RETURN_IF_ERROR(policy::MakePlacement(placement, 0).status());
  return absl::OkStatus();
}

CacheNode::CacheNode(const CacheNodeConfig& config, DataNodePool* pool, Clock* clock,
                     metrics::Registry* registry)
    : config_(config),
      pool_(pool),
      clock_(clock),
      registry_(registry),
      stripes_(new absl::Mutex[kStripes]) {
  const metrics::Labels node{{"node", absl::StrCat(config.node_id)}};
  destage_bytes_ = registry_->GetCounter("ringcache_cachenode_destage_bytes_total",
                                         "Dirty bytes written home by destage.", node);
  destage_errors_ = registry_->GetCounter("ringcache_cachenode_destage_errors_total",
                                          "Destage attempts that failed (retried later).", node);
  evictions_ = registry_->GetCounter("ringcache_cachenode_evictions_total",
                                     "Blocks evicted by the policy.", node);
  slot_waits_ = registry_->GetCounter("ringcache_cachenode_slot_waits_total",
                                      "Times a write waited for a free SSD slot.", node);
  ssd_checksum_failures_ = registry_->GetCounter(
      "ringcache_cachenode_ssd_checksum_failures_total",
      "SSD slots that failed their checksum on read.", node);
  ssd_repairs_ = registry_->GetCounter(
      "ringcache_cachenode_ssd_repairs_total",
      "Dirty blocks whose damaged SSD slot was served and rewritten from their log record.",
      node);
  obsolete_discarded_ = registry_->GetCounter(
      "ringcache_cachenode_obsolete_blocks_discarded_total",
      "Dirty blocks a data node refused as older than its copy (another owner wrote a newer "
      "version): discarded instead of destaged.",
      node);
}

absl::StatusOr<std::unique_ptr<CacheNode>> CacheNode::Create(const CacheNodeConfig& config,
                                                             DataNodePool* pool, Clock* clock,
                                                             metrics::Registry* registry) {
  RC_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<CacheNode> node(new CacheNode(config, pool, clock, registry));
  RC_RETURN_IF_ERROR(node->Init());
  RC_RETURN_IF_ERROR(node->LoadVdis());
  return node;
}

absl::Status CacheNode::Init() {
  std::vector<RecoveredSlot> recovered;
  RC_ASSIGN_OR_RETURN(owner_, Ownership::Load(config_.ssd_path));
  std::unique_ptr<File> file;
  if (config_.open_ssd_file) {
    RC_ASSIGN_OR_RETURN(file, config_.open_ssd_file(config_.ssd_path));
  }
  RC_ASSIGN_OR_RETURN(slots_, SlotStore::Open({config_.ssd_path, config_.ssd_bytes,
                                               config_.block_size},
                                              &recovered, &recovery_, std::move(file)));
  const size_t reserve = std::max<size_t>(
      16, static_cast<size_t>(config_.slot_reserve * slots_->num_slots()));
  if (reserve >= slots_->num_slots()) {
    return absl::InvalidArgumentError("SSD too small for its slot reserve");
  }
  load_view_ = std::make_unique<PoolLoad>(pool_, this);
  policy::PolicyContext ctx;
  // Membership is bounded by SSD slots so that every dirty block (RAM or not) has a slot; the RAM
  // tier is exclusive for clean blocks (cache_node.h invariant 1).
  ctx.capacity_blocks = slots_->num_slots() - reserve;
  ctx.ram_blocks = config_.ram_bytes / config_.block_size;
  ctx.load = load_view_.get();
  absl::MutexLock l(&mu_);
  RC_ASSIGN_OR_RETURN(policy_, policy::MakePolicy(config_.policy, ctx));
  RC_ASSIGN_OR_RETURN(placement_,
                      policy::MakePlacement(config_.placement, config_.ram_bytes /
                                                                   config_.block_size));
  // Warm restart: every recovered block re-enters the policy (as a write, which is always
  // admitted), clean ones are then marked clean. Recovered blocks stay on SSD.
  policy::Outcome out;
  for (RecoveredSlot& r : recovered) {
    if (r.damaged) {
      const int64_t older = map_.contains(r.key) ? map_[r.key].slot : -1;
      if (!RepairRecoveredSlot(r).ok()) {
        slots_->Release(r.slot).IgnoreError();
        continue;  // keep the older version, if any
      }
      if (older >= 0) {
        slots_->Release(static_cast<uint32_t>(older)).IgnoreError();
        map_[r.key].slot = r.slot;
        map_[r.key].dirty = true;
        map_[r.key].log_seq = r.log_seq;
        if (dirty_set_.insert(r.key).second) dirty_order_[r.key.vdi].push_back(r.key);
        continue;
      }
    }
    policy::Access a{{r.key.vdi, r.key.block}, policy::Op::kWrite, 0, seq_++};
    policy_->OnAccess(a, &out);
    if (!r.dirty) policy_->MarkClean(a.key);
    Entry& e = map_[r.key];
    e.slot = r.slot;
    e.dirty = r.dirty;
    e.log_seq = r.log_seq;
    e.epoch = r.epoch;
    if (r.dirty && dirty_set_.insert(r.key).second) dirty_order_[r.key.vdi].push_back(r.key);
    ApplyEvictions(out);
  }
  spdlog::info("cache node {}: {} SSD slots of {} bytes, recovered {} blocks ({} dirty, {} stale, "
               "{} torn/corrupt dropped), policy {}, placement {}",
               config_.node_id, slots_->num_slots(), config_.block_size, recovery_.slots_valid,
               recovery_.slots_dirty, recovery_.stale_versions, recovery_.torn_or_corrupt,
               config_.policy, config_.placement);
  const metrics::Labels node{{"node", absl::StrCat(config_.node_id)}};
  registry_->AddCallbackGauge("ringcache_cachenode_cached_blocks", "Blocks held by the cache.",
                              node, [this] { return static_cast<double>(cached_blocks()); });
  registry_->AddCallbackGauge("ringcache_cachenode_dirty_bytes",
                              "Dirty bytes not yet destaged.", node, [this] {
                                return static_cast<double>(dirty_blocks() * config_.block_size);
                              });
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
  registry_->AddCallbackGauge("ringcache_cachenode_ring_epoch",
                              "Highest cache ring epoch seen (fencing token of new writes).",
                              node, [this] { return static_cast<double>(owner_->epoch()); });
  RC_ASSIGN_OR_RETURN(log_, WriteLog::Open({config_.node_id, config_.ssd_path + ".logseq", 200},
                                            pool_, registry_, [this] { return LiveLogSeqs(); }));
  reclaimer_ = std::thread([this] { ReclaimerLoop(); });
  destager_ = std::thread([this] { DestagerLoop(); });
  return absl::OkStatus();
}

CacheNode::~CacheNode() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (reclaimer_.joinable()) reclaimer_.join();
  if (destager_.joinable()) destager_.join();
  log_.reset();
  if (slots_) (void)slots_->Sync();
}

absl::Status CacheNode::RepairRecoveredSlot(const RecoveredSlot& r) {
  // Data nodes may still be starting: retry for a while before giving up on the record (then
  // the older version, if any, is what survives, and the loss is logged loudly).
  absl::Status last;
  for (int attempt = 0; attempt < 60; ++attempt) {
    auto rec = pool_->FetchLogRecord(config_.node_id, r.log_seq);
    if (rec.ok()) {
      if (rec->vdi_id() != r.key.vdi || rec->data().size() != config_.block_size) {
        last = absl::DataLossError("log record belongs to another block");
        break;
      }
      RC_RETURN_IF_ERROR(
          slots_->WriteSlot(r.slot, r.key, true, rec->data().data(), r.log_seq, rec->epoch()));
      RC_RETURN_IF_ERROR(slots_->Sync());
      ssd_repairs_->Inc();
      spdlog::warn("cache node {}: dirty block {}/{} was damaged on SSD; restored from log "
                   "record {}", config_.node_id, r.key.vdi, r.key.block, r.log_seq);
      return absl::OkStatus();
    }
    last = rec.status();
    if (absl::IsNotFound(last)) break;
    clock_->SleepFor(absl::Milliseconds(500));
  }
  spdlog::error("cache node {}: dirty block {}/{} is damaged on SSD and its log record {} is "
                "unavailable ({}); an older version is kept if there is one",
                config_.node_id, r.key.vdi, r.key.block, r.log_seq, last.ToString());
  return last;
}

absl::flat_hash_set<uint64_t> CacheNode::LiveLogSeqs() const {
  absl::flat_hash_set<uint64_t> live;
  absl::MutexLock l(&mu_);
  for (const SlotKey& k : dirty_set_) {
    auto it = map_.find(k);
    if (it != map_.end() && it->second.log_seq != 0) live.insert(it->second.log_seq);
  }
  return live;
}

absl::Mutex& CacheNode::Stripe(uint32_t vdi, uint64_t object) {
  const uint64_t h = (object * 0x9E3779B97F4A7C15ULL) ^ (uint64_t{vdi} << 32 | vdi);
  return stripes_[(h >> 17) % kStripes];
}

absl::StatusOr<CacheNode::Vdi> CacheNode::GetVdi(uint32_t vdi) const {
  absl::MutexLock l(&mu_);
  auto it = vdis_.find(vdi);
  if (it == vdis_.end()) {
    // kFailedPrecondition (not kInvalidArgument): the gateway re-registers the VDI and retries.
    return TypedError(ErrorKind::kUnknownVdi,
                      absl::StrCat("unknown VDI ", vdi, " on cache node ", config_.node_id));
  }
  return it->second;
}

uint64_t CacheNode::BlocksPerObject(const Vdi& v) const {
  return v.geometry.object_size() / config_.block_size;
}

SlotKey CacheNode::KeyOf(const Vdi& v, uint64_t object, uint32_t block) const {
  return SlotKey{v.geometry.vdi_id(), object * BlocksPerObject(v) + block};
}

absl::Status CacheNode::RegisterVdi(const v1::VdiGeometry& vdi) {
  RC_RETURN_IF_ERROR(RegisterVdiInMemory(vdi));
  return SaveVdis();
}

// The VDI table is kept in <ssd_path>.vdis so that after a restart the node can destage and
// evict recovered blocks before any gateway registers their VDIs again (a restarted node with a
// full SSD and unknown VDIs could otherwise free no slot). Format: "RCVDIS1\n", then per VDI
// u32 length, VdiGeometry bytes, u8 mode; then the XXH3 checksum of everything before it.
absl::Status CacheNode::SetDataRing(const DataRing& ring) {
  absl::MutexLock l(&data_ring_mu_);
  const uint64_t before = pool_->ring().epoch;
  RC_RETURN_IF_ERROR(pool_->SetRing(ring));
  RC_RETURN_IF_ERROR(SaveDataRing(DataRingPath(config_.ssd_path), pool_->ring()));
  if (ring.epoch == before) return absl::OkStatus();
  spdlog::info("data ring epoch {}: {} members{}", ring.epoch, ring.members.size(),
               ring.target.empty() ? ""
                                   : absl::StrCat(", writes also to the ", ring.target.size(),
                                                  " members of the target ring"));
  return absl::OkStatus();
}

absl::Status CacheNode::SaveVdis() {
  std::string body = "RCVDIS1\n";
  uint64_t gen;
  {
    absl::MutexLock l(&mu_);
    gen = ++vdis_gen_;
    for (const auto& [id, v] : vdis_) {
      const std::string g = v.geometry.SerializeAsString();
      const uint32_t n = static_cast<uint32_t>(g.size());
      body.append(reinterpret_cast<const char*>(&n), 4);
      body += g;
      body.push_back(static_cast<char>(v.mode));
    }
  }
  const uint64_t sum = BlockChecksum(body.data(), body.size());
  body.append(reinterpret_cast<const char*>(&sum), 8);
  absl::MutexLock fl(&vdis_file_mu_);
  if (gen < vdis_saved_gen_) return absl::OkStatus();  // a newer table was written already
  RC_RETURN_IF_ERROR(WriteFileAtomically(config_.ssd_path + ".vdis", body));
  vdis_saved_gen_ = gen;
  return absl::OkStatus();
}

absl::Status CacheNode::LoadVdis() {
  const std::string path = config_.ssd_path + ".vdis";
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::OkStatus();  // first start
  std::string body;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) body.append(buf, n);
  std::fclose(f);
  uint64_t sum = 0;
  if (body.size() < 16 || body.compare(0, 8, "RCVDIS1\n") != 0 ||
      (std::memcpy(&sum, body.data() + body.size() - 8, 8),
       sum != BlockChecksum(body.data(), body.size() - 8))) {
    spdlog::warn("cache node {}: {} is damaged; VDIs are known again once the gateway "
                 "registers them", config_.node_id, path);
    return absl::OkStatus();
  }
  size_t pos = 8;
  const size_t end = body.size() - 8;
  while (pos + 4 <= end) {
    uint32_t len;
    std::memcpy(&len, body.data() + pos, 4);
    pos += 4;
    if (pos + len + 1 > end) break;
    v1::VdiGeometry g;
    if (!g.ParseFromArray(body.data() + pos, static_cast<int>(len))) break;
    pos += len;
    const auto mode = static_cast<CacheMode>(static_cast<uint8_t>(body[pos++]));
    if (RegisterVdiInMemory(g).ok()) {
      absl::MutexLock l(&mu_);
      vdis_[g.vdi_id()].mode = mode;
    }
  }
  return absl::OkStatus();
}

absl::Status CacheNode::RegisterVdiInMemory(const v1::VdiGeometry& vdi) {
  if (vdi.block_size() != config_.block_size) {
    return absl::InvalidArgumentError(absl::StrCat("VDI ", vdi.name(), " uses ",
                                                   vdi.block_size(), "-byte blocks; this cache ",
                                                   "node caches ", config_.block_size));
  }
  if (vdi.object_size() % config_.block_size != 0 || vdi.replication() == 0) {
    return absl::InvalidArgumentError("bad VDI geometry");
  }
  absl::MutexLock l(&mu_);
  Vdi& v = vdis_[vdi.vdi_id()];
  v.geometry = vdi;
  if (!v.counters) {
    v.counters = std::make_shared<VdiCounters>();
    const metrics::Labels lb{{"vdi", vdi.name()}, {"node", absl::StrCat(config_.node_id)}};
    auto c = v.counters;
    auto counter = [&](const char* name, const char* help, std::atomic<uint64_t>* field) {
      registry_->AddCallbackCounter(name, help, lb, [c, field] {
        return static_cast<double>(field->load(std::memory_order_relaxed));
      });
    };
    counter("ringcache_vdi_reads_total", "Block reads per VDI.", &c->reads);
    counter("ringcache_vdi_writes_total", "Block writes per VDI.", &c->writes);
    counter("ringcache_vdi_hits_ram_total", "Block reads served from the RAM tier.", &c->hits_ram);
    counter("ringcache_vdi_hits_ssd_total", "Block reads served from the SSD tier.", &c->hits_ssd);
    counter("ringcache_vdi_misses_total", "Block reads that went to a data node.", &c->misses);
    counter("ringcache_vdi_bypassed_total", "Block accesses sent past the cache (CMF, modes).",
            &c->bypassed);
    counter("ringcache_vdi_admissions_rejected_total", "Missed blocks admission declined.",
            &c->admissions_rejected);
    counter("ringcache_vdi_destage_bytes_total", "Bytes destaged per VDI.", &c->destaged_bytes);
    // VBQ state (paper 002 eq. 1-5): queue length, L_m, U_i, D_i of this VDI's queue.
    auto vbq = [this, id = vdi.vdi_id()](double policy::VdiStats::*field) {
      return [this, id, field] {
        absl::MutexLock l(&mu_);
        std::vector<policy::VdiStats> ps;
        policy_->AppendVdiStats(&ps);
        for (const auto& p : ps) {
          if (p.vdi == id) return p.*field;
        }
        return 0.0;
      };
    };
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
                                [this, id = vdi.vdi_id()] {
                                  absl::MutexLock l(&mu_);
                                  std::vector<policy::VdiStats> ps;
                                  policy_->AppendVdiStats(&ps);
                                  for (const auto& p : ps) {
                                    if (p.vdi == id) return static_cast<double>(p.blocks);
                                  }
                                  return 0.0;
                                });
    registry_->AddCallbackGauge("ringcache_vdi_dirty_bytes", "Dirty bytes per VDI.", lb,
                                [c, bs = config_.block_size] {
                                  return static_cast<double>(c->dirty_blocks.load() * bs);
                                });
  }
  return absl::OkStatus();
}

void CacheNode::NoteForeground(uint64_t blocks) {
  fg_blocks_.fetch_add(blocks, std::memory_order_relaxed);
}

absl::Status CacheNode::AllocateSlots(uint32_t n, std::vector<uint32_t>* out,
                                     absl::Time deadline) {
  for (int attempt = 0;; ++attempt) {
    absl::Status s = slots_->AllocateMany(n, out);
    if (s.code() != absl::StatusCode::kResourceExhausted) return s;
    if (attempt == 0) slot_waits_->Inc();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("no SSD slot freed before the request's deadline");
    }
    if (attempt > 6000) {
      return absl::ResourceExhaustedError("no SSD slots freed within 60 s");
    }
    clock_->SleepFor(absl::Milliseconds(10));
  }
}

void CacheNode::ApplyEvictions(const policy::Outcome& out) {
  for (const policy::Eviction& ev : out.evicted) {
    const SlotKey key{ev.key.vdi, ev.key.block};
    placement_->OnRemove(ev.key);
    auto it = map_.find(key);
    if (it == map_.end()) continue;  // admitted but not filled yet: the filler will notice
    it->second.state = State::kEvicting;
    work_.push_back({key, false});
    evictions_->Inc();
    if (auto v = vdis_.find(key.vdi); v != vdis_.end()) v->second.counters->evictions++;
  }
}

// Moves the accessed block to the tier the placement chooses and queues demotions.
void CacheNode::ApplyPlacement(const SlotKey& key, bool admitted, Entry* e) {
  std::vector<policy::BlockKey> demote;
  placement_->OnAccess({key.vdi, key.block}, admitted, &demote);
  for (const auto& d : demote) work_.push_back({SlotKey{d.vdi, d.block}, true});
  (void)e;
}

void CacheNode::RemoveEntry(const SlotKey& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return;
  if (it->second.dirty) {
    dirty_set_.erase(key);
    if (auto v = vdis_.find(key.vdi); v != vdis_.end()) v->second.counters->dirty_blocks--;
  }
  // REQUIRES (callers): whatever replaced the block is durable at home or in a newer record.
  if (it->second.log_seq != 0) log_->Retire(it->second.log_seq);
  map_.erase(it);
}

// ---------------------------------------------------------------------------------------------
// Reads

absl::Status CacheNode::ReadBlocks(const Vdi& v, uint64_t object, uint32_t first, uint32_t count,
                                   char* out, bool prefetch_only) {
  const uint32_t bs = config_.block_size;
  const bool passthrough = v.mode == CacheMode::kPassThrough;
  struct Plan {
    std::shared_ptr<const std::string> ram;
    int64_t slot = -1;
    bool miss = false;
    bool admit = false;     // fill the cache after fetching
    bool promote = false;   // SSD hit that the placement moved to RAM
    bool dirty = false;
    uint64_t log_seq = 0;
  };
  std::vector<Plan> plan(count);
  VdiCounters& ctr = *v.counters;
  {
    absl::MutexLock l(&mu_);
    policy::Outcome out;
    for (uint32_t i = 0; i < count; ++i) {
      const SlotKey key = KeyOf(v, object, first + i);
      auto it = map_.find(key);
      Plan& p = plan[i];
      if (passthrough) {
        // No policy access; still serve a cached copy (it may be the only current one).
        if (it != map_.end()) {
          p.ram = it->second.ram;
          p.slot = it->second.slot;
          p.dirty = it->second.dirty;
          p.log_seq = it->second.log_seq;
        } else {
          p.miss = true;
        }
        ctr.bypassed++;
        continue;
      }
      policy_->OnAccess({{key.vdi, key.block}, policy::Op::kRead,
                         static_cast<uint64_t>(clock_->NowMicros()), seq_++},
                        &out);
      if (out.bypassed) ctr.bypassed++;
      if (out.rejected) ctr.admissions_rejected++;
      const bool member = policy_->Lookup({key.vdi, key.block}) != policy::Tier::kNone;
      if (it != map_.end()) {
        Entry& e = it->second;
        if (e.state == State::kEvicting && member) e.state = State::kCached;  // re-admitted
        p.ram = e.ram;
        p.slot = e.slot;
        p.dirty = e.dirty;
        p.log_seq = e.log_seq;
        (p.ram ? ctr.hits_ram : ctr.hits_ssd)++;
        if (e.state == State::kCached) {
          std::vector<policy::BlockKey> demote;
          const policy::Tier t = placement_->OnAccess({key.vdi, key.block}, false, &demote);
          for (const auto& d : demote) work_.push_back({SlotKey{d.vdi, d.block}, true});
          p.promote = t == policy::Tier::kRam && !p.ram;
        }
      } else {
        ctr.misses++;
        p.miss = true;
        p.admit = member;
      }
      ApplyEvictions(out);
    }
  }
  ctr.reads += count;
  NoteForeground(count);

  std::string scratch;
  char* buf = out;
  if (buf == nullptr) {
    scratch.resize(uint64_t{count} * bs);
    buf = scratch.data();
  }
  // Cached blocks.
  for (uint32_t i = 0; i < count; ++i) {
    Plan& p = plan[i];
    char* dst = buf + uint64_t{i} * bs;
    if (p.ram) {
      std::memcpy(dst, p.ram->data(), bs);
    } else if (p.slot >= 0) {
      absl::Status s = slots_->ReadSlot(static_cast<uint32_t>(p.slot), dst);
      if (!s.ok()) {
        ssd_checksum_failures_->Inc();
        if (p.dirty) {
          // The only other copy of a dirty block is its log record (invariant 4).
          RC_RETURN_IF_ERROR(RepairDirtyBlock(KeyOf(v, object, first + i), object, first + i,
                                              dst));
          continue;
        }
        // A clean copy is also on the data nodes: drop the bad slot and fetch again.
        p.miss = true;
        p.admit = false;
        p.promote = false;
        InvalidateBlock(KeyOf(v, object, first + i)).IgnoreError();
      }
    } else if (!p.miss) {
      p.miss = true;  // a member with no storage yet (being filled by nobody): fetch
    }
  }
  // Misses, fetched as runs from the least-loaded home replica.
  for (uint32_t i = 0; i < count;) {
    if (!plan[i].miss) {
      ++i;
      continue;
    }
    uint32_t j = i;
    while (j < count && plan[j].miss) ++j;
    RC_ASSIGN_OR_RETURN(BlockRun run, pool_->Read(v.geometry.vdi_id(), object, first + i, j - i,
                                                  v.geometry.replication(), bs));
    std::memcpy(buf + uint64_t{i} * bs, run.data.data(), run.data.size());
    i = j;
  }
  // Fills and promotions.
  for (uint32_t i = 0; i < count; ++i) {
    Plan& p = plan[i];
    if (!p.admit && !p.promote) continue;
    const SlotKey key = KeyOf(v, object, first + i);
    const char* data = buf + uint64_t{i} * bs;
    auto copy = std::make_shared<const std::string>(data, bs);
    int64_t release = -1;
    bool need_slot = false;
    {
      absl::MutexLock l(&mu_);
      if (policy_->Lookup({key.vdi, key.block}) == policy::Tier::kNone) continue;  // evicted
      auto it = map_.find(key);
      if (p.promote) {
        if (it == map_.end()) continue;
        Entry& e = it->second;
        if (placement_->TierOf({key.vdi, key.block}) != policy::Tier::kRam) continue;
        e.ram = copy;
        if (!e.dirty && e.slot >= 0) {  // exclusive: a clean RAM block has no SSD slot
          release = e.slot;
          e.slot = -1;
        }
      } else {
        if (it != map_.end()) continue;  // someone else filled it
        std::vector<policy::BlockKey> demote;
        const policy::Tier t = placement_->OnAccess({key.vdi, key.block}, true, &demote);
        for (const auto& d : demote) work_.push_back({SlotKey{d.vdi, d.block}, true});
        Entry& e = map_[key];
        if (t == policy::Tier::kRam) {
          e.ram = copy;
        } else {
          need_slot = true;
        }
      }
    }
    if (release >= 0) slots_->Release(static_cast<uint32_t>(release)).IgnoreError();
    if (need_slot) {
      // Clean fill: no sync needed (a torn clean slot fails its checksum and is dropped). Never
      // wait for a slot here (a stripe is held); without one the block is simply not cached.
      auto slot = slots_->Allocate();
      bool ok = slot.ok() && slots_->WriteSlot(*slot, key, false, data).ok();
      absl::MutexLock l(&mu_);
      auto it = map_.find(key);
      if (ok && it != map_.end() && it->second.slot < 0 && !it->second.ram) {
        it->second.slot = *slot;
      } else {
        if (slot.ok()) slots_->Release(*slot).IgnoreError();
        if (it != map_.end() && it->second.slot < 0 && !it->second.ram) {
          // Could not store it: leave the cache consistent by forgetting the block.
          policy_->Erase({key.vdi, key.block});
          placement_->OnRemove({key.vdi, key.block});
          map_.erase(it);
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CacheNode::Read(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                             char* out) {
  RC_ASSIGN_OR_RETURN(Vdi v, GetVdi(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0) return absl::OkStatus();
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("read beyond the object");
  }
  const uint32_t first = offset / bs, last = (offset + len - 1) / bs;
  const uint32_t count = last - first + 1;
  absl::MutexLock stripe(&Stripe(vdi, object));
  if (offset % bs == 0 && len % bs == 0) return ReadBlocks(v, object, first, count, out, false);
  std::string tmp(uint64_t{count} * bs, '\0');
  RC_RETURN_IF_ERROR(ReadBlocks(v, object, first, count, tmp.data(), false));
  std::memcpy(out, tmp.data() + (offset - uint64_t{first} * bs), len);
  return absl::OkStatus();
}

absl::Status CacheNode::Prefetch(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len) {
  RC_ASSIGN_OR_RETURN(Vdi v, GetVdi(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0) return absl::OkStatus();
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("prefetch beyond the object");
  }
  absl::MutexLock stripe(&Stripe(vdi, object));
  const uint32_t first = offset / bs, last = (offset + len - 1) / bs;
  return ReadBlocks(v, object, first, last - first + 1, nullptr, true);
}

absl::Status CacheNode::Allocation(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                                   std::vector<bool>* allocated) {
  RC_ASSIGN_OR_RETURN(Vdi v, GetVdi(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0 || uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("block status range outside the object");
  }
  const uint32_t first = offset / bs, count = (offset + len - 1) / bs - first + 1;
  absl::MutexLock stripe(&Stripe(vdi, object));
  RC_ASSIGN_OR_RETURN(*allocated, pool_->Presence(vdi, object, first, count,
                                                  v.geometry.replication()));
  absl::MutexLock l(&mu_);
  for (uint32_t i = 0; i < count; ++i) {
    if (map_.contains(KeyOf(v, object, first + i))) (*allocated)[i] = true;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Writes

absl::Status CacheNode::InvalidateBlock(const SlotKey& key) {
  int64_t release = -1;
  {
    absl::MutexLock l(&mu_);
    policy_->Erase({key.vdi, key.block});
    placement_->OnRemove({key.vdi, key.block});
    auto it = map_.find(key);
    if (it != map_.end()) release = it->second.slot;
    RemoveEntry(key);
  }
  if (release >= 0) RC_RETURN_IF_ERROR(slots_->Release(static_cast<uint32_t>(release)));
  return absl::OkStatus();
}

absl::Status CacheNode::InvalidateUnderStripe(const SlotKey& key) {
  uint64_t object = 0;
  {
    absl::MutexLock l(&mu_);
    auto v = vdis_.find(key.vdi);
    if (v != vdis_.end()) object = key.block / BlocksPerObject(v->second);
  }
  absl::MutexLock stripe(&Stripe(key.vdi, object));
  return InvalidateBlock(key);
}

absl::Status CacheNode::Write(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                              const char* data, absl::Time deadline) {
  RC_ASSIGN_OR_RETURN(Vdi v, GetVdi(vdi));
  const uint32_t bs = config_.block_size;
  if (len == 0) return absl::OkStatus();
  if (uint64_t{offset} + len > v.geometry.object_size()) {
    return absl::InvalidArgumentError("write beyond the object");
  }
  // Chunks of at most kChunk blocks: each takes its SSD slots before its stripe lock (the
  // reclaimer frees slots under stripe locks), then writes with one group-committed sync.
  constexpr uint32_t kChunk = 32;
  const uint32_t first = offset / bs, last = (offset + len - 1) / bs;
  const bool needs_slots = v.mode == CacheMode::kWriteBack || v.mode == CacheMode::kWriteThrough;
  for (uint32_t cb = first; cb <= last; cb += kChunk) {
    const uint32_t count = std::min(last, cb + kChunk - 1) - cb + 1;
    const uint64_t cstart = std::max<uint64_t>(offset, uint64_t{cb} * bs);
    const uint64_t cend = std::min<uint64_t>(uint64_t{offset} + len, uint64_t{cb + count} * bs);
    const char* src = data + (cstart - offset);
    std::vector<uint32_t> slots;
    if (needs_slots) RC_RETURN_IF_ERROR(AllocateSlots(count, &slots, deadline));
    absl::Status st;
    {
      absl::MutexLock stripe(&Stripe(vdi, object));
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
        if (head_partial) st = ReadBlocks(v, object, cb, 1, tmp.data(), false);
        if (st.ok() && tail_partial && (count > 1 || !head_partial)) {
          st = ReadBlocks(v, object, cb + count - 1, 1, tmp.data() + uint64_t{count - 1} * bs,
                          false);
        }
        std::memcpy(tmp.data() + (cstart - uint64_t{cb} * bs), src, cend - cstart);
        run = tmp.data();
      }
      if (st.ok()) st = WriteRun(v, object, cb, count, run, &slots);
    }
    for (uint32_t s : slots) slots_->Release(s).IgnoreError();  // not used
    RC_RETURN_IF_ERROR(st);
  }
  return absl::OkStatus();
}

absl::Status CacheNode::CheckOwner() {
  if (absl::Status d = slots_->failed(); !d.ok()) {
    // Sticky: persist the loss of ownership, so a restart (even on a repaired device) waits to
    // be re-admitted instead of destaging blocks whose log the gateway replayed meanwhile.
    if (!owner_->quarantined()) {
      spdlog::error("cache node {}: {}; fencing this node: its dirty blocks are recovered from "
                    "their log replicas",
                    config_.node_id, std::string(d.message()));
      owner_->Quarantine(absl::StrCat("device failed: ", d.message())).IgnoreError();
    }
    return TypedError(ErrorKind::kFenced, absl::StrCat("fenced: ", d.message()));
  }
  RC_RETURN_IF_ERROR(owner_->Check());
  std::function<bool()> gate;
  {
    absl::MutexLock l(&mu_);
    gate = destage_gate_;
  }
  if (!gate || gate()) return absl::OkStatus();
  return TypedError(ErrorKind::kFenced,
                    "fenced: etcd lease not valid (nothing was written)");
}

void CacheNode::ObserveEpoch(uint64_t epoch) {
  if (absl::Status s = owner_->ObserveEpoch(epoch); !s.ok()) {
    spdlog::warn("cache node {}: cannot persist ring epoch {}: {}", config_.node_id, epoch,
                 s.ToString());
  }
}

absl::Status CacheNode::Readmit(uint64_t epoch) { return owner_->Readmit(epoch); }

absl::Status CacheNode::WriteAround(const Vdi& v, uint64_t object, uint32_t first, uint32_t count,
                                    const char* data) {
  // Make earlier slot releases durable first, so no released (older) copy of these blocks can
  // reappear after a crash and shadow what the data nodes now hold.
  RC_RETURN_IF_ERROR(slots_->Sync());
  RC_RETURN_IF_ERROR(WriteHome(v, object, first, count, data));
  for (uint32_t i = 0; i < count; ++i) {
    RC_RETURN_IF_ERROR(InvalidateBlock(KeyOf(v, object, first + i)));
  }
  return slots_->Sync();
}

absl::Status CacheNode::WriteHome(const Vdi& v, uint64_t object, uint32_t first, uint32_t count,
                                  const char* data) {
  RC_ASSIGN_OR_RETURN(const uint64_t seq, log_->Reserve(count));
  HomeStamp stamp{config_.node_id, {}, false};
  const uint64_t epoch = owner_->epoch();
  for (uint32_t i = 0; i < count; ++i) {
    stamp.seqs.push_back(seq + i);
    stamp.epochs.push_back(epoch);
  }
  absl::Status s = pool_->WriteAll(v.geometry.vdi_id(), object, first,
                                   std::string(data, uint64_t{count} * config_.block_size),
                                   v.geometry.replication(), &stamp);
  log_->Done(seq);
  return s;
}

absl::Status CacheNode::RepairDirtyBlock(const SlotKey& key, uint64_t object,
                                         uint32_t block_in_object, char* dst) {
  uint64_t log_seq = 0;
  {
    absl::MutexLock l(&mu_);
    auto it = map_.find(key);
    if (it != map_.end() && it->second.dirty) log_seq = it->second.log_seq;
  }
  const std::string what =
      absl::StrCat("dirty block ", key.block, " of VDI ", key.vdi, " failed its SSD checksum");
  if (log_seq == 0) return absl::DataLossError(absl::StrCat(what, " and has no log record"));
  auto rec = log_->Fetch(log_seq);
  if (!rec.ok()) {
    return absl::DataLossError(absl::StrCat(what, "; its log record ", log_seq,
                                            " is unreadable: ", rec.status().message()));
  }
  if (rec->vdi_id() != key.vdi || rec->object_index() != object ||
      rec->block_index() != block_in_object || rec->data().size() != config_.block_size) {
    return absl::DataLossError(absl::StrCat(what, "; log record ", log_seq,
                                            " belongs to another block"));
  }
  std::memcpy(dst, rec->data().data(), config_.block_size);
  ssd_repairs_->Inc();
  // Rewrite the block into a fresh slot (never wait for one: a stripe lock is held); without a
  // free slot the record keeps serving it.
  auto slot = slots_->Allocate();
  if (!slot.ok()) return absl::OkStatus();
  absl::Status st = slots_->WriteSlot(*slot, key, true, dst, log_seq, rec->epoch());
  if (st.ok()) st = slots_->Sync();
  int64_t release = *slot;
  if (st.ok()) {
    absl::MutexLock l(&mu_);
    auto it = map_.find(key);
    if (it != map_.end() && it->second.dirty && it->second.log_seq == log_seq) {
      release = it->second.slot;
      it->second.slot = *slot;
    }
  }
  if (release >= 0) slots_->Release(static_cast<uint32_t>(release)).IgnoreError();
  spdlog::warn("cache node {}: {}; served and rewritten from log record {}", config_.node_id,
               what, log_seq);
  return absl::OkStatus();
}

absl::Status CacheNode::WriteRun(const Vdi& v, uint64_t object, uint32_t first, uint32_t count,
                                 const char* data, std::vector<uint32_t>* free_slots) {
  const uint32_t bs = config_.block_size;
  VdiCounters& ctr = *v.counters;
  ctr.writes += count;
  NoteForeground(count);
  if (v.mode == CacheMode::kWriteAround || v.mode == CacheMode::kPassThrough) {
    ctr.bypassed += count;
    return WriteAround(v, object, first, count, data);
  }
  const bool through = v.mode == CacheMode::kWriteThrough;
  bool bypass = false;
  {
    absl::MutexLock l(&mu_);
    policy::Outcome out;
    for (uint32_t i = 0; i < count; ++i) {
      const SlotKey key = KeyOf(v, object, first + i);
      policy_->OnAccess({{key.vdi, key.block}, policy::Op::kWrite,
                         static_cast<uint64_t>(clock_->NowMicros()), seq_++},
                        &out);
      bypass |= out.bypassed;
      ApplyEvictions(out);
    }
  }
  if (bypass) {  // CMF or sequential cutoff: write around for this request
    ctr.bypassed += count;
    absl::Status s = WriteAround(v, object, first, count, data);
    // Write-back never fails a write that the cache can hold: with a home replica down, cache
    // (and log) it instead; the reclaimer destages it once the homes are back.
    if (s.ok() || through || !absl::IsUnavailable(s)) return s;
  }
  if (through) RC_RETURN_IF_ERROR(WriteHome(v, object, first, count, data));
  // Every block gets a fresh slot (SlotStore invariant 1), then one group-committed sync.
  if (free_slots->size() < count) {
    return absl::InternalError("WriteRun called without enough preallocated slots");
  }
  std::vector<uint32_t> slots(free_slots->end() - count, free_slots->end());
  free_slots->resize(free_slots->size() - count);
  // Write-back: the cache copy and the N-1 log copies are written in parallel; the write is done
  // when both are durable (DESIGN §4). Write-through blocks are clean and need no log record.
  uint64_t seq = 0;
  // The fencing token of these blocks: the ring epoch at which this node accepted the write.
  const uint64_t epoch = owner_->epoch();
  if (!through) {
    auto reserved = log_->Reserve(count);
    if (!reserved.ok()) {
      for (uint32_t s : slots) slots_->Release(s).IgnoreError();
      return reserved.status();
    }
    seq = *reserved;
  }
  absl::Status st;
  auto write_cache = [&] {
    for (uint32_t i = 0; i < count && st.ok(); ++i) {
      st = slots_->WriteSlot(slots[i], KeyOf(v, object, first + i), !through,
                             data + uint64_t{i} * bs, through ? 0 : seq + i,
                             through ? 0 : epoch);
    }
    if (st.ok() && !through) st = slots_->Sync();
  };
  absl::Status logged;
  std::vector<uint32_t> landed;
  if (through) {
    write_cache();
  } else {
    logged = log_->Append(v.geometry.vdi_id(), object, first, bs, data, count,
                          static_cast<int>(v.geometry.replication()), seq, epoch, write_cache,
                          &landed);
  }
  if (st.ok()) st = logged;
  if (!st.ok()) {
    // Not acknowledged: its log records (if any landed) are found by the collector.
    if (!through) log_->Done(seq);
    for (uint32_t s : slots) slots_->Release(s).IgnoreError();
    return st;
  }
  std::vector<int64_t> release;
  std::vector<uint64_t> retire;
  {
    absl::MutexLock l(&mu_);
    for (uint32_t i = 0; i < count; ++i) {
      const SlotKey key = KeyOf(v, object, first + i);
      const policy::BlockKey pk{key.vdi, key.block};
      Entry& e = map_[key];
      if (e.slot >= 0) release.push_back(e.slot);
      const bool was_dirty = e.dirty;
      if (e.log_seq != 0) retire.push_back(e.log_seq);  // superseded (or now home: through)
      e.log_seq = through ? 0 : seq + i;
      e.epoch = through ? 0 : epoch;
      e.log_nodes.assign(landed.begin(), landed.end());
      e.slot = slots[i];
      e.ram.reset();
      e.dirty = !through;
      if (policy_->Lookup(pk) == policy::Tier::kNone) {
        // Evicted again while we wrote (another object's access): keep the durable copy until
        // the reclaimer has destaged it (invariant 2).
        e.state = State::kEvicting;
        work_.push_back({key, false});
      } else {
        e.state = State::kCached;
        if (through) policy_->MarkClean(pk);
        std::vector<policy::BlockKey> demote;
        if (placement_->OnAccess(pk, false, &demote) == policy::Tier::kRam) {
          e.ram = std::make_shared<const std::string>(data + uint64_t{i} * bs, bs);
          if (through) {  // clean and in RAM: exclusive, so give the slot back
            release.push_back(e.slot);
            e.slot = -1;
          }
        }
        for (const auto& d : demote) work_.push_back({SlotKey{d.vdi, d.block}, true});
      }
      if (e.dirty && !was_dirty) {
        ctr.dirty_blocks++;
        if (dirty_set_.insert(key).second) dirty_order_[key.vdi].push_back(key);
      } else if (!e.dirty && was_dirty) {
        ctr.dirty_blocks--;
        dirty_set_.erase(key);
      }
    }
  }
  if (!through) log_->Done(seq);
  log_->Retire(retire);
  for (int64_t s : release) slots_->Release(static_cast<uint32_t>(s)).IgnoreError();
  return absl::OkStatus();
}

absl::Status CacheNode::Trim(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                             bool zero) {
  RC_ASSIGN_OR_RETURN(Vdi v, GetVdi(vdi));
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
  absl::MutexLock stripe(&Stripe(vdi, object));
  RC_RETURN_IF_ERROR(CheckOwner());
  RC_RETURN_IF_ERROR(slots_->Sync());
  // Stamped: the tombstones outrank any older log record of these blocks.
  const uint32_t n = full_end - full_first;
  RC_ASSIGN_OR_RETURN(const uint64_t seq, log_->Reserve(n));
  HomeStamp stamp{config_.node_id, {}, false};
  const uint64_t epoch = owner_->epoch();
  for (uint32_t i = 0; i < n; ++i) {
    stamp.seqs.push_back(seq + i);
    stamp.epochs.push_back(epoch);
  }
  absl::Status trimmed =
      pool_->TrimAll(vdi, object, full_first, n, v.geometry.replication(), &stamp);
  log_->Done(seq);
  RC_RETURN_IF_ERROR(trimmed);
  for (uint32_t b = full_first; b < full_end; ++b) {
    RC_RETURN_IF_ERROR(InvalidateBlock(KeyOf(v, object, b)));
  }
  return slots_->Sync();
}

// ---------------------------------------------------------------------------------------------
// Destage, reclaim, modes

absl::Status CacheNode::DestageAround(const Vdi& v, const SlotKey& key, uint64_t* blocks_done,
                                      bool single) {
  const uint32_t bs = config_.block_size;
  const uint64_t per_obj = BlocksPerObject(v);
  const uint64_t object = key.block / per_obj;
  const uint64_t base = object * per_obj;
  struct Item {
    std::shared_ptr<const std::string> ram;
    int64_t slot;
    uint64_t log_seq;
    uint64_t epoch;
  };
  std::vector<Item> items;
  uint64_t lo = key.block;
  {
    absl::MutexLock l(&mu_);
    auto dirty = [&](uint64_t b) {
      auto it = map_.find(SlotKey{key.vdi, b});
      return it != map_.end() && it->second.dirty;
    };
    if (!dirty(key.block)) return absl::OkStatus();
    // Coalesce adjacent dirty blocks of the same object (DESIGN §4).
    while (!single && lo > base && dirty(lo - 1) &&
           key.block - lo + 1 < config_.destage_max_blocks) {
      --lo;
    }
    for (uint64_t b = lo; b < base + per_obj && dirty(b) &&
                          items.size() < (single ? 1u : config_.destage_max_blocks);
         ++b) {
      const Entry& e = map_.at(SlotKey{key.vdi, b});
      items.push_back({e.ram, e.slot, e.log_seq, e.epoch});
    }
  }
  std::function<void()> planned_hook;
  {
    absl::MutexLock l(&mu_);
    planned_hook = destage_planned_hook_;
  }
  if (planned_hook) planned_hook();
  std::string data(items.size() * bs, '\0');
  for (size_t i = 0; i < items.size(); ++i) {
    char* dst = data.data() + i * bs;
    if (items[i].ram) {
      std::memcpy(dst, items[i].ram->data(), bs);
    } else {
      absl::Status s = slots_->ReadSlot(static_cast<uint32_t>(items[i].slot), dst);
      if (!s.ok()) {
        ssd_checksum_failures_->Inc();
        s = RepairDirtyBlock(SlotKey{key.vdi, lo + i}, object,
                             static_cast<uint32_t>(lo + i - base), dst);
      }
      if (!s.ok()) {
        spdlog::error("cache node {}: dirty block {}/{} unreadable: {}", config_.node_id, key.vdi,
                      lo + i, s.ToString());
        return s;
      }
    }
  }
  // Stamp each block with its log record's sequence (a fresh one where it has none), so replay
  // never puts an older record over what this destage wrote.
  HomeStamp stamp{config_.node_id, {}, false};
  uint32_t unlogged = 0;
  for (const Item& it : items) unlogged += it.log_seq == 0;
  uint64_t fresh = 0;
  if (unlogged > 0) {
    RC_ASSIGN_OR_RETURN(fresh, log_->Reserve(unlogged));
  }
  const uint64_t now_epoch = owner_->epoch();
  for (const Item& it : items) {
    stamp.seqs.push_back(it.log_seq != 0 ? it.log_seq : fresh++);
    // A block without a log record (N = 1) was accepted at some epoch this node still holds
    // the object at; recovered blocks of older files carry 0.
    stamp.epochs.push_back(it.log_seq != 0 || it.epoch != 0 ? it.epoch : now_epoch);
  }
  absl::Status s = pool_->WriteAll(key.vdi, object, static_cast<uint32_t>(lo - base), data,
                                   v.geometry.replication(), &stamp);
  if (unlogged > 0) log_->Done(fresh - unlogged);
  if (IsKind(s, ErrorKind::kOlderVersion) && items.size() > 1) {
    // Some block of the run is older than a home's copy: settle the blocks one by one.
    for (size_t i = 0; i < items.size(); ++i) {
      RC_RETURN_IF_ERROR(DestageAround(v, SlotKey{key.vdi, lo + i}, blocks_done,
                                       /*single=*/true));
    }
    return absl::OkStatus();
  }
  if (IsKind(s, ErrorKind::kOlderVersion)) {
    // A home holds a newer version: another node owned the object after this one accepted the
    // write (this node lost it while down or cut off). Our copy is obsolete: discard it, never
    // serve it again; its log record goes with it.
    spdlog::warn("cache node {}: dirty block {}/{} is older than its home copy ({}); "
                 "discarding it",
                 config_.node_id, key.vdi, lo, std::string(s.message()));
    obsolete_discarded_->Inc();
    {
      absl::MutexLock l(&mu_);
      auto it = map_.find(SlotKey{key.vdi, lo});
      if (it != map_.end() && it->second.dirty) {
        it->second.dirty = false;
        if (it->second.log_seq != 0) log_->Retire(it->second.log_seq);
        it->second.log_seq = 0;
        dirty_set_.erase(SlotKey{key.vdi, lo});
        v.counters->dirty_blocks--;
      }
    }
    return InvalidateBlock(SlotKey{key.vdi, lo});
  }
  if (!s.ok()) {
    destage_errors_->Inc();
    return s;
  }
  destage_bytes_->Inc(static_cast<double>(data.size()));
  v.counters->destaged_bytes += data.size();
  std::vector<int64_t> mark;
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < items.size(); ++i) {
      const SlotKey k{key.vdi, lo + i};
      auto it = map_.find(k);
      if (it == map_.end() || !it->second.dirty) continue;
      it->second.dirty = false;
      // At all N homes now: its log record is no longer needed.
      if (it->second.log_seq != 0) log_->Retire(it->second.log_seq);
      it->second.log_seq = 0;
      it->second.log_nodes.clear();
      dirty_set_.erase(k);
      v.counters->dirty_blocks--;
      policy_->MarkClean({k.vdi, k.block});
      if (it->second.slot >= 0) mark.push_back(it->second.slot);
    }
  }
  for (int64_t slot : mark) slots_->SetDirty(static_cast<uint32_t>(slot), false).IgnoreError();
  if (blocks_done) *blocks_done += items.size();
  return absl::OkStatus();
}

absl::Status CacheNode::ProcessWork(const Work& w) {
  Vdi v;
  {
    absl::MutexLock l(&mu_);
    auto it = vdis_.find(w.key.vdi);
    if (it == vdis_.end()) return absl::FailedPreconditionError("VDI not registered yet");
    v = it->second;
  }
  const uint64_t object = w.key.block / BlocksPerObject(v);
  absl::MutexLock stripe(&Stripe(w.key.vdi, object));
  if (w.demote) {
    std::shared_ptr<const std::string> ram;
    {
      absl::MutexLock l(&mu_);
      auto it = map_.find(w.key);
      if (it == map_.end() || !it->second.ram ||
          placement_->TierOf({w.key.vdi, w.key.block}) == policy::Tier::kRam) {
        return absl::OkStatus();
      }
      if (it->second.slot >= 0) {  // dirty: its slot already holds the data
        it->second.ram.reset();
        return absl::OkStatus();
      }
      ram = it->second.ram;
    }
    auto got = slots_->Allocate();  // never wait: this thread is the one that frees slots
    if (!got.ok()) {
      // No room on SSD: a clean block may simply leave the cache.
      absl::MutexLock l(&mu_);
      auto it = map_.find(w.key);
      if (it != map_.end() && it->second.ram == ram && it->second.slot < 0) {
        policy_->Erase({w.key.vdi, w.key.block});
        placement_->OnRemove({w.key.vdi, w.key.block});
        RemoveEntry(w.key);
      }
      return absl::OkStatus();
    }
    const uint32_t slot = *got;
    RC_RETURN_IF_ERROR(slots_->WriteSlot(slot, w.key, false, ram->data()));
    absl::MutexLock l(&mu_);
    auto it = map_.find(w.key);
    if (it != map_.end() && it->second.ram == ram && it->second.slot < 0) {
      it->second.slot = slot;
      it->second.ram.reset();
      return absl::OkStatus();
    }
    // Changed meanwhile (rewritten, removed): our copy is not needed.
    slots_->Release(slot).IgnoreError();
    return absl::OkStatus();
  }
  bool dirty;
  {
    absl::MutexLock l(&mu_);
    auto it = map_.find(w.key);
    if (it == map_.end() || it->second.state != State::kEvicting) return absl::OkStatus();
    dirty = it->second.dirty;
  }
  if (dirty) {
    // "Destage before eviction" is a background write home like any other: never while this
    // node is fenced (it may have lost the object; its log may have been replayed already).
    RC_RETURN_IF_ERROR(CheckOwner());
    RC_RETURN_IF_ERROR(DestageAround(v, w.key, nullptr));
  }
  int64_t release = -1;
  {
    absl::MutexLock l(&mu_);
    auto it = map_.find(w.key);
    if (it == map_.end() || it->second.state != State::kEvicting || it->second.dirty) {
      return absl::OkStatus();
    }
    release = it->second.slot;
    RemoveEntry(w.key);
  }
  if (release >= 0) RC_RETURN_IF_ERROR(slots_->Release(static_cast<uint32_t>(release)));
  return absl::OkStatus();
}

void CacheNode::ReclaimerLoop() {
  std::vector<Work> retry;
  for (;;) {
    Work w;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !work_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(200));
      if (stop_) return;
      if (work_.empty()) {
        for (auto& r : retry) work_.push_back(r);
        retry.clear();
        continue;
      }
      w = work_.front();
      work_.pop_front();
    }
    absl::Status s = ProcessWork(w);
    if (!s.ok()) {
      retry.push_back(w);  // data node down, VDI not registered yet...: try again later
      clock_->SleepFor(absl::Milliseconds(20));
    }
  }
}

bool CacheNode::NextDirty(SlotKey* key) {
  // DESIGN §4: destage the coldest VBQ queue first — the VDI with the fewest accesses A_m
  // (paper 002 eq. 1) among those with dirty blocks — and inside it the block dirtied longest
  // ago (the queue's tail end; exact LRU position is the policy's and not exposed).
  std::vector<policy::VdiStats> stats;
  policy_->AppendVdiStats(&stats);
  absl::flat_hash_map<uint32_t, uint64_t> accesses;
  for (const auto& st : stats) accesses[st.vdi] = st.accesses;
  uint32_t best = 0;
  uint64_t best_accesses = UINT64_MAX;
  for (auto it = dirty_order_.begin(); it != dirty_order_.end();) {
    std::deque<SlotKey>& q = it->second;
    while (!q.empty() && !dirty_set_.contains(q.front())) q.pop_front();
    if (q.empty()) {
      dirty_order_.erase(it++);
      continue;
    }
    const auto a = accesses.find(it->first);
    const uint64_t n = a == accesses.end() ? 0 : a->second;
    if (n < best_accesses || (n == best_accesses && it->first < best)) {
      best = it->first;
      best_accesses = n;
    }
    ++it;
  }
  if (best_accesses == UINT64_MAX) return false;
  std::deque<SlotKey>& q = dirty_order_[best];
  *key = q.front();
  q.pop_front();
  return true;
}

void CacheNode::RelogFromLostDataNodes() {
  const std::vector<uint32_t> down = pool_->DownFor(config_.relog_after_ms);
  const absl::flat_hash_set<uint32_t> down_set(down.begin(), down.end());
  for (auto it = relogged_.begin(); it != relogged_.end();) {
    if (!down_set.contains(*it)) {
      relogged_.erase(it++);  // back: its copies count again
    } else {
      ++it;
    }
  }
  absl::flat_hash_set<uint32_t> fresh;
  for (uint32_t id : down) {
    if (!relogged_.contains(id)) fresh.insert(id);
  }
  if (fresh.empty()) return;
  // Dirty blocks whose log record landed on a lost node — where it actually landed, not where
  // today's ring would put it (the ring may have changed since) — or whose landing is unknown
  // (recovered after a restart: relogging is harmless, missing a copy is not).
  std::vector<std::pair<SlotKey, Vdi>> todo;
  {
    absl::MutexLock l(&mu_);
    for (const SlotKey& k : dirty_set_) {
      auto e = map_.find(k);
      auto v = vdis_.find(k.vdi);
      if (e == map_.end() || e->second.log_seq == 0 || v == vdis_.end()) continue;
      if (v->second.geometry.replication() < 2) continue;
      const auto& nodes = e->second.log_nodes;
      if (nodes.empty() || std::any_of(nodes.begin(), nodes.end(),
                                       [&](uint32_t id) { return fresh.contains(id); })) {
        todo.emplace_back(k, v->second);
      }
    }
  }
  spdlog::warn("cache node {}: {} data node(s) unreachable for {} ms; logging {} dirty blocks "
               "again on the others", config_.node_id, fresh.size(), config_.relog_after_ms,
               todo.size());
  for (const auto& [k, v] : todo) {
    absl::MutexLock stripe(&Stripe(k.vdi, k.block / BlocksPerObject(v)));
    if (absl::Status s = RelogBlock(v, k); !s.ok()) {
      spdlog::warn("cache node {}: relog of block {}/{} failed: {}; retrying later",
                   config_.node_id, k.vdi, k.block, s.ToString());
      return;  // not marked handled: the next check tries again
    }
  }
  relogged_.insert(fresh.begin(), fresh.end());
}

absl::Status CacheNode::RelogBlock(const Vdi& v, const SlotKey& key) {
  const uint32_t bs = config_.block_size;
  const uint64_t per_obj = BlocksPerObject(v);
  std::shared_ptr<const std::string> ram;
  int64_t slot = -1;
  uint64_t old_seq = 0, epoch = 0;
  {
    absl::MutexLock l(&mu_);
    auto it = map_.find(key);
    if (it == map_.end() || !it->second.dirty || it->second.log_seq == 0) return absl::OkStatus();
    ram = it->second.ram;
    slot = it->second.slot;
    old_seq = it->second.log_seq;
    epoch = it->second.epoch;  // the new record keeps the write's fencing token
  }
  std::string data(bs, '\0');
  if (ram) {
    std::memcpy(data.data(), ram->data(), bs);
  } else if (slot >= 0) {
    absl::Status s = slots_->ReadSlot(static_cast<uint32_t>(slot), data.data());
    if (!s.ok()) {
      RC_RETURN_IF_ERROR(RepairDirtyBlock(key, key.block / per_obj,
                                          static_cast<uint32_t>(key.block % per_obj),
                                          data.data()));
    }
  } else {
    return absl::OkStatus();
  }
  RC_ASSIGN_OR_RETURN(const uint64_t seq, log_->Reserve(1));
  std::vector<uint32_t> landed;
  absl::Status s = log_->Append(key.vdi, key.block / per_obj,
                                static_cast<uint32_t>(key.block % per_obj), bs, data.data(), 1,
                                static_cast<int>(v.geometry.replication()), seq, epoch,
                                nullptr, &landed);
  if (s.ok() && slot >= 0) {
    // The slot must name the new record before the old one goes (restart, collector).
    s = slots_->SetLogSeq(static_cast<uint32_t>(slot), seq);
    if (s.ok()) s = slots_->Sync();
  }
  if (s.ok()) {
    absl::MutexLock l(&mu_);
    auto it = map_.find(key);
    if (it != map_.end() && it->second.log_seq == old_seq) {
      it->second.log_seq = seq;
      it->second.log_nodes.assign(landed.begin(), landed.end());
    }
  }
  log_->Done(seq);
  if (s.ok()) log_->Retire(old_seq);
  return s;
}

std::optional<SlotKey> CacheNode::NextDestageForTest() {
  absl::MutexLock l(&mu_);
  SlotKey key;
  if (!NextDirty(&key)) return std::nullopt;
  dirty_order_[key.vdi].push_front(key);
  return key;
}

void CacheNode::DestagerLoop() {
  uint64_t last_count = fg_blocks_.load();
  int64_t last_time = clock_->NowMicros();
  int64_t quiet_since = last_time;
  bool forcing = false;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
    }
    clock_->SleepFor(absl::Milliseconds(50));
    const int64_t now = clock_->NowMicros();
    const uint64_t count = fg_blocks_.load();
    const double rate = (count - last_count) * 1e6 / std::max<int64_t>(1, now - last_time);
    last_count = count;
    last_time = now;
    if (rate >= config_.idle_ops_per_s) quiet_since = now;
    const bool idle = now - quiet_since >= config_.idle_window_ms * 1000;
    const uint64_t dirty = dirty_blocks();
    const uint64_t slots = slots_->num_slots();
    if (dirty > config_.dirty_high_watermark * slots) forcing = true;
    if (dirty < config_.dirty_low_watermark * slots) forcing = false;
    // Fenced: the objects may have a new owner already, and the gateway may have replayed this
    // node's log and dropped it. Neither destage nor log again: a record written after that
    // replay would outlive it, and a later replay of this node would put it over the newer data
    // of the objects' new owners (a node cut off from every data node relogs after
    // relog_after_ms, and its appends can land once the link is back).
    if (!CheckOwner().ok()) continue;
    if (now - last_relog_check_us_ >= 1000000) {
      last_relog_check_us_ = now;
      RelogFromLostDataNodes();
    }
    // Pushback: a data node's log area is over its limit; destage so records can be reclaimed.
    if (log_->over_limit() && dirty > 0) forcing = true;
    if (!idle && !forcing) continue;
    // Destage a batch: oldest dirty blocks first, until load returns (idle) or we are back
    // under the low watermark (forced, rate-limited).
    const int64_t batch_start = clock_->NowMicros();
    uint64_t bytes = 0;
    for (int n = 0; n < 64; ++n) {
      if (n > 0 && !CheckOwner().ok()) break;  // fenced during the batch
      SlotKey key;
      Vdi v;
      {
        absl::MutexLock l(&mu_);
        if (stop_) return;
        if (!NextDirty(&key)) break;
        auto it = vdis_.find(key.vdi);
        if (it == vdis_.end()) {
          dirty_order_[key.vdi].push_back(key);  // not registered yet; later
          break;
        }
        v = it->second;
      }
      uint64_t done = 0;
      absl::Status s;
      const int64_t one_start = clock_->NowMicros();
      {
        absl::MutexLock stripe(&Stripe(key.vdi, key.block / BlocksPerObject(v)));
        s = DestageAround(v, key, &done);
      }
      if (!s.ok()) {
        absl::MutexLock l(&mu_);
        if (dirty_set_.contains(key)) dirty_order_[key.vdi].push_back(key);
        break;
      }
      bytes += done * config_.block_size;
      if (!idle && fg_blocks_.load() != count && !log_->over_limit()) {
        // Forced under load (not log pushback, which destages at full speed): hold to the configured byte rate, and keep the data nodes busy with
        // destage for at most forced_destage_duty of the time (on HDDs a destage costs seeks,
        // not bytes; the duty cycle bounds what foreground requests queue behind).
        const int64_t one = clock_->NowMicros() - one_start;
        const double allowed_us = bytes / (config_.forced_destage_mb_s * 1048576.0) * 1e6;
        const int64_t spent = clock_->NowMicros() - batch_start;
        double pause = std::max(0.0, allowed_us - spent);
        pause = std::max(pause, one * (1.0 / config_.forced_destage_duty - 1.0));
        if (pause > 0) clock_->SleepFor(absl::Microseconds(static_cast<int64_t>(pause)));
      }
      if (idle && fg_blocks_.load() - count > 0) break;  // load returned
    }
  }
}

absl::Status CacheNode::Flush(uint32_t vdi) { return FlushWhere(vdi, nullptr); }

absl::Status CacheNode::FlushMoving(const ring::Ring& ring) { return FlushWhere(0, &ring); }

absl::Status CacheNode::FlushWhere(uint32_t vdi, const ring::Ring* moving_under) {
  // Not gated by ownership (the gateway settles a fenced node through it), but a failed SSD
  // cannot vouch for its slots: the gateway replays the log instead (kDeviceFailed).
  RC_RETURN_IF_ERROR(slots_->failed());
  for (int round = 0;; ++round) {
    std::vector<SlotKey> keys;
    {
      absl::MutexLock l(&mu_);
      for (const SlotKey& k : dirty_set_) {
        if (vdi != 0 && k.vdi != vdi) continue;
        if (moving_under != nullptr) {
          auto it = vdis_.find(k.vdi);
          if (it == vdis_.end()) continue;
          const ring::ObjectKey object{k.vdi, k.block / BlocksPerObject(it->second)};
          if (moving_under->Owner(object) == config_.node_id) continue;  // stays here
        }
        keys.push_back(k);
      }
    }
    if (keys.empty()) {
      log_->ReclaimNow().IgnoreError();  // a down data node's copies are collected later
      return absl::OkStatus();
    }
    std::sort(keys.begin(), keys.end(), [](const SlotKey& a, const SlotKey& b) {
      return a.vdi != b.vdi ? a.vdi < b.vdi : a.block < b.block;
    });
    for (const SlotKey& k : keys) {
      RC_ASSIGN_OR_RETURN(Vdi v, GetVdi(k.vdi));
      absl::MutexLock stripe(&Stripe(k.vdi, k.block / BlocksPerObject(v)));
      RC_RETURN_IF_ERROR(DestageAround(v, k, nullptr));
    }
    if (round > 1000) return absl::DeadlineExceededError("flush did not converge");
  }
}

absl::Status CacheNode::SetMode(uint32_t vdi, CacheMode mode) {
  {
    absl::MutexLock l(&mu_);
    auto it = vdis_.find(vdi);
    if (it == vdis_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown VDI ", vdi));
    it->second.mode = mode;
  }
  RC_RETURN_IF_ERROR(SaveVdis());
  // Leaving write-back: no new dirty blocks appear from now on; destage the existing ones.
  if (mode != CacheMode::kWriteBack) RC_RETURN_IF_ERROR(Flush(vdi));
  return absl::OkStatus();
}

absl::StatusOr<CacheMode> CacheNode::GetMode(uint32_t vdi) const {
  RC_ASSIGN_OR_RETURN(Vdi v, GetVdi(vdi));
  return v.mode;
}

absl::Status CacheNode::DropVdi(uint32_t vdi_id) {
  RC_RETURN_IF_ERROR(GetVdi(vdi_id).status());
  std::vector<SlotKey> keys;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [k, e] : map_) {
      if (k.vdi == vdi_id) keys.push_back(k);
    }
  }
  for (const SlotKey& k : keys) RC_RETURN_IF_ERROR(InvalidateUnderStripe(k));
  RC_RETURN_IF_ERROR(slots_->Sync());
  {
    absl::MutexLock l(&mu_);
    vdis_.erase(vdi_id);
  }
  return SaveVdis();
}

void CacheNode::SetDestagePlannedHookForTest(std::function<void()> hook) {
  absl::MutexLock l(&mu_);
  destage_planned_hook_ = std::move(hook);
}

void CacheNode::SetDestageGate(std::function<bool()> gate) {
  absl::MutexLock l(&mu_);
  destage_gate_ = std::move(gate);
}

absl::StatusOr<CacheNode::DropResult> CacheNode::DropBlocks(bool drop_dirty,
                                                            const ring::Ring* ring) {
  DropResult r;
  std::vector<SlotKey> keys;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [k, e] : map_) {
      if (ring != nullptr) {
        auto v = vdis_.find(k.vdi);
        if (v != vdis_.end()) {
          const uint64_t object = k.block / BlocksPerObject(v->second);
          if (ring->Owner(ring::ObjectKey{k.vdi, object}) == config_.node_id) continue;
        }
      }
      if (e.dirty && !drop_dirty) {
        ++r.dirty_kept;
        continue;
      }
      keys.push_back(k);
    }
  }
  for (const SlotKey& k : keys) RC_RETURN_IF_ERROR(InvalidateUnderStripe(k));
  RC_RETURN_IF_ERROR(slots_->Sync());
  r.dropped = keys.size();
  spdlog::info("cache node {}: dropped {} cached blocks ({}), kept {} dirty", config_.node_id,
               r.dropped, ring == nullptr ? "all" : "objects owned elsewhere", r.dirty_kept);
  return r;
}

uint64_t CacheNode::dirty_blocks() const {
  absl::MutexLock l(&mu_);
  return dirty_set_.size();
}

uint64_t CacheNode::cached_blocks() const {
  absl::MutexLock l(&mu_);
  return map_.size();
}

void CacheNode::Stats(uint32_t vdi, std::vector<v1::VdiCacheStats>* out) const {
  absl::MutexLock l(&mu_);
  std::vector<policy::VdiStats> ps;
  policy_->AppendVdiStats(&ps);
  for (const auto& [id, v] : vdis_) {
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
    for (const auto& p : ps) {
      if (p.vdi != id) continue;
      s.set_queue_length(p.blocks);
      s.set_max_length(p.max_blocks);
      s.set_upper_bound(p.upper);
      s.set_lower_bound(p.lower);
    }
    out->push_back(s);
  }
}

}  // namespace ringcache::cachenode
