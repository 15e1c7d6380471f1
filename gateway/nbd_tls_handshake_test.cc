// The NBD handshake with TLS: STARTTLS required or refused, what is forgotten across it, and
// the exports' access lists by client identity. Byte-exact, as nbd_protocol_test.cc.
#include "gateway/nbd_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gateway/testing/mem_device.h"
#include "gateway/testing/nbd_hex.h"

namespace ringcache::gateway::nbd {
namespace {

class NbdTlsHandshakeTest : public ::testing::Test {
 protected:
  NbdTlsHandshakeTest() {
    ExportInfo disk;
    disk.name = "disk";
    disk.size_bytes = 1 << 20;
    provider_.AddExport(disk);
    ExportInfo secret;
    secret.name = "secret";
    secret.size_bytes = 1 << 20;
    secret.allowed_clients = {"alice"};
    secret.read_only_clients = {"carol"};
    provider_.AddExport(secret);
  }
  ServerHandshake Make(TlsMode mode) {
    HandshakeOptions o;
    o.tls = mode;
    return ServerHandshake(&provider_, o);
  }
  static std::string Feed(ServerHandshake* hs, const std::string& bytes, absl::Status* st) {
    std::string out;
    absl::StatusOr<size_t> used = hs->Feed(bytes.data(), bytes.size(), &out);
    *st = used.status();
    return out;
  }
  static uint32_t ReplyType(const std::string& out) { return GetU32(out.data() + 12); }

