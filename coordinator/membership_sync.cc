#include "coordinator/membership_sync.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "coordinator/member_decision.h"
#include "gateway/admin_service.h"
#include "membership/etcd_value.h"

namespace ringcache::coordinator {

using membership::MemberView;
using membership::Role;

std::unique_ptr<MembershipSync> MembershipSync::Start(membership::EtcdClient* client,
                                                      gateway::Router* router, Options options,
                                                      StateCallback on_state,
                                                      EpochCallback on_epoch) {
  std::unique_ptr<MembershipSync> s(
      new MembershipSync(client, router, options, std::move(on_state), std::move(on_epoch)));
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  membership::MembershipWatcher::Options wo;
  wo.prefix = options.prefix;
  MembershipSync* p = s.get();
  s->watcher_ = membership::MembershipWatcher::Start(client, wo, [p](const MemberView& view) {
    absl::MutexLock l(&p->mu_);
    p->pending_ = view;  // only the latest view matters: leases tell re-registrations apart
  });
  return s;
}

absl::Status MembershipSync::MarkDrained(membership::EtcdClient* client, const std::string& prefix,
                                         uint32_t id) {
  absl::StatusOr<int64_t> rev =
      client->Put(membership::DrainingKey(prefix, id),
                  membership::EncodeMarkValue("ringcachectl node remove"));
  if (!rev.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot mark cache node ", id, " drained in etcd: ", rev.status().message()));
  }
  return absl::OkStatus();
}

bool MembershipSync::Drained(uint32_t id) {
  auto kv = client_->Get(membership::DrainingKey(options_.prefix, id));
  return kv.ok() && kv->has_value();
}

MembershipSync::MembershipSync(membership::EtcdClient* client, gateway::Router* router,
                               Options options, StateCallback on_state, EpochCallback on_epoch)
    : client_(client),
      router_(router),
      options_(std::move(options)),
      on_state_(std::move(on_state)),
      on_epoch_(std::move(on_epoch)) {}

MembershipSync::~MembershipSync() {
  watcher_.reset();
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void MembershipSync::Nudge() {
  absl::MutexLock l(&mu_);
  nudged_ = true;
}

void MembershipSync::Loop() {
  std::optional<MemberView> retry;  // a view not fully applied yet
  std::optional<MemberView> last;   // the last view taken (a nudge reconciles it again)
  for (;;) {
    MemberView view;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || pending_.has_value() || nudged_;
      };
      if (retry.has_value()) {
        mu_.AwaitWithTimeout(absl::Condition(&ready), options_.retry_interval);
      } else {
        mu_.Await(absl::Condition(&ready));
      }
      if (stop_) return;
      const bool nudged = nudged_;
      nudged_ = false;
      if (pending_.has_value()) {
        view = *std::move(pending_);
        pending_.reset();
      } else if (retry.has_value()) {
        view = *retry;
      } else if (nudged && last.has_value()) {
        view = *last;
      } else {
        continue;
      }
    }
    last = view;
    retry.reset();
    if (!Reconcile(view)) {
      retry = view;
      continue;
    }
    if (static_cast<uint64_t>(view.revision) > epoch_.load()) {
      epoch_.store(view.revision);
      spdlog::info("cluster membership: epoch {} ({} cache nodes registered)", view.revision,
                   view.nodes(Role::kCache).size());
      if (on_epoch_) on_epoch_(view.revision);
    }
  }
}

bool MembershipSync::Remove(uint32_t id, const char* why) {
  spdlog::warn("cache node {}: {}; taking it out of the ring", id, why);
  absl::Status s = router_->RemoveCacheNode(
      id, gateway::CacheNodeSettle(router_, id, /*register_first=*/true), nullptr, /*attempts=*/30);
  if (!s.ok()) {
    spdlog::warn("cache node {}: removal not done yet: {}", id, s.ToString());
    return false;
  }
  accepted_lease_.erase(id);
  if (on_state_) on_state_(id, "removed");
  return true;
}

