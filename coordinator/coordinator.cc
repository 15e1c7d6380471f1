// The coordinator's role in a gateway daemon: see coordinator.h.
#include "coordinator/coordinator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/formats.h"
#include "common/status_macros.h"
#include "gateway/frontends.h"
#include "membership/etcd_value.h"
#include "membership/feature_level.h"

namespace ringcache::coordinator {

Coordinator::Coordinator(gateway::Router* router, datanode::DataNodePool* pool, Catalog* catalog,
                         EtcdCatalogStore* catalog_store, Options options)
    : router_(router),
      pool_(pool),
      catalog_(catalog),
      catalog_store_(catalog_store),
      options_(std::move(options)) {
  // A joining cache node gets the current data ring from the rebalancer of this term.
  router_->SetJoinHook([this](uint32_t node, gateway::CacheClient* c) {
    std::shared_ptr<DataRebalancer> r = rebalancer();
    if (r == nullptr) return absl::FailedPreconditionError("not the coordinator any more");
    return r->OnJoin(node, c);
  });
}

Coordinator::~Coordinator() {
  StopCampaign();
  StopRebalancer();
}

void Coordinator::StopRebalancer() {
  std::shared_ptr<DataRebalancer> old;
  {
    absl::MutexLock l(&mu_);
    old.swap(rebalancer_);
  }
  old.reset();  // outside mu_: rebalancer() callers may hold the last reference meanwhile
}

std::shared_ptr<DataRebalancer> Coordinator::rebalancer() const {
  absl::MutexLock l(&mu_);
  return rebalancer_;
}

void Coordinator::StartRebalancer() {
  std::shared_ptr<DataRebalancer> r = DataRebalancer::Start(router_, pool_, options_.rebalancer);
  absl::MutexLock l(&mu_);
  rebalancer_ = std::move(r);
}

void Coordinator::StartStatic(const std::vector<datanode::DataNodeEndpoint>& data_nodes) {
  StartRebalancer();
  // The cluster file's data nodes: one put back in (`datanode in`) joins again from it.
  rebalancer()->Add(data_nodes);
  leading_ = true;
}

void Coordinator::ServeAdmin(gateway::AdminService* admin) {
  admin_ = admin;
  admin_->SetDataRingSource(
      [this] {
        if (std::shared_ptr<DataRebalancer> r = rebalancer()) return r->Status();
        v1::DataRebalance st;  // not the coordinator: the ring as followed
        st.set_state("followed");
        st.set_data_epoch(pool_->ring().epoch);
        for (uint32_t m : pool_->ring().members) st.add_members(m);
        return st;
      },
      [this] { return pool_->ring(); });
  admin_->SetScrub(
      [this](bool start) -> absl::StatusOr<v1::ClusterScrubStatus> {
        if (std::shared_ptr<DataRebalancer> r = rebalancer()) return r->Scrub(start);
        return absl::UnavailableError("the data rebalancer is not running on this gateway yet");
      },
      [this] {
        std::shared_ptr<DataRebalancer> r = rebalancer();
        return r ? r->LastScrub() : v1::ClusterScrubStatus();
      });
  admin_->SetDataNodeActions(
      [this](uint32_t id, const std::string& action) -> absl::StatusOr<std::string> {
        if (std::shared_ptr<DataRebalancer> r = rebalancer()) return r->Action(id, action);
        return absl::UnavailableError("the data rebalancer is not running on this gateway yet");
      });
}

absl::StatusOr<std::vector<membership::NodeRecord>> RegisteredNodes(
    membership::EtcdClient* client, const std::string& prefix, absl::Duration timeout) {
  membership::EtcdCallOptions call;
  call.timeout = timeout;
  RC_ASSIGN_OR_RETURN(membership::RangeResult range,
                      client->GetPrefix(membership::NodesPrefix(prefix), call));
  std::vector<membership::NodeRecord> out;
  for (const auto& kv : range.kvs) {
    if (auto r = membership::DecodeNodeRecord(kv.value); r.ok()) out.push_back(*std::move(r));
  }
  return out;
}

absl::StatusOr<std::pair<uint32_t, std::string>> FinalizeFeatureLevel(
    membership::EtcdClient* client, const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(auto current, membership::ReadFeatureLevelKey(client, prefix));
  membership::EtcdCallOptions call;
  call.timeout = absl::Seconds(2);
  RC_ASSIGN_OR_RETURN(std::vector<membership::NodeRecord> nodes,
                      RegisteredNodes(client, prefix, call.timeout));
  // The highest level every registered node supports (a node of a release before 0.2.0 does
  // not say: level 1), this gateway's release included.
  uint32_t target = kFeatureLevel;
  std::vector<std::string> behind;
  for (const membership::NodeRecord& r : nodes) {
    const uint32_t level = r.feature_level ? r.feature_level : kBaseFeatureLevel;
    target = std::min(target, level);
    if (level < kFeatureLevel) {
      behind.push_back(absl::StrCat(membership::RoleName(r.role), " ", r.id, " (",
                                    r.release.empty() ? "before 0.2.0" : r.release, ")"));
    }
  }
  const std::string waiting =
      behind.empty() ? ""
                     : absl::StrCat("; not yet on a release of level ", kFeatureLevel, ": ",
                                    absl::StrJoin(behind, ", "));
  if (target <= current.first) {
    return std::make_pair(current.first,
                          absl::StrCat("feature level stays ", current.first,
                                       current.first >= kFeatureLevel
                                           ? ", the highest this release knows"
                                           : "",
                                       waiting));
  }
  const std::string key = membership::FeatureLevelKey(prefix);
  RC_ASSIGN_OR_RETURN(
      membership::TxnResult txn,
      client->Txn({current.second ? membership::TxnCompare::ModRevisionIs(key, current.second)
                                  : membership::TxnCompare::KeyMissing(key)},
                  {membership::TxnOp::Put(key, membership::EncodeFeatureLevelValue(target))}, {},
                  call));
  if (!txn.succeeded) {
    return absl::AbortedError("the feature level changed while finalizing; run it again");
  }
  membership::NoteClusterFeatureLevel(target);  // this coordinator writes its formats from now
  return std::make_pair(target, absl::StrCat("feature level raised from ", current.first, " to ",
                                             target, waiting));
}

void Coordinator::FollowEtcd(membership::EtcdClient* client) {
  etcd_ = client;
  const std::string prefix = options_.prefix;
  admin_->SetRegistered(
      [client, prefix] { return RegisteredNodes(client, prefix, absl::Seconds(1)); });
  admin_->SetFeatureLevel(
      [client, prefix] { return membership::ReadFeatureLevel(client, prefix); },
      [client, prefix] { return FinalizeFeatureLevel(client, prefix); });
  admin_->SetBeforeRemove([client, prefix](uint32_t node) {
    return MembershipSync::MarkDrained(client, prefix, node);
  });
  admin_->SetUndrain([this, client, prefix](uint32_t node) -> absl::StatusOr<bool> {
    membership::EtcdCallOptions call;
    call.timeout = absl::Seconds(5);
    absl::StatusOr<membership::DeleteResult> del =
        client->Delete(membership::DrainingKey(prefix, node), call);
    if (!del.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot clear cache node ", node,
                                                 "'s drained mark in etcd: ",
                                                 del.status().message()));
    }
    auto reg = client->Get(membership::NodeKey(prefix, membership::Role::kCache, node), call);
    if (!reg.ok()) {
      return absl::UnavailableError(absl::StrCat("drained mark cleared, but etcd did not say "
                                                 "whether cache node ", node, " is registered: ",
                                                 reg.status().message()));
    }
    if (del->deleted == 0 && !reg->has_value()) {
      return absl::NotFoundError(
          absl::StrCat("cache node ", node, " is neither registered nor marked drained"));
    }
    NudgeMembership();  // the mark is not in the watched view: look at the members again
    return reg->has_value();
  });
  admin_->SetCoordinator([this] { return leading(); },
                         [client, prefix] {
                           auto l = ReadLeader(client, prefix);
                           if (!l.ok() || !l->has_value()) return std::string();
                           return absl::StrCat("gateway ", (*l)->record.id, " at ",
                                               (*l)->record.address, ", term ", (*l)->term);
                         });
}

