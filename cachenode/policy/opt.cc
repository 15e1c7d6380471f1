// Belady OPT: cached blocks live in a pool of entries indexed by key (flat hash map) and ordered
// by next use in an indexed binary max-heap (each entry knows its heap slot, so a hit re-keys its
// block in O(log n) without leaving stale heap entries). See opt.h for the rule. Not
// thread-safe.
#include "cachenode/policy/opt.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace ringcache::policy {

absl::Status OptConfig::Validate() const {
  if (capacity_blocks < 1 || capacity_blocks > size_t{UINT32_MAX} - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("OptConfig.capacity_blocks must be in [1, 2^32 - 2], got ", capacity_blocks));
  }
  return absl::OkStatus();
}

namespace {

class BeladyOpt final : public CachePolicy {
 public:
  explicit BeladyOpt(const OptConfig& c)
      : capacity_(c.capacity_blocks), allow_bypass_(c.allow_bypass) {
    const size_t reserve = std::min<size_t>(capacity_, size_t{1} << 16);
    entries_.reserve(reserve);
    heap_.reserve(reserve);
    index_.reserve(reserve);
  }

  std::string_view name() const override { return allow_bypass_ ? "opt" : "opt-nobypass"; }

  void OnAccess(const Access& a, Outcome* out) override {
    out->Reset();
    const bool write = a.op == Op::kWrite;
    auto it = index_.find(a.key);
    if (it != index_.end()) {
      const uint32_t e = it->second;
      out->hit = Tier::kSsd;
      if (write) {
        out->ssd_writes = 1;
        if (!entries_[e].dirty) ++dirty_;
        entries_[e].dirty = true;
      }
      const uint64_t old = entries_[e].next_use;
      entries_[e].next_use = a.next_use;
      if (a.next_use > old)
        SiftUp(entries_[e].heap_pos);
      else
        SiftDown(entries_[e].heap_pos);
      return;
    }
    const bool full = heap_.size() >= capacity_;
    if (allow_bypass_ &&
        (a.next_use == kNever || (full && a.next_use >= entries_[heap_[0]].next_use))) {
      // The missed block is the farthest of cached ∪ {it}: caching it cannot gain a hit.
      if (write)
        out->bypassed = true;
      else
        out->rejected = true;
      return;
    }
    if (full) {
      const uint32_t victim = heap_[0];
      out->evicted.push_back(Eviction{entries_[victim].key, entries_[victim].dirty, Tier::kSsd});
      RemoveEntry(victim);
    }
    InsertEntry(a.key, a.next_use, write);
    out->admitted = true;
    out->ssd_writes = 1;
  }

  bool MarkClean(const BlockKey& key) override {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    if (entries_[it->second].dirty) --dirty_;
    entries_[it->second].dirty = false;
    return true;
  }
  bool Erase(const BlockKey& key) override {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    RemoveEntry(it->second);
    return true;
  }
  Tier Lookup(const BlockKey& key) const override {
    return index_.contains(key) ? Tier::kSsd : Tier::kNone;
  }
  size_t size() const override { return heap_.size(); }
  size_t capacity() const override { return capacity_; }
  size_t dirty_count() const override { return dirty_; }
  size_t MetadataBytes() const override {
    const size_t slot = sizeof(std::pair<const BlockKey, uint32_t>) + 1;
    return sizeof(*this) + entries_.capacity() * sizeof(Entry) +
           heap_.capacity() * sizeof(uint32_t) + index_.capacity() * slot;
  }

 private:
  static constexpr uint32_t kNil = UINT32_MAX;

  struct Entry {
    BlockKey key;
    uint64_t next_use = kNever;
    uint32_t heap_pos = kNil;  // kNil while on the free list
    bool dirty = false;
  };

  bool Above(uint32_t a, uint32_t b) const {  // max-heap order on next use
    return entries_[a].next_use > entries_[b].next_use;
  }
  void Place(size_t pos, uint32_t e) {
    heap_[pos] = e;
    entries_[e].heap_pos = static_cast<uint32_t>(pos);
  }
  void SiftUp(size_t pos) {
    const uint32_t e = heap_[pos];
    while (pos > 0) {
      const size_t parent = (pos - 1) / 2;
      if (!Above(e, heap_[parent])) break;
      Place(pos, heap_[parent]);
      pos = parent;
    }
    Place(pos, e);
  }
  void SiftDown(size_t pos) {
    const uint32_t e = heap_[pos];
    const size_t n = heap_.size();
    while (true) {
      size_t child = 2 * pos + 1;
      if (child >= n) break;
      if (child + 1 < n && Above(heap_[child + 1], heap_[child])) ++child;
      if (!Above(heap_[child], e)) break;
      Place(pos, heap_[child]);
      pos = child;
    }
    Place(pos, e);
  }

  void InsertEntry(const BlockKey& key, uint64_t next_use, bool dirty) {
    uint32_t e;
    if (!free_.empty()) {
      e = free_.back();
      free_.pop_back();
    } else {
      e = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
    }
    entries_[e] = Entry{key, next_use, kNil, dirty};
    if (dirty) ++dirty_;
    index_.emplace(key, e);
    heap_.push_back(e);
    entries_[e].heap_pos = static_cast<uint32_t>(heap_.size() - 1);
    SiftUp(heap_.size() - 1);
  }

  void RemoveEntry(uint32_t e) {
    const size_t pos = entries_[e].heap_pos;
    const uint32_t last = heap_.back();
    heap_.pop_back();
    if (last != e) {
      Place(pos, last);
      SiftUp(pos);
      SiftDown(entries_[last].heap_pos);
    }
    if (entries_[e].dirty) --dirty_;
    index_.erase(entries_[e].key);
    entries_[e].heap_pos = kNil;
    free_.push_back(e);
  }

  const size_t capacity_;
  const bool allow_bypass_;
  size_t dirty_ = 0;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;  // recycled entry slots (only after Erase or eviction)
  std::vector<uint32_t> heap_;  // entry indices, max-heap on next_use
  absl::flat_hash_map<BlockKey, uint32_t> index_;
};

}  // namespace

std::unique_ptr<CachePolicy> MakeBeladyOpt(const OptConfig& config) {
  if (!config.Validate().ok()) return nullptr;
  return std::make_unique<BeladyOpt>(config);
}

std::unique_ptr<CachePolicy> MakeBeladyOpt(size_t capacity_blocks) {
  return MakeBeladyOpt(OptConfig{capacity_blocks, /*allow_bypass=*/true});
}

}  // namespace ringcache::policy
