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
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cachenode/cache_node.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/daemon.h"
#include "common/grpc_channel.h"
#include "common/malloc_tuning.h"
#include "common/metrics.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "coordinator/catalog.h"
#include "datanode/client/datanode_pool.h"
#include "datanode/config.h"
#include "datanode/service.h"
#include "datanode/store.h"
#include "gateway/frontends.h"
#include "gateway/router.h"
#include "membership/daemon_flags.h"
#include "tools/local/local_cache_client.h"

namespace {

using namespace ringcache;  // NOLINT: a main file

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
  int64_t dirty_age_target_ms = 30000;
  double dirty_cap = 0;      // 0: the cache node's default
  double vdi_dirty_cap = 0;  // 0: no per-VDI cap
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
      d.Read("dirty_age_target_ms", &dirty_age_target_ms);
      d.Read("dirty_cap", &dirty_cap);
      d.Read("vdi_dirty_cap", &vdi_dirty_cap);
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

// The flags as given (optional ones unset when absent).
struct Flags {
  std::string config_path;
  std::optional<std::string> data_dir, nbd_listen, admin_listen, http_listen, ready_file, policy,
      placement, ssd_size, ram_size, log_limit;
  std::optional<uint32_t> cache_nodes, data_nodes, replication, block_size;
  std::optional<double> seek_ms, high_wm, forced_mb_s, idle_ops;
  std::optional<int64_t> dirty_age_ms;
  bool hdd = false;
  std::vector<std::string> create;
  std::string tls_dir;
  bool insecure = false;
  gateway::NbdFlags nbd_tls;
  std::optional<std::string> log_level;
};

void AddFlags(CLI::App* app, Flags* f) {
  app->add_option("--config", f->config_path, "YAML configuration file")->check(CLI::ExistingFile);
  app->add_option("--data-dir", f->data_dir, "Directory for all state (default ./ringcache-data)");
  app->add_option("--cache-nodes", f->cache_nodes, "Number of cache nodes K (default 2)");
  app->add_option("--data-nodes", f->data_nodes, "Number of data nodes M (default 3)");
  app->add_option("--replication", f->replication, "Default VDI replication N (default min(3, M))");
  app->add_option("--ssd-size", f->ssd_size, "SSD tier per cache node (default 1GiB)");
  app->add_option("--ram-size", f->ram_size, "RAM tier per cache node (default 64MiB)");
  app->add_option("--block-size", f->block_size, "Cache block size, 4096..65536 (default 4096)");
  app->add_option("--policy", f->policy,
                  absl::StrCat("Cache policy spec (default ", policy::kDefaultPolicy, ")"));
  app->add_option(
      "--placement", f->placement,
      "RAM/SSD placement: uarc|lru, optionally NAME(exclusive) (the RAM tier adds capacity) "
      "and/or NAME(sieve=N) (SE-UARC); default uarc");
  app->add_option("--nbd-listen", f->nbd_listen, "NBD address (default 127.0.0.1:10809)");
  app->add_option("--admin-listen", f->admin_listen, "Admin gRPC address (default 127.0.0.1:7200)");
  app->add_option("--http-listen", f->http_listen,
                  "HTTP /metrics address (default 127.0.0.1:9200)");
  app->add_option("--create-vdi", f->create,
                  "Create VDI NAME:SIZE at start if missing (repeatable)");
  app->add_option("--ready-file", f->ready_file, "Write the bound ports as JSON here once serving");
  app->add_flag("--hdd-emulation", f->hdd, "Emulate HDDs on the data nodes (5 ms per request)");
  app->add_option("--hdd-seek-ms", f->seek_ms, "Emulated HDD seek per request (ms)");
  app->add_option("--dirty-high-watermark", f->high_wm,
                  "Dirty fraction of SSD slots that forces destage under load (default 0.6)");
  app->add_option("--forced-destage-mb-s", f->forced_mb_s,
                  "Rate limit of forced destage in MiB/s (default 64)");
  app->add_option("--idle-ops-per-s", f->idle_ops,
                  "Block ops/s under which a cache node counts as idle and destages (default "
                  "100)");
  app->add_option("--dirty-age-target-ms", f->dirty_age_ms,
                  "Under load, destage keeps the oldest dirty block younger than about this "
                  "(0: destage only when idle or above the high watermark; default 30000)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}));
  app->add_option("--log-limit", f->log_limit,
                  "Write-back log area per data node above which cache nodes are pushed to "
                  "destage (default 4GiB)");
  app->add_option("--tls-dir", f->tls_dir,
                  "Serve NBD over TLS with the credentials in this directory (ca-cert.pem, "
                  "cert.pem, key.pem; `ringcachectl tls`). The in-process gRPC stays in-process.")
      ->check(CLI::ExistingDirectory);
  app->add_flag("--insecure", f->insecure,
                "Allow plaintext listeners on addresses other than loopback (refused by default)");
  f->nbd_tls.AddTo(app);
  membership::AddLogLevelFlag(app, &f->log_level);
}

// The YAML file, then the flags over it.
absl::StatusOr<LocalConfig> ResolveConfig(const Flags& f) {
  RC_RETURN_IF_ERROR(http_admin::ApplyStartLogLevel(f.log_level));
  LocalConfig cfg;
  if (!f.config_path.empty()) RC_RETURN_IF_ERROR(cfg.LoadYaml(f.config_path));
  if (f.high_wm) cfg.dirty_high_watermark = *f.high_wm;
  if (f.forced_mb_s) cfg.forced_destage_mb_s = *f.forced_mb_s;
  if (f.idle_ops) cfg.idle_ops_per_s = *f.idle_ops;
  if (f.dirty_age_ms) cfg.dirty_age_target_ms = *f.dirty_age_ms;
  if (f.data_dir) cfg.data_dir = *f.data_dir;
  if (f.cache_nodes) cfg.cache_nodes = *f.cache_nodes;
  if (f.data_nodes) cfg.data_nodes = *f.data_nodes;
  if (f.replication) cfg.replication = *f.replication;
  if (f.block_size) cfg.block_size = *f.block_size;
  if (f.policy) cfg.policy = *f.policy;
  if (f.placement) cfg.placement = *f.placement;
  if (f.nbd_listen) cfg.nbd_listen = *f.nbd_listen;
  if (f.admin_listen) cfg.admin_listen = *f.admin_listen;
  if (f.http_listen) cfg.http_listen = *f.http_listen;
  if (f.ready_file) cfg.ready_file = *f.ready_file;
  if (f.hdd) cfg.hdd.enabled = true;
  if (f.seek_ms) cfg.hdd.seek_ms = *f.seek_ms;
  for (const auto& [name, opt, field] :
       {std::tuple{"--log-limit", &f.log_limit, &cfg.log_limit_bytes},
        {"--ssd-size", &f.ssd_size, &cfg.ssd_bytes},
        {"--ram-size", &f.ram_size, &cfg.ram_bytes}}) {
    if (!*opt) continue;
    auto v = ParseByteSize(**opt);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": ", v.status().message()));
    *field = *v;
  }
  cfg.create_vdis.insert(cfg.create_vdis.end(), f.create.begin(), f.create.end());
  if (cfg.cache_nodes == 0 || cfg.cache_nodes > 64 || cfg.data_nodes == 0 || cfg.data_nodes > 64) {
    return absl::InvalidArgumentError("cache_nodes and data_nodes must be in [1, 64]");
  }
  if (cfg.replication == 0) cfg.replication = std::min<uint32_t>(3, cfg.data_nodes);
  if (cfg.replication > cfg.data_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("replication ", cfg.replication, " exceeds the ",
                                                   cfg.data_nodes, " data nodes"));
  }
  RC_RETURN_IF_ERROR(cfg.hdd.Validate());
  RC_RETURN_IF_ERROR(EnsureWritableDir(cfg.data_dir));
  return cfg;
}

