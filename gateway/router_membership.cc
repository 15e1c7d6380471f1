// The router's cache ring membership: the removed and learned nodes it keeps on disk, ring
// changes carried out as the executor of coordinator/ring_change.h (removal with settle, join
// with handoff), publishing them as the coordinator and following them as another gateway.
#include "gateway/router.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "common/monotonic.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "common/policy_spec.h"
#include "common/status_macros.h"
#include "gateway/piece_pool.h"


namespace ringcache::gateway {
namespace {
constexpr char kEpochLine[] = "#epoch ";
// "#weight ID WEIGHT CAPACITY": a reweight's ring weight (a comment to releases before it, which
// then use the registered weight).
constexpr char kWeightLine[] = "#weight ";
}  // namespace

absl::Status Router::SaveRemoved() {
  if (removed_path_.empty()) return absl::OkStatus();
  std::string text = "# cache nodes removed from the ring (ringcachectl node remove)\n";
  // The static ring epoch: it only grows, across removals, joins and restarts (fencing tokens).
  absl::StrAppend(&text, kEpochLine, epoch_, "\n");
  for (uint32_t id : removed_) absl::StrAppend(&text, id, "\n");
  std::vector<CacheRingState::Weight> weights;
  for (const auto& [id, w] : weights_) weights.push_back(w);
  std::sort(weights.begin(), weights.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (const auto& w : weights) {
    absl::StrAppendFormat(&text, "%s%u %.17g %u\n", kWeightLine, w.id, w.weight, w.capacity_bytes);
  }
  return WriteFileAtomically(removed_path_, text);
}

absl::Status Router::LoadRemoved(const std::string& path) {
  absl::MutexLock l(&mu_);
  removed_path_ = path;
  RC_RETURN_IF_ERROR(
      LoadLearned((std::filesystem::path(path).parent_path() / "added_cache_nodes").string()));
  absl::StatusOr<std::string> text = ReadStateFile(path);
  // Nothing removed yet: a learned node is out until it joins.
  if (absl::IsNotFound(text.status())) {
    for (const auto& [id, unused] : learned_) removed_.insert(id);
    return absl::OkStatus();
  }
  RC_RETURN_IF_ERROR(text.status());
  std::istringstream in(*text);
  std::string line;
  uint64_t saved_epoch = 0;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, kEpochLine)) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(strlen(kEpochLine))),
                            &saved_epoch)) {
        return absl::DataLossError(absl::StrCat(path, ": bad epoch line: ", line));
      }
      continue;
    }
    if (absl::StartsWith(line, kWeightLine)) {
      std::vector<absl::string_view> f =
          absl::StrSplit(line.substr(strlen(kWeightLine)), ' ', absl::SkipEmpty());
      CacheRingState::Weight w;
      if (f.size() != 3 || !absl::SimpleAtoi(f[0], &w.id) || !absl::SimpleAtod(f[1], &w.weight) ||
          !absl::SimpleAtoi(f[2], &w.capacity_bytes) || !(w.weight > 0) ||
          !std::isfinite(w.weight)) {
        return absl::DataLossError(absl::StrCat(path, ": bad weight line: ", line));
      }
      weights_[w.id] = w;
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    uint32_t id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &id)) {
      return absl::DataLossError(absl::StrCat(path, ": not a node id: ", line));
    }
    // An id the router does not know was being learned when the gateway stopped (LearnCacheNode
    // writes this file first): forget it; it is learned again if it is still registered.
    bool known = false;
    for (const auto& m : members_) known = known || m.id == id;
    if (known) removed_.insert(id);
  }
  // Files written before the epoch line: 1 + removals, as the epoch was then.
  epoch_ = std::max<uint64_t>({epoch_, saved_epoch, 1 + removed_.size()});
  if (removed_.size() >= members_.size()) {
    return absl::FailedPreconditionError(absl::StrCat(path, " removes every cache node"));
  }
  if (!removed_.empty()) {
    spdlog::info("cache nodes removed earlier (from {}): {}", path,
                 absl::StrJoin(removed_, ","));
  }
  return RebuildRing();
}

