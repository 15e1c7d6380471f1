// The coordinator's election (coordinator/election.h) against a real etcd started by the test:
// one leader and only its guarded writes commit, a leader whose lease lapses steps down before
// another is elected, and a leader that cannot lead resigns. Skips without etcd.
#include "coordinator/election.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "membership/testing/etcd_fixture.h"

namespace ringcache::coordinator {
namespace {

using membership::Role;
using membership::TxnOp;
using membership::testing::Node;
using membership::testing::WaitFor;

class ElectionTest : public membership::testing::EtcdFixture {};

// Records every leadership change of one candidate.
struct LeadLog {
  absl::Mutex mu;
  std::vector<std::pair<bool, int64_t>> changes ABSL_GUARDED_BY(mu);
  bool refuse ABSL_GUARDED_BY(mu) = false;  // cannot lead: resign every term
  Election::Callback Callback() {
    return [this](bool leader, int64_t term) {
      absl::MutexLock l(&mu);
      changes.push_back({leader, term});
      return !refuse;
    };
  }
  size_t size() {
    absl::MutexLock l(&mu);
    return changes.size();
  }
};

TEST_F(ElectionTest, OneCandidateLeadsAndOnlyItsGuardedWritesCommit) {
  auto reg1 = Register(Node(Role::kGateway, 1));
  auto reg2 = Register(Node(Role::kGateway, 2));
  ASSERT_TRUE(reg1.ok() && reg2.ok());
  Election::Options o;
  o.prefix = "/rc";
  o.poll = absl::Milliseconds(50);
  LeadLog log1, log2;
  auto e1 = Election::Start(client_.get(), reg1->get(), o, log1.Callback());
  auto e2 = Election::Start(client_.get(), reg2->get(), o, log2.Callback());
  ASSERT_TRUE(WaitFor([&] { return e1->leader() || e2->leader(); }));
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_NE(e1->leader(), e2->leader()) << "exactly one leader";
  Election* leader = e1->leader() ? e1.get() : e2.get();
  Election* other = e1->leader() ? e2.get() : e1.get();
  const uint32_t leader_id = e1->leader() ? 1 : 2;
  auto info = ReadLeader(client_.get(), "/rc");
  ASSERT_TRUE(info.ok() && info->has_value()) << info.status();
  EXPECT_EQ((*info)->record.id, leader_id);
  EXPECT_EQ((*info)->term, leader->term());
  EXPECT_EQ(other->term(), 0);
  auto w = client_->Txn({leader->LeaderGuard()}, {TxnOp::Put("/rc/rings/cache", "x")});
  ASSERT_TRUE(w.ok() && w->succeeded) << "the leader's guarded write commits";
  w = client_->Txn({other->LeaderGuard()}, {TxnOp::Put("/rc/rings/cache", "y")});
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->succeeded) << "a candidate that does not lead cannot write";
  EXPECT_EQ((*client_->Get("/rc/rings/cache"))->value, "x");
}

// `ringcachectl restore` (tools/ctl/restore.h) puts the restore mark and deletes the leader's
// key: the leader steps down, nobody is elected while the mark stays, and once it is gone a
// leader is elected again at a later term.
TEST_F(ElectionTest, NoLeaderIsElectedWhileTheRestoreMarkIsThere) {
  auto reg1 = Register(Node(Role::kGateway, 1));
  ASSERT_TRUE(reg1.ok());
  Election::Options o;
  o.prefix = "/rc";
  o.poll = absl::Milliseconds(50);
  LeadLog log1;
  auto e1 = Election::Start(client_.get(), reg1->get(), o, log1.Callback());
  ASSERT_TRUE(WaitFor([&] { return e1->leader(); }));
  const int64_t term1 = e1->term();
  ASSERT_TRUE(client_->Put(RestoreMarkKey("/rc"), "restoring").ok());
  ASSERT_TRUE(client_->Delete(CoordinatorKey("/rc")).ok());
  ASSERT_TRUE(WaitFor([&] { return !e1->leader(); })) << "the leader steps down";
  absl::SleepFor(absl::Milliseconds(500));  // ten looks: none may take the key
  EXPECT_FALSE(e1->leader());
  auto none = ReadLeader(client_.get(), "/rc");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value()) << "elected while the restore mark was there";
  ASSERT_TRUE(client_->Delete(RestoreMarkKey("/rc")).ok());
  ASSERT_TRUE(WaitFor([&] { return e1->leader(); }));
  EXPECT_GT(e1->term(), term1);
}

