// EtcdClient against a real etcd started by the test (EtcdTestServer): KV, transactions, leases,
// watches, compaction, failover between endpoints and an etcd restart. Skips without etcd.
#include "membership/etcd_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "membership/etcd_test_server.h"
#include "membership/testing/etcd_fixture.h"

namespace ringcache::membership {
namespace {

// Polls `cond` every 20 ms until it holds or `timeout` passes; returns its last value.
bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// Collects what a Watch delivers.
class EventLog {
 public:
  EtcdClient::EventsCallback OnEvents() {
    return [this](const std::vector<Event>& events, int64_t revision) {
      absl::MutexLock l(&mu_);
      for (const Event& e : events) events_.push_back(e);
      revisions_.push_back(revision);
    };
  }
  EtcdClient::CompactedCallback OnCompacted() {
    return [this](int64_t rev) {
      absl::MutexLock l(&mu_);
      compacted_at_ = rev;
    };
  }
  std::vector<Event> events() const {
    absl::MutexLock l(&mu_);
    return events_;
  }
  std::vector<int64_t> revisions() const {
    absl::MutexLock l(&mu_);
    return revisions_;
  }
  int64_t compacted_at() const {
    absl::MutexLock l(&mu_);
    return compacted_at_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> revisions_ ABSL_GUARDED_BY(mu_);
  int64_t compacted_at_ ABSL_GUARDED_BY(mu_) = 0;
};

class EtcdClientTest : public testing::EtcdFixture {
 protected:

  static std::unique_ptr<EtcdClient> NewClient(std::vector<std::string> endpoints,
                                               absl::Duration call_timeout = absl::Seconds(10)) {
    EtcdClient::Options options;
    options.endpoints = std::move(endpoints);
    options.dial_timeout = absl::Milliseconds(300);
    options.call_timeout = call_timeout;
    auto client = EtcdClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
};

TEST(EtcdClientOptionsTest, ValidateNamesTheProblem) {
  EtcdClient::Options o;
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
  o.endpoints = {"https://127.0.0.1:2379"};
  EXPECT_NE(o.Validate().message().find("TLS"), absl::string_view::npos) << o.Validate();
  o.endpoints = {"127.0.0.1"};
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
  o.endpoints = {"http://127.0.0.1:2379/", "10.0.0.2:2379"};
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.backoff_max = absl::Milliseconds(1);
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
}

TEST(EtcdClientOptionsTest, PrefixRangeEnd) {
  EXPECT_EQ(EtcdClient::PrefixRangeEnd("/a/"), "/a0");
  EXPECT_EQ(EtcdClient::PrefixRangeEnd("ab"), "ac");
  EXPECT_EQ(EtcdClient::PrefixRangeEnd("a\xff"), "b");
  EXPECT_EQ(EtcdClient::PrefixRangeEnd("\xff\xff"), std::string(1, '\0'));
  EXPECT_EQ(EtcdClient::PrefixRangeEnd(""), std::string(1, '\0'));
}

TEST_F(EtcdClientTest, PutGetPrefixDelete) {
  auto r1 = client_->Put("/t/a", "1");
  ASSERT_TRUE(r1.ok()) << r1.status();
  auto r2 = client_->Put("/t/b", "2");
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_GT(*r2, *r1);
  ASSERT_TRUE(client_->Put("/t/b", "22").ok());
  ASSERT_TRUE(client_->Put("/u/c", "3").ok());

  auto a = client_->Get("/t/a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->value, "1");
  EXPECT_EQ((*a)->create_revision, *r1);
  EXPECT_EQ((*a)->mod_revision, *r1);
  EXPECT_EQ((*a)->version, 1);
  EXPECT_EQ((*a)->lease, 0);
  auto missing = client_->Get("/t/zzz");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());

  auto range = client_->GetPrefix("/t/");
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->kvs.size(), 2u);
  EXPECT_EQ(range->kvs[0].key, "/t/a");
  EXPECT_EQ(range->kvs[1].key, "/t/b");
  EXPECT_EQ(range->kvs[1].value, "22");
  EXPECT_EQ(range->kvs[1].version, 2);
  EXPECT_GE(range->revision, range->kvs[1].mod_revision);

