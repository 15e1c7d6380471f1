// FreqSketch: how often each block key was accessed lately, approximately, in a few bits per
// cached block. It backs the sieve's frequency gate (sieve.h, `freq=1`, issue 37).
//
// A count-min sketch (Cormode and Muthukrishnan) of 4-bit counters with TinyLFU's aging (Einziger,
// Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", 2017; the ideas of
// that paper, not its code): `kRows` rows of `width` counters, each key hashed to one counter per
// row; an access adds one to each of its counters (a counter stops at 15); the estimate of a key
// is the smallest of its counters, which never counts less than the key's accesses since the last
// aging (collisions only add). After `sample` increments every counter is halved, so the
// estimate follows the recent past: a block popular long ago fades by half each sample period.
//
// Sizes: `width` is four times the capacity rounded up to a power of two (at least 64), the
// sample period ten times the capacity, as TinyLFU sizes its sample (W = 10 C): 16 counters per
// cached block take the sample's 40 increments per block with little noise (with one counter a
// row per block, a key never seen read as 5-7 after a sample). Two counters per byte: 8-16 bytes
// per cached block.
//
// Thread-safety: not thread-safe; owned by one admission.
#ifndef RINGCACHE_CACHENODE_POLICY_FREQ_SKETCH_H_
#define RINGCACHE_CACHENODE_POLICY_FREQ_SKETCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cachenode/policy/types.h"

namespace ringcache::policy {

class FreqSketch {
 public:
  static constexpr int kRows = 4;
  static constexpr uint32_t kMaxCount = 15;

  // A sketch for a cache of `capacity` blocks; `sample` increments between agings (0: ten
  // times the capacity, at least 64).
  explicit FreqSketch(size_t capacity, uint64_t sample = 0);

  // Counts one access of `key`; every `sample` increments halves all counters.
  void Increment(const BlockKey& key);
  // The key's estimated accesses since the aging before last, in [0, kMaxCount].
  uint32_t Estimate(const BlockKey& key) const;

  uint64_t sample() const { return sample_; }
  size_t width() const { return mask_ + 1; }
  // Agings so far.
  uint64_t agings() const { return agings_; }
  size_t MemoryBytes() const { return sizeof(*this) + table_.capacity(); }

 private:
  // The counter index of `key` in `row`, from the key's hash.
  size_t Index(uint64_t hash, int row) const;
  uint32_t Get(size_t i) const { return (table_[i >> 1] >> ((i & 1) * 4)) & 0xF; }
  void Age();

  std::vector<uint8_t> table_;  // kRows * width 4-bit counters, two per byte
  uint64_t mask_;               // width - 1
  uint64_t sample_;
  uint64_t additions_ = 0;  // increments since the last aging (halved with the counters)
  uint64_t agings_ = 0;
};

}  // namespace ringcache::policy

#endif  // RINGCACHE_CACHENODE_POLICY_FREQ_SKETCH_H_
