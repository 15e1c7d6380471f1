// Tests of AdmitClimber and RegretTuner (admit_climber.h) and of the adaptive sieve built on them
// (sieve.h).
#include "cachenode/policy/admit_climber.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cachenode/policy/registry.h"
#include "cachenode/policy/sieve.h"
#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;

// Feeds one window of `window` accesses with `hits` hits and `admits` admissions.
void Window(AdmitClimber* c, uint64_t window, uint64_t hits, uint64_t admits) {
  for (uint64_t i = 0; i < admits; ++i) c->OnAdmit();
  for (uint64_t i = 0; i < window; ++i) c->OnAccess(i < hits);
}

ClimberConfig Config(double budget) {
  ClimberConfig c;
  c.window = 1000;
  c.budget = budget;
  return c;
}

TEST(ClimberConfigTest, Validate) {
  EXPECT_TRUE(Config(4).Validate().ok());
  EXPECT_FALSE(Config(0).Validate().ok());
  ClimberConfig c = Config(4);
  c.window = 4;
  EXPECT_FALSE(c.Validate().ok());
  c = Config(4);
  c.initial = 1.5;
  EXPECT_FALSE(c.Validate().ok());
  c = Config(4);
  c.min_step = 0.5;
  c.step = 0.25;
  EXPECT_FALSE(c.Validate().ok());
}

// A workload where admitting first misses pays (hits rise with the fraction, admissions cheap):
// the fraction climbs to 1 and stays near it.
TEST(AdmitClimberTest, ClimbsWhileAdmittingMorePays) {
  AdmitClimber c(Config(/*budget=*/4));
  EXPECT_EQ(c.fraction(), 0.0);
  for (int w = 0; w < 60; ++w) {
    const auto hits = static_cast<uint64_t>(300 + 400 * c.fraction());
    const auto admits = static_cast<uint64_t>(100 + 100 * c.fraction());
    Window(&c, 1000, hits, admits);
  }
  EXPECT_EQ(c.steps(), 60u);
  EXPECT_GT(c.fraction(), 0.85);
}

// Admitting more gains a few hits for many SSD writes, over the budget: the fraction stays low.
TEST(AdmitClimberTest, StaysLowWhenTheHitsCostMoreWritesThanTheBudget) {
  AdmitClimber c(Config(/*budget=*/2));
  for (int w = 0; w < 60; ++w) {
    const auto hits = static_cast<uint64_t>(300 + 20 * c.fraction());   // +0.02 per unit f
    const auto admits = static_cast<uint64_t>(50 + 500 * c.fraction());  // -0.25 per unit f
    Window(&c, 1000, hits, admits);
  }
  EXPECT_LT(c.fraction(), 0.15);
}

// The same gains with a generous budget make admitting worth it.
TEST(AdmitClimberTest, AGenerousBudgetBuysTheSameHits) {
  AdmitClimber c(Config(/*budget=*/100));
  for (int w = 0; w < 60; ++w) {
    const auto hits = static_cast<uint64_t>(300 + 20 * c.fraction());
    const auto admits = static_cast<uint64_t>(50 + 500 * c.fraction());
    Window(&c, 1000, hits, admits);
  }
  EXPECT_GT(c.fraction(), 0.85);
}

// Hits fall as the fraction rises (scans evict what the cache held): the climber backs off.
TEST(AdmitClimberTest, BacksOffWhenAdmittingHurts) {
  ClimberConfig cfg = Config(4);
  cfg.initial = 1.0;
  AdmitClimber c(cfg);
  for (int w = 0; w < 60; ++w) {
    const auto hits = static_cast<uint64_t>(600 - 300 * c.fraction());
    Window(&c, 1000, hits, 100);
  }
  EXPECT_LT(c.fraction(), 0.15);
}

// The sieve with adapt=1, through the registry, on a hot spot that moves every 20,000 reads over
// blocks read a few times each: admitting at the first miss pays, so the adaptive sieve must beat
// the paper's sieve on hits. On a scan (every block read once) it must not buy SSD writes.
std::vector<Access> MovingHotSpot() {
  std::vector<Access> t;
  uint64_t x = 12345;
  for (int phase = 0; phase < 10; ++phase) {
    for (int i = 0; i < 20000; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      t.push_back(Read(static_cast<uint64_t>(phase) * 100000 + (x >> 33) % 2000));
    }
  }
  return t;
}

