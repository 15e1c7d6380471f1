// Membership: node records and keys (pure), then NodeRegistration and MembershipWatcher against
// a real etcd started by the test (EtcdTestServer): lease expiry, watchers agreeing on epochs,
// fencing, and an etcd restart. Skips the etcd tests without etcd.
#include "membership/membership.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "membership/election.h"
#include "membership/etcd_test_server.h"

namespace ringcache::membership {
namespace {

bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

NodeRecord Node(Role role, uint32_t id) {
  NodeRecord r;
  r.role = role;
  r.id = id;
  r.address = "127.0.0.1:" + std::to_string(7000 + id);
  r.http_address = "127.0.0.1:" + std::to_string(9000 + id);
  r.capacity_bytes = uint64_t{1} << 30;
  r.weight = 1.5;
  r.zone = "z" + std::to_string(id % 2);
  return r;
}

std::vector<uint32_t> Ids(const MemberView& v, Role role) {
  std::vector<uint32_t> ids;
  for (const NodeRecord& r : v.nodes(role)) ids.push_back(r.id);
  return ids;
}

// ---- Pure: records and keys ----

TEST(NodeRecordTest, RoundTripsThroughJson) {
  NodeRecord r = Node(Role::kGateway, 4000000000u);
  r.zone = "rack \"a\"\\b\n\x01";
  r.weight = 0.1 + 0.2;
  r.capacity_bytes = ~uint64_t{0};
  const std::string json = EncodeNodeRecord(r);
  EXPECT_NE(json.find("\"role\":\"gateway\""), std::string::npos) << json;
  EXPECT_EQ(json.find("incarnation"), std::string::npos) << json;  // none: not written
  auto back = DecodeNodeRecord(json);
  ASSERT_TRUE(back.ok()) << back.status() << " " << json;
  EXPECT_EQ(*back, r);

  r.incarnation = "0123456789abcdef0123456789abcdef";
  auto with = DecodeNodeRecord(EncodeNodeRecord(r));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->incarnation, r.incarnation);
}

TEST(NodeRecordTest, DecodeIsLenientAboutExtrasAndStrictAboutValues) {
  auto r = DecodeNodeRecord(R"({"role":"data","id":3,"address":"h:1","future_field":[1,2]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->role, Role::kData);
  EXPECT_EQ(r->weight, 1.0);
  EXPECT_EQ(r->http_address, "");

  auto expect_bad = [](const std::string& json, const std::string& needle) {
    auto s = DecodeNodeRecord(json).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << json << " -> " << s;
    EXPECT_NE(s.message().find(needle), absl::string_view::npos) << json << " -> " << s;
  };
  expect_bad("{not json", "not JSON");
  expect_bad("[1,2]", "not a JSON object");
  expect_bad(R"({"id":1,"address":"h:1"})", "role");
  expect_bad(R"({"role":"disk","id":1,"address":"h:1"})", "disk");
  expect_bad(R"({"role":"data","address":"h:1"})", "'id'");
  expect_bad(R"({"role":"data","id":-1,"address":"h:1"})", "id");
  expect_bad(R"({"role":"data","id":4294967296,"address":"h:1"})", "id");
  expect_bad(R"({"role":"data","id":1})", "address");
  expect_bad(R"({"role":"data","id":1,"address":"h:1","weight":0})", "weight");
  expect_bad(R"({"role":"data","id":1,"address":"h:1","weight":"x"})", "weight");
  expect_bad(R"({"role":"data","id":1,"address":"h:1","capacity_bytes":-5})", "capacity_bytes");
  expect_bad(R"({"role":"data","id":1,"address":{"a":1}})", "address");
}

TEST(KeyLayoutTest, KeysAndParsing) {
  EXPECT_EQ(NodeKey("/ringcache", Role::kCache, 7), "/ringcache/nodes/cache/7");
  EXPECT_EQ(RolePrefix("/p", Role::kData), "/p/nodes/data/");
  EXPECT_EQ(NodesPrefix("/p"), "/p/nodes/");
  EXPECT_EQ(VdiKey("/p", "vol1"), "/p/vdis/vol1");
  EXPECT_EQ(VdisPrefix("/p"), "/p/vdis/");
  EXPECT_EQ(DrainingKey("/p", 3), "/p/draining/3");
  EXPECT_EQ(DrainingPrefix("/p"), "/p/draining/");
  auto k = ParseNodeKey("/p", "/p/nodes/gateway/12");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->first, Role::kGateway);
  EXPECT_EQ(k->second, 12u);
  for (const char* bad :
       {"/q/nodes/cache/1", "/p/nodes/cache", "/p/nodes/disk/1", "/p/nodes/cache/x",
        "/p/nodes/cache/-1", "/p/nodes/cache/1/2", "/p/nodes/cache/"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseNodeKey("/p", bad).status())) << bad;
  }
}

