// FreqSketch: see freq_sketch.h.
#include "cachenode/policy/freq_sketch.h"

#include <algorithm>

namespace ringcache::policy {
namespace {

// splitmix64's finalizer: a well-mixed 64-bit hash of z.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t KeyHash(const BlockKey& key) {
  return Mix(key.block * 0x9E3779B97F4A7C15ull + (uint64_t{key.vdi} << 1 | 1));
}

}  // namespace

FreqSketch::FreqSketch(size_t capacity, uint64_t sample) {
  uint64_t width = 64;
  while (width < 4 * uint64_t{capacity}) width <<= 1;
  mask_ = width - 1;
  table_.assign(kRows * width / 2, 0);
  sample_ = sample > 0 ? sample : std::max<uint64_t>(64, 10 * uint64_t{capacity});
}

size_t FreqSketch::Index(uint64_t hash, int row) const {
  // One independent-looking hash per row from the key's hash (double hashing through Mix).
  return static_cast<size_t>(row) * (mask_ + 1) +
         static_cast<size_t>(Mix(hash + static_cast<uint64_t>(row) * 0x632BE59BD9B4E019ull) &
                             mask_);
}

uint32_t FreqSketch::Estimate(const BlockKey& key) const {
  const uint64_t h = KeyHash(key);
  uint32_t m = kMaxCount;
  for (int r = 0; r < kRows; ++r) m = std::min(m, Get(Index(h, r)));
  return m;
}

void FreqSketch::Increment(const BlockKey& key) {
  const uint64_t h = KeyHash(key);
  for (int r = 0; r < kRows; ++r) {
    const size_t i = Index(h, r);
    if (Get(i) < kMaxCount) {
      table_[i >> 1] = static_cast<uint8_t>(table_[i >> 1] + (1u << ((i & 1) * 4)));
    }
  }
  if (++additions_ >= sample_) Age();
}

void FreqSketch::Age() {
  // Halves both counters of each byte at once: shift, then drop what crossed from the high
  // nibble into the low one.
  for (uint8_t& b : table_) b = static_cast<uint8_t>((b >> 1) & 0x77);
  additions_ /= 2;
  ++agings_;
}

}  // namespace ringcache::policy
