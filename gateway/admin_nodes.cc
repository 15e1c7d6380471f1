// The admin service's cache and data nodes (admin_service.h): the health watch, `node list`,
// `node remove` with its drain progress, and how a leaving cache node is settled.
#include "gateway/admin_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "datanode/client/log_replay.h"
#include "common/errors.h"
#include "common/grpc_status.h"
#include "gateway/drain_watch.h"


namespace ringcache::gateway {

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
    if (h.ok()) {
      absl::MutexLock l(&mu_);
      cache_usage_[id] = *h;
    }
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

namespace {

// The role as NodeInfo (and `node list`) names it.
const char* NodeInfoRole(membership::Role role) {
  switch (role) {
    case membership::Role::kCache:
      return "cachenode";
    case membership::Role::kData:
      return "datanode";
    case membership::Role::kGateway:
      return "gateway";
  }
  return "";
}

}  // namespace

std::vector<v1::NodeInfo> AdminService::Nodes() const {
  std::vector<v1::NodeInfo> out;
  std::function<datanode::DataRing()> ring_of;
  std::vector<uint32_t> data_down;
  std::function<absl::StatusOr<std::vector<membership::NodeRecord>>()> registered_now;
  {
    absl::MutexLock l(&mu_);
    registered_now = registered_;
  }
  // Out of the ring (drained, removed; kept across gateway restarts): "removed" whatever the
  // list held (a restarted gateway starts from the configured list).
  const std::vector<uint32_t> removed = router_->removed();
  // Asked outside mu_ (an etcd read); unknown (no hook, or etcd did not answer): shown up.
  std::optional<std::vector<uint32_t>> gateways_up;
  std::vector<membership::NodeRecord> registered;
  if (registered_now) {
    if (auto r = registered_now(); r.ok()) {
      registered = *std::move(r);
      gateways_up.emplace();
      for (const membership::NodeRecord& n : registered) {
        if (n.role == membership::Role::kGateway) gateways_up->push_back(n.id);
      }
    }
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
      if (n.role() == "cachenode" &&
          std::find(removed.begin(), removed.end(), n.id()) != removed.end()) {
        n.set_state("removed");
      } else if (n.role() == "cachenode" && watched_) {
        auto it = cache_health_.find(n.id());
        n.set_state(it != cache_health_.end() ? it->second : "up");
      } else if (n.role() == "datanode" &&
                 std::find(data_down.begin(), data_down.end(), n.id()) != data_down.end()) {
        n.set_state("down");
      }
    }
  }
  FillCacheUsage(&out);
  if (ring_of) AddDataRing(ring_of(), data_down, &out);
  for (auto& n : out) {
    for (const membership::NodeRecord& r : registered) {
      if (NodeInfoRole(r.role) == n.role() && r.id == n.id()) n.set_release(r.release);
    }
  }
  return out;
}

// The data nodes of the data ring into `out`: their addresses and ring state (joining, down,
// up, out), and those the configured list lacks.
void AdminService::AddDataRing(const datanode::DataRing& ring, const std::vector<uint32_t>& data_down,
                               std::vector<v1::NodeInfo>* nodes) {
  std::vector<v1::NodeInfo>& out = *nodes;
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
}

void AdminService::FillCacheUsage(std::vector<v1::NodeInfo>* nodes) const {
  absl::MutexLock l(&mu_);
  for (auto& n : *nodes) {
    auto it = n.role() == "cachenode" ? cache_usage_.find(n.id()) : cache_usage_.end();
    if (it == cache_usage_.end()) continue;
    const CacheClient::NodeHealth& u = it->second;
    n.set_usage_known(true);
    // The node's own word on its SSD tier: after `node resize`, its new size.
    if (u.ssd_bytes != 0) n.set_capacity_bytes(u.ssd_bytes);
    n.set_ssd_used_bytes(u.ssd_used_bytes);
    n.set_dirty_bytes(u.dirty_bytes);
    const uint64_t asked = u.hits + u.misses;
    n.set_hit_ratio(asked > 0 ? static_cast<double>(u.hits) / static_cast<double>(asked) : 0);
    *n.mutable_ssd_wear() = u.wear;
  }
}

