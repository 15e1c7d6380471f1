#include "gateway/admin_service.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <spdlog/spdlog.h>

#include "cachenode/log_replay.h"
#include "common/errors.h"
#include "common/grpc_status.h"

namespace ringcache::gateway {

grpc::Status AdminService::CreateVdi(grpc::ServerContext*, const v1::CreateVdiRequest* req,
                                     v1::CreateVdiResponse* resp) {
  auto r = router_->CreateVdi(req->name(), req->size_bytes(), req->object_size(),
                              req->replication());
  if (!r.ok()) return ToGrpc(r.status());
  *resp->mutable_vdi() = r->geometry;
  return grpc::Status::OK;
}

grpc::Status AdminService::ListVdis(grpc::ServerContext*, const v1::ListVdisRequest*,
                                    v1::ListVdisResponse* resp) {
  for (const auto& r : router_->catalog()->List()) *resp->add_vdis() = r.geometry;
  return grpc::Status::OK;
}

grpc::Status AdminService::DeleteVdi(grpc::ServerContext*, const v1::RemoveVdiRequest* req,
                                     v1::RemoveVdiResponse*) {
  return ToGrpc(router_->DeleteVdi(req->name()));
}

grpc::Status AdminService::ResizeVdi(grpc::ServerContext*, const v1::ResizeVdiRequest* req,
                                     v1::ResizeVdiResponse* resp) {
  auto r = router_->ResizeVdi(req->name(), req->size_bytes());
  if (!r.ok()) return ToGrpc(r.status());
  *resp->mutable_vdi() = r->geometry;
  return grpc::Status::OK;
}

grpc::Status AdminService::SetVdiMode(grpc::ServerContext*, const v1::SetVdiModeRequest* req,
                                      v1::SetVdiModeResponse*) {
  if (req->mode() == v1::CACHE_MODE_UNSPECIFIED) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "mode must be given");
  }
  return ToGrpc(router_->SetMode(req->name(), req->mode()));
}

std::vector<v1::NodeInfo> AdminService::Nodes() const {
  std::vector<v1::NodeInfo> out;
  std::function<cachenode::DataRing()> ring_of;
  {
    absl::MutexLock l(&mu_);
    out = nodes_;
    ring_of = data_ring_;
  }
  if (!ring_of) return out;
  const cachenode::DataRing ring = ring_of();
  for (const auto& e : ring.nodes) {
    const bool member =
        std::find(ring.members.begin(), ring.members.end(), e.id) != ring.members.end();
    v1::NodeInfo* info = nullptr;
    for (auto& n : out) {
      if (n.role() == "datanode" && n.id() == e.id) info = &n;
    }
    if (info == nullptr) {
      info = &out.emplace_back();
      info->set_role("datanode");
      info->set_id(e.id);
      info->set_zone(e.zone);
    }
    info->set_address(e.address);
    info->set_state(member ? "up" : "joining");
  }
  return out;
}

grpc::Status AdminService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                     v1::ListNodesResponse* resp) {
  for (const auto& n : Nodes()) *resp->add_nodes() = n;
  return grpc::Status::OK;
}

grpc::Status AdminService::RemoveNode(grpc::ServerContext*, const v1::RemoveNodeRequest* req,
                                      v1::RemoveNodeResponse*) {
  const std::string role = req->role().empty() ? "cachenode" : req->role();
  if (role != "cachenode") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        role == "datanode"
                            ? "data nodes cannot be removed in this mode: their replicas would "
                              "need rebalancing (cluster mode); a data node that is down is "
                              "simply skipped by reads and retried by destage"
                            : "only cache nodes can be removed");
  }
  const uint32_t id = req->id();
  std::function<absl::Status(uint32_t)> before_remove;
  {
    absl::MutexLock l(&mu_);
    before_remove = before_remove_;
  }
  if (before_remove) {
    if (absl::Status s = before_remove(id); !s.ok()) return ToGrpc(s);
  }
  auto settle = CacheNodeSettle(router_, id, /*register_first=*/false);
  absl::Status s = router_->RemoveCacheNode(id, settle, nullptr);
  if (s.ok()) SetNodeState("cachenode", id, "removed");
  return ToGrpc(s);
}

void AdminService::SetNodeState(const std::string& role, uint32_t id, const std::string& state) {
  const std::string learned = role == "cachenode" ? router_->LearnedAddress(id) : "";
  absl::MutexLock l(&mu_);
  for (auto& n : nodes_) {
    if (n.role() == role && n.id() == id) {
      n.set_state(state);
      return;
    }
  }
  // A cache node that joined in cluster mode without being in the cluster file.
  v1::NodeInfo& n = nodes_.emplace_back();
  n.set_role(role);
  n.set_id(id);
  n.set_address(learned);
  n.set_state(state);
}

