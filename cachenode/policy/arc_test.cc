// Tests of ArcOrder (arc.h): a hand-checked sequence and exact agreement with a naive ARC written
// straight from Fig. 4 of Megiddo & Modha (FAST 2003) with std::list.
#include "cachenode/policy/arc.h"

#include <algorithm>
#include <list>
#include <random>
#include <vector>

#include "cachenode/policy/driver.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

std::unique_ptr<CacheDriver> ArcCache(size_t capacity) {
  DriverParts parts;
  parts.make_space = [capacity](SlotTable* t) {
    return std::make_unique<GlobalSpace>(capacity, t, [](SlotTable* s, size_t c) {
      return std::make_unique<ArcOrder>(s, c);
    });
  };
  return *CacheDriver::Create(DriverConfig{"arc", capacity}, std::move(parts));
}

// ARC(c) as printed in the paper; lists hold the MRU at the front.
class NaiveArc {
 public:
  explicit NaiveArc(size_t c) : c_(static_cast<double>(c)) {}
  uint64_t hits = 0;

  void Access(uint64_t x) {
    if (Has(t1_, x) || Has(t2_, x)) {  // Case I
      ++hits;
      Erase(t1_, x);
      Erase(t2_, x);
      t2_.push_front(x);
      return;
    }
    if (Has(b1_, x)) {  // Case II
      p_ = std::min(c_, p_ + std::max(double(b2_.size()) / double(b1_.size()), 1.0));
      Replace(x);
      Erase(b1_, x);
      t2_.push_front(x);
      return;
    }
    if (Has(b2_, x)) {  // Case III
      p_ = std::max(0.0, p_ - std::max(double(b1_.size()) / double(b2_.size()), 1.0));
      Replace(x);
      Erase(b2_, x);
      t2_.push_front(x);
      return;
    }
    // Case IV
    const size_t l1 = t1_.size() + b1_.size();
    const size_t total = l1 + t2_.size() + b2_.size();
    if (double(l1) == c_) {
      if (double(t1_.size()) < c_) {
        b1_.pop_back();
        Replace(x);
      } else {
        t1_.pop_back();
      }
    } else if (double(total) >= c_) {
      if (double(total) == 2 * c_) b2_.pop_back();
      Replace(x);
    }
    t1_.push_front(x);
  }
  size_t t1() const { return t1_.size(); }
  size_t t2() const { return t2_.size(); }
  size_t b1() const { return b1_.size(); }
  size_t b2() const { return b2_.size(); }
  double p() const { return p_; }

 private:
  static bool Has(const std::list<uint64_t>& l, uint64_t x) {
    return std::find(l.begin(), l.end(), x) != l.end();
  }
  static void Erase(std::list<uint64_t>& l, uint64_t x) { l.remove(x); }
  void Replace(uint64_t x) {
    const double t1 = double(t1_.size());
    if (!t1_.empty() && (t1 > p_ || (Has(b2_, x) && t1 == p_))) {
      b1_.push_front(t1_.back());
      t1_.pop_back();
    } else {
      b2_.push_front(t2_.back());
      t2_.pop_back();
    }
  }

  double c_;
  double p_ = 0;
  std::list<uint64_t> t1_, t2_, b1_, b2_;
};

TEST(ArcOrderTest, HandCheckedSequence) {
  // c = 2. 1m 2m (T1 = 2,1) 1h (T2 = 1; T1 = 2) 3m: REPLACE with p = 0: |T1| = 1 > 0, so 2 goes
  // to B1. 2m: in B1 -> p = 1, REPLACE: |T1| = 1 (3) > 1? no -> T2's LRU (1) goes to B2; 2 in T2.
  auto cache = ArcCache(2);
  Outcome out;
  for (uint64_t b : {1, 2, 1, 3}) cache->OnAccess(testing::Read(b), &out);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 2u);
  cache->OnAccess(testing::Read(2), &out);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 1u);
  auto& arc = static_cast<ArcOrder&>(cache->mutable_space().queue(0));
  EXPECT_EQ(arc.p(), 1.0);
  EXPECT_EQ(arc.t1_size(), 1u);  // 3
  EXPECT_EQ(arc.t2_size(), 1u);  // 2
  EXPECT_EQ(arc.b1_size(), 0u);
  EXPECT_EQ(arc.b2_size(), 1u);  // 1
}

TEST(ArcOrderTest, MatchesNaiveArcOnRandomTraces) {
  std::mt19937_64 rng(3);
  for (size_t c : {1, 2, 3, 8, 25}) {
    for (int shape = 0; shape < 3; ++shape) {
      NaiveArc naive(c);
      std::vector<Access> trace;
      for (int i = 0; i < 4000; ++i) {
        uint64_t b;
        if (shape == 0) b = rng() % (3 * c + 2);                        // uniform, small set
        else if (shape == 1) b = (rng() % 3 == 0) ? rng() % 200 : rng() % (c + 1);  // hot + scan
        else b = (i % 500 < 250) ? i % (2 * c + 1) : rng() % (c / 2 + 2);  // loops then hot set
        trace.push_back(testing::Read(b));
        naive.Access(b);
      }
      auto cache = ArcCache(c);
      EXPECT_EQ(testing::Replay(*cache, trace).hits, naive.hits) << "c=" << c << " shape=" << shape;
      auto& arc = static_cast<ArcOrder&>(cache->mutable_space().queue(0));
      EXPECT_EQ(arc.t1_size(), naive.t1());
      EXPECT_EQ(arc.t2_size(), naive.t2());
      EXPECT_EQ(arc.b1_size(), naive.b1());
      EXPECT_EQ(arc.b2_size(), naive.b2());
      EXPECT_EQ(arc.p(), naive.p());
    }
  }
}

TEST(ArcOrderTest, GhostsStayWithinTwoC) {
  auto cache = ArcCache(10);
  Outcome out;
  for (uint64_t i = 0; i < 1000; ++i) cache->OnAccess(testing::Read(i % 37 + (i / 100) * 5), &out);
  auto& arc = static_cast<ArcOrder&>(cache->mutable_space().queue(0));
  EXPECT_LE(arc.t1_size() + arc.b1_size(), 10u);
  EXPECT_LE(arc.t1_size() + arc.t2_size() + arc.b1_size() + arc.b2_size(), 20u);
}

}  // namespace
}  // namespace ringcache::policy