// The front ends' listeners, NBD TLS included; plaintext off loopback is refused as by the
// daemons.
absl::StatusOr<gateway::FrontendConfig> ResolveFrontends(const Flags& f, const LocalConfig& cfg) {
  gateway::FrontendConfig fc{cfg.nbd_listen, cfg.admin_listen, cfg.http_listen};
  std::shared_ptr<const tls::Identity> identity;
  if (!f.tls_dir.empty()) {
    RC_ASSIGN_OR_RETURN(identity, tls::LoadIdentity(f.tls_dir));
  }
  RC_RETURN_IF_ERROR(f.nbd_tls.Resolve(identity, &fc));
  membership::DaemonFlags listeners;  // the same refusal rule as the daemons
  listeners.insecure = f.insecure;
  for (const auto& [what, address, encrypted] :
       {std::tuple<std::string, std::string, bool>{"NBD", fc.nbd_listen,
                                                   fc.nbd_tls == gateway::nbd::TlsMode::kRequire},
        {"the admin API", fc.admin_listen, false},
        {"/metrics", fc.http_listen, false}}) {
    RC_RETURN_IF_ERROR(listeners.CheckListener(what, address, encrypted));
  }
  return fc;
}

// The gateway, cache nodes and data nodes of one process, started in order and stopped in
// reverse.
class Local {
 public:
  Local(LocalConfig cfg, gateway::FrontendConfig fc, metrics::Registry* registry)
      : cfg_(std::move(cfg)), fc_(std::move(fc)), registry_(registry) {}
  // The data nodes (gRPC on 127.0.0.1, ephemeral ports) and their pool, then the cache nodes
  // (in-process, called by the router directly).
  absl::Status Open();
  absl::Status Serve();     // catalog, router, front ends
  absl::Status Register();  // the ready file
  void Stop();

