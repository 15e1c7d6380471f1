// The gateway's state in a real etcd (started by the test; skipped without etcd-server): the
// VDI catalog's records under P/vdis/ (seeded from the local file, then the source of truth) and
// the data ring under P/rings/data.
#include "coordinator/etcd_state.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "common/formats.h"
#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "membership/etcd_test_server.h"
#include "membership/etcd_value.h"
#include "membership/feature_level.h"
#include "membership/membership.h"

namespace ringcache::coordinator {
namespace {

using membership::EtcdClient;
using membership::EtcdTestServer;

class EtcdStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EtcdTestServer::FindBinary().empty()) {
      GTEST_SKIP() << "etcd binary not found (install the Debian package etcd-server, or set "
                      "RINGCACHE_ETCD); skipping tests against a real etcd";
    }
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    auto server = EtcdTestServer::Start("etcd_state_" + name);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    EtcdClient::Options options;
    options.endpoints = {server_->endpoint()};
    // A call to the stopped etcd (CatalogSeedsEtcdThenFollowsIt) fails once its attempts have
    // used this much; the default (10 s) is for a cluster's etcd, not one on loopback.
    options.call_timeout = absl::Seconds(2);
    auto client = EtcdClient::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    dir_ = ::testing::TempDir() + "/etcd_state_" + name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<Catalog> Open(const std::string& file) {
    auto c = Catalog::Open(dir_ + "/" + file, VdiDefaults{});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::unique_ptr<EtcdTestServer> server_;
  std::unique_ptr<EtcdClient> client_;
  std::string dir_;
};

TEST_F(EtcdStateTest, CatalogSeedsEtcdThenFollowsIt) {
  // A gateway that ran in static mode has VDIs in its file: attaching seeds etcd with them.
  auto first = Open("a.txt");
  ASSERT_TRUE(first->Create("disk1", 1 << 20, 0, 2).ok());
  ASSERT_TRUE(first->Create("disk2", 2 << 20, 0, 3).ok());
  EtcdCatalogStore store(client_.get(), "/rc");
  ASSERT_TRUE(first->AttachStore(&store).ok());
  auto kv = client_->Get("/rc/vdis/disk2");
  ASSERT_TRUE(kv.ok()) << kv.status();
  ASSERT_TRUE(kv->has_value());
  EXPECT_EQ((*kv)->value, "2 disk2 2097152 4194304 4096 3 writeback");

  // Later changes reach etcd first.
  ASSERT_TRUE(first->SetMode("disk1", v1::WRITETHROUGH).ok());
  ASSERT_TRUE(first->Delete("disk2").ok());
  ASSERT_TRUE(first->Create("disk3", 4 << 20, 0, 1).ok());

  // Another gateway dir (a new or replaced gateway) with a stale file takes etcd's records.
  auto second = Open("b.txt");
  ASSERT_TRUE(second->Create("stale", 1 << 20, 0, 1).ok());
  EtcdCatalogStore store2(client_.get(), "/rc");
  ASSERT_TRUE(second->AttachStore(&store2).ok());
  auto list = second->List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].geometry.name(), "disk1");
  EXPECT_EQ(list[0].mode, v1::WRITETHROUGH);
  EXPECT_EQ(list[1].geometry.name(), "disk3");
  EXPECT_EQ(list[1].geometry.vdi_id(), 3u);
  EXPECT_FALSE(second->Find("stale").ok());
  auto next = second->Create("disk4", 1 << 20, 0, 1);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->geometry.vdi_id(), 4u) << "ids continue after etcd's";
  // A deleted VDI with the highest id leaves its id taken, in etcd too: another gateway (a new
  // coordinator) gives the next one.
  ASSERT_TRUE(second->Delete("disk4").ok());
  auto third = Open("c.txt");
  EtcdCatalogStore store3(client_.get(), "/rc");
  ASSERT_TRUE(third->AttachStore(&store3).ok());
  auto fresh = third->Create("disk4b", 1 << 20, 0, 1);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->geometry.vdi_id(), 5u) << "the deleted disk4's id 4 is not given again";
  ASSERT_TRUE(third->Delete("disk4b").ok());
  ASSERT_TRUE(second->Reload().ok());
  // The file follows too, so a restart without etcd would see the same catalog.
  auto reopened = Open("b.txt");
  EXPECT_EQ(reopened->List().size(), 2u);

  // A change etcd refuses (it is down) changes nothing.
  server_->Kill();
  EXPECT_FALSE(second->Create("disk5", 1 << 20, 0, 1).ok());
  EXPECT_FALSE(second->Find("disk5").ok());
  ASSERT_TRUE(server_->Restart().ok());
}

