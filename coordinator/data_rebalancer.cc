// Moving home replicas after the data ring changed: see data_rebalancer.h for the four steps.
#include "coordinator/data_rebalancer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace ringcache::coordinator {
namespace {

using datanode::DataNodeEndpoint;
using datanode::DataRing;

std::string PurgeMarker(const std::string& state_path) { return state_path + ".purge"; }
std::string ActionsFile(const std::string& state_path) { return state_path + ".actions"; }

}  // namespace

std::unique_ptr<DataRebalancer> DataRebalancer::Start(gateway::Router* router,
                                                      datanode::DataNodePool* pool,
                                                      Options options) {
  std::unique_ptr<DataRebalancer> r(new DataRebalancer(router, pool, std::move(options)));
  r->thread_ = std::thread([p = r.get()] { p->Loop(); });
  return r;
}

DataRebalancer::DataRebalancer(gateway::Router* router, datanode::DataNodePool* pool,
                               Options options)
    : router_(router),
      pool_(pool),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : Clock::Real()),
      scrub_(router, pool, clock_),
      pacer_({options_.refill_mb_s, options_.busy_mb_s, absl::Milliseconds(500)},
             [pool] { return pool->ClientOps(); }) {
  purge_pending_ = options_.purge_pending;
  if (!options_.state_path.empty()) {
    purge_pending_ = purge_pending_ || std::filesystem::exists(PurgeMarker(options_.state_path));
  }
  // Operator actions a predecessor (or this gateway before a restart) accepted and did not
  // carry out yet.
  asks_ = options_.actions;
  // Cluster mode keeps them in etcd only: a file left from an earlier term of this gateway
  // may name actions another coordinator carried out since.
  if (!options_.save_actions && !options_.state_path.empty()) {
    absl::StatusOr<std::string> text = ReadStateFile(ActionsFile(options_.state_path));
    if (text.ok()) {
      if (absl::Status s = DecodeDataActions(*text, &asks_); !s.ok()) {
        spdlog::error(
            "data rebalance: the saved operator actions are unreadable ({}); they are "
            "dropped: ask again with `ringcachectl datanode out|in|decommission`",
            s.ToString());
        asks_ = options_.actions;  // (the lines before the bad one were read)
      }
    } else if (!absl::IsNotFound(text.status())) {
      spdlog::error("data rebalance: {}; the saved operator actions are not read",
                    text.status().ToString());
    }
  }
  if (!asks_.empty()) {
    spdlog::info("data rebalance: carrying out the saved operator actions: {}",
                 absl::StrJoin(absl::StrSplit(EncodeDataActions(asks_), '\n',
                                              absl::SkipWhitespace()),
                               "; "));
  }
  const DataRing ring = pool_->ring();
  status_.set_state("preparing");
  status_.set_data_epoch(ring.epoch);
  for (uint32_t id : ring.members) status_.add_members(id);
  for (uint32_t id : ring.target) status_.add_target(id);
}

