// Reference computations. See reference.h.
#include "tools/sim/reference.h"

#include <algorithm>
#include <deque>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace ringcache::sim {

using policy::BlockKey;
using policy::kNever;

absl::StatusOr<std::vector<BlockKey>> ExpandToBlocks(RequestSource& src, uint32_t block_size) {
  std::vector<BlockKey> keys;
  std::vector<Request> batch(1024);
  while (true) {
    absl::StatusOr<size_t> n = src.Read(absl::MakeSpan(batch));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    for (size_t i = 0; i < *n; ++i) {
      const Request& r = batch[i];
      for (uint64_t b = r.offset / block_size; b <= (r.offset + r.length - 1) / block_size; ++b) {
        keys.push_back(BlockKey{r.vdi, b});
      }
    }
  }
  return keys;
}

std::vector<uint64_t> LruStackDistances(const std::vector<BlockKey>& keys) {
  // Mark each block's most recent access time in a Fenwick tree; the distance of an access at t
  // to a block last seen at p is the number of marks in (p, t] after moving p's mark to t.
  size_t n = keys.size();
  std::vector<int64_t> tree(n + 1, 0);
  auto add = [&](size_t i, int64_t v) {
    for (++i; i <= n; i += i & (~i + 1)) tree[i] += v;
  };
  auto prefix = [&](size_t i) {  // sum of [0, i)
    int64_t s = 0;
    for (; i > 0; i -= i & (~i + 1)) s += tree[i];
    return s;
  };
  absl::flat_hash_map<BlockKey, size_t> last;
  std::vector<uint64_t> dist(n, kNever);
  for (size_t t = 0; t < n; ++t) {
    auto it = last.find(keys[t]);
    if (it != last.end()) {
      size_t p = it->second;
      // Distinct blocks touched in (p, t): marks in (p, t).
      int64_t between = prefix(t) - prefix(p + 1);
      dist[t] = static_cast<uint64_t>(between) + 1;
      add(p, -1);
      it->second = t;
    } else {
      last.emplace(keys[t], t);
    }
    add(t, 1);
  }
  return dist;
}

std::vector<uint64_t> LruStackDistancesNaive(const std::vector<BlockKey>& keys) {
  std::vector<BlockKey> stack;  // front = most recent
  std::vector<uint64_t> dist;
  for (const BlockKey& k : keys) {
    auto it = std::find(stack.begin(), stack.end(), k);
    if (it == stack.end()) {
      dist.push_back(kNever);
    } else {
      dist.push_back(static_cast<uint64_t>(it - stack.begin()) + 1);
      stack.erase(it);
    }
    stack.insert(stack.begin(), k);
  }
  return dist;
}

uint64_t LruHitsFromDistances(const std::vector<uint64_t>& distances, uint64_t capacity) {
  uint64_t hits = 0;
  for (uint64_t d : distances) hits += (d != kNever && d <= capacity) ? 1 : 0;
  return hits;
}

uint64_t FifoHits(const std::vector<BlockKey>& keys, uint64_t capacity) {
  std::deque<BlockKey> queue;
  absl::flat_hash_set<BlockKey> cached;
  uint64_t hits = 0;
  for (const BlockKey& k : keys) {
    if (cached.contains(k)) {
      ++hits;
      continue;
    }
    if (capacity == 0) continue;
    if (queue.size() == capacity) {
      cached.erase(queue.front());
      queue.pop_front();
    }
    queue.push_back(k);
    cached.insert(k);
  }
  return hits;
}

absl::StatusOr<uint64_t> BruteForceOptHits(const std::vector<BlockKey>& keys, uint64_t capacity,
                                           bool allow_bypass) {
  absl::flat_hash_map<BlockKey, int> ids;
  std::vector<int> seq;
  for (const BlockKey& k : keys) {
    auto [it, inserted] = ids.try_emplace(k, static_cast<int>(ids.size()));
    seq.push_back(it->second);
  }
  if (ids.size() > 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("brute force OPT supports 24 distinct blocks, got ", ids.size()));
  }
  absl::flat_hash_map<uint64_t, uint64_t> memo;  // (pos << 24 | mask) -> best future hits
  std::function<uint64_t(size_t, uint32_t)> best = [&](size_t pos, uint32_t mask) -> uint64_t {
    if (pos == seq.size()) return 0;
    uint64_t state = (uint64_t{pos} << 24) | mask;
    if (auto it = memo.find(state); it != memo.end()) return it->second;
    uint32_t bit = 1u << seq[pos];
    uint64_t result;
    if (mask & bit) {
      result = 1 + best(pos + 1, mask);
    } else {
      result = 0;
      if (allow_bypass || capacity == 0) result = best(pos + 1, mask);
      if (capacity > 0) {
        if (static_cast<uint64_t>(__builtin_popcount(mask)) < capacity) {
          result = std::max(result, best(pos + 1, mask | bit));
        } else {
          for (uint32_t m = mask; m != 0; m &= m - 1) {
            uint32_t victim = m & (~m + 1);
            result = std::max(result, best(pos + 1, (mask & ~victim) | bit));
          }
        }
      }
    }
    memo.emplace(state, result);
    return result;
  };
  return best(0, 0);
}

uint64_t BeladyHits(const std::vector<BlockKey>& keys, uint64_t capacity, bool allow_bypass) {
  size_t n = keys.size();
  std::vector<uint64_t> next(n, kNever);
  absl::flat_hash_map<BlockKey, size_t> seen;
  for (size_t i = n; i-- > 0;) {
    auto it = seen.find(keys[i]);
    if (it != seen.end()) {
      next[i] = it->second;
      it->second = i;
    } else {
      seen.emplace(keys[i], i);
    }
  }
  // cached block -> its next use
  absl::flat_hash_map<BlockKey, uint64_t> cache;
  uint64_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    auto it = cache.find(keys[i]);
    if (it != cache.end()) {
      ++hits;
      it->second = next[i];
      continue;
    }
    if (capacity == 0) continue;
    if (cache.size() < capacity) {
      if (!(allow_bypass && next[i] == kNever)) cache.emplace(keys[i], next[i]);
      continue;
    }
    auto victim = cache.begin();
    for (auto c = cache.begin(); c != cache.end(); ++c) {
      if (c->second > victim->second) victim = c;
    }
    if (allow_bypass && next[i] >= victim->second) continue;
    cache.erase(victim);
    cache.emplace(keys[i], next[i]);
  }
  return hits;
}

}  // namespace ringcache::sim
