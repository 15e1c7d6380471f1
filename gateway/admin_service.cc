#include "gateway/admin_service.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include <spdlog/spdlog.h>

#include "datanode/client/log_replay.h"
#include "common/errors.h"
#include "common/grpc_status.h"

namespace ringcache::gateway {

grpc::Status AdminService::CreateVdi(grpc::ServerContext*, const v1::CreateVdiRequest* req,
                                     v1::CreateVdiResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  auto r = router_->CreateVdi(req->name(), req->size_bytes(), req->object_size(),
                              req->replication());
  if (!r.ok()) return ToGrpc(r.status());
  *resp->mutable_vdi() = r->geometry;
  return grpc::Status::OK;
}

grpc::Status AdminService::ListVdis(grpc::ServerContext*, const v1::ListVdisRequest*,
                                    v1::ListVdisResponse* resp) {
  for (const auto& r : router_->catalog()->List()) {
    *resp->add_vdis() = r.geometry;
    v1::VdiAccess* a = resp->add_access();
    a->set_name(r.geometry.name());
    a->set_read_only(r.read_only);
    for (const std::string& c : r.allowed_clients) a->add_allowed_clients(c);
    a->set_policy(r.policy);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::SetVdiAccess(grpc::ServerContext*,
                                        const v1::SetVdiAccessRequest* req,
                                        v1::SetVdiAccessResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  std::optional<bool> read_only;
  if (req->has_read_only()) read_only = req->read_only();
  std::optional<std::vector<std::string>> allowed;
  if (req->set_allowed_clients()) {
    allowed.emplace(req->allowed_clients().begin(), req->allowed_clients().end());
  }
  // New connections see the change; open ones keep what they negotiated.
  absl::StatusOr<VdiRecord> r =
      router_->catalog()->SetAccess(req->name(), read_only, std::move(allowed));
  if (!r.ok()) return ToGrpc(r.status());
  resp->mutable_access()->set_name(r->geometry.name());
  resp->mutable_access()->set_read_only(r->read_only);
  for (const std::string& c : r->allowed_clients) resp->mutable_access()->add_allowed_clients(c);
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

grpc::Status AdminService::SetVdiPolicy(grpc::ServerContext*,
                                        const v1::SetVdiPolicyRequest* req,
                                        v1::SetVdiPolicyResponse*) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  return ToGrpc(router_->SetPolicy(req->name(), req->policy()));
}

AdminService::~AdminService() { StopHealthWatch(); }

void AdminService::StopHealthWatch() {
  {
    absl::MutexLock l(&mu_);
    stop_watch_ = true;
  }
  if (watch_.joinable()) watch_.join();
}

void AdminService::StartHealthWatch(absl::Duration every) {
  watch_ = std::thread([this, every] {
    for (;;) {
      {
        absl::MutexLock l(&mu_);
        auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_watch_; };
        if (mu_.AwaitWithTimeout(absl::Condition(&stop), every)) return;
      }
      WatchOnce();
    }
  });
}

void AdminService::WatchOnce() {
  const std::vector<uint32_t> removed = router_->removed();
  absl::flat_hash_map<uint32_t, std::string> now;
  for (uint32_t id : router_->member_ids()) {
    if (std::find(removed.begin(), removed.end(), id) != removed.end()) continue;
    auto h = router_->NodeHealth(id, 1000);
    std::string state = "up", why;
    if (!h.ok()) {
      state = "down";
      why = h.status().ToString();
    } else if (h->device_failed) {
      state = "failed";
      why = h->device_error;
    } else if (h->quarantined) {
      state = "quarantined";
      why = "lost ownership; waits to be re-admitted";
    }
    absl::MutexLock l(&mu_);
    auto it = cache_health_.find(id);
    const std::string before = it == cache_health_.end() ? "up" : it->second;
    if (state != before) {
      if (state == "up") {
        spdlog::info("cache node {}: answers again ({} before)", id, before);
      } else {
        spdlog::warn("cache node {}: {} ({})", id, state, why);
      }
    }
    if (state != "up") now[id] = state;
  }
  std::vector<uint32_t> data_down;
  if (datanode::DataNodePool* pool = router_->data_nodes(); pool != nullptr) {
    pool->ProbeAll(1000);
    data_down = pool->DownFor(1500);
  }
  absl::MutexLock l(&mu_);
  for (uint32_t id : data_down) {
    if (std::find(data_down_.begin(), data_down_.end(), id) == data_down_.end()) {
      spdlog::warn("data node {}: down (does not answer)", id);
    }
  }
  for (uint32_t id : data_down_) {
    if (std::find(data_down.begin(), data_down.end(), id) == data_down.end()) {
      spdlog::info("data node {}: answers again", id);
    }
  }
  cache_health_ = std::move(now);
  data_down_ = std::move(data_down);
  watched_ = true;
}

std::vector<uint32_t> AdminService::DownCacheNodes() const {
  absl::MutexLock l(&mu_);
  std::vector<uint32_t> out;
  for (const auto& [id, state] : cache_health_) {
    if (state == "down") out.push_back(id);
  }
  return out;
}

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
  // The data rebalance's state, read at scrape time from the rebalancer (0 before one is set).
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
       [](const v1::DataRebalance& r) {
         return r.state() == "idle" ? 0.0 : r.limit_mb_s() * 1e6;
       }},
      {"ringcache_gateway_datanodes_out",
       "Data nodes out of the data ring (down past the down-out interval, taken out, or "
       "decommissioned).",
       [](const v1::DataRebalance& r) { return double(r.out_size()); }},
  };
  // The scrub's repairs, from the coordinator's last poll (0 elsewhere).
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
      {"ringcache_gateway_damaged_vdis",
       "VDIs holding a block no good copy is left of.",
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

std::vector<v1::NodeInfo> AdminService::Nodes() const {
  std::vector<v1::NodeInfo> out;
  std::function<datanode::DataRing()> ring_of;
  std::vector<uint32_t> data_down;
  std::function<absl::StatusOr<std::vector<uint32_t>>()> gateways_registered;
  {
    absl::MutexLock l(&mu_);
    gateways_registered = gateways_registered_;
  }
  // Asked outside mu_ (an etcd read); unknown (no hook, or etcd did not answer): shown up.
  std::optional<std::vector<uint32_t>> gateways_up;
  if (gateways_registered) {
    if (auto ids = gateways_registered(); ids.ok()) gateways_up = *std::move(ids);
  }
  {
    absl::MutexLock l(&mu_);
    out = nodes_;
    ring_of = data_ring_;
    data_down = data_down_;
    // What the health watch saw replaces "configured" (static) and "up"; removed, joining and
    // draining say more and stay.
    for (auto& n : out) {
      if (n.state() != "up" && n.state() != "configured" && !n.state().empty()) continue;
      // A gateway is up while it is registered in etcd (cluster mode), else as configured.
      if (n.role() == "gateway") {
        const bool up = !gateways_up.has_value() ||
                        std::find(gateways_up->begin(), gateways_up->end(), n.id()) !=
                            gateways_up->end();
        n.set_state(up ? "up" : "down");
        continue;
      }
      if (n.role() == "cachenode" && watched_) {
        auto it = cache_health_.find(n.id());
        n.set_state(it != cache_health_.end() ? it->second : "up");
      } else if (n.role() == "datanode" &&
                 std::find(data_down.begin(), data_down.end(), n.id()) != data_down.end()) {
        n.set_state("down");
      }
    }
  }
  if (!ring_of) return out;
  const datanode::DataRing ring = ring_of();
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
    const bool down = std::find(data_down.begin(), data_down.end(), e.id) != data_down.end();
    info->set_state(!member ? "joining" : down ? "down" : "up");
  }
  // Out of the data ring (down too long, `datanode out`, decommissioned): until put back in.
  for (auto& n : out) {
    if (n.role() == "datanode" && ring.IsOut(n.id())) n.set_state("out");
  }
  return out;
}

