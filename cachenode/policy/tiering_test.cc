// Tests for the RAM+SSD tier caches (tiering.h) and their ARC core (tier_arc.h):
//   - exact outcomes on tiny traces, worked out by hand from paper 001 §III-A2 and ARC's Fig. 4;
//   - a differential check against a naive reimplementation (plain vectors, linear search, a
//     different representation of the RAM/SSD split) on thousands of random traces;
//   - invariants: exclusivity (GARC, UARC), allocation inclusivity (IARC), tier sizes, dirty
//     accounting;
//   - paper 001 §III-C's headline on seeded synthetic workloads: UARC's hit count >= IARC's with
//     equal RAM and SSD sizes; and §III-C's "UARC and SARC hits identical".
// Single-threaded; deterministic (seeded std::mt19937_64, no clocks).
#include "cachenode/policy/tiering.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cachenode/policy/tier_arc.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

BlockKey K(uint64_t b) { return BlockKey{0, b}; }

struct Step {
  char key;
  Op op;
};

std::vector<Step> Reads(const std::string& keys) {
  std::vector<Step> s;
  for (char c : keys) s.push_back({c, Op::kRead});
  return s;
}

// Expected outcome of one access, compared field by field.
struct Want {
  Tier hit;
  uint32_t ssd_writes;
  uint32_t promotions;
  std::vector<Eviction> evicted;
};

std::string Show(const Outcome& o) {
  std::string s = "hit=" + std::to_string(static_cast<int>(o.hit)) +
                  " ssd_writes=" + std::to_string(o.ssd_writes) +
                  " promotions=" + std::to_string(o.promotions) + " evicted=[";
  for (const Eviction& e : o.evicted) {
    s += std::string(1, static_cast<char>(e.key.block)) + (e.dirty ? "*" : "") + "@" +
         std::to_string(static_cast<int>(e.from)) + " ";
  }
  return s + "]";
}

void ExpectTrace(TierScheme scheme, size_t r, size_t s, const std::vector<Step>& steps,
                 const std::vector<Want>& want) {
  ASSERT_EQ(steps.size(), want.size());
  auto cache = MakeTieredCache(scheme, TierConfig{r, s});
  ASSERT_NE(cache, nullptr);
  Outcome out;
  for (size_t i = 0; i < steps.size(); ++i) {
    Access a;
    a.key = K(static_cast<uint64_t>(steps[i].key));
    a.op = steps[i].op;
    a.seq = i;
    cache->OnAccess(a, &out);
    SCOPED_TRACE("step " + std::to_string(i + 1) + ": " + Show(out));
    EXPECT_EQ(out.hit, want[i].hit);
    EXPECT_EQ(out.admitted, want[i].hit == Tier::kNone);
    EXPECT_EQ(out.ssd_writes, want[i].ssd_writes);
    EXPECT_EQ(out.promotions, want[i].promotions);
    ASSERT_EQ(out.evicted.size(), want[i].evicted.size());
    for (size_t j = 0; j < out.evicted.size(); ++j) {
      EXPECT_EQ(out.evicted[j].key, want[i].evicted[j].key);
      EXPECT_EQ(out.evicted[j].dirty, want[i].evicted[j].dirty);
      EXPECT_EQ(out.evicted[j].from, want[i].evicted[j].from);
    }
    EXPECT_TRUE(cache->CheckInvariantsForTest());
  }
}

constexpr Tier kNo = Tier::kNone;
constexpr Tier kR = Tier::kRam;
constexpr Tier kS = Tier::kSsd;
Eviction Ev(char k, bool dirty, Tier from) {
  return Eviction{K(static_cast<uint64_t>(k)), dirty, from};
}

// ----------------------------------------------------------------------------------------------
// Hand-worked traces, R = S = 1. Trace A B A C B A (reads). Derivations in the comments; "T1=[x|y]"
// means x in RAM, y on SSD; p is ARC's target for |T1|.

TEST(UarcTest, HandTraceReads) {
  ExpectTrace(TierScheme::kUnified, 1, 1, Reads("ABACBA"),
              {
                  // A: miss, T1=[A|].
                  {kNo, 0, 0, {}},
                  // B: miss, T1=[B,A|] overflows RAM -> demote A: T1=[B|A].
                  {kNo, 1, 0, {}},
                  // A: SSD hit -> T2=[A|], T1=[B|]; tie on depth, demote from T1 (the list that
                  // did not receive A): T1=[|B].
                  {kS, 1, 1, {}},
                  // C: miss, cache full, |T1|=1 > p=0 -> B to B1; T1=[C|]; tie -> demote from T2:
                  // T2=[|A].
                  {kNo, 1, 0, {Ev('B', false, kS)}},
                  // B: ghost hit in B1, p=1; |T1|=1 = p -> evict T2's LRU A to B2; T2=[B|];
                  // tie -> demote C: T1=[|C].
                  {kNo, 1, 0, {Ev('A', false, kS)}},
                  // A: ghost hit in B2, p=0; |T1|=1 > 0 -> C to B1; T2=[A,B|] -> demote B.
                  {kNo, 1, 0, {Ev('C', false, kS)}},
              });
}

