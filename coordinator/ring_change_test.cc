// The transition core alone: what a change may start from, the states it publishes, retries,
// and where it stops (attempts spent, a step refused as of an ended term, the term ended).
#include "coordinator/ring_change.h"

#include <cmath>

#include "common/errors.h"
#include "gtest/gtest.h"

namespace ringcache::coordinator {
namespace {

using Kind = RingChange::Kind;

CacheRingState At(uint64_t epoch, std::vector<uint32_t> removed = {}) {
  CacheRingState s;
  s.epoch = epoch;
  s.removed = std::move(removed);
  return s;
}

// Runs `c` to the end with `results` for its settle/handoff attempts (the last one repeats);
// returns the kinds of the steps taken.
std::vector<Step::Kind> RunChange(RingChange* c, const std::vector<absl::Status>& results,
                                  bool outcome_published = true) {
  std::vector<Step::Kind> kinds;
  size_t i = 0;
  for (Step s = c->next(); s.kind != Step::kDone; s = c->next()) {
    kinds.push_back(s.kind);
    absl::Status r;
    if (s.kind == Step::kSettle || s.kind == Step::kHandoff) {
      r = results[std::min(i++, results.size() - 1)];
    } else if (s.kind == Step::kPublishOutcome && !outcome_published) {
      r = absl::FailedPreconditionError("term ended");
    }
    c->Report(r);
  }
  return kinds;
}

TEST(RingChangeTest, RemovalPublishesHoldsSettlesAndTakesTheNodeOut) {
  auto c = RingChange::Begin(Kind::kRemoval, At(7), {1, 2, 3}, 2, 5, absl::Seconds(1));
  ASSERT_TRUE(c.ok()) << c.status();
  Step first = c->next();
  EXPECT_EQ(first.kind, Step::kPublish);
  EXPECT_EQ(first.state.epoch, 8u) << "a new owner never writes at the epoch before";
  EXPECT_EQ(first.state.removing, std::vector<uint32_t>{2});
  const auto kinds = RunChange(&*c, {absl::UnavailableError("busy"), absl::OkStatus()});
  EXPECT_EQ(kinds, (std::vector<Step::Kind>{Step::kPublish, Step::kDrain, Step::kSettle,
                                            Step::kPause, Step::kSettle, Step::kPublishOutcome}));
  EXPECT_TRUE(c->done());
  EXPECT_TRUE(c->status().ok());
  CacheRingState out = c->Outcome(At(9));
  EXPECT_EQ(out.epoch, 10u);
  EXPECT_EQ(out.removed, std::vector<uint32_t>{2});
  EXPECT_TRUE(out.removing.empty());
}

TEST(RingChangeTest, RefusesWhatCannotStart) {
  EXPECT_TRUE(absl::IsNotFound(
      RingChange::Begin(Kind::kRemoval, At(1), {1, 2}, 3, 1, absl::ZeroDuration()).status()));
  EXPECT_TRUE(absl::IsNotFound(
      RingChange::Begin(Kind::kRemoval, At(1, {2}), {1, 2}, 2, 1, absl::ZeroDuration()).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      RingChange::Begin(Kind::kRemoval, At(1, {2}), {1, 2}, 1, 1, absl::ZeroDuration()).status()))
      << "the last node stays";
  EXPECT_TRUE(absl::IsAlreadyExists(
      RingChange::Begin(Kind::kJoin, At(1), {1, 2}, 2, 1, absl::ZeroDuration()).status()));
  CacheRingState busy = At(1, {3});
  busy.removing = {1};
  EXPECT_TRUE(absl::IsFailedPrecondition(
      RingChange::Begin(Kind::kJoin, busy, {1, 2, 3}, 3, 1, absl::ZeroDuration()).status()));
  busy.removing.clear();
  busy.joining = 3;
  EXPECT_TRUE(absl::IsFailedPrecondition(
      RingChange::Begin(Kind::kRemoval, busy, {1, 2, 3}, 1, 1, absl::ZeroDuration()).status()));
}

TEST(RingChangeTest, JoinThatRunsOutOfAttemptsLeavesTheNodeOut) {
  auto c = RingChange::Begin(Kind::kJoin, At(4, {3}), {1, 2, 3}, 3, 3, absl::Seconds(1));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->next().state.joining, 3u);
  const auto kinds = RunChange(&*c, {absl::UnavailableError("node 1 kept 2 dirty blocks")});
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), Step::kHandoff), 3);
  EXPECT_TRUE(absl::IsUnavailable(c->status())) << c->status();
  CacheRingState out = c->Outcome(At(6, {3}));
  EXPECT_EQ(out.removed, std::vector<uint32_t>{3}) << "still out";
  EXPECT_EQ(out.joining, 0u);
  EXPECT_EQ(out.epoch, 7u);
}

TEST(RingChangeTest, StepRefusedAsOfAnEndedTermStopsAtOnce) {
  auto c = RingChange::Begin(Kind::kJoin, At(4, {3}), {1, 2, 3}, 3, 60, absl::Seconds(1));
  ASSERT_TRUE(c.ok());
  const auto kinds = RunChange(&*c, {TypedError(ErrorKind::kStaleTerm, "stale coordinator term 5")},
                               /*outcome_published=*/false);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), Step::kHandoff), 1) << "not retried";
  EXPECT_TRUE(absl::IsFailedPrecondition(c->status()));
  EXPECT_NE(c->status().message().find("term ended"), std::string::npos);
  EXPECT_FALSE(c->succeeded());
}

