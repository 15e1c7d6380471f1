// The router's data path: requests split by object and sent to each object's owner on the
// cache ring (with retries and re-routing), the ring it routes on, and its metrics.
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
  e.read_only_clients = r.read_only_clients;
  e.public_export = r.public_export;
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
  r->qos_ = std::make_unique<QosRegistry>(
      Clock::Real(), [catalog](const std::string& vdi) -> absl::StatusOr<v1::VdiQos> {
        RC_ASSIGN_OR_RETURN(VdiRecord rec, catalog->Find(vdi));
        return rec.qos;
      });
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

double Router::WeightLocked(uint32_t id, double registered, bool reweighted) const {
  if (reweighted && reweighting_.id == id) return reweighting_.weight;
  auto it = weights_.find(id);
  return it == weights_.end() ? registered : it->second.weight;
}

absl::StatusOr<std::unique_ptr<ring::Ring>> Router::BuildRingLocked(uint32_t joining,
                                                                    bool reweighted) const {
  std::vector<ring::Member> members;
  for (const auto& m : members_) {
    if (!removed_.contains(m.id) || m.id == joining) {
      members.push_back(ring::Member{m.id, WeightLocked(m.id, m.weight, reweighted), ""});
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
  qos_->ExportMetrics(registry);
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
  // Every device waits for its VDI's limits (gateway/qos.h): limits set while a connection is
  // open apply to it within a second.
  return std::shared_ptr<BlockDevice>(std::make_shared<QosDevice>(
      std::make_shared<VdiDevice>(this, r.geometry), qos_->For(name), Clock::Real()));
}

}  // namespace ringcache::gateway