  auto del = client_->Delete("/t/a");
  ASSERT_TRUE(del.ok()) << del.status();
  EXPECT_EQ(del->deleted, 1);
  EXPECT_EQ(client_->Delete("/t/a")->deleted, 0);
  auto delp = client_->DeletePrefix("/t/");
  ASSERT_TRUE(delp.ok()) << delp.status();
  EXPECT_EQ(delp->deleted, 1);
  EXPECT_TRUE(client_->GetPrefix("/t/")->kvs.empty());
  EXPECT_TRUE(client_->Get("/u/c")->has_value());  // outside the prefix
}

TEST_F(EtcdClientTest, TxnCompares) {
  // Create-if-missing: succeeds once.
  auto t1 = client_->Txn({TxnCompare::KeyMissing("/x/lock")}, {TxnOp::Put("/x/lock", "me")});
  ASSERT_TRUE(t1.ok()) << t1.status();
  EXPECT_TRUE(t1->succeeded);
  auto t2 = client_->Txn({TxnCompare::KeyMissing("/x/lock")}, {TxnOp::Put("/x/lock", "other")},
                         {TxnOp::Put("/x/lost", "1")});
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_FALSE(t2->succeeded);
  EXPECT_EQ((*client_->Get("/x/lock"))->value, "me");
  EXPECT_TRUE(client_->Get("/x/lost")->has_value());  // the else branch ran
  EXPECT_GT(t2->revision, t1->revision);

  // Compare-and-swap on mod_revision and on value.
  const KeyValue lock = **client_->Get("/x/lock");
  EXPECT_EQ(lock.mod_revision, t1->revision);
  auto cas_old = client_->Txn({TxnCompare::ModRevisionIs("/x/lock", lock.mod_revision - 1)},
                              {TxnOp::Put("/x/lock", "no")});
  EXPECT_FALSE(cas_old->succeeded);
  auto cas = client_->Txn({TxnCompare::ModRevisionIs("/x/lock", lock.mod_revision),
                           TxnCompare::ValueIs("/x/lock", "me"),
                           TxnCompare::CreateRevisionIs("/x/lock", lock.create_revision)},
                          {TxnOp::Put("/x/lock", "me2"), TxnOp::Delete("/x/lost")});
  ASSERT_TRUE(cas.ok()) << cas.status();
  EXPECT_TRUE(cas->succeeded);
  EXPECT_EQ((*client_->Get("/x/lock"))->value, "me2");
  EXPECT_FALSE(client_->Get("/x/lost")->has_value());
  auto wipe = client_->Txn({}, {TxnOp::DeletePrefix("/x/")});
  ASSERT_TRUE(wipe.ok() && wipe->succeeded);
  EXPECT_TRUE(client_->GetPrefix("/x/")->kvs.empty());
}

TEST_F(EtcdClientTest, Leases) {
  auto lease = client_->LeaseGrant(5);
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_TRUE(client_->Put("/l/k", "v", *lease).ok());
  EXPECT_EQ((*client_->Get("/l/k"))->lease, *lease);
  auto ttl = client_->LeaseKeepAliveOnce(*lease);
  ASSERT_TRUE(ttl.ok()) << ttl.status();
  EXPECT_EQ(*ttl, 5);
  ASSERT_TRUE(client_->LeaseRevoke(*lease).ok());
  EXPECT_FALSE(client_->Get("/l/k")->has_value());  // revoking deletes attached keys
  EXPECT_TRUE(absl::IsNotFound(client_->LeaseKeepAliveOnce(*lease).status()));
  EXPECT_TRUE(absl::IsNotFound(client_->LeaseRevoke(*lease)));
  EXPECT_TRUE(absl::IsNotFound(client_->LeaseKeepAliveOnce(12345).status()));
}

TEST_F(EtcdClientTest, WatchDeliversPutsAndDeletesInOrder) {
  EventLog log;
  auto watch = client_->WatchPrefix("/w/", 0, log.OnEvents(), log.OnCompacted());
  // A watch "from now" first pins now to a revision; every write after that is delivered.
  ASSERT_TRUE(WaitFor([&] { return watch->next_revision() > 0; }));
  const int64_t pinned = watch->next_revision();
  const int64_t r1 = *client_->Put("/w/a", "1");
  EXPECT_LE(pinned, r1);
  const int64_t r2 = *client_->Put("/w/b", "2");
  ASSERT_TRUE(client_->Put("/other", "ignored").ok());
  const int64_t r3 = client_->Delete("/w/a")->revision;
  ASSERT_TRUE(WaitFor([&] { return log.events().size() >= 3; }));
  const std::vector<Event> ev = log.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].type, Event::Type::kPut);
  EXPECT_EQ(ev[0].kv.key, "/w/a");
  EXPECT_EQ(ev[0].kv.mod_revision, r1);
  EXPECT_EQ(ev[1].kv.value, "2");
  EXPECT_EQ(ev[1].kv.mod_revision, r2);
  EXPECT_EQ(ev[2].type, Event::Type::kDelete);
  EXPECT_EQ(ev[2].kv.key, "/w/a");
  EXPECT_EQ(ev[2].kv.mod_revision, r3);
  const std::vector<int64_t> revs = log.revisions();
  EXPECT_TRUE(std::is_sorted(revs.begin(), revs.end()));
  EXPECT_EQ(revs.back(), r3);
  EXPECT_EQ(watch->next_revision(), r3 + 1);