TEST_F(ElectionTest, ALeaderWhoseLeaseLapsesStepsDownAndAnotherTakesOver) {
  auto reg1 = Register(Node(Role::kGateway, 1));
  ASSERT_TRUE(reg1.ok());
  Election::Options o;
  o.prefix = "/rc";
  o.poll = absl::Milliseconds(50);
  LeadLog log1, log2;
  auto e1 = Election::Start(client_.get(), reg1->get(), o, log1.Callback());
  ASSERT_TRUE(WaitFor([&] { return e1->leader(); }));
  const int64_t term1 = e1->term();
  const auto old_guard = e1->LeaderGuard();
  auto reg2 = Register(Node(Role::kGateway, 2));
  ASSERT_TRUE(reg2.ok());
  auto e2 = Election::Start(client_.get(), reg2->get(), o, log2.Callback());
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(e2->leader()) << "the leader keeps the key while its lease is renewed";

  (*reg1)->StopKeepAliveForTest();  // as if the leader hung or was cut off from etcd
  ASSERT_TRUE(WaitFor([&] { return e2->leader(); }));
  EXPECT_FALSE(e1->leader()) << "its lease window closed before the other could be elected";
  {
    absl::MutexLock l(&log1.mu);
    EXPECT_EQ(log1.changes.size(), 2u)
        << "the old leader stepped down (its window closed) before the other was elected";
  }
  EXPECT_GT(e2->term(), term1);
  ASSERT_TRUE(WaitFor([&] { return log1.size() == 2; }));
  {
    absl::MutexLock l(&log1.mu);
    EXPECT_EQ(log1.changes[0], std::make_pair(true, term1));
    EXPECT_EQ(log1.changes[1], std::make_pair(false, term1));
  }
  auto w = client_->Txn({old_guard}, {TxnOp::Put("/rc/rings/cache", "stale")});
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->succeeded) << "the old term's guard no longer holds";

  // A leader that stops campaigning hands over at once (its key is deleted, not left to expire).
  auto reg3 = Register(Node(Role::kGateway, 3));
  ASSERT_TRUE(reg3.ok());
  LeadLog log3;
  auto e3 = Election::Start(client_.get(), reg3->get(), o, log3.Callback());
  e2.reset();
  ASSERT_TRUE(WaitFor([&] { return e3->leader(); }, absl::Milliseconds(1500)));
  auto info = ReadLeader(client_.get(), "/rc");
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->record.id, 3u);
}

TEST_F(ElectionTest, ALeaderThatCannotLeadResignsAndAnotherTakesOver) {
  Election::Options o;
  o.prefix = "/rc";
  o.poll = absl::Milliseconds(50);
  o.resign_backoff = absl::Seconds(30);
  auto reg1 = Register(Node(Role::kGateway, 1));
  ASSERT_TRUE(reg1.ok());
  LeadLog log1, log2;
  {
    absl::MutexLock l(&log1.mu);
    log1.refuse = true;  // its takeover fails
  }
  auto e1 = Election::Start(client_.get(), reg1->get(), o, log1.Callback());
  ASSERT_TRUE(WaitFor([&] { return log1.size() >= 2; }));
  {
    absl::MutexLock l(&log1.mu);
    EXPECT_TRUE(log1.changes[0].first);
    EXPECT_EQ(log1.changes[1], std::make_pair(false, log1.changes[0].second));
  }
  EXPECT_FALSE(e1->leader());
  auto reg2 = Register(Node(Role::kGateway, 2));
  ASSERT_TRUE(reg2.ok());
  auto e2 = Election::Start(client_.get(), reg2->get(), o, log2.Callback());
  ASSERT_TRUE(WaitFor([&] { return e2->leader(); }))
      << "the resigned key is gone and the other candidate takes the term";
  auto info = ReadLeader(client_.get(), "/rc");
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->record.id, 2u);
  EXPECT_EQ(log1.size(), 2u) << "the resigned candidate does not campaign during its backoff";
}

}  // namespace
}  // namespace ringcache::coordinator
