// ringcache-local: single-process mode (docs/design.md §1, §8). The gateway, K cache nodes and M
// data nodes run in one process with a static ring and no etcd; data lives under one directory.
// Data nodes still serve gRPC on 127.0.0.1 (ephemeral ports) so the cache nodes use exactly the
// code path of a cluster; the gateway calls its cache nodes in-process.
//
// Exit codes: 0 clean shutdown (SIGINT/SIGTERM), 1 runtime failure, 2 bad configuration.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "cachenode/cache_node.h"
#include "datanode/client/datanode_pool.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/grpc_channel.h"
#include "common/status_macros.h"
#include "common/daemon.h"
#include "common/socket.h"
#include "common/metrics.h"
#include "datanode/config.h"
#include "datanode/service.h"
#include "datanode/store.h"
#include "gateway/catalog.h"
#include "gateway/frontends.h"
#include "gateway/router.h"
#include "membership/daemon_flags.h"
#include "tools/local/local_cache_client.h"
#include "common/version.h"

namespace {

using namespace ringcache;  // NOLINT: a main file

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "ringcache-local: %s\n", msg.c_str());
  return code;
}

struct LocalConfig {
  std::string data_dir = "./ringcache-data";
  uint32_t cache_nodes = 2;
  uint32_t data_nodes = 3;
  uint32_t replication = 0;  // 0: min(3, data_nodes)
  uint64_t ssd_bytes = 1ull << 30;
  uint64_t ram_bytes = 64ull << 20;
  uint32_t block_size = 4096;
  std::string policy = policy::kDefaultPolicy;
  std::string placement = "uarc";
  std::string nbd_listen = "127.0.0.1:10809";
  std::string admin_listen = "127.0.0.1:7200";
  std::string http_listen = "127.0.0.1:9200";
  std::string ready_file;
  std::vector<std::string> create_vdis;  // NAME:SIZE
  datanode::HddConfig hdd;
  // Destage knobs of every cache node (cachenode/cache_node.h CacheNodeConfig).
  double idle_ops_per_s = 100;
  double dirty_high_watermark = 0.6;
  double dirty_low_watermark = 0.4;
  double forced_destage_mb_s = 64;
  uint64_t log_limit_bytes = 4ull << 30;  // per data node

  absl::Status LoadYaml(const std::string& path) {
    auto root = LoadYamlFile(path);
    if (!root.ok()) return root.status();
    YamlFields f(*root, path);
    f.Read("data_dir", &data_dir);
    f.Read("cache_nodes", &cache_nodes);
    f.Read("data_nodes", &data_nodes);
    f.Read("replication", &replication);
    f.ReadSize("ssd_bytes", &ssd_bytes);
    f.ReadSize("ram_bytes", &ram_bytes);
    f.Read("block_size", &block_size);
    f.Read("policy", &policy);
    f.Read("placement", &placement);
    f.Read("nbd_listen", &nbd_listen);
    f.Read("admin_listen", &admin_listen);
    f.Read("http_listen", &http_listen);
    f.Read("ready_file", &ready_file);
    datanode::ReadHddConfig(&f, &hdd);
    {
      YamlFields d = f.Sub("destage");
      d.Read("idle_ops_per_s", &idle_ops_per_s);
      d.Read("dirty_high_watermark", &dirty_high_watermark);
      d.Read("dirty_low_watermark", &dirty_low_watermark);
      d.Read("forced_destage_mb_s", &forced_destage_mb_s);
      RC_RETURN_IF_ERROR(d.Finish());
    }
    f.ReadSize("log_limit_bytes", &log_limit_bytes);
    return f.Finish();
  }
};

