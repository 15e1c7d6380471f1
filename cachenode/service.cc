#include "cachenode/service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/formats.h"
#include "common/grpc_status.h"
#include "common/monotonic.h"

namespace ringcache::cachenode {

absl::Status RingEpochGuard::Admit(uint64_t epoch) {
  if (epoch == 0) return absl::OkStatus();
  const uint64_t seen = RaiseTo(&highest_, epoch);
  if (epoch < seen) {
    return TypedError(ErrorKind::kStaleEpoch,
                      absl::StrCat("stale ring epoch ", epoch, ": this node has seen ring epoch ",
                                   seen, "; the sender's ring is out of date (re-route and retry)"));
  }
  return absl::OkStatus();
}

RequestGate::RequestGate(CacheNode* node, metrics::Registry* registry) : node_(node) {
  if (registry != nullptr) {
    fenced_requests_ = registry->GetCounter(
        "ringcache_cachenode_fenced_requests_total",
        "Block requests refused because the node was fenced (etcd lease not valid, or lost).");
    stale_epoch_requests_ = registry->GetCounter(
        "ringcache_cachenode_stale_epoch_requests_total",
        "Block requests refused because their sender routed them with an older ring epoch than "
        "this node has seen.");
  }
}

absl::Status RequestGate::Admit(uint64_t epoch, Pass* pass) {
  if (absl::Status f = node_->CheckOwner(); !f.ok()) {
    if (fenced_requests_ != nullptr) fenced_requests_->Increment();
    return f;
  }
  absl::Status s;
  uint64_t highest;
  {
    absl::MutexLock l(&mu_);
    s = epochs_.Admit(epoch);
    highest = epochs_.highest();
    if (s.ok() && pass != nullptr) {
      ++running_[epoch];
      pass->Release();
      pass->gate_ = this;
      pass->epoch_ = epoch;
    }
  }
  if (s.ok()) {
    node_->ObserveEpoch(highest);
    return s;
  }
  if (stale_epoch_requests_ != nullptr) stale_epoch_requests_->Increment();
  return s;
}

void RequestGate::Pass::Release() {
  if (gate_ == nullptr) return;
  absl::MutexLock l(&gate_->mu_);
  auto it = gate_->running_.find(epoch_);
  if (it != gate_->running_.end() && --it->second == 0) gate_->running_.erase(it);
  gate_ = nullptr;
}

absl::Status RequestGate::Advance(uint64_t epoch, absl::Duration timeout) {
  if (epoch == 0) return absl::OkStatus();
  absl::MutexLock l(&mu_);
  (void)epochs_.Admit(epoch);  // raises; an older `epoch` waits for what is older than it
  node_->ObserveEpoch(epochs_.highest());
  auto older_done = [this, epoch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return running_.empty() || running_.begin()->first >= epoch;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&older_done), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        running_.begin()->second, " requests routed with ring epoch ", running_.begin()->first,
        " still running after ", absl::FormatDuration(timeout), " (advancing to ", epoch, ")"));
  }
  return absl::OkStatus();
}

void RequestGate::Raise(uint64_t epoch) {
  if (epoch == 0) return;
  absl::MutexLock l(&mu_);
  (void)epochs_.Admit(epoch);  // raises, or refuses an older one: either way nothing to wait for
  node_->ObserveEpoch(epochs_.highest());
}

int RequestGate::running() const {
  absl::MutexLock l(&mu_);
  int n = 0;
  for (const auto& [e, c] : running_) n += c;
  return n;
}

CacheNodeService::CacheNodeService(CacheNode* node, metrics::Registry* registry)
    : gate_(node, registry), node_(node) {
  if (registry != nullptr) {
    stale_term_refused_ = registry->GetCounter(
        "ringcache_cachenode_stale_term_refused_total",
        "Control steps (drop blocks, handoff flush, relog) refused because they carried an older "
        "coordinator term than this node has seen.");
    registry->AddCallbackGauge("ringcache_cachenode_control_term",
                               "The highest coordinator term a control step carried.", {},
                               [node] { return static_cast<double>(node->ownership()->term()); });
  }
}

absl::Status CacheNodeService::CheckFence(const v1::ControlFence& fence, const char* step) {
  absl::Status s = node_->ownership()->ObserveTerm(fence.term());
  if (IsKind(s, ErrorKind::kStaleTerm)) {
    if (stale_term_refused_ != nullptr) stale_term_refused_->Increment();
    spdlog::warn("{} refused: {}", step, std::string(s.message()));
  }
  return s;
}

grpc::Status CacheNodeService::Admit(uint64_t epoch, RequestGate::Pass* pass) {
  return ToGrpc(gate_.Admit(epoch, pass));
}

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
  RequestGate::Pass pass;
  if (grpc::Status f = Admit(req->epoch(), &pass); !f.ok()) return f;
  if (req->length() > (64u << 20)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "read longer than 64 MiB");
  }
  std::string* data = resp->mutable_data();
  data->resize(req->length());
  return ToGrpc(
      node_->Read(req->vdi_id(), req->object_index(), req->offset(), req->length(), data->data()));
}