  // A second watch from a past revision replays history.
  EventLog replay;
  auto w2 = client_->WatchPrefix("/w/", r1, replay.OnEvents(), replay.OnCompacted());
  ASSERT_TRUE(WaitFor([&] { return replay.events().size() >= 3; }));
  EXPECT_EQ(replay.events()[0].kv.mod_revision, r1);
}

TEST_F(EtcdClientTest, WatchFromCompactedRevisionReportsCompaction) {
  const int64_t first = *client_->Put("/c/k", "1");
  ASSERT_TRUE(client_->Put("/c/k", "2").ok());
  const int64_t last = *client_->Put("/c/k", "3");
  ASSERT_TRUE(client_->Compact(last).ok());
  EventLog log;
  auto watch = client_->WatchPrefix("/c/", first, log.OnEvents(), log.OnCompacted());
  ASSERT_TRUE(WaitFor([&] { return log.compacted_at() != 0; }));
  EXPECT_EQ(log.compacted_at(), last);
  EXPECT_TRUE(watch->compacted());
  EXPECT_TRUE(log.events().empty());
  // Compacting an already compacted revision is an error (kOutOfRange), not a retry.
  EXPECT_FALSE(client_->Compact(first).ok());
}

TEST_F(EtcdClientTest, RotatesPastADeadEndpoint) {
  auto port = EtcdTestServer::FreePort();  // nothing listens there
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string dead_endpoint = "127.0.0.1:" + std::to_string(*port);
  auto client = NewClient({dead_endpoint, "http://" + server_->endpoint()});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client->Put("/r/k", std::to_string(i)).ok());
  }
  EXPECT_EQ((*client->Get("/r/k"))->value, "2");
}

TEST_F(EtcdClientTest, CallsDuringAnOutageFinishAfterRestartAndTheWatchResumes) {
  EventLog log;
  const int64_t r0 = *client_->Put("/o/before", "1");
  auto watch = client_->WatchPrefix("/o/", r0, log.OnEvents(), log.OnCompacted());
  ASSERT_TRUE(WaitFor([&] { return !log.events().empty(); }));

  server_->Kill();
  // A call with a short deadline gives up with kUnavailable...
  auto quick = NewClient({server_->endpoint()}, absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsUnavailable(quick->Get("/o/before").status()));
  // ...one with a long deadline blocks until etcd is back.
  absl::Status put_status = absl::UnknownError("not run");
  std::thread writer([&] { put_status = client_->Put("/o/during", "2").status(); });
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_TRUE(server_->Restart().ok());
  writer.join();
  EXPECT_TRUE(put_status.ok()) << put_status;
  EXPECT_EQ((*client_->Get("/o/during"))->value, "2");

  // The watch reconnected and resumed without a gap or a duplicate.
  ASSERT_TRUE(client_->Put("/o/after", "3").ok());
  ASSERT_TRUE(WaitFor([&] { return log.events().size() >= 3; }));
  const std::vector<Event> ev = log.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kv.key, "/o/before");
  EXPECT_EQ(ev[1].kv.key, "/o/during");
  EXPECT_EQ(ev[2].kv.key, "/o/after");
  EXPECT_EQ(log.compacted_at(), 0);
}

TEST_F(EtcdClientTest, DestroyingAWatchWhileEtcdIsDownReturns) {
  EventLog log;
  auto watch = client_->WatchPrefix("/d/", 0, log.OnEvents(), log.OnCompacted());
  server_->Kill();
  absl::SleepFor(absl::Milliseconds(300));  // let it fail and enter its reconnect loop
  watch.reset();                            // must not hang
  SUCCEED();
}

}  // namespace
}  // namespace ringcache::membership
