#include "common/errors.h"

#include <gtest/gtest.h>

#include "common/grpc_status.h"

namespace ringcache {
namespace {

TEST(ErrorsTest, KindSurvivesAnnotationAndGrpc) {
  for (ErrorKind k : {ErrorKind::kFenced, ErrorKind::kStaleEpoch, ErrorKind::kUnknownVdi,
                      ErrorKind::kOlderVersion, ErrorKind::kDeviceFailed, ErrorKind::kStaleTerm,
                      ErrorKind::kLogSealed}) {
    absl::Status s = TypedError(k, "why");
    EXPECT_TRUE(IsKind(s, k)) << ErrorKindName(k);
    EXPECT_TRUE(IsKind(Annotate(s, "write to node 3: "), k));
    absl::Status back = FromGrpc(ToGrpc(s), "cache node 3");
    EXPECT_TRUE(IsKind(back, k)) << back;
    EXPECT_EQ(back.code(), s.code());
    EXPECT_EQ(back.message(), "cache node 3: why");
  }
}

TEST(ErrorsTest, CodesFollowRetryRules) {
  EXPECT_TRUE(absl::IsUnavailable(TypedError(ErrorKind::kFenced, "")));
  EXPECT_TRUE(absl::IsFailedPrecondition(TypedError(ErrorKind::kOlderVersion, "")));
  EXPECT_TRUE(absl::IsFailedPrecondition(TypedError(ErrorKind::kStaleEpoch, "")));
}

TEST(ErrorsTest, MessageTextIsNotAKind) {
  // Nobody matches text: an untyped error that happens to say "fenced:" is no fence.
  absl::Status s = absl::UnavailableError("fenced: but untyped");
  EXPECT_EQ(KindOf(s), ErrorKind::kNone);
  EXPECT_EQ(KindOf(FromGrpc(ToGrpc(s), "x")), ErrorKind::kNone);
  EXPECT_EQ(KindOf(absl::OkStatus()), ErrorKind::kNone);
}

}  // namespace
}  // namespace ringcache
