#include "coordinator/catalog.h"

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "gtest/gtest.h"
#include "membership/etcd_value.h"

namespace ringcache::coordinator {
namespace {

// VDI 3, "disk": 1 MiB of 4 KiB blocks in 4 MiB objects, three replicas; nothing else set.
VdiRecord DiskRecord() {
  VdiRecord r;
  r.geometry.set_vdi_id(3);
  r.geometry.set_name("disk");
  r.geometry.set_size_bytes(1 << 20);
  r.geometry.set_object_size(4 << 20);
  r.geometry.set_block_size(4096);
  r.geometry.set_replication(3);
  return r;
}

TEST(CatalogLineTest, AccessRoundTripsAndOldLinesReadAsOpen) {
  VdiRecord r = DiskRecord();
  // A record without access settings is written as before this field existed.
  const std::string plain = EncodeVdiLine(r);
  EXPECT_EQ(plain.find("ro"), std::string::npos);
  absl::StatusOr<VdiRecord> back = DecodeVdiLine(plain);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->read_only);
  EXPECT_TRUE(back->allowed_clients.empty());

  r.read_only = true;
  r.allowed_clients = {"alice", "hv-2.example"};
  back = DecodeVdiLine(EncodeVdiLine(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->read_only);
  EXPECT_EQ(back->allowed_clients, r.allowed_clients);

  // The VDI's own cache policy; a line without one reads as the nodes' default.
  EXPECT_EQ(plain.find("policy="), std::string::npos);
  EXPECT_EQ(back->policy, "");
  r.policy = "s3fifo+cmf(threshold=0.9,window=64)";
  back = DecodeVdiLine(EncodeVdiLine(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->policy, r.policy);
  EXPECT_FALSE(DecodeVdiLine(plain + " policy=").ok());

  r.read_only_clients = {"carol"};
  r.public_export = true;
  back = DecodeVdiLine(EncodeVdiLine(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->read_only_clients, r.read_only_clients);
  EXPECT_TRUE(back->public_export);

  // I/O limits (feature level 2): only when set, so that a record without them reads in 0.1.0.
  EXPECT_EQ(EncodeVdiLine(r).find("qos="), std::string::npos);
  r.qos.set_read_iops(1000);
  r.qos.set_write_bytes_per_s(50 << 20);
  r.qos.set_burst_ms(250);
  const std::string limited = EncodeVdiLine(r);
  EXPECT_NE(limited.find(" qos=ri:1000,wb:52428800,burst:250"), std::string::npos) << limited;
  back = DecodeVdiLine(limited);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->qos.SerializeAsString(), r.qos.SerializeAsString());
  for (const char* bad : {" qos=", " qos=ri:0", " qos=xx:5", " qos=ri:5,", " qos=ri"}) {
    EXPECT_FALSE(DecodeVdiLine(plain + bad).ok()) << bad;
  }
  // A share of the cache nodes' SSDs rides in the same token and reaches the geometry (which
  // carries it to the cache nodes); alone, without I/O limits, too.
  r.qos.Clear();
  r.qos.set_ssd_min_permille(50);
  r.qos.set_ssd_max_permille(400);
  const std::string shared = EncodeVdiLine(r);
  EXPECT_NE(shared.find(" qos=smin:50,smax:400"), std::string::npos) << shared;
  back = DecodeVdiLine(shared);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->qos.ssd_min_permille(), 50u);
  EXPECT_EQ(back->geometry.ssd_min_permille(), 50u);
  EXPECT_EQ(back->geometry.ssd_max_permille(), 400u);
  EXPECT_FALSE(QosLimited(back->qos));
  EXPECT_TRUE(QosShares(back->qos));
  EXPECT_FALSE(DecodeVdiLine(plain + " qos=smax:1001").ok());
  // A reservation (vdi-catalog 2, as the limits) is a limit of its own: the record is limited.
  r.qos.Clear();
  r.qos.set_reserve_iops(300);
  r.qos.set_reserve_bytes_per_s(1 << 20);
  const std::string reserved = EncodeVdiLine(r);
  EXPECT_NE(reserved.find(" qos=rsv:300,rsvb:1048576"), std::string::npos) << reserved;
  back = DecodeVdiLine(reserved);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->qos.reserve_iops(), 300u);
  EXPECT_EQ(back->qos.reserve_bytes_per_s(), 1u << 20);
  EXPECT_TRUE(QosLimited(back->qos));
  EXPECT_FALSE(back->read_only_clients.empty() || DecodeVdiLine(plain + " allow_ro=").ok());
  EXPECT_FALSE(DecodeVdiLine(plain + " rx").ok());
  EXPECT_FALSE(DecodeVdiLine(plain + " allow=a,,b").ok());
}

// In etcd at feature level 3 a record is an EtcdValue (membership/etcd_value.h) with the same
// content and the same rules as its line; lines of version 1 still read.
TEST(CatalogLineTest, AnEtcdValueCarriesTheRecordUnderTheLinesRules) {
  membership::ScopedClusterFeatureLevel level(membership::kEtcdValueFeatureLevel);
  VdiRecord r = DiskRecord();
  r.mode = v1::WRITEAROUND;
  r.policy = "lru+sieve(adapt=1)";
  r.read_only = true;
  r.allowed_clients = {"alice", "hv-2.example"};
  r.read_only_clients = {"carol"};
  r.public_export = true;
  r.qos.set_read_iops(1000);
  r.qos.set_ssd_max_permille(400);
  ApplyShares(&r);
  const std::string value = EncodeVdiValue(r);
  EXPECT_TRUE(membership::IsEtcdValue(value));
  absl::StatusOr<VdiRecord> back = DecodeVdiValue(value);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EncodeVdiLine(*back), EncodeVdiLine(r));
  EXPECT_EQ(back->geometry.ssd_max_permille(), 400u);
  back = DecodeVdiValue(EncodeVdiLine(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EncodeVdiLine(*back), EncodeVdiLine(r));

  VdiRecord bad = r;
  bad.allowed_clients = {"not ok"};
  EXPECT_TRUE(absl::IsDataLoss(DecodeVdiValue(EncodeVdiValue(bad)).status()));
  bad = r;
  bad.qos.set_ssd_max_permille(1001);
  EXPECT_TRUE(absl::IsDataLoss(DecodeVdiValue(EncodeVdiValue(bad)).status()));
  bad = r;
  bad.geometry.set_block_size(3000);
  EXPECT_TRUE(absl::IsDataLoss(DecodeVdiValue(EncodeVdiValue(bad)).status()));
}

TEST(CatalogTest, SetAccessIsSavedAndValidated) {
  const std::string path = ::testing::TempDir() + "/catalog_access.txt";
  std::filesystem::remove(path);
  {
    auto c = Catalog::Open(path, VdiDefaults());
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Create("d1", 1 << 20, 0, 0).ok());
    AccessChange bad;
    bad.allowed_clients = std::vector<std::string>{"bad name"};
    EXPECT_TRUE(absl::IsInvalidArgument((*c)->SetAccess("d1", bad).status()));
    AccessChange ro;
    ro.read_only = true;
    EXPECT_TRUE(absl::IsNotFound((*c)->SetAccess("nope", ro).status()));
    ro.allowed_clients = std::vector<std::string>{"alice"};
    auto r = (*c)->SetAccess("d1", ro);
    ASSERT_TRUE(r.ok()) << r.status();
    // Unset fields stay as they are.
    r = (*c)->SetAccess("d1", AccessChange());
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->read_only);
    EXPECT_FALSE(r->public_export);
  }
  {
    auto c = Catalog::Open(path, VdiDefaults());
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(absl::IsNotFound((*c)->SetPolicy("nope", "arc")));
    EXPECT_TRUE(absl::IsInvalidArgument((*c)->SetPolicy("d1", "arc + sieve")));
    ASSERT_TRUE((*c)->SetPolicy("d1", "arc+sieve").ok());
  }
  auto reopened = Catalog::Open(path, VdiDefaults());
  ASSERT_TRUE(reopened.ok());
  auto r = (*reopened)->Find("d1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->policy, "arc+sieve");
  EXPECT_TRUE(r->read_only);
  EXPECT_EQ(r->allowed_clients, std::vector<std::string>{"alice"});
}

