// Request splitting and VDI administration over the cache ring.
#include "gateway/router.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/atomic_file.h"
#include "common/errors.h"
#include "common/policy_spec.h"
#include "common/status_macros.h"
#include "gateway/piece_pool.h"

namespace ringcache::gateway {
namespace {

struct Piece {
  uint64_t object;
  uint32_t offset;  // inside the object
  uint32_t len;
  uint64_t buf_off;  // offset inside the request buffer
};

std::vector<Piece> Split(const v1::VdiGeometry& g, uint64_t offset, uint64_t len) {
  std::vector<Piece> out;
  const uint64_t os = g.object_size();
  uint64_t done = 0;
  while (done < len) {
    const uint64_t pos = offset + done;
    const uint64_t in = pos % os;
    const uint64_t n = std::min<uint64_t>(len - done, os - in);
    out.push_back({pos / os, static_cast<uint32_t>(in), static_cast<uint32_t>(n), done});
    done += n;
  }
  return out;
}

// Runs fn(i) for each piece, in parallel on the shared bounded pool; returns the first error.
absl::Status ForEachPiece(size_t n, const std::function<absl::Status(size_t)>& fn) {
  return PiecePool::Shared().Run(n, fn);
}

// Reads above this go through blocking calls (VdiDevice::ReadAsync).
constexpr uint32_t kMaxAsyncRead = 64 << 10;

// One connection's view of one VDI.
class VdiDevice : public BlockDevice {
 public:
  VdiDevice(Router* router, v1::VdiGeometry g) : router_(router), g_(std::move(g)) {}