  testing::MemExportProvider provider_;
};

TEST_F(NbdTlsHandshakeTest, RequireRefusesEveryOptionButStartTlsAndAbort) {
  ServerHandshake hs = Make(TlsMode::kRequire);
  std::string greeting;
  hs.Start(&greeting);
  absl::Status st;
  Feed(&hs, U32(kClientFlagFixedNewstyle | kClientFlagNoZeroes), &st);
  for (uint32_t opt : {kOptList, kOptInfo, kOptGo, kOptStructuredReply, kOptListMetaContext,
                       kOptSetMetaContext}) {
    const std::string data = opt == kOptGo || opt == kOptInfo ? GoPayload("disk", {}) : "";
    const std::string out = Feed(&hs, Option(opt, data), &st);
    ASSERT_TRUE(st.ok());
    ASSERT_GE(out.size(), 20u);
    EXPECT_EQ(ReplyType(out), kRepErrTlsReqd) << "option " << opt;
  }
  // NBD_OPT_EXPORT_NAME cannot be refused: the session ends without serving the export.
  Feed(&hs, Option(kOptExportName, "disk"), &st);
  EXPECT_TRUE(absl::IsPermissionDenied(st)) << st;
  EXPECT_TRUE(hs.closed());
}

TEST_F(NbdTlsHandshakeTest, StartTlsIsAcknowledgedThenWaitsForTheTlsHandshake) {
  ServerHandshake hs = Make(TlsMode::kRequire);
  std::string greeting;
  hs.Start(&greeting);
  absl::Status st;
  Feed(&hs, U32(kClientFlagFixedNewstyle | kClientFlagNoZeroes), &st);
  // STARTTLS with data is invalid and changes nothing.
  std::string out = Feed(&hs, Option(kOptStartTls, "x"), &st);
  EXPECT_EQ(ReplyType(out), kRepErrInvalid);
  // Bytes the client sent after STARTTLS are not consumed as options: they belong to TLS.
  const std::string injected = Option(kOptStartTls, "") + Option(kOptGo, GoPayload("disk", {}));
  std::string out2;
  absl::StatusOr<size_t> used = hs.Feed(injected.data(), injected.size(), &out2);
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(*used, kOptionHeaderSize);
  EXPECT_EQ(ReplyType(out2), kRepAck);
  EXPECT_EQ(out2.size(), 20u);
  EXPECT_EQ(hs.state(), ServerHandshake::State::kStartTls);
  EXPECT_EQ(hs.BytesWanted(), 0u);
  hs.TlsStarted("alice");
  EXPECT_TRUE(hs.tls_active());
  // A second STARTTLS is refused.
  out = Feed(&hs, Option(kOptStartTls, ""), &st);
  EXPECT_EQ(ReplyType(out), kRepErrInvalid);
  out = Feed(&hs, Option(kOptGo, GoPayload("secret", {})), &st);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(hs.in_transmission());
}

TEST_F(NbdTlsHandshakeTest, StructuredRepliesNegotiatedBeforeTlsAreForgotten) {
  ServerHandshake hs = Make(TlsMode::kOn);
  std::string greeting;
  hs.Start(&greeting);
  absl::Status st;
  Feed(&hs, U32(kClientFlagFixedNewstyle | kClientFlagNoZeroes), &st);
  EXPECT_EQ(ReplyType(Feed(&hs, Option(kOptStructuredReply, ""), &st)), kRepAck);
  EXPECT_EQ(ReplyType(Feed(&hs, Option(kOptStartTls, ""), &st)), kRepAck);
  hs.TlsStarted("alice");
  Feed(&hs, Option(kOptGo, GoPayload("disk", {})), &st);
  ASSERT_TRUE(hs.in_transmission());
  EXPECT_FALSE(hs.session().structured_replies);
}

TEST_F(NbdTlsHandshakeTest, OffAnswersStartTlsUnsupported) {
  ServerHandshake hs = Make(TlsMode::kOff);
  std::string greeting;
  hs.Start(&greeting);
  absl::Status st;
  Feed(&hs, U32(kClientFlagFixedNewstyle | kClientFlagNoZeroes), &st);
  EXPECT_EQ(ReplyType(Feed(&hs, Option(kOptStartTls, ""), &st)), kRepErrUnsup);
}

// With TLS on the server, every export but a public one needs a client identity; one with lists
// needs an identity on them, and one on the read-only list opens it read-only.
TEST_F(NbdTlsHandshakeTest, AccessListsNeedTlsAndTheRightClient) {
  ExportInfo pub;
  pub.name = "pub";
  pub.size_bytes = 1 << 20;
  pub.public_export = true;
  provider_.AddExport(pub);
  for (const char* client : {"", "bob", "alice", "carol"}) {
    ServerHandshake hs = Make(TlsMode::kOn);
    std::string greeting;
    hs.Start(&greeting);
    absl::Status st;
    Feed(&hs, U32(kClientFlagFixedNewstyle | kClientFlagNoZeroes), &st);
    // Plaintext: only the public export is served and listed.
    for (const char* name : {"secret", "disk"}) {
      EXPECT_EQ(ReplyType(Feed(&hs, Option(kOptInfo, GoPayload(name, {})), &st)),
                kRepErrTlsReqd)
          << name;
    }
    EXPECT_EQ(ReplyType(Feed(&hs, Option(kOptInfo, GoPayload("pub", {})), &st)), kRepInfo);
    std::string list = Feed(&hs, Option(kOptList, ""), &st);
    EXPECT_EQ(list.find("secret"), std::string::npos);
    EXPECT_EQ(list.find("disk"), std::string::npos);
    EXPECT_NE(list.find("pub"), std::string::npos);
    Feed(&hs, Option(kOptStartTls, ""), &st);
    hs.TlsStarted(client);
    const std::string any = Feed(&hs, Option(kOptInfo, GoPayload("disk", {})), &st);
    EXPECT_EQ(ReplyType(any), *client == '\0' ? kRepErrPolicy : kRepInfo) << client;
    if (*client == '\0') {
      EXPECT_NE(any.find("needs a client certificate"), std::string::npos);
    }
    const std::string out = Feed(&hs, Option(kOptGo, GoPayload("secret", {})), &st);
    const std::string who(client);
    if (who == "alice" || who == "carol") {
      ASSERT_TRUE(hs.in_transmission()) << client;
      EXPECT_EQ((hs.session().transmission_flags & kTxReadOnly) != 0, who == "carol");
    } else {
      EXPECT_EQ(ReplyType(out), kRepErrPolicy) << client;
      Feed(&hs, Option(kOptExportName, "secret"), &st);
      EXPECT_TRUE(absl::IsPermissionDenied(st));
    }
  }
}

// Without TLS on the server nobody has an identity: exports without lists are open to all.
TEST_F(NbdTlsHandshakeTest, WithoutTlsExportsWithoutListsAreOpen) {
  ServerHandshake hs = Make(TlsMode::kOff);
  std::string greeting;
  hs.Start(&greeting);
  absl::Status st;
  Feed(&hs, U32(kClientFlagFixedNewstyle | kClientFlagNoZeroes), &st);
  EXPECT_EQ(ReplyType(Feed(&hs, Option(kOptInfo, GoPayload("secret", {})), &st)),
            kRepErrTlsReqd);
  Feed(&hs, Option(kOptGo, GoPayload("disk", {})), &st);
  EXPECT_TRUE(hs.in_transmission());
}

}  // namespace
}  // namespace ringcache::gateway::nbd
