// ringcache-gateway: the NBD front end. Routes each object's I/O to its cache node on the cache
// ring (gateway::Router), serves the Admin API for ringcachectl and HTTP /metrics, and does the
// coordinator's work (coordinator::Coordinator): for life in static mode, while elected in
// cluster mode. Peers come from the static cluster file; in cluster mode also from etcd.
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/cluster_file.h"
#include "common/config.h"
#include "common/daemon.h"
#include "common/grpc_tls.h"
#include "common/malloc_tuning.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "coordinator/coordinator.h"
#include "coordinator/etcd_state.h"
#include "datanode/client/datanode_pool.h"
#include "gateway/cluster_follower.h"
#include "gateway/frontends.h"
#include "gateway/qos_sessions.h"
#include "membership/daemon_flags.h"
#include "membership/feature_level.h"
#include "membership/presence.h"

namespace ringcache {
namespace {

// The flags as given (optional ones unset when absent).
struct Flags {
  membership::DaemonFlags daemon;
  uint32_t id = 1;
  std::optional<std::string> nbd_listen, admin_listen, http_listen, ready_file;
  std::vector<std::string> create;
  bool coordinator = true;
  double down_out_s = 600;
  double refill_mb_s = 64;
  double busy_mb_s = 16;
  gateway::NbdFlags nbd_tls;
};

void AddFlags(CLI::App* app, Flags* f) {
  f->daemon.AddTo(app, /*cluster_required=*/true, "Static cluster file (YAML)",
                  "follow the cache nodes registered in etcd and register this gateway");
  app->add_option("--id", f->id, "This gateway's id in the cluster file (default 1)");
  app->add_option("--nbd-listen", f->nbd_listen, "NBD address (overrides the cluster file)");
  app->add_option("--admin-listen", f->admin_listen, "Admin gRPC address");
  app->add_option("--http-listen", f->http_listen, "HTTP /metrics address");
  app->add_option("--create-vdi", f->create,
                  "Create VDI NAME:SIZE at start if missing (repeatable; cluster mode: by the "
                  "coordinator)");
  app->add_option("--coordinator", f->coordinator,
                  "Cluster mode: stand for election as the coordinator, which makes the "
                  "membership decisions, replays, handoffs, rebalancing and catalog writes "
                  "(default true; false: a pure NBD front end)");
  app->add_option("--ready-file", f->ready_file, "Write the bound ports as JSON here once serving");
  app->add_option("--datanode-down-out", f->down_out_s,
                  "Seconds a data node may stay unreachable before it is taken out of the data "
                  "ring and its replicas are made again on the others (0: only `ringcachectl "
                  "datanode out`)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--rebalance-mb-s", f->refill_mb_s,
                  "Speed limit of replica copies between data nodes (a join, an out node's "
                  "replicas made again, a refill of a new disk), MB/s of block data (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--rebalance-busy-mb-s", f->busy_mb_s,
                  "Speed limit of those copies while the data nodes serve clients (0: "
                  "--rebalance-mb-s throughout); a copy's bursts cost the clients' latency")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  f->nbd_tls.AddTo(app);
}

// What the flags and the cluster file say this gateway is.
struct Settings {
  Flags flags;
  ClusterFile cluster;
  gateway::FrontendConfig fc;
  std::string dir;  // <data_dir>/gateway-<id>
  membership::EtcdSettings etcd;
  std::vector<datanode::DataNodeEndpoint> data_nodes;  // the cluster file's
  std::vector<v1::NodeInfo> nodes;                     // every node of the cluster file
};

absl::StatusOr<Settings> Resolve(const Flags& f) {
  Settings s;
  s.flags = f;
  RC_ASSIGN_OR_RETURN(s.cluster, ClusterFile::Load(f.daemon.cluster_path));
  RC_ASSIGN_OR_RETURN(ClusterNode self, s.cluster.Find("gateway", f.id));
  s.fc = {self.nbd_listen, self.admin_listen, self.http_listen};
  if (f.nbd_listen) s.fc.nbd_listen = *f.nbd_listen;
  if (f.admin_listen) s.fc.admin_listen = *f.admin_listen;
  if (f.http_listen) s.fc.http_listen = *f.http_listen;
  s.fc.metrics_web_config = f.daemon.metrics_web_config;
  RC_RETURN_IF_ERROR(f.daemon.ApplyLogLevel());
  RC_RETURN_IF_ERROR(f.daemon.ApplyTls("gateway"));
  RC_RETURN_IF_ERROR(f.nbd_tls.Resolve(tls::ProcessIdentity(), &s.fc));
  for (const auto& [what, address, encrypted] :
       {std::tuple<std::string, std::string, bool>{"NBD", s.fc.nbd_listen,
                                                   s.fc.nbd_tls == gateway::nbd::TlsMode::kRequire},
        {"the admin API", s.fc.admin_listen, f.daemon.tls()},
        {"/metrics", s.fc.http_listen, !s.fc.metrics_web_config.empty()}}) {
    RC_RETURN_IF_ERROR(f.daemon.CheckListener(what, address, encrypted));
  }
  s.dir = s.cluster.NodeDir(self);
  RC_RETURN_IF_ERROR(EnsureWritableDir(s.dir));
  s.etcd = f.daemon.Resolve({s.cluster.etcd_endpoints, s.cluster.etcd_prefix,
                             static_cast<int>(s.cluster.etcd_lease_ttl_s)});
  RC_RETURN_IF_ERROR(s.etcd.Validate());
  RC_RETURN_IF_ERROR(f.daemon.CheckEtcd(s.etcd));
  for (const auto& n : s.cluster.nodes) {
    v1::NodeInfo i;
    i.set_role(n.role);
    i.set_id(n.id);
    i.set_address(n.role == "gateway" ? n.nbd_listen : n.listen);
    i.set_capacity_bytes(n.role == "cachenode" ? n.ssd_bytes : 0);
    i.set_zone(n.zone);
    i.set_state("configured");
    s.nodes.push_back(i);
    if (n.role == "datanode") s.data_nodes.push_back({n.id, n.listen, n.weight, n.zone});
  }
  return s;
}

// The gateway's parts, built in order by Open, Serve and Register, and stopped in reverse.
class Daemon {
 public:
  Daemon(Settings settings, metrics::Registry* registry)
      : s_(std::move(settings)), registry_(registry) {}
  // The data node pool on the newest data ring, the VDI catalog and the router (an error of
  // kInvalidArgument is a configuration error).
  absl::Status Open();
  // Registers the catalog with the cache nodes, starts the coordinator in static mode and the
  // front ends (NBD, admin, metrics).
  absl::Status Serve();
  // Cluster mode: registers this gateway in etcd and stands for election.
  absl::Status Register();
  void Stop();