  absl::Status Read(uint64_t offset, uint32_t len, char* buf) override {
    auto pieces = Split(g_, offset, len);
    return ForEachPiece(pieces.size(), [&](size_t i) {
      const Piece& p = pieces[i];
      return router_->OnOwner(g_, p.object, [&](CacheClient* c) {
        return c->Read(g_.vdi_id(), p.object, p.offset, p.len, buf + p.buf_off);
      });
    });
  }
  // Reads inside one object below the stream size take the router's asynchronous path; larger
  // ones stay on the worker's blocking calls, which run on several connections at once.
  bool ReadAsync(uint64_t offset, uint32_t len, char* buf,
                 absl::AnyInvocable<void(absl::Status)> done) override {
    if (len > kMaxAsyncRead) return false;
    auto pieces = Split(g_, offset, len);
    if (pieces.size() != 1) return false;
    const Piece& p = pieces[0];
    return router_->TryReadAsync(g_, p.object, p.offset, p.len, buf + p.buf_off,
                                 std::move(done));
  }
  absl::Status Write(uint64_t offset, uint32_t len, const char* buf, bool fua) override {
    (void)fua;  // every acknowledged write is already durable
    auto pieces = Split(g_, offset, len);
    return ForEachPiece(pieces.size(), [&](size_t i) {
      const Piece& p = pieces[i];
      return router_->OnOwner(g_, p.object, [&](CacheClient* c) {
        return c->Write(g_.vdi_id(), p.object, p.offset, p.len, buf + p.buf_off);
      });
    });
  }
  absl::Status Trim(uint64_t offset, uint32_t len) override { return Discard(offset, len, false); }
  absl::Status WriteZeroes(uint64_t offset, uint32_t len, bool may_trim, bool fua) override {
    (void)may_trim;
    (void)fua;
    return Discard(offset, len, true);
  }
  absl::Status Flush() override { return absl::OkStatus(); }  // writes are durable when acked
  absl::Status Cache(uint64_t offset, uint32_t len) override {
    auto pieces = Split(g_, offset, len);
    return ForEachPiece(pieces.size(), [&](size_t i) {
      const Piece& p = pieces[i];
      return router_->OnOwner(g_, p.object, [&](CacheClient* c) {
        return c->Prefetch(g_.vdi_id(), p.object, p.offset, p.len);
      });
    });
  }
  absl::Status BlockStatus(uint64_t offset, uint32_t len, std::vector<Extent>* out) override {
    // Answer up to 16 objects; NBD allows a reply that covers only a prefix of the range.
    auto pieces = Split(g_, offset, len);
    if (pieces.size() > 16) pieces.resize(16);
    const uint32_t bs = g_.block_size();
    for (const Piece& p : pieces) {
      std::vector<bool> alloc;
      RC_RETURN_IF_ERROR(router_->OnOwner(g_, p.object, [&](CacheClient* c) {
        return c->Allocation(g_.vdi_id(), p.object, p.offset, p.len, &alloc);
      }));
      const uint32_t first_block = p.offset / bs;
      uint32_t pos = p.offset;
      const uint32_t end = p.offset + p.len;
      for (size_t i = 0; i < alloc.size() && pos < end; ++i) {
        const uint32_t block_end = std::min<uint32_t>(end, (first_block + i + 1) * bs);
        const bool hole = !alloc[i];
        if (!out->empty() && out->back().hole == hole) {
          out->back().length += block_end - pos;
        } else {
          out->push_back({block_end - pos, hole, hole});
        }
        pos = block_end;
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Discard(uint64_t offset, uint32_t len, bool zero) {
    auto pieces = Split(g_, offset, len);
    return ForEachPiece(pieces.size(), [&](size_t i) {
      const Piece& p = pieces[i];
      return router_->OnOwner(g_, p.object, [&](CacheClient* c) {
        return c->Trim(g_.vdi_id(), p.object, p.offset, p.len, zero);
      });
    });
  }

  Router* const router_;
  const v1::VdiGeometry g_;
};

ExportInfo InfoOf(const VdiRecord& r) {
  ExportInfo e;
  e.name = r.geometry.name();
  e.description = absl::StrCat("ringcache VDI ", r.geometry.vdi_id());
  e.vdi_id = r.geometry.vdi_id();
  e.size_bytes = r.geometry.size_bytes();
  e.min_block = 512;
  e.preferred_block = r.geometry.block_size();
  e.max_block = 32u << 20;
  e.read_only = r.read_only;
  e.allowed_clients = r.allowed_clients;
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Router>> Router::Create(Catalog* catalog,
                                                       std::vector<CacheMember> cache_nodes,
                                                       datanode::DataNodePool* data_nodes) {
  if (cache_nodes.empty()) return absl::InvalidArgumentError("no cache nodes configured");
  std::unique_ptr<Router> r(new Router());
  r->catalog_ = catalog;
  r->data_nodes_ = data_nodes;
  std::vector<ring::Member> members;
  for (const auto& m : cache_nodes) members.push_back(ring::Member{m.id, m.weight, ""});
  RC_ASSIGN_OR_RETURN(ring::Ring ring, ring::Ring::BuildCacheRing(std::move(members)));
  absl::MutexLock l(&r->mu_);
  r->ring_ = std::make_unique<ring::Ring>(std::move(ring));
  for (auto& m : cache_nodes) r->members_.push_back(std::move(m));
  return r;
}

std::vector<std::pair<uint32_t, double>> Router::RingMembers() const {
  absl::MutexLock l(&mu_);
  std::vector<std::pair<uint32_t, double>> out;
  for (const ring::Member& m : ring_->members()) out.emplace_back(m.id, m.weight);
  return out;
}

size_t Router::cache_node_count() const {
  absl::MutexLock l(&mu_);
  return members_.size() - removed_.size();
}

std::vector<CacheMember*> Router::Live(bool skip_removing) const {
  absl::MutexLock l(&mu_);
  std::vector<CacheMember*> out;
  for (const auto& m : members_) {
    if (removed_.contains(m.id) || (skip_removing && removing_.contains(m.id))) continue;
    out.push_back(const_cast<CacheMember*>(&m));
  }
  return out;
}

std::vector<std::pair<uint32_t, CacheClient*>> Router::ServingOrJoining() const {
  absl::MutexLock l(&mu_);
  std::vector<std::pair<uint32_t, CacheClient*>> out;
  for (const auto& m : members_) {
    if (!removed_.contains(m.id) || m.id == joining_id_) out.emplace_back(m.id, m.client.get());
  }
  return out;
}

void Router::SetJoinHook(std::function<absl::Status(uint32_t, CacheClient*)> hook) {
  absl::MutexLock l(&mu_);
  join_hook_ = std::move(hook);
}

std::vector<uint32_t> Router::removed() const {
  absl::MutexLock l(&mu_);
  std::vector<uint32_t> out(removed_.begin(), removed_.end());
  std::sort(out.begin(), out.end());
  return out;
}

bool Router::MovesLocked(const ring::ObjectKey& key) const {
  return next_ring_ != nullptr && next_ring_->Owner(key) != ring_->Owner(key);
}

namespace {
constexpr char kEpochLine[] = "#epoch ";
}  // namespace

uint64_t Router::RingEpochLocked() const {
  return epoch_;
}

uint64_t Router::ring_epoch() const {
  absl::MutexLock l(&mu_);
  return RingEpochLocked();
}

void Router::SetRingEpoch(uint64_t epoch) {
  absl::MutexLock l(&mu_);
  epoch_ = std::max(epoch_, epoch);
}

absl::StatusOr<std::unique_ptr<ring::Ring>> Router::BuildRingLocked(uint32_t joining) const {
  std::vector<ring::Member> members;
  for (const auto& m : members_) {
    if (!removed_.contains(m.id) || m.id == joining) {
      members.push_back(ring::Member{m.id, m.weight, ""});
    }
  }
  RC_ASSIGN_OR_RETURN(ring::Ring ring, ring::Ring::BuildCacheRing(std::move(members)));
  return std::make_unique<ring::Ring>(std::move(ring));
}

CacheMember* Router::MemberLocked(uint32_t id) {
  for (auto& m : members_) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

absl::Status Router::RebuildRing() {
  RC_ASSIGN_OR_RETURN(ring_, BuildRingLocked(0));
  return absl::OkStatus();
}

absl::Status Router::SaveRemoved() {
  if (removed_path_.empty()) return absl::OkStatus();
  std::string text = "# cache nodes removed from the ring (ringcachectl node remove)\n";
  // The static ring epoch: it only grows, across removals, joins and restarts (fencing tokens).
  absl::StrAppend(&text, kEpochLine, epoch_, "\n");
  for (uint32_t id : removed_) absl::StrAppend(&text, id, "\n");
  return WriteFileAtomically(removed_path_, text);
}

absl::Status Router::LoadRemoved(const std::string& path) {
  absl::MutexLock l(&mu_);
  removed_path_ = path;
  RC_RETURN_IF_ERROR(
      LoadLearned((std::filesystem::path(path).parent_path() / "added_cache_nodes").string()));
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {  // nothing removed yet; a learned node is out until it joins
    for (const auto& [id, unused] : learned_) removed_.insert(id);
    return absl::OkStatus();
  }
  char line[64];
  uint64_t saved_epoch = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (absl::StartsWith(line, kEpochLine)) {
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line + strlen(kEpochLine)),
                            &saved_epoch)) {
        std::fclose(f);
        return absl::DataLossError(absl::StrCat(path, ": bad epoch line: ", line));
      }
      continue;
    }
    if (line[0] == '#' || line[0] == '\n') continue;
    uint32_t id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &id)) {
      std::fclose(f);
      return absl::DataLossError(absl::StrCat(path, ": not a node id: ", line));
    }
    // An id the router does not know was being learned when the gateway stopped (LearnCacheNode
    // writes this file first): forget it; it is learned again if it is still registered.
    bool known = false;
    for (const auto& m : members_) known = known || m.id == id;
    if (known) removed_.insert(id);
  }
  std::fclose(f);
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
  uint64_t seen = control_term_.load();
  while (term > seen && !control_term_.compare_exchange_weak(seen, term)) {
  }
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
  std::ifstream in(path);
  if (!in) return absl::OkStatus();  // none learned yet
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
  // registering, or a bogus record) must not stall the cluster for the attempts below.
  if (absl::Status p = joiner->Probe(1000); !p.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cache node ", id, " does not answer: ", p.message()));
  }
  auto work = [&](const coordinator::Step&) { return Handoff(id, joiner, say); };
  return RunChange(coordinator::RingChange::Kind::kJoin, id, attempts, work, say);
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
  joiner->SetRingEpoch(epoch);
  // Handoff: each member destages the objects it loses to the joiner (no request can dirty
  // them again: they are held), then drops its clean copies of them (so an object that later
  // comes back never meets a stale copy), and must keep no dirty block of them.
  for (CacheMember* m : live) RC_RETURN_IF_ERROR(m->client->FlushMoving(next));
  say("the objects that move are destaged; dropping their clean copies");
  for (CacheMember* m : live) {
    RC_ASSIGN_OR_RETURN(uint64_t kept, m->client->DropBlocks(false, next));
    if (kept != 0) {
      return absl::UnavailableError(
          absl::StrCat("cache node ", m->id, " kept ", kept, " dirty blocks of moving objects"));
    }
  }
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
                                 std::optional<coordinator::RingChange>* change) {
  absl::MutexLock l(&mu_);
  std::vector<uint32_t> ids;
  for (const auto& m : members_) ids.push_back(m.id);
  // removing_ and joining_ are in the state: the core refuses a second change.
  RC_ASSIGN_OR_RETURN(coordinator::RingChange c,
                      coordinator::RingChange::Begin(kind, RingStateLocked(), ids, id, attempts,
                                                     absl::Seconds(1)));
  if (kind == coordinator::RingChange::Kind::kRemoval) {
    removing_.insert(id);
  } else {
    RC_ASSIGN_OR_RETURN(std::unique_ptr<ring::Ring> next_ring, BuildRingLocked(id));
    // From here on requests for the objects that move to the joiner wait (OnOwner); the others
    // go on as before. The moving ones already in flight finish first.
    joining_ = true;
    joining_id_ = id;
    next_ring_ = std::move(next_ring);
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
    next_ring_.reset();
  }
  changing_ = false;
}

void Router::Drain(coordinator::RingChange::Kind kind, uint32_t id,
                   const std::function<void(const std::string&)>& say) {
  if (kind == coordinator::RingChange::Kind::kJoin) {
    absl::MutexLock l(&mu_);
    say("holding requests for the objects it takes over; waiting for those in flight");
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
                               const std::function<void(const std::string&)>& say) {
  using coordinator::Step;
  std::optional<coordinator::RingChange> change;
  RC_RETURN_IF_ERROR(BeginChange(kind, id, attempts, &change));
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
  if (removal) {
    removed_.insert(id);
  } else {
    removed_.erase(id);
  }
  absl::Status rs = RebuildRing();
  if (rs.ok()) rs = SaveRemoved();
  say(rs.ok() ? (removal ? "removed; its objects now go to their next owners"
                         : "joined; its objects now go to it")
              : rs.ToString());
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

CacheRingState Router::RingStateLocked() const {
  CacheRingState st;
  st.epoch = epoch_;
  for (const auto& [id, l] : learned_) st.learned.push_back({id, l.address, l.weight});
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
  auto known = [this](uint32_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return MemberLocked(id) != nullptr;
  };
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
    return absl::DataLossError(absl::StrCat("the published cache ring joins unknown node ",
                                            st.joining));
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
  joining_ = st.joining != 0;
  joining_id_ = st.joining;
  if (joining_) {
    RC_ASSIGN_OR_RETURN(next_ring_, BuildRingLocked(st.joining));
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
    st.epoch = std::max(epoch_, min_epoch) + 1;
  }
  RC_RETURN_IF_ERROR(Publish(st));
  absl::MutexLock l(&mu_);
  if (!removing_.empty() || joining_) {
    spdlog::info("coordinator: the previous leader left a {} under way; it is decided again",
                 joining_ ? "join" : "removal");
  }
  removing_.clear();
  joining_ = false;
  joining_id_ = 0;
  next_ring_.reset();
  epoch_ = std::max(epoch_, st.epoch);
  RC_RETURN_IF_ERROR(RebuildRing());
  return SaveRemoved();
}

CacheClient* Router::Client(uint32_t id) const {
  absl::MutexLock l(&mu_);
  for (const auto& m : members_) {
    if (m.id == id) return m.client.get();
  }
  return nullptr;
}

void Router::ExportMetrics(metrics::Registry* registry) {
  {
    absl::MutexLock l(&mu_);
    registry_ = registry;
  }
  registry->AddCallbackGauge("ringcache_gateway_ring_epoch",
                             "Epoch of the cache ring requests are routed by (fencing token).", {},
                             [this] { return static_cast<double>(ring_epoch()); });
  registry->AddCallbackGauge(
      "ringcache_gateway_cache_node_removals",
      "Cache nodes being removed now (their dirty data destaged or replayed from the log).", {},
      [this] {
        absl::MutexLock l(&mu_);
        return static_cast<double>(removing_.size());
      });
  registry->AddCallbackGauge("ringcache_gateway_cache_node_joins",
                             "Cache nodes joining now (objects handed off to them).", {},
                             [this] {
                               absl::MutexLock l(&mu_);
                               return joining_ ? 1.0 : 0.0;
                             });
}

Router::CallMetrics* Router::CallMetricsLocked(uint32_t id) {
  if (registry_ == nullptr) return nullptr;
  std::unique_ptr<CallMetrics>& m = call_metrics_[id];
  if (m) return m.get();
  m = std::make_unique<CallMetrics>();
  const std::string node = absl::StrCat(id);
  m->seconds = registry_->GetHistogram(
      "ringcache_gateway_cache_call_duration_seconds",
      "Time of one object call to its owning cache node (one try), by node.", {{"node", node}});
  for (int c = 0; c < CallMetrics::kCodes; ++c) {
    m->calls[c] = registry_->GetCounter(
        "ringcache_gateway_cache_calls_total",
        "Object calls to cache nodes by node and result (absl/gRPC status code name).",
        {{"node", node}, {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(c))}});
  }
  const char* reasons[] = {"fenced", "unreachable", "stale_epoch", "moved"};
  for (int r = 0; r < 4; ++r) {
    m->retries[r] = registry_->GetCounter(
        "ringcache_gateway_cache_call_retries_total",
        "Object calls tried again, by node tried and reason: fenced (the owner refused while it "
        "cannot prove ownership), unreachable (connection broken), stale_epoch (the owner saw a "
        "newer ring), moved (the owner left the ring).",
        {{"node", node}, {"reason", reasons[r]}});
  }
  return m.get();
}

absl::Status Router::OnOwner(const v1::VdiGeometry& g, uint64_t object,
                             const std::function<absl::Status(CacheClient*)>& op) {
  const ring::ObjectKey key{g.vdi_id(), object};
  constexpr int kMaxFencedRetries = 600;  // 100 ms apart: a minute
  int fenced_retries = 0;
  for (;;) {
    uint32_t owner;
    uint64_t epoch;
    CallMetrics* cm;
    {
      absl::MutexLock l(&mu_);
      // An object whose owner is leaving waits until the leaving node's data is settled.
      // An object that moves to a joining node waits until the handoff is done.
      auto ready = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !removing_.contains(ring_->Owner(key)) && !MovesLocked(key);
      };
      mu_.Await(absl::Condition(&ready));
      owner = ring_->Owner(key);
      epoch = RingEpochLocked();
      ++inflight_[owner];
      ++inflight_objects_[{key.vdi_id, key.object_index}];
      cm = CallMetricsLocked(owner);
    }
    CacheClient* client = Client(owner);
    client->SetRingEpoch(epoch);  // ring changes wait for requests in flight: one epoch at a time
    const absl::Time call_start = absl::Now();
    absl::Status s = OnMember(g, object, client, op);
    if (cm != nullptr) {
      cm->seconds->Observe(absl::ToDoubleSeconds(absl::Now() - call_start));
      const int code = static_cast<int>(s.code());
      cm->calls[code < CallMetrics::kCodes ? code : static_cast<int>(absl::StatusCode::kUnknown)]
          ->Increment();
    }
    // UNAVAILABLE from a node that does not answer a probe either: its connection broke (it died,
    // or keepalive found it cut off). Like a fenced node, wait for it to come back or leave the
    // ring, then retry. (A node that answers sent the error itself: it goes to the client.)
    const bool fenced = IsKind(s, ErrorKind::kFenced);
    const bool unreachable = absl::IsUnavailable(s) && !fenced && !client->Probe(500).ok();
    {
      absl::MutexLock l(&mu_);
      EndCallLocked(owner, key);
      // A request that failed because its owner died and was removed meanwhile goes to the new
      // owner (it was not acknowledged, so trying again is safe).
      const bool moved = removed_.contains(owner) || removing_.contains(owner) || joining_;
      // Retried after a pause, for up to a minute: a fenced owner refused the request without
      // doing anything and serves again once its lease is renewed (etcd back), or the object
      // moves (the node is removed); so does an unreachable one. An owner that has seen a newer
      // ring than ours (another sender acted on an ownership change we have not seen yet) did
      // nothing either: retry once our ring caught up (membership).
      const bool stale = IsKind(s, ErrorKind::kStaleEpoch);
      if (stale && ++fenced_retries <= kMaxFencedRetries) {
        if (cm != nullptr) cm->retries[kRetryStaleEpoch]->Increment();
      } else if (!((fenced || unreachable) && !moved && ++fenced_retries <= kMaxFencedRetries)) {
        if (s.ok() || !moved ||
            (!absl::IsUnavailable(s) && !absl::IsDeadlineExceeded(s) && !absl::IsCancelled(s))) {
          return s;
        }
        if (cm != nullptr) cm->retries[kRetryMoved]->Increment();
        continue;
      } else if (cm != nullptr) {
        cm->retries[fenced ? kRetryFenced : kRetryUnreachable]->Increment();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // fenced/stale: wait, retry
  }
}

void Router::EndCallLocked(uint32_t owner, const ring::ObjectKey& key) {
  --inflight_[owner];
  if (auto it = inflight_objects_.find({key.vdi_id, key.object_index});
      it != inflight_objects_.end() && --it->second == 0) {
    inflight_objects_.erase(it);
  }
}

bool Router::TryReadAsync(const v1::VdiGeometry& g, uint64_t object, uint32_t offset,
                          uint32_t len, char* out, absl::AnyInvocable<void(absl::Status)> done) {
  const ring::ObjectKey key{g.vdi_id(), object};
  uint32_t owner;
  uint64_t epoch;
  CallMetrics* cm;
  CacheClient* client = nullptr;
  {
    absl::MutexLock l(&mu_);
    owner = ring_->Owner(key);
    if (removing_.contains(owner) || MovesLocked(key)) return false;
    for (const auto& m : members_) {
      if (m.id == owner) client = m.client.get();
    }
    if (client == nullptr) return false;
    epoch = RingEpochLocked();
    ++inflight_[owner];
    ++inflight_objects_[{key.vdi_id, key.object_index}];
    cm = CallMetricsLocked(owner);
  }
  client->SetRingEpoch(epoch);  // as in OnOwner
  const absl::Time start = absl::Now();
  const bool taken = client->ReadAsync(
      g.vdi_id(), object, offset, len, out,
      [this, owner, key, cm, start, done = std::move(done)](absl::Status s) mutable {
        if (cm != nullptr) {
          cm->seconds->Observe(absl::ToDoubleSeconds(absl::Now() - start));
          const int code = static_cast<int>(s.code());
          cm->calls[code < CallMetrics::kCodes ? code
                                               : static_cast<int>(absl::StatusCode::kUnknown)]
              ->Increment();
        }
        {
          absl::MutexLock l(&mu_);
          EndCallLocked(owner, key);
        }
        done(std::move(s));
      });
  if (!taken) {
    absl::MutexLock l(&mu_);
    EndCallLocked(owner, key);
  }
  return taken;
}

absl::Status Router::OnMember(const v1::VdiGeometry& g, uint64_t object, CacheClient* c,
                              const std::function<absl::Status(CacheClient*)>& op) {
  absl::Status s = op(c);
  if (IsKind(s, ErrorKind::kUnknownVdi)) {
    auto rec = catalog_->Find(g.name());
    if (!rec.ok()) return absl::NotFoundError(absl::StrCat("VDI ", g.name(), " was deleted"));
    RC_RETURN_IF_ERROR(c->RegisterVdi(rec->geometry, rec->mode, rec->policy));
    s = op(c);
  }
  if (!s.ok() && s.code() != absl::StatusCode::kInvalidArgument) {
    spdlog::warn("VDI {} object {}: {}", g.name(), object, s.ToString());
  }
  return s;
}

absl::StatusOr<ExportInfo> Router::Find(const std::string& name) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  return InfoOf(r);
}

std::vector<ExportInfo> Router::List() {
  std::vector<ExportInfo> out;
  for (const auto& r : catalog_->List()) out.push_back(InfoOf(r));
  return out;
}

absl::StatusOr<std::shared_ptr<BlockDevice>> Router::Open(const std::string& name) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  return std::shared_ptr<BlockDevice>(std::make_shared<VdiDevice>(this, r.geometry));
}

absl::Status Router::RegisterAll() {
  for (const auto& r : catalog_->List()) {
    // Not vouched: a data node that learns of the VDI only now (a new or wiped store) missed
    // its writes and stays incomplete for it.
    if (data_nodes_ != nullptr) RC_RETURN_IF_ERROR(data_nodes_->PutVdi(r.geometry));
    // A node being removed is skipped: it is leaving (dead, as a rule: a call would wait for it
    // until its deadline), and a node that comes back is given every VDI when it joins.
    for (CacheMember* m : Live(/*skip_removing=*/true)) {
      RC_RETURN_IF_ERROR(m->client->RegisterVdi(r.geometry, r.mode, r.policy));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<VdiRecord> Router::CreateVdi(const std::string& name, uint64_t size,
                                            uint32_t object_size, uint32_t replication) {
  if (replication > data_nodes_->size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replication ", replication, " needs at least that many data nodes; the cluster has ",
        data_nodes_->size()));
  }
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Create(name, size, object_size, replication));
  // A new VDI: nothing is written yet, so every data node holds all of it (complete).
  absl::Status s = data_nodes_->PutVdi(r.geometry, datanode::DataNodePool::AllComplete);
  for (CacheMember* m : Live()) {
    if (s.ok()) s = m->client->RegisterVdi(r.geometry, r.mode, r.policy);
  }
  if (!s.ok()) {
    catalog_->Delete(name).IgnoreError();
    return s;
  }
  return r;
}

absl::Status Router::DeleteVdi(const std::string& name) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  for (CacheMember* m : Live()) RC_RETURN_IF_ERROR(m->client->DropVdi(r.geometry.vdi_id()));
  RC_RETURN_IF_ERROR(data_nodes_->DeleteVdi(r.geometry.vdi_id()));
  return catalog_->Delete(name);
}