grpc::Status CacheNodeService::Write(grpc::ServerContext* ctx, const v1::CacheWriteRequest* req,
                                     v1::CacheWriteResponse*) {
  RequestGate::Pass pass;
  if (grpc::Status f = Admit(req->epoch(), &pass); !f.ok()) return f;
  const absl::Time deadline = RequestGate::WriteDeadline(absl::FromChrono(ctx->deadline()));
  return ToGrpc(node_->Write(req->vdi_id(), req->object_index(), req->offset(),
                             static_cast<uint32_t>(req->data().size()), req->data().data(),
                             deadline));
}

grpc::Status CacheNodeService::Trim(grpc::ServerContext*, const v1::CacheTrimRequest* req,
                                    v1::CacheTrimResponse*) {
  RequestGate::Pass pass;
  if (grpc::Status f = Admit(req->epoch(), &pass); !f.ok()) return f;
  return ToGrpc(
      node_->Trim(req->vdi_id(), req->object_index(), req->offset(), req->length(), req->zero()));
}

grpc::Status CacheNodeService::SetMode(grpc::ServerContext*, const v1::SetModeRequest* req,
                                       v1::SetModeResponse*) {
  return ToGrpc(node_->SetMode(req->vdi_id(), FromProto(req->mode())));
}

grpc::Status CacheNodeService::Flush(grpc::ServerContext*, const v1::CacheFlushRequest* req,
                                     v1::CacheFlushResponse* resp) {
  // A handoff is a coordinator's step; a plain flush only destages, which is safe at any time.
  if (req->moving_under_size() > 0) {
    if (absl::Status f = CheckFence(req->fence(), "handoff flush"); !f.ok()) return ToGrpc(f);
  }
  if (absl::Status a = gate_.Advance(req->epoch(), absl::Minutes(1)); !a.ok()) return ToGrpc(a);
  absl::Status s;
  if (req->moving_under_size() > 0) {
    std::vector<ring::Member> members;
    for (const auto& m : req->moving_under()) members.push_back({m.id(), m.weight(), ""});
    auto ring = ring::Ring::BuildCacheRing(std::move(members));
    if (!ring.ok()) return ToGrpc(ring.status());
    s = node_->FlushMoving(*ring);
  } else {
    s = node_->Flush(req->all_vdis() ? 0 : req->vdi_id());
  }
  resp->set_dirty_blocks_left(node_->dirty_blocks());
  resp->set_dirty_bytes_left(node_->dirty_blocks() * node_->block_size());
  return ToGrpc(s);
}

grpc::Status CacheNodeService::Stats(grpc::ServerContext*, const v1::CacheStatsRequest* req,
                                     v1::CacheStatsResponse* resp) {
  if (absl::Status api = CheckPeerApi(req->api_version(), "the caller"); !api.ok()) {
    return ToGrpc(api);
  }
  resp->set_api_version(kNodeApiFormat.writes);
  std::vector<v1::VdiCacheStats> stats;
  node_->Stats(req->all_vdis() ? 0 : req->vdi_id(), &stats);
  for (auto& s : stats) *resp->add_vdis() = std::move(s);
  resp->set_quarantined(node_->ownership()->quarantined());
  const absl::Status dev = node_->device_status();
  resp->set_device_failed(!dev.ok());
  resp->set_device_error(std::string(dev.message()));
  resp->set_epoch(node_->epoch());
  resp->set_control_term(node_->ownership()->term());
  resp->set_data_port(static_cast<uint32_t>(data_port_.load()));
  const CacheNode::Usage u = node_->usage();
  resp->set_ssd_bytes(u.ssd_bytes);
  resp->set_ssd_used_bytes(u.ssd_used_bytes);
  resp->set_dirty_bytes(u.dirty_bytes);
  resp->set_hits(u.hits);
  resp->set_misses(u.misses);
  *resp->mutable_wear() = node_->WearProto();
  node_->SaveWear(/*force=*/false);  // gateways probe every second: at most once a minute
  return grpc::Status::OK;
}

grpc::Status CacheNodeService::RegisterVdi(grpc::ServerContext*,
                                           const v1::RegisterVdiRequest* req,
                                           v1::RegisterVdiResponse*) {
  absl::Status s = node_->RegisterVdi(req->vdi());
  if (s.ok() && req->mode() != v1::CACHE_MODE_UNSPECIFIED) {
    s = node_->SetMode(req->vdi().vdi_id(), FromProto(req->mode()));
  }
  if (s.ok()) {
    // A policy this node cannot run (its node policy has no per-VDI queues) leaves the VDI on
    // the node's policy: registration, and so the VDI's I/O, must not fail over it.
    const absl::Status p = node_->SetPolicy(req->vdi().vdi_id(), req->policy());
    if (!p.ok()) {
      spdlog::warn("VDI {}: policy '{}' not applied: {}", req->vdi().name(), req->policy(),
                   std::string(p.message()));
    }
  }
  return ToGrpc(s);
}