struct DataNodeProc {
  std::unique_ptr<datanode::BlockStore> store;
  std::unique_ptr<datanode::HddEmulator> hdd;
  std::unique_ptr<datanode::DataNodeService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringcache-local: gateway, cache nodes and data nodes in one process (static ring, no "
      "etcd).\nServes VDIs over NBD at nbd://HOST:PORT/NAME; --config FILE.yaml, flags override."};
  app.set_version_flag("--version", VersionLine("ringcache-local"));
  std::string config_path;
  LocalConfig cfg;
  std::optional<std::string> data_dir, nbd_listen, admin_listen, http_listen, ready_file, policy,
      placement, ssd_size, ram_size;
  std::optional<uint32_t> cache_nodes, data_nodes, replication, block_size;
  std::optional<double> seek_ms;
  bool hdd = false;
  std::vector<std::string> create;
  app.add_option("--config", config_path, "YAML configuration file")->check(CLI::ExistingFile);
  app.add_option("--data-dir", data_dir, "Directory for all state (default ./ringcache-data)");
  app.add_option("--cache-nodes", cache_nodes, "Number of cache nodes K (default 2)");
  app.add_option("--data-nodes", data_nodes, "Number of data nodes M (default 3)");
  app.add_option("--replication", replication, "Default VDI replication N (default min(3, M))");
  app.add_option("--ssd-size", ssd_size, "SSD tier per cache node (default 1GiB)");
  app.add_option("--ram-size", ram_size, "RAM tier per cache node (default 64MiB)");
  app.add_option("--block-size", block_size, "Cache block size, 4096..65536 (default 4096)");
  app.add_option("--policy", policy, absl::StrCat("Cache policy spec (default ", policy::kDefaultPolicy, ")"));
  app.add_option(
      "--placement", placement,
      "RAM/SSD placement: uarc|lru, optionally NAME(exclusive) (the RAM tier adds capacity) "
      "and/or NAME(sieve=N) (SE-UARC); default uarc");
  app.add_option("--nbd-listen", nbd_listen, "NBD address (default 127.0.0.1:10809)");
  app.add_option("--admin-listen", admin_listen, "Admin gRPC address (default 127.0.0.1:7200)");
  app.add_option("--http-listen", http_listen, "HTTP /metrics address (default 127.0.0.1:9200)");
  app.add_option("--create-vdi", create, "Create VDI NAME:SIZE at start if missing (repeatable)");
  app.add_option("--ready-file", ready_file, "Write the bound ports as JSON here once serving");
  app.add_flag("--hdd-emulation", hdd, "Emulate HDDs on the data nodes (5 ms per request)");
  app.add_option("--hdd-seek-ms", seek_ms, "Emulated HDD seek per request (ms)");
  std::optional<double> high_wm, forced_mb_s, idle_ops;
  std::optional<std::string> log_limit;
  app.add_option("--dirty-high-watermark", high_wm,
                 "Dirty fraction of SSD slots that forces destage under load (default 0.6)");
  app.add_option("--forced-destage-mb-s", forced_mb_s,
                 "Rate limit of forced destage in MiB/s (default 64)");
  app.add_option("--idle-ops-per-s", idle_ops,
                 "Block ops/s under which a cache node counts as idle and destages (default 100)");
  app.add_option("--log-limit", log_limit,
                 "Write-back log area per data node above which cache nodes are pushed to "
                 "destage (default 4GiB)");
  std::string tls_dir;
  bool insecure = false;
  app.add_option("--tls-dir", tls_dir,
                 "Serve NBD over TLS with the credentials in this directory (ca-cert.pem, "
                 "cert.pem, key.pem; `ringcachectl tls`). The in-process gRPC stays in-process.")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--insecure", insecure,
               "Allow plaintext listeners on addresses other than loopback (refused by default)");
  gateway::NbdTlsFlags nbd_tls;
  nbd_tls.AddTo(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!config_path.empty()) {
    if (absl::Status s = cfg.LoadYaml(config_path); !s.ok()) return Fail(2, s.ToString());
  }
  if (high_wm) cfg.dirty_high_watermark = *high_wm;
  if (forced_mb_s) cfg.forced_destage_mb_s = *forced_mb_s;
  if (idle_ops) cfg.idle_ops_per_s = *idle_ops;
  if (log_limit) {
    auto v = ParseByteSize(*log_limit);
    if (!v.ok()) return Fail(2, absl::StrCat("--log-limit: ", v.status().message()));
    cfg.log_limit_bytes = *v;
  }
  if (data_dir) cfg.data_dir = *data_dir;
  if (cache_nodes) cfg.cache_nodes = *cache_nodes;
  if (data_nodes) cfg.data_nodes = *data_nodes;
  if (replication) cfg.replication = *replication;
  if (block_size) cfg.block_size = *block_size;
  if (policy) cfg.policy = *policy;
  if (placement) cfg.placement = *placement;
  if (nbd_listen) cfg.nbd_listen = *nbd_listen;
  if (admin_listen) cfg.admin_listen = *admin_listen;
  if (http_listen) cfg.http_listen = *http_listen;
  if (ready_file) cfg.ready_file = *ready_file;
  if (hdd) cfg.hdd.enabled = true;
  if (seek_ms) cfg.hdd.seek_ms = *seek_ms;
  for (auto& [opt, field] : {std::pair{&ssd_size, &cfg.ssd_bytes}, {&ram_size, &cfg.ram_bytes}}) {
    if (!*opt) continue;
    auto v = ParseByteSize(**opt);
    if (!v.ok()) return Fail(2, v.status().ToString());
    *field = *v;
  }
  cfg.create_vdis.insert(cfg.create_vdis.end(), create.begin(), create.end());
  if (cfg.cache_nodes == 0 || cfg.cache_nodes > 64 || cfg.data_nodes == 0 ||
      cfg.data_nodes > 64) {
    return Fail(2, "cache_nodes and data_nodes must be in [1, 64]");
  }
  if (cfg.replication == 0) cfg.replication = std::min<uint32_t>(3, cfg.data_nodes);
  if (cfg.replication > cfg.data_nodes) {
    return Fail(2, absl::StrCat("replication ", cfg.replication, " exceeds the ",
                                cfg.data_nodes, " data nodes"));
  }
  if (absl::Status s = cfg.hdd.Validate(); !s.ok()) return Fail(2, s.ToString());
  if (absl::Status s = EnsureWritableDir(cfg.data_dir); !s.ok()) return Fail(2, s.ToString());
  gateway::FrontendConfig fc{cfg.nbd_listen, cfg.admin_listen, cfg.http_listen};
  {
    std::shared_ptr<const tls::Identity> identity;
    if (!tls_dir.empty()) {
      absl::StatusOr<std::shared_ptr<const tls::Identity>> id = tls::LoadIdentity(tls_dir);
      if (!id.ok()) return Fail(2, id.status().ToString());
      identity = *id;
    }
    if (absl::Status s = nbd_tls.Resolve(identity, &fc); !s.ok()) return Fail(2, s.ToString());
    membership::DaemonFlags listeners;  // the same refusal rule as the daemons
    listeners.insecure = insecure;
    for (const auto& [what, address, encrypted] :
         {std::tuple<std::string, std::string, bool>{"NBD", fc.nbd_listen,
                                                     fc.nbd_tls == gateway::nbd::TlsMode::kRequire},
          {"the admin API", fc.admin_listen, false},
          {"/metrics", fc.http_listen, false}}) {
      if (absl::Status s = listeners.CheckListener(what, address, encrypted); !s.ok()) {
        return Fail(2, s.ToString());
      }
    }
  }

  InitDaemonProcess();

  metrics::Registry* registry = metrics::Registry::Default();
  registry->GetGauge("ringcache_build_info", "Build information.",
                     {{"version", Version()}, {"role", "local"}})
      ->Set(1);

  // Data nodes.
  std::vector<DataNodeProc> dns(cfg.data_nodes);
  std::vector<datanode::DataNodeEndpoint> endpoints;
  for (uint32_t i = 0; i < cfg.data_nodes; ++i) {
    DataNodeProc& d = dns[i];
    auto store = datanode::BlockStore::Open(
        {absl::StrCat(cfg.data_dir, "/datanode-", i + 1), 32ull << 20});
    if (!store.ok()) return Fail(1, store.status().ToString());
    d.store = std::move(*store);
    d.hdd = std::make_unique<datanode::HddEmulator>(cfg.hdd, Clock::Real());
    d.service = std::make_unique<datanode::DataNodeService>(i + 1, d.store.get(), d.hdd.get(),
                                                            registry);
    d.service->SetLogLimit(cfg.log_limit_bytes);
    grpc::ServerBuilder b;
    ExclusivePort(&b);  // a port in use fails the start (common/grpc_channel.h)
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &d.port);
    b.RegisterService(d.service.get());
    b.SetMaxReceiveMessageSize(64 << 20);
    b.SetMaxSendMessageSize(64 << 20);
    d.server = b.BuildAndStart();
    if (!d.server || d.port == 0) return Fail(1, "cannot start an embedded data node");
    endpoints.push_back({i + 1, absl::StrCat("127.0.0.1:", d.port), 1.0, ""});
  }
  auto pool = datanode::DataNodePool::Create(endpoints, registry);
  if (!pool.ok()) return Fail(1, pool.status().ToString());

  // Cache nodes.
  std::vector<std::unique_ptr<cachenode::CacheNode>> cns;
  std::vector<gateway::CacheMember> members;
  std::vector<v1::NodeInfo> infos;
  for (uint32_t i = 0; i < cfg.cache_nodes; ++i) {
    cachenode::CacheNodeConfig cc;
    cc.node_id = i + 1;
    const std::string dir = absl::StrCat(cfg.data_dir, "/cachenode-", i + 1);
    if (absl::Status s = EnsureWritableDir(dir); !s.ok()) return Fail(2, s.ToString());
    cc.ssd_path = dir + "/ssd.slots";
    cc.ssd_bytes = cfg.ssd_bytes;
    cc.ram_bytes = cfg.ram_bytes;
    cc.block_size = cfg.block_size;
    cc.policy = cfg.policy;
    cc.placement = cfg.placement;
    cc.idle_ops_per_s = cfg.idle_ops_per_s;
    cc.dirty_high_watermark = cfg.dirty_high_watermark;
    cc.dirty_low_watermark = std::min(cfg.dirty_low_watermark, cfg.dirty_high_watermark);
    cc.forced_destage_mb_s = cfg.forced_destage_mb_s;
    auto node = cachenode::CacheNode::Create(cc, pool->get(), Clock::Real(), registry);
    if (!node.ok()) {
      return Fail(node.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1,
                  node.status().ToString());
    }
    members.push_back({i + 1, 1.0, local::MakeLocalCacheClient(node->get())});
    cns.push_back(std::move(*node));
    v1::NodeInfo n;
    n.set_role("cachenode");
    n.set_id(i + 1);
    n.set_address("in-process");
    n.set_capacity_bytes(cfg.ssd_bytes);
    n.set_state("up");
    infos.push_back(n);
  }
  for (const auto& e : endpoints) {
    v1::NodeInfo n;
    n.set_role("datanode");
    n.set_id(e.id);
    n.set_address(e.address);
    n.set_state("up");
    infos.push_back(n);
  }

  gateway::VdiDefaults defaults;
  defaults.block_size = cfg.block_size;
  defaults.replication = cfg.replication;
  auto catalog = gateway::Catalog::Open(cfg.data_dir + "/catalog.txt", defaults);
  if (!catalog.ok()) return Fail(1, catalog.status().ToString());
  auto router = gateway::Router::Create(catalog->get(), std::move(members), pool->get());
  if (!router.ok()) return Fail(1, router.status().ToString());
  if (absl::Status s = (*router)->LoadRemoved(cfg.data_dir + "/removed_cache_nodes"); !s.ok()) {
    return Fail(1, s.ToString());
  }
  if (absl::Status s = (*router)->RegisterAll(); !s.ok()) return Fail(1, s.ToString());
  if (absl::Status s = gateway::CreateVdisFromSpecs(router->get(), cfg.create_vdis); !s.ok()) {
    return Fail(2, s.ToString());
  }

  gateway::Frontends fe;
  if (absl::Status s = fe.Start(fc, router->get(), infos, registry);
      !s.ok()) {
    return Fail(1, s.ToString());
  }
  // Single-process mode has a static data ring: nothing is ever rebalanced.
  fe.admin()->SetDataRingSource(
      [p = pool->get()] {
        v1::DataRebalance r;
        r.set_state("idle");
        const datanode::DataRing ring = p->ring();
        r.set_data_epoch(ring.epoch);
        for (uint32_t id : ring.members) r.add_members(id);
        return r;
      },
      [p = pool->get()] { return p->ring(); });
  std::string nbd_host;
  int ignored = 0;
  (void)SplitHostPort(cfg.nbd_listen, &nbd_host, &ignored);
  spdlog::info("ringcache-local ready: NBD nbd://{}:{}/<vdi>, admin port {}, metrics port {} "
               "({} cache nodes, {} data nodes, data in {})",
               nbd_host, fe.nbd_port(), fe.admin_port(), fe.http_port(), cfg.cache_nodes,
               cfg.data_nodes, cfg.data_dir);
  if (absl::Status s = WriteReadyFile(cfg.ready_file, {{"nbd_port", fe.nbd_port()},
                                                       {"admin_port", fe.admin_port()},
                                                       {"http_port", fe.http_port()}});
      !s.ok()) {
    return Fail(1, s.ToString());
  }

  spdlog::info("signal {}: shutting down", WaitForTerminationSignal());
  fe.Stop();
  router->reset();
  cns.clear();  // stops destage threads; dirty blocks stay on the SSD tier
  for (auto& d : dns) {
    d.service->SetDraining();
    d.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    (void)d.store->FlushAll();
  }
  spdlog::info("stopped");
  return 0;
}