absl::Status Router::RemoveCacheNode(
    uint32_t id, const std::function<absl::Status(CacheClient*, bool)>& settle,
    const std::function<void(const std::string&)>& progress, int attempts) {
  auto say = [&](const std::string& m) {
    spdlog::info("remove cache node {}: {}", id, m);
    if (progress) progress(m);
  };
  CacheClient* client = Client(id);
  auto work = [&](const coordinator::Step&) {
    const bool alive = client->Probe(1000).ok();
    client->SetRingEpoch(ring_epoch());  // a live node first waits for requests on older rings
    say(alive ? "node answers: destaging its dirty blocks"
              : "node does not answer: replaying its write-back log from the data nodes");
    return settle(client, alive);
  };
  return RunChange(coordinator::RingChange::Kind::kRemoval, id, attempts, work, say);
}

absl::StatusOr<CacheClient::NodeHealth> Router::NodeHealth(uint32_t id, int timeout_ms) const {
  CacheClient* c = Client(id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no cache node ", id));
  return c->Health(timeout_ms);
}

absl::StatusOr<v1::ResizeTiersResponse> Router::ResizeCacheNode(uint32_t id, uint64_t ssd_bytes,
                                                                 uint64_t ram_bytes) const {
  CacheClient* c = Client(id);
  if (c == nullptr) return absl::NotFoundError(absl::StrCat("no cache node ", id));
  absl::StatusOr<v1::ResizeTiersResponse> r = c->ResizeTiers(ssd_bytes, ram_bytes);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("cache node ", id, ": ", r.status().message()));
  }
  return r;
}

std::vector<uint32_t> Router::member_ids() const {
  absl::MutexLock l(&mu_);
  std::vector<uint32_t> out;
  for (const auto& m : members_) out.push_back(m.id);
  return out;
}

void Router::SetClientFactoryForTest(ClientFactory factory) {
  absl::MutexLock l(&mu_);
  client_factory_ = std::move(factory);
}

std::unique_ptr<CacheClient> Router::NewClient(uint32_t id, const std::string& address) const {
  std::unique_ptr<CacheClient> c =
      client_factory_ ? client_factory_(id, address) : MakeGrpcCacheClient(address);
  if (c != nullptr) c->SetControlTerm(control_term_.load());
  return c;
}

void Router::SetControlTerm(uint64_t term) {
  RaiseTo(&control_term_, term);
  if (data_nodes_ != nullptr) data_nodes_->SetControlTerm(term);
  absl::MutexLock l(&mu_);
  for (CacheMember& m : members_) {
    if (m.client != nullptr) m.client->SetControlTerm(term);
  }
}

std::string Router::LearnedAddress(uint32_t id) const {
  absl::MutexLock l(&mu_);
  auto it = learned_.find(id);
  return it == learned_.end() ? "" : it->second.address;
}

absl::Status Router::SaveLearned() {
  if (learned_path_.empty()) return absl::OkStatus();
  std::string text =
      "# cache nodes that registered in etcd but are not in the cluster file: id address weight\n";
  for (const auto& [id, l] : learned_) {
    absl::StrAppend(&text, id, " ", l.address, " ", l.weight, "\n");
  }
  return WriteFileAtomically(learned_path_, text);
}

absl::Status Router::LoadLearned(const std::string& path) {
  learned_path_ = path;
  absl::StatusOr<std::string> text = ReadStateFile(path);
  if (absl::IsNotFound(text.status())) return absl::OkStatus();  // none learned yet
  RC_RETURN_IF_ERROR(text.status());
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    uint32_t id = 0;
    double weight = 0;
    if (f.size() != 3 || !absl::SimpleAtoi(f[0], &id) || !absl::SimpleAtod(f[2], &weight) ||
        !(weight > 0)) {
      return absl::DataLossError(absl::StrCat(path, ": not \"id address weight\": ", line));
    }
    bool known = false;
    for (const auto& m : members_) known = known || m.id == id;
    if (known) continue;  // the cluster file lists it now: its entry wins
    learned_[id] = {f[1], weight};
    members_.push_back({id, weight, NewClient(id, f[1])});
    spdlog::info("cache node {} at {}: learned earlier in cluster mode (from {})", id, f[1], path);
  }
  return absl::OkStatus();
}

