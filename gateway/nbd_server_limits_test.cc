// NbdServer's limits and accounting: connections in total and per client address, the
// handshake, request and idle timeouts, and the per-export metrics (the fixture: testing/nbd_server_fixture.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "gateway/nbd_server.h"
#include "gateway/testing/nbd_server_fixture.h"

namespace ringcache::gateway::nbd_test {
namespace {

TEST_F(NbdServerTest, ConnectionLimitClosesExtraConnections) {
  NbdServerConfig config;
  config.max_connections = 1;
  StartServer(config);
  auto first = Client();
  NbdRawClient second;
  ASSERT_TRUE(second.Connect(port_));
  EXPECT_TRUE(second.WaitClosed());
  std::string data;
  EXPECT_EQ(first->Read(0, 512, &data), 0);
}

TEST_F(NbdServerTest, OneHostCannotHoldEverySlot) {
  NbdServerConfig config;
  config.max_connections = 4;
  config.max_connections_per_peer = 2;
  StartServer(config);
  auto first = Client();
  auto second = Client();
  NbdRawClient third;  // a third one from 127.0.0.1: closed at once
  ASSERT_TRUE(third.Connect(port_));
  EXPECT_TRUE(third.WaitClosed());
  NbdRawClient other;  // another address still gets a slot
  ASSERT_TRUE(other.Connect(port_, 20, "127.0.0.2"));
  EXPECT_EQ(other.Handshake("disk"), "");
  std::string data;
  EXPECT_EQ(other.Read(0, 512, &data), 0);
  first.reset();  // a slot given back is taken again
  for (int i = 0; i < 500 && server_->active_connections() != 2; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Client()->Read(0, 512, &data), 0);
  const std::string text = registry_.Render();
  EXPECT_NE(text.find("ringcache_nbd_connections_rejected_total{limit=\"peer\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ringcache_nbd_connections_rejected_total{limit=\"total\"} 0"),
            std::string::npos)
      << text;
  NbdServerConfig bad;
  bad.max_connections_per_peer = bad.max_connections + 1;
  EXPECT_TRUE(absl::IsInvalidArgument(bad.Validate()));
}

TEST_F(NbdServerTest, SilentClientIsDroppedAfterTheHandshakeTimeout) {
  NbdServerConfig config;
  config.handshake_timeout_ms = 100;
  StartServer(config);
  NbdRawClient c;
  ASSERT_TRUE(c.Connect(port_));
  EXPECT_TRUE(c.WaitClosed());  // greeting, then EOF
}

// Slowloris: a request header or WRITE payload begun and not finished in request_timeout_ms
// closes the connection, counted by reason.
TEST_F(NbdServerTest, RequestsThatTrickleInAreCut) {
  NbdServerConfig config;
  config.request_timeout_ms = 1500;
  StartServer(config);
  NbdRawClient header;
  ASSERT_TRUE(header.Connect(port_));
  ASSERT_EQ(header.Handshake("disk"), "");
  ASSERT_TRUE(header.SendRaw(std::string(10, '\x25')));  // 10 of the header's 28 bytes
  EXPECT_TRUE(header.WaitClosed());
  NbdRawClient payload;
  ASSERT_TRUE(payload.Connect(port_));
  ASSERT_EQ(payload.Handshake("disk"), "");
  nbd::Request w;
  w.type = nbd::kCmdWrite;
  w.length = 65536;
  ASSERT_TRUE(payload.SendRequest(w, std::string(100, 'x')));  // 100 of 65,536 bytes
  EXPECT_TRUE(payload.WaitClosed());
  const std::string text = registry_.Render();
  EXPECT_NE(text.find("reason=\"slow_request\"} 2"), std::string::npos) << text;
  // A client that sends whole requests, however far apart, is served.
  auto steady = Client();
  std::string data;
  EXPECT_EQ(steady->Read(0, 512, &data), 0);
}

// idle_timeout_ms closes a connection that sends nothing; by default (0) it stays.
TEST_F(NbdServerTest, IdleConnectionsCloseOnlyWhenAskedTo) {
  NbdServerConfig config;
  config.idle_timeout_ms = 1500;
  StartServer(config);
  NbdRawClient idle;
  ASSERT_TRUE(idle.Connect(port_));
  ASSERT_EQ(idle.Handshake("disk"), "");
  EXPECT_TRUE(idle.WaitClosed());
  EXPECT_NE(registry_.Render().find("reason=\"idle\"} 1"), std::string::npos);
  server_.reset();
  StartServer(NbdServerConfig());
  auto kept = Client();
  absl::SleepFor(absl::Milliseconds(2500));  // past a few receive timeouts
  std::string data;
  EXPECT_EQ(kept->Read(0, 512, &data), 0);
}

// The idle timeout counts from the last reply: a request that ran longer than the timeout does
// not make the connection idle the moment it is answered.
TEST_F(NbdServerTest, IdleTimeCountsFromTheLastReply) {
  NbdServerConfig config;
  config.idle_timeout_ms = 2500;
  StartServer(config);
  auto c = Client();
  ASSERT_TRUE(c->SendRequest(Req(nbd::kCmdRead, 1, kGateOffset, 4096)));
  provider_.device()->AwaitWaiting(1);
  absl::SleepFor(absl::Milliseconds(3500));  // in flight longer than the idle timeout
  provider_.device()->Open();
  std::vector<NbdRawClient::Reply> chunks;
  ASSERT_TRUE(c->ReadStructuredReply(&chunks));
  // Past the reader's next look at the clock (once a second), well within the timeout.
  absl::SleepFor(absl::Milliseconds(1200));
  std::string data;
  EXPECT_EQ(c->Read(0, 512, &data), 0) << "closed as idle right after a long request";
}

TEST_F(NbdServerTest, MetricsCountRequestsBytesAndConnections) {
  StartServer();
  {
    auto c = Client();
    ASSERT_EQ(c->Write(0, std::string(4096, 'm')), 0);
    std::string data;
    ASSERT_EQ(c->Read(0, 4096, &data), 0);
    ASSERT_EQ(c->Read(4 << 20, 512, &data), static_cast<int>(nbd::kEinval));
    ASSERT_TRUE(c->SendRequest(Req(nbd::kCmdDisc, 99, 0, 0)));
    EXPECT_TRUE(c->WaitClosed());
  }
  server_->Stop();  // joins connection threads, so the gauge is final
  const std::string text = registry_.Render();
  EXPECT_NE(
      text.find("ringcache_nbd_requests_total{command=\"read\",result=\"ok\",vdi=\"disk\"} 1"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("ringcache_nbd_requests_total{command=\"read\",result=\"einval\","
                      "vdi=\"disk\"} 1"),
            std::string::npos);
  EXPECT_NE(
      text.find("ringcache_nbd_requests_total{command=\"write\",result=\"ok\",vdi=\"disk\"} 1"),
      std::string::npos);
  EXPECT_NE(text.find("ringcache_nbd_bytes_total{direction=\"read\",vdi=\"disk\"} 4096"),
            std::string::npos);
  EXPECT_NE(text.find("ringcache_nbd_bytes_total{direction=\"write\",vdi=\"disk\"} 4096"),
            std::string::npos);
  EXPECT_NE(text.find("ringcache_nbd_connections 0"), std::string::npos);
  EXPECT_NE(
      text.find("ringcache_nbd_request_duration_seconds_count{command=\"read\",vdi=\"disk\"} 1"),
      std::string::npos);
}

TEST_F(NbdServerTest, SeriesOfADeletedExportLeaveWithItsLastConnection) {
  StartServer();
  auto c = Client();
  ASSERT_EQ(c->Write(0, std::string(4096, 'm')), 0);
  server_->ForgetExport("disk");  // deleted while a client still has it open: kept
  EXPECT_NE(registry_.Render().find("vdi=\"disk\""), std::string::npos);
  ASSERT_TRUE(c->SendRequest(Req(nbd::kCmdDisc, 99, 0, 0)));
  EXPECT_TRUE(c->WaitClosed());
  server_->Stop();  // joins the connection: its last user is gone
  const std::string text = registry_.Render();
  EXPECT_EQ(text.find("vdi=\"disk\""), std::string::npos) << text;
  EXPECT_NE(text.find("ringcache_nbd_connections 0"), std::string::npos) << text;
}

}  // namespace
}  // namespace ringcache::gateway::nbd_test