 private:
  absl::Status StartDataNodes();
  absl::Status StartCacheNodes();

  const LocalConfig cfg_;
  const gateway::FrontendConfig fc_;
  metrics::Registry* const registry_;
  std::vector<DataNodeProc> dns_;
  std::vector<datanode::DataNodeEndpoint> endpoints_;
  std::unique_ptr<datanode::DataNodePool> pool_;
  std::vector<std::unique_ptr<cachenode::CacheNode>> cns_;
  std::vector<gateway::CacheMember> members_;
  std::vector<v1::NodeInfo> infos_;
  std::unique_ptr<coordinator::Catalog> catalog_;
  std::unique_ptr<gateway::Router> router_;
  gateway::Frontends fe_;
};

absl::Status Local::Open() {
  RC_RETURN_IF_ERROR(StartDataNodes());
  return StartCacheNodes();
}

absl::Status Local::StartDataNodes() {
  dns_.resize(cfg_.data_nodes);
  for (uint32_t i = 0; i < cfg_.data_nodes; ++i) {
    DataNodeProc& d = dns_[i];
    RC_ASSIGN_OR_RETURN(d.store,
                        datanode::BlockStore::Open(
                            {absl::StrCat(cfg_.data_dir, "/datanode-", i + 1), 32ull << 20}));
    d.hdd = std::make_unique<datanode::HddEmulator>(cfg_.hdd, Clock::Real());
    d.service =
        std::make_unique<datanode::DataNodeService>(i + 1, d.store.get(), d.hdd.get(), registry_);
    d.service->SetLogLimit(cfg_.log_limit_bytes);
    grpc::ServerBuilder b;
    ExclusivePort(&b);  // a port in use fails the start (common/grpc_channel.h)
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &d.port);
    b.RegisterService(d.service.get());
    b.SetMaxReceiveMessageSize(64 << 20);
    b.SetMaxSendMessageSize(64 << 20);
    d.server = b.BuildAndStart();
    if (!d.server || d.port == 0) {
      return absl::UnavailableError("cannot start an embedded data node");
    }
    endpoints_.push_back({i + 1, absl::StrCat("127.0.0.1:", d.port), 1.0, ""});
    v1::NodeInfo n;
    n.set_role("datanode");
    n.set_id(i + 1);
    n.set_address(endpoints_.back().address);
    n.set_state("up");
    infos_.push_back(n);
  }
  RC_ASSIGN_OR_RETURN(pool_, datanode::DataNodePool::Create(endpoints_, registry_));
  return absl::OkStatus();
}

absl::Status Local::StartCacheNodes() {
  for (uint32_t i = 0; i < cfg_.cache_nodes; ++i) {
    cachenode::CacheNodeConfig cc;
    cc.node_id = i + 1;
    const std::string dir = absl::StrCat(cfg_.data_dir, "/cachenode-", i + 1);
    if (absl::Status s = EnsureWritableDir(dir); !s.ok()) {
      return absl::InvalidArgumentError(s.ToString());
    }
    cc.ssd_path = dir + "/ssd.slots";
    cc.ssd_bytes = cfg_.ssd_bytes;
    cc.ram_bytes = cfg_.ram_bytes;
    cc.block_size = cfg_.block_size;
    cc.policy = cfg_.policy;
    cc.placement = cfg_.placement;
    cc.idle_ops_per_s = cfg_.idle_ops_per_s;
    cc.dirty_high_watermark = cfg_.dirty_high_watermark;
    cc.dirty_low_watermark = std::min(cfg_.dirty_low_watermark, cfg_.dirty_high_watermark);
    cc.forced_destage_mb_s = cfg_.forced_destage_mb_s;
    cc.dirty_age_target_ms = cfg_.dirty_age_target_ms;
    cc.dirty_cap = cfg_.dirty_cap;
    cc.vdi_dirty_cap = cfg_.vdi_dirty_cap;
    RC_ASSIGN_OR_RETURN(std::unique_ptr<cachenode::CacheNode> node,
                        cachenode::CacheNode::Create(cc, pool_.get(), Clock::Real(), registry_));
    members_.push_back({i + 1, 1.0, local::MakeLocalCacheClient(node.get())});
    cns_.push_back(std::move(node));
    v1::NodeInfo n;
    n.set_role("cachenode");
    n.set_id(i + 1);
    n.set_address("in-process");
    n.set_capacity_bytes(cfg_.ssd_bytes);
    n.set_state("up");
    infos_.insert(infos_.begin() + i, n);  // cache nodes first, as `node list` shows them
  }
  return absl::OkStatus();
}

