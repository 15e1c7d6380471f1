// Byte-exact tests of the NBD handshake state machine: well-formed and malformed option
// sequences, fed whole and one byte at a time (with TLS: nbd_tls_handshake_test.cc). Expected bytes are written
// out in hex from the protocol document (the transmission phase: nbd_transmission_test.cc).
#include "gateway/nbd_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "gateway/testing/mem_device.h"
#include "gateway/testing/nbd_hex.h"

namespace ringcache::gateway::nbd {
namespace {

std::string MetaPayload(const std::string& name, const std::vector<std::string>& queries) {
  std::string s = U32(static_cast<uint32_t>(name.size())) + name + U32(queries.size());
  for (const std::string& q : queries) s += U32(static_cast<uint32_t>(q.size())) + q;
  return s;
}

// An option reply header as hex: magic, option, type, length.
std::string ReplyHex(uint32_t option, uint32_t type, uint32_t length) {
  return ToHex(U32(0x0003e889) + U32(0x045565a9) + U32(option) + U32(type) + U32(length));
}


class NbdHandshakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ExportInfo disk;
    disk.name = "disk";
    disk.description = "test disk";
    disk.size_bytes = 1 << 20;
    provider_.AddExport(disk);
    ExportInfo ro;
    ro.name = "ro";
    ro.size_bytes = 8192;
    ro.read_only = true;
    provider_.AddExport(ro);
  }

  // Starts a handshake and sends the client flags; returns what the server said after the flags.
  std::string Begin(uint32_t client_flags = kClientFlagFixedNewstyle | kClientFlagNoZeroes) {
    std::string greeting;
    hs_.Start(&greeting);
    EXPECT_EQ(greeting.size(), kGreetingSize);
    return Send(U32(client_flags));
  }

  // Feeds `bytes` and returns the server's output; records the status in last_.
  std::string Send(const std::string& bytes) {
    std::string out;
    absl::StatusOr<size_t> used = hs_.Feed(bytes.data(), bytes.size(), &out);
    last_ = used.status();
    if (used.ok()) consumed_ = *used;
    return out;
  }

  testing::MemExportProvider provider_;
  ServerHandshake hs_{&provider_, HandshakeOptions{}};
  absl::Status last_;
  size_t consumed_ = 0;
};

TEST_F(NbdHandshakeTest, GreetingIsFixedNewstyleWithNoZeroes) {
  std::string out;
  hs_.Start(&out);
  EXPECT_BYTES("4e42444d41474943 49484156454f5054 0003", out);
  EXPECT_EQ(hs_.BytesWanted(), 4u);
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kClientFlags);
}

TEST_F(NbdHandshakeTest, FeedBeforeStartFails) {
  std::string out;
  EXPECT_FALSE(hs_.Feed("\0\0\0\1", 4, &out).ok());
  EXPECT_TRUE(hs_.closed());
}

TEST_F(NbdHandshakeTest, UnknownClientFlagsEndTheSession) {
  EXPECT_EQ(Begin(0x4), "");
  EXPECT_EQ(last_.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hs_.closed());
  EXPECT_EQ(hs_.BytesWanted(), 0u);
}

TEST_F(NbdHandshakeTest, ClientWithoutFixedNewstyleIsStillServed) {
  Begin(0);
  ASSERT_TRUE(last_.ok());
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kOptionHeader);
  EXPECT_EQ(hs_.BytesWanted(), kOptionHeaderSize);
}

TEST_F(NbdHandshakeTest, ExportNameWithNoZeroes) {
  Begin();
  const std::string out = Send(Option(kOptExportName, "disk"));
  ASSERT_TRUE(last_.ok()) << last_;
  EXPECT_BYTES("0000000000100000 0d6d", out);
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_EQ(hs_.session().info.size_bytes, 1u << 20);
  EXPECT_FALSE(hs_.session().structured_replies);
  EXPECT_FALSE(hs_.session().block_size_negotiated);
  EXPECT_NE(hs_.session().device, nullptr);
}

TEST_F(NbdHandshakeTest, ExportNameWithoutNoZeroesPads124Bytes) {
  Begin(kClientFlagFixedNewstyle);
  const std::string out = Send(Option(kOptExportName, "disk"));
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_EQ(out, Hex("0000000000100000 0d6d") + std::string(124, '\0'));
}