// `vdi allow|deny` edit the lists one identity at a time; the last identity cannot be denied,
// since empty lists let any client with a certificate in.
TEST(CatalogTest, AllowAndDenyEditTheListsOneIdentityAtATime) {
  const std::string path = ::testing::TempDir() + "/catalog_allow.txt";
  std::filesystem::remove(path);
  auto c = Catalog::Open(path, VdiDefaults());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Create("d1", 1 << 20, 0, 0).ok());
  auto change = [&](const std::string& allow, bool ro, const std::string& deny) {
    AccessChange a;
    a.allow = allow;
    a.allow_read_only = ro;
    a.deny = deny;
    return (*c)->SetAccess("d1", a);
  };
  ASSERT_TRUE(change("alice", false, "").ok());
  auto r = change("bob", true, "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->allowed_clients, std::vector<std::string>{"alice"});
  EXPECT_EQ(r->read_only_clients, std::vector<std::string>{"bob"});
  r = change("alice", true, "");  // alice moves to the read-only list
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->allowed_clients.empty());
  EXPECT_EQ(r->read_only_clients, (std::vector<std::string>{"bob", "alice"}));
  r = change("", false, "bob");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->read_only_clients, std::vector<std::string>{"alice"});
  r = change("", false, "alice");
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("--allow-any"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(change("bad name", false, "").status()));
  // Neither a duplicate entry nor allowing and denying at once empties the lists by the back
  // door; emptying them on purpose (--allow-any) still works.
  AccessChange twice;
  twice.allowed_clients = std::vector<std::string>{"dave", "dave"};
  r = (*c)->SetAccess("d1", twice);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->allowed_clients, std::vector<std::string>{"dave"});
  EXPECT_TRUE(absl::IsFailedPrecondition(change("", false, "dave").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(change("dave", false, "dave").status()));
  AccessChange any;
  any.allowed_clients = std::vector<std::string>{};
  r = (*c)->SetAccess("d1", any);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->allowed_clients.empty() && r->read_only_clients.empty());
  ASSERT_TRUE(change("alice", true, "").ok());
  AccessChange pub;
  pub.public_export = true;
  ASSERT_TRUE((*c)->SetAccess("d1", pub).ok());
  auto reopened = Catalog::Open(path, VdiDefaults());
  ASSERT_TRUE(reopened.ok());
  auto back = (*reopened)->Find("d1");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->public_export);
  EXPECT_EQ(back->read_only_clients, std::vector<std::string>{"alice"});
}

