// The block data protocol end to end in one process: a real cache node (with real data nodes),
// its DataServer, and the gateway's DataChannel.
#include "gateway/data_channel.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "cachenode/data_server.h"
#include "cachenode/service.h"
#include "cachenode/testing/cache_node_harness.h"
#include "common/socket.h"
#include "gtest/gtest.h"

namespace ringcache::gateway {
namespace {

class DataChannelTest : public cachenode::testing::CacheNodeHarness {
 protected:
  void SetUp() override {
    SetUpCluster(3, 2, 1);
    Start();
    gate_ = std::make_unique<cachenode::RequestGate>(node_.get(), &registry_);
    StartServer(0);
  }
  void TearDown() override {
    server_.reset();
    gate_.reset();
    CacheNodeHarness::TearDown();
  }
  void StartServer(int port) {
    auto s = cachenode::DataServer::Start({"127.0.0.1", port}, node_.get(), gate_.get(),
                                          &registry_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  static wire::Request Req(wire::Op op, uint64_t object, uint32_t offset, uint32_t len,
                           uint64_t epoch = 0) {
    return {op, 1, object, offset, len, 30000, epoch};
  }

  std::unique_ptr<cachenode::RequestGate> gate_;
  std::unique_ptr<cachenode::DataServer> server_;
};

TEST_F(DataChannelTest, WritesReadBackAndTrimZeroes) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::string data(3 * 4096 + 100, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 1);
  bool sent = false;
  ASSERT_TRUE(ch.Call(Req(wire::Op::kWrite, 2, 500, data.size()), data.data(), nullptr, &sent)
                  .ok());
  EXPECT_TRUE(sent);
  std::string back(data.size(), '\0');
  ASSERT_TRUE(ch.Call(Req(wire::Op::kRead, 2, 500, data.size()), nullptr, back.data(), &sent)
                  .ok());
  EXPECT_EQ(back, data);
  // The same through the node directly: the data protocol wrote where gRPC would have.
  std::string direct(data.size(), '\0');
  ASSERT_TRUE(node_->Read(1, 2, 500, data.size(), direct.data()).ok());
  EXPECT_EQ(direct, data);
  ASSERT_TRUE(ch.Call(Req(wire::Op::kZero, 2, 500, 4096), nullptr, nullptr, &sent).ok());
  ASSERT_TRUE(ch.Call(Req(wire::Op::kRead, 2, 500, 4096), nullptr, back.data(), &sent).ok());
  EXPECT_EQ(back.substr(0, 4096), std::string(4096, '\0'));
}

TEST_F(DataChannelTest, RefusalsArriveTypedAndTheConnectionStaysUsable) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::string buf(4096, 'x');
  bool sent = false;
  // A newer epoch is admitted, an older one refused as stale.
  ASSERT_TRUE(ch.Call(Req(wire::Op::kWrite, 0, 0, 4096, 10), buf.data(), nullptr, &sent).ok());
  absl::Status s = ch.Call(Req(wire::Op::kWrite, 0, 0, 4096, 9), buf.data(), nullptr, &sent);
  EXPECT_TRUE(IsKind(s, ErrorKind::kStaleEpoch)) << s;
  // An unknown VDI.
  wire::Request r = Req(wire::Op::kRead, 0, 0, 4096);
  r.vdi = 77;
  s = ch.Call(r, nullptr, buf.data(), &sent);
  EXPECT_TRUE(IsKind(s, ErrorKind::kUnknownVdi)) << s;
  // A fenced node.
  ASSERT_TRUE(node_->ownership()->Quarantine("test").ok());
  s = ch.Call(Req(wire::Op::kRead, 0, 0, 4096), nullptr, buf.data(), &sent);
  EXPECT_TRUE(IsKind(s, ErrorKind::kFenced)) << s;
  ASSERT_TRUE(node_->Readmit(10).ok());
  EXPECT_TRUE(ch.Call(Req(wire::Op::kRead, 0, 0, 4096, 10), nullptr, buf.data(), &sent).ok());
}

TEST_F(DataChannelTest, ManyCallersInParallel) {
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::string data(4096, static_cast<char>('a' + t)), back(4096, '\0');
      for (int i = 0; i < 50; ++i) {
        bool sent = false;
        const uint32_t off = static_cast<uint32_t>(t) * 4096;
        if (!ch.Call(Req(wire::Op::kWrite, 3, off, 4096), data.data(), nullptr, &sent).ok() ||
            !ch.Call(Req(wire::Op::kRead, 3, off, 4096), nullptr, back.data(), &sent).ok() ||
            back != data) {
          ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(DataChannelTest, ARestartedServerIsReachedThroughFreshConnections) {
  const int port = server_->port();
  DataChannel ch("127.0.0.1", port, 30000);
  std::string buf(4096, 'r');
  bool sent = false;
  ASSERT_TRUE(ch.Call(Req(wire::Op::kWrite, 1, 0, 4096), buf.data(), nullptr, &sent).ok());
  server_.reset();  // the pooled connection is closed by the server
  sent = true;
  absl::Status down = ch.Call(Req(wire::Op::kRead, 1, 0, 4096), nullptr, buf.data(), &sent);
  EXPECT_FALSE(down.ok());
  EXPECT_FALSE(sent) << "nothing was listening: the caller may take another path";
  StartServer(port);
  std::string back(4096, '\0');
  EXPECT_TRUE(ch.Call(Req(wire::Op::kRead, 1, 0, 4096), nullptr, back.data(), &sent).ok());
  EXPECT_EQ(back, buf);
}

TEST_F(DataChannelTest, CancelInFlightBreaksAWaitingCall) {
  // A peer that accepts and never answers.
  int port = 0;
  auto listen_fd = ListenTcp("127.0.0.1", 0, &port);
  ASSERT_TRUE(listen_fd.ok());
  DataChannel ch("127.0.0.1", port, 60000);
  absl::Status result;
  bool sent = false;
  std::thread caller([&] {
    std::string buf(4096, '\0');
    result = ch.Call(Req(wire::Op::kRead, 0, 0, 4096), nullptr, buf.data(), &sent);
  });
  const int conn = accept(*listen_fd, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  char head[wire::kRequestBytes];
  ASSERT_TRUE(ReadFull(conn, head, sizeof(head), absl::InfiniteFuture()).ok());  // it was sent
  ch.CancelInFlight();
  caller.join();
  EXPECT_TRUE(absl::IsCancelled(result)) << result;
  EXPECT_TRUE(sent);
  close(conn);
  close(*listen_fd);
}

TEST_F(DataChannelTest, MalformedRequestClosesOnlyThatConnection) {
  auto fd = DialTcp("127.0.0.1", server_->port(), absl::Seconds(5));
  ASSERT_TRUE(fd.ok());
  char junk[wire::kRequestBytes] = {1, 2, 3};
  ASSERT_EQ(send(*fd, junk, sizeof(junk), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(junk)));
  char c;
  bool eof = false;
  EXPECT_FALSE(ReadFull(*fd, &c, 1, absl::Now() + absl::Seconds(10), &eof).ok());
  EXPECT_TRUE(eof) << "the server closes a connection that does not speak the protocol";
  close(*fd);
  DataChannel ch("127.0.0.1", server_->port(), 30000);
  std::string buf(4096, '\0');
  bool sent = false;
  EXPECT_TRUE(ch.Call(Req(wire::Op::kRead, 5, 0, 4096), nullptr, buf.data(), &sent).ok());
}

}  // namespace
}  // namespace ringcache::gateway
