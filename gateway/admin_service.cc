// The admin service (admin_service.h): VDI administration, metrics, cluster status, data node
// actions, scrub, statistics and flushes; its nodes are in admin_nodes.cc.
#include "gateway/admin_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "common/errors.h"
#include "common/grpc_status.h"
#include "datanode/client/log_replay.h"

namespace ringcache::gateway {

grpc::Status AdminService::CreateVdi(grpc::ServerContext*, const v1::CreateVdiRequest* req,
                                     v1::CreateVdiResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  auto r =
      router_->CreateVdi(req->name(), req->size_bytes(), req->object_size(), req->replication());
  if (!r.ok()) return ToGrpc(r.status());
  *resp->mutable_vdi() = r->geometry;
  return grpc::Status::OK;
}

namespace {

void FillAccess(const VdiRecord& r, v1::VdiAccess* a) {
  a->set_name(r.geometry.name());
  a->set_read_only(r.read_only);
  for (const std::string& c : r.allowed_clients) a->add_allowed_clients(c);
  for (const std::string& c : r.read_only_clients) a->add_read_only_clients(c);
  a->set_public_export(r.public_export);
  *a->mutable_qos() = r.qos;
}

}  // namespace

grpc::Status AdminService::ListVdis(grpc::ServerContext*, const v1::ListVdisRequest*,
                                    v1::ListVdisResponse* resp) {
  for (const auto& r : router_->catalog()->List()) {
    *resp->add_vdis() = r.geometry;
    v1::VdiAccess* a = resp->add_access();
    FillAccess(r, a);
    a->set_policy(r.policy);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::SetVdiAccess(grpc::ServerContext*, const v1::SetVdiAccessRequest* req,
                                        v1::SetVdiAccessResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  coordinator::AccessChange change;
  if (req->has_read_only()) change.read_only = req->read_only();
  if (req->has_public_export()) change.public_export = req->public_export();
  if (req->set_allowed_clients()) {
    change.allowed_clients.emplace(req->allowed_clients().begin(), req->allowed_clients().end());
  }
  change.allow = req->allow_client();
  change.allow_read_only = req->allow_read_only();
  change.deny = req->deny_client();
  // New connections see the change; open ones keep what they negotiated.
  absl::StatusOr<VdiRecord> r = router_->catalog()->SetAccess(req->name(), std::move(change));
  if (!r.ok()) return ToGrpc(r.status());
  FillAccess(*r, resp->mutable_access());
  return grpc::Status::OK;
}

grpc::Status AdminService::DeleteVdi(grpc::ServerContext*, const v1::RemoveVdiRequest* req,
                                     v1::RemoveVdiResponse*) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  absl::Status s = router_->DeleteVdi(req->name());
  std::function<void(const std::string&)> hook;
  {
    absl::MutexLock l(&mu_);
    hook = vdi_deleted_;
  }
  if (s.ok() && hook) hook(req->name());
  return ToGrpc(s);
}

grpc::Status AdminService::ResizeVdi(grpc::ServerContext*, const v1::ResizeVdiRequest* req,
                                     v1::ResizeVdiResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  auto r = router_->ResizeVdi(req->name(), req->size_bytes());
  if (!r.ok()) return ToGrpc(r.status());
  *resp->mutable_vdi() = r->geometry;
  return grpc::Status::OK;
}

grpc::Status AdminService::SetVdiMode(grpc::ServerContext*, const v1::SetVdiModeRequest* req,
                                      v1::SetVdiModeResponse*) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  if (req->mode() == v1::CACHE_MODE_UNSPECIFIED) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "mode must be given");
  }
  return ToGrpc(router_->SetMode(req->name(), req->mode()));
}

grpc::Status AdminService::SetVdiPolicy(grpc::ServerContext*, const v1::SetVdiPolicyRequest* req,
                                        v1::SetVdiPolicyResponse*) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  return ToGrpc(router_->SetPolicy(req->name(), req->policy()));
}

grpc::Status AdminService::InvalidateVdi(grpc::ServerContext*,
                                         const v1::InvalidateCacheRequest* req,
                                         v1::InvalidateCacheResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  absl::StatusOr<Router::Invalidated> r = router_->InvalidateVdi(req->vdi_name(), req->flush());
  if (!r.ok()) return ToGrpc(r.status());
  spdlog::info("VDI {}: cache invalidated{}: {} clean blocks dropped on {} cache nodes, {} dirty "
               "kept", req->vdi_name(), req->flush() ? " after a destage" : "", r->dropped,
               r->nodes, r->dirty_kept);
  resp->set_dropped_blocks(r->dropped);
  resp->set_dirty_blocks_kept(r->dirty_kept);
  resp->set_cache_nodes(r->nodes);
  return grpc::Status::OK;
}

