// Byte-exact tests of the NBD transmission phase: the request header parser and checker, the
// reply builders and the errno mapping. Expected bytes are written out in hex from the protocol
// document.
#include "gateway/nbd_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "gateway/testing/nbd_hex.h"

namespace ringcache::gateway::nbd {
namespace {

TEST(NbdRequestTest, ParsesHeaderByteExact) {
  const std::string bytes =
      Hex("25609513 0001 0001 0102030405060708 0000000000001000 00000200");
  absl::StatusOr<Request> r = ParseRequestHeader(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->flags, kCmdFlagFua);
  EXPECT_EQ(r->type, kCmdWrite);
  EXPECT_EQ(r->handle, 0x0102030405060708u);
  EXPECT_EQ(r->offset, 4096u);
  EXPECT_EQ(r->length, 512u);
  std::string again;
  AppendRequest(&again, *r);
  EXPECT_EQ(ToHex(again), ToHex(bytes));
}

TEST(NbdRequestTest, RejectsBadMagicAndShortHeaders) {
  std::string bytes = Hex("25609514 0000 0000 0000000000000000 0000000000000000 00000000");
  EXPECT_EQ(ParseRequestHeader(bytes.data(), bytes.size()).status().code(),
            absl::StatusCode::kInvalidArgument);
  bytes = Hex("25609513 0000 0000 0000000000000000 0000000000000000 000000");
  EXPECT_FALSE(ParseRequestHeader(bytes.data(), bytes.size()).ok());
}

class NbdCheckTest : public ::testing::Test {
 protected:
  NbdCheckTest() {
    limits_.export_size = 1 << 20;
    limits_.min_block = 512;
    limits_.transmission_flags = kRwFlags | kTxSendDf;
    limits_.structured_replies = true;
    limits_.base_allocation = true;
  }
  RequestCheck Check(uint16_t type, uint64_t offset, uint32_t length, uint16_t flags = 0) {
    Request r;
    r.type = type;
    r.offset = offset;
    r.length = length;
    r.flags = flags;
    return CheckRequest(r, limits_);
  }
  RequestLimits limits_;
};

TEST_F(NbdCheckTest, AcceptsValidRequests) {
  EXPECT_EQ(Check(kCmdRead, 0, 4096).error, 0u);
  EXPECT_EQ(Check(kCmdRead, (1 << 20) - 512, 512, kCmdFlagDf).error, 0u);
  EXPECT_EQ(Check(kCmdRead, 0, 0).error, 0u);
  RequestCheck w = Check(kCmdWrite, 512, 1024, kCmdFlagFua);
  EXPECT_EQ(w.error, 0u);
  EXPECT_EQ(w.payload, 1024u);
  EXPECT_EQ(Check(kCmdFlush, 123, 7).error, 0u);  // reserved fields are ignored
  EXPECT_EQ(Check(kCmdTrim, 0, 1 << 20).error, 0u);
  EXPECT_EQ(Check(kCmdWriteZeroes, 0, 1 << 20, kCmdFlagNoHole | kCmdFlagFastZero).error, 0u);
  EXPECT_EQ(Check(kCmdCache, 0, 4096).error, 0u);
  EXPECT_EQ(Check(kCmdBlockStatus, 0, 1 << 20, kCmdFlagReqOne).error, 0u);
  EXPECT_EQ(Check(kCmdDisc, 99, 99, 0xffff).error, 0u);
}

TEST_F(NbdCheckTest, PastTheEnd) {
  EXPECT_EQ(Check(kCmdRead, 1 << 20, 512).error, kEinval);
  EXPECT_EQ(Check(kCmdCache, (1 << 20) - 512, 1024).error, kEinval);
  EXPECT_EQ(Check(kCmdTrim, (1 << 20) - 512, 1024).error, kEinval);
  EXPECT_EQ(Check(kCmdBlockStatus, 1 << 20, 512).error, kEinval);
  RequestCheck w = Check(kCmdWrite, (1 << 20) - 512, 1024);
  EXPECT_EQ(w.error, kEnospc);
  EXPECT_EQ(w.payload, 1024u);  // the payload still has to be read
  EXPECT_FALSE(w.close);
  EXPECT_EQ(Check(kCmdWriteZeroes, 1 << 20, 512).error, kEnospc);
}

TEST_F(NbdCheckTest, OffsetPlusLengthOverflowIsPastTheEnd) {
  const uint64_t near_max = ~0ull - 511;  // 512-aligned
  EXPECT_EQ(Check(kCmdRead, near_max, 1024).error, kEinval);
  EXPECT_EQ(Check(kCmdWrite, near_max, 1024).error, kEnospc);
}

TEST_F(NbdCheckTest, LengthCaps) {
  EXPECT_EQ(Check(kCmdRead, 0, kMaxPayloadLength + 512).error, kEinval);
  EXPECT_EQ(Check(kCmdCache, 0, kMaxPayloadLength + 512).error, kEinval);
  RequestCheck w = Check(kCmdWrite, 0, kMaxPayloadLength + 1);
  EXPECT_EQ(w.error, kEinval);
  EXPECT_TRUE(w.close);
  // Over the advertised maximum block size but within the hard cap: refused, payload read.
  limits_.max_block = 64 << 10;
  EXPECT_EQ(Check(kCmdRead, 0, 128 << 10).error, kEinval);
  w = Check(kCmdWrite, 0, 128 << 10);
  EXPECT_EQ(w.error, kEinval);
  EXPECT_FALSE(w.close);
  EXPECT_EQ(w.payload, 128u << 10);
  // Commands without payload are not capped at 32 MiB (only by the export size).
  limits_.export_size = 1ull << 40;
  EXPECT_EQ(Check(kCmdTrim, 0, 0xfffffe00).error, 0u);
  EXPECT_EQ(Check(kCmdWriteZeroes, 0, 0xfffffe00).error, 0u);
  EXPECT_EQ(Check(kCmdBlockStatus, 0, 0xfffffe00).error, 0u);
}

TEST_F(NbdCheckTest, UnknownCommandsAndFlags) {
  EXPECT_EQ(Check(8, 0, 512).error, kEinval);
  EXPECT_EQ(Check(0xffff, 0, 512).error, kEinval);
  EXPECT_EQ(Check(kCmdRead, 0, 512, kCmdFlagNoHole).error, kEinval);
  EXPECT_EQ(Check(kCmdRead, 0, 512, 1 << 9).error, kEinval);
  EXPECT_EQ(Check(kCmdWrite, 0, 512, kCmdFlagDf).error, kEinval);
  EXPECT_EQ(Check(kCmdTrim, 0, 512, kCmdFlagReqOne).error, kEinval);
  EXPECT_EQ(Check(kCmdBlockStatus, 0, 512, kCmdFlagFastZero).error, kEinval);
  limits_.transmission_flags &= ~(kTxSendDf | kTxSendFastZero);
  EXPECT_EQ(Check(kCmdRead, 0, 512, kCmdFlagDf).error, kEinval);
  EXPECT_EQ(Check(kCmdWriteZeroes, 0, 512, kCmdFlagFastZero).error, kEinval);
}

TEST_F(NbdCheckTest, AlignmentReadOnlyAndBlockStatusContext) {
  EXPECT_EQ(Check(kCmdRead, 100, 512).error, kEinval);
  EXPECT_EQ(Check(kCmdWrite, 0, 100).error, kEinval);
  EXPECT_EQ(Check(kCmdWrite, 0, 100).payload, 100u);
  limits_.min_block = 1;
  EXPECT_EQ(Check(kCmdRead, 100, 7).error, 0u);
  limits_.transmission_flags |= kTxReadOnly;
  EXPECT_EQ(Check(kCmdWrite, 0, 512).error, kEperm);
  EXPECT_EQ(Check(kCmdTrim, 0, 512).error, kEperm);
  EXPECT_EQ(Check(kCmdWriteZeroes, 0, 512).error, kEperm);
  EXPECT_EQ(Check(kCmdRead, 0, 512).error, 0u);
  EXPECT_EQ(Check(kCmdBlockStatus, 0, 0).error, kEinval);
  limits_.base_allocation = false;
  EXPECT_EQ(Check(kCmdBlockStatus, 0, 512).error, kEinval);
}

// ---- Replies ----------------------------------------------------------------------------------------

TEST(NbdReplyTest, BuildersAreByteExact) {
  std::string out;
  AppendSimpleReply(&out, kEnospc, 0x1122334455667788);
  EXPECT_BYTES("67446698 0000001c 1122334455667788", out);
  out.clear();
  AppendStructuredNone(&out, 7);
  EXPECT_BYTES("668e33ef 0001 0000 0000000000000007 00000000", out);
  out.clear();
  AppendOffsetDataHeader(&out, kReplyFlagDone, 7, 4096, 512);
  EXPECT_BYTES("668e33ef 0001 0001 0000000000000007 00000208 0000000000001000", out);
  out.clear();
  AppendStructuredError(&out, kReplyFlagDone, 7, kEinval, "bad");
  EXPECT_BYTES("668e33ef 0001 8001 0000000000000007 00000009 00000016 0003 626164", out);
  out.clear();
  AppendBlockStatus(&out, kReplyFlagDone, 7, 1, {{4096, 3}, {512, 0}});
  EXPECT_BYTES(
      "668e33ef 0001 0005 0000000000000007 00000014 00000001 00001000 00000003 00000200 00000000",
      out);
}

TEST(NbdReplyTest, ErrorMessagesAreCappedAtTheStringLimit) {
  std::string out;
  AppendStructuredError(&out, kReplyFlagDone, 1, kEio, std::string(10000, 'm'));
  EXPECT_EQ(out.size(), kStructuredReplyHeaderSize + 6 + kMaxStringLength);
}

TEST(NbdReplyTest, DescriptorsMergeClipAndNeverComeBackEmpty) {
  std::vector<Extent> extents = {{4096, true, true}, {4096, true, true}, {0, false, false},
                                 {8192, false, false}, {4096, false, true}};
  auto d = ToDescriptors(extents, 12288, false, 100);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].length, 8192u);
  EXPECT_EQ(d[0].flags, kStateHole | kStateZero);
  EXPECT_EQ(d[1].length, 4096u);  // clipped to the request
  EXPECT_EQ(d[1].flags, 0u);
  d = ToDescriptors(extents, 20480, true, 100);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].length, 8192u);
  d = ToDescriptors(extents, 1 << 20, false, 2);
  ASSERT_EQ(d.size(), 2u);
  d = ToDescriptors({}, 512, false, 100);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].length, 512u);
  EXPECT_EQ(d[0].flags, 0u);
}