// Hits on MovingHotSpot of the paper's sieve, of `adaptive` and of admit-all LRU, 4,096 blocks.
struct HotSpotHits {
  uint64_t fixed = 0, adaptive = 0, all = 0;
};
HotSpotHits OnMovingHotSpot(const std::string& adaptive) {
  PolicyContext ctx;
  ctx.capacity_blocks = 4096;
  HotSpotHits h;
  const std::vector<Access> trace = MovingHotSpot();
  for (auto [spec, out] : {std::pair{std::string("lru+sieve"), &h.fixed},
                           std::pair{adaptive, &h.adaptive}, std::pair{std::string("lru"), &h.all}}) {
    auto p = MakePolicy(spec, ctx);
    EXPECT_TRUE(p.ok()) << spec << ": " << p.status();
    if (p.ok()) *out = testing::Replay(**p, trace).hits;
  }
  return h;
}

TEST(AdaptiveSieveTest, BeatsThePaperSieveOnAMovingHotSpot) {
  const HotSpotHits h = OnMovingHotSpot("lru+sieve(adapt=1,window=1000)");
  // Each phase's 2,000 blocks cost the paper's sieve two misses each and admit-all one: the
  // adaptive sieve must win back at least a third of that difference (measured: about half,
  // 169,496 against 160,012 on this trace, the climber learning each phase again).
  EXPECT_GT(h.adaptive, h.fixed + (h.all - h.fixed) / 3)
      << "fixed " << h.fixed << " adaptive " << h.adaptive << " lru " << h.all;
}

// On a scan (every block read once) neither rule may buy SSD writes: probing costs a little, under
// 5% of the blocks admitted (admit-all would write every one). Nothing comes back, so for the
// regret rule every first-miss admission is a waste: from 0.5 its fraction falls to 0.
TEST(AdaptiveSieveTest, BuysNoWritesOnAScan) {
  std::vector<Access> scan;
  for (uint64_t b = 0; b < 200000; ++b) scan.push_back(Read(b));
  for (const char* spec : {"lru+sieve(adapt=1,budget=4)", "vbq+lru+sieve(adapt=ghost,start=0.5)"}) {
    PolicyContext ctx;
    ctx.capacity_blocks = 4096;
    auto p = MakePolicy(spec, ctx);
    ASSERT_TRUE(p.ok()) << spec << ": " << p.status();
    const testing::Tally t = testing::Replay(**p, scan);
    EXPECT_EQ(t.hits, 0u) << spec;
    EXPECT_LT(t.admitted, scan.size() / 20) << spec << ": " << t.admitted;
    std::vector<VdiStats> rows;
    (*p)->AppendVdiStats(&rows);
    if (!rows.empty()) {
      EXPECT_EQ(rows[0].admit_first, 0.0) << spec;
    }
  }
}

TEST(AdaptiveSieveTest, FractionShowsInTheVdiStatsOfAVbqPolicy) {
  PolicyContext ctx;
  ctx.capacity_blocks = 512;
  auto p = MakePolicy("vbq+lru+sieve(adapt=1,window=100,start=0.5)", ctx);
  ASSERT_TRUE(p.ok()) << p.status();
  Outcome out;
  for (uint64_t b = 0; b < 50; ++b) (*p)->OnAccess(Read(b, /*vdi=*/3), &out);
  std::vector<VdiStats> rows;
  (*p)->AppendVdiStats(&rows);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].vdi, 3u);
  EXPECT_DOUBLE_EQ(rows[0].admit_first, 0.5);  // no window ended yet: the start value

  auto plain = MakePolicy("vbq+lru+sieve", ctx);
  ASSERT_TRUE(plain.ok());
  (*plain)->OnAccess(Read(1, 3), &out);
  rows.clear();
  (*plain)->AppendVdiStats(&rows);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].admit_first, -1);
}

TEST(AdaptiveSieveTest, BadParametersAreRefused) {
  PolicyContext ctx;
  ctx.capacity_blocks = 512;
  EXPECT_FALSE(MakePolicy("lru+sieve(adapt=1,budget=0)", ctx).ok());
  EXPECT_FALSE(MakePolicy("lru+sieve(adapt=1,start=2)", ctx).ok());
  EXPECT_FALSE(MakePolicy("lru+sieve(adapt=1,window=3)", ctx).ok());
  EXPECT_TRUE(MakePolicy("lru+sieve(adapt=1,budget=2,window=5000,start=0.25)", ctx).ok());
  // "adapt" takes only its words; the regret rule's horizon must be positive.
  EXPECT_FALSE(MakePolicy("lru+sieve(adapt=ghosts)", ctx).ok());
  EXPECT_FALSE(MakePolicy("lru+sieve(adapt=ghost,horizon=0)", ctx).ok());
  EXPECT_TRUE(MakePolicy("lru+sieve(adapt=true)", ctx).ok());
  EXPECT_TRUE(MakePolicy("lru+sieve(adapt=ghost,budget=8,horizon=5000,start=0.25)", ctx).ok());
}

