// The router as a member of the control plane in cluster mode (membership/README.md "Control
// plane"): the coordinator's router publishes the cache ring state it changes; every other
// gateway's router follows the published states, and a new coordinator takes over from them.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gateway/router.h"

namespace ringcache::gateway {

CacheRingState Router::RingStateLocked() const {
  CacheRingState st;
  st.epoch = epoch_;
  for (const auto& [id, l] : learned_) st.learned.push_back({id, l.address, l.weight});
  for (const auto& [id, w] : weights_) st.weights.push_back(w);
  std::sort(st.weights.begin(), st.weights.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  st.reweighting = reweighting_;
  st.removed.assign(removed_.begin(), removed_.end());
  std::sort(st.removed.begin(), st.removed.end());
  st.removing.assign(removing_.begin(), removing_.end());
  std::sort(st.removing.begin(), st.removing.end());
  st.joining = joining_ ? joining_id_ : 0;
  return st;
}

absl::Status Router::Publish(const CacheRingState& state) {
  absl::MutexLock pl(&publish_mu_);
  Publisher publisher;
  {
    absl::MutexLock l(&mu_);
    publisher = publisher_;
  }
  if (!publisher) return absl::OkStatus();
  return publisher(state);
}

bool Router::PublishOutcome(const CacheRingState& state) {
  for (int i = 0;; ++i) {
    {
      absl::MutexLock l(&mu_);
      // Static mode (never a publisher): the outcome is the ring. Cluster mode without one any
      // more: the term ended, nothing was published, and the outcome must not be used.
      if (!publisher_) return !publishes_;
    }
    absl::Status s = Publish(state);
    if (s.ok()) return true;
    if (i % 25 == 0) spdlog::warn("cannot publish the cache ring yet ({}); retrying", s.ToString());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

absl::Status Router::FollowRingState(const CacheRingState& st) {
  std::vector<std::pair<uint32_t, CacheClient*>> leaving;
  absl::Status s = FollowLocked(st, &leaving);
  // Requests this gateway still has in flight to a node that leaves and does not answer (it
  // died) are cancelled: they were not acknowledged, and go to the next owner once the
  // coordinator settled the node (as RemoveCacheNode does for its own; waiting for their
  // deadline would stall clients for a minute).
  for (const auto& [id, c] : leaving) {
    if (!c->Probe(500).ok()) {
      spdlog::info("cache node {} leaves and does not answer: cancelling requests in flight", id);
      c->CancelInFlight();
    }
  }
  return s;
}

absl::Status Router::FollowLocked(const CacheRingState& st,
                                  std::vector<std::pair<uint32_t, CacheClient*>>* leaving) {
  absl::MutexLock l(&mu_);
  if (st.epoch <= epoch_) return absl::OkStatus();
  if (publisher_) {
    return absl::FailedPreconditionError("this gateway publishes the cache ring (coordinator)");
  }
  if (changing_) {  // a deposed coordinator's change winds down first (it then publishes nothing)
    return absl::FailedPreconditionError(
        "a cache node change of this gateway's ended term is still winding down");
  }
  auto known = [this](uint32_t id)
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return MemberLocked(id) != nullptr; };
  for (const auto& n : st.learned) {
    if (known(n.id)) continue;
    members_.push_back({n.id, n.weight, NewClient(n.id, n.address)});
    learned_[n.id] = Learned{n.address, n.weight};
    spdlog::info("cache node {} at {} (weight {}): learned from the coordinator's ring", n.id,
                 n.address, n.weight);
  }
  for (const auto* ids : {&st.removed, &st.removing}) {
    for (uint32_t id : *ids) {
      if (!known(id)) {
        return absl::DataLossError(absl::StrCat("the published cache ring names cache node ", id,
                                                ", which this gateway does not know"));
      }
    }
  }
  if (st.joining != 0 && !known(st.joining)) {
    return absl::DataLossError(
        absl::StrCat("the published cache ring joins unknown node ", st.joining));
  }
  if (st.reweighting.id != 0 && !known(st.reweighting.id)) {
    return absl::DataLossError(
        absl::StrCat("the published cache ring reweights unknown node ", st.reweighting.id));
  }
  for (const auto* ids : {&st.removed, &st.removing}) {
    for (uint32_t id : *ids) {
      if (!removed_.contains(id) && !removing_.contains(id)) {
        leaving->push_back({id, MemberLocked(id)->client.get()});
      }
    }
  }
  removed_ = absl::flat_hash_set<uint32_t>(st.removed.begin(), st.removed.end());
  removing_ = absl::flat_hash_set<uint32_t>(st.removing.begin(), st.removing.end());
  next_ring_.reset();
  weights_.clear();
  for (const auto& w : st.weights) weights_[w.id] = w;
  reweighting_ = st.reweighting;
  joining_ = st.joining != 0 || st.reweighting.id != 0;
  joining_id_ = st.joining;
  if (joining_) {
    RC_ASSIGN_OR_RETURN(next_ring_, BuildRingLocked(st.joining, st.reweighting.id != 0));
  }
  epoch_ = st.epoch;
  RC_RETURN_IF_ERROR(RebuildRing());
  if (!learned_path_.empty()) RC_RETURN_IF_ERROR(SaveLearned());
  return SaveRemoved();
}

absl::Status Router::TakeOver(uint64_t min_epoch) {
  CacheRingState st;
  {
    absl::MutexLock l(&mu_);
    st = RingStateLocked();
    st.removing.clear();
    st.joining = 0;
    st.reweighting = {};
    st.epoch = std::max(epoch_, min_epoch) + 1;
  }
  RC_RETURN_IF_ERROR(Publish(st));
  absl::MutexLock l(&mu_);
  if (!removing_.empty() || joining_) {
    spdlog::info("coordinator: the previous leader left a {} under way; it is decided again",
                 reweighting_.id != 0 ? "reweight" : joining_ ? "join" : "removal");
  }
  removing_.clear();
  joining_ = false;
  joining_id_ = 0;
  reweighting_ = {};
  next_ring_.reset();
  epoch_ = std::max(epoch_, st.epoch);
  RC_RETURN_IF_ERROR(RebuildRing());
  return SaveRemoved();
}

}  // namespace ringcache::gateway