// The store's records in memory. `during_load`, when set, runs inside LoadAll after the records
// were read: what another thread of the gateway does while a reload waits for etcd.
class MemoryStore : public CatalogStore {
 public:
  absl::StatusOr<Contents> LoadAll() override {
    Contents out;
    out.next_id = next_id_;
    for (const auto& [name, r] : records_) out.records.push_back(r);
    if (during_load) {
      auto hook = std::move(during_load);
      during_load = nullptr;
      hook();
    }
    return out;
  }
  absl::Status Put(const VdiRecord& r, uint32_t next_id) override {
    records_[r.geometry.name()] = r;
    next_id_ = next_id;
    return absl::OkStatus();
  }
  absl::Status Remove(const std::string& name) override {
    records_.erase(name);
    return absl::OkStatus();
  }
  std::function<void()> during_load;

 private:
  std::map<std::string, VdiRecord> records_;
  uint32_t next_id_ = 1;
};

TEST(CatalogTest, ReloadNeverUndoesAChangeMadeWhileItRead) {
  const std::string path = ::testing::TempDir() + "/catalog_reload_race.txt";
  std::filesystem::remove(path);
  auto c = Catalog::Open(path, VdiDefaults());
  ASSERT_TRUE(c.ok());
  MemoryStore store;
  ASSERT_TRUE((*c)->AttachStore(&store).ok());
  ASSERT_TRUE((*c)->Create("old", 1 << 20, 0, 0).ok());
  // A create lands while the reload's read is on its way: the read is older than the catalog.
  store.during_load = [&] { ASSERT_TRUE((*c)->Create("new", 1 << 20, 0, 0).ok()); };
  auto reloaded = (*c)->Reload();
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_TRUE((*c)->Find("new").ok()) << "the reload dropped a VDI created during its read";
  EXPECT_TRUE((*c)->Find("old").ok());
  // A delete in the same place is not undone either.
  store.during_load = [&] { ASSERT_TRUE((*c)->Delete("old").ok()); };
  ASSERT_TRUE((*c)->Reload().ok());
  EXPECT_FALSE((*c)->Find("old").ok()) << "the reload brought a deleted VDI back";
  // A change made elsewhere (another gateway) still arrives.
  VdiRecord other = *(*c)->Find("new");
  other.geometry.set_name("elsewhere");
  other.geometry.set_vdi_id(9);
  ASSERT_TRUE(store.Put(other, 10).ok());
  auto changed = (*c)->Reload();
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_TRUE((*c)->Find("elsewhere").ok());
}

