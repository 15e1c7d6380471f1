// libFuzzer target for the NBD wire code: feeds arbitrary bytes to the server handshake state
// machine (in arbitrary chunk sizes) and, if the bytes get it into the transmission phase, the rest
// to the request header parser, the request checker and the reply builders, asserting the
// invariants the server relies on. Built with clang -fsanitize=fuzzer,address,undefined by
// gateway/CMakeLists.txt and run for a bounded time as the NbdFuzz test.
//
// Input layout: byte 0 picks the chunk size for feeding the handshake; the rest is the client's
// byte stream.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gateway/nbd_protocol.h"
#include "common/testing/fuzz_check.h"

namespace {

using namespace ringcache::gateway;  // NOLINT: fuzzer-local brevity

class NullDevice : public BlockDevice {
 public:
  absl::Status Read(uint64_t, uint32_t, char*) override { return absl::OkStatus(); }
  absl::Status Write(uint64_t, uint32_t, const char*, bool) override { return absl::OkStatus(); }
  absl::Status Trim(uint64_t, uint32_t) override { return absl::OkStatus(); }
  absl::Status WriteZeroes(uint64_t, uint32_t, bool, bool) override { return absl::OkStatus(); }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Cache(uint64_t, uint32_t) override { return absl::OkStatus(); }
  absl::Status BlockStatus(uint64_t, uint32_t, std::vector<Extent>*) override {
    return absl::OkStatus();
  }
};

class FuzzProvider : public ExportProvider {
 public:
  FuzzProvider() {
    ExportInfo disk;
    disk.name = "disk";
    disk.description = "fuzz disk";
    disk.size_bytes = 1 << 20;
    exports_.push_back(disk);
    ExportInfo def;  // the default export: empty name, odd block sizes to be sanitized
    def.size_bytes = 65536;
    def.min_block = 3;
    def.preferred_block = 100;
    def.max_block = 7;
    exports_.push_back(def);
    ExportInfo ro;
    ro.name = "ro";
    ro.size_bytes = 4096;
    ro.min_block = 1;
    ro.read_only = true;
    exports_.push_back(ro);
  }
  absl::StatusOr<ExportInfo> Find(const std::string& name) override {
    for (const ExportInfo& e : exports_) {
      if (e.name == name) return e;
    }
    return absl::NotFoundError("no such export");
  }
  std::vector<ExportInfo> List() override { return exports_; }
  absl::StatusOr<std::shared_ptr<BlockDevice>> Open(const std::string& name) override {
    if (!Find(name).ok()) return absl::NotFoundError("no such export");
    return std::shared_ptr<BlockDevice>(std::make_shared<NullDevice>());
  }