AdminService::~AdminService() { StopHealthWatch(); }

void AdminService::ExportMetrics(metrics::Registry* registry) {
  registry->AddGaugeCollector(
      "ringcache_gateway_members",
      "Members of the cluster as the gateway sees them: 1 per node, labelled with its role and "
      "state (up, down, fenced, joining, removing, removed, ...).",
      [this] {
        metrics::Registry::Samples out;
        for (const v1::NodeInfo& n : Nodes()) {
          if (n.role() == "gateway") continue;
          out.push_back({{{"role", n.role()},
                          {"node", absl::StrCat(n.id())},
                          {"state", n.state().empty() ? "configured" : n.state()}},
                         1.0});
        }
        return out;
      });
  ExportRebalanceMetrics(registry);
  ExportScrubMetrics(registry);
}

// The data rebalance's state, read at scrape time from the rebalancer (0 before one is set).
void AdminService::ExportRebalanceMetrics(metrics::Registry* registry) {
  using Field = double (*)(const v1::DataRebalance&);
  const struct {
    const char* name;
    const char* help;
    Field field;
  } gauges[] = {
      {"ringcache_gateway_rebalance_active",
       "1 while home replicas move to a changed data ring (rebalance not idle).",
       [](const v1::DataRebalance& r) { return r.state() == "idle" ? 0.0 : 1.0; }},
      {"ringcache_gateway_rebalance_blocks_scanned",
       "Blocks the current (or last) data rebalance has scanned.",
       [](const v1::DataRebalance& r) { return double(r.blocks_scanned()); }},
      {"ringcache_gateway_rebalance_blocks_estimated",
       "Blocks the current (or last) data rebalance expects to scan (RocksDB estimate).",
       [](const v1::DataRebalance& r) { return double(r.blocks_estimated()); }},
      {"ringcache_gateway_rebalance_blocks_copied",
       "Blocks the current (or last) data rebalance has copied to their new data nodes.",
       [](const v1::DataRebalance& r) { return double(r.blocks_copied()); }},
      {"ringcache_gateway_rebalance_blocks_deleted",
       "Blocks the current (or last) data rebalance has deleted from their old data nodes.",
       [](const v1::DataRebalance& r) { return double(r.blocks_deleted()); }},
      {"ringcache_gateway_data_epoch", "Epoch of the data ring (bumps with every change).",
       [](const v1::DataRebalance& r) { return double(r.data_epoch()); }},
      {"ringcache_gateway_rebalance_eta_seconds",
       "Time the current copy still needs at its speed so far (0: idle or unknown).",
       [](const v1::DataRebalance& r) { return r.eta_seconds(); }},
      {"ringcache_gateway_rebalance_limit_bytes_per_second",
       "Speed limit of the data rebalance's copies in force (lower while the data nodes serve "
       "clients; 0: none or idle).",
       [](const v1::DataRebalance& r) { return r.state() == "idle" ? 0.0 : r.limit_mb_s() * 1e6; }},
      {"ringcache_gateway_datanodes_out",
       "Data nodes out of the data ring (down past the down-out interval, taken out, or "
       "decommissioned).",
       [](const v1::DataRebalance& r) { return double(r.out_size()); }},
  };
  for (const auto& g : gauges) {
    registry->AddCallbackGauge(g.name, g.help, {}, [this, field = g.field] {
      std::function<v1::DataRebalance()> status;
      {
        absl::MutexLock l(&mu_);
        status = rebalance_status_;
      }
      return status ? field(status()) : 0.0;
    });
  }
}

// The scrub's repairs, from the coordinator's last poll (0 elsewhere).
void AdminService::ExportScrubMetrics(metrics::Registry* registry) {
  using ScrubField = double (*)(const v1::ClusterScrubStatus&);
  const struct {
    const char* name;
    const char* help;
    ScrubField field;
  } scrub_gauges[] = {
      {"ringcache_gateway_scrub_blocks_repaired",
       "Damaged block copies the coordinator rewrote from a good replica since it started.",
       [](const v1::ClusterScrubStatus& s) { return double(s.blocks_repaired()); }},
      {"ringcache_gateway_scrub_log_records_relogged",
       "Damaged log record copies whose blocks were logged again (or found obsolete).",
       [](const v1::ClusterScrubStatus& s) { return double(s.log_records_relogged()); }},
      {"ringcache_gateway_scrub_unrepairable_blocks",
       "Damaged blocks no good copy is left of (they read as I/O errors).",
       [](const v1::ClusterScrubStatus& s) { return double(s.unrepairable_blocks()); }},
      {"ringcache_gateway_damaged_vdis", "VDIs holding a block no good copy is left of.",
       [](const v1::ClusterScrubStatus& s) { return double(s.damaged_vdis_size()); }},
  };
  for (const auto& g : scrub_gauges) {
    registry->AddCallbackGauge(g.name, g.help, {}, [this, field = g.field] {
      std::function<v1::ClusterScrubStatus()> last;
      {
        absl::MutexLock l(&mu_);
        last = scrub_last_;
      }
      return last ? field(last()) : 0.0;
    });
  }
}