TEST(RegistrationOptionsTest, Validate) {
  NodeRegistration::Options o;
  EXPECT_TRUE(o.Validate().ok());
  o.ttl = absl::Milliseconds(2500);
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
  o.ttl = absl::Seconds(1);
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
  o.ttl = absl::Seconds(2);
  o.safety_margin = absl::Seconds(1);
  EXPECT_TRUE(absl::IsInvalidArgument(o.Validate()));
}

// ---- Against a real etcd ----

// Records every view a MembershipWatcher delivers.
class ViewLog {
 public:
  MembershipWatcher::Callback Callback() {
    return [this](const MemberView& v) {
      absl::MutexLock l(&mu_);
      views_.push_back(v);
    };
  }
  std::vector<MemberView> views() const {
    absl::MutexLock l(&mu_);
    return views_;
  }
  // Returns the latest view (revision 0 if none yet).
  MemberView last() const {
    absl::MutexLock l(&mu_);
    return views_.empty() ? MemberView{} : views_.back();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<MemberView> views_ ABSL_GUARDED_BY(mu_);
};

class MembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdTestServer::FindBinary().empty()) {
      GTEST_SKIP() << "etcd binary not found (install the Debian package etcd-server, or set "
                      "RINGCACHE_ETCD); skipping tests against a real etcd";
    }
    auto server =
        EtcdTestServer::Start(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    EtcdClient::Options options;
    options.endpoints = {server_->endpoint()};
    options.dial_timeout = absl::Milliseconds(300);
    auto client = EtcdClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  absl::StatusOr<std::unique_ptr<NodeRegistration>> Register(
      NodeRecord record, Clock* clock = Clock::Real(),
      NodeRegistration::ReregisteredCallback cb = nullptr) {
    NodeRegistration::Options o;
    o.prefix = "/rc";
    o.ttl = absl::Seconds(2);
    o.safety_margin = absl::Milliseconds(500);
    return NodeRegistration::Start(client_.get(), clock, o, std::move(record), std::move(cb));
  }

  std::unique_ptr<MembershipWatcher> Watcher(ViewLog* log) {
    MembershipWatcher::Options o;
    o.prefix = "/rc";
    return MembershipWatcher::Start(client_.get(), o, log->Callback());
  }

  bool KeyExists(const std::string& key) {
    auto kv = client_->Get(key);
    return kv.ok() && kv->has_value();
  }

  std::unique_ptr<EtcdTestServer> server_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(MembershipTest, RegistrationStaysWhileRenewedAndExpiresWhenRenewalsStop) {
  auto reg = Register(Node(Role::kCache, 1));
  ASSERT_TRUE(reg.ok()) << reg.status();
  const std::string key = (*reg)->key();
  EXPECT_EQ(key, "/rc/nodes/cache/1");
  auto kv = client_->Get(key);
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_EQ((*kv)->lease, (*reg)->lease_id());
  EXPECT_EQ(*DecodeNodeRecord((*kv)->value), Node(Role::kCache, 1));
  EXPECT_TRUE((*reg)->LeaseValid());

  // Well past the 2 s TTL, renewals keep it.
  absl::SleepFor(absl::Seconds(3));
  EXPECT_TRUE(KeyExists(key));
  EXPECT_TRUE((*reg)->LeaseValid());

  // A hung node: renewals stop, the server expires the lease and deletes the record.
  (*reg)->StopKeepAliveForTest();
  EXPECT_TRUE(WaitFor([&] { return !KeyExists(key); }));
  EXPECT_FALSE((*reg)->LeaseValid());
}

TEST_F(MembershipTest, DestroyingARegistrationRemovesItAtOnce) {
  auto reg = Register(Node(Role::kData, 2));
  ASSERT_TRUE(reg.ok()) << reg.status();
  const std::string key = (*reg)->key();
  ASSERT_TRUE(KeyExists(key));
  reg->reset();
  EXPECT_FALSE(KeyExists(key));
}

TEST_F(MembershipTest, LostLeaseIsReregisteredAndReported) {
  absl::Mutex mu;
  std::vector<int64_t> reported;
  std::atomic<NodeRegistration*> self{nullptr};
  bool valid_in_callback = true;
  auto reg = Register(Node(Role::kCache, 5), Clock::Real(), [&](int64_t lease, int64_t rev) {
    absl::MutexLock l(&mu);
    reported.push_back(lease);
    EXPECT_GT(rev, 0);
    // The cache node quarantines itself here: the new lease must not count as valid before
    // that, or its destager could write stale blocks home in between.
    valid_in_callback = self.load()->LeaseValid();
  });
  ASSERT_TRUE(reg.ok()) << reg.status();
  self = reg->get();
  const int64_t old_lease = (*reg)->lease_id();
  // Someone (an operator, or the server after an expiry) removes the lease.
  ASSERT_TRUE(client_->LeaseRevoke(old_lease).ok());
  ASSERT_TRUE(WaitFor([&] {
    absl::MutexLock l(&mu);
    return !reported.empty();
  }));
  const int64_t new_lease = (*reg)->lease_id();
  EXPECT_NE(new_lease, old_lease);
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(reported.back(), new_lease);
    EXPECT_FALSE(valid_in_callback) << "the new lease's window opened before the callback";
  }
  auto kv = client_->Get((*reg)->key());
  ASSERT_TRUE(kv.ok() && kv->has_value());
  EXPECT_EQ((*kv)->lease, new_lease);
  EXPECT_TRUE((*reg)->LeaseValid());
}

