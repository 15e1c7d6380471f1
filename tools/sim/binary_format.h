// ringcache-sim's compact binary trace format (".bin"), its reader and its writer.
//
// Layout (all integers little-endian):
//
//   Header, 64 bytes
//     0  char[8]  magic  "RCTRACE\0"
//     8  u32      version            1
//    12  u32      record_size        24
//    16  u64      record_count       UINT64_MAX while being written (then: read to end of file)
//    24  u64      names_offset       byte offset of the VDI name table, 0 = none
//    32  u32      unit_bytes         generator's block unit (informational, 0 = unknown)
//    36  u32      flags              0
//    40  u8[24]   reserved           0
//   Records, record_count × 24 bytes, starting at byte 64
//     0  u64      time_us            µs since the first request
//     8  u64      offset             bytes
//    16  u32      length_op          bits 0-30: length in bytes (> 0); bit 31: 1 = write
//    20  u32      vdi                VDI id
//   VDI name table (optional, right after the records, at names_offset)
//     u32 count, then count × { u32 vdi, u16 name_length, name bytes }
//
// The reader accepts a gzip-compressed file too (ByteSource detects it). Fixed-size records let
// the reader decode straight out of a large buffer with no per-request allocation.
//
// Thread-safety: reader and writer are not thread-safe; one thread each.
#ifndef RINGCACHE_TOOLS_SIM_BINARY_FORMAT_H_
#define RINGCACHE_TOOLS_SIM_BINARY_FORMAT_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/sim/byte_source.h"
#include "tools/sim/trace.h"

namespace ringcache::sim {

inline constexpr char kBinaryMagic[8] = {'R', 'C', 'T', 'R', 'A', 'C', 'E', '\0'};
inline constexpr uint32_t kBinaryVersion = 1;
inline constexpr uint32_t kBinaryHeaderSize = 64;
inline constexpr uint32_t kBinaryRecordSize = 24;
inline constexpr uint64_t kUnknownCount = ~uint64_t{0};

// Reports whether the (possibly gzip-compressed) file at `path` starts with kBinaryMagic.
bool IsBinaryTrace(const std::string& path);

class BinaryTraceReader : public RequestSource {
 public:
  // Opens and validates the header. Errors: open failures; kInvalidArgument for a bad magic,
  // version or record size.
  static absl::StatusOr<std::unique_ptr<BinaryTraceReader>> Open(const std::string& path);

  absl::StatusOr<size_t> Read(absl::Span<Request> out) override;
  std::vector<std::string> VdiNames() const override { return names_; }
  const SourceStats& stats() const override { return stats_; }

  // Records in the file, or kUnknownCount if the writer did not finish.
  uint64_t record_count() const { return record_count_; }
  uint32_t unit_bytes() const { return unit_bytes_; }

 private:
  explicit BinaryTraceReader(std::unique_ptr<ByteSource> src);
  absl::Status ReadNames();

  std::unique_ptr<ByteSource> src_;
  std::vector<unsigned char> buf_;
  size_t buf_begin_ = 0;
  size_t buf_end_ = 0;
  uint64_t record_count_ = 0;
  uint64_t names_offset_ = 0;
  uint32_t unit_bytes_ = 0;
  uint64_t remaining_ = 0;  // records not yet returned (when the count is known)
  bool done_ = false;
  SourceStats stats_;
  std::vector<std::string> names_;
};

class BinaryTraceWriter {
 public:
  // Creates (truncates) `path`. The file is complete only after Close() succeeds.
  static absl::StatusOr<std::unique_ptr<BinaryTraceWriter>> Create(const std::string& path,
                                                                  uint32_t unit_bytes = 0);
  ~BinaryTraceWriter();

  // Appends one request. REQUIRES: 0 < r.length < 2^31.
  absl::Status Append(const Request& r);
  // Writes the name table (index = VDI id; empty names are left out), patches the header and
  // closes the file.
  absl::Status Close(const std::vector<std::string>& vdi_names);

  uint64_t count() const { return count_; }

 private:
  BinaryTraceWriter(std::string path, std::FILE* f) : path_(std::move(path)), f_(f) {}
  absl::Status Flush();

  std::string path_;
  std::FILE* f_;
  std::vector<unsigned char> buf_;
  uint64_t count_ = 0;
};

// Copies every request of `src` into a new binary trace at `path`, with `src`'s VDI names.
// Returns the number of requests written.
absl::StatusOr<uint64_t> WriteBinaryTrace(RequestSource& src, const std::string& path,
                                          uint32_t unit_bytes = 0);

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_BINARY_FORMAT_H_
