#include "cachenode/vdi_table.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

namespace {
constexpr char kMagic[] = "RCVDIS2\n";
constexpr char kMagicV1[] = "RCVDIS1\n";  // no policy field
constexpr size_t kMagicLen = 8;
}  // namespace

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

VdiTable::VdiTable(uint32_t node_id, uint32_t block_size, std::string path,
                   metrics::Registry* registry)
    : node_id_(node_id), block_size_(block_size), path_(std::move(path)), registry_(registry) {}

absl::StatusOr<bool> VdiTable::Register(const v1::VdiGeometry& vdi) {
  if (vdi.block_size() != block_size_) {
    return absl::InvalidArgumentError(absl::StrCat("VDI ", vdi.name(), " uses ",
                                                   vdi.block_size(), "-byte blocks; this cache ",
                                                   "node caches ", block_size_));
  }
  if (vdi.object_size() % block_size_ != 0 || vdi.replication() == 0) {
    return absl::InvalidArgumentError("bad VDI geometry");
  }
  std::shared_ptr<VdiCounters> fresh;
  {
    absl::MutexLock l(&mu_);
    VdiInfo& v = vdis_[vdi.vdi_id()];
    v.geometry = vdi;
    if (v.counters) return false;
    v.counters = fresh = std::make_shared<VdiCounters>();
  }
  const metrics::Labels lb{{"vdi", vdi.name()}, {"node", absl::StrCat(node_id_)}};
  auto counter = [&](const char* name, const char* help, std::atomic<uint64_t>* field) {
    registry_->AddCallbackCounter(name, help, lb, [c = fresh, field] {
      return static_cast<double>(field->load(std::memory_order_relaxed));
    });
  };
  VdiCounters* c = fresh.get();
  counter("ringcache_vdi_reads_total", "Block reads per VDI.", &c->reads);
  counter("ringcache_vdi_writes_total", "Block writes per VDI.", &c->writes);
  counter("ringcache_vdi_hits_ram_total", "Block reads served from the RAM tier.", &c->hits_ram);
  counter("ringcache_vdi_hits_ssd_total", "Block reads served from the SSD tier.", &c->hits_ssd);
  counter("ringcache_vdi_misses_total", "Block reads that went to a data node.", &c->misses);
  counter("ringcache_vdi_ssd_writes_total",
          "Blocks written to SSD slots: cached writes, fills, RAM demotions.", &c->ssd_writes);
  counter("ringcache_vdi_bypassed_total", "Block accesses sent past the cache (CMF, modes).",
          &c->bypassed);
  counter("ringcache_vdi_admissions_rejected_total", "Missed blocks admission declined.",
          &c->admissions_rejected);
  counter("ringcache_vdi_destage_bytes_total", "Bytes destaged per VDI.", &c->destaged_bytes);
  registry_->AddCallbackGauge("ringcache_vdi_dirty_bytes", "Dirty bytes per VDI.", lb,
                              [c = fresh, bs = block_size_] {
                                return static_cast<double>(c->dirty_blocks.load() * bs);
                              });
  return true;
}

absl::StatusOr<VdiInfo> VdiTable::Get(uint32_t vdi) const {
  absl::MutexLock l(&mu_);
  auto it = vdis_.find(vdi);
  if (it == vdis_.end()) {
    // kFailedPrecondition (not kInvalidArgument): the gateway re-registers the VDI and retries.
    return TypedError(ErrorKind::kUnknownVdi,
                      absl::StrCat("unknown VDI ", vdi, " on cache node ", node_id_));
  }
  return it->second;
}

std::optional<VdiLayout> VdiTable::Layout(uint32_t vdi) const {
  absl::MutexLock l(&mu_);
  auto it = vdis_.find(vdi);
  if (it == vdis_.end()) return std::nullopt;
  return VdiLayout{it->second.blocks_per_object(), it->second.geometry.replication()};
}

