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

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cachenode/cache_node.h"
#include "cachenode/service.h"
#include "common/cluster_file.h"
#include "common/config.h"
#include "common/grpc_channel.h"
#include "common/daemon.h"
#include "common/http_server.h"
#include "membership/daemon_flags.h"
#include "membership/presence.h"

namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "ringcache-cachenode: %s\n", msg.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringcache;  // NOLINT: a main file
  CLI::App app{"ringcache-cachenode: SSD cache node of ringcache.\n"
               "Reads its settings and its data nodes from the static cluster file."};
  membership::DaemonFlags flags;
  uint32_t id = 0;
  std::optional<std::string> listen, http_listen, ssd_path, ready_file, policy, placement;
  flags.AddTo(&app, /*cluster_required=*/true, "Static cluster file (YAML)",
              "register in etcd and serve only while the lease is valid");
  app.add_option("--id", id, "This cache node's id in the cluster file")->required();
  app.add_option("--listen", listen, "gRPC address (overrides the cluster file)");
  app.add_option("--http-listen", http_listen, "HTTP /metrics address");
  app.add_option("--ssd-path", ssd_path, "SSD slot file or block device "
                                          "(default <data_dir>/cachenode-<id>/ssd.slots)");
  app.add_option("--policy", policy, "Policy spec (default from the cluster file)");
  app.add_option("--placement", placement, "RAM/SSD placement: uarc|lru");
  app.add_option("--ready-file", ready_file, "Write the bound ports as JSON here once serving");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto cluster = ClusterFile::Load(flags.cluster_path);
  if (!cluster.ok()) return Fail(2, cluster.status().ToString());
  auto self = cluster->Find("cachenode", id);
  if (!self.ok()) return Fail(2, self.status().ToString());
  if (listen) self->listen = *listen;
  if (http_listen) self->http_listen = *http_listen;
  const std::string dir = cluster->NodeDir(*self);
  if (absl::Status s = EnsureWritableDir(dir); !s.ok()) return Fail(2, s.ToString());

  cachenode::CacheNodeConfig cc;
  cc.node_id = id;
  cc.ssd_path = ssd_path ? *ssd_path : dir + "/ssd.slots";
  cc.ssd_bytes = self->ssd_bytes;
  cc.ram_bytes = self->ram_bytes;
  cc.block_size = cluster->block_size;
  cc.policy = policy ? *policy : cluster->policy;
  cc.placement = placement ? *placement : cluster->placement;
  if (absl::Status s = cc.Validate(); !s.ok()) return Fail(2, s.ToString());
  const membership::EtcdSettings etcd_settings = flags.Resolve(
      {cluster->etcd_endpoints, cluster->etcd_prefix, static_cast<int>(cluster->etcd_lease_ttl_s)});
  if (absl::Status s = etcd_settings.Validate(); !s.ok()) return Fail(2, s.ToString());

  InitDaemonProcess();
  metrics::Registry* registry = metrics::Registry::Default();
  registry->GetGauge("ringcache_build_info", "Build information.",
                     {{"version", "0.1.0"}, {"role", "cachenode"}})
      ->Set(1);
  std::vector<datanode::DataNodeEndpoint> endpoints;
  for (const auto& n : cluster->OfRole("datanode")) {
    endpoints.push_back({n.id, n.listen, n.weight, n.zone});
  }
  // A data ring set at run time (a rebalance after data nodes joined) wins over the file's list.
  auto saved = datanode::LoadDataRing(cachenode::CacheNode::DataRingPath(cc.ssd_path));
  if (!saved.ok()) return Fail(1, saved.status().ToString());
  auto pool = saved->has_value()
                  ? datanode::DataNodePool::Create(**saved, registry)
                  : datanode::DataNodePool::Create(endpoints, registry);
  if (!pool.ok()) return Fail(2, pool.status().ToString());
  if (saved->has_value()) {
    spdlog::info("data ring epoch {} from {} ({} members)", (*saved)->epoch,
                 cachenode::CacheNode::DataRingPath(cc.ssd_path), (*saved)->members.size());
  }
  auto node = cachenode::CacheNode::Create(cc, pool->get(), Clock::Real(), registry);
  if (!node.ok()) return Fail(1, node.status().ToString());

  // Cluster mode: the fence reads the registration, which exists only once we serve (below);
  // until then (and in static mode) `presence` is null and the fence is open.
  std::unique_ptr<membership::Presence> presence;
  // The fence reads the registration under reg_mu, so that shutdown can take it away safely.
  absl::Mutex reg_mu;
  membership::NodeRegistration* registration = nullptr;  // guarded by reg_mu
  bool leaving = false;                                  // guarded by reg_mu
  std::unique_ptr<cachenode::Fence> fence;
  if (etcd_settings.enabled()) {
    fence = std::make_unique<cachenode::Fence>([&] {
      absl::MutexLock l(&reg_mu);
      if (leaving) return false;  // lease revoked at shutdown
      return registration == nullptr || registration->LeaseValid();
    });
    cachenode::Fence* f = fence.get();
    (*node)->SetDestageGate([f] { return f->Open(); });
    // A previous run registered under a lease that is gone now (expired after a crash, or
    // revoked at shutdown): the gateway may have given our objects away and replayed our log.
    // Stay quiet until it re-admits us (docs/durability.md, fencing protocol).
    if (const int64_t old = (*node)->ownership()->lease(); old != 0) {
      if (absl::Status q = (*node)->ownership()->Quarantine(absl::StrCat(
              "restarted: the previous run's etcd lease ", old,
              " is gone, its objects may have moved"));
          !q.ok()) {
        return Fail(1, q.ToString());
      }
    }
  }
  // Whatever way main returns, the node (and its destager, which asks the fence) stops before
  // the fence and the registration it reads are destroyed (a failed listen crashed here).
  auto stop_node_first = absl::MakeCleanup([&node] { node->reset(); });
  cachenode::CacheNodeService service(node->get(), registry);
  grpc::ServerBuilder b;
  ExclusivePort(&b);  // a port in use fails the start (common/grpc_channel.h)
  int port = 0;
  b.AddListeningPort(self->listen, grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  b.SetMaxReceiveMessageSize(64 << 20);
  b.SetMaxSendMessageSize(64 << 20);
  AllowPeerKeepalive(&b);  // the gateway pings (common/grpc_channel.h)
  auto server = b.BuildAndStart();
  if (!server || port == 0) return Fail(1, absl::StrCat("cannot listen on ", self->listen));
  HttpServer http;
  auto http_port = ServeMetrics(&http, registry, self->http_listen);
  if (!http_port.ok()) return Fail(1, http_port.status().ToString());
  spdlog::info("ringcache-cachenode {} serving gRPC on port {}, metrics on port {}, SSD {}", id,
               port, *http_port, cc.ssd_path);
  if (etcd_settings.enabled()) {
    std::string host;
    int unused = 0;
    if (absl::Status s = SplitHostPort(self->listen, &host, &unused); !s.ok()) {
      return Fail(2, s.ToString());
    }
    membership::NodeRecord record;
    record.role = membership::Role::kCache;
    record.id = id;
    record.address = absl::StrCat(host, ":", port);
    record.http_address = absl::StrCat(host, ":", *http_port);
    record.capacity_bytes = cc.ssd_bytes;
    record.weight = self->weight;
    record.zone = self->zone;
    cachenode::Ownership* own = (*node)->ownership();
    // Noted before the record appears in etcd: a crash right after registering must still make
    // the next start quarantined (the real lease id follows once it is known).
    if (absl::Status s = own->NoteLease(-1); !s.ok()) return Fail(1, s.ToString());
    auto p = membership::Presence::Start(etcd_settings, record, [own](int64_t lease, int64_t) {
      // Runs before the new lease's validity window opens (membership.h).
      own->NoteLease(lease).IgnoreError();
      own->Quarantine("etcd lease was lost").IgnoreError();
    });
    if (!p.ok()) return Fail(1, p.status().ToString());
    presence = *std::move(p);
    {
      absl::MutexLock l(&reg_mu);
      registration = presence->registration();
    }
    if (absl::Status s = (*node)->ownership()->NoteLease(presence->registration()->lease_id());
        !s.ok()) {
      return Fail(1, s.ToString());
    }
    spdlog::info("registered in etcd as {} (lease TTL {} s); serving only while it is valid",
                 presence->registration()->key(), etcd_settings.lease_ttl_s);
  }
  if (absl::Status s = WriteReadyFile(ready_file.value_or(""),
                                      {{"grpc_port", port}, {"http_port", *http_port}});
      !s.ok()) {
    return Fail(1, s.ToString());
  }
  // Cluster mode: a failed SSD (sticky, docs/durability.md) gives up the lease, so the gateway
  // takes this node out at once and recovers its dirty blocks from their log replicas (the node
  // is fenced and quarantined already; it stays unregistered until restarted).
  absl::Mutex presence_mu;  // serialises the two ways the lease is given up
  std::atomic<bool> stop_device_watch{false};
  auto give_up_lease = [&] {
    {
      absl::MutexLock l(&reg_mu);
      leaving = true;
      registration = nullptr;
    }
    absl::MutexLock l(&presence_mu);
    presence.reset();  // revoke the lease: the gateway settles our objects at once
  };
  std::thread device_watch;
  if (presence != nullptr) {
    device_watch = std::thread([&] {
      while (!stop_device_watch.load()) {
        if (absl::Status d = (*node)->device_status(); !d.ok()) {
          spdlog::error("{}; giving up the etcd lease so the gateway replays this node's log",
                        std::string(d.message()));
          give_up_lease();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  spdlog::info("signal {}: shutting down", WaitForTerminationSignal());
  stop_device_watch.store(true);
  if (device_watch.joinable()) device_watch.join();
  give_up_lease();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  http.Stop();
  node->reset();  // dirty blocks stay on the SSD tier and are destaged after restart
  spdlog::info("stopped");
  return 0;
}