TEST(IarcTest, HandTraceReads) {
  // Two ARCs of one block each: every miss evicts outright (case IV-A with B1 empty). The SSD
  // victim is still in RAM and clean, so only the RAM eviction reports it.
  ExpectTrace(TierScheme::kInclusive, 1, 1, Reads("ABACBA"),
              {
                  {kNo, 1, 0, {}},
                  {kNo, 1, 0, {Ev('A', false, kR)}},
                  {kNo, 1, 0, {Ev('B', false, kR)}},
                  {kNo, 1, 0, {Ev('A', false, kR)}},
                  {kNo, 1, 0, {Ev('C', false, kR)}},
                  {kNo, 1, 0, {Ev('B', false, kR)}},
              });
}

TEST(GarcTest, HandTraceReads) {
  ExpectTrace(TierScheme::kGlobal, 1, 1, Reads("ABACBA"),
              {
                  // A: RAM=[A].
                  {kNo, 0, 0, {}},
                  // B: RAM evicts A -> demoted: SSD=[A].
                  {kNo, 1, 0, {}},
                  // A: SSD hit, deleted from SSD; RAM evicts B -> SSD=[B].
                  {kS, 1, 1, {}},
                  // C: RAM evicts A -> SSD evicts B (leaves the cache).
                  {kNo, 1, 0, {Ev('B', false, kS)}},
                  {kNo, 1, 0, {Ev('A', false, kS)}},
                  {kNo, 1, 0, {Ev('C', false, kS)}},
              });
}

TEST(UarcTest, HandTraceDirtyLeavesFromSsd) {
  // W A, R B, R C with R = S = 1.
  ExpectTrace(TierScheme::kUnified, 1, 1, {{'A', Op::kWrite}, {'B', Op::kRead}, {'C', Op::kRead}},
              {
                  {kNo, 0, 0, {}},
                  // T1=[B|A*]: the dirty A is demoted (an SSD write, not an eviction).
                  {kNo, 1, 0, {}},
                  // |T1| + |B1| = 2 = c and |T1| = c: case IV-A drops A outright, dirty.
                  {kNo, 1, 0, {Ev('A', true, kS)}},
              });
}

TEST(IarcTest, HandTraceStaleDirtyCopyIsFlushed) {
  // R = S = 1. W A, W B, R A, R B, W B, R C (paper 001 §IV-A: IARC leaves an overwritten SSD copy
  // in place, and a dirty one costs a flush when the SSD ARC evicts it).
  ExpectTrace(TierScheme::kInclusive, 1, 1,
              {{'A', Op::kWrite},
               {'B', Op::kWrite},
               {'A', Op::kRead},
               {'B', Op::kRead},
               {'B', Op::kWrite},
               {'C', Op::kRead}},
              {
                  // W A: RAM only, dirty. Nothing on SSD.
                  {kNo, 0, 0, {}},
                  // W B: RAM evicts A*, written to the SSD ARC: SSD=[A*].
                  {kNo, 1, 0, {}},
                  // R A: SSD hit (A* -> SSD T2), RAM gets a clean copy and evicts B*, which is
                  // written to the SSD ARC; that evicts A* (to B2): dirty, so flushed although RAM
                  // holds A.
                  {kS, 1, 1, {Ev('A', true, kS)}},
                  // R B: SSD hit; RAM evicts A (clean, SSD holds only a ghost): A leaves.
                  {kS, 0, 1, {Ev('A', false, kR)}},
                  // W B: RAM hit; RAM's B is now newer than SSD's dirty B.
                  {kR, 0, 0, {}},
                  // R C: the SSD ARC evicts the stale dirty B (flush), fills C; RAM evicts B*
                  // (T2 -> B2) and writes it to the SSD ARC: ghost hit there, C goes to B1 but
                  // is still in RAM, so no report.
                  {kNo, 2, 0, {Ev('B', true, kS)}},
              });
}

// ----------------------------------------------------------------------------------------------
// Naive reference: ARC on std::vector lists (MRU first), with the RAM/SSD split kept as "the
// first ram1 (ram2) entries of T1 (T2) are in the upper tier" rather than as separate lists.

struct NaiveArc {
  NaiveArc(size_t cap, size_t top_cap, Tier top_tier, Tier bot_tier)
      : c(cap), r(top_cap), top(top_tier), bot(bot_tier) {}

