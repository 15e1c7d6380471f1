// ShardedPolicy: several caches behind one CachePolicy, each block access going to the one
// `route` names. It is the simulator's model of a cluster of cache nodes: one cache per member
// of the gateway's ring, each block going to its object's owner (ringcache-sim replay, when the
// live cluster has more than one cache node).
//
// Thread-safety: none (CachePolicy's contract).
#ifndef RINGCACHE_TOOLS_SIM_SHARDED_POLICY_H_
#define RINGCACHE_TOOLS_SIM_SHARDED_POLICY_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/types.h"

namespace ringcache::sim {

class ShardedPolicy final : public policy::CachePolicy {
 public:
  // Returns the index into `shards` of the cache that holds `key`.
  using Route = std::function<size_t(const policy::BlockKey& key)>;
  // REQUIRES: `shards` non-empty, none null; `route` returns an index below shards.size().
  ShardedPolicy(std::vector<std::unique_ptr<policy::CachePolicy>> shards, Route route);

  std::string_view name() const override { return name_; }
  void OnAccess(const policy::Access& access, policy::Outcome* out) override {
    shards_[route_(access.key)]->OnAccess(access, out);
  }
  bool MarkClean(const policy::BlockKey& key) override {
    return shards_[route_(key)]->MarkClean(key);
  }
  bool Erase(const policy::BlockKey& key) override { return shards_[route_(key)]->Erase(key); }
  policy::Tier Lookup(const policy::BlockKey& key) const override {
    return shards_[route_(key)]->Lookup(key);
  }
  size_t size() const override;
  size_t capacity() const override;
  size_t dirty_count() const override;
  size_t MetadataBytes() const override;
  // One row per VDI: the shards' queues of that VDI summed (accesses, blocks, L_m; U_i and D_i
  // of the first shard that has one).
  void AppendVdiStats(std::vector<policy::VdiStats>* out) const override;

 private:
  std::vector<std::unique_ptr<policy::CachePolicy>> shards_;
  Route route_;
  std::string name_;
};

// RenamedPolicy: one cache whose VDIs are known by the live cluster's ids. The trace numbers its
// VDIs 0, 1, 2...; the cache node its own ids. A policy that hashes the VDI into its state (the
// frequency gate's sketches, sieve.h) collides differently under the two, so the prediction of
// `ringcache-sim replay --gateway` runs on the node's ids: keys go in renamed and come back out
// (evictions, per-VDI rows) under the trace's numbers.
class RenamedPolicy final : public policy::CachePolicy {
 public:
  // `ids[v]` is the cluster's id of trace VDI v (VDIs without one keep their number).
  RenamedPolicy(std::unique_ptr<policy::CachePolicy> inner, std::vector<uint32_t> ids);

  std::string_view name() const override { return inner_->name(); }
  void OnAccess(const policy::Access& access, policy::Outcome* out) override;
  bool MarkClean(const policy::BlockKey& key) override { return inner_->MarkClean(In(key)); }
  bool Erase(const policy::BlockKey& key) override { return inner_->Erase(In(key)); }
  policy::Tier Lookup(const policy::BlockKey& key) const override {
    return inner_->Lookup(In(key));
  }
  size_t size() const override { return inner_->size(); }
  size_t capacity() const override { return inner_->capacity(); }
  size_t dirty_count() const override { return inner_->dirty_count(); }
  size_t MetadataBytes() const override { return sizeof(*this) + inner_->MetadataBytes(); }
  void AppendVdiStats(std::vector<policy::VdiStats>* out) const override;

 private:
  policy::BlockKey In(policy::BlockKey key) const;
  uint32_t Out(uint32_t vdi) const;

  std::unique_ptr<policy::CachePolicy> inner_;
  std::vector<uint32_t> ids_;
  absl::flat_hash_map<uint32_t, uint32_t> back_;  // cluster id -> trace VDI
};

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_SHARDED_POLICY_H_
