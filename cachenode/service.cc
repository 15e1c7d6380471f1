#include "cachenode/service.h"

#include "common/grpc_status.h"

namespace ringcache::cachenode {

CacheMode FromProto(v1::CacheMode m) {
  switch (m) {
    case v1::WRITETHROUGH: return CacheMode::kWriteThrough;
    case v1::WRITEAROUND: return CacheMode::kWriteAround;
    case v1::PASSTHROUGH: return CacheMode::kPassThrough;
    default: return CacheMode::kWriteBack;
  }
}

v1::CacheMode ToProto(CacheMode m) {
  switch (m) {
    case CacheMode::kWriteThrough: return v1::WRITETHROUGH;
    case CacheMode::kWriteAround: return v1::WRITEAROUND;
    case CacheMode::kPassThrough: return v1::PASSTHROUGH;
    case CacheMode::kWriteBack: return v1::WRITEBACK;
  }
  return v1::WRITEBACK;
}

grpc::Status CacheNodeService::Read(grpc::ServerContext*, const v1::CacheReadRequest* req,
                                    v1::CacheReadResponse* resp) {
  if (req->length() > (64u << 20)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "read longer than 64 MiB");
  }
  std::string* data = resp->mutable_data();
  data->resize(req->length());
  return ToGrpc(
      node_->Read(req->vdi_id(), req->object_index(), req->offset(), req->length(), data->data()));
}

grpc::Status CacheNodeService::Write(grpc::ServerContext*, const v1::CacheWriteRequest* req,
                                     v1::CacheWriteResponse*) {
  return ToGrpc(node_->Write(req->vdi_id(), req->object_index(), req->offset(),
                             static_cast<uint32_t>(req->data().size()), req->data().data()));
}

grpc::Status CacheNodeService::Trim(grpc::ServerContext*, const v1::CacheTrimRequest* req,
                                    v1::CacheTrimResponse*) {
  return ToGrpc(
      node_->Trim(req->vdi_id(), req->object_index(), req->offset(), req->length(), req->zero()));
}

grpc::Status CacheNodeService::SetMode(grpc::ServerContext*, const v1::SetModeRequest* req,
                                       v1::SetModeResponse*) {
  return ToGrpc(node_->SetMode(req->vdi_id(), FromProto(req->mode())));
}

grpc::Status CacheNodeService::Flush(grpc::ServerContext*, const v1::CacheFlushRequest* req,
                                     v1::CacheFlushResponse* resp) {
  absl::Status s = node_->Flush(req->all_vdis() ? 0 : req->vdi_id());
  resp->set_dirty_blocks_left(node_->dirty_blocks());
  resp->set_dirty_bytes_left(node_->dirty_blocks() * node_->block_size());
  return ToGrpc(s);
}

grpc::Status CacheNodeService::Stats(grpc::ServerContext*, const v1::CacheStatsRequest* req,
                                     v1::CacheStatsResponse* resp) {
  std::vector<v1::VdiCacheStats> stats;
  node_->Stats(req->all_vdis() ? 0 : req->vdi_id(), &stats);
  for (auto& s : stats) *resp->add_vdis() = std::move(s);
  return grpc::Status::OK;
}

grpc::Status CacheNodeService::RegisterVdi(grpc::ServerContext*,
                                           const v1::RegisterVdiRequest* req,
                                           v1::RegisterVdiResponse*) {
  absl::Status s = node_->RegisterVdi(req->vdi());
  if (s.ok() && req->mode() != v1::CACHE_MODE_UNSPECIFIED) {
    s = node_->SetMode(req->vdi().vdi_id(), FromProto(req->mode()));
  }
  return ToGrpc(s);
}

grpc::Status CacheNodeService::DropVdi(grpc::ServerContext*, const v1::DropVdiRequest* req,
                                       v1::DropVdiResponse*) {
  absl::Status s = node_->DropVdi(req->vdi_id());
  if (s.code() == absl::StatusCode::kFailedPrecondition) return grpc::Status::OK;  // not known
  return ToGrpc(s);
}

grpc::Status CacheNodeService::Prefetch(grpc::ServerContext*, const v1::CacheReadRequest* req,
                                        v1::PrefetchResponse*) {
  return ToGrpc(node_->Prefetch(req->vdi_id(), req->object_index(), req->offset(), req->length()));
}

grpc::Status CacheNodeService::Allocation(grpc::ServerContext*, const v1::CacheReadRequest* req,
                                          v1::AllocationResponse* resp) {
  std::vector<bool> alloc;
  absl::Status s =
      node_->Allocation(req->vdi_id(), req->object_index(), req->offset(), req->length(), &alloc);
  for (bool a : alloc) resp->add_allocated(a);
  return ToGrpc(s);
}

}  // namespace ringcache::cachenode
