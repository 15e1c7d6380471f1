// Tests for offline Belady OPT (opt.h): exact outcomes on hand traces, optimality against an
// exhaustive search over every admit/bypass/evict choice on tiny traces, agreement with a naive
// O(n·k) implementation on longer traces, and OPT >= every online policy here (LRU, IARC, GARC,
// UARC) on seeded random traces. Single-threaded, deterministic.
#include "cachenode/policy/opt.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <list>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/tiering.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

BlockKey K(uint64_t b) { return BlockKey{0, b}; }

// Builds Accesses with next_use filled by a backward pass, as the simulator does.
std::vector<Access> WithNextUse(const std::vector<uint64_t>& keys, const std::vector<Op>& ops) {
  std::vector<Access> out(keys.size());
  absl::flat_hash_map<uint64_t, uint64_t> next;
  for (size_t i = keys.size(); i-- > 0;) {
    out[i].key = K(keys[i]);
    out[i].op = ops.empty() ? Op::kRead : ops[i];
    out[i].seq = i;
    auto it = next.find(keys[i]);
    out[i].next_use = it == next.end() ? kNever : it->second;
    next[keys[i]] = i;
  }
  return out;
}

std::vector<uint64_t> Letters(const std::string& s) {
  std::vector<uint64_t> v;
  for (char c : s) v.push_back(static_cast<uint64_t>(c));
  return v;
}

uint64_t Hits(CachePolicy* p, const std::vector<Access>& trace) {
  Outcome out;
  uint64_t hits = 0;
  for (const Access& a : trace) {
    p->OnAccess(a, &out);
    hits += out.hit != Tier::kNone;
  }
  return hits;
}

TEST(BeladyOptTest, HandTraceWithAndWithoutBypass) {
  // Capacity 2, reads A B C A B D A. Next uses: A0->3, B1->4, C2 never, A3->6, B4/D5/A6 never.
  const std::vector<Access> trace = WithNextUse(Letters("ABCABDA"), {});
  auto opt = MakeBeladyOpt(2);
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->name(), "opt");
  Outcome out;
  const std::vector<Tier> want_hit = {Tier::kNone, Tier::kNone, Tier::kNone, Tier::kSsd,
                                      Tier::kSsd,  Tier::kNone, Tier::kSsd};
  const std::vector<bool> want_rejected = {false, false, true, false, false, true, false};
  for (size_t i = 0; i < trace.size(); ++i) {
    opt->OnAccess(trace[i], &out);
    EXPECT_EQ(out.hit, want_hit[i]) << "step " << i;
    EXPECT_EQ(out.rejected, want_rejected[i]) << "step " << i;
    EXPECT_TRUE(out.evicted.empty()) << "step " << i;  // C and D are declined, nothing evicted
  }

  // Classic Belady must cache C and D: C evicts B (next use 4 > 3), B evicts C (never), D evicts
  // B (never): hits at 3 and 6 only.
  auto classic = MakeBeladyOpt(OptConfig{2, /*allow_bypass=*/false});
  EXPECT_EQ(classic->name(), "opt-nobypass");
  const std::vector<uint64_t> want_evicted = {0, 0, 'B', 0, 'C', 'B', 0};
  uint64_t hits = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    classic->OnAccess(trace[i], &out);
    hits += out.hit != Tier::kNone;
    EXPECT_FALSE(out.rejected);
    if (want_evicted[i] == 0) {
      EXPECT_TRUE(out.evicted.empty()) << "step " << i;
    } else {
      ASSERT_EQ(out.evicted.size(), 1u) << "step " << i;
      EXPECT_EQ(out.evicted[0].key, K(want_evicted[i])) << "step " << i;
    }
  }
  EXPECT_EQ(hits, 2u);
}

