// The admin service's cluster feature level (docs/upgrades.md): `cluster version` and
// `cluster finalize`, and the VDI I/O limits (docs/qos.md), the first format it gates.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/formats.h"
#include "common/grpc_status.h"
#include "gateway/admin_service.h"

namespace ringcache::gateway {

namespace {

// The feature level VDI limits need: releases before it cannot read a catalog record with them.
constexpr uint32_t kQosFeatureLevel = 2;
// No limit beyond this many operations or bytes per second (a typo's guard, not a policy).
constexpr uint64_t kMaxLimit = uint64_t{1} << 50;

}  // namespace

absl::StatusOr<uint32_t> AdminService::FeatureLevel(bool* cluster_mode) const {
  std::function<absl::StatusOr<uint32_t>()> get;
  {
    absl::MutexLock l(&mu_);
    get = feature_level_;
  }
  *cluster_mode = static_cast<bool>(get);
  return get ? get() : absl::StatusOr<uint32_t>(kFeatureLevel);
}

grpc::Status AdminService::GetClusterVersion(grpc::ServerContext*, const v1::ClusterVersionRequest*,
                                             v1::ClusterVersionResponse* resp) {
  bool cluster_mode = false;
  absl::StatusOr<uint32_t> level = FeatureLevel(&cluster_mode);
  if (!level.ok()) return ToGrpc(level.status());
  resp->set_feature_level(*level);
  resp->set_max_feature_level(kFeatureLevel);
  resp->set_cluster_mode(cluster_mode);
  return grpc::Status::OK;
}

grpc::Status AdminService::FinalizeCluster(grpc::ServerContext*, const v1::FinalizeClusterRequest*,
                                           v1::FinalizeClusterResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  std::function<absl::StatusOr<std::pair<uint32_t, std::string>>()> finalize;
  {
    absl::MutexLock l(&mu_);
    finalize = finalize_;
  }
  if (!finalize) {
    resp->set_feature_level(kFeatureLevel);
    resp->set_message(absl::StrCat("static mode: no cluster-wide level to raise; this gateway "
                                   "runs at feature level ",
                                   kFeatureLevel, ", the highest of its release"));
    return grpc::Status::OK;
  }
  absl::StatusOr<std::pair<uint32_t, std::string>> r = finalize();
  if (!r.ok()) return ToGrpc(r.status());
  spdlog::info("cluster finalize: {}", r->second);
  resp->set_feature_level(r->first);
  resp->set_message(r->second);
  return grpc::Status::OK;
}

grpc::Status AdminService::SetVdiQos(grpc::ServerContext*, const v1::SetVdiQosRequest* req,
                                     v1::SetVdiQosResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  const v1::VdiQos& q = req->qos();
  for (uint64_t v : {q.read_iops(), q.write_iops(), q.iops(), q.read_bytes_per_s(),
                     q.write_bytes_per_s(), q.bytes_per_s(), q.reserve_iops(),
                     q.reserve_bytes_per_s()}) {
    if (v > kMaxLimit) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("limit ", v, " is beyond any disk (at most ", kMaxLimit,
                                       ")"));
    }
  }
  // A reservation is a floor under the limits: above one of them it could never be given.
  const auto cap = [](uint64_t both, uint64_t read, uint64_t write) {
    return std::min(both ? both : UINT64_MAX, read && write ? read + write : UINT64_MAX);
  };
  const uint64_t ops_cap = cap(q.iops(), q.read_iops(), q.write_iops());
  const uint64_t bytes_cap = cap(q.bytes_per_s(), q.read_bytes_per_s(), q.write_bytes_per_s());
  if (q.reserve_iops() > ops_cap) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("reservation of ", q.reserve_iops(),
                                     " IOPS is above the VDI's own IOPS limit (", ops_cap, ")"));
  }
  if (q.reserve_bytes_per_s() > bytes_cap) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("reservation of ", q.reserve_bytes_per_s(),
                                     " bytes/s is above the VDI's own bytes/s limit (", bytes_cap,
                                     ")"));
  }
  if (q.burst_ms() > 60000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "burst: at most 60000 ms of the rate");
  }
  if (q.ssd_max_permille() > 1000 ||
      (q.ssd_max_permille() != 0 && q.ssd_min_permille() > q.ssd_max_permille()) ||
      q.ssd_min_permille() > 1000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "cache share: need 0 <= minimum <= maximum <= 100%");
  }
  // A record with limits is a catalog format (vdi-catalog 2) that releases before 0.2.0 cannot
  // read: written only once the cluster's feature level says every node reads it.
  bool cluster_mode = false;
  absl::StatusOr<uint32_t> level = FeatureLevel(&cluster_mode);
  if (!level.ok()) return ToGrpc(level.status());
  if (*level < kQosFeatureLevel) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("VDI I/O limits need cluster feature level ", kQosFeatureLevel,
                     " (releases before 0.2.0 cannot read them); the cluster is at level ",
                     *level,
                     ". Once every node runs 0.2.0 or later (`ringcachectl cluster version`), "
                     "`ringcachectl cluster finalize` raises it"));
  }
  // A new share of the cache nodes' SSDs: every live cache node takes it first.
  absl::StatusOr<VdiRecord> old = router_->catalog()->Find(req->name());
  if (!old.ok()) return ToGrpc(old.status());
  if (old->qos.ssd_min_permille() != q.ssd_min_permille() ||
      old->qos.ssd_max_permille() != q.ssd_max_permille()) {
    if (absl::Status s = router_->SetShares(req->name(), q.ssd_min_permille(),
                                            q.ssd_max_permille());
        !s.ok()) {
      return ToGrpc(s);
    }
  }
  absl::StatusOr<VdiRecord> r = router_->catalog()->SetQos(req->name(), q);
  if (!r.ok()) return ToGrpc(r.status());
  const std::string qos = coordinator::EncodeQos(r->qos);
  spdlog::info("VDI {}: I/O limits and cache share {}", req->name(), qos.empty() ? "none" : qos);
  *resp->mutable_qos() = r->qos;
  return grpc::Status::OK;
}

}  // namespace ringcache::gateway