TEST_F(NbdHandshakeTest, ExportNameUnknownEndsTheSessionWithoutReply) {
  Begin();
  EXPECT_EQ(Send(Option(kOptExportName, "nope")), "");
  EXPECT_EQ(last_.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(hs_.closed());
}

TEST_F(NbdHandshakeTest, ExportNameOverStringLimitEndsTheSession) {
  Begin();
  std::string header = Option(kOptExportName, "");
  header.replace(12, 4, U32(kMaxStringLength + 1));
  EXPECT_EQ(Send(header), "");
  EXPECT_FALSE(last_.ok());
  EXPECT_TRUE(hs_.closed());
}

TEST_F(NbdHandshakeTest, BadOptionMagicEndsTheSession) {
  Begin();
  std::string opt = Option(kOptList, "");
  opt[0] ^= 1;
  EXPECT_EQ(Send(opt), "");
  EXPECT_EQ(last_.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hs_.closed());
}

TEST_F(NbdHandshakeTest, AbortIsAcknowledgedThenClosed) {
  Begin();
  const std::string out = Send(Option(kOptAbort, "ignored") + "trailing");
  ASSERT_TRUE(last_.ok());
  EXPECT_BYTES(ReplyHex(kOptAbort, kRepAck, 0), out);
  EXPECT_TRUE(hs_.closed());
  EXPECT_EQ(consumed_, 16u + 7u);  // stops after the option
}

TEST_F(NbdHandshakeTest, ListSendsEveryExportThenAck) {
  Begin();
  const std::string out = Send(Option(kOptList, ""));
  ASSERT_TRUE(last_.ok());
  const std::string expected = ReplyHex(kOptList, kRepServer, 4 + 4 + 9) + ToHex(U32(4)) +
                               ToHex("disk") + ToHex("test disk") +
                               ReplyHex(kOptList, kRepServer, 4 + 2) + ToHex(U32(2)) +
                               ToHex("ro") + ReplyHex(kOptList, kRepAck, 0);
  EXPECT_BYTES(expected, out);
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kOptionHeader);
}

TEST_F(NbdHandshakeTest, ListWithDataIsInvalid) {
  Begin();
  const std::string out = Send(Option(kOptList, "x"));
  ASSERT_TRUE(last_.ok());
  EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(kOptList, kRepErrInvalid, out.size() - 20));
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kOptionHeader);
}

TEST_F(NbdHandshakeTest, UnknownOptionsAreUnsupported) {
  Begin();
  for (uint32_t option : {kOptPeekExport, kOptStartTls, 11u, 42u, 0x7fffffffu}) {
    const std::string out = Send(Option(option, "abc"));
    ASSERT_TRUE(last_.ok());
    ASSERT_GE(out.size(), 20u);
    EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(option, kRepErrUnsup, out.size() - 20));
  }
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kOptionHeader);
}

TEST_F(NbdHandshakeTest, GoAnswersInfoExportNameDescriptionBlockSizeThenAck) {
  Begin();
  Send(Option(kOptStructuredReply, ""));
  const std::string out =
      Send(Option(kOptGo, GoPayload("disk", {kInfoName, kInfoDescription, kInfoBlockSize})));
  ASSERT_TRUE(last_.ok());
  const uint16_t flags = kRwFlags | kTxSendDf;  // 0x0ded
  const std::string expected =
      ReplyHex(kOptGo, kRepInfo, 12) + "0000" + "0000000000100000" + ToHex(U16(flags)) +
      ReplyHex(kOptGo, kRepInfo, 6) + "0001" + ToHex("disk") +
      ReplyHex(kOptGo, kRepInfo, 11) + "0002" + ToHex("test disk") +
      ReplyHex(kOptGo, kRepInfo, 14) + "0003" + "00000200" + "00001000" + "02000000" +
      ReplyHex(kOptGo, kRepAck, 0);
  EXPECT_BYTES(expected, out);
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_TRUE(hs_.session().structured_replies);
  EXPECT_TRUE(hs_.session().block_size_negotiated);
  EXPECT_FALSE(hs_.session().base_allocation);
  EXPECT_EQ(hs_.session().transmission_flags, flags);
}

TEST_F(NbdHandshakeTest, InfoDoesNotEnterTransmissionAndGoMaySkipRequests) {
  Begin();
  std::string out = Send(Option(kOptInfo, GoPayload("disk", {})));
  ASSERT_TRUE(last_.ok());
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kOptionHeader);
  // NBD_INFO_EXPORT and (unrequested) NBD_INFO_BLOCK_SIZE, then ACK.
  EXPECT_EQ(out.size(), (20u + 12) + (20u + 14) + 20u);
  out = Send(Option(kOptGo, GoPayload("disk", {})));
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_FALSE(hs_.session().block_size_negotiated);
}