TEST(BeladyOptTest, DirtyEvictionAndWriteBypass) {
  // Capacity 1: W A (next 3), R B (next 2), R B, R A, W C (never used again).
  const std::vector<Access> trace =
      WithNextUse(Letters("ABBAC"), {Op::kWrite, Op::kRead, Op::kRead, Op::kRead, Op::kWrite});
  auto opt = MakeBeladyOpt(1);
  Outcome out;
  opt->OnAccess(trace[0], &out);
  EXPECT_TRUE(out.admitted);
  EXPECT_EQ(out.ssd_writes, 1u);
  EXPECT_EQ(opt->dirty_count(), 1u);
  opt->OnAccess(trace[1], &out);  // B is needed sooner than A: A leaves, dirty
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key, K('A'));
  EXPECT_TRUE(out.evicted[0].dirty);
  EXPECT_EQ(opt->dirty_count(), 0u);
  opt->OnAccess(trace[2], &out);
  EXPECT_EQ(out.hit, Tier::kSsd);
  opt->OnAccess(trace[3], &out);  // A never again: declined read
  EXPECT_TRUE(out.rejected);
  EXPECT_EQ(opt->Lookup(K('B')), Tier::kSsd);
  opt->OnAccess(trace[4], &out);  // C never again: written around
  EXPECT_TRUE(out.bypassed);
  EXPECT_FALSE(out.admitted);
  EXPECT_EQ(opt->size(), 1u);
  EXPECT_TRUE(opt->Erase(K('B')));
  EXPECT_FALSE(opt->Erase(K('B')));
  EXPECT_EQ(opt->size(), 0u);
}

TEST(BeladyOptTest, ConfigValidate) {
  EXPECT_EQ(MakeBeladyOpt(0), nullptr);
  EXPECT_EQ((OptConfig{0, true}.Validate().code()), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((OptConfig{3, false}.Validate().ok()));
}

// Exhaustive search: the most hits any policy holding at most `cap` blocks can get, trying at
// every miss each choice — decline (if `bypass`), insert into a free slot, or evict each cached
// block. Memoised on (position, cached set), so it is exact and fast for <= 8 distinct keys.
int BruteForce(const std::vector<uint64_t>& keys, int cap, bool bypass) {
  std::map<std::pair<size_t, uint32_t>, int> memo;
  auto f = [&](auto&& self, size_t i, uint32_t set) -> int {
    if (i == keys.size()) return 0;
    auto it = memo.find({i, set});
    if (it != memo.end()) return it->second;
    const uint32_t bit = 1u << keys[i];
    int best;
    if (set & bit) {
      best = 1 + self(self, i + 1, set);
    } else {
      best = bypass ? self(self, i + 1, set) : -1;
      if (std::popcount(set) < cap) best = std::max(best, self(self, i + 1, set | bit));
      for (uint32_t rest = set; rest != 0; rest &= rest - 1) {
        const uint32_t victim = rest & (~rest + 1);
        best = std::max(best, self(self, i + 1, (set & ~victim) | bit));
      }
    }
    memo[{i, set}] = best;
    return best;
  };
  return f(f, 0, 0);
}

TEST(BeladyOptTest, MatchesExhaustiveSearchOnTinyTraces) {
  std::mt19937_64 rng(2024);
  int traces = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int cap = 1 + static_cast<int>(rng() % 3);  // 1..3
    const uint64_t universe = 2 + rng() % 5;          // 2..6 keys
    const size_t len = 8 + rng() % 5;                 // 8..12 accesses
    std::vector<uint64_t> keys(len);
    std::vector<Op> ops(len);
    for (size_t i = 0; i < len; ++i) {
      keys[i] = rng() % universe;
      ops[i] = rng() % 3 == 0 ? Op::kWrite : Op::kRead;
    }
    const std::vector<Access> trace = WithNextUse(keys, ops);
    auto opt = MakeBeladyOpt(static_cast<size_t>(cap));
    auto classic = MakeBeladyOpt(OptConfig{static_cast<size_t>(cap), false});
    ASSERT_EQ(Hits(opt.get(), trace), static_cast<uint64_t>(BruteForce(keys, cap, true)))
        << "trial " << trial;
    ASSERT_EQ(Hits(classic.get(), trace), static_cast<uint64_t>(BruteForce(keys, cap, false)))
        << "trial " << trial;
    ++traces;
  }
  EXPECT_EQ(traces, 3000);
}

