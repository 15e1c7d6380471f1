// The cache node's gRPC service in process: ring epochs on the data path (RingEpochGuard) — a
// block request routed with an older cache ring than the node has seen is refused and does
// nothing; requests without an epoch (0) are not checked.
#include "cachenode/service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>

#include "cachenode/testing/cache_node_harness.h"
#include "gtest/gtest.h"

namespace ringcache::cachenode {
namespace {

TEST(RingEpochGuardTest, RemembersTheHighestAndRefusesOlder) {
  RingEpochGuard g;
  EXPECT_TRUE(g.Admit(0).ok());
  EXPECT_TRUE(g.Admit(5).ok());
  EXPECT_TRUE(g.Admit(5).ok());
  EXPECT_EQ(g.highest(), 5u);
  absl::Status s = g.Admit(4);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("stale ring epoch 4"), std::string::npos) << s;
  EXPECT_TRUE(g.Admit(0).ok()) << "unstamped requests (tools) are not checked";
  EXPECT_TRUE(g.Admit(9).ok());
  EXPECT_EQ(g.highest(), 9u);
  EXPECT_FALSE(g.Admit(5).ok());
}

class ServiceEpochTest : public testing::CacheNodeHarness {};

TEST_F(ServiceEpochTest, StaleWriteIsRefusedAndChangesNothing) {
  SetUpCluster(2, 1, 1);
  Start();
  CacheNodeService service(node_.get(), &registry_);
  auto write = [&](uint64_t epoch, char fill) {
    v1::CacheWriteRequest req;
    req.set_vdi_id(1);
    req.set_object_index(3);
    req.set_offset(0);
    req.set_data(std::string(4096, fill));
    req.set_epoch(epoch);
    v1::CacheWriteResponse resp;
    grpc::ServerContext ctx;
    return service.Write(&ctx, &req, &resp);
  };
  auto read = [&](uint64_t epoch, std::string* out) {
    v1::CacheReadRequest req;
    req.set_vdi_id(1);
    req.set_object_index(3);
    req.set_length(4096);
    req.set_epoch(epoch);
    v1::CacheReadResponse resp;
    grpc::ServerContext ctx;
    grpc::Status s = service.Read(&ctx, &req, &resp);
    *out = resp.data();
    return s;
  };
  ASSERT_TRUE(write(7, 'a').ok());
  grpc::Status s = write(6, 'b');  // a sender that missed the change to epoch 7
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("stale ring epoch 6"), std::string::npos);
  std::string got;
  EXPECT_EQ(read(6, &got).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(read(7, &got).ok());
  EXPECT_EQ(got, std::string(4096, 'a')) << "the refused write did nothing";
  ASSERT_TRUE(write(0, 'c').ok());
  ASSERT_TRUE(read(8, &got).ok());
  EXPECT_EQ(got, std::string(4096, 'c'));
  EXPECT_EQ(registry_.GetCounter("ringcache_cachenode_stale_epoch_requests_total", "")->Value(),
            2.0);
}

TEST_F(ServiceEpochTest, WriteAndTrimCheckTheGateRightBeforeWriting) {
  SetUpCluster(2, 1, 1);
  Start();
  const std::string a(4096, 'a'), b(4096, 'b');
  ASSERT_TRUE(node_->Write(1, 2, 0, 4096, a.data()).ok());
  std::atomic<bool> open{false};
  node_->SetDestageGate([&] { return open.load(); });
  // Fenced (the lease ran out after the request passed the service's check): nothing lands.
  absl::Status s = node_->Write(1, 2, 0, 4096, b.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("fenced:"), std::string::npos) << s;
  EXPECT_EQ(node_->Trim(1, 2, 0, 4096, false).code(), absl::StatusCode::kUnavailable);
  open.store(true);
  std::string got(4096, '\0');
  ASSERT_TRUE(node_->Read(1, 2, 0, 4096, got.data()).ok());
  EXPECT_EQ(got, a);
  ASSERT_TRUE(node_->Write(1, 2, 0, 4096, b.data()).ok());
  ASSERT_TRUE(node_->Read(1, 2, 0, 4096, got.data()).ok());
  EXPECT_EQ(got, b);
}

}  // namespace
}  // namespace ringcache::cachenode