// The cluster feature level (docs/upgrades.md): absent, it is 1; finalize raises it only as far
// as every registered node supports, naming the nodes that hold it back.
TEST_F(EtcdStateTest, FinalizeRaisesTheFeatureLevelOnlyAsFarAsEveryNodeSupports) {
  membership::ScopedClusterFeatureLevel noted(kBaseFeatureLevel);  // put back at the end
  absl::StatusOr<uint32_t> level = membership::ReadFeatureLevel(client_.get(), "/rc");
  ASSERT_TRUE(level.ok()) << level.status();
  EXPECT_EQ(*level, 1u);
  auto put = [&](membership::Role role, uint32_t id, const std::string& release,
                 uint32_t feature_level) {
    membership::NodeRecord r;
    r.role = role;
    r.id = id;
    r.address = "127.0.0.1:1";
    r.release = release;
    r.feature_level = feature_level;
    ASSERT_TRUE(client_->Put(membership::NodeKey("/rc", role, id), EncodeNodeRecord(r)).ok());
  };
  put(membership::Role::kCache, 1, "0.2.0", kFeatureLevel);
  put(membership::Role::kData, 3, "", 0);  // a node of 0.1.0: level 1 only
  absl::StatusOr<std::pair<uint32_t, std::string>> r = FinalizeFeatureLevel(client_.get(), "/rc");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, 1u);
  EXPECT_NE(r->second.find("stays 1"), std::string::npos) << r->second;
  EXPECT_NE(r->second.find("data 3 (before 0.2.0)"), std::string::npos) << r->second;
  EXPECT_EQ(*membership::ReadFeatureLevel(client_.get(), "/rc"), 1u);

  put(membership::Role::kData, 3, "0.2.0", kFeatureLevel);  // upgraded
  r = FinalizeFeatureLevel(client_.get(), "/rc");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, kFeatureLevel);
  EXPECT_NE(r->second.find(absl::StrCat("raised from 1 to ", kFeatureLevel)), std::string::npos)
      << r->second;
  EXPECT_EQ(*membership::ReadFeatureLevel(client_.get(), "/rc"), kFeatureLevel);
  // The level that brings the versioned etcd values is the first written as one, and this
  // process (the coordinator that finalized) writes them from now on.
  auto raw = client_->Get(membership::FeatureLevelKey("/rc"));
  ASSERT_TRUE(raw.ok() && raw->has_value());
  EXPECT_TRUE(membership::IsEtcdValue((*raw)->value));
  EXPECT_TRUE(membership::WritesEtcdValues());
  r = FinalizeFeatureLevel(client_.get(), "/rc");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->second.find(absl::StrCat("stays ", kFeatureLevel,
                                        ", the highest this release knows")),
            std::string::npos)
      << r->second;

  EXPECT_TRUE(membership::CheckFeatureLevel(client_.get(), "/rc", "gateway 1").ok());

  // A cluster finalized past this release (by a newer one): its gateways refuse to start.
  ASSERT_TRUE(client_->Put(membership::FeatureLevelKey("/rc"),
                           membership::EncodeFeatureLevelValue(kFeatureLevel + 1))
                  .ok());
  absl::Status beyond = membership::CheckFeatureLevel(client_.get(), "/rc", "gateway 1");
  EXPECT_TRUE(absl::IsFailedPrecondition(beyond)) << beyond;
  EXPECT_NE(beyond.message().find(absl::StrCat("feature level ", kFeatureLevel + 1)),
            absl::string_view::npos)
      << beyond;
  EXPECT_NE(beyond.message().find(absl::StrCat("levels up to ", kFeatureLevel)),
            absl::string_view::npos)
      << beyond;
  EXPECT_NE(beyond.message().find("gateway 1: "), absl::string_view::npos) << beyond;

  ASSERT_TRUE(client_->Put(membership::FeatureLevelKey("/rc"), "two").ok());
  EXPECT_TRUE(absl::IsDataLoss(membership::ReadFeatureLevel(client_.get(), "/rc").status()));
}