absl::Status Router::LearnCacheNode(uint32_t id, const std::string& address, double weight) {
  absl::MutexLock l(&mu_);
  for (const auto& m : members_) {
    if (m.id == id) return absl::AlreadyExistsError(absl::StrCat("cache node ", id, " is known"));
  }
  if (!(weight > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("cache node ", id, ": weight ", weight));
  }
  // Removed first: a gateway restarted between the two writes forgets a removed id it does not
  // know (LoadRemoved), whereas a learned node not marked removed would be routed to unjoined.
  removed_.insert(id);
  learned_[id] = {address, weight};
  absl::Status s = SaveRemoved();
  if (s.ok()) s = SaveLearned();
  if (!s.ok()) {
    removed_.erase(id);
    learned_.erase(id);
    return s;
  }
  members_.push_back({id, weight, NewClient(id, address)});
  spdlog::info("cache node {} at {} (weight {}): learned from etcd; not in the ring yet", id,
               address, weight);
  return absl::OkStatus();
}

absl::Status Router::AddCacheNode(uint32_t id,
                                  const std::function<void(const std::string&)>& progress,
                                  int attempts) {
  auto say = [&](const std::string& m) {
    spdlog::info("add cache node {}: {}", id, m);
    if (progress) progress(m);
  };
  CacheClient* joiner = Client(id);
  if (joiner == nullptr) return absl::NotFoundError(absl::StrCat("unknown cache node ", id));
  // Before any request is held: a registered node that does not answer (crashed just after
  // registering, or a bogus record) must not stall the cluster for the attempts below. It
  // registered, so it is expected back: connect now rather than after the backoff of the
  // attempts that failed while it was down (its first probe failed that way, and its join
  // waited for the next round).
  joiner->Reconnect(1000);
  if (absl::Status p = joiner->Probe(1000); !p.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cache node ", id, " does not answer: ", p.message()));
  }
  auto work = [&](const coordinator::Step&) { return Handoff(id, joiner, say); };
  return RunChange(coordinator::RingChange::Kind::kJoin, id, attempts, work, say);
}

absl::Status Router::ReweightCacheNode(uint32_t id, double weight, uint64_t capacity_bytes,
                                       const std::function<void(const std::string&)>& progress,
                                       int attempts) {
  auto say = [&](const std::string& m) {
    spdlog::info("reweight cache node {}: {}", id, m);
    if (progress) progress(m);
  };
  auto work = [&](const coordinator::Step&) { return Handoff(id, nullptr, say); };
  return RunChange(coordinator::RingChange::Kind::kReweight, id, attempts, work, say,
                   {id, weight, capacity_bytes});
}

absl::StatusOr<CacheRingState::Weight> Router::RingWeight(uint32_t id, double* registered) const {
  absl::MutexLock l(&mu_);
  for (const auto& m : members_) {
    if (m.id != id) continue;
    if (registered != nullptr) *registered = m.weight;
    if (auto it = weights_.find(id); it != weights_.end()) return it->second;
    return CacheRingState::Weight{id, m.weight, 0};
  }
  return absl::NotFoundError(absl::StrCat("no cache node ", id));
}

absl::Status Router::Handoff(uint32_t id, CacheClient* joiner,
                             const std::function<void(const std::string&)>& say) {
  std::vector<ring::Member> next;
  {
    absl::MutexLock l(&mu_);
    next = next_ring_->members();
  }
  const std::vector<CacheMember*> live = Live();
  // Every flush below first waits for the requests other gateways sent on older rings.
  const uint64_t epoch = ring_epoch();
  for (CacheMember* m : live) m->client->SetRingEpoch(epoch);
  if (joiner != nullptr) joiner->SetRingEpoch(epoch);
  // Handoff: each member destages the objects it loses (to the joiner, or to and from the node
  // reweighted; no request can dirty them again: they are held), then drops its clean copies of
  // them (so an object that later comes back never meets a stale copy), and must keep no dirty
  // block of them.
  for (CacheMember* m : live) RC_RETURN_IF_ERROR(m->client->FlushMoving(next));
  say("the objects that move are destaged; dropping their clean copies");
  for (CacheMember* m : live) {
    RC_ASSIGN_OR_RETURN(uint64_t kept, m->client->DropBlocks(false, next));
    if (kept != 0) {
      return absl::UnavailableError(
          absl::StrCat("cache node ", m->id, " kept ", kept, " dirty blocks of moving objects"));
    }
  }
  if (joiner == nullptr) return absl::OkStatus();  // a reweight: every node has the VDIs
  RC_RETURN_IF_ERROR(joiner->DropBlocks(true, {}).status());
  for (const auto& r : catalog_->List()) {
    RC_RETURN_IF_ERROR(joiner->RegisterVdi(r.geometry, r.mode, r.policy));
  }
  std::function<absl::Status(uint32_t, CacheClient*)> hook;
  {
    absl::MutexLock l(&mu_);
    hook = join_hook_;
  }
  if (hook) RC_RETURN_IF_ERROR(hook(id, joiner));
  return absl::OkStatus();
}