 private:
  std::vector<ExportInfo> exports_;
};

// Checks that `out` is a sequence of well-formed option replies (or, at the end of a successful
// NBD_OPT_EXPORT_NAME, its fixed-size reply).
void CheckOptionReplies(const std::string& out, bool export_name_tail) {
  size_t pos = 0;
  while (pos + 20 <= out.size()) {
    if (nbd::GetU64(out.data() + pos) != nbd::kOptionReplyMagic) break;
    pos += 20 + nbd::GetU32(out.data() + pos + 16);
  }
  if (export_name_tail) {  // NBD_OPT_GO ends with a reply; NBD_OPT_EXPORT_NAME with 10 or 134 bytes
    const size_t rest = out.size() - pos;
    FUZZ_CHECK(rest == 0 || rest == 10 || rest == 10 + nbd::kExportNameReplyPad);
  } else {
    FUZZ_CHECK(pos == out.size());
  }
}

// BLOCK_STATUS `r`: descriptors of fake device extents taken from the next bytes are within
// the request and the limits, and their reply has the size the spec gives.
void CheckBlockStatus(const nbd::Request& r, const char* bytes, size_t size, size_t* pos,
                      std::string* reply) {
  // Fake device extents from the next bytes.
  std::vector<Extent> extents;
  for (int i = 0; i < 8 && *pos + 3 <= size; ++i, *pos += 3) {
    Extent e;
    e.length = static_cast<uint32_t>(nbd::GetU16(bytes + *pos)) << (bytes[*pos + 2] & 15);
    e.hole = bytes[*pos + 2] & 16;
    e.zero = bytes[*pos + 2] & 32;
    extents.push_back(e);
  }
  const bool req_one = r.flags & nbd::kCmdFlagReqOne;
  const auto d = nbd::ToDescriptors(extents, r.length, req_one, 4);
  FUZZ_CHECK(!d.empty() && d.size() <= (req_one ? 1u : 4u));
  uint64_t sum = 0;
  for (const auto& x : d) {
    FUZZ_CHECK(x.length > 0);
    sum += x.length;
  }
  FUZZ_CHECK(sum <= r.length);
  nbd::AppendBlockStatus(reply, nbd::kReplyFlagDone, r.handle, nbd::kBaseAllocationId, d);
  FUZZ_CHECK(reply->size() == nbd::kStructuredReplyHeaderSize + 4 + 8 * d.size());
}

// The requests after the handshake: what CheckRequest accepts is inside the export, aligned
// and capped, and each reply is well formed.
void FuzzRequests(const nbd::Session& session, const char* bytes, size_t size, size_t pos) {
  const ExportInfo& info = session.info;
  const nbd::RequestLimits limits = nbd::LimitsFor(session);

  while (size - pos >= nbd::kRequestHeaderSize) {
    absl::StatusOr<nbd::Request> r = nbd::ParseRequestHeader(bytes + pos, size - pos);
    pos += nbd::kRequestHeaderSize;
    if (!r.ok()) break;
    const nbd::RequestCheck c = nbd::CheckRequest(*r, limits);
    if (r->type == nbd::kCmdDisc) break;
    if (c.close) {
      FUZZ_CHECK(r->type == nbd::kCmdWrite && r->length > limits.max_payload);
      break;
    }
    FUZZ_CHECK(c.payload == (r->type == nbd::kCmdWrite ? r->length : 0));
    pos += static_cast<size_t>(std::min<uint64_t>(c.payload, size - pos));
    std::string reply;
    if (c.error != 0) {
      nbd::AppendStructuredError(&reply, nbd::kReplyFlagDone, r->handle, c.error, c.reason);
      continue;
    }
    // Accepted requests are inside the export and aligned; payload commands are capped.
    if (r->type != nbd::kCmdFlush) {
      FUZZ_CHECK(r->offset + r->length >= r->offset);
      FUZZ_CHECK(r->offset + r->length <= info.size_bytes);
      FUZZ_CHECK(r->offset % info.min_block == 0 && r->length % info.min_block == 0);
    }
    if (r->type == nbd::kCmdRead || r->type == nbd::kCmdWrite || r->type == nbd::kCmdCache) {
      FUZZ_CHECK(r->length <= limits.max_block && limits.max_block <= nbd::kMaxPayloadLength);
    }
    if (r->type == nbd::kCmdBlockStatus) {
      FUZZ_CHECK(session.base_allocation && r->length > 0);
      CheckBlockStatus(*r, bytes, size, &pos, &reply);
    } else if (r->type == nbd::kCmdRead && r->length > 0) {
      nbd::AppendOffsetDataHeader(&reply, nbd::kReplyFlagDone, r->handle, r->offset, r->length);
    } else {
      nbd::AppendSimpleReply(&reply, 0, r->handle);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FuzzProvider* provider = new FuzzProvider();
  if (size < 1) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  size -= 1;

  nbd::HandshakeOptions options;
  options.max_option_length = 4096 + 64;
  options.max_options = 64;
  nbd::ServerHandshake hs(provider, options);
  std::string greeting;
  hs.Start(&greeting);
  FUZZ_CHECK(greeting.size() == nbd::kGreetingSize);
  size_t pos = 0;
  while (pos < size && !hs.in_transmission() && !hs.closed()) {
    FUZZ_CHECK(hs.BytesWanted() > 0);
    const size_t n = std::min(chunk, size - pos);
    std::string out;
    const bool was_flags = hs.state() == nbd::ServerHandshake::State::kClientFlags;
    absl::StatusOr<size_t> used = hs.Feed(bytes + pos, n, &out);
    if (!used.ok()) {
      FUZZ_CHECK(hs.closed());
      return 0;
    }
    FUZZ_CHECK(*used <= n);
    FUZZ_CHECK(*used == n || hs.in_transmission() || hs.closed());
    if (!was_flags) CheckOptionReplies(out, hs.in_transmission());
    pos += *used;
  }
  if (!hs.in_transmission()) return 0;

  const nbd::Session session = hs.TakeSession();
  FUZZ_CHECK(session.device != nullptr);
  FUZZ_CHECK((session.transmission_flags & nbd::kTxHasFlags) != 0);
  const ExportInfo& info = session.info;
  FUZZ_CHECK(info.min_block != 0 && (info.min_block & (info.min_block - 1)) == 0);
  FUZZ_CHECK(info.max_block % info.min_block == 0 && info.max_block <= nbd::kMaxPayloadLength);
  FUZZ_CHECK(info.preferred_block >= 512 && info.preferred_block >= info.min_block &&
             info.preferred_block <= info.max_block);
  FuzzRequests(session, bytes, size, pos);
  return 0;
}
