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

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_SHARDED_POLICY_H_