grpc::Status AdminService::ListNodes(grpc::ServerContext*, const v1::ListNodesRequest*,
                                     v1::ListNodesResponse* resp) {
  for (const auto& n : Nodes()) *resp->add_nodes() = n;
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
  // What `ringcachectl node drain` prints while it waits (gateway/drain_watch.h).
  CacheClient* client = nullptr;
  for (const auto& [member, c] : router_->ServingOrJoining()) {
    if (member == id) client = c;
  }
  DrainWatch::Probe probe;
  DrainWatch::Stats stats;
  if (client != nullptr) {
    probe = [client](int timeout_ms) { return client->Probe(timeout_ms); };
    stats = [client](std::vector<v1::VdiCacheStats>* out) { return client->Stats(0, out); };
  }
  DrainWatch watch(probe, stats, [this, id](const std::string& progress, uint64_t start,
                                            uint64_t left) {
    SetDrainProgress(id, progress, start, left);
  });
  absl::Status s = router_->RemoveCacheNode(id, settle, nullptr);
  watch.Stop();
  SetNodeState("cachenode", id, s.ok() ? "removed" : "up");
  SetDrainProgress(id, "", 0, 0);
  return ToGrpc(s);
}

namespace {

// Ring weights need the weight lines of the published cache ring, which only etcd-value 2
// readers (feature level 3) know.
constexpr uint32_t kReweightFeatureLevel = 3;

// The ring weight a cache node's SSD tier of `now` bytes stands for: its registered weight is
// its configured size's, and the weight follows the size in proportion. Rounded to a thousandth
// (the ring gives a node 128 virtual nodes per unit of weight), at least 0.01 (one vnode).
double WeightFor(double registered, uint64_t configured, uint64_t now) {
  const double w = registered * static_cast<double>(now) / static_cast<double>(configured);
  return std::max(0.01, std::round(w * 1000) / 1000);
}

}  // namespace

grpc::Status AdminService::ResizeNode(grpc::ServerContext*, const v1::ResizeNodeRequest* req,
                                      v1::ResizeTiersResponse* resp) {
  // The tiers are node-local: any gateway that knows the node passes a resize on. The node's
  // share of the cache ring follows its SSD tier (a ring change): that takes the coordinator;
  // elsewhere the answer says so, and the same resize through the coordinator moves the weight
  // (the weight comes from the sizes alone).
  const uint32_t id = req->id();
  const bool follow = req->ssd_bytes() != 0 && !req->keep_weight();
  absl::StatusOr<v1::ResizeTiersResponse> r =
      router_->ResizeCacheNode(id, req->ssd_bytes(), req->ram_bytes());
  if (!r.ok()) return ToGrpc(r.status());
  *resp = *std::move(r);
  double registered = 1;
  absl::StatusOr<CacheRingState::Weight> w = router_->RingWeight(id, &registered);
  if (!w.ok()) return ToGrpc(w.status());
  resp->set_ring_weight(w->weight);
  if (!follow) return grpc::Status::OK;
  // The size the tier heads to: a pending shrink's target, else the size it serves with.
  const uint64_t now = resp->target_bytes() != 0 ? resp->target_bytes() : resp->ssd_bytes();
  if (resp->configured_ssd_bytes() == 0) {
    resp->set_ring_weight_note("the node's release does not say its configured SSD size");
    return grpc::Status::OK;
  }
  const double want = WeightFor(registered, resp->configured_ssd_bytes(), now);
  if (std::abs(want - w->weight) < 5e-4) return grpc::Status::OK;
  const std::vector<uint32_t> out = router_->removed();
  if (std::find(out.begin(), out.end(), id) != out.end()) {
    resp->set_ring_weight_note(absl::StrCat(
        "cache node ", id, " is out of the cache ring; once it is back, the same resize moves its "
        "weight to ", want));
    return grpc::Status::OK;
  }
  bool cluster_mode = false;
  absl::StatusOr<uint32_t> level = FeatureLevel(&cluster_mode);
  if (!level.ok()) {
    resp->set_ring_weight_note(absl::StrCat("a ring weight of ", want, " for the new size: ",
                                            "the cluster's feature level is unknown (",
                                            level.status().message(), ")"));
    return grpc::Status::OK;
  }
  if (*level < kReweightFeatureLevel) {
    resp->set_ring_weight_note(absl::StrCat(
        "a ring weight of ", want, " for the new size needs cluster feature level ",
        kReweightFeatureLevel, " (the cluster is at ", *level,
        "; `ringcachectl cluster finalize` raises it, then resize again)"));
    return grpc::Status::OK;
  }
  if (grpc::Status c = CheckCoordinator(); !c.ok()) {
    resp->set_ring_weight_note(
        absl::StrCat("a ring weight of ", want, " for the new size: ", c.error_message()));
    return grpc::Status::OK;
  }
  // Requests for the objects that move wait while it runs: a few attempts, not a join's minute.
  if (absl::Status s = router_->ReweightCacheNode(id, want, now, nullptr, 10); !s.ok()) {
    return ToGrpc(absl::Status(
        s.code(), absl::StrCat("cache node ", id, ": the SSD tier is resized, but its ring weight "
                               "is still ", w->weight, " (the change to ", want, " failed: ",
                               s.message(), "); the same resize again retries it")));
  }
  resp->set_ring_weight(want);
  return grpc::Status::OK;
}

