// Cross-process bad-input tests for the NBD server: nbd-test-server (the real NbdServer over
// in-memory exports) runs as a child process; one well-behaved client stays connected the whole
// time while a second client misbehaves on a raw socket (malformed handshake, wrong magics,
// oversized lengths, out-of-range requests, unknown commands and exports, truncated payloads,
// disconnects mid-request, garbage). Each misbehaviour must cost only the bad client an error or
// its connection: the good client keeps working, new clients can still connect, and the process
// stays up and finally stops cleanly on SIGTERM (exit code 0).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gateway/nbd_protocol.h"
#include "tests/support/nbd_raw_client.h"
#include "tests/support/process.h"

namespace ringcache {
namespace {

namespace nbd = gateway::nbd;
using testing::NbdOption;
using testing::NbdRawClient;

constexpr uint64_t kDiskSize = 16 << 20;

std::string U32(uint32_t v) {
  std::string s;
  nbd::PutU32(&s, v);
  return s;
}

class NbdBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshDir(
        std::string("nbd-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const std::string ready = dir_ + "/ready.json";
    // RINGCACHE_NBD_SERVER=local runs the same attacks against the product, ringcache-local
    // (gateway + cache nodes + data nodes), instead of the in-memory test server.
    const char* which = std::getenv("RINGCACHE_NBD_SERVER");
    if (which != nullptr && std::string(which) == "local") {
      ASSERT_TRUE(server_.Start(RINGCACHE_LOCAL_BIN,
                                {"--data-dir", dir_ + "/data", "--create-vdi", "disk:16M",
                                 "--create-vdi", "other:1M", "--nbd-listen", "127.0.0.1:0",
                                 "--admin-listen", "127.0.0.1:0", "--http-listen",
                                 "127.0.0.1:0", "--ssd-size", "64M", "--ram-size", "8M",
                                 "--ready-file", ready},
                                dir_ + "/server.log"));
    } else {
      ASSERT_TRUE(server_.Start(RINGCACHE_NBD_TEST_SERVER_BIN,
                                {"--listen", "127.0.0.1:0", "--export", "disk:16M", "--export",
                                 "other:1M", "--ready-file", ready, "--http-listen",
                                 "127.0.0.1:0", "--handshake-timeout-ms", "10000"},
                                dir_ + "/server.log"));
    }
    ASSERT_TRUE(server_.WaitReady(ready)) << testing::ReadFile(dir_ + "/server.log");
    port_ = server_.port("nbd_port");
    good_ = std::make_unique<NbdRawClient>();
    ASSERT_TRUE(good_->Connect(port_));
    ASSERT_EQ(good_->Handshake("disk"), "");
    GoodClientWorks();
  }

  void TearDown() override {
    good_.reset();
    if (server_.running()) {
      const int status = server_.Kill(SIGTERM);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "nbd-test-server did not stop cleanly, wait status " << status;
    }
    if (!HasFailure()) std::filesystem::remove_all(dir_);  // keep logs of failures
  }

  // The connected good client still gets correct answers, and the server accepts a new client.
  void GoodClientWorks() {
    ASSERT_TRUE(server_.running());
    ASSERT_EQ(::kill(server_.pid(), 0), 0) << "server process is gone";
    const uint64_t offset = (round_++ % 64) * 65536 + 8 * 1024 * 1024;
    const std::string data(4096, static_cast<char>('a' + round_ % 26));
    ASSERT_EQ(good_->Write(offset, data), 0);
    std::string back;
    ASSERT_EQ(good_->Read(offset, 4096, &back), 0);
    ASSERT_EQ(back, data);
    NbdRawClient fresh;
    ASSERT_TRUE(fresh.Connect(port_));
    ASSERT_EQ(fresh.Handshake("other", /*structured=*/false), "");
    ASSERT_EQ(fresh.Read(0, 512, &back), 0);
  }

  // Connects a client and completes only the greeting and client flags.
  std::unique_ptr<NbdRawClient> Negotiating() {
    auto c = std::make_unique<NbdRawClient>();
    EXPECT_TRUE(c->Connect(port_, 10));
    std::string greeting;
    EXPECT_TRUE(c->RecvExact(nbd::kGreetingSize, &greeting));
    EXPECT_TRUE(c->SendRaw(U32(nbd::kClientFlagFixedNewstyle | nbd::kClientFlagNoZeroes)));
    return c;
  }

  std::unique_ptr<NbdRawClient> Transmitting(bool structured = true) {
    auto c = std::make_unique<NbdRawClient>();
    EXPECT_TRUE(c->Connect(port_, 10));
    EXPECT_EQ(c->Handshake("disk", structured), "");
    return c;
  }

  static nbd::Request Req(uint16_t type, uint64_t offset, uint32_t length, uint64_t handle = 1) {
    nbd::Request r;
    r.type = type;
    r.offset = offset;
    r.length = length;
    r.handle = handle;
    return r;
  }

  // Reads one option reply and returns its type (0 if the connection failed).
  static uint32_t OptionReplyType(NbdRawClient* c) {
    std::string h, data;
    if (!c->RecvExact(20, &h)) return 0;
    if (!c->RecvExact(nbd::GetU32(h.data() + 16), &data)) return 0;
    return nbd::GetU32(h.data() + 12);
  }

  testing::DaemonProcess server_;
  std::string dir_;
  int port_ = 0;
  int round_ = 0;
  std::unique_ptr<NbdRawClient> good_;
};

TEST_F(NbdBadInputTest, MalformedHandshakeClosesOnlyThatClient) {
  {  // unknown client flags
    NbdRawClient c;
    ASSERT_TRUE(c.Connect(port_, 10));
    std::string greeting;
    ASSERT_TRUE(c.RecvExact(nbd::kGreetingSize, &greeting));
    EXPECT_EQ(nbd::GetU64(greeting.data()), nbd::kInitMagic);
    ASSERT_TRUE(c.SendRaw(U32(0xffffffff)));
    EXPECT_TRUE(c.WaitClosed());
  }
  GoodClientWorks();
  {  // an HTTP request instead of NBD
    NbdRawClient c;
    ASSERT_TRUE(c.Connect(port_, 10));
    ASSERT_TRUE(c.SendRaw("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_TRUE(c.WaitClosed());
  }
  GoodClientWorks();
  {  // malformed NBD_OPT_GO payload: an error reply, and the client may go on negotiating
    auto c = Negotiating();
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptGo, U32(1000) + "disk")));
    EXPECT_EQ(OptionReplyType(c.get()), nbd::kRepErrInvalid);
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptStructuredReply, "x")));
    EXPECT_EQ(OptionReplyType(c.get()), nbd::kRepErrInvalid);
    ASSERT_TRUE(c->SendRaw(NbdOption(77, "whatever")));
    EXPECT_EQ(OptionReplyType(c.get()), nbd::kRepErrUnsup);
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptAbort, "")));
    EXPECT_EQ(OptionReplyType(c.get()), nbd::kRepAck);
    EXPECT_TRUE(c->WaitClosed());
  }
  GoodClientWorks();
  {  // an absurd option length, then the client vanishes mid-option
    auto c = Negotiating();
    std::string header;
    nbd::PutU64(&header, nbd::kOptionMagic);
    header += U32(nbd::kOptInfo) + U32(0xffffffff) + std::string(1000, 'q');
    ASSERT_TRUE(c->SendRaw(header));
  }
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, WrongOptionMagicClosesOnlyThatClient) {
  auto c = Negotiating();
  std::string opt = NbdOption(nbd::kOptList, "");
  opt[3] ^= 0x55;
  ASSERT_TRUE(c->SendRaw(opt));
  EXPECT_TRUE(c->WaitClosed());
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, WrongRequestMagicClosesOnlyThatClient) {
  auto c = Transmitting();
  std::string bytes;
  nbd::AppendRequest(&bytes, Req(nbd::kCmdRead, 0, 512));
  bytes[0] = 0x12;
  ASSERT_TRUE(c->SendRaw(bytes));
  EXPECT_TRUE(c->WaitClosed());
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, LengthOver32MiB) {
  auto c = Transmitting(/*structured=*/false);
  std::string data;
  // A READ over the limit is refused with EINVAL and the connection stays usable.
  EXPECT_EQ(c->Read(0, (32u << 20) + 4096, &data), static_cast<int>(nbd::kEinval));
  EXPECT_EQ(c->Read(0, 4096, &data), 0);
  EXPECT_EQ(c->Command(nbd::kCmdCache, 0, (32u << 20) + 4096), static_cast<int>(nbd::kEinval));
  GoodClientWorks();
  // A WRITE over the limit: EINVAL, then the connection is closed (its payload is never read).
  ASSERT_TRUE(c->SendRequest(Req(nbd::kCmdWrite, 0, (32u << 20) + 4096, 77)));
  NbdRawClient::Reply reply;
  ASSERT_TRUE(c->ReadSimpleReply(0, &reply));
  EXPECT_EQ(reply.handle, 77u);
  EXPECT_EQ(reply.error, nbd::kEinval);
  EXPECT_TRUE(c->WaitClosed());
  GoodClientWorks();
  {  // the same with the client still pushing payload bytes
    auto w = Transmitting();
    // The server may close before the whole payload is out (then the send fails with EPIPE or
    // ECONNRESET): either way what matters is that it closes this connection and only this one.
    (void)w->SendRequest(Req(nbd::kCmdWrite, 0, 0xffffffff), std::string(1 << 20, 'p'));
    EXPECT_TRUE(w->WaitClosed());
  }
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, ReadPastTheEndIsEinval) {
  for (bool structured : {false, true}) {
    auto c = Transmitting(structured);
    std::string data;
    EXPECT_EQ(c->Read(kDiskSize, 512, &data), static_cast<int>(nbd::kEinval));
    EXPECT_EQ(c->Read(kDiskSize - 512, 1024, &data), static_cast<int>(nbd::kEinval));
    EXPECT_EQ(c->Read(~0ull - 511, 1024, &data), static_cast<int>(nbd::kEinval));
    EXPECT_EQ(c->Read(kDiskSize - 512, 512, &data), 0);
  }
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, WritePastTheEndIsEnospc) {
  for (bool structured : {false, true}) {
    auto c = Transmitting(structured);
    EXPECT_EQ(c->Write(kDiskSize, std::string(4096, 'x')), static_cast<int>(nbd::kEnospc));
    EXPECT_EQ(c->Write(kDiskSize - 512, std::string(1024, 'x')), static_cast<int>(nbd::kEnospc));
    EXPECT_EQ(c->Command(nbd::kCmdWriteZeroes, kDiskSize, 512), static_cast<int>(nbd::kEnospc));
    // The refused payload was consumed: the stream is still in sync.
    EXPECT_EQ(c->Write(kDiskSize - 512, std::string(512, 'y')), 0);
    std::string data;
    EXPECT_EQ(c->Read(kDiskSize - 512, 512, &data), 0);
    EXPECT_EQ(data, std::string(512, 'y'));
  }
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, UnknownCommandAndFlagsAreEinval) {
  auto c = Transmitting();
  EXPECT_EQ(c->Command(9, 0, 512), static_cast<int>(nbd::kEinval));
  EXPECT_EQ(c->Command(0xffff, 0, 0), static_cast<int>(nbd::kEinval));
  EXPECT_EQ(c->Command(nbd::kCmdTrim, 0, 512, 1 << 12), static_cast<int>(nbd::kEinval));
  std::string data;
  EXPECT_EQ(c->Read(0, 4096, &data), 0);
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, TruncatedPayloadClosesOnlyThatClientAndWritesNothing) {
  const uint64_t offset = 4 << 20;
  {
    auto c = Transmitting();
    ASSERT_TRUE(c->SendRequest(Req(nbd::kCmdWrite, offset, 65536), std::string(1000, 't')));
    ::shutdown(c->fd(), SHUT_WR);  // the payload never completes
    EXPECT_TRUE(c->WaitClosed());
  }
  GoodClientWorks();
  std::string data;
  ASSERT_EQ(good_->Read(offset, 65536, &data), 0);
  EXPECT_EQ(data, std::string(65536, '\0'));
}