// What the coordinator keeps in etcd (docs/upgrades.md, "What etcd holds"): each key's text
// until the cluster's feature level allows one versioned encoding, then an EtcdValue; what
// was written before stays readable beside what is written after, and a value of a newer
// version is refused by name, not misread.
TEST_F(EtcdStateTest, EveryValueIsVersionedFromItsLevelAndBothVersionsRead) {
  datanode::DataRing ring;
  ring.epoch = 7;
  ring.nodes = {{1, "10.0.0.1:7401", 1.0, "a"}, {2, "10.0.0.2:7401", 2.0, "b"}};
  ring.members = {1, 2};
  membership::CacheRingState cache;
  cache.epoch = 11;
  cache.learned = {{4, "10.0.0.4:7301", 1.0}};
  cache.removing = {3};
  const DataActions actions{{2}, {5}, {9}};
  auto raw = [&](const std::string& key) {
    auto kv = client_->Get(key);
    EXPECT_TRUE(kv.ok() && kv->has_value()) << key;
    return kv.ok() && kv->has_value() ? (*kv)->value : std::string();
  };
  const std::vector<std::string> keys = {"/rc/vdis/old", "/rc/vdi-next-id", "/rc/rings/data",
                                         "/rc/ring-epochs/data", "/rc/rings/data-purge",
                                         "/rc/rings/data-actions", "/rc/rings/cache",
                                         "/rc/ring-epochs/cache"};
  auto write_all = [&](Catalog* c, const std::string& vdi) {
    ASSERT_TRUE(c->Create(vdi, 1 << 20, 0, 2).ok());
    ASSERT_TRUE(SaveEtcdDataRing(client_.get(), "/rc", ring).ok());
    ASSERT_TRUE(SaveEtcdDataPurge(client_.get(), "/rc", true, std::nullopt).ok());
    ASSERT_TRUE(SaveEtcdDataActions(client_.get(), "/rc", actions, std::nullopt).ok());
    auto txn = client_->Txn({}, membership::CacheRingPuts("/rc", cache), {});
    ASSERT_TRUE(txn.ok() && txn->succeeded);
  };
  auto read_all = [&](Catalog* c) {
    ASSERT_TRUE(c->Reload().ok());
    auto got = LoadEtcdDataRing(client_.get(), "/rc");
    ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
    EXPECT_EQ((*got)->nodes[1].address, "10.0.0.2:7401");
    EXPECT_EQ((*got)->members, ring.members);
    EXPECT_TRUE(*LoadEtcdDataPurge(client_.get(), "/rc"));
    EXPECT_EQ(*LoadEtcdDataActions(client_.get(), "/rc"), actions);
    auto st = membership::LoadEtcdCacheRing(client_.get(), "/rc");
    ASSERT_TRUE(st.ok() && st->has_value()) << st.status();
    EXPECT_EQ(**st, cache);
    auto tv = TakeOverEpoch(client_.get(), "/rc");
    ASSERT_TRUE(tv.ok()) << tv.status();
    EXPECT_GE(*tv, cache.epoch);
  };

  auto catalog = Open("levels.txt");
  EtcdCatalogStore store(client_.get(), "/rc");
  ASSERT_TRUE(catalog->AttachStore(&store).ok());
  {
    membership::ScopedClusterFeatureLevel level(membership::kEtcdValueFeatureLevel - 1);
    write_all(catalog.get(), "old");
    for (const std::string& k : keys) EXPECT_FALSE(membership::IsEtcdValue(raw(k))) << k;
    EXPECT_EQ(raw("/rc/vdis/old"), "1 old 1048576 4194304 4096 2 writeback");
    EXPECT_EQ(raw("/rc/ring-epochs/cache"), "11\n");
    read_all(catalog.get());
  }
  membership::ScopedClusterFeatureLevel level(membership::kEtcdValueFeatureLevel);
  ring.epoch = 8;
  cache.epoch = 12;
  write_all(catalog.get(), "new");
  EXPECT_FALSE(membership::IsEtcdValue(raw("/rc/vdis/old"))) << "not rewritten";
  for (const std::string& k : keys) {
    if (k != "/rc/vdis/old") {
      EXPECT_TRUE(membership::IsEtcdValue(raw(k))) << k;
    }
  }
  EXPECT_TRUE(membership::IsEtcdValue(raw("/rc/vdis/new")));
  read_all(catalog.get());
  // Another gateway (a new coordinator) loads both versions of the catalog.
  auto other = Open("other.txt");
  EtcdCatalogStore store2(client_.get(), "/rc");
  ASSERT_TRUE(other->AttachStore(&store2).ok());
  ASSERT_EQ(other->List().size(), 2u);
  EXPECT_EQ(other->List()[0].geometry.name(), "new");
  EXPECT_EQ(other->List()[1].geometry.name(), "old");
  EXPECT_EQ(other->List()[0].geometry.vdi_id(), 2u);

  // A data ring of a newer etcd-value version stops the reader, naming the versions.
  v1::EtcdValue newer;
  newer.set_format(kEtcdValueFormat.writes + 1);
  *newer.mutable_data_ring() = ring.ToProto();
  ASSERT_TRUE(client_->Put("/rc/rings/data", newer.SerializeAsString()).ok());
  absl::Status s = LoadEtcdDataRing(client_.get(), "/rc").status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("/rc/rings/data"), std::string::npos) << s;
  EXPECT_NE(s.message().find("versions 1-2"), std::string::npos) << s;
  // A value of another kind where a VDI record belongs is damage, named with its key.
  ASSERT_TRUE(client_->Put("/rc/vdis/odd", membership::EncodeNumberValue(3)).ok());
  s = other->Reload().status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("/rc/vdis/odd: catalog record: holds a number, not a VDI record"),
            std::string::npos)
      << s;
}

