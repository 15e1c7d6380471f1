// Fuzz target for the block data protocol's frame headers (common/block_wire.h), the frames a
// cache node's block data port and a data node's log port read from the network: a request
// header is decoded, refused or accepted within its limits, and an accepted one encodes back to
// the same fields; the same for response headers, whose status and message text turn into an
// absl::Status.
//
// Input: byte 0 even: a request header, odd: a response header; then the header bytes (short
// inputs are zero-padded) and, for a response, the message text. Run by Fuzz.block_wire_fuzz
// (common/testing/fuzz_main.cc) and by tests/fuzz/fuzz.sh.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/block_wire.h"
#include "common/testing/fuzz_check.h"

namespace {

using namespace ringcache::wire;  // NOLINT: fuzzer-local brevity

void FuzzRequest(const std::string& in) {
  char buf[kRequestBytes] = {};
  std::memcpy(buf, in.data(), std::min(in.size(), kRequestBytes));
  ringcache::wire::Request r;
  if (!DecodeRequest(buf, &r).ok()) return;
  FUZZ_CHECK(r.length <= kMaxLength);
  FUZZ_CHECK(r.op >= Op::kRead && r.op <= kLastOp);
  char again[kRequestBytes];
  EncodeRequest(r, again);
  ringcache::wire::Request back;
  FUZZ_CHECK(DecodeRequest(again, &back).ok());
  FUZZ_CHECK(back.op == r.op && back.vdi == r.vdi && back.object == r.object &&
             back.offset == r.offset && back.length == r.length &&
             back.timeout_ms == r.timeout_ms && back.epoch == r.epoch && back.flags == r.flags &&
             back.tag == r.tag);
  // Only the two reserved bytes may differ (sent as zero).
  FUZZ_CHECK(std::memcmp(again, buf, 6) == 0 &&
             std::memcmp(again + 8, buf + 8, kRequestBytes - 8) == 0);
}

void FuzzResponse(const std::string& in) {
  char buf[kResponseBytes] = {};
  std::memcpy(buf, in.data(), std::min(in.size(), kResponseBytes));
  ringcache::wire::Response r;
  if (!DecodeResponse(buf, &r).ok()) return;
  const std::string message = in.size() > kResponseBytes ? in.substr(kResponseBytes) : "";
  const absl::Status s =
      ToStatus(r, message.substr(0, std::min<size_t>(r.message_len, message.size())));
  FUZZ_CHECK(s.ok() == (r.code == absl::StatusCode::kOk));
  const ringcache::wire::Response again = FromStatus(s, r.data_len);
  FUZZ_CHECK(again.message_len <= kMaxMessage);
  char out[kResponseBytes];
  EncodeResponse(again, out);
  ringcache::wire::Response back;
  FUZZ_CHECK(DecodeResponse(out, &back).ok());
  FUZZ_CHECK(back.code == again.code && back.data_len == again.data_len);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    FuzzRequest(in);
  } else {
    FuzzResponse(in);
  }
  return 0;
}
