#include "common/formats.h"

#include <gtest/gtest.h>

#include "common/version.h"

namespace ringcache {
namespace {

TEST(FormatsTest, ReadersAcceptTheirRangeAndNameTheVersionsOtherwise) {
  constexpr Format f{"thing", 3, 2, "test thing"};
  EXPECT_TRUE(CheckFormat(f, 2, "/x").ok());
  EXPECT_TRUE(CheckFormat(f, 3, "/x").ok());
  const absl::Status newer = CheckFormat(f, 4, "/x");
  EXPECT_TRUE(absl::IsFailedPrecondition(newer));
  EXPECT_EQ(newer.message(),
            "/x: test thing format version 4; this release reads thing versions 2-3. It was "
            "written by a newer release: run that release (or a newer one) here");
  const absl::Status older = CheckFormat(f, 1, "/x");
  EXPECT_TRUE(absl::IsFailedPrecondition(older));
  EXPECT_NE(older.message().find("too old"), absl::string_view::npos) << older;
}

TEST(FormatsTest, VersionPrintsTheReleaseThenEveryFormat) {
  const std::string v = VersionLine("prog");
  EXPECT_EQ(v.substr(0, v.find('\n')), std::string("prog ") + Version());
  EXPECT_NE(v.find("\nformats: slot-file 3 (reads 1-3), slot-entry 2 (reads 1-2), vdi-table 2 "
                   "(reads 1-2), datanode-store 1 (reads 1), log-record 2 (reads 1-2), block-wire "
                   "2 (reads 2), vdi-catalog 2 (reads 1-2), node-api 3 (reads 1-3), etcd-value 2 "
                   "(reads 1-2), backup 1 (reads 1)"),
            std::string::npos)
      << v;
  for (const Format& f : kFormats) EXPECT_LE(f.reads_from, f.writes) << f.name;
}

TEST(FormatsTest, APeerSpeakingAnotherNodeApiIsRefusedNamingBothVersions) {
  EXPECT_TRUE(CheckPeerApi(0, "cache node 1").ok()) << "a release before 0.2.0 speaks version 1";
  EXPECT_TRUE(CheckPeerApi(kNodeApiFormat.writes, "cache node 1").ok());
  const absl::Status newer = CheckPeerApi(kNodeApiFormat.writes + 1, "data node 2");
  EXPECT_TRUE(absl::IsFailedPrecondition(newer));
  EXPECT_NE(newer.message().find("data node 2 speaks node-api version"), absl::string_view::npos)
      << newer;
  EXPECT_NE(newer.message().find("this release speaks versions"), absl::string_view::npos)
      << newer;
}

}  // namespace
}  // namespace ringcache
