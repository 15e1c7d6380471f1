// ringcache-datanode: the durable tier. Serves the DataNode gRPC API over a RocksDB store, plus
// HTTP /metrics and /healthz. Configuration: --config FILE.yaml, then flag overrides.
// Exit codes: 0 clean shutdown (SIGINT/SIGTERM), 1 runtime failure, 2 bad configuration.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/cluster_file.h"
#include "common/daemon.h"
#include "common/disk_faults.h"
#include "common/grpc_channel.h"
#include "common/grpc_tls.h"
#include "common/malloc_tuning.h"
#include "common/metrics.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "datanode/config.h"
#include "datanode/fault_fs.h"
#include "datanode/log_port.h"
#include "datanode/scrubber.h"
#include "datanode/service.h"
#include "datanode/store.h"
#include "membership/daemon_flags.h"
#include "membership/feature_level.h"
#include "membership/presence.h"

namespace ringcache::datanode {
namespace {

// The flags as given (optional ones unset when absent).
struct Flags {
  std::string config_path;
  std::optional<uint32_t> node_id;
  std::optional<std::string> listen, http_listen, log_listen, data_dir, ready_file, zone;
  std::optional<double> seek_ms, bandwidth, scrub_interval_s, scrub_mb_s;
  bool hdd = false;
  membership::DaemonFlags daemon;
  uint32_t cluster_id = 0;
  std::string disk_faults_file;
};

void AddFlags(CLI::App* app, Flags* f) {
  app->add_option("--config", f->config_path, "YAML configuration file")->check(CLI::ExistingFile);
  app->add_option("--node-id", f->node_id, "Node id (non-zero, unique among data nodes)");
  app->add_option("--listen", f->listen,
                  "gRPC address host:port (default 127.0.0.1:7400; port 0 picks one)");
  app->add_option("--http-listen", f->http_listen,
                  "HTTP /metrics address (default 127.0.0.1:9400)");
  app->add_option("--log-listen", f->log_listen,
                  "Log port address host:port: cache nodes' log appends as block-data frames "
                  "(default: the host of --listen, any free port; announced in Health)");
  app->add_option("--data-dir", f->data_dir, "RocksDB directory (created if missing)");
  app->add_option("--zone", f->zone, "Failure domain of this node");
  app->add_option("--ready-file", f->ready_file,
                  "Write {\"grpc_port\":..,\"http_port\":..,\"log_port\":..} here once serving");
  app->add_flag("--hdd-emulation", f->hdd, "Emulate an HDD (seek latency + bandwidth limit)");
  app->add_option("--hdd-seek-ms", f->seek_ms, "Emulated seek latency per request (ms)");
  app->add_option("--hdd-bandwidth-mb-s", f->bandwidth, "Emulated bandwidth (MiB/s)");
  app->add_option("--scrub-interval-s", f->scrub_interval_s,
                  "Seconds between background scrub passes over every block and log record "
                  "(default 604800, a week; 0: only `ringcachectl scrub start`)");
  app->add_option("--scrub-mb-s", f->scrub_mb_s, "Scrub read rate limit, MB/s (default 16)");
  app->add_option("--disk-faults-file", f->disk_faults_file,
                  "Fault tests only: a file whose lines `sync_delay_ms=N` and `full=1` make the "
                  "store's syncs slow or its writes fail with ENOSPC (a slow or full disk), "
                  "re-read every 100 ms");
  f->daemon.AddTo(app, /*cluster_required=*/false,
                  "Static cluster file: take node id, addresses and data dir from the entry "
                  "{role: datanode, id: --id}",
                  "register in etcd");
  app->add_option("--id", f->cluster_id, "This data node's id in the cluster file");
}

// The settings: the YAML file, then the cluster file's entry, then the flags.
absl::StatusOr<DataNodeConfig> Resolve(const Flags& f) {
  DataNodeConfig cfg;
  if (!f.config_path.empty()) RC_RETURN_IF_ERROR(cfg.LoadYaml(f.config_path));
  if (!f.daemon.cluster_path.empty()) {
    RC_ASSIGN_OR_RETURN(ClusterFile cluster, ClusterFile::Load(f.daemon.cluster_path));
    RC_ASSIGN_OR_RETURN(ClusterNode self, cluster.Find("datanode", f.cluster_id));
    cfg.node_id = self.id;
    cfg.listen = self.listen;
    cfg.http_listen = self.http_listen;
    cfg.zone = self.zone;
    cfg.cluster_id = cluster.cluster_id;
    cfg.data_dir = cluster.NodeDir(self);
    cfg.etcd_endpoints = cluster.etcd_endpoints;
    cfg.etcd_prefix = cluster.etcd_prefix;
    cfg.etcd_lease_ttl_s = cluster.etcd_lease_ttl_s;
  }
  const membership::EtcdSettings etcd = f.daemon.Resolve(
      {cfg.etcd_endpoints, cfg.etcd_prefix, static_cast<int>(cfg.etcd_lease_ttl_s)});
  RC_RETURN_IF_ERROR(etcd.Validate());
  RC_RETURN_IF_ERROR(f.daemon.CheckEtcd(etcd));
  cfg.etcd_endpoints = etcd.endpoints;
  cfg.etcd_prefix = etcd.prefix;
  cfg.etcd_lease_ttl_s = etcd.lease_ttl_s;
  if (f.node_id) cfg.node_id = *f.node_id;
  if (f.listen) cfg.listen = *f.listen;
  if (f.http_listen) cfg.http_listen = *f.http_listen;
  if (f.log_listen) cfg.log_listen = *f.log_listen;
  if (f.data_dir) cfg.data_dir = *f.data_dir;
  if (f.zone) cfg.zone = *f.zone;
  if (f.ready_file) cfg.ready_file = *f.ready_file;
  if (f.hdd) cfg.hdd.enabled = true;
  if (f.seek_ms) cfg.hdd.seek_ms = *f.seek_ms;
  if (f.bandwidth) cfg.hdd.bandwidth_mb_s = *f.bandwidth;
  if (f.scrub_interval_s) cfg.scrub_interval_s = *f.scrub_interval_s;
  if (f.scrub_mb_s) cfg.scrub_mb_s = *f.scrub_mb_s;
  if (absl::Status s = cfg.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad configuration: ", s.ToString()));
  }
  RC_RETURN_IF_ERROR(f.daemon.ApplyLogLevel());
  RC_RETURN_IF_ERROR(f.daemon.ApplyTls("datanode"));
  RC_RETURN_IF_ERROR(f.daemon.CheckListener("gRPC", cfg.listen, f.daemon.tls()));
  if (cfg.log_listen.empty()) {
    std::string host;
    int unused = 0;
    RC_RETURN_IF_ERROR(SplitHostPort(cfg.listen, &host, &unused));
    cfg.log_listen = absl::StrCat(host, ":0");
  }
  RC_RETURN_IF_ERROR(f.daemon.CheckListener("log", cfg.log_listen, f.daemon.tls()));
  RC_RETURN_IF_ERROR(
      f.daemon.CheckListener("/metrics", cfg.http_listen, !f.daemon.metrics_web_config.empty()));
  return cfg;
}

// The data node's parts, built in order by Open, Serve and Register, and stopped in reverse.
class Daemon {
 public:
  Daemon(DataNodeConfig cfg, const Flags& flags, metrics::Registry* registry)
      : cfg_(std::move(cfg)),
        flags_(flags),
        registry_(registry),
        hdd_emu_(cfg_.hdd, Clock::Real()) {}
  absl::Status Open();      // the store (with the disk fault seam when asked)
  absl::Status Serve();     // the service, its scrubber, gRPC and /metrics
  absl::Status Register();  // cluster mode: the record in etcd; then the ready file
  void Stop();

