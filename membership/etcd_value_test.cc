// The versioned etcd values (etcd_value.h): what a process writes follows the cluster feature
// level it noted, and readers take both versions, refusing a newer one by name.
#include "membership/etcd_value.h"

#include <string>

#include "common/formats.h"
#include "gtest/gtest.h"
#include "membership/cache_ring_state.h"
#include "membership/membership.h"

namespace ringcache::membership {
namespace {

NodeRecord SomeNode() {
  NodeRecord r;
  r.role = Role::kData;
  r.id = 7;
  r.address = "10.0.0.7:7401";
  r.http_address = "10.0.0.7:9401";
  r.capacity_bytes = 1ull << 40;
  r.weight = 1.5;
  r.zone = "rack-a";
  r.incarnation = "d4c1";
  r.release = "0.2.0";
  r.feature_level = kFeatureLevel;
  return r;
}

CacheRingState SomeRing() {
  CacheRingState s;
  s.epoch = 42;
  s.learned = {{3, "10.0.0.3:7301", 2.0}, {9, "10.0.0.9:7301", 1.0}};
  s.removed = {4};
  s.removing = {5, 6};
  s.joining = 9;
  s.weights = {{3, 1.0 / 3, 123456789}, {7, 2.5, 1 << 30}};
  s.reweighting = {8, 0.125, 4096};
  return s;
}

TEST(EtcdValueTest, BelowTheLevelEachKeyKeepsItsTextAndFromItOneVersionedMessage) {
  {
    ScopedClusterFeatureLevel level(kEtcdValueFeatureLevel - 1);
    EXPECT_FALSE(WritesEtcdValues());
    EXPECT_EQ(EncodeNodeValue(SomeNode()), EncodeNodeRecord(SomeNode()));
    EXPECT_EQ(EncodeCacheRingValue(SomeRing()), EncodeCacheRingState(SomeRing()));
    EXPECT_EQ(EncodeNumberValue(12, true), "12\n");
    EXPECT_EQ(EncodeNumberValue(12), "12");
    EXPECT_EQ(EncodeMarkValue("purge\n"), "purge\n");
  }
  ScopedClusterFeatureLevel level(kEtcdValueFeatureLevel);
  EXPECT_TRUE(WritesEtcdValues());
  const std::string node = EncodeNodeValue(SomeNode());
  const std::string ring = EncodeCacheRingValue(SomeRing());
  const std::string number = EncodeNumberValue(12, true);
  const std::string mark = EncodeMarkValue("purge\n");
  for (const std::string* v : {&node, &ring, &number, &mark}) {
    EXPECT_TRUE(IsEtcdValue(*v));
    v1::EtcdValue parsed;
    ASSERT_TRUE(parsed.ParseFromString(*v));
    EXPECT_EQ(parsed.format(), kEtcdValueFormat.writes);
  }
  auto n = DecodeNodeRecord(node);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, SomeNode());
  auto r = DecodeCacheRingState(ring);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, SomeRing());
  EXPECT_EQ(*DecodeRingEpoch(number), 12u);
  EXPECT_EQ(*DecodeMarkValue(mark, "mark"), "purge\n");
}

TEST(EtcdValueTest, ReadersTakeTheTextOfVersionOne) {
  ScopedClusterFeatureLevel level(kEtcdValueFeatureLevel);  // writing version 2 reads 1 too
  for (const std::string& text :
       {EncodeNodeRecord(SomeNode()), EncodeCacheRingState(SomeRing()), std::string("12\n"),
        std::string("12"), std::string("purge\n"), std::string("")}) {
    EXPECT_FALSE(IsEtcdValue(text)) << text;
  }
  EXPECT_EQ(*DecodeNodeRecord(EncodeNodeRecord(SomeNode())), SomeNode());
  EXPECT_EQ(*DecodeCacheRingState(EncodeCacheRingState(SomeRing())), SomeRing());
  EXPECT_EQ(*DecodeNumberValue("12", "n"), 12u);
  EXPECT_EQ(*DecodeRingEpoch("12\n"), 12u);
  EXPECT_EQ(*DecodeMarkValue("ringcachectl node remove", "m"), "ringcachectl node remove");
  EXPECT_TRUE(absl::IsDataLoss(DecodeNumberValue("twelve", "n").status()));
  // Ring weights: positive and finite, on a node.
  for (const char* bad : {"epoch 1\nweight 3 0 100\n", "epoch 1\nweight 0 1 100\n",
                          "epoch 1\nreweighting 3 -2 100\n", "epoch 1\nweight 3 nan 1\n",
                          "epoch 1\nweight 3 1\n"}) {
    EXPECT_TRUE(absl::IsDataLoss(DecodeCacheRingState(bad).status())) << bad;
  }
}

TEST(EtcdValueTest, ANewerVersionIsRefusedNamingTheVersionsAndAnotherKindIsDamage) {
  v1::EtcdValue v;
  v.set_format(kEtcdValueFormat.writes + 1);
  v.set_number(5);
  absl::StatusOr<uint64_t> newer = DecodeNumberValue(v.SerializeAsString(), "/rc/ring-epochs/x");
  EXPECT_TRUE(absl::IsFailedPrecondition(newer.status())) << newer.status();
  const std::string m(newer.status().message());
  EXPECT_NE(m.find("/rc/ring-epochs/x"), std::string::npos) << m;
  EXPECT_NE(m.find("etcd-value versions 1-2"), std::string::npos) << m;
  EXPECT_NE(m.find("newer release"), std::string::npos) << m;
  EXPECT_TRUE(absl::IsFailedPrecondition(DecodeNodeRecord(v.SerializeAsString()).status()));

  ScopedClusterFeatureLevel level(kEtcdValueFeatureLevel);
  absl::StatusOr<CacheRingState> wrong = DecodeCacheRingState(EncodeNodeValue(SomeNode()));
  EXPECT_TRUE(absl::IsDataLoss(wrong.status())) << wrong.status();
  EXPECT_NE(wrong.status().message().find("holds a node record, not a cache ring"),
            absl::string_view::npos)
      << wrong.status();
  EXPECT_TRUE(absl::IsDataLoss(DecodeNodeRecord(std::string("\x08\x02\x12\xff", 4)).status()));
  // The record's own rules hold in either version.
  NodeRecord bad = SomeNode();
  bad.address.clear();
  EXPECT_FALSE(DecodeNodeRecord(EncodeNodeValue(bad)).ok());
}

}  // namespace
}  // namespace ringcache::membership
