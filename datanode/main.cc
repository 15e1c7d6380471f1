// ringcache-datanode: the durable tier. Serves the DataNode gRPC API over a RocksDB store, plus
// HTTP /metrics and /healthz. Configuration: --config FILE.yaml, then flag overrides.
// Exit codes: 0 clean shutdown (SIGINT/SIGTERM), 1 runtime failure, 2 bad configuration.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/grpc_channel.h"
#include "common/grpc_tls.h"
#include "common/clock.h"
#include "common/cluster_file.h"
#include "common/daemon.h"
#include "common/disk_faults.h"
#include "common/socket.h"
#include "common/metrics.h"
#include "datanode/config.h"
#include "datanode/fault_fs.h"
#include "datanode/scrubber.h"
#include "datanode/service.h"
#include "datanode/store.h"
#include "membership/daemon_flags.h"
#include "membership/presence.h"
#include "common/version.h"

namespace {

using ringcache::datanode::DataNodeConfig;

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "ringcache-datanode: %s\n", msg.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringcache-datanode: durable block and log store of ringcache (RocksDB on HDD).\n"
      "Settings come from --config FILE.yaml; flags override the file."};
  app.set_version_flag("--version", ringcache::VersionLine("ringcache-datanode"));
  std::string config_path;
  std::optional<uint32_t> node_id;
  std::optional<std::string> listen, http_listen, data_dir, ready_file, zone;
  std::optional<double> seek_ms, bandwidth, scrub_interval_s, scrub_mb_s;
  bool hdd = false;
  ringcache::membership::DaemonFlags flags;
  uint32_t cluster_id = 0;
  app.add_option("--config", config_path, "YAML configuration file")->check(CLI::ExistingFile);
  app.add_option("--node-id", node_id, "Node id (non-zero, unique among data nodes)");
  app.add_option("--listen", listen, "gRPC address host:port (default 127.0.0.1:7400; port 0 picks one)");
  app.add_option("--http-listen", http_listen, "HTTP /metrics address (default 127.0.0.1:9400)");
  app.add_option("--data-dir", data_dir, "RocksDB directory (created if missing)");
  app.add_option("--zone", zone, "Failure domain of this node");
  app.add_option("--ready-file", ready_file,
                 "Write {\"grpc_port\":..,\"http_port\":..} here once serving");
  app.add_flag("--hdd-emulation", hdd, "Emulate an HDD (seek latency + bandwidth limit)");
  app.add_option("--hdd-seek-ms", seek_ms, "Emulated seek latency per request (ms)");
  app.add_option("--hdd-bandwidth-mb-s", bandwidth, "Emulated bandwidth (MiB/s)");
  app.add_option("--scrub-interval-s", scrub_interval_s,
                 "Seconds between background scrub passes over every block and log record "
                 "(default 604800, a week; 0: only `ringcachectl scrub start`)");
  app.add_option("--scrub-mb-s", scrub_mb_s, "Scrub read rate limit, MB/s (default 16)");
  std::string disk_faults_file;
  app.add_option("--disk-faults-file", disk_faults_file,
                 "Fault tests only: a file whose lines `sync_delay_ms=N` and `full=1` make the "
                 "store's syncs slow or its writes fail with ENOSPC (a slow or full disk), "
                 "re-read every 100 ms");
  flags.AddTo(&app, /*cluster_required=*/false,
              "Static cluster file: take node id, addresses and data dir from the entry "
              "{role: datanode, id: --id}",
              "register in etcd");
  app.add_option("--id", cluster_id, "This data node's id in the cluster file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  DataNodeConfig cfg;
  if (!config_path.empty()) {
    if (absl::Status s = cfg.LoadYaml(config_path); !s.ok()) return Fail(2, s.ToString());
  }
  if (!flags.cluster_path.empty()) {
    auto cluster = ringcache::ClusterFile::Load(flags.cluster_path);
    if (!cluster.ok()) return Fail(2, cluster.status().ToString());
    auto self = cluster->Find("datanode", cluster_id);
    if (!self.ok()) return Fail(2, self.status().ToString());
    cfg.node_id = self->id;
    cfg.listen = self->listen;
    cfg.http_listen = self->http_listen;
    cfg.zone = self->zone;
    cfg.cluster_id = cluster->cluster_id;
    cfg.data_dir = cluster->NodeDir(*self);
    cfg.etcd_endpoints = cluster->etcd_endpoints;
    cfg.etcd_prefix = cluster->etcd_prefix;
    cfg.etcd_lease_ttl_s = cluster->etcd_lease_ttl_s;
  }
  const ringcache::membership::EtcdSettings etcd_settings = flags.Resolve(
      {cfg.etcd_endpoints, cfg.etcd_prefix, static_cast<int>(cfg.etcd_lease_ttl_s)});
  cfg.etcd_endpoints = etcd_settings.endpoints;
  cfg.etcd_prefix = etcd_settings.prefix;
  cfg.etcd_lease_ttl_s = etcd_settings.lease_ttl_s;
  if (absl::Status s = etcd_settings.Validate(); !s.ok()) return Fail(2, s.ToString());
  if (node_id) cfg.node_id = *node_id;
  if (listen) cfg.listen = *listen;
  if (http_listen) cfg.http_listen = *http_listen;
  if (data_dir) cfg.data_dir = *data_dir;
  if (zone) cfg.zone = *zone;
  if (ready_file) cfg.ready_file = *ready_file;
  if (hdd) cfg.hdd.enabled = true;
  if (seek_ms) cfg.hdd.seek_ms = *seek_ms;
  if (bandwidth) cfg.hdd.bandwidth_mb_s = *bandwidth;
  if (scrub_interval_s) cfg.scrub_interval_s = *scrub_interval_s;
  if (scrub_mb_s) cfg.scrub_mb_s = *scrub_mb_s;
  if (absl::Status s = cfg.Validate(); !s.ok()) {
    return Fail(2, absl::StrCat("bad configuration: ", s.ToString()));
  }
  if (absl::Status s = flags.ApplyTls("datanode"); !s.ok()) return Fail(2, s.ToString());
  if (absl::Status s = flags.CheckListener("gRPC", cfg.listen, flags.tls()); !s.ok()) {
    return Fail(2, s.ToString());
  }
  if (absl::Status s = flags.CheckListener("/metrics", cfg.http_listen,
                                           !flags.metrics_web_config.empty());
      !s.ok()) {
    return Fail(2, s.ToString());
  }

  ringcache::InitDaemonProcess();

  ringcache::datanode::StoreOptions store_options{cfg.data_dir, cfg.block_cache_bytes};
  store_options.cluster_id = cfg.cluster_id;
  std::shared_ptr<ringcache::datanode::SyncFaultFileSystem> fault_fs;
  std::unique_ptr<ringcache::DiskFaultsWatcher> fault_watcher;
  if (!disk_faults_file.empty()) {
    fault_fs = std::make_shared<ringcache::datanode::SyncFaultFileSystem>(
        rocksdb::FileSystem::Default());
    fault_watcher = std::make_unique<ringcache::DiskFaultsWatcher>(
        disk_faults_file, [fs = fault_fs.get()](const ringcache::DiskFaults& f) {
          fs->SetSyncDelayMs(f.sync_delay_ms);
          fs->SetFull(f.full);
        });
    store_options.file_system = fault_fs;
  }
  auto store = ringcache::datanode::BlockStore::Open(store_options);
  if (!store.ok()) return Fail(1, store.status().ToString());

  ringcache::metrics::Registry* registry = ringcache::metrics::Registry::Default();
  ringcache::datanode::HddEmulator hdd_emu(cfg.hdd, ringcache::Clock::Real());
  ringcache::datanode::DataNodeService service(cfg.node_id, store->get(), &hdd_emu, registry);
  service.SetLogLimit(cfg.log_limit_bytes);
  ringcache::datanode::Scrubber::Options so;
  so.interval = absl::Seconds(cfg.scrub_interval_s);
  so.mb_s = cfg.scrub_mb_s;
  auto scrubber =
      std::make_unique<ringcache::datanode::Scrubber>(cfg.node_id, store->get(), so, registry);
  service.SetScrubber(scrubber.get());
  registry->GetGauge("ringcache_build_info", "Build information.",
                     {{"version", ringcache::Version()}, {"role", "datanode"}})
      ->Set(1);
  registry->GetGauge("ringcache_datanode_hdd_emulation_enabled",
                     "1 when HDD emulation delays requests.")
      ->Set(cfg.hdd.enabled ? 1 : 0);

  grpc::ServerBuilder builder;
  ringcache::ExclusivePort(&builder);  // a port in use fails the start (common/grpc_channel.h)
  ringcache::KeepServerThreads(&builder);
  int grpc_port = 0;
  // Mutual TLS with --tls-dir: cache nodes and gateways call a data node (common/grpc_tls.h).
  builder.AddListeningPort(
      cfg.listen,
      ringcache::tls::ServerCredentialsFor({ringcache::tls::kRoleCacheNode,
                                            ringcache::tls::kRoleGateway}),
      &grpc_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) return Fail(1, absl::StrCat("cannot listen on ", cfg.listen));

  ringcache::MetricsServer http;
  auto http_port =
      ringcache::ServeMetrics(&http, registry, cfg.http_listen, flags.metrics_web_config);
  if (!http_port.ok()) return Fail(1, http_port.status().ToString());
  spdlog::info("ringcache-datanode {} serving gRPC on port {}, metrics on port {}, data in {}{}",
               cfg.node_id, grpc_port, *http_port, cfg.data_dir,
               cfg.hdd.enabled ? " (HDD emulation on)" : "");
  // Cluster mode: register (after serving, so that whoever sees the record can reach us).
  std::unique_ptr<ringcache::membership::Presence> presence;
  if (etcd_settings.enabled()) {
    std::string host;
    int unused = 0;
    if (absl::Status s = ringcache::SplitHostPort(cfg.listen, &host, &unused); !s.ok()) {
      return Fail(2, s.ToString());
    }
    ringcache::membership::NodeRecord record;
    record.role = ringcache::membership::Role::kData;
    record.id = cfg.node_id;
    record.address = absl::StrCat(host, ":", grpc_port);
    record.http_address = absl::StrCat(host, ":", *http_port);
    record.capacity_bytes = cfg.capacity_bytes;
    record.zone = cfg.zone;
    record.incarnation = (*store)->incarnation();
    auto p = ringcache::membership::Presence::Start(etcd_settings, record);
    if (!p.ok()) return Fail(1, p.status().ToString());
    presence = *std::move(p);
    spdlog::info("registered in etcd as {} (lease TTL {} s)", presence->registration()->key(),
                 cfg.etcd_lease_ttl_s);
  }
  if (absl::Status s = ringcache::WriteReadyFile(
          cfg.ready_file, {{"grpc_port", grpc_port}, {"http_port", *http_port}});
      !s.ok()) {
    return Fail(1, s.ToString());
  }

  spdlog::info("signal {}: shutting down", ringcache::WaitForTerminationSignal());
  presence.reset();  // revoke the lease: leave the membership at once
  service.SetDraining();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  http.Stop();
  scrubber.reset();  // before the store it reads
  if (absl::Status s = (*store)->FlushAll(); !s.ok()) spdlog::warn("flush: {}", s.ToString());
  store->reset();
  spdlog::info("stopped");
  return 0;
}