DataRebalancer::~DataRebalancer() {
  watcher_.reset();
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool DataRebalancer::Stopping() const {
  absl::MutexLock l(&mu_);
  return stop_;
}

void DataRebalancer::Add(const std::vector<DataNodeEndpoint>& nodes) {
  absl::MutexLock l(&mu_);
  for (const auto& n : nodes) {
    auto same = [&](const DataNodeEndpoint& e) { return e.id == n.id; };
    if (std::none_of(wanted_.begin(), wanted_.end(), same)) {
      wanted_.push_back(n);
      idle_ = false;
    }
  }
}

void DataRebalancer::FollowEtcd(membership::EtcdClient* client, const std::string& prefix) {
  membership::MembershipWatcher::Options o;
  o.prefix = prefix;
  watcher_ =
      membership::MembershipWatcher::Start(client, o, [this](const membership::MemberView& view) {
        std::vector<DataNodeEndpoint> nodes;
        for (const auto& r : view.nodes(membership::Role::kData)) {
          nodes.push_back({r.id, r.address, r.weight, r.zone});
        }
        Add(nodes);
      });
}

absl::Status DataRebalancer::OnJoin(uint32_t id, gateway::CacheClient* client) {
  absl::MutexLock pl(&publish_mu_);
  const DataRing ring = pool_->ring();
  absl::Status s = client->SetDataRing(ring);
  if (s.ok()) spdlog::info("cache node {} joins with data ring epoch {}", id, ring.epoch);
  return s;
}

v1::DataRebalance DataRebalancer::Status() const {
  absl::MutexLock l(&mu_);
  return status_;
}

bool DataRebalancer::WaitIdle(absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return idle_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void DataRebalancer::SetState(const std::string& state, const std::string& message) {
  const DataRing ring = pool_->ring();
  absl::MutexLock l(&mu_);
  if (status_.state() != state) {
    spdlog::info("data rebalance: {} (data ring epoch {})", state, ring.epoch);
  }
  status_.set_state(state);
  status_.set_message(message);
  status_.set_data_epoch(ring.epoch);
  status_.clear_members();
  status_.clear_target();
  for (uint32_t id : ring.members) status_.add_members(id);
  for (uint32_t id : ring.target) status_.add_target(id);
  status_.clear_out();
  for (uint32_t id : ring.out) status_.add_out(id);
}

void DataRebalancer::Loop() {
  bool published = false;
  for (;;) {
    if (Stopping()) return;
    absl::Status s;
    if (!published) {
      // A restart may have left cache nodes one step behind: give them the ring first.
      s = Publish(pool_->ring());
      published = s.ok();
    }
    if (s.ok()) s = Step();
    if (!s.ok()) {
      if (Stopping()) return;
      spdlog::warn("data rebalance: {}; retrying", s.ToString());
      {
        absl::MutexLock l(&mu_);
        status_.set_message(s.ToString());
      }
      absl::MutexLock l(&mu_);
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), options_.retry_interval);
      continue;
    }
    bool idle;
    {
      absl::MutexLock l(&mu_);
      idle = idle_;
    }
    if (idle && clock_->Now() - last_scrub_poll_ >= options_.scrub_poll) {
      last_scrub_poll_ = clock_->Now();
      scrub_.Poll(/*start=*/false);
    }
    if (idle) {
      absl::MutexLock l(&mu_);
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !idle_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), options_.heal_interval);
    }
  }
}

absl::Status DataRebalancer::Step() {
  // Data nodes that lost their store first (every pass, also while idle: the loop wakes every
  // heal_interval); a rebalance copies only from replicas complete for a VDI.
  if (absl::Status h = Heal(); !h.ok() && !Stopping()) {
    spdlog::warn("data nodes: {}; retrying", h.ToString());
  }
  DataRing cur = pool_->ring();
  TidyActions(cur);
  RC_RETURN_IF_ERROR(TakeOut(&cur));
  if (!cur.target.empty()) RC_RETURN_IF_ERROR(CopyAndSwitch(&cur));
  RC_RETURN_IF_ERROR(FinishPurge(cur));
  return Prepare(cur);
}

// Nodes going out leave the I/O path at once, also in the middle of a move: writes and destage
// must not wait for a node that is gone.
absl::Status DataRebalancer::TakeOut(DataRing* cur) {
  const std::vector<uint32_t> outs = DueOut(*cur);
  if (outs.empty()) return absl::OkStatus();
  RC_ASSIGN_OR_RETURN(DataRing next, RingWithNodesOut(*cur, outs));
  spdlog::warn(
      "data rebalance: data nodes {} go out of the ring of {}: their replicas are made again "
      "on {}",
      absl::StrJoin(outs, ","), absl::StrJoin(cur->members, ","), absl::StrJoin(next.target, ","));
  {
    absl::MutexLock al(&actions_mu_);
    absl::MutexLock l(&mu_);
    for (uint32_t id : outs) asks_.out.erase(id);
    actions_dirty_ = true;
    status_.set_reason("out");
    ResetCountsLocked();
  }
  SetState("preparing", absl::StrCat("data nodes ", absl::StrJoin(outs, ","), " out"));
  RC_RETURN_IF_ERROR(Publish(next));
  *cur = next;
  return absl::OkStatus();
}