// A daemon's first etcd call (the feature level) waits for an etcd that does not answer yet,
// as in a container whose network comes up after it starts, instead of failing at once.
TEST_F(EtcdStateTest, TheFeatureLevelCheckAtStartWaitsForEtcd) {
  server_->Kill();
  absl::Status gone = membership::CheckFeatureLevel(client_.get(), "/rc", "data node 2",
                                                    absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnavailable(gone) || absl::IsDeadlineExceeded(gone)) << gone;
  // The waiting daemon in a thread; etcd comes back from this one: a forked etcd dies with the
  // thread that started it (PR_SET_PDEATHSIG), and a thread that restarted it and ended took it
  // down again at once (the wait then failed after 2 minutes, now and then).
  absl::Status s = absl::UnknownError("not run");
  std::thread daemon([&] {
    s = membership::CheckFeatureLevel(client_.get(), "/rc", "data node 2", absl::Minutes(2));
  });
  absl::SleepFor(absl::Seconds(2));
  const absl::Status restarted = server_->Restart();
  daemon.join();
  ASSERT_TRUE(restarted.ok()) << restarted;
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(EtcdStateTest, MalformedRecordIsReported) {
  ASSERT_TRUE(client_->Put("/rc/vdis/bad", "1 bad nonsense").ok());
  EtcdCatalogStore store(client_.get(), "/rc");
  auto c = Open("c.txt");
  absl::Status s = c->AttachStore(&store);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("/rc/vdis/bad"), std::string::npos) << s;
}