std::shared_ptr<VdiCounters> VdiTable::Counters(uint32_t vdi) const {
  absl::MutexLock l(&mu_);
  auto it = vdis_.find(vdi);
  return it == vdis_.end() ? nullptr : it->second.counters;
}

absl::Status VdiTable::SetMode(uint32_t vdi, CacheMode mode) {
  absl::MutexLock l(&mu_);
  auto it = vdis_.find(vdi);
  if (it == vdis_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown VDI ", vdi));
  it->second.mode = mode;
  return absl::OkStatus();
}

absl::Status VdiTable::SetPolicy(uint32_t vdi, const std::string& spec) {
  absl::MutexLock l(&mu_);
  auto it = vdis_.find(vdi);
  if (it == vdis_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown VDI ", vdi));
  it->second.policy = spec;
  return absl::OkStatus();
}

void VdiTable::Erase(uint32_t vdi) {
  absl::MutexLock l(&mu_);
  vdis_.erase(vdi);
}

std::vector<VdiInfo> VdiTable::All() const {
  absl::MutexLock l(&mu_);
  std::vector<VdiInfo> out;
  out.reserve(vdis_.size());
  for (const auto& [id, v] : vdis_) out.push_back(v);
  return out;
}

absl::Status VdiTable::Save() {
  std::string body(kMagic, kMagicLen);
  uint64_t gen;
  {
    absl::MutexLock l(&mu_);
    gen = ++gen_;
    for (const auto& [id, v] : vdis_) {
      const std::string g = v.geometry.SerializeAsString();
      const uint32_t n = static_cast<uint32_t>(g.size());
      body.append(reinterpret_cast<const char*>(&n), 4);
      body += g;
      body.push_back(static_cast<char>(v.mode));
      const uint32_t pn = static_cast<uint32_t>(v.policy.size());
      body.append(reinterpret_cast<const char*>(&pn), 4);
      body += v.policy;
    }
  }
  const uint64_t sum = BlockChecksum(body.data(), body.size());
  body.append(reinterpret_cast<const char*>(&sum), 8);
  absl::MutexLock fl(&file_mu_);
  if (gen < saved_gen_) return absl::OkStatus();  // a newer table was written already
  RC_RETURN_IF_ERROR(WriteFileAtomically(path_, body));
  saved_gen_ = gen;
  return absl::OkStatus();
}

std::vector<uint32_t> VdiTable::Load() {
  std::vector<uint32_t> loaded;
  absl::StatusOr<std::string> read = ReadStateFile(path_);
  if (absl::IsNotFound(read.status())) return loaded;  // first start
  if (!read.ok()) {
    spdlog::warn("cache node {}: {}; VDIs are known again once the gateway registers them",
                 node_id_, read.status().ToString());
    return loaded;
  }
  const std::string body = *std::move(read);
  uint64_t sum = 0;
  if (body.size() >= 16) std::memcpy(&sum, body.data() + body.size() - 8, 8);
  const bool v1 = body.size() >= kMagicLen && body.compare(0, kMagicLen, kMagicV1) == 0;
  if (body.size() < 16 || (!v1 && body.compare(0, kMagicLen, kMagic) != 0) ||
      sum != BlockChecksum(body.data(), body.size() - 8)) {
    spdlog::warn("cache node {}: {} is damaged; VDIs are known again once the gateway "
                 "registers them", node_id_, path_);
    return loaded;
  }
  size_t pos = kMagicLen;
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
    std::string spec;
    if (!v1) {
      uint32_t pn;
      if (pos + 4 > end) break;
      std::memcpy(&pn, body.data() + pos, 4);
      pos += 4;
      if (pos + pn > end) break;
      spec.assign(body.data() + pos, pn);
      pos += pn;
    }
    if (Register(g).ok() && SetMode(g.vdi_id(), mode).ok() && SetPolicy(g.vdi_id(), spec).ok()) {
      loaded.push_back(g.vdi_id());
    }
  }
  return loaded;
}

}  // namespace ringcache::cachenode
