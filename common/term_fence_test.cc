#include "common/term_fence.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace ringcache {
namespace {

TEST(TermFenceTest, OlderTermsAreRefusedNewerOnesKeptBeforeTheyAreTaken) {
  absl::Mutex mu;
  std::atomic<uint64_t> held{0};
  std::vector<uint64_t> kept;
  bool fail = false;
  auto keep = [&](uint64_t t) {
    if (fail) return absl::DataLossError("disk gone");
    kept.push_back(t);
    return absl::OkStatus();
  };
  EXPECT_TRUE(ObserveTerm(0, "node", &mu, &held, keep).ok()) << "no coordinator: passes";
  EXPECT_TRUE(ObserveTerm(5, "node", &mu, &held, keep).ok());
  EXPECT_EQ(held.load(), 5u);
  EXPECT_TRUE(ObserveTerm(5, "node", &mu, &held, keep).ok()) << "the same term again";
  EXPECT_EQ(kept, std::vector<uint64_t>{5}) << "kept once";
  const absl::Status stale = ObserveTerm(4, "cache node", &mu, &held, keep);
  EXPECT_TRUE(IsKind(stale, ErrorKind::kStaleTerm)) << stale;
  EXPECT_EQ(std::string(stale.message()),
            "stale coordinator term 4: this cache node has seen term 5 (a newer coordinator "
            "took over)");
  EXPECT_TRUE(ObserveTerm(0, "node", &mu, &held, keep).ok()) << "0 passes after a term, too";
  fail = true;
  EXPECT_EQ(ObserveTerm(9, "node", &mu, &held, keep).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(held.load(), 5u) << "a term that could not be kept is not taken";
}

}  // namespace
}  // namespace ringcache