TEST_F(MembershipTest, ViewsCarryEachMembersLeaseSoReregistrationsShow) {
  ViewLog log;
  auto watcher = Watcher(&log);
  auto reg = Register(Node(Role::kCache, 6));
  ASSERT_TRUE(reg.ok()) << reg.status();
  const int64_t first = (*reg)->lease_id();
  ASSERT_TRUE(WaitFor([&] { return log.last().LeaseOf(Role::kCache, 6) == first; }));
  EXPECT_EQ(log.last().LeaseOf(Role::kCache, 7), 0) << "not a member";
  // The lease is lost and re-granted: the node stays a member, under a new lease.
  ASSERT_TRUE(client_->LeaseRevoke(first).ok());
  ASSERT_TRUE(WaitFor([&] {
    const int64_t now = log.last().LeaseOf(Role::kCache, 6);
    return now != 0 && now != first;
  }));
  EXPECT_EQ(log.last().LeaseOf(Role::kCache, 6), (*reg)->lease_id());
  // A fresh list (a second watcher) reports the same lease.
  ViewLog log2;
  auto watcher2 = Watcher(&log2);
  ASSERT_TRUE(WaitFor([&] { return log2.last().revision > 0; }));
  EXPECT_EQ(log2.last().LeaseOf(Role::kCache, 6), (*reg)->lease_id());
}

TEST_F(MembershipTest, WatchersSeeAddsAndRemovesAndAgreeOnEpochs) {
  ViewLog log_a, log_b;
  auto a = Watcher(&log_a);
  ASSERT_TRUE(WaitFor([&] { return log_a.last().revision > 0; }));
  EXPECT_TRUE(log_a.last().nodes(Role::kCache).empty());

  auto c1 = Register(Node(Role::kCache, 1));
  auto c10 = Register(Node(Role::kCache, 10));
  auto d2 = Register(Node(Role::kData, 2));
  auto g3 = Register(Node(Role::kGateway, 3));
  ASSERT_TRUE(c1.ok() && c10.ok() && d2.ok() && g3.ok());
  // A junk key under nodes/ is reported, not a member.
  const int64_t junk_rev = *client_->Put("/rc/nodes/cache/99", "garbage");
  auto b = Watcher(&log_b);  // starts late: lists instead of replaying

  for (ViewLog* log : {&log_a, &log_b}) {
    ASSERT_TRUE(WaitFor([&] { return log->last().revision >= junk_rev; }));
    const MemberView v = log->last();
    EXPECT_EQ(Ids(v, Role::kCache), (std::vector<uint32_t>{1, 10}));  // numeric order
    EXPECT_EQ(Ids(v, Role::kData), (std::vector<uint32_t>{2}));
    EXPECT_EQ(Ids(v, Role::kGateway), (std::vector<uint32_t>{3}));
    EXPECT_EQ(v.nodes(Role::kData)[0], Node(Role::kData, 2));
    ASSERT_EQ(v.malformed.size(), 1u);
    EXPECT_NE(v.malformed[0].find("/rc/nodes/cache/99"), std::string::npos);
  }

  // Remove one node: both see it go, at the same revision.
  c10->reset();
  auto gone = [](const ViewLog& log) { return Ids(log.last(), Role::kCache).size() == 1; };
  ASSERT_TRUE(WaitFor([&] { return gone(log_a) && gone(log_b); }));
  EXPECT_EQ(log_a.last().revision, log_b.last().revision);

  // Per watcher, epochs only grow; across watchers, equal epochs mean equal member sets.
  for (const ViewLog* log : {&log_a, &log_b}) {
    const std::vector<MemberView> views = log->views();
    for (size_t i = 1; i < views.size(); ++i) {
      EXPECT_GT(views[i].revision, views[i - 1].revision);
    }
  }
  int common = 0;
  for (const MemberView& va : log_a.views()) {
    for (const MemberView& vb : log_b.views()) {
      if (va.revision != vb.revision) continue;
      ++common;
      for (Role r : {Role::kCache, Role::kData, Role::kGateway}) {
        EXPECT_EQ(va.nodes(r), vb.nodes(r)) << "revision " << va.revision;
      }
    }
  }
  EXPECT_GE(common, 1);
  EXPECT_EQ(a->lists(), 1);
  EXPECT_EQ(b->Current()->revision, log_b.last().revision);
}

