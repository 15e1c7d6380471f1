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

RenamedPolicy::RenamedPolicy(std::unique_ptr<policy::CachePolicy> inner, std::vector<uint32_t> ids)
    : inner_(std::move(inner)), ids_(std::move(ids)) {
  for (uint32_t v = 0; v < ids_.size(); ++v) back_[ids_[v]] = v;
}

policy::BlockKey RenamedPolicy::In(policy::BlockKey key) const {
  if (key.vdi < ids_.size()) key.vdi = ids_[key.vdi];
  return key;
}

uint32_t RenamedPolicy::Out(uint32_t vdi) const {
  auto it = back_.find(vdi);
  return it == back_.end() ? vdi : it->second;
}

void RenamedPolicy::OnAccess(const policy::Access& access, policy::Outcome* out) {
  policy::Access renamed = access;
  renamed.key = In(access.key);
  inner_->OnAccess(renamed, out);
  for (policy::Eviction& e : out->evicted) e.key.vdi = Out(e.key.vdi);
}

void RenamedPolicy::AppendVdiStats(std::vector<policy::VdiStats>* out) const {
  const size_t first = out->size();
  inner_->AppendVdiStats(out);
  for (size_t i = first; i < out->size(); ++i) (*out)[i].vdi = Out((*out)[i].vdi);
}

}  // namespace ringcache::sim
