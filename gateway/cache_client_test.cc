// The gRPC cache client's calls to a node that is not there, or that speaks another API.
#include "gateway/cache_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/formats.h"
#include "gtest/gtest.h"

namespace ringcache::gateway {
namespace {

// A port of 127.0.0.1 nothing listens on (taken, then closed: connections are refused).
int RefusingPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

// The long control calls (a flush may take an hour) fail at once on a node that is not there,
// instead of waiting the hour for it to come back: a removal that flushed a node as it shut
// down used to hang there, and the gateway's stop behind it. (With the wait, this test would
// run into ctest's timeout.)
TEST(GrpcCacheClientTest, LongControlCallsFailAtOnceWhenTheNodeIsNotThere) {
  auto c = MakeGrpcCacheClient("127.0.0.1:" + std::to_string(RefusingPort()));
  const absl::StatusOr<uint64_t> flushed = c->Flush(0);
  EXPECT_TRUE(absl::IsUnavailable(flushed.status())) << flushed.status();
  const absl::Status moving = c->FlushMoving({{1, 1.0, ""}});
  EXPECT_TRUE(absl::IsUnavailable(moving)) << moving;
  const absl::StatusOr<uint64_t> dropped = c->DropBlocks(true, {});
  EXPECT_TRUE(absl::IsUnavailable(dropped.status())) << dropped.status();
  const absl::Status mode = c->SetMode(1, v1::WRITETHROUGH);
  EXPECT_TRUE(absl::IsUnavailable(mode)) << mode;
}

// Answers the probe (a Stats call) and nothing else.
class StatsOnly final : public v1::CacheNode::Service {
  grpc::Status Stats(grpc::ServerContext*, const v1::CacheStatsRequest*,
                     v1::CacheStatsResponse*) override {
    return grpc::Status::OK;
  }
};

// A node that was down and is back answers the probe after Reconnect: it does not wait out the
// channel's reconnect backoff (a second after the first refused connection). A rejoining node's
// first probe used to fail that way, and its join waited a round (1 s) more. (Without
// Reconnect the probe fails: checked.)
TEST(GrpcCacheClientTest, AReconnectReachesANodeThatCameBackAtOnce) {
  const int port = RefusingPort();
  auto c = MakeGrpcCacheClient("127.0.0.1:" + std::to_string(port));
  const absl::Status down = c->Probe(500);
  EXPECT_TRUE(absl::IsUnavailable(down)) << down;
  StatsOnly service;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  c->Reconnect(5000);
  const absl::Status up = c->Probe(500);
  EXPECT_TRUE(up.ok()) << up;
  server->Shutdown();
}

// Answers the probe as a node of a release that speaks another node-api version.
class OtherApi final : public v1::CacheNode::Service {
  grpc::Status Stats(grpc::ServerContext*, const v1::CacheStatsRequest*,
                     v1::CacheStatsResponse* resp) override {
    resp->set_api_version(kNodeApiFormat.writes + 1);
    return grpc::Status::OK;
  }
};

// A node that speaks a node-api version this release does not is refused at the probe, naming
// both versions, so that the gateway never adds it to the ring and misreads its answers.
TEST(GrpcCacheClientTest, ANodeSpeakingAnotherApiIsRefusedAtTheProbe) {
  OtherApi service;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto c = MakeGrpcCacheClient("127.0.0.1:" + std::to_string(port));
  const absl::Status probe = c->Probe(5000);
  EXPECT_TRUE(absl::IsFailedPrecondition(probe)) << probe;
  EXPECT_NE(probe.message().find("speaks node-api version"), absl::string_view::npos) << probe;
  server->Shutdown();
}

}  // namespace
}  // namespace ringcache::gateway
