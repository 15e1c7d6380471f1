// NodeTiers: the cache node's RAM and SSD tiers as one CachePolicy, so that ringcache-sim runs
// the node's tiering and not a model of its own. The membership policy (any registry spec: VBQ,
// the default, ...) decides what is cached; the node's Placement (placement.h: "uarc" or "lru")
// decides which members also live in RAM; and hits and SSD writes are counted by the rules the
// cache node's BlockMap applies (cachenode/block_map.cc):
//   - a read hit is a RAM hit if the block has a RAM copy, else an SSD hit; the placement then
//     sees the access and may promote the block (it keeps its SSD slot as a shadow copy) and
//     demote others;
//   - an admitted read miss goes where the placement puts it: into RAM with no SSD slot, or into
//     a fresh slot (one SSD write);
//   - every cached write takes a fresh slot (one SSD write) and, if the placement keeps the block
//     in RAM, a RAM copy too (the slot is its shadow);
//   - a demoted block with a slot only drops its RAM copy; one without a slot (it came straight
//     from a miss) is written to a fresh slot (one SSD write);
//   - an evicted member leaves both tiers.
// With an exclusive placement ("uarc(exclusive)", placement.h) the RAM tier adds capacity: the
// membership policy holds ssd_slots + RAM blocks (MakeNodePolicy sizes it), and
//   - slots are counted: a write that finds none free first frees one: the oldest shadow slot of
//     a clean block in RAM (a promoted block's, or a RAM block's made clean by MarkClean: the
//     node's destage), else a member the policy sheds (CachePolicy::Shed); a demotion that finds
//     none does the same, and the block leaves the cache if that freed none; a fill to SSD that
//     finds none is not cached.
// The simulator frees an evicted dirty block's slot at once; the node frees it after the
// destage. Stream reads (the node's stream_read_blocks) are not modelled: every access reaches
// the placement.
//
// Invariants: a block is known here iff the membership policy holds it; a block has a RAM copy,
// an SSD slot or both; a dirty block has a slot.
//
// Thread-safety: none (CachePolicy's contract).
#ifndef RINGCACHE_CACHENODE_POLICY_NODE_TIERS_H_
#define RINGCACHE_CACHENODE_POLICY_NODE_TIERS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/placement.h"
#include "cachenode/policy/shadow_queue.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy {

class NodeTiers final : public CachePolicy {
 public:
  // REQUIRES: both non-null. `ssd_slots` bounds the slots an exclusive placement may use.
  NodeTiers(std::unique_ptr<CachePolicy> membership, std::unique_ptr<Placement> placement,
            std::string placement_name, size_t ssd_slots);

  std::string_view name() const override { return name_; }
  void OnAccess(const Access& access, Outcome* out) override;
  bool MarkClean(const BlockKey& key) override;
  bool Erase(const BlockKey& key) override;
  Tier Lookup(const BlockKey& key) const override;
  size_t size() const override { return membership_->size(); }
  size_t capacity() const override { return membership_->capacity(); }
  size_t dirty_count() const override { return membership_->dirty_count(); }
  size_t MetadataBytes() const override;
  void AppendVdiStats(std::vector<VdiStats>* out) const override {
    membership_->AppendVdiStats(out);
  }

  const CachePolicy& membership() const { return *membership_; }
  size_t ram_blocks() const { return placement_->ram_blocks(); }
  size_t used_slots() const { return used_slots_; }

 private:
  struct Copies {
    bool ram = false;    // a RAM copy
    bool slot = false;   // an SSD slot
    bool dirty = false;  // written and not marked clean since
  };
  // Applies the placement's demotions; counts the SSD writes they cost into *out.
  void Demote(const std::vector<BlockKey>& demote, Outcome* out);
  // A member the policy evicted leaves both tiers (sets ev->from).
  void Forget(Eviction* ev);
  // Whether a slot is free (always, unless the placement is exclusive).
  bool SlotFree() const;
  // Exclusive tiers: remembers a shadow slot (a clean block in RAM with a slot).
  void NoteShadow(const BlockKey& key, const Copies& c);
  bool IsShadow(const BlockKey& key) const;
  // Frees shadow slots, then sheds members, until a slot is free or the policy holds none;
  // appends what left.
  void Relieve(std::vector<Eviction>* evicted);
  void TakeSlot(Copies* c);
  void DropRamOnly(absl::flat_hash_map<BlockKey, Copies>::iterator it, Outcome* out);

  std::unique_ptr<CachePolicy> membership_;
  std::unique_ptr<Placement> placement_;
  std::string name_;
  const bool exclusive_;
  const size_t ssd_slots_;
  size_t used_slots_ = 0;
  absl::flat_hash_map<BlockKey, Copies> blocks_;
  ShadowQueue shadows_;           // exclusive: which shadow slots go first under slot pressure
  std::vector<BlockKey> demote_;  // scratch
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_NODE_TIERS_H_