absl::StatusOr<VdiRecord> Router::ResizeVdi(const std::string& name, uint64_t size) {
  RC_ASSIGN_OR_RETURN(VdiRecord old, catalog_->Find(name));
  if (size < old.geometry.size_bytes()) {
    // Drop cached blocks beyond the new end by re-registering after the shrink; data nodes refuse
    // objects beyond the size from now on.
    for (CacheMember* m : Live()) {
      RC_RETURN_IF_ERROR(m->client->Flush(old.geometry.vdi_id()).status());
    }
  }
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Resize(name, size));
  RC_RETURN_IF_ERROR(data_nodes_->PutVdi(r.geometry));
  for (CacheMember* m : Live()) RC_RETURN_IF_ERROR(m->client->RegisterVdi(r.geometry, r.mode, r.policy));
  return r;
}

absl::Status Router::SetMode(const std::string& name, v1::CacheMode mode) {
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  for (CacheMember* m : Live()) RC_RETURN_IF_ERROR(m->client->SetMode(r.geometry.vdi_id(), mode));
  return catalog_->SetMode(name, mode);
}

absl::Status Router::SetPolicy(const std::string& name, const std::string& policy_in) {
  // The cache nodes check the spec itself.
  const std::string policy = CanonicalPolicySpec(policy_in);
  RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
  // Every live node switches, or none: a node that refuses (a bad spec, a node policy without
  // per-VDI queues) puts the ones already switched back.
  std::vector<CacheMember*> done;
  for (CacheMember* m : Live()) {
    absl::Status s = m->client->SetPolicy(r.geometry.vdi_id(), policy);
    if (!s.ok()) {
      for (CacheMember* d : done) (void)d->client->SetPolicy(r.geometry.vdi_id(), r.policy);
      return s;
    }
    done.push_back(m);
  }
  return catalog_->SetPolicy(name, policy);
}

