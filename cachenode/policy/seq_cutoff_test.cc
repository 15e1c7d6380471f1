// Tests of SeqCutoffBypass (seq_cutoff.h).
#include "cachenode/policy/seq_cutoff.h"

#include "cachenode/policy/test_util.h"
#include "gtest/gtest.h"

namespace ringcache::policy {
namespace {

using testing::Read;
using testing::Write;

TEST(SeqCutoffTest, RunLongerThanTheCutoffBypasses) {
  SeqCutoffBypass s(SeqCutoffConfig{4, 8});
  for (uint64_t b = 100; b < 104; ++b) EXPECT_FALSE(s.Check(Read(b), false)) << b;
  EXPECT_TRUE(s.Check(Read(104), false));   // fifth block of the run
  EXPECT_TRUE(s.Check(Write(105), false));  // reads and writes alike
  EXPECT_FALSE(s.Check(Read(7), false));    // a random access is its own run
}

TEST(SeqCutoffTest, InterleavedStreamsAreTrackedApart) {
  SeqCutoffBypass s(SeqCutoffConfig{3, 8});
  // Two streams on different VDIs and one more on VDI 0, interleaved.
  int bypassed = 0;
  for (uint64_t i = 0; i < 5; ++i) {
    bypassed += s.Check(Read(1000 + i, 0), false);
    bypassed += s.Check(Read(1000 + i, 1), false);
    bypassed += s.Check(Read(5000 + i, 0), false);
  }
  EXPECT_EQ(bypassed, 6);  // blocks 4 and 5 of each of the three runs
}

TEST(SeqCutoffTest, StalestStreamIsForgottenWhenTableIsFull) {
  SeqCutoffBypass s(SeqCutoffConfig{1, 2});  // runs longer than 1 block bypass; 2 streams
  EXPECT_FALSE(s.Check(Read(10), false));  // A: run 1
  EXPECT_TRUE(s.Check(Read(11), false));   // A: run 2
  EXPECT_FALSE(s.Check(Read(50), false));  // B
  EXPECT_FALSE(s.Check(Read(90), false));  // C replaces A, the stalest
  EXPECT_FALSE(s.Check(Read(12), false));  // A was forgotten: a new run (replaces B)
  EXPECT_TRUE(s.Check(Read(91), false));   // C goes on
}

TEST(SeqCutoffConfigTest, Validate) {
  EXPECT_TRUE(SeqCutoffConfig{}.Validate().ok());
  EXPECT_FALSE((SeqCutoffConfig{0, 8}).Validate().ok());
  EXPECT_FALSE((SeqCutoffConfig{8, 0}).Validate().ok());
}

}  // namespace
}  // namespace ringcache::policy