// A deleted VDI's id is never given again: its blocks and log records may still be on the
// nodes, and a connection may still be open to it.
TEST(CatalogTest, ADeletedVdisIdIsNeverGivenAgainAlsoAfterARestart) {
  const std::string path = ::testing::TempDir() + "/catalog_ids.txt";
  std::remove(path.c_str());
  {
    auto c = Catalog::Open(path, VdiDefaults{});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Create("a", 1 << 20, 0, 0).ok());
    auto b = (*c)->Create("b", 1 << 20, 0, 0);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->geometry.vdi_id(), 2u);
    ASSERT_TRUE((*c)->Delete("b").ok());
    auto again = (*c)->Create("b2", 1 << 20, 0, 0);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->geometry.vdi_id(), 3u);
    ASSERT_TRUE((*c)->Delete("b2").ok());
  }
  auto c = Catalog::Open(path, VdiDefaults{});  // the gateway restarted
  ASSERT_TRUE(c.ok());
  auto after = (*c)->Create("c", 1 << 20, 0, 0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->geometry.vdi_id(), 4u) << "ids 2 and 3 belonged to deleted VDIs";

  // A store that kept a higher next id (another coordinator gave ids since) wins, and the
  // store learns the ids given here.
  MemoryStore store;
  VdiRecord elsewhere = *(*c)->Find("c");
  elsewhere.geometry.set_name("elsewhere");
  elsewhere.geometry.set_vdi_id(7);
  ASSERT_TRUE(store.Put(elsewhere, 9).ok());  // 8 was given and deleted
  ASSERT_TRUE((*c)->AttachStore(&store).ok());
  auto next = (*c)->Create("d", 1 << 20, 0, 0);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->geometry.vdi_id(), 9u);
  auto contents = store.LoadAll();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->next_id, 10u);
}

// Ids stop below FF000000: a data node's versioned log record begins with the byte FF, which the
// top byte of a VDI id must never be (datanode/store_keys.h).
TEST(CatalogTest, IdsStopBelowTheLogRecordsVersionMark) {
  const std::string path = ::testing::TempDir() + "/catalog_last_ids.txt";
  std::remove(path.c_str());
  auto c = Catalog::Open(path, VdiDefaults{});
  ASSERT_TRUE(c.ok());
  MemoryStore store;
  VdiRecord high;
  high.geometry.set_name("high");
  high.geometry.set_vdi_id(kMaxVdiId - 1);
  high.geometry.set_size_bytes(1 << 20);
  high.geometry.set_object_size(1 << 20);
  high.geometry.set_block_size(4096);
  high.geometry.set_replication(3);
  ASSERT_TRUE(store.Put(high, kMaxVdiId).ok());
  ASSERT_TRUE((*c)->AttachStore(&store).ok());
  auto last = (*c)->Create("last", 1 << 20, 0, 0);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->geometry.vdi_id(), kMaxVdiId);
  EXPECT_LT(last->geometry.vdi_id() >> 24, 0xFFu);
  auto none = (*c)->Create("none", 1 << 20, 0, 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kResourceExhausted) << none.status();
}

}  // namespace
}  // namespace ringcache::coordinator
