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
#include "membership/daemon_flags.h"
#include "membership/testing/etcd_fixture.h"

namespace ringcache::membership {
namespace {

using testing::EtcdFixture;
using testing::Node;
using testing::WaitFor;

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

TEST(NodeRecordTest, ReleaseIsCarriedAndAbsentFromOlderRecords) {
  NodeRecord r = Node(Role::kCache, 7);
  r.release = "0.2.0";
  auto back = DecodeNodeRecord(EncodeNodeRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->release, "0.2.0");
  EXPECT_EQ(back->feature_level, 0u);  // not set: not written
  r.feature_level = 2;
  back = DecodeNodeRecord(EncodeNodeRecord(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->feature_level, 2u);
  // A record of 0.1.0, which had no release: it decodes, with none.
  auto old = DecodeNodeRecord(
      R"({"role":"data","id":3,"address":"127.0.0.1:7","http_address":"","capacity_bytes":0,)"
      R"("weight":1,"zone":""})");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->release, "");
  EXPECT_EQ(old->feature_level, 0u);
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
// Plaintext to etcd off loopback is refused like a plaintext listener, unless --insecure.
TEST(DaemonFlagsTest, PlaintextEtcdOffLoopbackIsRefused) {
  DaemonFlags flags;
  EtcdSettings local;
  local.endpoints = "127.0.0.1:2379,localhost:2380,http://[::1]:2379";
  EXPECT_TRUE(flags.CheckEtcd(local).ok());
  EXPECT_TRUE(flags.CheckEtcd(EtcdSettings{}).ok()) << "static mode reaches no etcd";
  EtcdSettings remote;
  remote.endpoints = "127.0.0.1:2379,http://10.1.2.3:2379";
  absl::Status s = flags.CheckEtcd(remote);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("10.1.2.3:2379"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--insecure"), std::string::npos) << s;
  flags.insecure = true;
  EXPECT_TRUE(flags.CheckEtcd(remote).ok());
  flags.insecure = false;
  flags.tls_dir = "/etc/ringcache/tls";
  EXPECT_TRUE(flags.CheckEtcd(remote).ok()) << "with TLS the endpoint may be anywhere";
}

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

class MembershipTest : public EtcdFixture {
 protected:
  std::unique_ptr<MembershipWatcher> Watcher(ViewLog* log) {
    MembershipWatcher::Options o;
    o.prefix = "/rc";
    return MembershipWatcher::Start(client_.get(), o, log->Callback());
  }

  bool KeyExists(const std::string& key) {
    auto kv = client_->Get(key);
    return kv.ok() && kv->has_value();
  }
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

// A daemon started before its etcd answers (compose starts them side by side; a TLS handshake
// can be slow on a loaded host) waits for it rather than exiting.
TEST_F(MembershipTest, FirstRegistrationWaitsForAnEtcdThatIsNotUpYet) {
  server_->Kill();
  // Nothing to wait for within the start timeout: the start fails, naming etcd's unavailability.
  auto refused = Register(Node(Role::kCache, 3), Clock::Real(), nullptr, absl::Seconds(1));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();

  // The registering daemon in a thread; etcd comes up from this one (a forked etcd dies with
  // the thread that started it: PR_SET_PDEATHSIG).
  absl::StatusOr<std::unique_ptr<NodeRegistration>> reg = absl::UnknownError("not run");
  std::thread daemon([&] { reg = Register(Node(Role::kCache, 3)); });
  absl::SleepFor(absl::Seconds(2));
  const absl::Status restarted = server_->Restart();
  daemon.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  ASSERT_TRUE(reg.ok()) << reg.status();
  EXPECT_TRUE(KeyExists((*reg)->key()));
  EXPECT_TRUE((*reg)->LeaseValid());
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
  // The watcher may see the new key before the registration records its new lease (it puts the
  // key, then takes the lease as its own): wait until both agree on one new lease.
  ASSERT_TRUE(WaitFor([&] {
    const int64_t now = log.last().LeaseOf(Role::kCache, 6);
    return now != 0 && now != first && now == (*reg)->lease_id();
  }));
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
  const absl::Time t0 = clock.Now();
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
  const absl::Time killed = Clock::Real()->Now();
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

}  // namespace
}  // namespace ringcache::membership