 private:
  const DataNodeConfig cfg_;
  const Flags& flags_;
  metrics::Registry* const registry_;
  HddEmulator hdd_emu_;
  std::unique_ptr<DiskFaultsWatcher> fault_watcher_;
  std::unique_ptr<BlockStore> store_;
  std::unique_ptr<DataNodeService> service_;
  std::unique_ptr<Scrubber> scrubber_;
  std::unique_ptr<LogPort> log_port_;
  std::unique_ptr<grpc::Server> server_;
  MetricsServer http_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<membership::Presence> presence_;
  // /readyz: not once the store's disk failed a write or a sync.
  std::unique_ptr<http_admin::ReadinessCheck> ready_;
};

absl::Status Daemon::Open() {
  StoreOptions store_options{cfg_.data_dir, cfg_.block_cache_bytes};
  store_options.cluster_id = cfg_.cluster_id;
  if (!flags_.disk_faults_file.empty()) {
    auto fault_fs = std::make_shared<SyncFaultFileSystem>(rocksdb::FileSystem::Default());
    fault_watcher_ = std::make_unique<DiskFaultsWatcher>(
        flags_.disk_faults_file, [fs = fault_fs.get()](const DiskFaults& f) {
          fs->SetSyncDelayMs(f.sync_delay_ms);
          fs->SetFull(f.full);
        });
    store_options.file_system = fault_fs;
  }
  auto store = BlockStore::Open(store_options);
  if (!store.ok()) return absl::UnavailableError(store.status().ToString());
  store_ = *std::move(store);
  // In a cluster, log records say their version only once the cluster's feature level is 2
  // (Register reads it before the node takes appends); a node in static mode writes version 2.
  if (!cfg_.etcd_endpoints.empty()) store_->SetLogRecordVersion(1);
  ready_ = std::make_unique<http_admin::ReadinessCheck>("data node", [st = store_.get()] {
    const std::string err = st->Stats().device_error;
    return err.empty() ? std::string() : "device failed: " + err;
  });
  return absl::OkStatus();
}

absl::Status Daemon::Serve() {
  service_ = std::make_unique<DataNodeService>(cfg_.node_id, store_.get(), &hdd_emu_, registry_);
  service_->SetLogLimit(cfg_.log_limit_bytes);
  Scrubber::Options so;
  so.interval = absl::Seconds(cfg_.scrub_interval_s);
  so.mb_s = cfg_.scrub_mb_s;
  scrubber_ = std::make_unique<Scrubber>(cfg_.node_id, store_.get(), so, registry_);
  service_->SetScrubber(scrubber_.get());
  registry_
      ->GetGauge("ringcache_datanode_hdd_emulation_enabled",
                 "1 when HDD emulation delays requests.")
      ->Set(cfg_.hdd.enabled ? 1 : 0);
  // The log port before gRPC: the first Health answer announces it.
  LogPortOptions lo;
  int log_port = 0;
  RC_RETURN_IF_ERROR(SplitHostPort(cfg_.log_listen, &lo.host, &log_port));
  lo.port = log_port;
  if (tls::ProcessIdentity() != nullptr) {
    tls::ServerOptions o;
    o.roles = {tls::kRoleCacheNode, tls::kRoleGateway};  // as the gRPC port
    RC_ASSIGN_OR_RETURN(lo.tls, tls::ServerContext::Create(tls::ProcessIdentity(), o));
  }
  RC_ASSIGN_OR_RETURN(log_port_, LogPort::Start(lo, service_.get(), registry_));
  service_->set_log_port(log_port_->port());
  grpc::ServerBuilder builder;
  ExclusivePort(&builder);  // a port in use fails the start (common/grpc_channel.h)
  AllowPeerKeepalive(&builder);  // cache nodes ping (kDataNodeKeepaliveMs)
  KeepServerThreads(&builder);
  // Mutual TLS with --tls-dir: cache nodes and gateways call a data node (common/grpc_tls.h).
  builder.AddListeningPort(cfg_.listen,
                           tls::ServerCredentialsFor({tls::kRoleCacheNode, tls::kRoleGateway}),
                           &grpc_port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  server_ = builder.BuildAndStart();
  if (!server_ || grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", cfg_.listen));
  }
  RC_ASSIGN_OR_RETURN(http_port_, ServeMetrics(&http_, registry_, cfg_.http_listen,
                                               flags_.daemon.metrics_web_config));
  spdlog::info(
      "ringcache-datanode {} serving gRPC on port {}, log port {}, metrics on port {}, data in "
      "{}{}",
      cfg_.node_id, grpc_port_, log_port_->port(), http_port_, cfg_.data_dir,
               cfg_.hdd.enabled ? " (HDD emulation on)" : "");
  return absl::OkStatus();
}

// Cluster mode: registers after serving, so that whoever sees the record can reach this node.
absl::Status Daemon::Register() {
  if (!cfg_.etcd_endpoints.empty()) {
    std::string host;
    int unused = 0;
    RC_RETURN_IF_ERROR(SplitHostPort(cfg_.listen, &host, &unused));
    membership::NodeRecord record;
    record.role = membership::Role::kData;
    record.id = cfg_.node_id;
    record.address = absl::StrCat(host, ":", grpc_port_);
    record.release = Version();
    record.feature_level = kFeatureLevel;
    record.http_address = absl::StrCat(host, ":", http_port_);
    record.capacity_bytes = cfg_.capacity_bytes;
    record.zone = cfg_.zone;
    record.incarnation = store_->incarnation();
    const membership::EtcdSettings etcd{cfg_.etcd_endpoints, cfg_.etcd_prefix,
                                        static_cast<int>(cfg_.etcd_lease_ttl_s)};
    {
      // A cluster finalized past this release writes what it cannot read: refuse to join it.
      RC_ASSIGN_OR_RETURN(std::unique_ptr<membership::EtcdClient> client,
                          membership::ConnectEtcd(etcd));
      RC_RETURN_IF_ERROR(membership::CheckFeatureLevel(client.get(), cfg_.etcd_prefix,
                                                       absl::StrCat("data node ", cfg_.node_id)));
      RC_ASSIGN_OR_RETURN(const uint32_t level,
                          membership::ReadFeatureLevel(client.get(), cfg_.etcd_prefix));
      store_->SetLogRecordVersion(level >= 2 ? 2 : 1);
      spdlog::info("cluster feature level {}: log records of version {}", level,
                   store_->log_record_version());
    }
    auto p = membership::Presence::Start(etcd, record);
    if (!p.ok()) return absl::UnavailableError(p.status().ToString());
    presence_ = *std::move(p);
    spdlog::info("registered in etcd as {} (lease TTL {} s)", presence_->registration()->key(),
                 cfg_.etcd_lease_ttl_s);
  }
  absl::Status s =
      WriteReadyFile(cfg_.ready_file, {{"grpc_port", grpc_port_},
                                       {"http_port", http_port_},
                                       {"log_port", log_port_->port()}});
  return s.ok() ? s : absl::UnavailableError(s.ToString());
}

void Daemon::Stop() {
  ready_.reset();  // before what it looks at
  presence_.reset();  // revoke the lease: leave the membership at once
  if (service_ != nullptr) service_->SetDraining();
  if (log_port_ != nullptr) log_port_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  if (http_port_ != 0) http_.Stop();
  scrubber_.reset();  // before the store it reads
  // No memtable flush on the way out: every write is already in RocksDB's synced WAL, which the
  // next start replays at normal priority. A flush here ran on the low-priority flush threads
  // and, on a busy machine, made a SIGTERM take over a minute (seen in a rolling upgrade).
  store_.reset();
}

}  // namespace
}  // namespace ringcache::datanode

int main(int argc, char** argv) {
  using namespace ringcache;  // NOLINT: a main file
  // Before any thread starts: freed memtables' pages are reused, not faulted in again.
  const std::string malloc_line = KeepFreedMemoryForReuse();
  CLI::App app{
      "ringcache-datanode: durable block and log store of ringcache (RocksDB on HDD).\n"
      "Settings come from --config FILE.yaml; flags override the file."};
  app.set_version_flag("--version", VersionLine("ringcache-datanode"));
  datanode::Flags flags;
  datanode::AddFlags(&app, &flags);
  if (std::optional<int> done = membership::ParseCommandLine(&app, argc, argv)) return *done;
  absl::StatusOr<datanode::DataNodeConfig> cfg = datanode::Resolve(flags);
  if (!cfg.ok()) return FailExit("ringcache-datanode", 2, cfg.status().ToString());
  return RunDaemon("ringcache-datanode", "datanode", [&](metrics::Registry* registry) {
    spdlog::info("data node: {}", malloc_line);
    return std::make_unique<datanode::Daemon>(*std::move(cfg), flags, registry);
  });
}