// Copies every replica to its home on the target ring, marks the purge (here and in etcd: a
// coordinator taking over finishes it), then switches to the target.
absl::Status DataRebalancer::CopyAndSwitch(DataRing* cur) {
  SetState("copying");
  // Before the copy, every cache node must write to the target's homes too and the joining nodes
  // must know every VDI. The Publish that set the target did both, unless it failed part way (a
  // joining node refused the connection for a moment after its restart): the pool then holds
  // the target and the retry comes straight here. Publishing again (a no-op where it was done)
  // closes both holes: without the VDIs every copy to the node failed "unknown VDI" for good;
  // without the ring the cache nodes kept destaging to the old homes only, blocks written after
  // the copy's scan never reached the new home, and the purge after the switch deleted the only
  // copies (the disk nemeses: 118 blocks lost).
  RC_RETURN_IF_ERROR(Publish(*cur));
  RC_RETURN_IF_ERROR(Copy(*cur));
  const DataRing next = RingAfterCopy(*cur);
  SetState("switching");
  if (!options_.state_path.empty()) {
    RC_RETURN_IF_ERROR(WriteFileAtomically(PurgeMarker(options_.state_path), "purge\n"));
  }
  if (options_.save_purge) RC_RETURN_IF_ERROR(options_.save_purge(true));
  {
    absl::MutexLock l(&mu_);
    purge_pending_ = true;
  }
  RC_RETURN_IF_ERROR(Publish(next));
  *cur = next;
  return absl::OkStatus();
}

// Deletes the replicas left on former homes, then the purge marks.
absl::Status DataRebalancer::FinishPurge(const DataRing& cur) {
  {
    absl::MutexLock l(&mu_);
    if (!purge_pending_) return absl::OkStatus();
  }
  SetState("deleting");
  // No cache node may still read or write by the ring before the switch once its former homes
  // lose their replicas: the Publish of the switch may have failed part way (see CopyAndSwitch).
  RC_RETURN_IF_ERROR(Publish(cur));
  RC_RETURN_IF_ERROR(Purge(cur));
  if (!options_.state_path.empty()) {
    std::error_code ec;
    std::filesystem::remove(PurgeMarker(options_.state_path), ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot remove the purge marker: ", ec.message()));
    }
  }
  if (options_.save_purge) RC_RETURN_IF_ERROR(options_.save_purge(false));
  absl::MutexLock l(&mu_);
  purge_pending_ = false;
  return absl::OkStatus();
}

void DataRebalancer::ResetCountsLocked() {
  status_.set_blocks_scanned(0);
  status_.set_blocks_estimated(0);
  status_.set_blocks_copied(0);
  status_.set_blocks_deleted(0);
}

void DataRebalancer::SetIdleLocked(const DataRing& cur) {
  if (status_.state() != "idle" && status_.state() != "preparing") {
    spdlog::info(
        "data rebalance: done; data ring {} (epoch {}): {} blocks scanned, {} copied, {} "
        "deleted",
        absl::StrJoin(cur.members, ","), cur.epoch, status_.blocks_scanned(),
        status_.blocks_copied(), status_.blocks_deleted());
  }
  idle_ = true;
  status_.set_state("idle");
  status_.set_message("");
  status_.set_eta_seconds(0);
  status_.set_data_epoch(cur.epoch);
  status_.clear_members();
  status_.clear_target();
  status_.clear_out();
  for (uint32_t id : cur.members) status_.add_members(id);
  for (uint32_t id : cur.out) status_.add_out(id);
}