grpc::Status AdminService::UndrainNode(grpc::ServerContext*, const v1::UndrainNodeRequest* req,
                                       v1::UndrainNodeResponse* resp) {
  if (grpc::Status c = CheckCoordinator(); !c.ok()) return c;
  const std::string role = req->role().empty() ? "cachenode" : req->role();
  if (role == "datanode") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "a data node taken out comes back with `ringcachectl datanode in`");
  }
  if (role != "cachenode") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "only cache nodes are drained");
  }
  const uint32_t id = req->id();
  const std::vector<uint32_t> known = router_->member_ids();
  const std::vector<uint32_t> removed = router_->removed();
  const bool is_known = std::find(known.begin(), known.end(), id) != known.end();
  const bool out = std::find(removed.begin(), removed.end(), id) != removed.end();
  std::function<absl::StatusOr<bool>(uint32_t)> undrain;
  {
    absl::MutexLock l(&mu_);
    undrain = undrain_;
    for (const auto& n : nodes_) {
      if (n.role() == "cachenode" && n.id() == id && n.state() == "draining") {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            absl::StrCat("cache node ", id, " is being drained: undrain it once "
                                         "`node drain` finished"));
      }
    }
  }
  if (is_known && !out) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("cache node ", id, " is in the ring: nothing to undrain"));
  }
  if (undrain) {  // cluster mode: the coordinator's membership joins it once registered
    absl::StatusOr<bool> registered = undrain(id);
    if (!registered.ok()) return ToGrpc(registered.status());
    if (!*registered) {
      resp->set_state("removed");
      resp->set_message(absl::StrCat("cache node ", id, ": drained mark cleared; it is not "
                                      "registered now and joins the ring once it starts"));
      return grpc::Status::OK;
    }
    return AwaitJoined(id, resp);
  }
  if (!is_known) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no cache node ", id, " in the cluster file"));
  }
  SetNodeState("cachenode", id, "joining");
  absl::Status s = router_->AddCacheNode(id, nullptr);
  SetNodeState("cachenode", id, s.ok() ? "up" : "removed");
  if (!s.ok()) return ToGrpc(s);
  resp->set_state("up");
  resp->set_message(absl::StrCat("cache node ", id, ": back in the ring"));
  return grpc::Status::OK;
}

grpc::Status AdminService::AwaitJoined(uint32_t id, v1::UndrainNodeResponse* resp) {
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  for (;;) {
    const auto members = router_->RingMembers();
    const std::vector<uint32_t> removed = router_->removed();
    const bool in_ring =
        std::any_of(members.begin(), members.end(), [id](const auto& m) { return m.first == id; });
    if (in_ring && std::find(removed.begin(), removed.end(), id) == removed.end()) break;
    if (absl::Now() > deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          absl::StrCat("cache node ", id, ": drained mark cleared, but it has not "
                                       "joined the ring within 2 minutes (see the gateway's log)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  SetNodeState("cachenode", id, "up");  // the membership says so too, a moment later
  resp->set_state("up");
  resp->set_message(absl::StrCat("cache node ", id, ": drained mark cleared; back in the ring"));
  return grpc::Status::OK;
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


}  // namespace ringcache::gateway