absl::Status Local::Serve() {
  coordinator::VdiDefaults defaults;
  defaults.block_size = cfg_.block_size;
  defaults.replication = cfg_.replication;
  RC_ASSIGN_OR_RETURN(catalog_,
                      coordinator::Catalog::Open(cfg_.data_dir + "/catalog.txt", defaults));
  RC_ASSIGN_OR_RETURN(router_,
                      gateway::Router::Create(catalog_.get(), std::move(members_), pool_.get()));
  RC_RETURN_IF_ERROR(router_->LoadRemoved(cfg_.data_dir + "/removed_cache_nodes"));
  RC_RETURN_IF_ERROR(router_->RegisterAll());
  if (absl::Status s = gateway::CreateVdisFromSpecs(router_.get(), cfg_.create_vdis); !s.ok()) {
    return absl::InvalidArgumentError(s.ToString());
  }
  RC_RETURN_IF_ERROR(fe_.Start(fc_, router_.get(), infos_, registry_));
  // Single-process mode has a static data ring: nothing is ever rebalanced.
  datanode::DataNodePool* p = pool_.get();
  fe_.admin()->SetDataRingSource(
      [p] {
        v1::DataRebalance r;
        r.set_state("idle");
        const datanode::DataRing ring = p->ring();
        r.set_data_epoch(ring.epoch);
        for (uint32_t id : ring.members) r.add_members(id);
        return r;
      },
      [p] { return p->ring(); });
  std::string nbd_host;
  int ignored = 0;
  (void)SplitHostPort(cfg_.nbd_listen, &nbd_host, &ignored);
  spdlog::info(
      "ringcache-local ready: NBD nbd://{}:{}/<vdi>, admin port {}, metrics port {} "
      "({} cache nodes, {} data nodes, data in {})",
      nbd_host, fe_.nbd_port(), fe_.admin_port(), fe_.http_port(), cfg_.cache_nodes,
      cfg_.data_nodes, cfg_.data_dir);
  return absl::OkStatus();
}

absl::Status Local::Register() {
  return WriteReadyFile(cfg_.ready_file, {{"nbd_port", fe_.nbd_port()},
                                          {"admin_port", fe_.admin_port()},
                                          {"http_port", fe_.http_port()}});
}

void Local::Stop() {
  fe_.Stop();
  router_.reset();
  cns_.clear();  // stops destage threads; dirty blocks stay on the SSD tier
  for (auto& d : dns_) {
    if (d.server == nullptr) continue;
    d.service->SetDraining();
    d.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    (void)d.store->FlushAll();
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: its data nodes' freed memtables are reused (common/malloc_tuning.h).
  const std::string malloc_line = KeepFreedMemoryForReuse();
  CLI::App app{
      "ringcache-local: gateway, cache nodes and data nodes in one process (static ring, no "
      "etcd).\nServes VDIs over NBD at nbd://HOST:PORT/NAME; --config FILE.yaml, flags override."};
  app.set_version_flag("--version", VersionLine("ringcache-local"));
  Flags flags;
  AddFlags(&app, &flags);
  if (std::optional<int> done = membership::ParseCommandLine(&app, argc, argv)) return *done;
  absl::StatusOr<LocalConfig> cfg = ResolveConfig(flags);
  if (!cfg.ok()) return FailExit("ringcache-local", 2, cfg.status().ToString());
  absl::StatusOr<gateway::FrontendConfig> fc = ResolveFrontends(flags, *cfg);
  if (!fc.ok()) return FailExit("ringcache-local", 2, fc.status().ToString());
  return RunDaemon("ringcache-local", "local", [&](metrics::Registry* registry) {
    spdlog::info("ringcache-local: {}", malloc_line);
    return std::make_unique<Local>(*std::move(cfg), *std::move(fc), registry);
  });
}
