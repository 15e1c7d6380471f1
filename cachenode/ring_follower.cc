#include "cachenode/ring_follower.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "datanode/client/datanode_pool.h"
#include "membership/cache_ring_state.h"

namespace ringcache::cachenode {
namespace {

std::string RingsPrefix(const std::string& prefix) { return prefix + "/rings/"; }

}  // namespace

std::unique_ptr<RingFollower> RingFollower::Start(membership::EtcdClient* client, CacheNode* node,
                                                  RequestGate* gate, Options options) {
  std::unique_ptr<RingFollower> f(new RingFollower(client, node, gate, std::move(options)));
  // The watch starts right after the revision the first read saw, so no change is missed in
  // between (from "now" if that read failed; the periodic read catches up then).
  auto read = f->Sync();
  if (!read.ok()) spdlog::warn("following the rings in etcd: {}", read.status().ToString());
  f->loop_ = std::make_unique<WakeLoop>(f->options_.resync, [p = f.get()] {
    if (absl::Status s = p->SyncOnce(); !s.ok()) {
      spdlog::warn("following the rings in etcd: {}", s.ToString());
    }
  });
  auto wake = [p = f.get()](const std::vector<membership::Event>&, int64_t) { p->loop_->Wake(); };
  f->watch_ = client->WatchPrefix(membership::RingEpochsPrefix(f->options_.prefix),
                                  read.ok() ? *read + 1 : 0, wake, nullptr);
  return f;
}

RingFollower::RingFollower(membership::EtcdClient* client, CacheNode* node, RequestGate* gate,
                           Options options)
    : client_(client), node_(node), gate_(gate), options_(std::move(options)) {}

RingFollower::~RingFollower() {
  watch_.reset();  // first: it wakes the loop
  loop_.reset();
}

uint64_t RingFollower::cache_epoch() const {
  absl::MutexLock l(&mu_);
  return cache_epoch_;
}

absl::Status RingFollower::SyncOnce() { return Sync().status(); }

absl::StatusOr<int64_t> RingFollower::Sync() {
  // The epochs first: a few bytes, whatever the size of the cluster.
  RC_ASSIGN_OR_RETURN(membership::RangeResult epochs,
                      client_->GetPrefix(membership::RingEpochsPrefix(options_.prefix)));
  bool have_cache = false, have_data = false;
  for (const auto& kv : epochs.kvs) {
    auto epoch = membership::DecodeRingEpoch(kv.value);
    if (!epoch.ok()) return absl::DataLossError(absl::StrCat(kv.key, ": ", epoch.status().message()));
    if (kv.key == membership::CacheRingEpochKey(options_.prefix)) {
      have_cache = true;
      RaiseCacheEpoch(*epoch);
    } else if (kv.key == membership::DataRingEpochKey(options_.prefix)) {
      have_data = true;
      if (*epoch <= node_->data_ring_epoch()) continue;
      // A newer data ring: the node needs all of it.
      RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> ring,
                          client_->Get(membership::DataRingKey(options_.prefix)));
      if (ring.has_value()) RC_RETURN_IF_ERROR(ApplyDataRing(ring->key, ring->value));
    }
  }
  if (have_cache && have_data) return epochs.revision;
  // A coordinator of an earlier release writes the rings without their epochs: read them whole.
  RC_ASSIGN_OR_RETURN(membership::RangeResult range,
                      client_->GetPrefix(RingsPrefix(options_.prefix)));
  for (const auto& kv : range.kvs) {
    if (kv.key == membership::CacheRingKey(options_.prefix) && !have_cache) {
      auto cache = membership::DecodeCacheRingState(kv.value);
      if (!cache.ok())
        return absl::DataLossError(absl::StrCat(kv.key, ": ", cache.status().message()));
      RaiseCacheEpoch(cache->epoch);
    } else if (kv.key == membership::DataRingKey(options_.prefix) && !have_data) {
      RC_RETURN_IF_ERROR(ApplyDataRing(kv.key, kv.value));
    }
  }
  return epochs.revision;
}

void RingFollower::RaiseCacheEpoch(uint64_t epoch) {
  {
    absl::MutexLock l(&mu_);
    cache_epoch_ = std::max(cache_epoch_, epoch);
  }
  gate_->Raise(epoch);
}

absl::Status RingFollower::ApplyDataRing(const std::string& key, const std::string& value) {
  auto ring = datanode::DecodeDataRingValue(value);
  if (!ring.ok()) return absl::DataLossError(absl::StrCat(key, ": ", ring.status().message()));
  if (ring->epoch <= node_->data_ring_epoch()) return absl::OkStatus();
  absl::Status s = node_->SetDataRing(*ring);
  // The coordinator's own push may have installed a newer one in between: nothing to do.
  if (!s.ok() && !(s.code() == absl::StatusCode::kFailedPrecondition &&
                   ring->epoch <= node_->data_ring_epoch())) {
    return s;
  }
  return absl::OkStatus();
}

}  // namespace ringcache::cachenode