 private:
  absl::StatusOr<std::optional<datanode::DataRing>> NewestDataRing();
  absl::Status RegisterCatalog();

  const Settings s_;
  metrics::Registry* const registry_;
  std::unique_ptr<membership::EtcdClient> etcd_state_;
  std::unique_ptr<datanode::DataNodePool> pool_;
  std::unique_ptr<coordinator::Catalog> catalog_;
  std::unique_ptr<coordinator::EtcdCatalogStore> catalog_store_;
  std::unique_ptr<gateway::Router> router_;
  std::unique_ptr<coordinator::Coordinator> coordinator_;
  std::unique_ptr<gateway::ClusterFollower> follower_;
  gateway::Frontends fe_;
  std::unique_ptr<membership::Presence> presence_;
  std::unique_ptr<gateway::QosSessions> qos_sessions_;  // cluster mode: limits shared
  // /readyz: not while no cache node is in the ring (nothing to route to).
  std::unique_ptr<http_admin::ReadinessCheck> ready_;
};

// The data ring as the last rebalance left it (data nodes joined at run time) wins over the
// cluster file's list; in cluster mode a newer one in etcd wins over the local copy.
absl::StatusOr<std::optional<datanode::DataRing>> Daemon::NewestDataRing() {
  RC_ASSIGN_OR_RETURN(std::optional<datanode::DataRing> ring,
                      datanode::LoadDataRing(s_.dir + "/data_ring"));
  if (etcd_state_ == nullptr) return ring;
  absl::StatusOr<std::optional<datanode::DataRing>> remote;
  for (int i = 0; i < 60; ++i) {
    remote = coordinator::LoadEtcdDataRing(etcd_state_.get(), s_.etcd.prefix);
    if (remote.ok() || absl::IsDataLoss(remote.status())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!remote.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot read the data ring from etcd at ",
                                               s_.etcd.endpoints, ": ",
                                               remote.status().ToString()));
  }
  if (remote->has_value() && (!ring.has_value() || (*remote)->epoch > ring->epoch)) {
    spdlog::info("data ring epoch {} from etcd", (*remote)->epoch);
    return *remote;
  }
  return ring;
}

absl::Status Daemon::Open() {
  // Cluster mode: etcd holds the VDI catalog and the data ring (coordinator/etcd_state.h).
  if (s_.etcd.enabled()) {
    RC_ASSIGN_OR_RETURN(etcd_state_, membership::ConnectEtcd(s_.etcd));
  }
  RC_ASSIGN_OR_RETURN(std::optional<datanode::DataRing> ring, NewestDataRing());
  if (etcd_state_ != nullptr) {
    RC_RETURN_IF_ERROR(membership::CheckFeatureLevel(etcd_state_.get(), s_.etcd.prefix,
                                                     absl::StrCat("gateway ", s_.flags.id)));
  }
  RC_ASSIGN_OR_RETURN(
      pool_, ring.has_value()
                 ? datanode::DataNodePool::Create(*ring, registry_, 30000, "gateway")
                 : datanode::DataNodePool::Create(s_.data_nodes, registry_, 30000, "gateway"));
  std::vector<gateway::CacheMember> members;
  for (const auto& n : s_.cluster.OfRole("cachenode")) {
    members.push_back({n.id, n.weight, gateway::MakeGrpcCacheClient(n.listen)});
  }
  coordinator::VdiDefaults defaults;
  defaults.block_size = s_.cluster.block_size;
  defaults.replication = s_.cluster.replication;
  RC_ASSIGN_OR_RETURN(catalog_, coordinator::Catalog::Open(s_.dir + "/catalog.txt", defaults));
  if (etcd_state_ != nullptr) {
    catalog_store_ =
        std::make_unique<coordinator::EtcdCatalogStore>(etcd_state_.get(), s_.etcd.prefix);
    if (absl::Status st = catalog_->AttachStore(catalog_store_.get()); !st.ok()) {
      return absl::UnavailableError(absl::StrCat("VDI catalog in etcd: ", st.ToString()));
    }
    spdlog::info("VDI catalog in etcd under {}: {} VDIs", membership::VdisPrefix(s_.etcd.prefix),
                 catalog_->List().size());
  }
  RC_ASSIGN_OR_RETURN(router_,
                      gateway::Router::Create(catalog_.get(), std::move(members), pool_.get()));
  if (absl::Status st = router_->LoadRemoved(s_.dir + "/removed_cache_nodes"); !st.ok()) {
    return absl::UnavailableError(st.ToString());
  }
  ready_ = std::make_unique<http_admin::ReadinessCheck>("gateway", [r = router_.get()] {
    return r->RingMembers().empty() ? std::string("no cache node in the ring") : std::string();
  });
  coordinator::Coordinator::Options co;
  co.rebalancer.state_path = s_.dir + "/data_ring";  // cluster mode: plus etcd, each term
  co.rebalancer.down_out = absl::Seconds(s_.flags.down_out_s);
  co.rebalancer.refill_mb_s = s_.flags.refill_mb_s;
  co.rebalancer.busy_mb_s = s_.flags.busy_mb_s;
  co.create_vdis = s_.flags.create;
  co.prefix = s_.etcd.prefix;
  coordinator_ = std::make_unique<coordinator::Coordinator>(
      router_.get(), pool_.get(), catalog_.get(), catalog_store_.get(), std::move(co));
  if (etcd_state_ == nullptr) coordinator_->StartStatic(s_.data_nodes);
  return absl::OkStatus();
}

// Peers may still be starting: registers the catalog with retries for up to a minute. In
// cluster mode a cache node that stays down is taken out of the ring once the membership is
// followed, and the others learn the VDIs on their first request: goes on after 20 s.
absl::Status Daemon::RegisterCatalog() {
  absl::Status reg;
  const int tries = s_.etcd.enabled() ? 40 : 120;
  for (int i = 0; i < tries; ++i) {
    reg = router_->RegisterAll();
    if (reg.ok()) return reg;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (s_.etcd.enabled()) {
    spdlog::warn("cannot register VDIs with every peer yet ({}); going on: cluster mode",
                 reg.ToString());
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat("cannot register VDIs with peers: ", reg.ToString()));
}

absl::Status Daemon::Serve() {
  // Cluster mode: follow the cache ring and the catalog the coordinator publishes in etcd
  // (while this gateway is not the coordinator itself).
  if (etcd_state_ != nullptr) {
    gateway::ClusterFollower::Options fo;
    fo.prefix = s_.etcd.prefix;
    coordinator::Coordinator* c = coordinator_.get();
    auto f = gateway::ClusterFollower::Start(etcd_state_.get(), router_.get(), catalog_.get(), fo,
                                             [c] { return c->leading(); });
    if (!f.ok()) {
      return absl::UnavailableError(
          absl::StrCat("cannot follow the cluster state in etcd: ", f.status().ToString()));
    }
    follower_ = *std::move(f);
  }
  RC_RETURN_IF_ERROR(RegisterCatalog());
  if (!s_.etcd.enabled()) {
    RC_RETURN_IF_ERROR(gateway::CreateVdisFromSpecs(router_.get(), s_.flags.create));
  }
  if (absl::Status st = fe_.Start(s_.fc, router_.get(), s_.nodes, registry_); !st.ok()) {
    return absl::UnavailableError(st.ToString());
  }
  coordinator_->ServeAdmin(fe_.admin());
  spdlog::info("ringcache-gateway {} ready: NBD port {}, admin port {}, metrics port {}",
               s_.flags.id, fe_.nbd_port(), fe_.admin_port(), fe_.http_port());
  return absl::OkStatus();
}

absl::Status Daemon::Register() {
  if (s_.etcd.enabled()) {
    std::string host;
    int unused = 0;
    RC_RETURN_IF_ERROR(SplitHostPort(s_.fc.admin_listen, &host, &unused));
    membership::NodeRecord record;
    record.role = membership::Role::kGateway;
    record.id = s_.flags.id;
    record.address = absl::StrCat(host, ":", fe_.admin_port());
    record.release = Version();
    record.feature_level = kFeatureLevel;
    record.http_address = absl::StrCat(host, ":", fe_.http_port());
    auto p = membership::Presence::Start(s_.etcd, record);
    if (!p.ok()) return absl::UnavailableError(p.status().ToString());
    presence_ = *std::move(p);
    coordinator_->FollowEtcd(presence_->client());
    qos_sessions_ = std::make_unique<gateway::QosSessions>(
        presence_->client(), presence_->registration(), s_.etcd.prefix, s_.flags.id,
        router_->qos());
    qos_sessions_->Start();
    if (s_.flags.coordinator) {
      // Ready once a coordinator is known (this one or another), so that administration works.
      coordinator_->Campaign(presence_->registration(), s_.flags.id,
                             absl::Seconds(2 * s_.etcd.lease_ttl_s + 4));
    }
    spdlog::info("cluster mode: registered as {}{}; following the nodes in etcd at {}",
                 presence_->registration()->key(),
                 s_.flags.coordinator ? " (coordinator candidate)" : "", s_.etcd.endpoints);
  }
  if (absl::Status st =
          WriteReadyFile(s_.flags.ready_file.value_or(""), {{"nbd_port", fe_.nbd_port()},
                                                            {"admin_port", fe_.admin_port()},
                                                            {"http_port", fe_.http_port()}});
      !st.ok()) {
    return absl::UnavailableError(st.ToString());
  }
  return absl::OkStatus();
}

void Daemon::Stop() {
  ready_.reset();  // before what it looks at
  if (coordinator_ != nullptr) coordinator_->StopCampaign();  // hands over at once
  follower_.reset();
  fe_.Stop();
  coordinator_.reset();  // after the admin service (it reports the rebalancer's status)
  qos_sessions_.reset();  // its keys deleted while the client is there
  presence_.reset();
}

}  // namespace
}  // namespace ringcache

int main(int argc, char** argv) {
  using namespace ringcache;  // NOLINT: a main file
  // Before any thread starts: an NBD read's answer buffer (up to 32 MiB) takes the pages of the
  // last one instead of fresh ones (common/malloc_tuning.h); glibc's arena count stays, for the
  // connections' many threads.
  const std::string malloc_line = KeepFreedMemoryForReuse(/*arenas=*/0);
  CLI::App app{
      "ringcache-gateway: NBD gateway of ringcache (export name = VDI name).\n"
      "Reads its addresses and its peers from the static cluster file."};
  app.set_version_flag("--version", VersionLine("ringcache-gateway"));
  Flags flags;
  AddFlags(&app, &flags);
  if (std::optional<int> done = membership::ParseCommandLine(&app, argc, argv)) return *done;
  absl::StatusOr<Settings> settings = Resolve(flags);
  if (!settings.ok()) return FailExit("ringcache-gateway", 2, settings.status().ToString());
  return RunDaemon("ringcache-gateway", "gateway", [&](metrics::Registry* registry) {
    spdlog::info("gateway: {}", malloc_line);
    return std::make_unique<Daemon>(*std::move(settings), registry);
  });
}