// The next move (joins, decommissions, nodes put back in), or idle. Publishes the prepared ring;
// the next pass copies.
absl::Status DataRebalancer::Prepare(const DataRing& cur) {
  DataRingPlan plan;
  {
    absl::MutexLock al(&actions_mu_);
    absl::MutexLock l(&mu_);
    DataRingAsks asks;
    asks.in.assign(asks_.in.begin(), asks_.in.end());
    asks.wanted = wanted_;
    asks.decommission.assign(asks_.decommission.begin(), asks_.decommission.end());
    plan = PlanDataRing(cur, asks);
    for (uint32_t id : plan.in_done) asks_.in.erase(id);
    if (!plan.in_done.empty()) actions_dirty_ = true;
    if (plan.idle()) {
      SetIdleLocked(cur);
      return absl::OkStatus();
    }
    ResetCountsLocked();
    status_.set_reason(plan.reason());
  }
  std::vector<uint32_t> ids;
  for (const auto& j : plan.joining) {
    // A node joins holding nothing: one that was out (or served another ring) keeps only stale
    // copies and log records. Cleared before any cache node may write there.
    RC_RETURN_IF_ERROR(pool_->ClearStore(
        j, absl::StrCat("joining the data ring of ", absl::StrJoin(cur.members, ","))));
    ids.push_back(j.id);
  }
  {
    absl::MutexLock al(&actions_mu_);
    absl::MutexLock l(&mu_);
    for (uint32_t id : plan.leaving) asks_.decommission.erase(id);
    if (!plan.leaving.empty()) actions_dirty_ = true;
  }
  if (!plan.back_in.empty()) {
    spdlog::info("data rebalance: data nodes {} are in again", absl::StrJoin(plan.back_in, ","));
  }
  if (!ids.empty()) {
    spdlog::info("data rebalance: data nodes {} join the ring of {}", absl::StrJoin(ids, ","),
                 absl::StrJoin(cur.members, ","));
  }
  if (!plan.leaving.empty()) {
    spdlog::info("data rebalance: data nodes {} are decommissioned: their replicas move to {}",
                 absl::StrJoin(plan.leaving, ","), absl::StrJoin(plan.prep.target, ","));
  }
  SetState(
      "preparing",
      ids.empty() ? "" : absl::StrCat("registering VDIs on data nodes ", absl::StrJoin(ids, ",")));
  return Publish(plan.prep);  // the next Step copies; asks_.in is emptied by the next pass
}

std::vector<uint32_t> DataRebalancer::DueOut(const DataRing& ring) {
  std::vector<uint32_t> live;
  for (uint32_t id : ring.members) {
    if (!ring.IsOut(id)) live.push_back(id);
  }
  std::vector<uint32_t> due;
  {
    absl::MutexLock l(&mu_);
    for (uint32_t id : live) {
      if (asks_.out.contains(id)) due.push_back(id);
    }
  }
  if (options_.down_out > absl::ZeroDuration()) {
    // Down since the first pass that saw it down (a pass runs at least every heal_interval),
    // on the injected clock.
    const std::vector<uint32_t> down_now = pool_->DownFor(0);
    const absl::Time now = clock_->Now();
    absl::erase_if(down_since_, [&](const auto& d) {
      return std::find(down_now.begin(), down_now.end(), d.first) == down_now.end();
    });
    for (uint32_t id : down_now) down_since_.try_emplace(id, now);
    size_t up = 0;
    for (uint32_t id : live) {
      if (std::find(down_now.begin(), down_now.end(), id) == down_now.end()) ++up;
    }
    for (uint32_t id : live) {
      auto since = down_since_.find(id);
      if (since == down_since_.end() || now - since->second < options_.down_out ||
          std::find(due.begin(), due.end(), id) != due.end()) {
        continue;
      }
      // Ceph keeps a share of its OSDs in for the same reason: a gateway that lost its own
      // network sees every node down and must not empty the ring.
      if (up * 2 <= live.size()) {
        spdlog::warn(
            "data node {} is down for more than {}, but only {} of {} data nodes "
            "answer: not taking it out",
            id, absl::FormatDuration(options_.down_out), up, live.size());
        continue;
      }
      spdlog::warn("data node {} is down for more than {} (down-out interval): taking it out", id,
                   absl::FormatDuration(options_.down_out));
      due.push_back(id);
    }
  }
  return due;
}

int DataRebalancer::MaxReplication() const {
  int n = 1;
  for (const VdiRecord& r : router_->catalog()->List()) {
    n = std::max(n, static_cast<int>(r.geometry.replication()));
  }
  return n;
}

absl::Status DataRebalancer::SaveActions() {
  DataActions asks;
  {
    absl::MutexLock l(&mu_);
    asks = asks_;
  }
  absl::Status s;
  if (options_.save_actions) {
    s = options_.save_actions(asks);
  } else if (!options_.state_path.empty()) {
    s = WriteFileAtomically(ActionsFile(options_.state_path), EncodeDataActions(asks));
  }
  absl::MutexLock l(&mu_);
  actions_dirty_ = !s.ok();
  return s;
}

