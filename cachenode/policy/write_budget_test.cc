#include "cachenode/policy/write_budget.h"

#include <memory>

#include "cachenode/policy/registry.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

constexpr uint64_t kSecond = 1'000'000;

Access Miss(uint64_t block, uint64_t now_us, Op op = Op::kRead) {
  Access a;
  a.key = BlockKey{1, block};
  a.op = op;
  a.now_us = now_us;
  return a;
}

WriteBudgetConfig Config(double rate, double burst) {
  WriteBudgetConfig c;
  c.blocks_per_second = rate;
  c.burst_seconds = burst;
  c.doorkeeper = 8;
  return c;
}

TEST(WriteBudgetTest, ConfigIsValidated) {
  EXPECT_TRUE(Config(10, 60).Validate().ok());
  EXPECT_FALSE(Config(0, 60).Validate().ok());
  EXPECT_FALSE(Config(10, 0).Validate().ok());
  WriteBudgetConfig c = Config(10, 60);
  c.tight_below = 1.5;
  EXPECT_FALSE(c.Validate().ok());
  c = Config(10, 60);
  c.doorkeeper = 0;
  EXPECT_FALSE(c.Validate().ok());
}

// A bucket of 100 blocks (10 blocks/s, 10 s of burst) on an injected clock: open while at least
// half full, tight below (a second miss of a key gets in), closed when spent, open again once the
// rate has refilled it.
TEST(WriteBudgetTest, TightensBeforeTheBudgetIsSpentAndReopensAsItRefills) {
  WriteBudget b(Config(10, 10));
  uint64_t t = 5 * kSecond;
  EXPECT_FALSE(b.GoAround(Miss(1, t)));
  EXPECT_EQ(b.snapshot().state, BudgetState::kOpen);
  b.Spend(49, t);
  EXPECT_EQ(b.snapshot().state, BudgetState::kOpen);  // 51 of 100 left
  b.Spend(2, t);
  EXPECT_EQ(b.snapshot().state, BudgetState::kTight);
  EXPECT_TRUE(b.GoAround(Miss(7, t)));    // first miss: around
  EXPECT_TRUE(b.GoAround(Miss(8, t, Op::kWrite)));
  EXPECT_FALSE(b.GoAround(Miss(7, t)));   // missed again while remembered: in
  EXPECT_TRUE(b.GoAround(Miss(7, t)));    // and forgotten once let in
  b.Spend(49, t);
  EXPECT_EQ(b.snapshot().state, BudgetState::kClosed);
  EXPECT_TRUE(b.GoAround(Miss(8, t)));    // closed: remembered or not, around
  EXPECT_TRUE(b.GoAround(Miss(8, t)));
  WriteBudget::Snapshot s = b.snapshot();
  EXPECT_EQ(s.written_blocks, 100u);
  EXPECT_EQ(s.around_reads, 4u);
  EXPECT_EQ(s.around_writes, 1u);
  EXPECT_EQ(s.let_in, 1u);
  EXPECT_LE(s.fill, 0);
  // 4 s refill 40 blocks: tight again; 7 s more, past half: open.
  t += 4 * kSecond;
  EXPECT_TRUE(b.GoAround(Miss(9, t)));
  EXPECT_EQ(b.snapshot().state, BudgetState::kTight);
  t += 7 * kSecond;
  EXPECT_FALSE(b.GoAround(Miss(10, t)));
  EXPECT_EQ(b.snapshot().state, BudgetState::kOpen);
  // Never more than full, however long the idle time.
  t += 3600 * kSecond;
  EXPECT_FALSE(b.GoAround(Miss(11, t)));
  EXPECT_DOUBLE_EQ(b.snapshot().fill, 1.0);
}

TEST(WriteBudgetTest, DebtIsBoundedAndAClockThatGoesBackIsIgnored) {
  WriteBudget b(Config(1, 10));
  b.Spend(1000, 100 * kSecond);
  EXPECT_DOUBLE_EQ(b.snapshot().fill, -1.0);  // at most one bucket of debt
  b.Spend(0, 50 * kSecond);                   // earlier: no refill, no harm
  EXPECT_DOUBLE_EQ(b.snapshot().fill, -1.0);
  b.Spend(0, 110 * kSecond);                  // 10 s: half the debt paid
  EXPECT_DOUBLE_EQ(b.snapshot().fill, 0.0);
  EXPECT_EQ(b.snapshot().state, BudgetState::kClosed);
}

TEST(WriteBudgetTest, RateFollowsTheWritesOverTime) {
  WriteBudget b(Config(1000, 10));
  for (uint64_t s = 0; s <= 4 * 3600; ++s) b.Spend(20, s * kSecond);
  EXPECT_NEAR(b.snapshot().rate_blocks_per_s, 20, 1);
}