TEST_F(NbdBadInputTest, DisconnectMidRequestLeavesOthersWorking) {
  {  // half a request header, then gone
    auto c = Transmitting();
    std::string bytes;
    nbd::AppendRequest(&bytes, Req(nbd::kCmdRead, 0, 4096));
    ASSERT_TRUE(c->SendRaw(bytes.substr(0, 10)));
  }
  GoodClientWorks();
  {  // many large reads in flight, then gone without reading a single reply
    auto c = Transmitting();
    std::string bytes;
    for (int i = 0; i < 64; ++i) nbd::AppendRequest(&bytes, Req(nbd::kCmdRead, 0, 1 << 20, i));
    ASSERT_TRUE(c->SendRaw(bytes));
  }
  GoodClientWorks();
  {  // gone in the middle of the handshake
    auto c = Negotiating();
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptGo, "").substr(0, 7)));
  }
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, UnknownExport) {
  {  // NBD_OPT_GO can answer with an error; negotiation continues
    auto c = Negotiating();
    std::string go = U32(7) + "missing";
    nbd::PutU16(&go, 0);
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptGo, go)));
    EXPECT_EQ(OptionReplyType(c.get()), nbd::kRepErrUnknown);
    std::string info = U32(7) + "missing";
    nbd::PutU16(&info, 0);
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptInfo, info)));
    EXPECT_EQ(OptionReplyType(c.get()), nbd::kRepErrUnknown);
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptList, "")));
    EXPECT_EQ(OptionReplyType(c.get()), nbd::kRepServer);
  }
  GoodClientWorks();
  {  // NBD_OPT_EXPORT_NAME cannot answer with an error: the server must disconnect
    auto c = Negotiating();
    ASSERT_TRUE(c->SendRaw(NbdOption(nbd::kOptExportName, "missing")));
    EXPECT_TRUE(c->WaitClosed());
  }
  GoodClientWorks();
}