TEST_F(NbdHandshakeTest, GoStopsConsumingAtTheTransmissionBoundary) {
  Begin();
  const std::string request = "first request bytes";
  Send(Option(kOptGo, GoPayload("disk", {})) + request);
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_EQ(consumed_, 16u + 10u);
  EXPECT_EQ(hs_.BytesWanted(), 0u);
}

TEST_F(NbdHandshakeTest, GoUnknownExportIsErrUnknownAndNegotiationContinues) {
  Begin();
  const std::string out = Send(Option(kOptGo, GoPayload("nope", {})));
  ASSERT_TRUE(last_.ok());
  ASSERT_GE(out.size(), 20u);
  EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(kOptGo, kRepErrUnknown, out.size() - 20));
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kOptionHeader);
  Send(Option(kOptGo, GoPayload("disk", {})));
  EXPECT_TRUE(hs_.in_transmission());
}

TEST_F(NbdHandshakeTest, MalformedGoPayloadsAreInvalid) {
  Begin();
  const std::vector<std::string> bad = {
      "",                                      // too short
      U32(0) + "x",                            // too short
      U32(100) + "disk" + U16(0),              // name longer than the payload
      U32(4) + "disk" + U16(2) + U16(3),       // says two requests, has one
      U32(4) + "disk" + U16(0) + "junk",       // trailing bytes
      U32(0xffffffff) + "disk" + U16(0),       // absurd name length
  };
  for (const std::string& payload : bad) {
    for (uint32_t option : {kOptInfo, kOptGo}) {
      const std::string out = Send(Option(option, payload));
      ASSERT_TRUE(last_.ok());
      ASSERT_GE(out.size(), 20u);
      EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(option, kRepErrInvalid, out.size() - 20))
          << ToHex(payload);
    }
  }
  EXPECT_EQ(hs_.state(), ServerHandshake::State::kOptionHeader);
}

TEST_F(NbdHandshakeTest, StructuredReplyWithDataIsInvalid) {
  Begin();
  const std::string out = Send(Option(kOptStructuredReply, "x"));
  EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(kOptStructuredReply, kRepErrInvalid,
                                                out.size() - 20));
  Send(Option(kOptGo, GoPayload("disk", {})));
  EXPECT_FALSE(hs_.session().structured_replies);
  EXPECT_EQ(hs_.session().transmission_flags & kTxSendDf, 0);
}

TEST_F(NbdHandshakeTest, MetaContextNeedsStructuredReplies) {
  Begin();
  const std::string out = Send(Option(kOptSetMetaContext, MetaPayload("disk", {kBaseAllocation})));
  EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(kOptSetMetaContext, kRepErrInvalid,
                                                out.size() - 20));
}

TEST_F(NbdHandshakeTest, ListMetaContextWithoutQueriesOrWithBasePrefix) {
  Begin();
  Send(Option(kOptStructuredReply, ""));
  const std::string ctx = ReplyHex(kOptListMetaContext, kRepMetaContext, 4 + 15) + "00000000" +
                          ToHex(kBaseAllocation);
  const std::string ack = ReplyHex(kOptListMetaContext, kRepAck, 0);
  EXPECT_BYTES(ctx + ack, Send(Option(kOptListMetaContext, MetaPayload("disk", {}))));
  EXPECT_BYTES(ctx + ack, Send(Option(kOptListMetaContext, MetaPayload("disk", {"base:"}))));
  EXPECT_BYTES(ctx + ack,
               Send(Option(kOptListMetaContext, MetaPayload("disk", {"base:allocation"}))));
  // Other namespaces are ignored, and so are unknown base: leaves.
  EXPECT_BYTES(ack, Send(Option(kOptListMetaContext,
                                MetaPayload("disk", {"qemu:dirty-bitmap:a", "base:nope"}))));
}

TEST_F(NbdHandshakeTest, SetMetaContextSelectsBaseAllocationForThatExport) {
  Begin();
  Send(Option(kOptStructuredReply, ""));
  const std::string out =
      Send(Option(kOptSetMetaContext, MetaPayload("disk", {"x-foo:bar", kBaseAllocation})));
  EXPECT_BYTES(ReplyHex(kOptSetMetaContext, kRepMetaContext, 19) + "00000001" +
                   ToHex(kBaseAllocation) + ReplyHex(kOptSetMetaContext, kRepAck, 0),
               out);
  Send(Option(kOptGo, GoPayload("disk", {kInfoBlockSize})));
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_TRUE(hs_.session().base_allocation);
}