TEST(RegretTunerTest, ComeBacksRaiseWastesLowerAtTheBudgetsWeight) {
  RegretConfig c;
  c.budget = 4;
  c.step = 0.125;
  ASSERT_TRUE(c.Validate().ok());
  RegretTuner t(c);
  EXPECT_EQ(t.fraction(), 0.0);
  t.OnWaste();
  EXPECT_EQ(t.fraction(), 0.0);  // clamped
  for (int i = 0; i < 4; ++i) t.OnComeBack();
  EXPECT_DOUBLE_EQ(t.fraction(), 0.5);
  t.OnWaste();  // 0.125 * (1 + 1/4)
  EXPECT_DOUBLE_EQ(t.fraction(), 0.5 - 0.15625);
  for (int i = 0; i < 20; ++i) t.OnComeBack();
  EXPECT_EQ(t.fraction(), 1.0);  // clamped
  EXPECT_EQ(t.comebacks(), 24u);
  EXPECT_EQ(t.wastes(), 2u);
  c.budget = 0;
  EXPECT_FALSE(c.Validate().ok());
  c.budget = 1;
  c.step = 0;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(GhostSieveTest, BeatsThePaperSieveOnAMovingHotSpot) {
  const HotSpotHits h = OnMovingHotSpot("lru+sieve(adapt=ghost)");
  // Every block of a phase comes back: the come-backs drive the fraction up within a phase.
  EXPECT_GT(h.adaptive, h.fixed + (h.all - h.fixed) / 2)
      << "fixed " << h.fixed << " ghost " << h.adaptive << " lru " << h.all;
}

TEST(GhostSieveTest, AdmittedBlocksReadAgainAreNotWastes) {
  SieveConfig c = testing::Sieve(2, 64);
  c.adapt = SieveConfig::Adapt::kGhost;
  c.regret.initial = 1.0;  // every first miss admitted
  c.horizon = 10;
  ASSERT_TRUE(c.Validate().ok());
  SieveAdmission s(c);
  // Blocks 0..4 admitted at their first miss and read (a hit) within the horizon: no waste.
  for (uint64_t b = 0; b < 5; ++b) {
    s.OnAccess(Read(b), false);
    EXPECT_TRUE(s.Admit(Read(b)));
  }
  for (uint64_t b = 0; b < 5; ++b) s.OnAccess(Read(b), true);
  for (uint64_t i = 0; i < 20; ++i) s.OnAccess(Read(1000 + i), true);  // time passes
  std::vector<VdiStats> rows(1);
  s.AnnotateVdiStats(absl::MakeSpan(rows));
  EXPECT_EQ(rows[0].admit_first, 1.0);
  // Block 9 admitted and never read again: a waste once 10 accesses have passed.
  s.OnAccess(Read(9), false);
  EXPECT_TRUE(s.Admit(Read(9)));
  for (uint64_t i = 0; i < 9; ++i) s.OnAccess(Read(2000 + i), false);
  s.AnnotateVdiStats(absl::MakeSpan(rows));
  EXPECT_EQ(rows[0].admit_first, 1.0);
  s.OnAccess(Read(3000), false);
  s.AnnotateVdiStats(absl::MakeSpan(rows));
  const double waste = (1.0 / 128) * (1 + 1.0 / 4);
  EXPECT_DOUBLE_EQ(rows[0].admit_first, 1.0 - waste);
  // Block 20 admitted, then missed again before any read hit (it left the cache unpaid): a waste
  // at once, not at the horizon.
  s.OnAccess(Read(20), false);
  EXPECT_TRUE(s.Admit(Read(20)));
  s.OnAccess(Read(20), false);
  s.Admit(Read(20));
  s.AnnotateVdiStats(absl::MakeSpan(rows));
  EXPECT_DOUBLE_EQ(rows[0].admit_first, 1.0 - 2 * waste);
}

}  // namespace
}  // namespace ringcache::policy