TEST_F(NbdBadInputTest, RandomGarbageClosesOnlyThatClient) {
  std::mt19937 rng(42);
  for (int round = 0; round < 3; ++round) {
    std::string garbage(1 << 16, '\0');
    for (char& ch : garbage) ch = static_cast<char>(rng());
    {
      auto c = Transmitting();
      c->SendRaw(garbage);  // may fail once the server has closed
      EXPECT_TRUE(c->WaitClosed());
    }
    {
      NbdRawClient c;
      ASSERT_TRUE(c.Connect(port_, 10));
      c.SendRaw(garbage);
      EXPECT_TRUE(c.WaitClosed());
    }
    GoodClientWorks();
  }
}

TEST_F(NbdBadInputTest, MetricsStayValidAfterAbuse) {
  {
    auto c = Transmitting();
    std::string bytes;
    nbd::AppendRequest(&bytes, Req(nbd::kCmdRead, 0, 512));
    bytes[1] = 0;
    c->SendRaw(bytes);
    EXPECT_TRUE(c->WaitClosed());
  }
  GoodClientWorks();
  std::string body;
  ASSERT_EQ(testing::HttpGet(server_.port("http_port"), "/metrics", &body), 200);
  EXPECT_NE(body.find("ringcache_nbd_protocol_errors_total{reason=\"bad_request_magic\"} 1"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("ringcache_nbd_connections "), std::string::npos);
  const std::string promtool = RINGCACHE_PROMTOOL;
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed";
  const std::string file = dir_ + "/metrics.txt";
  {
    std::ofstream out(file);
    out << body;
  }
  std::string output;
  EXPECT_EQ(testing::RunCommand(promtool + " check metrics < " + file, &output), 0) << output;
}

}  // namespace
}  // namespace ringcache