TEST_F(NbdHandshakeTest, MetaContextForAnotherExportDoesNotApply) {
  Begin();
  Send(Option(kOptStructuredReply, ""));
  Send(Option(kOptSetMetaContext, MetaPayload("ro", {kBaseAllocation})));
  Send(Option(kOptGo, GoPayload("disk", {})));
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_FALSE(hs_.session().base_allocation);
}

TEST_F(NbdHandshakeTest, SetMetaContextWithBasePrefixSelectsNothing) {
  Begin();
  Send(Option(kOptStructuredReply, ""));
  EXPECT_BYTES(ReplyHex(kOptSetMetaContext, kRepAck, 0),
               Send(Option(kOptSetMetaContext, MetaPayload("disk", {"base:"}))));
  Send(Option(kOptGo, GoPayload("disk", {})));
  EXPECT_FALSE(hs_.session().base_allocation);
}

TEST_F(NbdHandshakeTest, FailedSetMetaContextClearsTheSelection) {
  Begin();
  Send(Option(kOptStructuredReply, ""));
  Send(Option(kOptSetMetaContext, MetaPayload("disk", {kBaseAllocation})));
  Send(Option(kOptSetMetaContext, U32(4) + "disk"));  // truncated: invalid
  Send(Option(kOptGo, GoPayload("disk", {})));
  EXPECT_FALSE(hs_.session().base_allocation);
}

TEST_F(NbdHandshakeTest, MalformedMetaContextPayloadsAreInvalid) {
  Begin();
  Send(Option(kOptStructuredReply, ""));
  const std::vector<std::string> bad = {
      "",
      U32(4) + "disk",                                   // no query count
      U32(40) + "disk" + U32(0),                         // name beyond the payload
      U32(4) + "disk" + U32(1),                          // query missing
      U32(4) + "disk" + U32(1) + U32(50) + "base:",      // query beyond the payload
      U32(4) + "disk" + U32(0) + "x",                    // trailing bytes
      U32(4) + "disk" + U32(1) + U32(4) + "base",        // query without a namespace
      U32(4) + "disk" + U32(0xffffffff),                 // absurd query count
  };
  for (const std::string& payload : bad) {
    for (uint32_t option : {kOptListMetaContext, kOptSetMetaContext}) {
      const std::string out = Send(Option(option, payload));
      ASSERT_TRUE(last_.ok());
      ASSERT_GE(out.size(), 20u);
      EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(option, kRepErrInvalid, out.size() - 20))
          << ToHex(payload);
    }
  }
  const std::string out = Send(Option(kOptListMetaContext, MetaPayload("nope", {})));
  EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(kOptListMetaContext, kRepErrUnknown,
                                                out.size() - 20));
}

TEST_F(NbdHandshakeTest, ReadOnlyExportAdvertisesNoWrites) {
  Begin();
  Send(Option(kOptExportName, "ro"));
  ASSERT_TRUE(hs_.in_transmission());
  EXPECT_EQ(hs_.session().transmission_flags,
            kTxHasFlags | kTxReadOnly | kTxSendFlush | kTxSendFua | kTxCanMultiConn |
                kTxSendCache);
}

TEST_F(NbdHandshakeTest, AdvertisedMaximumBlockNeverExceedsTheServerPayloadCap) {
  HandshakeOptions options;
  options.max_payload = 1 << 20;
  ServerHandshake hs(&provider_, options);
  std::string out;
  hs.Start(&out);
  const std::string bytes = U32(kClientFlagFixedNewstyle) +
                            Option(kOptGo, GoPayload("disk", {kInfoBlockSize}));
  ASSERT_TRUE(hs.Feed(bytes.data(), bytes.size(), &out).ok());
  ASSERT_TRUE(hs.in_transmission());
  EXPECT_EQ(hs.session().info.max_block, 1u << 20);
  EXPECT_NE(ToHex(out).find("0003" "00000200" "00001000" "00100000"), std::string::npos);
  EXPECT_EQ(LimitsFor(hs.session()).max_block, 1u << 20);
}

