// The cache node's gRPC service in process: ring epochs on the data path (RingEpochGuard) — a
// block request routed with an older cache ring than the node has seen is refused and does
// nothing; requests without an epoch (0) are not checked.
#include "cachenode/service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <string>
#include <thread>

#include "cachenode/testing/cache_node_harness.h"
#include "common/formats.h"
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

// The node-api handshake (common/formats.h): Stats says the node's version, and a caller that
// says one the node does not speak is refused, naming both.
TEST_F(ServiceEpochTest, StatsSaysTheApiVersionAndRefusesOneItDoesNotSpeak) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(2, 1, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
  CacheNodeService service(node_.get(), &registry_);
  auto stats = [&](uint32_t version, v1::CacheStatsResponse* resp) {
    grpc::ServerContext ctx;
    v1::CacheStatsRequest req;
    req.set_api_version(version);
    return service.Stats(&ctx, &req, resp);
  };
  v1::CacheStatsResponse resp;
  ASSERT_TRUE(stats(kNodeApiFormat.writes, &resp).ok());
  EXPECT_EQ(resp.api_version(), kNodeApiFormat.writes);
  EXPECT_TRUE(stats(0, &resp).ok()) << "a release that does not say speaks version 1";
  grpc::Status newer = stats(kNodeApiFormat.writes + 1, &resp);
  EXPECT_EQ(newer.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(newer.error_message().find("node-api version"), std::string::npos)
      << newer.error_message();
}

TEST_F(ServiceEpochTest, StaleWriteIsRefusedAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(2, 1, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
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

// Control steps are fenced by the coordinator's term (docs/design.md): once a node has seen term
// 9, a step of term 8 (a coordinator that lost its election and goes on) is refused, counted and
// changes nothing; a plain flush and term 0 (static mode) are not term-fenced.
TEST_F(ServiceEpochTest, ControlStepsOfAnOlderTermAreRefused) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(2, 1, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
  CacheNodeService service(node_.get(), &registry_);
  v1::CacheWriteRequest w;
  w.set_vdi_id(1);
  w.set_object_index(3);
  w.set_data(std::string(4096, 'a'));
  v1::CacheWriteResponse wr;
  grpc::ServerContext wctx;
  ASSERT_TRUE(service.Write(&wctx, &w, &wr).ok());
  auto drop = [&](uint64_t term) {
    v1::DropBlocksRequest req;
    req.set_all(true);
    req.mutable_fence()->set_term(term);
    v1::DropBlocksResponse resp;
    grpc::ServerContext ctx;
    return service.DropBlocks(&ctx, &req, &resp);
  };
  auto handoff = [&](uint64_t term) {
    v1::CacheFlushRequest req;
    req.set_all_vdis(true);
    v1::RingMember* m = req.add_moving_under();
    m->set_id(1);
    m->set_weight(1);
    req.mutable_fence()->set_term(term);
    v1::CacheFlushResponse resp;
    grpc::ServerContext ctx;
    return service.Flush(&ctx, &req, &resp);
  };
  auto relog = [&](uint64_t term) {
    v1::RelogRecordsRequest req;
    req.mutable_fence()->set_term(term);
    v1::RelogRecordsResponse resp;
    grpc::ServerContext ctx;
    return service.RelogRecords(&ctx, &req, &resp);
  };
  ASSERT_TRUE(handoff(9).ok());
  EXPECT_EQ(node_->ownership()->term(), 9u);
  grpc::Status s = drop(8);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(s.error_message().find("stale coordinator term 8"), std::string::npos) << s.error_message();
  EXPECT_EQ(handoff(8).error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(relog(7).error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(node_->dirty_blocks(), 1u) << "the refused drop dropped nothing";
  v1::CacheFlushRequest plain;
  plain.set_all_vdis(true);
  plain.mutable_fence()->set_term(3);  // ignored: destaging is safe under any term
  v1::CacheFlushResponse fr;
  grpc::ServerContext fctx;
  EXPECT_TRUE(service.Flush(&fctx, &plain, &fr).ok());
  EXPECT_TRUE(relog(0).ok()) << "term 0 is not term-fenced";
  EXPECT_TRUE(drop(10).ok());
  EXPECT_EQ(node_->ownership()->term(), 10u);
  EXPECT_EQ(registry_.GetCounter("ringcache_cachenode_stale_term_refused_total", "")->Value(),
            3.0);
}

// Advance (the coordinator's flush with an epoch): from the call on, older requests are refused;
// it returns only once the ones admitted under an older epoch finished, whoever sent them.
TEST_F(ServiceEpochTest, AdvanceWaitsForOlderRequestsAndRefusesNewOldOnes) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(2, 1, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
  RequestGate gate(node_.get(), nullptr);
  RequestGate::Pass old_request, current;
  ASSERT_TRUE(gate.Admit(4, &old_request).ok());
  ASSERT_TRUE(gate.Admit(5, &current).ok());
  EXPECT_EQ(gate.running(), 2);
  absl::Status timed_out = gate.Advance(6, absl::Milliseconds(50));
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  EXPECT_EQ(gate.Admit(5, nullptr).code(), absl::StatusCode::kFailedPrecondition)
      << "epoch 6 was seen: requests routed on 5 are refused from now on";
  std::atomic<bool> advanced{false};
  std::thread t([&] {
    EXPECT_TRUE(gate.Advance(6, absl::Seconds(30)).ok());
    advanced = true;
  });
  old_request.Release();
  RequestGate::Pass moved = std::move(current);  // a pass moves with its request
  EXPECT_EQ(gate.running(), 1);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(advanced.load()) << "a request of epoch 5 still runs";
  moved.Release();
  t.join();
  EXPECT_TRUE(advanced.load());
  EXPECT_EQ(gate.running(), 0);
  RequestGate::Pass newer;
  ASSERT_TRUE(gate.Admit(6, &newer).ok());
  EXPECT_TRUE(gate.Advance(6, absl::Milliseconds(1)).ok()) << "only older requests are waited for";
  EXPECT_EQ(node_->epoch(), 6u);
}

TEST_F(ServiceEpochTest, WriteAndTrimCheckTheGateRightBeforeWriting) {
  ASSERT_NO_FATAL_FAILURE(SetUpCluster(2, 1, 1));
  ASSERT_NO_FATAL_FAILURE(Start());
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
