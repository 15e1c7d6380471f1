// ringcache-cachenode: one SSD cache node as its own process. Serves the CacheNode gRPC API to
// gateways, HTTP /metrics and /healthz. Its peers (the data nodes) and addresses come from the
// static cluster file: --cluster FILE --id N; flags override.
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cachenode/cache_node.h"
#include "cachenode/data_server.h"
#include "cachenode/policy/registry.h"
#include "cachenode/policy/write_budget.h"
#include "cachenode/ring_follower.h"
#include "cachenode/service.h"
#include "common/cluster_file.h"
#include "common/config.h"
#include "common/daemon.h"
#include "common/disk_faults.h"
#include "common/file.h"
#include "common/grpc_channel.h"
#include "common/grpc_tls.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "membership/daemon_flags.h"
#include "membership/feature_level.h"
#include "membership/presence.h"

namespace ringcache {
namespace {

// What the flags and the cluster file say this node is.
struct Settings {
  uint32_t id = 0;
  std::string data_listen;  // host:port, port 0 = any
  ClusterFile cluster;
  ClusterNode self;
  cachenode::CacheNodeConfig cc;
  membership::EtcdSettings etcd;
  std::string ready_file;
  std::string metrics_web_config;
  std::shared_ptr<const tls::ServerContext> data_tls;  // block data port (gateways only)
};

// The flags as given (optional ones unset when absent).
struct Flags {
  membership::DaemonFlags daemon;
  uint32_t id = 0;
  std::optional<std::string> listen, http_listen, data_listen, ssd_path, state_dir, ready_file,
      policy, placement;
  std::optional<int64_t> relog_after_ms, dirty_age_target_ms;
  std::optional<uint32_t> destage_batch_runs;
  std::optional<double> dirty_cap, vdi_dirty_cap, ssd_budget_burst_s;
  std::optional<std::string> ssd_write_budget;
  std::string disk_faults_file;
};

void AddFlags(CLI::App* app, Flags* f) {
  f->daemon.AddTo(app, /*cluster_required=*/true, "Static cluster file (YAML)",
                  "register in etcd and serve only while the lease is valid");
  app->add_option("--id", f->id, "This cache node's id in the cluster file")->required();
  app->add_option("--listen", f->listen, "gRPC address (overrides the cluster file)");
  app->add_option("--http-listen", f->http_listen, "HTTP /metrics address");
  app->add_option("--data-listen", f->data_listen,
                  "Block data protocol address host:port (default: the host of the gRPC "
                  "address, any free port; gateways learn the port from the node)");
  app->add_option("--ssd-path", f->ssd_path,
                  "SSD slot file or block device "
                  "(default <data_dir>/cachenode-<id>/ssd.slots)");
  app->add_option("--state-dir", f->state_dir,
                  "Directory of the node's state files (ownership, VDIs, log sequence, data "
                  "ring; default: beside a slot file, or <data_dir>/cachenode-<id> when "
                  "--ssd-path is a block device)");
  app->add_option("--policy", f->policy, "Policy spec (default from the cluster file)");
  app->add_option(
      "--placement", f->placement,
      "RAM/SSD placement: uarc|lru, optionally NAME(exclusive) (the RAM tier adds capacity) "
      "and/or NAME(sieve=N) (SE-UARC)");
  app->add_option("--ready-file", f->ready_file, "Write the bound ports as JSON here once serving");
  app->add_option("--relog-after-ms", f->relog_after_ms,
                  "A data node unreachable this long is taken for lost: the dirty blocks whose "
                  "log copies it held are logged again on the others (default 30000)")
      ->check(CLI::Range(int64_t{1000}, int64_t{86400000}));
  app->add_option("--dirty-age-target-ms", f->dirty_age_target_ms,
                  "Under load, destage keeps the oldest dirty block younger than about this "
                  "(it starts at half of it; 0: destage only when idle or above the high "
                  "watermark; default 30000)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  app->add_option("--destage-batch-runs", f->destage_batch_runs,
                  "Runs of dirty blocks (of any objects) destage writes home together: one "
                  "request and one commit per data node that speaks node-api 3 (1: a request "
                  "per run and home; default 16; environment RINGCACHE_DESTAGE_BATCH_RUNS)")
      ->envname("RINGCACHE_DESTAGE_BATCH_RUNS")
      ->check(CLI::Range(1, 64));
  app->add_option("--dirty-cap", f->dirty_cap,
                  "Dirty share of the SSD slots that writers are held under: writes slow down "
                  "smoothly above the high watermark (0.6) and wait, at most 1 s each, at the "
                  "cap (default 0.9)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--vdi-dirty-cap", f->vdi_dirty_cap,
                  "Share of the SSD slots one VDI may hold dirty: its writers wait (at most 1 s "
                  "a write) while destage takes its blocks first, so one VDI cannot fill the "
                  "node's dirty capacity (default 0: no per-VDI cap)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--ssd-write-budget", f->ssd_write_budget,
                  "The SSD's write budget: drive writes per day (1dwpd) or a size per day "
                  "(200GiB/day); while the node writes faster, misses go around the cache "
                  "(reads unfilled, writes write-around); 'none' for no budget (default: the "
                  "cluster file's ssd_write_budget, else none)");
  app->add_option("--ssd-budget-burst-s", f->ssd_budget_burst_s,
                  "Seconds of the budget's rate its bucket holds: writes may run above the "
                  "rate this long before admission tightens (default 3600)")
      ->check(CLI::Range(1.0, 30.0 * 86400));
  app->add_option("--disk-faults-file", f->disk_faults_file,
                  "Fault tests only: a file whose lines `sync_delay_ms=N` and `full=1` make the "
                  "SSD's syncs slow or its writes fail with ENOSPC (a slow or full disk), "
                  "re-read every 100 ms");
}

// Flags over the cluster file; every error is a configuration error.
absl::StatusOr<Settings> Resolve(const Flags& f) {
  Settings s;
  s.id = f.id;
  RC_ASSIGN_OR_RETURN(s.cluster, ClusterFile::Load(f.daemon.cluster_path));
  RC_ASSIGN_OR_RETURN(s.self, s.cluster.Find("cachenode", f.id));
  if (f.listen) s.self.listen = *f.listen;
  if (f.http_listen) s.self.http_listen = *f.http_listen;
  if (f.data_listen) {
    s.data_listen = *f.data_listen;
  } else {
    std::string host;
    int unused = 0;
    RC_RETURN_IF_ERROR(SplitHostPort(s.self.listen, &host, &unused));
    s.data_listen = absl::StrCat(host, ":0");
  }
  const std::string dir = s.cluster.NodeDir(s.self);
  RC_RETURN_IF_ERROR(EnsureWritableDir(dir));
  s.cc.node_id = f.id;
  s.cc.cluster_id = s.cluster.cluster_id;
  s.cc.ssd_path = f.ssd_path.value_or(dir + "/ssd.slots");
  if (f.state_dir || IsBlockDevicePath(s.cc.ssd_path)) {
    s.cc.state_dir = f.state_dir.value_or(dir);
    RC_RETURN_IF_ERROR(EnsureWritableDir(s.cc.state_dir));
  }
  s.cc.ssd_bytes = s.self.ssd_bytes;
  s.cc.ram_bytes = s.self.ram_bytes;
  s.cc.block_size = s.cluster.block_size;
  s.cc.policy = f.policy.value_or(s.cluster.policy);
  if (s.cc.policy.empty()) s.cc.policy = policy::kDefaultPolicy;
  s.cc.placement = f.placement.value_or(s.cluster.placement);
  if (f.relog_after_ms) s.cc.relog_after_ms = *f.relog_after_ms;
  if (f.dirty_age_target_ms) s.cc.dirty_age_target_ms = *f.dirty_age_target_ms;
  if (f.destage_batch_runs) s.cc.destage_batch_runs = *f.destage_batch_runs;
  if (f.dirty_cap) s.cc.dirty_cap = *f.dirty_cap;
  if (f.vdi_dirty_cap) s.cc.vdi_dirty_cap = *f.vdi_dirty_cap;
  const std::string budget = f.ssd_write_budget.value_or(s.self.ssd_write_budget);
  if (!budget.empty() && budget != "none") {
    RC_ASSIGN_OR_RETURN(s.cc.ssd_budget_bytes_per_day,
                        policy::BudgetBytesPerDay(budget, s.cc.ssd_bytes, [](std::string_view t) {
                          return ParseByteSize(t);
                        }));
  }
  if (f.ssd_budget_burst_s) s.cc.ssd_budget_burst_s = *f.ssd_budget_burst_s;
  s.cc.ssd_rated_years = s.self.ssd_rated_years;
  RC_RETURN_IF_ERROR(s.cc.Validate());
  s.etcd = f.daemon.Resolve({s.cluster.etcd_endpoints, s.cluster.etcd_prefix,
                             static_cast<int>(s.cluster.etcd_lease_ttl_s)});
  RC_RETURN_IF_ERROR(s.etcd.Validate());
  RC_RETURN_IF_ERROR(f.daemon.CheckEtcd(s.etcd));
  s.ready_file = f.ready_file.value_or("");
  s.metrics_web_config = f.daemon.metrics_web_config;
  RC_RETURN_IF_ERROR(f.daemon.ApplyLogLevel());
  RC_RETURN_IF_ERROR(f.daemon.ApplyTls("cachenode"));
  if (f.daemon.tls()) {
    tls::ServerOptions o;
    o.roles = {tls::kRoleGateway};
    RC_ASSIGN_OR_RETURN(s.data_tls, tls::ServerContext::Create(tls::ProcessIdentity(), o));
  }
  RC_RETURN_IF_ERROR(f.daemon.CheckListener("gRPC", s.self.listen, f.daemon.tls()));
  RC_RETURN_IF_ERROR(f.daemon.CheckListener("block data", s.data_listen, f.daemon.tls()));
  RC_RETURN_IF_ERROR(
      f.daemon.CheckListener("/metrics", s.self.http_listen, !s.metrics_web_config.empty()));
  return s;
}

// One running cache node: data-node pool, node, gRPC and HTTP servers, and in cluster mode its
// etcd presence, the fence that reads it, and the device watch that gives the lease up.
class Daemon {
 public:
  // `disk_faults` (fault tests; may be null) watches the file that slows or fills the SSD.
  Daemon(Settings s, metrics::Registry* registry,
         std::unique_ptr<DiskFaultsWatcher> disk_faults = nullptr)
      : s_(std::move(s)), registry_(registry), disk_faults_(std::move(disk_faults)) {}
  ~Daemon() { Stop(); }