TEST(NbdBlockSizeTest, ProviderBlockSizesAreSanitized) {
  testing::MemExportProvider provider;
  ExportInfo odd;
  odd.name = "odd";
  odd.size_bytes = 1 << 20;
  odd.min_block = 3;          // not a power of two -> 512
  odd.preferred_block = 100;  // not a power of two -> 4096, then lowered to fit the maximum
  odd.max_block = 7;          // below the minimum -> raised
  provider.AddExport(odd);
  ExportInfo big;
  big.name = "big";
  big.size_bytes = 1 << 20;
  big.min_block = 4096;
  big.preferred_block = 1 << 20;
  big.max_block = 1u << 31;
  provider.AddExport(big);
  for (const auto& [name, min, pref, max] :
       {std::tuple<std::string, uint32_t, uint32_t, uint32_t>{"odd", 512, 512, 512},
        {"big", 4096, 64 << 10, 64 << 10}}) {
    HandshakeOptions options;
    options.max_payload = 64 << 10;
    ServerHandshake hs(&provider, options);
    std::string out;
    hs.Start(&out);
    const std::string bytes = U32(kClientFlagFixedNewstyle) + Option(kOptGo, GoPayload(name, {}));
    ASSERT_TRUE(hs.Feed(bytes.data(), bytes.size(), &out).ok());
    ASSERT_TRUE(hs.in_transmission());
    EXPECT_EQ(hs.session().info.min_block, min) << name;
    EXPECT_EQ(hs.session().info.preferred_block, pref) << name;
    EXPECT_EQ(hs.session().info.max_block, max) << name;
  }
}

TEST_F(NbdHandshakeTest, OversizedOptionIsDiscardedAndAnsweredTooBig) {
  HandshakeOptions options;
  options.max_option_length = 100;
  ServerHandshake hs(&provider_, options);
  std::string out;
  hs.Start(&out);
  out.clear();
  std::string bytes = U32(kClientFlagFixedNewstyle) + Option(kOptInfo, std::string(5000, 'z'));
  ASSERT_TRUE(hs.Feed(bytes.data(), bytes.size(), &out).ok());
  ASSERT_GE(out.size(), 20u);
  EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(kOptInfo, kRepErrTooBig, out.size() - 20));
  EXPECT_EQ(hs.state(), ServerHandshake::State::kOptionHeader);
}

TEST_F(NbdHandshakeTest, TooManyOptionsEndTheSession) {
  HandshakeOptions options;
  options.max_options = 3;
  ServerHandshake hs(&provider_, options);
  std::string out;
  hs.Start(&out);
  std::string bytes = U32(kClientFlagFixedNewstyle);
  for (int i = 0; i < 4; ++i) bytes += Option(kOptList, "");
  EXPECT_EQ(hs.Feed(bytes.data(), bytes.size(), &out).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(hs.closed());
}

TEST_F(NbdHandshakeTest, ShuttingDownAnswersErrShutdownButAcksAbort) {
  Begin();
  hs_.set_shutting_down(true);
  std::string out = Send(Option(kOptGo, GoPayload("disk", {})));
  EXPECT_EQ(ToHex(out.substr(0, 20)), ReplyHex(kOptGo, kRepErrShutdown, out.size() - 20));
  EXPECT_FALSE(hs_.in_transmission());
  EXPECT_BYTES(ReplyHex(kOptAbort, kRepAck, 0), Send(Option(kOptAbort, "")));
}

TEST_F(NbdHandshakeTest, ByteAtATimeGivesTheSameBytes) {
  const std::string session =
      U32(kClientFlagFixedNewstyle | kClientFlagNoZeroes) + Option(kOptList, "") +
      Option(kOptStructuredReply, "") + Option(kOptGo, GoPayload("nope", {})) +
      Option(kOptSetMetaContext, MetaPayload("disk", {kBaseAllocation})) + Option(99, "zz") +
      Option(kOptGo, GoPayload("disk", {kInfoBlockSize}));
  std::string bulk_out;
  {
    ServerHandshake hs(&provider_, HandshakeOptions{});
    hs.Start(&bulk_out);
    auto used = hs.Feed(session.data(), session.size(), &bulk_out);
    ASSERT_TRUE(used.ok());
    EXPECT_EQ(*used, session.size());
    ASSERT_TRUE(hs.in_transmission());
  }
  std::string slow_out;
  ServerHandshake hs(&provider_, HandshakeOptions{});
  hs.Start(&slow_out);
  for (size_t i = 0; i < session.size(); ++i) {
    ASSERT_FALSE(hs.in_transmission());
    ASSERT_GE(hs.BytesWanted(), 1u);
    auto used = hs.Feed(&session[i], 1, &slow_out);
    ASSERT_TRUE(used.ok());
    ASSERT_EQ(*used, 1u);
  }
  EXPECT_TRUE(hs.in_transmission());
  EXPECT_TRUE(hs.session().base_allocation);
  EXPECT_EQ(ToHex(slow_out), ToHex(bulk_out));
}

// ---- Requests ------------------------------------------------------------------------------------

}  // namespace
}  // namespace ringcache::gateway::nbd
