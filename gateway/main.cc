// ringcache-gateway: the NBD front end of a static cluster. Routes each object's I/O to its cache
// node on the cache ring (gRPC), keeps the VDI catalog in <data_dir>/gateway-<id>/catalog.txt,
// serves the Admin API for ringcachectl and HTTP /metrics. Peers come from the static cluster file.
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad configuration.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <atomic>
#include <memory>
#include <optional>
#include <tuple>
#include <thread>

#include "absl/strings/str_cat.h"
#include "datanode/client/datanode_pool.h"
#include "gateway/data_rebalancer.h"
#include "gateway/etcd_state.h"
#include "common/cluster_file.h"
#include "common/config.h"
#include "common/daemon.h"
#include "common/grpc_tls.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "gateway/frontends.h"
#include "gateway/cluster_follower.h"
#include "gateway/membership_sync.h"
#include "membership/election.h"
#include "membership/daemon_flags.h"
#include "membership/presence.h"
#include "common/version.h"

namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "ringcache-gateway: %s\n", msg.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringcache;  // NOLINT: a main file
  CLI::App app{"ringcache-gateway: NBD gateway of ringcache (export name = VDI name).\n"
               "Reads its addresses and its peers from the static cluster file."};
  app.set_version_flag("--version", VersionLine("ringcache-gateway"));
  membership::DaemonFlags flags;
  uint32_t id = 1;
  std::optional<std::string> nbd_listen, admin_listen, http_listen, ready_file;
  std::vector<std::string> create;
  bool coordinator = true;
  flags.AddTo(&app, /*cluster_required=*/true, "Static cluster file (YAML)",
              "follow the cache nodes registered in etcd and register this gateway");
  app.add_option("--id", id, "This gateway's id in the cluster file (default 1)");
  app.add_option("--nbd-listen", nbd_listen, "NBD address (overrides the cluster file)");
  app.add_option("--admin-listen", admin_listen, "Admin gRPC address");
  app.add_option("--http-listen", http_listen, "HTTP /metrics address");
  app.add_option("--create-vdi", create,
                 "Create VDI NAME:SIZE at start if missing (repeatable; cluster mode: by the "
                 "coordinator)");
  app.add_option("--coordinator", coordinator,
                 "Cluster mode: stand for election as the coordinator, which makes the "
                 "membership decisions, replays, handoffs, rebalancing and catalog writes "
                 "(default true; false: a pure NBD front end)");
  app.add_option("--ready-file", ready_file, "Write the bound ports as JSON here once serving");
  double down_out_s = 600;
  app.add_option("--datanode-down-out", down_out_s,
                 "Seconds a data node may stay unreachable before it is taken out of the data "
                 "ring and its replicas are made again on the others (0: only `ringcachectl "
                 "datanode out`)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  double refill_mb_s = 64;
  app.add_option("--rebalance-mb-s", refill_mb_s,
                 "Speed limit of replica copies between data nodes (a join, an out node's "
                 "replicas made again, a refill of a new disk), MB/s of block data (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  double busy_mb_s = 16;
  app.add_option("--rebalance-busy-mb-s", busy_mb_s,
                 "Speed limit of those copies while the data nodes serve clients (0: "
                 "--rebalance-mb-s throughout); a copy's bursts cost the clients' latency")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  gateway::NbdTlsFlags nbd_tls;
  nbd_tls.AddTo(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto cluster = ClusterFile::Load(flags.cluster_path);
  if (!cluster.ok()) return Fail(2, cluster.status().ToString());
  auto self = cluster->Find("gateway", id);
  if (!self.ok()) return Fail(2, self.status().ToString());
  gateway::FrontendConfig fc{self->nbd_listen, self->admin_listen, self->http_listen};
  if (nbd_listen) fc.nbd_listen = *nbd_listen;
  if (admin_listen) fc.admin_listen = *admin_listen;
  if (http_listen) fc.http_listen = *http_listen;
  fc.metrics_web_config = flags.metrics_web_config;
  if (absl::Status s = flags.ApplyTls("gateway"); !s.ok()) return Fail(2, s.ToString());
  if (absl::Status s = nbd_tls.Resolve(tls::ProcessIdentity(), &fc); !s.ok()) {
    return Fail(2, s.ToString());
  }
  for (const auto& [what, address, encrypted] :
       {std::tuple<std::string, std::string, bool>{"NBD", fc.nbd_listen,
                                                   fc.nbd_tls == gateway::nbd::TlsMode::kRequire},
        {"the admin API", fc.admin_listen, flags.tls()},
        {"/metrics", fc.http_listen, !fc.metrics_web_config.empty()}}) {
    if (absl::Status s = flags.CheckListener(what, address, encrypted); !s.ok()) {
      return Fail(2, s.ToString());
    }
  }
  const std::string dir = cluster->NodeDir(*self);
  if (absl::Status s = EnsureWritableDir(dir); !s.ok()) return Fail(2, s.ToString());
  const membership::EtcdSettings etcd_settings = flags.Resolve(
      {cluster->etcd_endpoints, cluster->etcd_prefix, static_cast<int>(cluster->etcd_lease_ttl_s)});
  if (absl::Status s = etcd_settings.Validate(); !s.ok()) return Fail(2, s.ToString());

  InitDaemonProcess();
  metrics::Registry* registry = metrics::Registry::Default();
  registry->GetGauge("ringcache_build_info", "Build information.",
                     {{"version", Version()}, {"role", "gateway"}})
      ->Set(1);
  std::vector<datanode::DataNodeEndpoint> endpoints;
  std::vector<v1::NodeInfo> infos;
  for (const auto& n : cluster->nodes) {
    v1::NodeInfo i;
    i.set_role(n.role);
    i.set_id(n.id);
    i.set_address(n.role == "gateway" ? n.nbd_listen : n.listen);
    i.set_capacity_bytes(n.role == "cachenode" ? n.ssd_bytes : 0);
    i.set_zone(n.zone);
    i.set_state("configured");
    infos.push_back(i);
    if (n.role == "datanode") endpoints.push_back({n.id, n.listen, n.weight, n.zone});
  }
  // The data ring as the last rebalance left it (data nodes joined at run time) wins over the
  // cluster file's list.
  const std::string data_ring_path = dir + "/data_ring";
  auto saved_ring = datanode::LoadDataRing(data_ring_path);
  if (!saved_ring.ok()) return Fail(1, saved_ring.status().ToString());
  // Cluster mode: etcd holds the VDI catalog and the data ring (gateway/etcd_state.h); a newer
  // data ring there wins over the local copy.
  std::unique_ptr<membership::EtcdClient> etcd_state;
  if (etcd_settings.enabled()) {
    auto c = membership::ConnectEtcd(etcd_settings);
    if (!c.ok()) return Fail(1, c.status().ToString());
    etcd_state = *std::move(c);
    absl::StatusOr<std::optional<datanode::DataRing>> remote;
    for (int i = 0; i < 60; ++i) {
      remote = gateway::LoadEtcdDataRing(etcd_state.get(), etcd_settings.prefix);
      if (remote.ok() || absl::IsDataLoss(remote.status())) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!remote.ok()) {
      return Fail(1, absl::StrCat("cannot read the data ring from etcd at ",
                                  etcd_settings.endpoints, ": ", remote.status().ToString()));
    }
    if (remote->has_value() &&
        (!saved_ring->has_value() || (*remote)->epoch > (*saved_ring)->epoch)) {
      *saved_ring = *remote;
      spdlog::info("data ring epoch {} from etcd", (*saved_ring)->epoch);
    }
  }
  auto pool = saved_ring->has_value()
                  ? datanode::DataNodePool::Create(**saved_ring, registry, 30000, "gateway")
                  : datanode::DataNodePool::Create(endpoints, registry, 30000, "gateway");
  if (!pool.ok()) return Fail(2, pool.status().ToString());
  std::vector<gateway::CacheMember> members;
  for (const auto& n : cluster->OfRole("cachenode")) {
    members.push_back({n.id, n.weight, gateway::MakeGrpcCacheClient(n.listen)});
  }
  gateway::VdiDefaults defaults;
  defaults.block_size = cluster->block_size;
  defaults.replication = cluster->replication;
  auto catalog = gateway::Catalog::Open(dir + "/catalog.txt", defaults);
  if (!catalog.ok()) return Fail(1, catalog.status().ToString());
  std::unique_ptr<gateway::EtcdCatalogStore> catalog_store;
  if (etcd_state != nullptr) {
    catalog_store =
        std::make_unique<gateway::EtcdCatalogStore>(etcd_state.get(), etcd_settings.prefix);
    if (absl::Status s = (*catalog)->AttachStore(catalog_store.get()); !s.ok()) {
      return Fail(1, absl::StrCat("VDI catalog in etcd: ", s.ToString()));
    }
    spdlog::info("VDI catalog in etcd under {}: {} VDIs",
                 membership::VdisPrefix(etcd_settings.prefix), (*catalog)->List().size());
  }
  auto router = gateway::Router::Create(catalog->get(), std::move(members), pool->get());
  if (!router.ok()) return Fail(2, router.status().ToString());
  if (absl::Status s = (*router)->LoadRemoved(dir + "/removed_cache_nodes"); !s.ok()) {
    return Fail(1, s.ToString());
  }
  // Moves replicas when data nodes join (cluster mode), and gives every cache node — joining
  // ones too — the current data ring. Only the coordinator runs it: in static mode this gateway,
  // in cluster mode the elected leader (started and stopped with its term, below).
  gateway::DataRebalancer::Options ro;
  ro.state_path = data_ring_path;  // cluster mode: plus etcd, for the leader's term (below)
  ro.down_out = absl::Seconds(down_out_s);
  ro.refill_mb_s = refill_mb_s;
  ro.busy_mb_s = busy_mb_s;
  absl::Mutex rebalancer_mu;
  std::shared_ptr<gateway::DataRebalancer> rebalancer;  // guarded by rebalancer_mu
  auto current_rebalancer = [&rebalancer_mu, &rebalancer] {
    absl::MutexLock l(&rebalancer_mu);
    return rebalancer;
  };
  auto start_rebalancer = [&, router = router->get(), pool = pool->get()] {
    std::shared_ptr<gateway::DataRebalancer> r = gateway::DataRebalancer::Start(router, pool, ro);
    absl::MutexLock l(&rebalancer_mu);
    rebalancer = std::move(r);
  };
  if (!etcd_settings.enabled()) {
    start_rebalancer();
    // The cluster file's data nodes: one put back in (`datanode in`) joins again from it.
    current_rebalancer()->Add(endpoints);
  }
  (*router)->SetJoinHook([&current_rebalancer](uint32_t node, gateway::CacheClient* c) {
    std::shared_ptr<gateway::DataRebalancer> r = current_rebalancer();
    if (r == nullptr) return absl::FailedPreconditionError("not the coordinator any more");
    return r->OnJoin(node, c);
  });
  // Cluster mode: follow the cache ring and the catalog the coordinator publishes in etcd
  // (until this gateway is elected itself).
  std::atomic<bool> leading{false};
  std::atomic<bool> led_once{false};  // this gateway's first term finished starting its work
  std::unique_ptr<gateway::ClusterFollower> follower;
  if (etcd_state != nullptr) {
    gateway::ClusterFollower::Options fo;
    fo.prefix = etcd_settings.prefix;
    auto f = gateway::ClusterFollower::Start(etcd_state.get(), router->get(), catalog->get(), fo,
                                             [&leading] { return leading.load(); });
    if (!f.ok()) {
      return Fail(1, absl::StrCat("cannot follow the cluster state in etcd: ",
                                  f.status().ToString()));
    }
    follower = *std::move(f);
  }
  // Peers may still be starting: register the catalog with retries for up to a minute. In
  // cluster mode a cache node that stays down is taken out of the ring once the membership is
  // followed (below), and the others learn the VDIs on their first request: go on after 20 s.
  absl::Status reg;
  const int tries = etcd_settings.enabled() ? 40 : 120;
  for (int i = 0; i < tries; ++i) {
    reg = (*router)->RegisterAll();
    if (reg.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!reg.ok() && etcd_settings.enabled()) {
    spdlog::warn("cannot register VDIs with every peer yet ({}); going on: cluster mode",
                 reg.ToString());
  } else if (!reg.ok()) {
    return Fail(1, absl::StrCat("cannot register VDIs with peers: ", reg.ToString()));
  }

  if (!etcd_settings.enabled()) {
    if (absl::Status s = gateway::CreateVdisFromSpecs(router->get(), create); !s.ok()) {
      return Fail(2, s.ToString());
    }
  }
  gateway::Frontends fe;
  if (absl::Status s = fe.Start(fc, router->get(), infos, registry); !s.ok()) {
    return Fail(1, s.ToString());
  }
  fe.admin()->SetDataRingSource(
      [&current_rebalancer, p = pool->get()] {
        if (std::shared_ptr<gateway::DataRebalancer> r = current_rebalancer()) return r->Status();
        v1::DataRebalance st;  // not the coordinator: the ring as followed
        st.set_state("followed");
        st.set_data_epoch(p->ring().epoch);
        for (uint32_t m : p->ring().members) st.add_members(m);
        return st;
      },
      [p = pool->get()] { return p->ring(); });
  fe.admin()->SetScrub(
      [&current_rebalancer](bool start) -> absl::StatusOr<v1::ClusterScrubStatus> {
        if (std::shared_ptr<gateway::DataRebalancer> r = current_rebalancer()) {
          return r->Scrub(start);
        }
        return absl::UnavailableError("the data rebalancer is not running on this gateway yet");
      },
      [&current_rebalancer] {
        std::shared_ptr<gateway::DataRebalancer> r = current_rebalancer();
        return r ? r->LastScrub() : v1::ClusterScrubStatus();
      });
  fe.admin()->SetDataNodeActions(
      [&current_rebalancer](uint32_t id, const std::string& action) -> absl::StatusOr<std::string> {
        if (std::shared_ptr<gateway::DataRebalancer> r = current_rebalancer()) {
          return r->Action(id, action);
        }
        return absl::UnavailableError("the data rebalancer is not running on this gateway yet");
      });
  spdlog::info("ringcache-gateway {} ready: NBD port {}, admin port {}, metrics port {}", id,
               fe.nbd_port(), fe.admin_port(), fe.http_port());
  // Cluster mode: register, then make the cache ring follow the cache nodes registered in etcd.
  std::unique_ptr<membership::Presence> presence;
  std::unique_ptr<gateway::MembershipSync> sync;
  std::unique_ptr<membership::Election> election;
  if (etcd_settings.enabled()) {
    std::string host;
    int unused = 0;
    if (absl::Status s = SplitHostPort(fc.admin_listen, &host, &unused); !s.ok()) {
      return Fail(2, s.ToString());
    }
    membership::NodeRecord record;
    record.role = membership::Role::kGateway;
    record.id = id;
    record.address = absl::StrCat(host, ":", fe.admin_port());
    record.http_address = absl::StrCat(host, ":", fe.http_port());
    auto p = membership::Presence::Start(etcd_settings, record);
    if (!p.ok()) return Fail(1, p.status().ToString());
    presence = *std::move(p);
    gateway::AdminService* admin = fe.admin();
    membership::EtcdClient* etcd_client = presence->client();
    const std::string prefix = etcd_settings.prefix;
    admin->SetGatewaysRegistered(
        [etcd_client, prefix]() -> absl::StatusOr<std::vector<uint32_t>> {
          membership::EtcdCallOptions call;
          call.timeout = absl::Seconds(1);
          RC_ASSIGN_OR_RETURN(
              membership::RangeResult range,
              etcd_client->GetPrefix(membership::RolePrefix(prefix, membership::Role::kGateway),
                                     call));
          std::vector<uint32_t> ids;
          for (const auto& kv : range.kvs) {
            if (auto r = membership::DecodeNodeRecord(kv.value); r.ok()) ids.push_back(r->id);
          }
          return ids;
        });
    admin->SetBeforeRemove([etcd_client, prefix](uint32_t node) {
      return gateway::MembershipSync::MarkDrained(etcd_client, prefix, node);
    });
    admin->SetCoordinator([&leading] { return leading.load(); },
                          [etcd_client, prefix] {
                            auto l = membership::ReadLeader(etcd_client, prefix);
                            if (!l.ok() || !l->has_value()) return std::string();
                            return absl::StrCat("gateway ", (*l)->record.id, " at ",
                                                (*l)->record.address, ", term ", (*l)->term);
                          });
    // The coordinator's work runs for the length of a term: publish the cache ring (guarded by
    // the term), take over from the previous leader, follow the membership (removals with
    // replay, joins with handoff) and the data nodes (rebalancing), create the --create-vdi VDIs.
    // The callbacks outlive this block: what is local to it is captured by value.
    auto lead = [&, r = router->get(), p = pool->get(), cat = catalog->get(), etcd_client, prefix,
                 admin](int64_t term) {
      // Every shared write of this term (cache ring, data ring, purge mark, catalog) holds only
      // while P/coordinator keeps this term's create revision.
      const membership::TxnCompare guard = membership::TermGuard(prefix, term);
      // Every control step of this term carries it: nodes refuse the steps of an older one.
      r->SetControlTerm(static_cast<uint64_t>(term));
      // Start from the latest published ring and catalog (this gateway followed them, but its
      // last look may be behind: a heal, a failed read), not from its own view.
      if (auto st = gateway::LoadEtcdCacheRing(etcd_client, prefix); !st.ok()) {
        spdlog::warn("coordinator: cannot read the published cache ring: {}",
                     st.status().ToString());
      } else if (st->has_value()) {
        if (absl::Status fs = r->FollowRingState(**st); !fs.ok()) spdlog::warn("{}", fs.ToString());
      }
      if (auto reloaded = cat->Reload(); !reloaded.ok()) {
        spdlog::warn("coordinator: cannot reload the VDI catalog: {}",
                     reloaded.status().ToString());
      }
      r->SetPublisher([etcd_client, prefix, guard](const gateway::CacheRingState& st) {
        return gateway::PublishEtcdCacheRing(etcd_client, prefix, guard, st);
      });
      absl::Status s = absl::UnavailableError("not tried");
      for (int i = 0; i < 50 && !s.ok(); ++i) {
        if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        auto min_epoch = gateway::TakeOverEpoch(etcd_client, prefix);
        s = min_epoch.ok() ? r->TakeOver(*min_epoch) : min_epoch.status();
      }
      if (!s.ok()) {
        spdlog::error("coordinator: cannot take over the cache ring: {}", s.ToString());
        r->SetPublisher(nullptr);
        return false;  // the election resigns the term: another candidate may do better
      }
      if (auto dr = gateway::LoadEtcdDataRing(etcd_client, prefix);
          dr.ok() && dr->has_value() && (*dr)->epoch > p->ring().epoch) {
        if (absl::Status ds = p->SetRing(**dr); !ds.ok()) spdlog::warn("{}", ds.ToString());
      }
      // A purge the previous leader left (it switched rings, then died) is finished by this one.
      ro.save_ring = [etcd_client, prefix, guard](const datanode::DataRing& ring) {
        return gateway::SaveEtcdDataRing(etcd_client, prefix, ring, guard);
      };
      ro.save_purge = [etcd_client, prefix, guard](bool pending) {
        return gateway::SaveEtcdDataPurge(etcd_client, prefix, pending, guard);
      };
      auto purge = gateway::LoadEtcdDataPurge(etcd_client, prefix);
      if (!purge.ok()) {
        spdlog::warn("coordinator: cannot read the data purge mark ({}); purging to be safe",
                     purge.status().ToString());
      }
      ro.purge_pending = !purge.ok() || *purge;
      // Operator actions a previous leader accepted and did not carry out.
      ro.save_actions = [etcd_client, prefix, guard](const std::string& actions) {
        return gateway::SaveEtcdDataActions(etcd_client, prefix, actions, guard);
      };
      auto actions = gateway::LoadEtcdDataActions(etcd_client, prefix);
      if (!actions.ok()) {
        spdlog::warn("coordinator: cannot read the pending data node actions ({}); an operator "
                     "action the previous leader accepted may have to be asked again",
                     actions.status().ToString());
      }
      ro.actions = actions.ok() ? *actions : "";
      if (catalog_store != nullptr) catalog_store->SetGuard(guard);
      leading = true;
      spdlog::info("coordinator: leading (term {}), cache ring epoch {}", term, r->ring_epoch());
      start_rebalancer();
      current_rebalancer()->FollowEtcd(etcd_client, prefix);
      gateway::MembershipSync::Options so;
      so.prefix = prefix;
      sync = gateway::MembershipSync::Start(
          etcd_client, r, so,
          [admin](uint32_t node, const std::string& state) {
            admin->SetNodeState("cachenode", node, state);
          },
          // Epochs come from the published ring only (Router::Publish), not from revisions.
          nullptr);
      if (absl::Status cs = gateway::CreateVdisFromSpecs(r, create); !cs.ok()) {
        spdlog::error("--create-vdi: {}", cs.ToString());
      }
      led_once = true;
      return true;
    };
    auto step_down = [&, r = router->get(), prefix] {
      leading = false;
      r->SetPublisher(nullptr);  // first: a change under way stops publishing and ends
      if (catalog_store != nullptr) catalog_store->SetGuard(membership::TermGuard(prefix, 0));
      // The rebalancer before the membership sync (which may wait for a change to wind down):
      // a deposed leader copies and purges nothing more.
      std::shared_ptr<gateway::DataRebalancer> old;
      {
        absl::MutexLock l(&rebalancer_mu);
        old.swap(rebalancer);
      }
      old.reset();
      sync.reset();
      spdlog::info("coordinator: following the new leader");
    };
    if (coordinator) {
      membership::Election::Options eo;
      eo.prefix = prefix;
      election = membership::Election::Start(
          etcd_client, presence->registration(), eo,
          [lead, step_down](bool leader, int64_t term) {
            if (leader) return lead(term);
            step_down();
            return true;
          });
      // Ready once a coordinator is known (this one or another), so that administration works.
      for (int i = 0; i < 20 * static_cast<int>(etcd_settings.lease_ttl_s) + 40; ++i) {
        if (led_once.load()) break;
        auto l = membership::ReadLeader(etcd_client, prefix);
        if (l.ok() && l->has_value() && (*l)->record.id != id) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    spdlog::info("cluster mode: registered as {}{}; following the nodes in etcd at {}",
                 presence->registration()->key(),
                 coordinator ? " (coordinator candidate)" : "", etcd_settings.endpoints);
  }
  if (absl::Status s = WriteReadyFile(ready_file.value_or(""),
                                      {{"nbd_port", fe.nbd_port()},
                                       {"admin_port", fe.admin_port()},
                                       {"http_port", fe.http_port()}});
      !s.ok()) {
    return Fail(1, s.ToString());
  }
  spdlog::info("signal {}: shutting down", WaitForTerminationSignal());
  election.reset();  // a leader steps down (stops its work) and hands over at once
  follower.reset();
  sync.reset();
  fe.Stop();
  {
    absl::MutexLock l(&rebalancer_mu);  // after the admin service (it reports its status)
    rebalancer.reset();
  }
  presence.reset();
  spdlog::info("stopped");
  return 0;
}