absl::Status Router::BeginChange(coordinator::RingChange::Kind kind, uint32_t id, int attempts,
                                 CacheRingState::Weight weight,
                                 std::optional<coordinator::RingChange>* change) {
  absl::MutexLock l(&mu_);
  std::vector<uint32_t> ids;
  for (const auto& m : members_) ids.push_back(m.id);
  // removing_ and joining_ are in the state: the core refuses a second change.
  RC_ASSIGN_OR_RETURN(coordinator::RingChange c,
                      coordinator::RingChange::Begin(kind, RingStateLocked(), ids, id, attempts,
                                                     absl::Seconds(1), weight));
  if (kind == coordinator::RingChange::Kind::kRemoval) {
    removing_.insert(id);
  } else {
    const bool reweight = kind == coordinator::RingChange::Kind::kReweight;
    if (reweight) reweighting_ = c.start().reweighting;
    absl::StatusOr<std::unique_ptr<ring::Ring>> next_ring =
        BuildRingLocked(reweight ? 0 : id, reweight);
    if (!next_ring.ok()) {
      reweighting_ = {};
      return next_ring.status();
    }
    // From here on requests for the objects that move (to the joiner, or to and from the node
    // reweighted) wait (OnOwner); the others go on as before. The moving ones already in flight
    // finish first.
    joining_ = true;
    joining_id_ = reweight ? 0 : id;
    next_ring_ = *std::move(next_ring);
  }
  changing_ = true;
  change->emplace(std::move(c));
  return absl::OkStatus();
}

void Router::EndChangeLocked(coordinator::RingChange::Kind kind, uint32_t id) {
  if (kind == coordinator::RingChange::Kind::kRemoval) {
    removing_.erase(id);
  } else {
    joining_ = false;
    joining_id_ = 0;
    reweighting_ = {};
    next_ring_.reset();
  }
  changing_ = false;
}

void Router::Drain(coordinator::RingChange::Kind kind, uint32_t id,
                   const std::function<void(const std::string&)>& say) {
  if (kind != coordinator::RingChange::Kind::kRemoval) {
    absl::MutexLock l(&mu_);
    say(kind == coordinator::RingChange::Kind::kJoin
            ? "holding requests for the objects it takes over; waiting for those in flight"
            : "holding requests for the objects that move; waiting for those in flight");
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& [key, n] : inflight_objects_) {
        if (n != 0 && MovesLocked(ring::ObjectKey{key.first, key.second})) return false;
      }
      return true;
    };
    mu_.Await(absl::Condition(&drained));
    return;
  }
  say("holding its requests; waiting for requests in flight");
  auto drained = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = inflight_.find(id);
    return it == inflight_.end() || it->second == 0;
  };
  bool done;
  {
    absl::MutexLock l(&mu_);
    done = mu_.AwaitWithTimeout(absl::Condition(&drained), absl::Milliseconds(200));
  }
  // Requests still in flight after a moment, to a node that does not answer, are cancelled and go
  // to the next owner once it is settled (they were not acknowledged). Waiting for their
  // deadline would stall clients for a minute. In cluster mode they cannot still be working on
  // the node: it died (its connection is gone), or it never got them (queued while it was
  // unreachable), or it is cut off and fenced itself before its lease expired; and a write it
  // still takes cannot be acknowledged once its log is sealed (docs/design.md §7). In static
  // mode an operator removes a node that does not answer on their own judgement, as before.
  CacheClient* client = Client(id);
  if (!done && !client->Probe(500).ok()) {
    say("node does not answer: cancelling its requests in flight (they go to the next owner)");
    client->CancelInFlight();
  }
  absl::MutexLock l(&mu_);
  mu_.Await(absl::Condition(&drained));
}

