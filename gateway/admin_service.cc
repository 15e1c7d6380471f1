#include "gateway/admin_service.h"

#include <chrono>

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

grpc::Status AdminService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                     v1::ListNodesResponse* resp) {
  for (const auto& n : nodes_) *resp->add_nodes() = n;
  return grpc::Status::OK;
}

grpc::Status AdminService::RemoveNode(grpc::ServerContext*, const v1::RemoveNodeRequest*,
                                      v1::RemoveNodeResponse*) {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "membership is static in this mode (single-process or static cluster "
                      "file); node removal needs cluster mode with etcd");
}

grpc::Status AdminService::ClusterStatus(grpc::ServerContext*, const v1::ClusterStatusRequest*,
                                         v1::ClusterStatusResponse* resp) {
  resp->set_epoch(1);
  for (const auto& n : nodes_) *resp->add_nodes() = n;
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