absl::Status Router::Flush(const std::string& name,
                           const std::function<void(size_t, uint64_t)>& progress) {
  uint32_t vdi = 0;
  if (!name.empty()) {
    RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
    vdi = r.geometry.vdi_id();
  }
  uint64_t left = 0;
  const std::vector<CacheMember*> live = Live();
  for (size_t i = 0; i < live.size(); ++i) {
    RC_ASSIGN_OR_RETURN(uint64_t l, live[i]->client->Flush(vdi));
    left += l;
    if (progress) progress(i + 1, left);
  }
  return absl::OkStatus();
}

absl::Status Router::Stats(const std::string& name, std::vector<v1::VdiCacheStats>* out,
                           const std::vector<uint32_t>& skip) {
  uint32_t vdi = 0;
  if (!name.empty()) {
    RC_ASSIGN_OR_RETURN(VdiRecord r, catalog_->Find(name));
    vdi = r.geometry.vdi_id();
  }
  std::map<uint32_t, v1::VdiCacheStats> sum;
  std::map<uint32_t, int> n;
  std::map<uint32_t, int> queues;  // nodes that have a queue for the VDI (and so bounds)
  for (CacheMember* m : Live()) {
    if (std::find(skip.begin(), skip.end(), m->id) != skip.end()) continue;
    std::vector<v1::VdiCacheStats> s;
    RC_RETURN_IF_ERROR(m->client->Stats(vdi, &s));
    for (const auto& x : s) {
      v1::VdiCacheStats& t = sum[x.vdi_id()];
      t.set_vdi_id(x.vdi_id());
      t.set_hits_ram(t.hits_ram() + x.hits_ram());
      t.set_hits_ssd(t.hits_ssd() + x.hits_ssd());
      t.set_misses(t.misses() + x.misses());
      t.set_bypassed(t.bypassed() + x.bypassed());
      t.set_ssd_writes(t.ssd_writes() + x.ssd_writes());
      t.set_reads(t.reads() + x.reads());
      t.set_writes(t.writes() + x.writes());
      t.set_queue_length(t.queue_length() + x.queue_length());
      t.set_max_length(t.max_length() + x.max_length());
      t.set_upper_bound(t.upper_bound() + x.upper_bound());
      t.set_lower_bound(t.lower_bound() + x.lower_bound());
      t.set_dirty_bytes(t.dirty_bytes() + x.dirty_bytes());
      t.set_mode(x.mode());
      // Nodes agree unless one could not run the VDI's own policy (it keeps the node's).
      if (n[x.vdi_id()] == 0) {
        t.set_policy(x.policy());
      } else if (t.policy() != x.policy()) {
        t.set_policy(absl::StrCat(t.policy(), " | ", x.policy()));
      }
      ++n[x.vdi_id()];
      if (x.upper_bound() > 0) ++queues[x.vdi_id()];
    }
  }
  for (auto& [id, t] : sum) {
    // U_i, D_i are fractions: average them over the nodes that hold a queue for the VDI (a
    // node the VDI's objects have not reached yet has none, and reports 0).
    const int q = std::max(1, queues[id]);
    t.set_upper_bound(t.upper_bound() / q);
    t.set_lower_bound(t.lower_bound() / q);
    out->push_back(t);
  }
  return absl::OkStatus();
}

}  // namespace ringcache::gateway