grpc::Status AdminService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                     v1::ListNodesResponse* resp) {
  for (const auto& n : Nodes()) *resp->add_nodes() = n;
  return grpc::Status::OK;
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

grpc::Status AdminService::RemoveNode(grpc::ServerContext*, const v1::RemoveNodeRequest* req,
                                      v1::RemoveNodeResponse*) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  const std::string role = req->role().empty() ? "cachenode" : req->role();
  if (role == "datanode") {
    // Removing a data node is decommissioning it: its replicas move off first.
    v1::DataNodeActionRequest dn;
    dn.set_id(req->id());
    dn.set_action("decommission");
    v1::DataNodeActionResponse ignored;
    return DataNodeAction(nullptr, &dn, &ignored);
  }
  if (role != "cachenode") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "only cache and data nodes can be removed");
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
  SetNodeState("cachenode", id, "draining");
  DrainWatch watch(this, id);
  absl::Status s = router_->RemoveCacheNode(id, settle, nullptr);
  watch.Stop();
  SetNodeState("cachenode", id, s.ok() ? "removed" : "up");
  SetDrainProgress(id, "", 0, 0);
  return ToGrpc(s);
}

// Samples the dirty bytes of a cache node being drained, once a second, into its NodeInfo (what
// `ringcachectl node drain` prints while it waits). A node that does not answer is being replayed
// from its write-back log instead.
AdminService::DrainWatch::DrainWatch(AdminService* admin, uint32_t id) : admin_(admin), id_(id) {
  thread_ = std::thread([this] { Run(); });
}