  struct Res {
    Tier found = Tier::kNone;
    bool evicted = false;
    uint64_t vkey = 0;
    bool vdirty = false;
    Tier vfrom = Tier::kNone;
    bool demoted = false;
  };

  static int Find(const std::vector<uint64_t>& l, uint64_t k) {
    auto it = std::find(l.begin(), l.end(), k);
    return it == l.end() ? -1 : static_cast<int>(it - l.begin());
  }
  Tier Where(uint64_t k) const {
    int i = Find(t1, k);
    if (i >= 0) return static_cast<size_t>(i) < ram1 ? top : bot;
    i = Find(t2, k);
    if (i >= 0) return static_cast<size_t>(i) < ram2 ? top : bot;
    return Tier::kNone;
  }

  void EvictBack(bool from_t1, bool to_ghost, Res* res) {
    std::vector<uint64_t>& l = from_t1 ? t1 : t2;
    size_t& ram = from_t1 ? ram1 : ram2;
    const uint64_t k = l.back();
    const bool in_top = l.size() - 1 < ram;
    res->evicted = true;
    res->vkey = k;
    res->vdirty = dirty[k];
    res->vfrom = in_top ? top : bot;
    dirty.erase(k);
    l.pop_back();
    if (in_top) --ram;
    if (to_ghost) {
      std::vector<uint64_t>& g = from_t1 ? b1 : b2;
      g.insert(g.begin(), k);
    }
  }
  void Replace(bool x_in_b2, Res* res) {
    if (t1.size() + t2.size() < c) return;
    const double n1 = static_cast<double>(t1.size());
    const bool from_t1 = !t1.empty() && ((x_in_b2 && n1 == p) || n1 > p);
    EvictBack(from_t1, true, res);
  }
  void Balance(bool inserted_t1, Res* res) {
    if (ram1 + ram2 <= r) return;
    bool from_t1;
    if (ram1 == 0)
      from_t1 = false;
    else if (ram2 == 0)
      from_t1 = true;
    else {
      // Relative depth of each list's last RAM block: (ram-1)/|list|.
      const double d1 = static_cast<double>(ram1 - 1) / static_cast<double>(t1.size());
      const double d2 = static_cast<double>(ram2 - 1) / static_cast<double>(t2.size());
      from_t1 = d1 != d2 ? d1 > d2 : !inserted_t1;
    }
    (from_t1 ? ram1 : ram2) -= 1;
    res->demoted = true;
  }
  Res Request(uint64_t k, bool d) {
    Res res;
    int i1 = Find(t1, k), i2 = Find(t2, k);
    if (i1 >= 0 || i2 >= 0) {
      std::vector<uint64_t>& l = i1 >= 0 ? t1 : t2;
      size_t& ram = i1 >= 0 ? ram1 : ram2;
      const size_t i = static_cast<size_t>(i1 >= 0 ? i1 : i2);
      res.found = i < ram ? top : bot;
      l.erase(l.begin() + static_cast<long>(i));
      if (i < ram) --ram;
      t2.insert(t2.begin(), k);
      ++ram2;
      dirty[k] = dirty[k] || d;
      Balance(false, &res);
      return res;
    }
    const int g1 = Find(b1, k), g2 = Find(b2, k);
    if (g1 >= 0 || g2 >= 0) {
      const double s1 = static_cast<double>(b1.size()), s2 = static_cast<double>(b2.size());
      if (g1 >= 0) {
        p = std::min(p + std::max(s2 / s1, 1.0), static_cast<double>(c));
        Replace(false, &res);
        b1.erase(b1.begin() + Find(b1, k));
      } else {
        p = std::max(p - std::max(s1 / s2, 1.0), 0.0);
        Replace(true, &res);
        b2.erase(b2.begin() + Find(b2, k));
      }
      t2.insert(t2.begin(), k);
      ++ram2;
      dirty[k] = d;
      Balance(false, &res);
      return res;
    }
    if (t1.size() + b1.size() == c) {
      if (t1.size() < c) {
        b1.pop_back();
        Replace(false, &res);
      } else {
        EvictBack(true, false, &res);
      }
    } else {
      const size_t total = t1.size() + t2.size() + b1.size() + b2.size();
      if (total >= c) {
        if (total == 2 * c) b2.pop_back();
        Replace(false, &res);
      }
    }
    t1.insert(t1.begin(), k);
    ++ram1;
    dirty[k] = d;
    Balance(true, &res);
    return res;
  }
  bool Remove(uint64_t k, bool* d) {
    int i = Find(t1, k);
    std::vector<uint64_t>* l = &t1;
    size_t* ram = &ram1;
    if (i < 0) {
      i = Find(t2, k);
      l = &t2;
      ram = &ram2;
    }
    if (i < 0) return false;
    if (static_cast<size_t>(i) < *ram) --*ram;
    l->erase(l->begin() + i);
    *d = dirty[k];
    dirty.erase(k);
    return true;
  }

