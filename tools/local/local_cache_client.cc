#include "tools/local/local_cache_client.h"

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "cachenode/service.h"

namespace ringcache::local {
namespace {

using gateway::CacheClient;

class LocalCacheClient : public CacheClient {
 public:
  explicit LocalCacheClient(cachenode::CacheNode* node) : node_(node) {}
  absl::Status Read(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                    char* out) override {
    return node_->Read(vdi, object, offset, len, out);
  }
  absl::Status Write(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                     const char* data) override {
    node_->ObserveEpoch(ring_epoch());  // the fencing token new writes carry
    return node_->Write(vdi, object, offset, len, data);
  }
  absl::Status Trim(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                    bool zero) override {
    node_->ObserveEpoch(ring_epoch());
    return node_->Trim(vdi, object, offset, len, zero);
  }
  absl::Status Prefetch(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len) override {
    return node_->Prefetch(vdi, object, offset, len);
  }
  absl::Status Allocation(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                          std::vector<bool>* allocated) override {
    return node_->Allocation(vdi, object, offset, len, allocated);
  }
  absl::Status RegisterVdi(const v1::VdiGeometry& vdi, v1::CacheMode mode,
                           const std::string& policy) override {
    absl::Status s = node_->RegisterVdi(vdi);
    if (s.ok() && mode != v1::CACHE_MODE_UNSPECIFIED) {
      s = node_->SetMode(vdi.vdi_id(), cachenode::FromProto(mode));
    }
    if (s.ok()) {
      // As the cache node service does: a policy that cannot run leaves the node's.
      if (absl::Status p = node_->SetPolicy(vdi.vdi_id(), policy); !p.ok()) {
        spdlog::warn("VDI {}: policy '{}' not applied: {}", vdi.name(), policy,
                     std::string(p.message()));
      }
    }
    return s;
  }
  absl::Status SetPolicy(uint32_t vdi, const std::string& policy) override {
    return node_->SetPolicy(vdi, policy);
  }
  absl::Status DropVdi(uint32_t vdi) override {
    absl::Status s = node_->DropVdi(vdi);
    return s.code() == absl::StatusCode::kFailedPrecondition ? absl::OkStatus() : s;
  }
  absl::StatusOr<Invalidated> InvalidateVdi(uint32_t vdi) override {
    auto r = node_->InvalidateVdi(vdi);
    if (!r.ok()) return r.status();
    return Invalidated{r->dropped, r->dirty_kept};
  }
  absl::Status SetMode(uint32_t vdi, v1::CacheMode mode) override {
    return node_->SetMode(vdi, cachenode::FromProto(mode));
  }
  absl::StatusOr<uint64_t> Flush(uint32_t vdi) override {
    absl::Status s = node_->Flush(vdi);
    if (!s.ok()) return s;
    return node_->dirty_blocks() * node_->block_size();
  }
  absl::Status Stats(uint32_t vdi, std::vector<v1::VdiCacheStats>* out) override {
    node_->Stats(vdi, out);
    return absl::OkStatus();
  }
  absl::Status Probe(int) override { return absl::OkStatus(); }
  absl::StatusOr<NodeHealth> Health(int) override {
    NodeHealth h;
    h.quarantined = node_->ownership()->quarantined();
    const absl::Status dev = node_->device_status();
    h.device_failed = !dev.ok();
    h.device_error = std::string(dev.message());
    h.epoch = node_->epoch();
    const cachenode::CacheNode::Usage u = node_->usage();
    h.ssd_bytes = u.ssd_bytes;
    h.ssd_used_bytes = u.ssd_used_bytes;
    h.dirty_bytes = u.dirty_bytes;
    h.hits = u.hits;
    h.misses = u.misses;
    h.wear = node_->WearProto();
    return h;
  }
  absl::Status FlushMoving(const std::vector<ring::Member>& next) override {
    auto built = ring::Ring::BuildCacheRing(next);
    if (!built.ok()) return built.status();
    return node_->FlushMoving(*built);
  }
  absl::StatusOr<uint64_t> DropBlocks(bool all, const std::vector<ring::Member>& ring) override {
    if (all) {
      auto r = node_->DropBlocks(true, nullptr);
      if (!r.ok()) return r.status();
      return r->dirty_kept;
    }
    auto built = ring::Ring::BuildCacheRing(ring);
    if (!built.ok()) return built.status();
    auto r = node_->DropBlocks(false, &*built);
    if (!r.ok()) return r.status();
    return r->dirty_kept;
  }
  absl::StatusOr<uint32_t> RelogRecords(const std::vector<uint64_t>& seqs) override {
    return node_->RelogRecords(absl::flat_hash_set<uint64_t>(seqs.begin(), seqs.end()));
  }
  absl::Status SetDataRing(const datanode::DataRing& ring) override {
    return node_->SetDataRing(ring);
  }
  absl::StatusOr<v1::ResizeTiersResponse> ResizeTiers(uint64_t ssd_bytes,
                                                      uint64_t ram_bytes) override {
    if (absl::Status s = node_->Resize(ssd_bytes, ram_bytes); !s.ok()) return s;
    return node_->resize_state();
  }

 private:
  cachenode::CacheNode* const node_;
};

}  // namespace

std::unique_ptr<gateway::CacheClient> MakeLocalCacheClient(cachenode::CacheNode* node) {
  return std::make_unique<LocalCacheClient>(node);
}

}  // namespace ringcache::local