grpc::Status AdminService::DataNodeAction(grpc::ServerContext*,
                                          const v1::DataNodeActionRequest* req,
                                          v1::DataNodeActionResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  std::function<absl::StatusOr<std::string>(uint32_t, const std::string&)> act;
  {
    absl::MutexLock l(&mu_);
    act = data_node_action_;
  }
  if (!act) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "data nodes cannot be taken out, put in or decommissioned here: this "
                        "server has no data rebalancer (single-process mode has a fixed data "
                        "ring; run a cluster, deploy/cluster.sh)");
  }
  absl::StatusOr<std::string> msg = act(req->id(), req->action());
  if (!msg.ok()) return ToGrpc(msg.status());
  resp->set_message(*msg);
  return grpc::Status::OK;
}

void AdminService::SetScrub(std::function<absl::StatusOr<v1::ClusterScrubStatus>(bool)> poll,
                            std::function<v1::ClusterScrubStatus()> last) {
  absl::MutexLock l(&mu_);
  scrub_poll_ = std::move(poll);
  scrub_last_ = std::move(last);
}

grpc::Status AdminService::Scrub(grpc::ServerContext*, const v1::ClusterScrubRequest* req,
                                 v1::ClusterScrubStatus* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  std::function<absl::StatusOr<v1::ClusterScrubStatus>(bool)> poll;
  {
    absl::MutexLock l(&mu_);
    poll = scrub_poll_;
  }
  if (!poll) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "no scrub here: this server has no data rebalancer (single-process "
                        "mode; run a cluster, deploy/cluster.sh)");
  }
  absl::StatusOr<v1::ClusterScrubStatus> st = poll(req->start());
  if (!st.ok()) return ToGrpc(st.status());
  *resp = *std::move(st);
  return grpc::Status::OK;
}

grpc::Status AdminService::CheckCoordinator() const {
  std::function<bool()> leading;
  std::function<std::string()> leader;
  {
    absl::MutexLock l(&mu_);
    leading = leading_;
    leader = leader_;
  }
  if (!leading || leading()) return grpc::Status::OK;
  const std::string who = leader ? leader() : "";
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      absl::StrCat("this gateway is not the coordinator; ",
                                   who.empty() ? "none is elected right now (try again shortly)"
                                               : absl::StrCat("the coordinator is ", who),
                                   ": send changes there (ringcachectl --etcd finds it)"));
}

grpc::Status AdminService::ClusterStatus(grpc::ServerContext*, const v1::ClusterStatusRequest*,
                                         v1::ClusterStatusResponse* resp) {
  // The ring epoch requests carry (router.h): grows with every ring change and, in cluster
  // mode, to the etcd revision the ring follows.
  resp->set_epoch(router_->ring_epoch());
  for (const auto& n : Nodes()) *resp->add_nodes() = n;
  for (const auto& [id, weight] : router_->RingMembers()) {
    v1::RingMember* m = resp->add_cache_ring();
    m->set_id(id);
    m->set_weight(weight);
  }
  std::function<bool()> leading;
  std::function<std::string()> leader;
  {
    absl::MutexLock l(&mu_);
    leading = leading_;
    leader = leader_;
  }
  if (leader) resp->set_coordinator(leader());
  resp->set_answered_by_coordinator(!leading || leading());
  std::function<v1::DataRebalance()> rebalance;
  {
    absl::MutexLock l(&mu_);
    rebalance = rebalance_status_;
  }
  if (rebalance) *resp->mutable_rebalance() = rebalance();
  resp->set_vdis(router_->List().size());
  std::vector<v1::VdiCacheStats> stats;
  absl::Status s = router_->Stats("", &stats, DownCacheNodes());
  uint64_t dirty = 0;
  for (const auto& x : stats) dirty += x.dirty_bytes();
  resp->set_dirty_bytes(dirty);
  return ToGrpc(s);
}

grpc::Status AdminService::VdiStats(grpc::ServerContext*, const v1::VdiStatsRequest* req,
                                    v1::VdiStatsResponse* resp) {
  std::vector<v1::VdiCacheStats> stats;
  absl::Status s = router_->Stats(req->vdi_name(), &stats, DownCacheNodes());
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