AdminService::DrainWatch::~DrainWatch() { Stop(); }

void AdminService::DrainWatch::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void AdminService::DrainWatch::Run() {
  CacheClient* client = nullptr;
  for (const auto& [member, c] : admin_->router_->ServingOrJoining()) {
    if (member == id_) client = c;
  }
  uint64_t start = 0;
  bool first = true;
  absl::MutexLock l(&mu_);
  while (!stop_) {
    mu_.Unlock();
    std::vector<v1::VdiCacheStats> stats;
    absl::Status st = client != nullptr ? client->Stats(0, &stats)
                                        : absl::NotFoundError("not a member");
    if (st.ok()) {
      uint64_t dirty = 0;
      for (const auto& v : stats) dirty += v.dirty_bytes();
      if (first) start = dirty;
      first = false;
      start = std::max(start, dirty);
      admin_->SetDrainProgress(id_, "destaging its dirty data", start, dirty);
    } else {
      admin_->SetDrainProgress(id_, "not answering: replaying its write-back log from the data "
                                    "nodes", start, 0);
    }
    mu_.Lock();
    auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopped), absl::Seconds(1));
  }
}

void AdminService::SetDrainProgress(uint32_t id, const std::string& progress, uint64_t start,
                                    uint64_t left) {
  absl::MutexLock l(&mu_);
  for (auto& n : nodes_) {
    if (n.role() == "cachenode" && n.id() == id) {
      n.set_progress(progress);
      n.set_drain_dirty_bytes_start(start);
      n.set_drain_dirty_bytes_left(left);
    }
  }
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
  datanode::DataNodePool* pool = router->data_nodes();
  Catalog* catalog = router->catalog();
  // A live node destages everything (its log records are reclaimed as blocks reach home); a dead
  // one's dirty blocks are replayed from its log copies on the data nodes (docs/design.md §7).
  return [pool, catalog, id, register_first](CacheClient* c, bool alive) -> absl::Status {
    if (alive) {
      if (register_first) {
        for (const auto& r : catalog->List()) {
          if (absl::Status s = c->RegisterVdi(r.geometry, r.mode, r.policy); !s.ok()) return s;
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
    // Sealed at the epoch the router published for this removal (it set it on the client
    // before settling): writes the node accepted before that, still on their way to the log,
    // are refused rather than missed.
    return datanode::ReplayCacheNodeLog(
               pool, id,
               [&](uint32_t vdi) {
                 auto it = replication.find(vdi);
                 return it == replication.end() ? 0u : it->second;
               },
               c->ring_epoch())
        .status();
  };
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
