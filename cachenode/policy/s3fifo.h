// S3FifoOrder: S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP 2023)
// as a queue order: a small FIFO S (10% of the queue), a main FIFO M with a 2-bit frequency
// (CLOCK-like reinsertion) and a ghost FIFO G of keys evicted from S.
//   insert:  key in G -> head of M (and leaves G); else head of S.
//   hit:     freq = min(freq + 1, 3).
//   evict:   if |S| >= small_ratio * |queue|: S tail t: freq >= move_threshold -> move t to the
//            head of M with freq 0 and look again; else t is the victim (its key goes to G).
//            else M tail t: freq > 0 -> reinsert at the head of M with freq - 1 and look again;
//            else t is the victim.
// Candidates() runs that loop to find the victim (the promotions it performs are permanent, as in
// the paper), then lists the blocks behind it in the same FIFO and then the other FIFO's tail, so
// a victim chooser sees a window. Choices where the paper and libCacheSim differ are in README.md.
//
// aux bits of a slot: bit 0 = in M, bits 1-2 = freq. Thread-safety: not thread-safe.
#ifndef RINGCACHE_CACHENODE_POLICY_S3FIFO_H_
#define RINGCACHE_CACHENODE_POLICY_S3FIFO_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "cachenode/policy/key_lru.h"
#include "cachenode/policy/order.h"

namespace ringcache::policy {

struct S3FifoConfig {
  double small_ratio = 0.10;   // target share of S in the queue
  double ghost_ratio = 0.90;   // ghost entries, as a share of the cache capacity
  uint32_t move_threshold = 1; // hits while in S needed to move to M (libCacheSim default)
  absl::Status Validate() const;
};

class S3FifoOrder final : public Order {
 public:
  // `slots` is not owned; `capacity` bounds the ghost FIFO. REQUIRES: config.Validate().ok().
  S3FifoOrder(SlotTable* slots, size_t capacity, const S3FifoConfig& config);

  std::string_view name() const override { return "s3fifo"; }
  void OnMiss(const BlockKey& key) override;
  void Insert(SlotId slot) override;
  void Touch(SlotId slot) override;
  void Remove(SlotId slot, bool evicted) override;
  size_t Candidates(absl::Span<SlotId> out) override;
  size_t size() const override { return small_.size + main_.size; }
  size_t MetadataBytes() const override { return sizeof(*this) + ghost_.MemoryBytes(); }

  size_t small_size() const { return small_.size; }
  size_t main_size() const { return main_.size; }
  size_t ghost_size() const { return ghost_.size(); }
  bool InMainForTest(SlotId slot) const { return (slots_->aux(slot) & kInMain) != 0; }

 private:
  static constexpr uint8_t kInMain = 1;
  static uint8_t Freq(uint8_t aux) { return (aux >> 1) & 3; }
  static uint8_t WithFreq(uint8_t aux, uint8_t f) {
    return static_cast<uint8_t>((aux & ~6) | (f << 1));
  }
  // Promotes and reinserts until the victim is at a FIFO tail; returns that FIFO (or null).
  const SlotList* SettleVictim();

  SlotTable* slots_;
  S3FifoConfig config_;
  SlotList small_, main_;
  KeyLru ghost_;
  bool pending_ghost_hit_ = false;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_S3FIFO_H_