  // Opens the data-node pool and the node (quarantined if a previous run held a lease).
  absl::Status Open();
  // Starts the gRPC and HTTP servers.
  absl::Status Serve();
  // Cluster mode: registers in etcd and watches the device (WatchDevice); then writes the ready
  // file.
  absl::Status Register();
  // Cluster mode: a failed SSD (sticky) gives up the lease, so the gateway takes this node out
  // at once and recovers its dirty blocks from their log replicas.
  void WatchDevice();
  // Gives up the lease, stops the servers, then the node (dirty blocks stay on the SSD).
  void Stop();

 private:
  bool FenceOpen();
  void GiveUpLease();

  const Settings s_;
  metrics::Registry* const registry_;
  std::unique_ptr<DiskFaultsWatcher> disk_faults_;
  std::unique_ptr<datanode::DataNodePool> pool_;
  std::unique_ptr<cachenode::CacheNode> node_;
  std::unique_ptr<cachenode::Fence> fence_;
  std::unique_ptr<cachenode::CacheNodeService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<cachenode::DataServer> data_server_;
  MetricsServer http_;
  int port_ = 0;
  int http_port_ = 0;
  // The fence reads the registration under reg_mu_, so that shutdown can take it away safely.
  absl::Mutex reg_mu_;
  membership::NodeRegistration* registration_ ABSL_GUARDED_BY(reg_mu_) = nullptr;
  bool leaving_ ABSL_GUARDED_BY(reg_mu_) = false;  // lease given up
  absl::Mutex presence_mu_;                        // serialises the two ways the lease is given up
  std::unique_ptr<membership::Presence> presence_;
  // Cluster mode: the rings the coordinator publishes, followed with a client of its own (the
  // presence's goes when the lease is given up; the rings are followed until the node stops).
  std::unique_ptr<membership::EtcdClient> rings_client_;
  std::unique_ptr<cachenode::RingFollower> rings_;
  std::atomic<bool> stop_watch_{false};
  std::thread device_watch_;
  bool stopped_ = false;
  // /readyz: not while the node must not act as owner (quarantined, a failed SSD, no lease).
  std::unique_ptr<http_admin::ReadinessCheck> ready_;
};

absl::Status Daemon::Open() {
  std::vector<datanode::DataNodeEndpoint> endpoints;
  for (const auto& n : s_.cluster.OfRole("datanode")) {
    endpoints.push_back({n.id, n.listen, n.weight, n.zone});
  }
  // A data ring set at run time (a rebalance after data nodes joined) wins over the file's list.
  const std::string ring_path = cachenode::CacheNode::DataRingPath(s_.cc.StateBase());
  RC_ASSIGN_OR_RETURN(std::optional<datanode::DataRing> saved, datanode::LoadDataRing(ring_path));
  if (saved) {
    RC_ASSIGN_OR_RETURN(pool_, datanode::DataNodePool::Create(*saved, registry_));
    spdlog::info("data ring epoch {} from {} ({} members)", saved->epoch, ring_path,
                 saved->members.size());
  } else {
    RC_ASSIGN_OR_RETURN(pool_, datanode::DataNodePool::Create(endpoints, registry_));
  }
  RC_ASSIGN_OR_RETURN(node_,
                      cachenode::CacheNode::Create(s_.cc, pool_.get(), Clock::Real(), registry_));
  ready_ = std::make_unique<http_admin::ReadinessCheck>("cache node", [n = node_.get()] {
    const absl::Status s = n->CheckOwner();
    return s.ok() ? std::string() : std::string(s.message());
  });
  if (!s_.etcd.enabled()) return absl::OkStatus();
  // Cluster mode: the fence is open until the registration exists, then as long as its lease.
  fence_ = std::make_unique<cachenode::Fence>([this] { return FenceOpen(); });
  cachenode::Fence* f = fence_.get();
  node_->SetDestageGate([f] { return f->Open(); });
  // A previous run registered under a lease that is gone now (expired after a crash, or revoked
  // at shutdown): the gateway may have given our objects away and replayed our log. Stay quiet
  // until it re-admits us (docs/durability.md, fencing protocol).
  if (const int64_t old = node_->ownership()->lease(); old != 0) {
    RC_RETURN_IF_ERROR(node_->ownership()->Quarantine(absl::StrCat(
        "restarted: the previous run's etcd lease ", old, " is gone, its objects may have moved")));
  }
  return absl::OkStatus();
}

bool Daemon::FenceOpen() {
  absl::MutexLock l(&reg_mu_);
  if (leaving_) return false;  // lease given up
  return registration_ == nullptr || registration_->LeaseValid();
}

absl::Status Daemon::Serve() {
  service_ = std::make_unique<cachenode::CacheNodeService>(node_.get(), registry_);
  grpc::ServerBuilder b;
  ExclusivePort(&b);  // a port in use fails the start (common/grpc_channel.h)
  KeepServerThreads(&b);
  // Mutual TLS with --tls-dir: only gateways call a cache node (common/grpc_tls.h).
  b.AddListeningPort(s_.self.listen, tls::ServerCredentialsFor({tls::kRoleGateway}), &port_);
  b.RegisterService(service_.get());
  b.SetMaxReceiveMessageSize(64 << 20);
  b.SetMaxSendMessageSize(64 << 20);
  AllowPeerKeepalive(&b);  // the gateway pings (common/grpc_channel.h)
  server_ = b.BuildAndStart();
  if (!server_ || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", s_.self.listen));
  }
  std::string data_host;
  int data_port = 0;
  RC_RETURN_IF_ERROR(SplitHostPort(s_.data_listen, &data_host, &data_port));
  RC_ASSIGN_OR_RETURN(data_server_,
                      cachenode::DataServer::Start({data_host, data_port, 4096, 0, s_.data_tls},
                                                   node_.get(), service_->gate(), registry_));
  service_->set_data_port(data_server_->port());
  RC_ASSIGN_OR_RETURN(http_port_,
                      ServeMetrics(&http_, registry_, s_.self.http_listen, s_.metrics_web_config));
  spdlog::info(
      "ringcache-cachenode {} serving gRPC on port {}, block data on port {}, metrics "
      "on port {}, SSD {}",
      s_.id, port_, data_server_->port(), http_port_, s_.cc.ssd_path);
  return absl::OkStatus();
}

absl::Status Daemon::Register() {
  if (s_.etcd.enabled()) {
    std::string host;
    int unused = 0;
    RC_RETURN_IF_ERROR(SplitHostPort(s_.self.listen, &host, &unused));
    membership::NodeRecord record;
    record.role = membership::Role::kCache;
    record.id = s_.id;
    record.address = absl::StrCat(host, ":", port_);
    record.release = Version();
    record.feature_level = kFeatureLevel;
    record.http_address = absl::StrCat(host, ":", http_port_);
    record.capacity_bytes = s_.cc.ssd_bytes;
    record.weight = s_.self.weight;
    record.zone = s_.self.zone;
    record.incarnation = node_->incarnation();
    // A cluster finalized past this release writes what it cannot read: refuse to join it.
    RC_ASSIGN_OR_RETURN(rings_client_, membership::ConnectEtcd(s_.etcd));
    RC_RETURN_IF_ERROR(membership::CheckFeatureLevel(rings_client_.get(), s_.etcd.prefix,
                                                     absl::StrCat("cache node ", s_.id)));
    cachenode::Ownership* own = node_->ownership();
    // Noted before the record appears in etcd: a crash right after registering must still make
    // the next start quarantined (the real lease id follows once it is known).
    RC_RETURN_IF_ERROR(own->NoteLease(-1));
    RC_ASSIGN_OR_RETURN(presence_,
                        membership::Presence::Start(s_.etcd, record, [own](int64_t lease, int64_t) {
                          // Runs before the new lease's validity window opens (membership.h).
                          own->NoteLease(lease).IgnoreError();
                          own->Quarantine("etcd lease was lost").IgnoreError();
                        }));
    {
      absl::MutexLock l(&reg_mu_);
      registration_ = presence_->registration();
    }
    RC_RETURN_IF_ERROR(own->NoteLease(presence_->registration()->lease_id()));
    spdlog::info("registered in etcd as {} (lease TTL {} s); serving only while it is valid",
                 presence_->registration()->key(), s_.etcd.lease_ttl_s);
    cachenode::RingFollower::Options ro;
    ro.prefix = s_.etcd.prefix;
    rings_ = cachenode::RingFollower::Start(rings_client_.get(), node_.get(), service_->gate(), ro);
  }
  WatchDevice();
  return WriteReadyFile(
      s_.ready_file,
      {{"grpc_port", port_}, {"http_port", http_port_}, {"data_port", data_server_->port()}});
}

void Daemon::GiveUpLease() {
  {
    absl::MutexLock l(&reg_mu_);
    leaving_ = true;
    registration_ = nullptr;
  }
  absl::MutexLock l(&presence_mu_);
  presence_.reset();  // revoke the lease: the gateway settles our objects at once
}

void Daemon::WatchDevice() {
  if (presence_ == nullptr) return;
  device_watch_ = std::thread([this] {
    while (!stop_watch_.load()) {
      if (absl::Status d = node_->device_status(); !d.ok()) {
        spdlog::error("{}; giving up the etcd lease so the gateway replays this node's log",
                      std::string(d.message()));
        GiveUpLease();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
}

void Daemon::Stop() {
  ready_.reset();  // before what it looks at
  if (stopped_) return;
  stopped_ = true;
  stop_watch_.store(true);
  if (device_watch_.joinable()) device_watch_.join();
  GiveUpLease();
  rings_.reset();
  rings_client_.reset();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (data_server_) data_server_->Stop();
  http_.Stop();
  // The node (and its destager, which asks the fence) stops before the fence and the
  // registration it reads are destroyed.
  node_.reset();
}

// Fault tests: the SSD file slowed or filled up as `file` says (common/disk_faults.h): the node
// opens its SSD through the returned watcher's cell.
std::unique_ptr<DiskFaultsWatcher> WatchDiskFaults(const std::string& file, Settings* s) {
  if (file.empty()) return nullptr;
  auto cell = std::make_shared<DiskFaultsCell>();
  auto watcher =
      std::make_unique<DiskFaultsWatcher>(file, [cell](const DiskFaults& f) { cell->Set(f); });
  s->cc.open_ssd_file = [cell](const std::string& path) -> absl::StatusOr<std::unique_ptr<File>> {
    RC_ASSIGN_OR_RETURN(std::unique_ptr<File> base, OpenPosixFile(path, /*create=*/true));
    return std::unique_ptr<File>(std::make_unique<DiskFaultFile>(std::move(base), cell));
  };
  return watcher;
}

}  // namespace
}  // namespace ringcache

int main(int argc, char** argv) {
  using namespace ringcache;  // NOLINT: a main file
  CLI::App app{
      "ringcache-cachenode: SSD cache node of ringcache.\n"
      "Reads its settings and its data nodes from the static cluster file."};
  app.set_version_flag("--version", VersionLine("ringcache-cachenode"));
  Flags flags;
  AddFlags(&app, &flags);
  if (std::optional<int> done = membership::ParseCommandLine(&app, argc, argv)) return *done;
  absl::StatusOr<Settings> settings = Resolve(flags);
  if (!settings.ok()) return FailExit("ringcache-cachenode", 2, settings.status().ToString());
  return RunDaemon("ringcache-cachenode", "cachenode", [&](metrics::Registry* registry) {
    std::unique_ptr<DiskFaultsWatcher> faults = WatchDiskFaults(flags.disk_faults_file, &*settings);
    return std::make_unique<Daemon>(*std::move(settings), registry, std::move(faults));
  });
}