  size_t c, r;
  Tier top, bot;
  double p = 0;
  std::vector<uint64_t> t1, t2, b1, b2;
  size_t ram1 = 0, ram2 = 0;
  std::map<uint64_t, bool> dirty;  // resident blocks only
};

// Naive two-level caches, written from paper 001 §III-A2 / §IV-A directly.
struct NaiveTiered {
  NaiveTiered(TierScheme s, size_t r, size_t ss)
      : scheme(s),
        ram(s == TierScheme::kUnified ? r + ss : r, r, Tier::kRam,
            s == TierScheme::kUnified ? Tier::kSsd : Tier::kRam),
        ssd(ss, ss, Tier::kSsd, Tier::kSsd) {}

  void Access(uint64_t k, bool write, Outcome* out) {
    out->Reset();
    if (scheme == TierScheme::kUnified) {
      NaiveArc::Res res = ram.Request(k, write);
      out->hit = res.found;
      out->admitted = res.found == Tier::kNone;
      out->promotions = res.found == Tier::kSsd && !write;
      out->ssd_writes = res.demoted;
      if (res.evicted) out->evicted.push_back({K(res.vkey), res.vdirty, res.vfrom});
      return;
    }
    if (ram.Where(k) != Tier::kNone) {
      ram.Request(k, write);
      out->hit = Tier::kRam;
      return;
    }
    if (scheme == TierScheme::kGlobal) {
      bool d = false;
      if (ssd.Remove(k, &d)) {
        out->hit = Tier::kSsd;
        out->promotions = !write;
      } else {
        out->admitted = true;
      }
      NaiveArc::Res res = ram.Request(k, write || d);
      if (res.evicted) {
        NaiveArc::Res s2 = ssd.Request(res.vkey, res.vdirty);
        ++out->ssd_writes;
        if (s2.evicted) out->evicted.push_back({K(s2.vkey), s2.vdirty, Tier::kSsd});
      }
      return;
    }
    // Inclusive.
    auto ssd_victim = [&](const NaiveArc::Res& s) {
      if (s.evicted && (s.vdirty || ram.Where(s.vkey) == Tier::kNone)) {
        out->evicted.push_back({K(s.vkey), s.vdirty, Tier::kSsd});
      }
    };
    if (write) {
      out->hit = ssd.Where(k);
      out->admitted = out->hit == Tier::kNone;
    } else {
      NaiveArc::Res s = ssd.Request(k, false);
      if (s.found == Tier::kSsd) {
        out->hit = Tier::kSsd;
        out->promotions = 1;
      } else {
        out->admitted = true;
        out->ssd_writes = 1;
      }
      ssd_victim(s);
    }
    NaiveArc::Res res = ram.Request(k, write);
    if (res.evicted) {
      if (res.vdirty) {
        ssd_victim(ssd.Request(res.vkey, true));
        ++out->ssd_writes;
      } else if (ssd.Where(res.vkey) == Tier::kNone) {
        out->evicted.push_back({K(res.vkey), false, Tier::kRam});
      }
    }
  }
  Tier Lookup(uint64_t k) const {
    const Tier t = ram.Where(k);
    return t != Tier::kNone ? t : ssd.Where(k);
  }

  TierScheme scheme;
  NaiveArc ram;  // UARC: the single unified ARC
  NaiveArc ssd;  // unused by UARC
};

bool SameOutcome(const Outcome& a, const Outcome& b) {
  if (a.hit != b.hit || a.admitted != b.admitted || a.ssd_writes != b.ssd_writes ||
      a.promotions != b.promotions || a.evicted.size() != b.evicted.size()) {
    return false;
  }
  for (size_t i = 0; i < a.evicted.size(); ++i) {
    if (!(a.evicted[i].key == b.evicted[i].key) || a.evicted[i].dirty != b.evicted[i].dirty ||
        a.evicted[i].from != b.evicted[i].from) {
      return false;
    }
  }
  return true;
}

class TierDifferentialTest : public ::testing::TestWithParam<TierScheme> {};

