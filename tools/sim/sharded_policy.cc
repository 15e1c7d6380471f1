// ShardedPolicy: see sharded_policy.h.
#include "tools/sim/sharded_policy.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringcache::sim {

ShardedPolicy::ShardedPolicy(std::vector<std::unique_ptr<policy::CachePolicy>> shards, Route route)
    : shards_(std::move(shards)),
      route_(std::move(route)),
      name_(absl::StrCat(std::string(shards_.front()->name()), " x", shards_.size(), " nodes")) {}

size_t ShardedPolicy::size() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s->size();
  return n;
}

size_t ShardedPolicy::capacity() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s->capacity();
  return n;
}

size_t ShardedPolicy::dirty_count() const {
  size_t n = 0;
  for (const auto& s : shards_) n += s->dirty_count();
  return n;
}

size_t ShardedPolicy::MetadataBytes() const {
  size_t n = sizeof(*this);
  for (const auto& s : shards_) n += s->MetadataBytes();
  return n;
}

void ShardedPolicy::AppendVdiStats(std::vector<policy::VdiStats>* out) const {
  std::map<uint32_t, policy::VdiStats> by_vdi;
  std::vector<policy::VdiStats> rows;
  for (const auto& s : shards_) {
    rows.clear();
    s->AppendVdiStats(&rows);
    for (const policy::VdiStats& r : rows) {
      auto [it, fresh] = by_vdi.try_emplace(r.vdi, r);
      if (fresh) continue;
      it->second.accesses += r.accesses;
      it->second.blocks += r.blocks;
      it->second.max_blocks += r.max_blocks;
    }
  }
  for (const auto& [vdi, row] : by_vdi) out->push_back(row);
}

}  // namespace ringcache::sim