std::function<absl::Status(CacheClient*, bool)> CacheNodeSettle(Router* router, uint32_t id,
                                                                bool register_first) {
  cachenode::DataNodePool* pool = router->data_nodes();
  Catalog* catalog = router->catalog();
  // A live node destages everything (its log records are reclaimed as blocks reach home); a dead
  // one's dirty blocks are replayed from its log copies on the data nodes (DESIGN §7).
  return [pool, catalog, id, register_first](CacheClient* c, bool alive) -> absl::Status {
    if (alive) {
      if (register_first) {
        for (const auto& r : catalog->List()) {
          if (absl::Status s = c->RegisterVdi(r.geometry, r.mode); !s.ok()) return s;
        }
      }
      auto left = c->Flush(0);
      if (left.ok()) {
        if (*left != 0) return absl::UnavailableError("dirty blocks left after the flush");
        return absl::OkStatus();
      }
      // A node whose SSD failed cannot vouch for its slots: recover its dirty blocks from their
      // log replicas, as for a dead node (it stays fenced: it serves and destages nothing).
      if (!IsKind(left.status(), ErrorKind::kDeviceFailed)) return left.status();
      spdlog::warn("cache node {}: {}; replaying its write-back log instead", id,
                   std::string(left.status().message()));
    }
    if (pool == nullptr) return absl::FailedPreconditionError("no data nodes to replay to");
    std::map<uint32_t, uint32_t> replication;
    for (const auto& r : catalog->List()) {
      replication[r.geometry.vdi_id()] = r.geometry.replication();
    }
    return cachenode::ReplayCacheNodeLog(pool, id, [&](uint32_t vdi) {
             auto it = replication.find(vdi);
             return it == replication.end() ? 0u : it->second;
           })
        .status();
  };
}

grpc::Status AdminService::ClusterStatus(grpc::ServerContext*, const v1::ClusterStatusRequest*,
                                         v1::ClusterStatusResponse* resp) {
  const uint64_t epoch = epoch_.load();
  // Static mode: one epoch per removal. Cluster mode: the etcd revision the ring follows.
  resp->set_epoch(epoch != 0 ? epoch : 1 + router_->removed().size());
  for (const auto& n : Nodes()) *resp->add_nodes() = n;
  std::function<v1::DataRebalance()> rebalance;
  {
    absl::MutexLock l(&mu_);
    rebalance = rebalance_status_;
  }
  if (rebalance) *resp->mutable_rebalance() = rebalance();
  resp->set_vdis(router_->List().size());
  std::vector<v1::VdiCacheStats> stats;
  absl::Status s = router_->Stats("", &stats);
  uint64_t dirty = 0;
  for (const auto& x : stats) dirty += x.dirty_bytes();
  resp->set_dirty_bytes(dirty);
  return ToGrpc(s);
}

grpc::Status AdminService::VdiStats(grpc::ServerContext*, const v1::VdiStatsRequest* req,
                                    v1::VdiStatsResponse* resp) {
  std::vector<v1::VdiCacheStats> stats;
  absl::Status s = router_->Stats(req->vdi_name(), &stats);
  if (!s.ok()) return ToGrpc(s);
  std::map<uint32_t, std::string> names;
  for (const auto& e : router_->List()) names[e.vdi_id] = e.name;
  for (const auto& x : stats) {
    v1::VdiStatsEntry* e = resp->add_vdis();
    e->set_vdi_name(names[x.vdi_id()]);
    *e->mutable_stats() = x;
    const double hits = static_cast<double>(x.hits_ram() + x.hits_ssd());
    const double total = hits + static_cast<double>(x.misses());
    e->set_hit_ratio(total > 0 ? hits / total : 0);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::Flush(grpc::ServerContext*, const v1::FlushRequest* req,
                                 grpc::ServerWriter<v1::FlushProgress>* writer) {
  // Dirty bytes before, for the rate.
  std::vector<v1::VdiCacheStats> before;
  if (absl::Status s = router_->Stats(req->vdi_name(), &before); !s.ok()) return ToGrpc(s);
  uint64_t dirty0 = 0;
  for (const auto& x : before) dirty0 += x.dirty_bytes();
  const auto start = std::chrono::steady_clock::now();
  v1::FlushProgress p0;
  p0.set_dirty_bytes_left(dirty0);
  writer->Write(p0);
  absl::Status s = router_->Flush(req->vdi_name(), [&](size_t, uint64_t) {
    std::vector<v1::VdiCacheStats> now;
    if (!router_->Stats(req->vdi_name(), &now).ok()) return;
    uint64_t dirty = 0;
    for (const auto& x : now) dirty += x.dirty_bytes();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    v1::FlushProgress p;
    p.set_dirty_bytes_left(dirty);
    p.set_dirty_blocks_left(dirty / 4096);
    p.set_bytes_per_second(secs > 0 && dirty0 > dirty ? (dirty0 - dirty) / secs : 0);
    writer->Write(p);
  });
  if (!s.ok()) return ToGrpc(s);
  v1::FlushProgress done;
  done.set_done(true);
  writer->Write(done);
  return grpc::Status::OK;
}

}  // namespace ringcache::gateway