absl::Status Router::RunChange(coordinator::RingChange::Kind kind, uint32_t id, int attempts,
                               const std::function<absl::Status(const coordinator::Step&)>& work,
                               const std::function<void(const std::string&)>& say,
                               CacheRingState::Weight weight) {
  using coordinator::Step;
  std::optional<coordinator::RingChange> change;
  RC_RETURN_IF_ERROR(BeginChange(kind, id, attempts, weight, &change));
  const bool removal = kind == coordinator::RingChange::Kind::kRemoval;
  CacheRingState outcome;
  bool started = false, published = false;
  for (Step step = change->next(); step.kind != Step::kDone; step = change->next()) {
    absl::Status result;
    bool term_ended = false;
    switch (step.kind) {
      case Step::kPublish:
        result = Publish(step.state);
        started = result.ok();
        if (started) {
          absl::MutexLock l(&mu_);
          epoch_ = std::max(epoch_, step.state.epoch);
        }
        break;
      case Step::kDrain:
        Drain(kind, id, say);
        break;
      case Step::kSettle:
      case Step::kHandoff:
        result = work(step);
        if (!result.ok()) {
          term_ended = StepRefused(result);
          if (term_ended) {
            say(absl::StrCat("stopped: ", result.ToString()));
          } else if (step.attempt < attempts) {
            say(absl::StrCat(removal ? "not settled yet (" : "not ready yet (", result.ToString(),
                             "); retrying"));
          }
        }
        break;
      case Step::kPause:
        std::this_thread::sleep_for(absl::ToChronoMilliseconds(step.wait));
        break;
      case Step::kPublishOutcome: {
        {
          absl::MutexLock l(&mu_);
          outcome = change->Outcome(RingStateLocked());
        }
        published = PublishOutcome(outcome);
        if (!published) result = absl::FailedPreconditionError("the term ended");
        break;
      }
      case Step::kDone:
        break;
    }
    change->Report(result, term_ended);
  }
  absl::MutexLock l(&mu_);
  EndChangeLocked(kind, id);
  if (!started) return change->status();  // the start was never published: nothing changed
  if (!published) {
    say("not finished here: this gateway's term as coordinator ended; the next one decides");
    return change->status();
  }
  epoch_ = std::max(epoch_, outcome.epoch);
  if (!change->succeeded()) {  // requests go to the node again (removal), or it stays out
    if (removal) {
      if (absl::Status ss = SaveRemoved(); !ss.ok()) spdlog::warn("{}", ss.ToString());
    }
    return change->status();
  }
  return ApplyChangeLocked(*change, say);
}

absl::Status Router::ApplyChangeLocked(const coordinator::RingChange& change,
                                       const std::function<void(const std::string&)>& say) {
  using Kind = coordinator::RingChange::Kind;
  const uint32_t id = change.node();
  std::string done;
  switch (change.kind()) {
    case Kind::kRemoval:
      removed_.insert(id);
      done = "removed; its objects now go to their next owners";
      break;
    case Kind::kJoin:
      removed_.erase(id);
      done = "joined; its objects now go to it";
      break;
    case Kind::kReweight:
      weights_[id] = change.start().reweighting;
      done = absl::StrCat("ring weight ", change.start().reweighting.weight,
                          "; the objects that moved now go to their owners");
      break;
  }
  absl::Status rs = RebuildRing();
  if (rs.ok()) rs = SaveRemoved();
  say(rs.ok() ? done : rs.ToString());
  return rs;
}

bool Router::StepRefused(const absl::Status& s) const {
  if (IsKind(s, ErrorKind::kStaleTerm)) return true;
  absl::MutexLock l(&mu_);
  return publishes_ && !publisher_;  // the term ended: the next coordinator decides
}

void Router::SetPublisher(Publisher publisher) {
  absl::MutexLock l(&mu_);
  if (publisher) publishes_ = true;
  publisher_ = std::move(publisher);
}

}  // namespace ringcache::gateway