// Naive OPT: linear scan for the farthest next use; recomputes next uses from the trace itself.
uint64_t NaiveOptHits(const std::vector<uint64_t>& keys, size_t cap, bool bypass) {
  auto next_use = [&](size_t i) {
    for (size_t j = i + 1; j < keys.size(); ++j) {
      if (keys[j] == keys[i]) return static_cast<uint64_t>(j);
    }
    return kNever;
  };
  std::map<uint64_t, uint64_t> cached;  // key -> next use
  uint64_t hits = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t n = next_use(i);
    auto it = cached.find(keys[i]);
    if (it != cached.end()) {
      ++hits;
      it->second = n;
      continue;
    }
    auto far = std::max_element(cached.begin(), cached.end(),
                                [](auto& a, auto& b) { return a.second < b.second; });
    if (bypass && (n == kNever || (cached.size() == cap && n >= far->second))) continue;
    if (cached.size() == cap) cached.erase(far);
    cached[keys[i]] = n;
  }
  return hits;
}

// Naive LRU that admits every miss.
uint64_t LruHits(const std::vector<uint64_t>& keys, size_t cap) {
  std::list<uint64_t> lru;  // MRU first
  uint64_t hits = 0;
  for (uint64_t k : keys) {
    auto it = std::find(lru.begin(), lru.end(), k);
    if (it != lru.end()) {
      ++hits;
      lru.erase(it);
    } else if (lru.size() == cap) {
      lru.pop_back();
    }
    lru.push_front(k);
  }
  return hits;
}

TEST(BeladyOptTest, BoundsOnlinePoliciesOnRandomTraces) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 60; ++trial) {
    const size_t r = 1 + rng() % 12, s = 1 + rng() % 20;
    const size_t cap = r + s;
    const uint64_t universe = cap + 1 + rng() % (3 * cap);
    const size_t len = 4000;
    std::vector<uint64_t> keys(len);
    std::vector<Op> ops(len);
    for (size_t i = 0; i < len; ++i) {
      // Mix of a hot quarter and uniform traffic.
      keys[i] = rng() % 2 ? rng() % std::max<uint64_t>(1, universe / 4) : rng() % universe;
      ops[i] = rng() % 4 == 0 ? Op::kWrite : Op::kRead;
    }
    const std::vector<Access> trace = WithNextUse(keys, ops);
    auto opt = MakeBeladyOpt(cap);
    auto classic = MakeBeladyOpt(OptConfig{cap, false});
    const uint64_t opt_hits = Hits(opt.get(), trace);
    const uint64_t classic_hits = Hits(classic.get(), trace);
    ASSERT_EQ(opt_hits, NaiveOptHits(keys, cap, true)) << "trial " << trial;
    ASSERT_EQ(classic_hits, NaiveOptHits(keys, cap, false)) << "trial " << trial;
    ASSERT_GE(opt_hits, classic_hits);
    const uint64_t lru = LruHits(keys, cap);
    ASSERT_GE(classic_hits, lru) << "trial " << trial;
    ASSERT_GE(opt_hits, lru) << "trial " << trial;
    for (auto make : {MakeIarc, MakeGarc, MakeUarc}) {
      auto tiered = make(TierConfig{r, s});
      ASSERT_GE(opt_hits, Hits(tiered.get(), trace))
          << "trial " << trial << " " << tiered->name() << " R=" << r << " S=" << s;
    }
  }
}

TEST(BeladyOptTest, DirtyCountAndSizeStayConsistent) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> keys(20000);
  std::vector<Op> ops(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = rng() % 200;
    ops[i] = rng() % 2 ? Op::kWrite : Op::kRead;
  }
  const std::vector<Access> trace = WithNextUse(keys, ops);
  auto opt = MakeBeladyOpt(50);
  Outcome out;
  int64_t dirty = 0;
  for (const Access& a : trace) {
    const size_t before = opt->dirty_count();
    opt->OnAccess(a, &out);
    int64_t left = 0;
    for (const Eviction& e : out.evicted) left += e.dirty;
    const int64_t delta = static_cast<int64_t>(opt->dirty_count()) - static_cast<int64_t>(before);
    ASSERT_GE(delta + left, 0);
    ASSERT_LE(delta + left, a.op == Op::kWrite ? 1 : 0);
    ASSERT_LE(opt->size(), 50u);
    dirty += delta;
  }
  EXPECT_EQ(static_cast<int64_t>(opt->dirty_count()), dirty);
  EXPECT_GT(opt->MetadataBytes(), 0u);
}

}  // namespace
}  // namespace ringcache::policy