TEST(RingChangeTest, TermEndedWhileSettlingStopsWithoutRetry) {
  auto c = RingChange::Begin(Kind::kRemoval, At(4), {1, 2}, 1, 60, absl::Seconds(1));
  ASSERT_TRUE(c.ok());
  c->Report(absl::OkStatus());  // published
  c->Report(absl::OkStatus());  // drained
  EXPECT_EQ(c->next().kind, Step::kSettle);
  c->Report(absl::UnavailableError("data node 2 unreachable"), /*term_ended=*/true);
  EXPECT_EQ(c->next().kind, Step::kPublishOutcome);
}

TEST(RingChangeTest, FailedStartEndsWithNothingChanged) {
  auto c = RingChange::Begin(Kind::kRemoval, At(4), {1, 2}, 1, 60, absl::Seconds(1));
  ASSERT_TRUE(c.ok());
  c->Report(absl::UnavailableError("etcd down"));
  EXPECT_TRUE(c->done());
  EXPECT_TRUE(absl::IsUnavailable(c->status()));
  EXPECT_NE(c->status().message().find("cannot publish the removal of cache node 1"),
            std::string::npos);
}

TEST(RingChangeTest, ReweightHandsOffBothWaysAndSetsTheWeight) {
  CacheRingState now = At(4, {3});
  now.weights = {{1, 0.5, 8 << 20}};
  auto c = RingChange::Begin(Kind::kReweight, now, {1, 2, 3}, 2, 5, absl::Seconds(1),
                             {0, 2.5, 40 << 20});
  ASSERT_TRUE(c.ok()) << c.status();
  const Step first = c->next();
  EXPECT_EQ(first.state.epoch, 5u);
  EXPECT_EQ(first.state.reweighting, (CacheRingState::Weight{2, 2.5, 40 << 20}));
  EXPECT_EQ(first.state.joining, 0u);
  EXPECT_EQ(first.state.weights, now.weights) << "the ring keeps its weights until the outcome";
  // While it runs, nothing else starts.
  CacheRingState busy = first.state;
  EXPECT_TRUE(absl::IsFailedPrecondition(
      RingChange::Begin(Kind::kRemoval, busy, {1, 2, 3}, 1, 1, absl::ZeroDuration()).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      RingChange::Begin(Kind::kJoin, busy, {1, 2, 3}, 3, 1, absl::ZeroDuration()).status()));
  const auto kinds = RunChange(&*c, {absl::UnavailableError("node 1 kept 1 dirty block"),
                                     absl::OkStatus()});
  EXPECT_EQ(kinds, (std::vector<Step::Kind>{Step::kPublish, Step::kDrain, Step::kHandoff,
                                            Step::kPause, Step::kHandoff, Step::kPublishOutcome}));
  EXPECT_TRUE(c->status().ok()) << c->status();
  CacheRingState out = c->Outcome(first.state);
  EXPECT_EQ(out.epoch, 6u);
  EXPECT_EQ(out.reweighting, CacheRingState::Weight{});
  EXPECT_EQ(out.weights, (std::vector<CacheRingState::Weight>{{1, 0.5, 8 << 20},
                                                              {2, 2.5, 40 << 20}}));
  EXPECT_EQ(out.removed, std::vector<uint32_t>{3});
  // A second reweight of the same node replaces its weight.
  auto again = RingChange::Begin(Kind::kReweight, out, {1, 2, 3}, 2, 1, absl::ZeroDuration(),
                                 {0, 1, 16 << 20});
  ASSERT_TRUE(again.ok());
  RunChange(&*again, {absl::OkStatus()});
  EXPECT_EQ(again->Outcome(out).weights,
            (std::vector<CacheRingState::Weight>{{1, 0.5, 8 << 20}, {2, 1, 16 << 20}}));
}

TEST(RingChangeTest, ReweightThatFailsKeepsTheOldWeightAndRefusesBadOnes) {
  auto c = RingChange::Begin(Kind::kReweight, At(4), {1, 2}, 1, 2, absl::Seconds(1),
                             {0, 3, 1 << 30});
  ASSERT_TRUE(c.ok());
  RunChange(&*c, {absl::UnavailableError("cache node 2 does not answer")});
  EXPECT_TRUE(absl::IsUnavailable(c->status()));
  const CacheRingState out = c->Outcome(c->start());
  EXPECT_TRUE(out.weights.empty());
  EXPECT_EQ(out.reweighting.id, 0u);
  EXPECT_TRUE(absl::IsNotFound(RingChange::Begin(Kind::kReweight, At(1, {2}), {1, 2}, 2, 1,
                                                 absl::ZeroDuration(), {0, 2, 1})
                                   .status()))
      << "a node out of the ring has no weight in it";
  for (double bad : {0.0, -1.0, std::nan("")}) {
    EXPECT_TRUE(absl::IsInvalidArgument(RingChange::Begin(Kind::kReweight, At(1), {1, 2}, 2, 1,
                                                          absl::ZeroDuration(), {0, bad, 1})
                                            .status()))
        << bad;
  }
}

}  // namespace
}  // namespace ringcache::coordinator
