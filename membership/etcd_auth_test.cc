// The etcd roles of the components (etcd_auth.h): what each may touch. The roles against a real
// etcd with TLS and authentication on are tested end to end (tests/e2e/tls_test.sh).
#include "membership/etcd_auth.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "membership/membership.h"

namespace ringcache::membership {
namespace {

using Access = EtcdGrant::Access;

TEST(EtcdAuthTest, EachComponentWritesOnlyItsOwnKeys) {
  auto gateway = EtcdRoleOf("/ringcache", "gateway");
  ASSERT_TRUE(gateway.ok()) << gateway.status();
  EXPECT_EQ(gateway->role, "ringcache-gateway");
  ASSERT_EQ(gateway->grants.size(), 1u);
  EXPECT_EQ(gateway->grants[0].prefix, "/ringcache/");
  EXPECT_EQ(gateway->grants[0].access, Access::kReadWrite);

  auto cache = EtcdRoleOf("/ringcache", "cachenode");
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ(cache->role, "ringcache-cachenode");
  ASSERT_EQ(cache->grants.size(), 2u);
  EXPECT_EQ(cache->grants[0].prefix, "/ringcache/");
  EXPECT_EQ(cache->grants[0].access, Access::kRead);
  EXPECT_EQ(cache->grants[1].prefix, RolePrefix("/ringcache", Role::kCache));
  EXPECT_EQ(cache->grants[1].access, Access::kReadWrite);

  auto data = EtcdRoleOf("/prod/rc", "datanode");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->role, "prod/rc-datanode");
  EXPECT_EQ(data->grants[1].prefix, RolePrefix("/prod/rc", Role::kData));

  auto admin = EtcdRoleOf("/ringcache", "admin");
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_EQ(admin->role, "root");
  EXPECT_TRUE(admin->grants.empty());
}

TEST(EtcdAuthTest, NbdClientsAndOthersGetNoRole) {
  for (const char* who : {"client", "etcd", "", "root"}) {
    auto r = EtcdRoleOf("/ringcache", who);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << who;
  }
  EXPECT_THAT(std::string(EtcdRoleOf("/ringcache", "client").status().message()),
              ::testing::HasSubstr("NBD clients get none"));
}

}  // namespace
}  // namespace ringcache::membership