TEST_P(TierDifferentialTest, MatchesNaiveReimplementation) {
  const TierScheme scheme = GetParam();
  std::mt19937_64 rng(1234 + static_cast<int>(scheme));
  for (int trial = 0; trial < 600; ++trial) {
    const size_t r = 1 + rng() % 5, s = 1 + rng() % 6;
    const uint64_t universe = 2 + rng() % (3 * (r + s) + 2);
    const int write_pct = static_cast<int>(rng() % 3) * 25;  // 0, 25 or 50 %
    auto cache = MakeTieredCache(scheme, TierConfig{r, s});
    ASSERT_NE(cache, nullptr);
    NaiveTiered naive(scheme, r, s);
    Outcome got, want;
    for (int i = 0; i < 300; ++i) {
      // Skewed keys: half the accesses go to the lowest third of the universe.
      uint64_t k = rng() % universe;
      if (rng() % 2 == 0) k %= std::max<uint64_t>(1, universe / 3);
      const bool write = static_cast<int>(rng() % 100) < write_pct;
      Access a;
      a.key = K(k);
      a.op = write ? Op::kWrite : Op::kRead;
      a.seq = static_cast<uint64_t>(i);
      cache->OnAccess(a, &got);
      naive.Access(k, write, &want);
      ASSERT_TRUE(SameOutcome(got, want))
          << "trial " << trial << " step " << i << " R=" << r << " S=" << s << " key " << k
          << "\n got  " << Show(got) << "\n want " << Show(want);
      ASSERT_TRUE(cache->CheckInvariantsForTest()) << "trial " << trial << " step " << i;
    }
    for (uint64_t k = 0; k < universe; ++k) {
      ASSERT_EQ(cache->Lookup(K(k)), naive.Lookup(k)) << "trial " << trial << " key " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tier, TierDifferentialTest,
                         ::testing::Values(TierScheme::kInclusive, TierScheme::kGlobal,
                                           TierScheme::kUnified),
                         [](const ::testing::TestParamInfo<TierScheme>& info) {
                           switch (info.param) {
                             case TierScheme::kInclusive:
                               return std::string("Iarc");
                             case TierScheme::kGlobal:
                               return std::string("Garc");
                             case TierScheme::kUnified:
                               return std::string("Uarc");
                           }
                           return std::string("Unknown");
                         });

// ----------------------------------------------------------------------------------------------
// Invariants on random read/write traces.

struct Totals {
  uint64_t hits_ram = 0, hits_ssd = 0, misses = 0, ssd_writes = 0, promotions = 0;
  uint64_t evictions = 0, dirty_evictions = 0;
  uint64_t hits() const { return hits_ram + hits_ssd; }
};

void Tally(const Outcome& o, Totals* t) {
  if (o.hit == Tier::kRam)
    ++t->hits_ram;
  else if (o.hit == Tier::kSsd)
    ++t->hits_ssd;
  else
    ++t->misses;
  t->ssd_writes += o.ssd_writes;
  t->promotions += o.promotions;
  t->evictions += o.evicted.size();
  for (const Eviction& e : o.evicted) t->dirty_evictions += e.dirty;
}

TEST(TierInvariantTest, ExclusiveSchemesNeverHoldABlockTwice) {
  for (TierScheme scheme : {TierScheme::kGlobal, TierScheme::kUnified}) {
    std::mt19937_64 rng(99);
    for (int trial = 0; trial < 40; ++trial) {
      const size_t r = 1 + rng() % 8, s = 1 + rng() % 12;
      const uint64_t universe = 3 * (r + s);
      auto cache = MakeTieredCache(scheme, TierConfig{r, s});
      Outcome out;
      for (int i = 0; i < 2000; ++i) {
        Access a;
        a.key = K(rng() % universe);
        a.op = rng() % 4 == 0 ? Op::kWrite : Op::kRead;
        cache->OnAccess(a, &out);
        ASSERT_LE(cache->ram_size(), r);
        ASSERT_LE(cache->ssd_size(), s);
        ASSERT_EQ(cache->size(), cache->ram_size() + cache->ssd_size());
        // The accessed block is in RAM right after the access (both schemes allocate there).
        ASSERT_TRUE(cache->Holds(a.key, Tier::kRam));
        ASSERT_EQ(cache->Lookup(a.key), Tier::kRam);
        for (uint64_t k = 0; k < universe; ++k) {
          ASSERT_FALSE(cache->Holds(K(k), Tier::kRam) && cache->Holds(K(k), Tier::kSsd))
              << "block " << k << " in both tiers, scheme " << static_cast<int>(scheme);
        }
        ASSERT_TRUE(cache->CheckInvariantsForTest());
      }
    }
  }
}

TEST(IarcTest, ReadMissAllocatesInBothTiers) {
  // Paper 001 §III-A2: "If the data is not found in SSD ARC, then the block is allocated in both
  // levels"; an SSD hit is "propagated to RAM ARC". Inclusion holds at allocation time; later the
  // two ARCs replace independently, so a block hot in RAM may age out of the SSD ARC.
  std::mt19937_64 rng(7);
  const size_t r = 6, s = 10;
  auto cache = MakeTieredCache(TierScheme::kInclusive, TierConfig{r, s});
  Outcome out;
  Totals t;
  uint64_t both_held = 0;
  for (int i = 0; i < 20000; ++i) {
    Access a;
    a.key = K(rng() % 40);
    cache->OnAccess(a, &out);
    Tally(out, &t);
    if (out.hit != Tier::kRam) {
      ASSERT_TRUE(cache->Holds(a.key, Tier::kRam));
      ASSERT_TRUE(cache->Holds(a.key, Tier::kSsd));
    }
    // On a read-only trace the SSD is written only by fills: one per read miss.
    ASSERT_EQ(out.ssd_writes, out.hit == Tier::kNone ? 1u : 0u);
    ASSERT_LE(cache->ram_size(), r);
    ASSERT_LE(cache->ssd_size(), s);
    for (uint64_t k = 0; k < 40; ++k) {
      both_held += cache->Holds(K(k), Tier::kRam) && cache->Holds(K(k), Tier::kSsd);
    }
  }
  EXPECT_EQ(t.ssd_writes, t.misses);
  EXPECT_EQ(t.promotions, t.hits_ssd);
  EXPECT_GT(both_held, 0u);  // the redundancy exclusive caching removes
  EXPECT_EQ(cache->dirty_count(), 0u);
  EXPECT_EQ(t.dirty_evictions, 0u);
}

TEST(IarcTest, WritesStayInRamUntilEvicted) {
  auto cache = MakeTieredCache(TierScheme::kInclusive, TierConfig{2, 4});
  Outcome out;
  Access a;
  a.key = K(1);
  a.op = Op::kWrite;
  cache->OnAccess(a, &out);
  EXPECT_EQ(out.ssd_writes, 0u);
  EXPECT_TRUE(cache->Holds(K(1), Tier::kRam));
  EXPECT_FALSE(cache->Holds(K(1), Tier::kSsd));
  EXPECT_EQ(cache->dirty_count(), 1u);
  // Two more blocks push the dirty one out of RAM: it is written to the SSD ARC.
  a.op = Op::kRead;
  a.key = K(2);
  cache->OnAccess(a, &out);
  a.key = K(3);
  cache->OnAccess(a, &out);
  EXPECT_EQ(out.ssd_writes, 2u);  // fill of 3 + demotion of dirty 1
  EXPECT_FALSE(cache->Holds(K(1), Tier::kRam));
  EXPECT_TRUE(cache->Holds(K(1), Tier::kSsd));
  EXPECT_EQ(cache->dirty_count(), 1u);
  EXPECT_TRUE(cache->MarkClean(K(1)));
  EXPECT_EQ(cache->dirty_count(), 0u);
}

TEST(TierInvariantTest, DirtyBlocksAreAccountedFor) {
  // Every write dirties its block; each dirty block either is still cached (dirty_count) or left
  // through a dirty eviction. For the exclusive schemes copies and blocks coincide, so
  //   dirty_count(t) == dirty_count(t-1) + newly dirtied - dirty evictions.
  for (TierScheme scheme : {TierScheme::kGlobal, TierScheme::kUnified}) {
    std::mt19937_64 rng(5);
    auto cache = MakeTieredCache(scheme, TierConfig{4, 9});
    Outcome out;
    for (int i = 0; i < 20000; ++i) {
      Access a;
      a.key = K(rng() % 30);
      a.op = rng() % 3 == 0 ? Op::kWrite : Op::kRead;
      const Tier before = cache->Lookup(a.key);
      // Whether the block is already dirty is not visible; infer it from the count delta.
      const size_t dirty_before = cache->dirty_count();
      cache->OnAccess(a, &out);
      size_t dirty_out = 0;
      for (const Eviction& e : out.evicted) dirty_out += e.dirty;
      const long delta = static_cast<long>(cache->dirty_count()) - static_cast<long>(dirty_before);
      const long newly = delta + static_cast<long>(dirty_out);
      ASSERT_GE(newly, 0);
      ASSERT_LE(newly, a.op == Op::kWrite ? 1 : 0);
      if (a.op == Op::kWrite && before == Tier::kNone) {
        ASSERT_EQ(newly, 1);
      }
      if (i % 1000 == 999) {
        // Destage everything: afterwards nothing is dirty and evictions are clean.
        for (uint64_t k = 0; k < 30; ++k) cache->MarkClean(K(k));
        ASSERT_EQ(cache->dirty_count(), 0u);
      }
    }
  }
}

TEST(TierInvariantTest, EraseAndMarkClean) {
  for (TierScheme scheme : {TierScheme::kInclusive, TierScheme::kGlobal, TierScheme::kUnified}) {
    auto cache = MakeTieredCache(scheme, TierConfig{2, 2});
    Outcome out;
    for (uint64_t k = 0; k < 4; ++k) {
      Access a;
      a.key = K(k);
      a.op = Op::kWrite;
      cache->OnAccess(a, &out);
    }
    EXPECT_GT(cache->dirty_count(), 0u);
    EXPECT_FALSE(cache->Erase(K(100)));
    EXPECT_FALSE(cache->MarkClean(K(100)));
    EXPECT_TRUE(cache->Erase(K(3)));
    EXPECT_EQ(cache->Lookup(K(3)), Tier::kNone);
    EXPECT_FALSE(cache->Erase(K(3)));
    // After a hole opened by Erase, a miss fills it without evicting.
    const size_t size = cache->size();
    Access a;
    a.key = K(50);
    cache->OnAccess(a, &out);
    EXPECT_TRUE(cache->CheckInvariantsForTest());
    if (scheme == TierScheme::kUnified) {
      EXPECT_TRUE(out.evicted.empty());
      EXPECT_EQ(cache->size(), size + 1);
    }
    for (uint64_t k = 0; k < 60; ++k) cache->MarkClean(K(k));
    EXPECT_EQ(cache->dirty_count(), 0u);
  }
}

TEST(TierConfigTest, Validate) {
  EXPECT_TRUE((TierConfig{1, 1}.Validate().ok()));
  EXPECT_EQ((TierConfig{0, 4}.Validate().code()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((TierConfig{4, 0}.Validate().code()), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((TierConfig{TierConfig::kMaxBlocks, 1}.Validate().code()),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeUarc(TierConfig{0, 4}), nullptr);
  EXPECT_EQ(MakeIarc(TierConfig{4, 0}), nullptr);
  EXPECT_EQ(MakeGarc(TierConfig{0, 0}), nullptr);
  auto u = MakeUarc(TierConfig{3, 5});
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->name(), "uarc");
  EXPECT_EQ(u->capacity(), 8u);
  EXPECT_EQ(MakeIarc(TierConfig{3, 5})->name(), "iarc");
  EXPECT_EQ(MakeGarc(TierConfig{3, 5})->name(), "garc");
  EXPECT_GT(u->MetadataBytes(), 0u);
}

// ----------------------------------------------------------------------------------------------
// Paper 001 §III-C on synthetic workloads.

// Zipf(s) over n ranks via an inverse-CDF table; uniform variates built from raw 64-bit draws so
// the trace is identical on every standard library.
class Zipf {
 public:
  Zipf(uint64_t n, double s) : cdf_(n) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i)
      cdf_[i] = (sum += 1.0 / std::pow(static_cast<double>(i + 1), s));
    for (double& c : cdf_) c /= sum;
  }
  uint64_t Next(std::mt19937_64& rng) const {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    const auto i = std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
    return std::min<uint64_t>(static_cast<uint64_t>(i), cdf_.size() - 1);
  }

 private:
  std::vector<double> cdf_;
};

Totals Replay(CachePolicy* cache, const std::vector<uint64_t>& trace) {
  Totals t;
  Outcome out;
  Access a;
  for (size_t i = 0; i < trace.size(); ++i) {
    a.key = K(trace[i]);
    a.seq = i;
    cache->OnAccess(a, &out);
    Tally(out, &t);
  }
  return t;
}

std::vector<uint64_t> ZipfTrace(uint64_t n, double s, size_t len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Zipf z(n, s);
  std::vector<uint64_t> trace(len);
  // Scatter ranks over the key space so popularity is not correlated with key order.
  const uint64_t stride = 7919;  // prime, coprime with n below
  for (uint64_t& k : trace) k = (z.Next(rng) * stride) % n;
  return trace;
}

// Zipf with periodic scans over cold blocks (a backup or report job).
std::vector<uint64_t> ZipfWithScans(uint64_t n, size_t len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Zipf z(n, 0.8);
  std::vector<uint64_t> trace;
  trace.reserve(len);
  uint64_t scan_base = n;
  while (trace.size() < len) {
    for (int i = 0; i < 3000 && trace.size() < len; ++i) trace.push_back(z.Next(rng));
    for (uint64_t b = 0; b < n / 4 && trace.size() < len; ++b) trace.push_back(scan_base + b);
    scan_base += n / 4;
  }
  return trace;
}

void PrintRow(const char* workload, const char* name, const Totals& t) {
  std::printf(
      "  %-22s %-5s hits=%7llu (ram %7llu, ssd %7llu) misses=%7llu ssd_writes=%7llu\n", workload,
      name, static_cast<unsigned long long>(t.hits()), static_cast<unsigned long long>(t.hits_ram),
      static_cast<unsigned long long>(t.hits_ssd), static_cast<unsigned long long>(t.misses),
      static_cast<unsigned long long>(t.ssd_writes));
}

TEST(UarcTest, BeatsIarcWithEqualRamAndSsd) {
  struct Workload {
    const char* name;
    std::vector<uint64_t> trace;
    size_t r;
  };
  // Working sets a bit larger than R + S (paper 001 §III-C uses R = S).
  std::vector<Workload> workloads;
  workloads.push_back({"zipf0.9 n=2500 R=S=1000", ZipfTrace(2500, 0.9, 400000, 42), 1000});
  workloads.push_back({"zipf0.7 n=600 R=S=256", ZipfTrace(600, 0.7, 200000, 43), 256});
  workloads.push_back({"zipf+scans n=2000 R=S=700", ZipfWithScans(2000, 300000, 44), 700});
  for (const Workload& w : workloads) {
    const TierConfig config{w.r, w.r};
    auto iarc = MakeTieredCache(TierScheme::kInclusive, config);
    auto garc = MakeTieredCache(TierScheme::kGlobal, config);
    auto uarc = MakeTieredCache(TierScheme::kUnified, config);
    const Totals ti = Replay(iarc.get(), w.trace);
    const Totals tg = Replay(garc.get(), w.trace);
    const Totals tu = Replay(uarc.get(), w.trace);
    PrintRow(w.name, "iarc", ti);
    PrintRow(w.name, "garc", tg);
    PrintRow(w.name, "uarc", tu);
    EXPECT_GE(tu.hits(), ti.hits()) << w.name;
    // Exclusivity shows up as SSD hits (paper 001 Fig. 4).
    EXPECT_GT(tu.hits_ssd, ti.hits_ssd) << w.name;
  }
}

TEST(UarcTest, HitsEqualSingleArcOfTotalSize) {
  // Paper 001 §III-C: "the number of hits achieved under UARC and SARC were identical in all
  // cases". The split only decides which tier serves a hit.
  const std::vector<uint64_t> trace = ZipfTrace(900, 0.8, 100000, 11);
  for (size_t r : {1, 50, 200, 399}) {
    const size_t s = 400 - r;
    auto uarc = MakeTieredCache(TierScheme::kUnified, TierConfig{r, s});
    TierArc sarc(400, 400, Tier::kRam, Tier::kRam);
    TierArc::Result res;
    uint64_t sarc_hits = 0;
    for (uint64_t k : trace) {
      sarc.Request(K(k), false, &res);
      sarc_hits += res.found != Tier::kNone;
    }
    const Totals tu = Replay(uarc.get(), trace);
    EXPECT_EQ(tu.hits(), sarc_hits) << "R=" << r;
    EXPECT_EQ(tu.hits_ssd, tu.promotions);
  }
}

TEST(TierArcTest, PlainArcMatchesPaperCases) {
  // c = 3, single tier. Trace 1 2 3 1 4 2 5 1: checks p adaptation on B1/B2 ghost hits.
  TierArc arc(3, 3, Tier::kSsd, Tier::kSsd);
  TierArc::Result r;
  auto req = [&](uint64_t k) { arc.Request(K(k), false, &r); };
  auto list = [&](TierArc::List l) {
    std::vector<BlockKey> v;
    arc.ListForTest(l, &v);
    std::string s;
    for (const BlockKey& b : v) s += std::to_string(b.block);
    return s;
  };
  req(1);
  req(2);
  req(3);
  EXPECT_EQ(list(TierArc::kT1Top), "321");
  req(1);  // case I: T2=[1]
  EXPECT_EQ(r.found, Tier::kSsd);
  EXPECT_EQ(list(TierArc::kT2Top), "1");
  req(4);  // case IV-B, full: |T1|=2 > p=0 -> 2 to B1
  EXPECT_TRUE(r.evicted);
  EXPECT_EQ(r.victim.key, K(2));
  EXPECT_EQ(list(TierArc::kB1), "2");
  req(2);  // case II: p = 0 + max(0/1, 1) = 1; |T1|=2 > 1 -> 3 to B1; 2 into T2
  EXPECT_TRUE(r.ghost_hit);
  EXPECT_DOUBLE_EQ(arc.p(), 1.0);
  EXPECT_EQ(r.victim.key, K(3));
  EXPECT_EQ(list(TierArc::kT1Top), "4");
  EXPECT_EQ(list(TierArc::kT2Top), "21");
  EXPECT_EQ(list(TierArc::kB1), "3");
  req(5);  // case IV-B: total = 4 >= 3; |T1|=1 = p, x not in B2 -> T2's LRU (1) to B2
  EXPECT_EQ(r.victim.key, K(1));
  EXPECT_EQ(list(TierArc::kB2), "1");
  EXPECT_EQ(list(TierArc::kT1Top), "54");
  req(1);  // case III: p = max(1 - max(1/1, 1), 0) = 0; |T1| = 2 > 0 -> 4 to B1
  EXPECT_DOUBLE_EQ(arc.p(), 0.0);
  EXPECT_EQ(r.victim.key, K(4));
  EXPECT_EQ(list(TierArc::kT2Top), "12");
  EXPECT_EQ(list(TierArc::kB1), "43");
  EXPECT_TRUE(arc.CheckInvariantsForTest());
}

}  // namespace
}  // namespace ringcache::policy