void Coordinator::Campaign(membership::NodeRegistration* registration, uint32_t self_id,
                           absl::Duration wait) {
  Election::Options eo;
  eo.prefix = options_.prefix;
  election_ = Election::Start(etcd_, registration, eo, [this](bool leader, int64_t term) {
    if (leader) return Lead(term);
    StepDown();
    return true;
  });
  const absl::Time deadline = absl::Now() + wait;
  while (absl::Now() < deadline && !led_once_.load()) {
    auto l = ReadLeader(etcd_, options_.prefix);
    if (l.ok() && l->has_value() && (*l)->record.id != self_id) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Coordinator::StopCampaign() {
  election_.reset();  // a leader steps down (stops its work) and hands over at once
  StopSync();
}

void Coordinator::StopSync() {
  std::unique_ptr<MembershipSync> old;
  {
    absl::MutexLock l(&mu_);
    old.swap(sync_);
  }
  old.reset();  // outside mu_: its reconciler may wait for a change to wind down
}

void Coordinator::NudgeMembership() {
  absl::MutexLock l(&mu_);
  if (sync_ != nullptr) sync_->Nudge();
}

// Starts from the latest published ring and catalog: this gateway followed them, but its last
// look may be behind (a heal, a failed read).
void Coordinator::CatchUp() {
  if (auto st = membership::LoadEtcdCacheRing(etcd_, options_.prefix); !st.ok()) {
    spdlog::warn("coordinator: cannot read the published cache ring: {}", st.status().ToString());
  } else if (st->has_value()) {
    if (absl::Status fs = router_->FollowRingState(**st); !fs.ok()) {
      spdlog::warn("{}", fs.ToString());
    }
  }
  if (auto reloaded = catalog_->Reload(); !reloaded.ok()) {
    spdlog::warn("coordinator: cannot reload the VDI catalog: {}", reloaded.status().ToString());
  }
}

bool Coordinator::TakeOverCacheRing(const membership::TxnCompare& guard) {
  membership::EtcdClient* client = etcd_;
  const std::string prefix = options_.prefix;
  router_->SetPublisher([client, prefix, guard](const membership::CacheRingState& st) {
    return PublishEtcdCacheRing(client, prefix, guard, st);
  });
  absl::Status s = absl::UnavailableError("not tried");
  for (int i = 0; i < 50 && !s.ok(); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto min_epoch = TakeOverEpoch(client, prefix);
    s = min_epoch.ok() ? router_->TakeOver(*min_epoch) : min_epoch.status();
  }
  if (!s.ok()) {
    spdlog::error("coordinator: cannot take over the cache ring: {}", s.ToString());
    router_->SetPublisher(nullptr);
    return false;
  }
  return true;
}

// The data ring, the purge mark a previous leader left (it switched rings, then died: this one
// finishes the purge) and the operator actions it accepted and did not carry out; from now on
// the rebalancer writes them under this term's guard.
void Coordinator::ResumeDataRecords(const membership::TxnCompare& guard) {
  membership::EtcdClient* client = etcd_;
  const std::string prefix = options_.prefix;
  if (auto dr = LoadEtcdDataRing(client, prefix);
      dr.ok() && dr->has_value() && (*dr)->epoch > pool_->ring().epoch) {
    if (absl::Status ds = pool_->SetRing(**dr); !ds.ok()) spdlog::warn("{}", ds.ToString());
  }
  DataRebalancer::Options& ro = options_.rebalancer;
  ro.save_ring = [client, prefix, guard](const datanode::DataRing& ring) {
    return SaveEtcdDataRing(client, prefix, ring, guard);
  };
  ro.save_purge = [client, prefix, guard](bool pending) {
    return SaveEtcdDataPurge(client, prefix, pending, guard);
  };
  auto purge = LoadEtcdDataPurge(client, prefix);
  if (!purge.ok()) {
    spdlog::warn("coordinator: cannot read the data purge mark ({}); purging to be safe",
                 purge.status().ToString());
  }
  ro.purge_pending = !purge.ok() || *purge;
  ro.save_actions = [client, prefix, guard](const DataActions& actions) {
    return SaveEtcdDataActions(client, prefix, actions, guard);
  };
  auto actions = LoadEtcdDataActions(client, prefix);
  if (!actions.ok()) {
    spdlog::warn(
        "coordinator: cannot read the pending data node actions ({}); an operator "
        "action the previous leader accepted may have to be asked again",
        actions.status().ToString());
  }
  if (actions.ok()) ro.actions = *std::move(actions);
}

bool Coordinator::Lead(int64_t term) {
  // Every shared write of this term (cache ring, data ring, purge mark, catalog) holds only
  // while P/coordinator keeps this term's create revision.
  const membership::TxnCompare guard = TermGuard(options_.prefix, term);
  // Every control step of this term carries it: nodes refuse the steps of an older one.
  router_->SetControlTerm(static_cast<uint64_t>(term));
  CatchUp();
  // What it writes to etcd follows the cluster's feature level (membership/etcd_value.h): read
  // it now, since a finalize on an earlier coordinator is not noted in this process.
  if (auto level = membership::ReadFeatureLevel(etcd_, options_.prefix); !level.ok()) {
    spdlog::warn("coordinator: cannot read the cluster feature level ({}); writing the "
                 "formats of level {}", level.status().ToString(),
                 membership::NotedClusterFeatureLevel());
  }
  if (!TakeOverCacheRing(guard)) return false;  // the election resigns: another may do better
  ResumeDataRecords(guard);
  if (catalog_store_ != nullptr) catalog_store_->SetGuard(guard);
  leading_ = true;
  spdlog::info("coordinator: leading (term {}), cache ring epoch {}", term, router_->ring_epoch());
  StartRebalancer();
  rebalancer()->FollowEtcd(etcd_, options_.prefix);
  MembershipSync::Options so;
  so.prefix = options_.prefix;
  gateway::AdminService* admin = admin_;
  std::unique_ptr<MembershipSync> sync = MembershipSync::Start(
      etcd_, router_, so,
      [admin](uint32_t node, const std::string& state) {
        admin->SetNodeState("cachenode", node, state);
      },
      // Epochs come from the published ring only (Router::Publish), not from revisions.
      nullptr);
  {
    absl::MutexLock l(&mu_);
    sync_ = std::move(sync);
  }
  if (absl::Status cs = gateway::CreateVdisFromSpecs(router_, options_.create_vdis); !cs.ok()) {
    spdlog::error("--create-vdi: {}", cs.ToString());
  }
  led_once_ = true;
  return true;
}

void Coordinator::StepDown() {
  leading_ = false;
  router_->SetPublisher(nullptr);  // first: a change under way stops publishing and ends
  if (catalog_store_ != nullptr) catalog_store_->SetGuard(TermGuard(options_.prefix, 0));
  // The rebalancer before the membership sync (which may wait for a change to wind down): a
  // deposed leader copies and purges nothing more.
  StopRebalancer();
  StopSync();
  spdlog::info("coordinator: following the new leader");
}

}  // namespace ringcache::coordinator
