// Moving home replicas after the data ring changed: see data_rebalancer.h for the four steps.
#include "gateway/data_rebalancer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace ringcache::gateway {
namespace {

using datanode::DataNodeEndpoint;
using datanode::DataRing;

// Consecutive blocks of one object bound for the same nodes, with one writer's stamps.
struct Run {
  uint32_t vdi = 0;
  uint64_t object = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t writer = 0;
  std::vector<uint64_t> seqs;
  std::vector<uint64_t> epochs;
  std::string data;
  std::vector<uint32_t> to;  // destination (copy) or holder (purge) nodes

  bool Extends(const v1::ScannedBlock& b, uint32_t writer_of_b,
               const std::vector<uint32_t>& dest) const {
    return count > 0 && b.vdi_id() == vdi && b.object_index() == object &&
           b.block_index() == first + count && writer_of_b == writer && dest == to;
  }
  // Starts the run at scanned block `b`, bound for `dest` (the run must be empty).
  void Start(const v1::ScannedBlock& b, const std::vector<uint32_t>& dest) {
    vdi = b.vdi_id();
    object = b.object_index();
    first = b.block_index();
    writer = b.writer();
    to = dest;
  }
  // Appends block `b` (with its data and version) to the run.
  void Add(const v1::ScannedBlock& b) {
    ++count;
    seqs.push_back(b.version());
    epochs.push_back(b.epoch());
    data += b.data();
  }
  // The copy keeps the source's versions.
  datanode::HomeStamp Stamp() const {
    datanode::HomeStamp stamp;
    stamp.writer = writer;
    if (writer != 0) {
      stamp.seqs = seqs;
      stamp.epochs = epochs;
    }
    return stamp;
  }
};

int Copies(int replication, size_t members) {
  return std::min<int>(std::max(replication, 1), static_cast<int>(members));
}

std::string PurgeMarker(const std::string& state_path) { return state_path + ".purge"; }
std::string ActionsFile(const std::string& state_path) { return state_path + ".actions"; }

}  // namespace

std::string EncodeDataActions(const absl::flat_hash_set<uint32_t>& out,
                              const absl::flat_hash_set<uint32_t>& in,
                              const absl::flat_hash_set<uint32_t>& decommission) {
  std::string text;
  auto add = [&text](const char* action, const absl::flat_hash_set<uint32_t>& ids) {
    std::vector<uint32_t> sorted(ids.begin(), ids.end());
    std::sort(sorted.begin(), sorted.end());
    for (uint32_t id : sorted) absl::StrAppend(&text, action, " ", id, "\n");
  };
  add("out", out);
  add("in", in);
  add("decommission", decommission);
  return text;
}