TEST_F(EtcdStateTest, DataRingRoundTrip) {
  auto none = LoadEtcdDataRing(client_.get(), "/rc");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  datanode::DataRing ring;
  ring.epoch = 7;
  ring.nodes = {{1, "10.0.0.1:7401", 1.0, "a"}, {2, "10.0.0.2:7401", 2.0, "b"}};
  ring.members = {1};
  ring.target = {1, 2};
  ASSERT_TRUE(SaveEtcdDataRing(client_.get(), "/rc", ring).ok());
  auto got = LoadEtcdDataRing(client_.get(), "/rc");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->epoch, 7u);
  EXPECT_EQ((*got)->nodes[1].address, "10.0.0.2:7401");
  EXPECT_EQ((*got)->nodes[1].weight, 2.0);
  EXPECT_EQ((*got)->nodes[1].zone, "b");
  EXPECT_EQ((*got)->target, (std::vector<uint32_t>{1, 2}));
  ASSERT_TRUE(client_->Put("/rc/rings/data", "epoch: 8 members: 3").ok());
  EXPECT_EQ(LoadEtcdDataRing(client_.get(), "/rc").status().code(), absl::StatusCode::kDataLoss)
      << "a member without an address";
}

TEST_F(EtcdStateTest, DataRingAndPurgeMarkAreWrittenOnlyInTheCoordinatorsTerm) {
  // The coordinator key's create revision is the term (coordinator/election.h).
  auto created = client_->Put("/rc/coordinator", "{}");
  ASSERT_TRUE(created.ok()) << created.status();
  auto kv = client_->Get("/rc/coordinator");
  ASSERT_TRUE(kv.ok() && kv->has_value());
  const int64_t term = (*kv)->create_revision;
  const auto guard = membership::TxnCompare::CreateRevisionIs("/rc/coordinator", term);
  datanode::DataRing ring;
  ring.epoch = 3;
  ring.nodes = {{1, "10.0.0.1:7401", 1.0, ""}};
  ring.members = {1};
  ASSERT_TRUE(SaveEtcdDataRing(client_.get(), "/rc", ring, guard).ok());
  ASSERT_TRUE(SaveEtcdDataPurge(client_.get(), "/rc", true, guard).ok());
  auto pending = LoadEtcdDataPurge(client_.get(), "/rc");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_TRUE(*pending);

  // A new leader: the key is created again, with another create revision. The old term's
  // writes are refused and change nothing.
  ASSERT_TRUE(client_->Delete("/rc/coordinator").ok());
  ASSERT_TRUE(client_->Put("/rc/coordinator", "{}").ok());
  ring.epoch = 4;
  absl::Status s = SaveEtcdDataRing(client_.get(), "/rc", ring, guard);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("not the coordinator any more"), std::string::npos) << s;
  EXPECT_EQ(SaveEtcdDataPurge(client_.get(), "/rc", false, guard).code(),
            absl::StatusCode::kFailedPrecondition);
  auto got = LoadEtcdDataRing(client_.get(), "/rc");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->epoch, 3u);
  // The catalog too: a catalog attached with the old term's guard changes nothing in etcd.
  EtcdCatalogStore store(client_.get(), "/rc");
  store.SetGuard(guard);
  auto catalog = Open("guarded.txt");
  ASSERT_TRUE(catalog->AttachStore(&store).ok());
  EXPECT_FALSE(catalog->Create("late", 1 << 20, 0, 2).ok())
      << "a VDI created by a deposed coordinator";
  auto late = client_->Get("/rc/vdis/late");
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->has_value());
  pending = LoadEtcdDataPurge(client_.get(), "/rc");
  ASSERT_TRUE(pending.ok());
  EXPECT_TRUE(*pending) << "the purge mark stays for the new leader to finish";

  // The new term's guard: the mark is cleared.
  kv = client_->Get("/rc/coordinator");
  ASSERT_TRUE(kv.ok() && kv->has_value());
  const auto now =
      membership::TxnCompare::CreateRevisionIs("/rc/coordinator", (*kv)->create_revision);
  ASSERT_TRUE(SaveEtcdDataPurge(client_.get(), "/rc", false, now).ok());
  store.SetGuard(now);
  EXPECT_TRUE(catalog->Create("current", 1 << 20, 0, 2).ok());
  auto current = client_->Get("/rc/vdis/current");
  ASSERT_TRUE(current.ok());
  EXPECT_TRUE(current->has_value()) << "the current term's catalog write lands";
  pending = LoadEtcdDataPurge(client_.get(), "/rc");
  ASSERT_TRUE(pending.ok());
  EXPECT_FALSE(*pending);
}

}  // namespace
}  // namespace ringcache::coordinator