TEST(NbdErrnoTest, StatusMappingFollowsBlockDeviceContract) {
  EXPECT_EQ(ErrnoFromStatus(absl::OkStatus()), 0u);
  EXPECT_EQ(ErrnoFromStatus(absl::InvalidArgumentError("")), kEinval);
  EXPECT_EQ(ErrnoFromStatus(absl::OutOfRangeError("")), kEnospc);
  EXPECT_EQ(ErrnoFromStatus(absl::ResourceExhaustedError("")), kEnospc);
  EXPECT_EQ(ErrnoFromStatus(absl::PermissionDeniedError("")), kEperm);
  EXPECT_EQ(ErrnoFromStatus(absl::UnavailableError("")), kEio);
  EXPECT_EQ(ErrnoFromStatus(absl::InternalError("")), kEio);
  EXPECT_STREQ(ErrnoName(kEnospc), "enospc");
  EXPECT_STREQ(CommandName(kCmdWriteZeroes), "write_zeroes");
  EXPECT_STREQ(CommandName(99), "unknown");
}

// ---- STARTTLS (the protocol document's "TLS support" section) ----------------------------------

// A handshake with TLS in `mode`, an open export "disk" and an export "secret" only alice may open.
}  // namespace
}  // namespace ringcache::gateway::nbd
