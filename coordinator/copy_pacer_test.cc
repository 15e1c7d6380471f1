#include "coordinator/copy_pacer.h"

#include <gtest/gtest.h>

namespace ringcache::coordinator {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(CopyPacerTest, FullRateWhileNoClientIsServedLowerWhileOneIs) {
  uint64_t ops = 7;
  CopyPacer p({.idle_mb_s = 64,
               .busy_mb_s = 16,
               .sample = absl::Milliseconds(500),
               .slack = absl::ZeroDuration()},
              [&ops] { return std::optional<uint64_t>(ops); });
  // The first sample has nothing to compare with: busy until a second one shows no change.
  EXPECT_EQ(p.After(1'000'000, kT0), absl::Microseconds(62'500));  // 1 MB at 16 MB/s
  EXPECT_TRUE(p.busy());
  // Half a second later, no client request in between: idle, 64 MB/s. The earlier debt is paid.
  absl::Time t = kT0 + absl::Milliseconds(500);
  EXPECT_EQ(p.After(1'000'000, t), absl::Microseconds(15'625));
  EXPECT_FALSE(p.busy());
  EXPECT_DOUBLE_EQ(p.limit_bytes_per_s(), 64e6);
  // Clients again: the next sample sees the count grow.
  ops += 3;
  t += absl::Milliseconds(500);
  EXPECT_EQ(p.After(1'000'000, t), absl::Microseconds(62'500));
  EXPECT_TRUE(p.busy());
  // Within one sample interval the decision stands and the waits add up.
  EXPECT_EQ(p.After(1'000'000, t), absl::Microseconds(125'000));
}

TEST(CopyPacerTest, UnknownLoadIsBusyAndZeroMeansUnthrottled) {
  CopyPacer unknown({.idle_mb_s = 64, .busy_mb_s = 8, .slack = absl::ZeroDuration()},
                    [] { return std::nullopt; });
  unknown.After(0, kT0);
  EXPECT_EQ(unknown.After(8'000'000, kT0 + absl::Seconds(1)), absl::Seconds(1));
  EXPECT_TRUE(unknown.busy());

  CopyPacer free({.idle_mb_s = 0, .busy_mb_s = 0}, [] { return std::optional<uint64_t>(1); });
  EXPECT_EQ(free.After(1'000'000'000, kT0), absl::ZeroDuration());
  // A busy rate of 0 keeps the idle rate while clients are served.
  uint64_t ops = 0;
  CopyPacer same({.idle_mb_s = 10, .busy_mb_s = 0, .slack = absl::ZeroDuration()},
                 [&ops] { return std::optional<uint64_t>(++ops); });
  EXPECT_EQ(same.After(10'000'000, kT0), absl::Seconds(1));
}

TEST(CopyPacerTest, APauseEarnsNoBurstBeyondTheSlack) {
  CopyPacer p({.idle_mb_s = 1, .busy_mb_s = 1, .slack = absl::Milliseconds(20)},
              [] { return std::optional<uint64_t>(0); });
  EXPECT_EQ(p.After(1'000'000, kT0), absl::Milliseconds(980));
  // Ten seconds without copying (the source was down): the next MB waits all but the slack.
  EXPECT_EQ(p.After(1'000'000, kT0 + absl::Seconds(11)), absl::Milliseconds(980));
  // The time a copy call takes is paid from the slack: 1 MB per second is held exactly.
  absl::Time now = kT0 + absl::Seconds(11) + absl::Milliseconds(980);
  for (int i = 0; i < 5; ++i) {
    now += absl::Milliseconds(15);  // the call itself
    const absl::Duration wait = p.After(1'000'000, now);
    EXPECT_EQ(wait, absl::Milliseconds(985)) << i;
    now += wait;
  }
}

}  // namespace
}  // namespace ringcache::coordinator