absl::Status DecodeDataActions(const std::string& text, absl::flat_hash_set<uint32_t>* out,
                               absl::flat_hash_set<uint32_t>* in,
                               absl::flat_hash_set<uint32_t>* decommission) {
  out->clear();
  in->clear();
  decommission->clear();
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint32_t id = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(f[1], &id)) {
      return absl::DataLossError(absl::StrCat("bad data node action line '", line, "'"));
    }
    if (f[0] == "out") {
      out->insert(id);
    } else if (f[0] == "in") {
      in->insert(id);
    } else if (f[0] == "decommission") {
      decommission->insert(id);
    } else {
      return absl::DataLossError(absl::StrCat("unknown data node action in '", line, "'"));
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<DataRebalancer> DataRebalancer::Start(Router* router,
                                                      datanode::DataNodePool* pool,
                                                      Options options) {
  std::unique_ptr<DataRebalancer> r(new DataRebalancer(router, pool, std::move(options)));
  r->thread_ = std::thread([p = r.get()] { p->Loop(); });
  return r;
}

DataRebalancer::DataRebalancer(Router* router, datanode::DataNodePool* pool, Options options)
    : router_(router),
      pool_(pool),
      options_(std::move(options)),
      scrub_(router, pool),
      pacer_({options_.refill_mb_s, options_.busy_mb_s, absl::Milliseconds(500)},
             [pool] { return pool->ClientOps(); }) {
  purge_pending_ = options_.purge_pending;
  if (!options_.state_path.empty()) {
    purge_pending_ = purge_pending_ || std::filesystem::exists(PurgeMarker(options_.state_path));
  }
  // Operator actions a predecessor (or this gateway before a restart) accepted and did not
  // carry out yet.
  std::string actions = options_.actions;
  // Cluster mode keeps them in etcd only: a file left from an earlier term of this gateway
  // may name actions another coordinator carried out since.
  if (!options_.save_actions && !options_.state_path.empty()) {
    std::ifstream f(ActionsFile(options_.state_path));
    std::stringstream text;
    text << f.rdbuf();
    absl::StrAppend(&actions, text.str());
  }
  if (absl::Status s = DecodeDataActions(actions, &ask_out_, &ask_in_, &ask_decommission_);
      !s.ok()) {
    spdlog::error("data rebalance: the saved operator actions are unreadable ({}); they are "
                  "dropped: ask again with `ringcachectl datanode out|in|decommission`",
                  s.ToString());
    ask_out_.clear();  // (the lines before the bad one were read)
    ask_in_.clear();
    ask_decommission_.clear();
  } else if (!actions.empty()) {
    spdlog::info("data rebalance: carrying out the saved operator actions: {}",
                 absl::StrJoin(absl::StrSplit(actions, '\n', absl::SkipWhitespace()), "; "));
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
  watcher_ = membership::MembershipWatcher::Start(
      client, o, [this](const membership::MemberView& view) {
        std::vector<DataNodeEndpoint> nodes;
        for (const auto& r : view.nodes(membership::Role::kData)) {
          nodes.push_back({r.id, r.address, r.weight, r.zone});
        }
        Add(nodes);
      });
}

absl::Status DataRebalancer::OnJoin(uint32_t id, CacheClient* client) {
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
    if (idle && absl::Now() - last_scrub_poll_ >= options_.scrub_poll) {
      last_scrub_poll_ = absl::Now();
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
  // Nodes going out leave the I/O path at once, also in the middle of a move: writes and
  // destage must not wait for a node that is gone.
  if (const std::vector<uint32_t> outs = DueOut(cur); !outs.empty()) {
    DataRing next = cur;
    next.epoch = cur.epoch + 1;
    next.target = cur.target.empty() ? cur.members : cur.target;
    for (uint32_t id : outs) {
      next.out.push_back(id);
      std::erase(next.target, id);
    }
    if (next.target.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data nodes ", absl::StrJoin(outs, ","), " cannot go out: no data node would be left"));
    }
    spdlog::warn("data rebalance: data nodes {} go out of the ring of {}: their replicas are made "
                 "again on {}",
                 absl::StrJoin(outs, ","), absl::StrJoin(cur.members, ","),
                 absl::StrJoin(next.target, ","));
    {
      absl::MutexLock al(&actions_mu_);
      absl::MutexLock l(&mu_);
      for (uint32_t id : outs) ask_out_.erase(id);
      actions_dirty_ = true;
      status_.set_reason("out");
      status_.set_blocks_scanned(0);
      status_.set_blocks_estimated(0);
      status_.set_blocks_copied(0);
      status_.set_blocks_deleted(0);
    }
    SetState("preparing", absl::StrCat("data nodes ", absl::StrJoin(outs, ","), " out"));
    RC_RETURN_IF_ERROR(Publish(next));
    cur = next;
  }
  if (!cur.target.empty()) {
    SetState("copying");
    RC_RETURN_IF_ERROR(Copy(cur));
    DataRing next;
    next.epoch = cur.epoch + 1;
    next.nodes = cur.Endpoints(cur.target);
    next.members = cur.target;
    // Members that leave (out, or decommissioned and copied from) stay listed as out.
    next.out = cur.out;
    for (uint32_t id : cur.members) {
      if (std::find(cur.target.begin(), cur.target.end(), id) == cur.target.end() &&
          !cur.IsOut(id)) {
        next.out.push_back(id);
      }
    }
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
    cur = next;
  }
  bool purge;
  {
    absl::MutexLock l(&mu_);
    purge = purge_pending_;
  }
  if (purge) {
    SetState("deleting");
    RC_RETURN_IF_ERROR(Purge(cur));
    if (!options_.state_path.empty()) {
      std::error_code ec;
      std::filesystem::remove(PurgeMarker(options_.state_path), ec);
      if (ec) return absl::UnavailableError(absl::StrCat("cannot remove the purge marker: ",
                                                         ec.message()));
    }
    if (options_.save_purge) RC_RETURN_IF_ERROR(options_.save_purge(false));
    absl::MutexLock l(&mu_);
    purge_pending_ = false;
  }
  std::vector<DataNodeEndpoint> joining;
  std::vector<uint32_t> leaving, back_in;
  {
    absl::MutexLock al(&actions_mu_);
    absl::MutexLock l(&mu_);
    // Kept until the ring without them is published (a joining node that does not answer yet
    // is asked again at the next pass).
    for (auto it = ask_in_.begin(); it != ask_in_.end();) {
      if (cur.IsOut(*it)) {
        back_in.push_back(*it);
        ++it;
      } else {
        ask_in_.erase(it++);
        actions_dirty_ = true;
      }
    }
    for (const auto& w : wanted_) {
      const bool out = cur.IsOut(w.id) && std::find(back_in.begin(), back_in.end(), w.id) ==
                                              back_in.end();
      if (!out && !ask_decommission_.contains(w.id) &&
          std::find(cur.members.begin(), cur.members.end(), w.id) == cur.members.end()) {
        joining.push_back(w);
      }
    }
    for (uint32_t id : ask_decommission_) {
      if (std::find(cur.members.begin(), cur.members.end(), id) != cur.members.end() &&
          !cur.IsOut(id)) {
        leaving.push_back(id);
      }
    }
    if (joining.empty() && leaving.empty() && back_in.empty()) {
      if (status_.state() != "idle" && status_.state() != "preparing") {
        spdlog::info("data rebalance: done; data ring {} (epoch {}): {} blocks scanned, {} "
                     "copied, {} deleted",
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
      return absl::OkStatus();
    }
    status_.set_blocks_scanned(0);
    status_.set_blocks_estimated(0);
    status_.set_blocks_copied(0);
    status_.set_blocks_deleted(0);
    std::vector<std::string> why;
    if (!joining.empty()) why.push_back("join");
    if (!leaving.empty()) why.push_back("decommission");
    status_.set_reason(absl::StrJoin(why, ","));
  }
  DataRing prep = cur;
  prep.epoch = cur.epoch + 1;
  for (uint32_t id : back_in) std::erase(prep.out, id);
  if (!joining.empty() || !leaving.empty()) {
    prep.target = cur.members;
    for (uint32_t id : leaving) std::erase(prep.target, id);
  }
  std::vector<uint32_t> ids;
  for (const auto& j : joining) {
    // A node joins holding nothing: one that was out (or served another ring) keeps only stale
    // copies and log records. Cleared before any cache node may write there.
    RC_RETURN_IF_ERROR(pool_->ClearStore(
        j, absl::StrCat("joining the data ring of ", absl::StrJoin(cur.members, ","))));
    std::erase_if(prep.nodes, [&j](const DataNodeEndpoint& e) { return e.id == j.id; });
    prep.nodes.push_back(j);
    prep.target.push_back(j.id);
    ids.push_back(j.id);
  }
  {
    absl::MutexLock al(&actions_mu_);
    absl::MutexLock l(&mu_);
    for (uint32_t id : leaving) ask_decommission_.erase(id);
    if (!leaving.empty()) actions_dirty_ = true;
  }
  if (!back_in.empty()) {
    spdlog::info("data rebalance: data nodes {} are in again", absl::StrJoin(back_in, ","));
  }
  if (!ids.empty()) {
    spdlog::info("data rebalance: data nodes {} join the ring of {}", absl::StrJoin(ids, ","),
                 absl::StrJoin(cur.members, ","));
  }
  if (!leaving.empty()) {
    spdlog::info("data rebalance: data nodes {} are decommissioned: their replicas move to {}",
                 absl::StrJoin(leaving, ","), absl::StrJoin(prep.target, ","));
  }
  SetState("preparing", ids.empty() ? "" : absl::StrCat("registering VDIs on data nodes ",
                                                        absl::StrJoin(ids, ",")));
  return Publish(prep);  // the next Step copies; ask_in_ is emptied by the next pass
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
      if (ask_out_.contains(id)) due.push_back(id);
    }
  }
  if (options_.down_out > absl::ZeroDuration()) {
    const std::vector<uint32_t> long_down = pool_->DownFor(absl::ToInt64Milliseconds(options_.down_out));
    const std::vector<uint32_t> down_now = pool_->DownFor(0);
    size_t up = 0;
    for (uint32_t id : live) {
      if (std::find(down_now.begin(), down_now.end(), id) == down_now.end()) ++up;
    }
    for (uint32_t id : live) {
      if (std::find(long_down.begin(), long_down.end(), id) == long_down.end() ||
          std::find(due.begin(), due.end(), id) != due.end()) {
        continue;
      }
      // Ceph keeps a share of its OSDs in for the same reason: a gateway that lost its own
      // network sees every node down and must not empty the ring.
      if (up * 2 <= live.size()) {
        spdlog::warn("data node {} is down for more than {}, but only {} of {} data nodes "
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
  std::string text;
  {
    absl::MutexLock l(&mu_);
    text = EncodeDataActions(ask_out_, ask_in_, ask_decommission_);
  }
  absl::Status s;
  if (options_.save_actions) {
    s = options_.save_actions(text);
  } else if (!options_.state_path.empty()) {
    s = WriteFileAtomically(ActionsFile(options_.state_path), text);
  }
  absl::MutexLock l(&mu_);
  actions_dirty_ = !s.ok();
  return s;
}

void DataRebalancer::TidyActions(const DataRing& ring) {
  absl::MutexLock al(&actions_mu_);
  {
    absl::MutexLock l(&mu_);
    // Done already (a predecessor published the ring, then died before it saved the actions):
    // an "out" or "decommission" left here would take the node out again after a later "in".
    const size_t before = ask_out_.size() + ask_decommission_.size();
    for (auto* asks : {&ask_out_, &ask_decommission_}) {
      for (auto it = asks->begin(); it != asks->end();) {
        if (ring.IsOut(*it)) {
          asks->erase(it++);
        } else {
          ++it;
        }
      }
    }
    if (ask_out_.size() + ask_decommission_.size() != before) actions_dirty_ = true;
    if (!actions_dirty_) return;
  }
  if (absl::Status s = SaveActions(); !s.ok()) {
    spdlog::warn("data rebalance: cannot record which operator actions are done (retried): {}",
                 s.ToString());
  }
}

absl::StatusOr<std::string> DataRebalancer::Action(uint32_t id, const std::string& action) {
  absl::MutexLock al(&actions_mu_);
  absl::flat_hash_set<uint32_t> out, in, decommission;
  {
    absl::MutexLock l(&mu_);
    out = ask_out_;
    in = ask_in_;
    decommission = ask_decommission_;
  }
  absl::StatusOr<std::string> answer = ActionLocked(id, action);
  if (!answer.ok()) return answer;
  {
    absl::MutexLock l(&mu_);
    if (out == ask_out_ && in == ask_in_ && decommission == ask_decommission_) return answer;
  }
  if (absl::Status s = SaveActions(); !s.ok()) {
    absl::MutexLock l(&mu_);
    ask_out_ = std::move(out);
    ask_in_ = std::move(in);
    ask_decommission_ = std::move(decommission);
    return absl::UnavailableError(absl::StrCat(
        "data node ", id, ": the action could not be recorded, so it is not carried out (",
        s.message(), "); ask again"));
  }
  return answer;
}

absl::StatusOr<std::string> DataRebalancer::ActionLocked(uint32_t id, const std::string& action) {
  const DataRing ring = pool_->ring();
  const bool member = std::find(ring.members.begin(), ring.members.end(), id) != ring.members.end();
  size_t live = 0;
  for (uint32_t m : ring.members) {
    if (!ring.IsOut(m)) ++live;
  }
  absl::MutexLock l(&mu_);
  const bool known = member || std::any_of(wanted_.begin(), wanted_.end(),
                                           [id](const DataNodeEndpoint& e) { return e.id == id; });
  if (!known && !ring.IsOut(id)) {
    return absl::NotFoundError(absl::StrCat("no data node ", id, " in the data ring"));
  }
  const int replication = MaxReplication();
  if (action == "out") {
    if (ring.IsOut(id)) return absl::StrCat("data node ", id, " is out already");
    if (!member) return absl::FailedPreconditionError(absl::StrCat(
        "data node ", id, " is not a member of the data ring yet (it is joining)"));
    if (live <= 1) return absl::FailedPreconditionError("the last data node cannot go out");
    ask_out_.insert(id);
    idle_ = false;
    std::string msg = absl::StrCat("data node ", id,
                                   " goes out: no I/O goes there any more and its replicas are "
                                   "made again on the other data nodes (see `ringcachectl status`)");
    if (static_cast<int>(live) - 1 < replication) {
      absl::StrAppend(&msg, "; only ", live - 1, " data nodes are left for VDIs of replication ",
                      replication, ": they keep ", live - 1, " copies until a node joins");
    }
    return msg;
  }
  if (action == "in") {
    if (!ring.IsOut(id)) return absl::FailedPreconditionError(absl::StrCat(
        "data node ", id, " is not out"));
    if (member) return absl::FailedPreconditionError(absl::StrCat(
        "data node ", id, " is still leaving the ring: put it in once the move ends"));
    ask_in_.insert(id);
    idle_ = false;
    return absl::StrCat("data node ", id,
                        " is in again: it joins as a new node (its store is cleared) once it "
                        "is registered and answers");
  }
  if (action == "decommission") {
    if (ring.IsOut(id)) return absl::FailedPreconditionError(absl::StrCat(
        "data node ", id, " is out: its replicas are made again from the others already"));
    if (!member) return absl::FailedPreconditionError(absl::StrCat(
        "data node ", id, " is not a member of the data ring"));
    if (static_cast<int>(live) - 1 < replication) {
      return absl::FailedPreconditionError(absl::StrCat(
          "decommissioning data node ", id, " would leave ", live - 1,
          " data nodes for VDIs of replication ", replication, ": add a data node first"));
    }
    ask_decommission_.insert(id);
    idle_ = false;
    return absl::StrCat("data node ", id,
                        " is decommissioned: its replicas move to the other data nodes, then it "
                        "leaves the ring (see `ringcachectl status`); stop it afterwards");
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown data node action '", action,
                                                 "' (out, in or decommission)"));
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

absl::flat_hash_map<uint32_t, int> DataRebalancer::Replications() const {
  absl::flat_hash_map<uint32_t, int> out;
  for (const VdiRecord& r : router_->catalog()->List()) {
    out[r.geometry.vdi_id()] = static_cast<int>(r.geometry.replication());
  }
  return out;
}

absl::Status DataRebalancer::ScanNode(
    uint32_t node, uint32_t page_size, bool with_data,
    const std::function<absl::Status(const std::vector<v1::ScannedBlock>&)>& on_page) {
  ring::ObjectKey from;
  uint32_t from_block = 0;
  for (;;) {
    if (Stopping()) return absl::CancelledError("stopping");
    RC_ASSIGN_OR_RETURN(datanode::BlockScanPage page,
                        pool_->ScanBlocks(node, from, from_block, page_size, with_data));
    RC_RETURN_IF_ERROR(on_page(page.blocks));
    if (page.done) return absl::OkStatus();
    from = page.next_object;
    from_block = page.next_block;
  }
}

absl::Status DataRebalancer::Copy(const DataRing& ring) {
  RC_ASSIGN_OR_RETURN(ring::Ring old_ring, datanode::BuildDataRing(ring.Endpoints(ring.members)));
  RC_ASSIGN_OR_RETURN(ring::Ring new_ring, datanode::BuildDataRing(ring.Endpoints(ring.target)));
  const absl::flat_hash_map<uint32_t, int> replication = Replications();
  // A block is copied by the scan of its first reachable old home (all of them hold every
  // acknowledged write: home writes succeed only on all of them).
  pool_->ProbeAll(2000);
  std::vector<uint32_t> down_list = pool_->DownFor(0);
  for (uint32_t id : ring.out) {
    if (std::find(down_list.begin(), down_list.end(), id) == down_list.end()) {
      down_list.push_back(id);  // out: holds nothing trusted, reachable or not
    }
  }
  const absl::flat_hash_set<uint32_t> down(down_list.begin(), down_list.end());
  uint64_t estimate = 0;
  for (uint32_t id : ring.members) {
    if (down.contains(id)) continue;
    auto n = pool_->BlockCount(id);
    if (n.ok()) estimate += *n;
  }
  {
    absl::MutexLock l(&mu_);
    status_.set_blocks_estimated(estimate);
    status_.set_blocks_scanned(0);
    status_.set_message(down.empty() ? ""
                                     : absl::StrCat("copying from the other homes of data nodes ",
                                                    absl::StrJoin(down_list, ","),
                                                    " (down or out)"));
    copy_started_ = absl::Now();
  }
  // A member incomplete for a VDI (a new or wiped store, not refilled yet) is no source for it.
  absl::flat_hash_map<uint32_t, absl::flat_hash_set<uint32_t>> incomplete;
  for (uint32_t id : ring.members) {
    if (down.contains(id)) continue;
    RC_ASSIGN_OR_RETURN(datanode::NodeVdis nv, pool_->VdisOn(id));
    incomplete[id] = std::move(nv.incomplete);
  }
  auto source_for = [&](uint32_t vdi, uint32_t id) {
    return !down.contains(id) && !incomplete[id].contains(vdi);
  };
  const absl::Time start = absl::Now();
  uint64_t bytes = 0;
  for (uint32_t d : ring.members) {
    if (down.contains(d)) continue;
    Run run;
    uint64_t copied = 0;
    auto flush = [&]() -> absl::Status {
      if (run.count == 0) return absl::OkStatus();
      const datanode::HomeStamp stamp = run.Stamp();
      for (uint32_t to : run.to) {
        RC_ASSIGN_OR_RETURN(uint32_t stored, pool_->CopyBlocks(to, run.vdi, run.object, run.first,
                                                               run.data, stamp));
        copied += stored;
        bytes += run.data.size();
      }
      run = Run();
      Throttle(start, bytes);
      return absl::OkStatus();
    };
    auto on_page = [&](const std::vector<v1::ScannedBlock>& blocks) -> absl::Status {
      if (options_.after_scan_for_test) options_.after_scan_for_test(blocks);
      for (const v1::ScannedBlock& b : blocks) {
        if (b.trimmed()) continue;  // nothing to copy: absent is absent
        auto rep = replication.find(b.vdi_id());
        if (rep == replication.end()) continue;  // VDI deleted meanwhile
        const ring::ObjectKey key{b.vdi_id(), b.object_index()};
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> old_homes,
                            old_ring.Owners(key, Copies(rep->second, ring.members.size())));
        auto src = std::find_if(old_homes.begin(), old_homes.end(),
                                [&](uint32_t id) { return source_for(b.vdi_id(), id); });
        if (src == old_homes.end()) {
          return absl::UnavailableError(absl::StrCat(
              "no complete replica of object ", b.object_index(), " of VDI ", b.vdi_id(),
              " answers (down, or a new store not refilled yet); the copy waits"));
        }
        if (*src != d) continue;
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> new_homes,
                            new_ring.Owners(key, Copies(rep->second, ring.target.size())));
        std::vector<uint32_t> dest;
        for (uint32_t h : new_homes) {
          if (std::find(old_homes.begin(), old_homes.end(), h) == old_homes.end()) {
            dest.push_back(h);
          }
        }
        if (dest.empty()) continue;
        if (!run.Extends(b, b.writer(), dest)) {
          RC_RETURN_IF_ERROR(flush());
          run.Start(b, dest);
        }
        run.Add(b);
      }
      RC_RETURN_IF_ERROR(flush());
      absl::MutexLock l(&mu_);
      status_.set_blocks_scanned(status_.blocks_scanned() + blocks.size());
      status_.set_blocks_copied(status_.blocks_copied() + copied);
      copied = 0;
      // The time left at the speed so far (the estimate is RocksDB's: a guide, not a promise).
      const double done = static_cast<double>(status_.blocks_scanned());
      const double total = static_cast<double>(status_.blocks_estimated());
      status_.set_eta_seconds(done > 0 && total > done
                                  ? absl::ToDoubleSeconds(absl::Now() - copy_started_) *
                                        (total - done) / done
                                  : 0);
      return absl::OkStatus();
    };
    RC_RETURN_IF_ERROR(ScanNode(d, options_.scan_page, /*with_data=*/true, on_page));
  }
  return absl::OkStatus();
}

void DataRebalancer::Throttle(absl::Time start, uint64_t bytes) {
  if (start != paced_start_) {
    paced_start_ = start;
    paced_bytes_ = 0;
  }
  const absl::Duration wait = pacer_.After(bytes - paced_bytes_, absl::Now());
  paced_bytes_ = bytes;
  absl::MutexLock l(&mu_);
  status_.set_limit_mb_s(pacer_.limit_bytes_per_s() / 1e6);
  status_.set_paced_for_clients(pacer_.busy() && options_.busy_mb_s > 0);
  if (wait <= absl::ZeroDuration()) return;
  auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
  mu_.AwaitWithTimeout(absl::Condition(&stop), wait);
}

absl::Status DataRebalancer::Heal() {
  const DataRing ring = pool_->ring();
  const std::vector<VdiRecord> catalog = router_->catalog()->List();
  absl::Status first_error;
  auto note = [&first_error](const absl::Status& st) {
    if (!st.ok() && first_error.ok()) first_error = st;
  };
  // What every answering member knows; a member that lacks a catalogued VDI (a new or wiped
  // store) learns it now, incomplete for it: it missed every earlier write.
  absl::flat_hash_map<uint32_t, datanode::NodeVdis> seen;
  for (uint32_t node : ring.members) {
    if (ring.IsOut(node)) continue;  // its replicas are made again by the move
    absl::StatusOr<datanode::NodeVdis> have = pool_->VdisOn(node);
    if (!have.ok()) continue;  // down: looked at again once it answers
    for (const VdiRecord& r : catalog) {
      const uint32_t id = r.geometry.vdi_id();
      if (have->known.contains(id)) continue;
      spdlog::warn("data node {} does not know VDI {} ({}): a new or wiped store; registering "
                   "the VDI there, incomplete until it is refilled",
                   node, id, r.geometry.name());
      const absl::Status put = pool_->PutVdiOn(node, r.geometry, /*complete=*/false);
      note(put);
      if (!put.ok()) continue;
      have->known.insert(id);
      have->incomplete.insert(id);
    }
    seen[node] = *std::move(have);
  }
  // Refill a node's VDI only from members complete for it: every other member must answer and
  // be complete (a block's only other copy may sit on any of them), and the VDI must have
  // another home at all (N >= 2). Otherwise the node stays incomplete: its reads of blocks it
  // lacks fail rather than answer zeros.
  for (const auto& [node, nv] : seen) {
    absl::flat_hash_set<uint32_t> todo;
    for (const VdiRecord& r : catalog) {
      const uint32_t id = r.geometry.vdi_id();
      if (!nv.incomplete.contains(id) || r.geometry.replication() < 2) continue;
      bool sources = true;
      for (uint32_t m : ring.members) {
        if (m == node || ring.IsOut(m)) continue;
        auto it = seen.find(m);
        if (it == seen.end() || !it->second.known.contains(id) ||
            it->second.incomplete.contains(id)) {
          sources = false;
          break;
        }
      }
      if (sources) todo.insert(id);
    }
    if (!todo.empty()) note(Refill(ring, node, todo));
  }
  return first_error;
}

absl::Status DataRebalancer::Refill(const DataRing& ring, uint32_t node,
                                    const absl::flat_hash_set<uint32_t>& vdis) {
  RC_ASSIGN_OR_RETURN(ring::Ring homes_ring, datanode::BuildDataRing(ring.Endpoints(ring.members)));
  const absl::flat_hash_map<uint32_t, int> replication = Replications();
  pool_->ProbeAll(2000);
  for (uint32_t d : pool_->DownFor(0)) {
    if (d != node && !ring.IsOut(d) &&
        std::find(ring.members.begin(), ring.members.end(), d) != ring.members.end()) {
      return absl::UnavailableError(absl::StrCat("refilling data node ", node,
                                                 " needs every other data node; ", d,
                                                 " is down"));
    }
  }
  SetState("refilling", absl::StrCat("data node ", node, " (a new or wiped store) is refilled "
                                     "from the other replicas"));
  spdlog::warn("data node {}: refilling VDIs {} from the other replicas", node,
               absl::StrJoin(vdis, ","));
  const absl::Time start = absl::Now();
  uint64_t copied = 0, bytes = 0;
  for (uint32_t d : ring.members) {
    if (d == node || ring.IsOut(d)) continue;
    Run run;
    auto flush = [&]() -> absl::Status {
      if (run.count == 0) return absl::OkStatus();
      const datanode::HomeStamp stamp = run.Stamp();
      RC_ASSIGN_OR_RETURN(uint32_t stored,
                          pool_->CopyBlocks(node, run.vdi, run.object, run.first, run.data, stamp));
      copied += stored;
      bytes += run.data.size();
      run = Run();
      Throttle(start, bytes);
      return absl::OkStatus();
    };
    auto on_page = [&](const std::vector<v1::ScannedBlock>& blocks) -> absl::Status {
      for (const v1::ScannedBlock& b : blocks) {
        if (b.trimmed() || !vdis.contains(b.vdi_id())) continue;
        auto rep = replication.find(b.vdi_id());
        if (rep == replication.end()) continue;  // VDI deleted meanwhile
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes,
                            homes_ring.Owners(ring::ObjectKey{b.vdi_id(), b.object_index()},
                                              Copies(rep->second, ring.members.size())));
        if (std::find(homes.begin(), homes.end(), node) == homes.end()) continue;
        const std::vector<uint32_t> dest{node};
        if (!run.Extends(b, b.writer(), dest)) {
          RC_RETURN_IF_ERROR(flush());
          run.Start(b, dest);
        }
        run.Add(b);
      }
      RC_RETURN_IF_ERROR(flush());
      absl::MutexLock l(&mu_);
      status_.set_message(absl::StrCat("refilling data node ", node, ": ", copied,
                                       " blocks copied from the other replicas"));
      return absl::OkStatus();
    };
    RC_RETURN_IF_ERROR(ScanNode(d, options_.scan_page, /*with_data=*/true, on_page));
  }
  // Every block the other members held when their scans passed it is on the node now, and
  // everything written since reached it directly (home writes go to every home): complete.
  for (const VdiRecord& r : router_->catalog()->List()) {
    if (!vdis.contains(r.geometry.vdi_id())) continue;
    RC_RETURN_IF_ERROR(pool_->PutVdiOn(node, r.geometry, /*complete=*/true));
  }
  spdlog::warn("data node {}: refilled, {} blocks copied in {}; complete again", node, copied,
               absl::FormatDuration(absl::Now() - start));
  SetState("idle", absl::StrCat("data node ", node, " refilled: ", copied, " blocks"));
  return absl::OkStatus();
}

absl::Status DataRebalancer::Purge(const DataRing& ring) {
  RC_ASSIGN_OR_RETURN(ring::Ring homes_ring, datanode::BuildDataRing(ring.Endpoints(ring.members)));
  const absl::flat_hash_map<uint32_t, int> replication = Replications();
  for (uint32_t d : ring.members) {
    Run run;
    auto flush = [&]() -> absl::Status {
      if (run.count == 0) return absl::OkStatus();
      RC_RETURN_IF_ERROR(pool_->PurgeBlocks(d, run.vdi, run.object, run.first, run.count));
      absl::MutexLock l(&mu_);
      status_.set_blocks_deleted(status_.blocks_deleted() + run.count);
      run = Run();
      return absl::OkStatus();
    };
    auto on_page = [&](const std::vector<v1::ScannedBlock>& blocks) -> absl::Status {
      for (const v1::ScannedBlock& b : blocks) {
        auto rep = replication.find(b.vdi_id());
        if (rep == replication.end()) continue;
        RC_ASSIGN_OR_RETURN(std::vector<uint32_t> homes,
                            homes_ring.Owners(ring::ObjectKey{b.vdi_id(), b.object_index()},
                                              Copies(rep->second, ring.members.size())));
        if (std::find(homes.begin(), homes.end(), d) != homes.end()) continue;
        if (!run.Extends(b, 0, run.to)) {
          RC_RETURN_IF_ERROR(flush());
          run.vdi = b.vdi_id();
          run.object = b.object_index();
          run.first = b.block_index();
        }
        ++run.count;
      }
      return flush();
    };
    RC_RETURN_IF_ERROR(ScanNode(d, 4096, /*with_data=*/false, on_page));
  }
  return absl::OkStatus();
}

}  // namespace ringcache::gateway