TEST_F(MembershipTest, FencingWindowFollowsSendTimesOnTheInjectedClock) {
  SimulatedClock clock(1'000'000'000);
  const absl::Time t0 = ClockNow(&clock);
  auto reg = Register(Node(Role::kCache, 1), &clock);
  ASSERT_TRUE(reg.ok()) << reg.status();
  // Every request so far was sent at t0: valid until t0 + TTL - margin, not a moment longer.
  EXPECT_EQ((*reg)->ValidUntil(), t0 + absl::Milliseconds(1500));
  EXPECT_TRUE((*reg)->LeaseValid(t0 + absl::Milliseconds(1499)));
  EXPECT_FALSE((*reg)->LeaseValid(t0 + absl::Milliseconds(1500)));

  // etcd becomes unreachable; time passes; the node fences itself.
  server_->Kill();
  clock.Advance(absl::Milliseconds(1500));
  EXPECT_FALSE((*reg)->LeaseValid());
  EXPECT_LE((*reg)->ValidUntil(), t0 + absl::Milliseconds(1500));

  // etcd returns: the next renewal, sent at t0 + 1.5 s, reopens the window.
  ASSERT_TRUE(server_->Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return (*reg)->LeaseValid(); }));
  EXPECT_EQ((*reg)->ValidUntil(), t0 + absl::Milliseconds(3000));
}

TEST_F(MembershipTest, EtcdRestartFencesThenRecovers) {
  ViewLog log;
  auto watcher = Watcher(&log);
  std::atomic<int> reregistrations{0};
  auto reg =
      Register(Node(Role::kCache, 1), Clock::Real(), [&](int64_t, int64_t) { ++reregistrations; });
  ASSERT_TRUE(reg.ok()) << reg.status();
  ASSERT_TRUE(WaitFor([&] { return Ids(log.last(), Role::kCache).size() == 1; }));
  const int64_t rev_before = log.last().revision;
  ASSERT_TRUE((*reg)->LeaseValid());

  server_->Kill();
  const absl::Time killed = ClockNow(Clock::Real());
  // No keepalive can succeed from here on, so the window ends at most TTL - margin after the
  // kill, and the node sees it close while the server-side lease (>= TTL after the last
  // renewal reached the server) could still be alive.
  EXPECT_LE((*reg)->ValidUntil(), killed + absl::Milliseconds(1500));
  ASSERT_TRUE(WaitFor([&] { return !(*reg)->LeaseValid(); }));
  EXPECT_FALSE(server_->running());

  // A write issued during the outage blocks, then lands once etcd is back.
  absl::Status put_status = absl::UnknownError("not run");
  std::thread writer([&] { put_status = client_->Put("/rc/vdis/vol1", "spec").status(); });
  absl::SleepFor(absl::Seconds(1));  // down > TTL in total
  ASSERT_TRUE(server_->Restart().ok());
  writer.join();
  EXPECT_TRUE(put_status.ok()) << put_status;

  // The registration survived (etcd extends leases on restart) or re-registered: either way
  // the record is back under the registration's current lease and the node is valid again.
  ASSERT_TRUE(WaitFor([&] { return (*reg)->LeaseValid(); }));
  ASSERT_TRUE(WaitFor([&] {
    auto kv = client_->Get((*reg)->key());
    return kv.ok() && kv->has_value() && (*kv)->lease == (*reg)->lease_id();
  }));
  RecordProperty("reregistrations", reregistrations.load());

  // The watcher resumed: it sees a node that joins after the restart, at a later epoch.
  auto reg2 = Register(Node(Role::kData, 7));
  ASSERT_TRUE(reg2.ok()) << reg2.status();
  ASSERT_TRUE(WaitFor([&] { return Ids(log.last(), Role::kData).size() == 1; }));
  const MemberView v = log.last();
  EXPECT_GT(v.revision, rev_before);
  EXPECT_EQ(Ids(v, Role::kCache), (std::vector<uint32_t>{1}));
  EXPECT_EQ(watcher->lists(), 1);  // resumed, no re-list needed
}


// ---- Coordinator election (membership/election.h) ----

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

TEST_F(MembershipTest, OneCandidateLeadsAndOnlyItsGuardedWritesCommit) {
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

TEST_F(MembershipTest, ALeaderWhoseLeaseLapsesStepsDownAndAnotherTakesOver) {
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

TEST_F(MembershipTest, ALeaderThatCannotLeadResignsAndAnotherTakesOver) {
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
}  // namespace ringcache::membership