absl::Status DataRebalancer::RegisterVdis() {
  // The joining nodes (in the target, not yet members) get every block copied before a read
  // reaches them: the rebalancer vouches for them. A member that learns of a VDI only now
  // (wiped) stays incomplete for it.
  // A member that does not answer is skipped: once back, Heal registers what it misses
  // (incomplete), and one down for good goes out. A joining node must answer.
  const datanode::DataRing ring = pool_->ring();
  absl::flat_hash_set<uint32_t> joining(ring.target.begin(), ring.target.end());
  for (uint32_t m : ring.members) joining.erase(m);
  const std::vector<VdiRecord> catalog = router_->catalog()->List();
  for (const DataNodeEndpoint& e : ring.nodes) {
    if (ring.IsOut(e.id)) continue;
    if (joining.contains(e.id)) RC_RETURN_IF_ERROR(CarrySeals(ring, e.id));
    for (const VdiRecord& r : catalog) {
      absl::Status s = pool_->PutVdiOn(e.id, r.geometry, joining.contains(e.id));
      if (s.ok()) continue;
      if (joining.contains(e.id) || !(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s))) {
        return s;
      }
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status DataRebalancer::CarrySeals(const DataRing& ring, uint32_t node) {
  for (uint32_t writer : router_->member_ids()) {
    uint64_t seal = 0;
    for (uint32_t m : ring.members) {
      if (m == node || ring.IsOut(m)) continue;
      absl::StatusOr<uint64_t> held = pool_->SealLogOn(m, writer, 0);
      if (held.ok()) seal = std::max(seal, *held);  // one that does not answer is sealed by
                                                    // the takeover that raises its seal next
    }
    if (seal == 0) continue;
    RC_ASSIGN_OR_RETURN(uint64_t now_held, pool_->SealLogOn(node, writer, seal));
    spdlog::info("data node {}: the log of cache node {} sealed below ring epoch {}, as on the "
                 "other data nodes",
                 node, writer, now_held);
  }
  return absl::OkStatus();
}

absl::Status DataRebalancer::Publish(const DataRing& ring) {
  {
    absl::MutexLock pl(&publish_mu_);
    RC_RETURN_IF_ERROR(pool_->SetRing(ring));
    if (!options_.state_path.empty()) {
      RC_RETURN_IF_ERROR(datanode::SaveDataRing(options_.state_path, ring));
    }
    if (options_.save_ring) RC_RETURN_IF_ERROR(options_.save_ring(ring));
    // Every data node keeps a copy: a cache node that lost its own finds the current ring there.
    if (const std::vector<uint32_t> missed = pool_->KeepRingOnNodes(ring); !missed.empty()) {
      spdlog::warn("data ring epoch {}: data nodes {} did not take a copy (down?)", ring.epoch,
                   absl::StrJoin(missed, ","));
    }
  }
  // New nodes must know every VDI before a cache node writes there; a VDI created while the
  // pool switched is registered on the new nodes by this second pass.
  RC_RETURN_IF_ERROR(RegisterVdis());
  for (;;) {
    std::vector<std::string> behind;
    {
      // Per round, so that a joining node (OnJoin) is not held up by a member that is down.
      absl::MutexLock pl(&publish_mu_);
      for (const auto& [id, client] : router_->ServingOrJoining()) {
        absl::Status s = client->SetDataRing(ring);
        if (!s.ok()) behind.push_back(absl::StrCat("cache node ", id, ": ", s.message()));
      }
    }
    RC_RETURN_IF_ERROR(RegisterVdis());
    if (behind.empty()) return absl::OkStatus();
    // A member that is down is waited for until it answers or leaves the ring (its lease
    // expires): it must not keep using an older ring.
    {
      absl::MutexLock l(&mu_);
      status_.set_message(absl::StrCat("waiting for ", absl::StrJoin(behind, "; ")));
    }
    if (Stopping()) return absl::CancelledError("stopping");
    absl::MutexLock l(&mu_);
    auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&stop), options_.retry_interval);
  }
}

}  // namespace ringcache::coordinator