grpc::Status CacheNodeService::SetPolicy(grpc::ServerContext*, const v1::SetPolicyRequest* req,
                                         v1::SetPolicyResponse*) {
  return ToGrpc(node_->SetPolicy(req->vdi_id(), req->policy()));
}

grpc::Status CacheNodeService::InvalidateVdi(grpc::ServerContext*,
                                             const v1::InvalidateVdiRequest* req,
                                             v1::InvalidateVdiResponse* resp) {
  absl::StatusOr<CacheNode::DropResult> r = node_->InvalidateVdi(req->vdi_id());
  if (!r.ok()) return ToGrpc(r.status());
  resp->set_dropped_blocks(r->dropped);
  resp->set_dirty_blocks_kept(r->dirty_kept);
  return grpc::Status::OK;
}

grpc::Status CacheNodeService::ResizeTiers(grpc::ServerContext*, const v1::ResizeTiersRequest* req,
                                         v1::ResizeTiersResponse* resp) {
  if (absl::Status s = node_->Resize(req->ssd_bytes(), req->ram_bytes()); !s.ok()) {
    return ToGrpc(s);
  }
  *resp = node_->resize_state();
  return grpc::Status::OK;
}

grpc::Status CacheNodeService::DropVdi(grpc::ServerContext*, const v1::DropVdiRequest* req,
                                       v1::DropVdiResponse*) {
  absl::Status s = node_->DropVdi(req->vdi_id());
  if (s.code() == absl::StatusCode::kFailedPrecondition) return grpc::Status::OK;  // not known
  return ToGrpc(s);
}

grpc::Status CacheNodeService::Prefetch(grpc::ServerContext*, const v1::CacheReadRequest* req,
                                        v1::PrefetchResponse*) {
  RequestGate::Pass pass;
  if (grpc::Status f = Admit(req->epoch(), &pass); !f.ok()) return f;
  return ToGrpc(node_->Prefetch(req->vdi_id(), req->object_index(), req->offset(), req->length()));
}

grpc::Status CacheNodeService::Allocation(grpc::ServerContext*, const v1::CacheReadRequest* req,
                                          v1::AllocationResponse* resp) {
  RequestGate::Pass pass;
  if (grpc::Status f = Admit(req->epoch(), &pass); !f.ok()) return f;
  std::vector<bool> alloc;
  absl::Status s =
      node_->Allocation(req->vdi_id(), req->object_index(), req->offset(), req->length(), &alloc);
  for (bool a : alloc) resp->add_allocated(a);
  return ToGrpc(s);
}

grpc::Status CacheNodeService::DropBlocks(grpc::ServerContext*, const v1::DropBlocksRequest* req,
                                          v1::DropBlocksResponse* resp) {
  if (absl::Status f = CheckFence(req->fence(), "drop blocks"); !f.ok()) return ToGrpc(f);
  absl::StatusOr<CacheNode::DropResult> r;
  if (req->all()) {
    r = node_->DropBlocks(/*drop_dirty=*/true, nullptr);
  } else {
    std::vector<ring::Member> members;
    for (const auto& m : req->ring_members()) members.push_back({m.id(), m.weight(), ""});
    auto ring = ring::Ring::BuildCacheRing(std::move(members));
    if (!ring.ok()) return ToGrpc(ring.status());
    r = node_->DropBlocks(/*drop_dirty=*/false, &*ring);
  }
  if (!r.ok()) return ToGrpc(r.status());
  if (req->all()) {
    // Every block is gone and the gateway takes the node back: lift a quarantine.
    if (absl::Status a = node_->Readmit(req->epoch()); !a.ok()) return ToGrpc(a);
  }
  resp->set_dropped_blocks(r->dropped);
  resp->set_dirty_blocks_kept(r->dirty_kept);
  return grpc::Status::OK;
}

grpc::Status CacheNodeService::SetDataRing(grpc::ServerContext*, const v1::DataRing* req,
                                           v1::SetDataRingResponse* resp) {
  absl::Status s = node_->SetDataRing(datanode::DataRing::FromProto(*req));
  resp->set_epoch(node_->data_ring_epoch());
  return ToGrpc(s);
}

grpc::Status CacheNodeService::RelogRecords(grpc::ServerContext*,
                                            const v1::RelogRecordsRequest* req,
                                            v1::RelogRecordsResponse* resp) {
  if (absl::Status f = CheckFence(req->fence(), "relog records"); !f.ok()) return ToGrpc(f);
  const absl::flat_hash_set<uint64_t> seqs(req->sequences().begin(), req->sequences().end());
  absl::StatusOr<uint32_t> n = node_->RelogRecords(seqs);
  if (!n.ok()) return ToGrpc(n.status());
  resp->set_relogged(*n);
  resp->set_obsolete(static_cast<uint32_t>(seqs.size()) - std::min<uint32_t>(*n, seqs.size()));
  return grpc::Status::OK;
}

}  // namespace ringcache::cachenode