bool MembershipSync::Learn(const MemberView& view) {
  const std::vector<uint32_t> known = router_->member_ids();
  bool ok = true;
  for (const auto& rec : view.nodes(Role::kCache)) {
    if (std::find(known.begin(), known.end(), rec.id) != known.end()) continue;
    if (Drained(rec.id)) {
      if (said_drained_.insert(rec.id).second) {
        spdlog::info("cache node {}: registered at {} but marked drained ({}): staying out", rec.id,
                     rec.address, membership::DrainingKey(options_.prefix, rec.id));
      }
      continue;
    }
    absl::Status s = router_->LearnCacheNode(rec.id, rec.address, rec.weight);
    if (!s.ok()) {
      spdlog::warn("cache node {} registered at {}: cannot take it in yet: {}", rec.id, rec.address,
                   s.ToString());
      ok = false;
      continue;
    }
    if (on_state_) on_state_(rec.id, "joining");
  }
  return ok;
}

bool MembershipSync::SameAddress(const MemberView& view, uint32_t id) {
  const std::string known = router_->LearnedAddress(id);
  if (known.empty()) return true;  // the cluster file's address
  for (const auto& rec : view.nodes(Role::kCache)) {
    if (rec.id != id || rec.address == known) continue;
    if (said_moved_.insert(id).second) {
      spdlog::warn(
          "cache node {}: registered at {}, but it joined at {} and the gateway keeps "
          "that address: staying out (restart it at {})",
          id, rec.address, known, known);
    }
    return false;
  }
  said_moved_.erase(id);
  return true;
}

bool MembershipSync::Reconcile(const MemberView& view) {
  bool ok = Learn(view);
  const std::vector<uint32_t> removed_list = router_->removed();
  const std::set<uint32_t> removed(removed_list.begin(), removed_list.end());
  for (uint32_t id : router_->member_ids()) {
    coordinator::MemberFacts f;
    f.id = id;
    f.lease = view.LeaseOf(Role::kCache, id);
    f.in_ring = !removed.contains(id);
    if (auto it = accepted_lease_.find(id); it != accepted_lease_.end()) f.accepted = it->second;
    if (!Apply(view, &f)) ok = false;
  }
  return ok;
}

bool MembershipSync::Apply(const MemberView& view, coordinator::MemberFacts* f) {
  const uint32_t id = f->id;
  for (;;) {
    if (f->lease != 0 && !f->in_ring) {  // asked only when they matter
      f->drained = Drained(id);
      if (!f->drained) said_drained_.erase(id);
      f->address_moved = !f->drained && !SameAddress(view, id);
    }
    const coordinator::MemberVerdict v = coordinator::DecideMember(*f);
    switch (v.kind) {
      case coordinator::MemberVerdict::kNothing:
        return true;
      case coordinator::MemberVerdict::kAccept:
        accepted_lease_[id] = f->lease;
        if (on_state_) on_state_(id, "up");
        return true;
      case coordinator::MemberVerdict::kAskHealth: {
        auto health = router_->NodeHealth(id, 2000);
        if (!health.ok()) return false;  // asked again at the next round; its lease tells
        f->quarantined = health->quarantined;
        continue;
      }
      case coordinator::MemberVerdict::kRemove:
        if (!Remove(id, v.why.c_str())) return false;
        // Out now: a node that is still registered rejoins like any returning node.
        f->in_ring = false;
        f->accepted.reset();
        continue;
      case coordinator::MemberVerdict::kStayOut:
        if (f->drained && said_drained_.insert(id).second) {
          spdlog::info("cache node {}: registered but marked drained ({}): staying out", id,
                       membership::DrainingKey(options_.prefix, id));
        }
        return true;  // SameAddress said why, once
      case coordinator::MemberVerdict::kJoin: {
        spdlog::info("cache node {}: registered; adding it to the ring", id);
        absl::Status s = router_->AddCacheNode(id, nullptr, /*attempts=*/10);
        if (!s.ok()) {
          spdlog::warn("cache node {}: rejoin not done yet: {}", id, s.ToString());
          return false;
        }
        accepted_lease_[id] = f->lease;
        if (on_state_) on_state_(id, "up");
        return true;
      }
    }
    return true;
  }
}

}  // namespace ringcache::coordinator