TEST(WriteBudgetTest, TheDoorkeeperRemembersOnlyTheLatestKeys) {
  WriteBudget b(Config(10, 10));
  b.Spend(60, 0);  // tight
  for (uint64_t k = 0; k < 20; ++k) EXPECT_TRUE(b.GoAround(Miss(k, 0)));
  EXPECT_TRUE(b.GoAround(Miss(0, 0)));    // pushed out by the 8 keys after it: around again
  EXPECT_FALSE(b.GoAround(Miss(19, 0)));  // recent: in
}

// The budget in a driver (PolicyContext::write_budget): a stream of read misses at 1,000 blocks
// per second for ten minutes fills the SSD at the budget's 50 blocks/s (plus one bucket), against
// every miss without it; hits are served and still write; write misses go write-around.
TEST(WriteBudgetTest, ADriverWithABudgetHoldsItsSsdWritesToTheRate) {
  auto run = [](std::shared_ptr<WriteBudget> budget, uint64_t* around) {
    PolicyContext ctx;
    ctx.capacity_blocks = 1000;
    ctx.write_budget = budget;
    auto p = MakePolicy("vbq+lru+sieve(threshold=1)", ctx);
    EXPECT_TRUE(p.ok()) << p.status();
    Outcome out;
    uint64_t writes = 0;
    *around = 0;
    for (uint64_t i = 0; i < 600'000; ++i) {
      Access a = Miss(i % 50'000, i * 1000);  // 1,000 per second
      (*p)->OnAccess(a, &out);
      writes += out.ssd_writes;
      *around += out.bypassed;
      if (budget != nullptr) budget->Spend(out.ssd_writes, a.now_us);
    }
    return writes;
  };
  uint64_t around = 0;
  const uint64_t free = run(nullptr, &around);
  EXPECT_EQ(around, 0u);
  auto budget = std::make_shared<WriteBudget>(Config(50, 60));  // a bucket of 3,000
  const uint64_t held = run(budget, &around);
  EXPECT_GT(free, 500'000u);
  EXPECT_LE(held, 50u * 600 + 3000);
  EXPECT_GT(held, 50u * 600 / 2);  // tight, not shut: it keeps admitting near the rate
  EXPECT_GT(around, 500'000u);
  EXPECT_EQ(budget->snapshot().written_blocks, held);

  // A hit is never sent around, even closed; a write miss goes write-around.
  PolicyContext ctx;
  ctx.capacity_blocks = 100;
  ctx.write_budget = std::make_shared<WriteBudget>(Config(1, 10));
  auto p = MakePolicy("lru", ctx);
  ASSERT_TRUE(p.ok());
  Outcome out;
  (*p)->OnAccess(Miss(1, 0), &out);
  EXPECT_TRUE(out.admitted);
  ctx.write_budget->Spend(100, 0);
  (*p)->OnAccess(Miss(1, 0, Op::kWrite), &out);
  EXPECT_EQ(out.hit, Tier::kSsd);
  EXPECT_EQ(out.ssd_writes, 1u);
  (*p)->OnAccess(Miss(2, 0, Op::kWrite), &out);
  EXPECT_TRUE(out.bypassed);
  EXPECT_EQ(out.ssd_writes, 0u);
}

TEST(WriteBudgetTest, PerVdiRulesKeepTheNodesBudget) {
  PolicyContext ctx;
  ctx.capacity_blocks = 100;
  ctx.write_budget = std::make_shared<WriteBudget>(Config(1, 10));
  auto p = MakePolicy("vbq+lru", ctx);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(SetVdiPolicy(p->get(), 1, "arc", ctx).ok());
  ctx.write_budget->Spend(100, 0);
  Outcome out;
  (*p)->OnAccess(Miss(5, 0), &out);
  EXPECT_TRUE(out.bypassed);
}

TEST(WriteBudgetTest, RatingsReadAsDriveWritesOrASizePerDay) {
  auto size = [](std::string_view t) -> absl::StatusOr<uint64_t> {
    if (t == "200GiB") return uint64_t{200} << 30;
    return absl::InvalidArgumentError("not a size");
  };
  const uint64_t drive = uint64_t{1} << 40;
  EXPECT_DOUBLE_EQ(*BudgetBytesPerDay("1dwpd", drive, size), static_cast<double>(drive));
  EXPECT_DOUBLE_EQ(*BudgetBytesPerDay(" 0.5 DWPD", drive, size), drive / 2.0);
  EXPECT_DOUBLE_EQ(*BudgetBytesPerDay("200GiB/day", drive, size), 200.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(*BudgetBytesPerDay("200GiB/d", drive, size), 200.0 * (1 << 30));
  for (const char* bad : {"", "1", "0dwpd", "-1dwpd", "xdwpd", "7TiB/day", "200GiB/week"}) {
    absl::StatusOr<double> r = BudgetBytesPerDay(bad, drive, size);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("1dwpd"), std::string::npos);
    }
  }
  EXPECT_FALSE(BudgetBytesPerDay("1dwpd", 0, size).ok());
  EXPECT_NEAR(BudgetBlocksPerSecond(86400.0 * 4096, 4096), 1.0, 1e-12);
}

}  // namespace
}  // namespace ringcache::policy
