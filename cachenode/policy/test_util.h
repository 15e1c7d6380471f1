// Helpers shared by the policy engine's tests: short constructors for accesses and a driver runner.
// Test-only; not part of rc_policy.
#ifndef RINGCACHE_CACHENODE_POLICY_TEST_UTIL_H_
#define RINGCACHE_CACHENODE_POLICY_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "cachenode/policy/sieve.h"
#include "cachenode/policy/types.h"

namespace ringcache::policy::testing {

inline Access Read(uint64_t block, uint32_t vdi = 0, uint64_t now_us = 0) {
  Access a;
  a.key = BlockKey{vdi, block};
  a.op = Op::kRead;
  a.now_us = now_us;
  return a;
}

inline Access Write(uint64_t block, uint32_t vdi = 0, uint64_t now_us = 0) {
  Access a = Read(block, vdi, now_us);
  a.op = Op::kWrite;
  return a;
}

// Counts of one replay.
struct Tally {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t admitted = 0;
  uint64_t rejected = 0;
  uint64_t bypassed = 0;
  uint64_t evicted = 0;
  uint64_t dirty_evicted = 0;
};

// Replays `trace` through `policy` (seq numbered from 0) and tallies the outcomes.
inline Tally Replay(CachePolicy& policy, const std::vector<Access>& trace) {
  Tally t;
  Outcome out;
  uint64_t seq = 0;
  for (Access a : trace) {
    a.seq = seq++;
    policy.OnAccess(a, &out);
    if (out.hit != Tier::kNone) {
      ++t.hits;
    } else {
      ++t.misses;
    }
    t.admitted += out.admitted;
    t.rejected += out.rejected;
    t.bypassed += out.bypassed;
    t.evicted += out.evicted.size();
    for (const Eviction& e : out.evicted) t.dirty_evicted += e.dirty;
  }
  return t;
}

// A sieve of `threshold` and `length`, the rest default (not adaptive).
inline SieveConfig Sieve(uint32_t threshold, size_t length) {
  SieveConfig c;
  c.threshold = threshold;
  c.length = length;
  return c;
}

// Returns a read-only trace of the given blocks of VDI 0.
inline std::vector<Access> Reads(const std::vector<uint64_t>& blocks) {
  std::vector<Access> t;
  for (uint64_t b : blocks) t.push_back(Read(b));
  return t;
}

}  // namespace ringcache::policy::testing

#endif  // RINGCACHE_CACHENODE_POLICY_TEST_UTIL_H_
