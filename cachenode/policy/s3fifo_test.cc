// Tests of S3FifoOrder (s3fifo.h): a hand-checked scenario and agreement with a naive S3-FIFO
// written with std::deque from the same rules.
#include "cachenode/policy/s3fifo.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "cachenode/policy/driver.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

std::unique_ptr<CacheDriver> S3Cache(size_t capacity, S3FifoConfig cfg = {}) {
  DriverParts parts;
  parts.make_space = [capacity, cfg](SlotTable* t) {
    return std::make_unique<GlobalSpace>(capacity, t, [cfg](SlotTable* s, size_t c) {
      return std::make_unique<S3FifoOrder>(s, c, cfg);
    });
  };
  return *CacheDriver::Create(DriverConfig{"s3fifo", capacity}, std::move(parts));
}

S3FifoOrder& Order(CacheDriver& d) { return static_cast<S3FifoOrder&>(d.mutable_space().queue(0)); }

TEST(S3FifoConfigTest, Validate) {
  EXPECT_TRUE(S3FifoConfig{}.Validate().ok());
  EXPECT_FALSE((S3FifoConfig{0, 0.9, 1}).Validate().ok());
  EXPECT_FALSE((S3FifoConfig{0.1, 0.9, 0}).Validate().ok());
  EXPECT_FALSE((S3FifoConfig{0.1, 0.9, 4}).Validate().ok());
}

TEST(S3FifoOrderTest, HandCheckedScenario) {
  auto cache = S3Cache(10);
  Outcome out;
  for (uint64_t b = 1; b <= 10; ++b) cache->OnAccess(testing::Read(b), &out);  // all into S
  cache->OnAccess(testing::Read(1), &out);  // hit: freq(1) = 1
  EXPECT_EQ(out.hit, Tier::kSsd);
  // 11 misses: S tail 1 was hit -> moves to M; next S tail 2 is evicted into the ghost.
  cache->OnAccess(testing::Read(11), &out);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 2u);
  EXPECT_EQ(Order(*cache).main_size(), 1u);
  EXPECT_EQ(Order(*cache).ghost_size(), 1u);
  // 2 comes back: a ghost hit goes straight to M; S tail 3 (never hit) is evicted.
  cache->OnAccess(testing::Read(2), &out);
  ASSERT_EQ(out.evicted.size(), 1u);
  EXPECT_EQ(out.evicted[0].key.block, 3u);
  EXPECT_EQ(Order(*cache).main_size(), 2u);
  EXPECT_EQ(Order(*cache).small_size(), 8u);
}

// The same rules with std::deque (front = head, back = tail).
class NaiveS3Fifo {
 public:
  NaiveS3Fifo(size_t cap, S3FifoConfig cfg)
      : cap_(cap), cfg_(cfg),
        ghost_cap_(std::max<size_t>(1, std::llround(cfg.ghost_ratio * double(cap)))) {}
  uint64_t hits = 0;

  void Access(uint64_t x) {
    if (auto it = freq_.find(x); it != freq_.end()) {
      ++hits;
      it->second = std::min(it->second + 1, 3);
      return;
    }
    const bool ghost_hit = std::find(g_.begin(), g_.end(), x) != g_.end();
    if (ghost_hit) g_.erase(std::find(g_.begin(), g_.end(), x));
    if (s_.size() + m_.size() >= cap_) Evict();
    freq_[x] = 0;
    (ghost_hit ? m_ : s_).push_front(x);
  }

 private:
  void Evict() {
    while (true) {
      const double size = double(s_.size() + m_.size());
      const double target = std::max(1.0, cfg_.small_ratio * size);
      if (!s_.empty() && (double(s_.size()) >= target || m_.empty())) {
        const uint64_t t = s_.back();
        s_.pop_back();
        if (freq_[t] >= int(cfg_.move_threshold)) {
          freq_[t] = 0;
          m_.push_front(t);
          continue;
        }
        freq_.erase(t);
        if (g_.size() >= ghost_cap_) g_.pop_back();
        g_.push_front(t);
        return;
      }
      const uint64_t t = m_.back();
      m_.pop_back();
      if (freq_[t] > 0) {
        --freq_[t];
        m_.push_front(t);
        continue;
      }
      freq_.erase(t);
      return;
    }
  }

  size_t cap_;
  S3FifoConfig cfg_;
  size_t ghost_cap_;
  std::deque<uint64_t> s_, m_, g_;
  absl::flat_hash_map<uint64_t, int> freq_;
};

TEST(S3FifoOrderTest, MatchesNaiveS3Fifo) {
  std::mt19937_64 rng(5);
  for (size_t cap : {1, 4, 10, 50}) {
    for (uint32_t move : {1u, 2u}) {
      S3FifoConfig cfg;
      cfg.move_threshold = move;
      NaiveS3Fifo naive(cap, cfg);
      std::vector<Access> trace;
      for (int i = 0; i < 5000; ++i) {
        const uint64_t b = (rng() % 3 == 0) ? rng() % 1000 : rng() % (cap + 5);
        trace.push_back(testing::Read(b));
        naive.Access(b);
      }
      auto cache = S3Cache(cap, cfg);
      EXPECT_EQ(testing::Replay(*cache, trace).hits, naive.hits) << "cap=" << cap << " move=" << move;
    }
  }
}

TEST(S3FifoOrderTest, OneHitWondersLeaveQuickly) {
  // A scan of one-time blocks through a cache holding a hot set: the hot set survives in M.
  auto cache = S3Cache(20);
  Outcome out;
  for (int round = 0; round < 3; ++round) {
    for (uint64_t b = 0; b < 10; ++b) cache->OnAccess(testing::Read(b), &out);
  }
  for (uint64_t b = 1000; b < 1200; ++b) cache->OnAccess(testing::Read(b), &out);
  int hot = 0;
  for (uint64_t b = 0; b < 10; ++b) hot += cache->Lookup(BlockKey{0, b}) == Tier::kSsd;
  EXPECT_EQ(hot, 10);
}

}  // namespace
}  // namespace ringcache::policy
