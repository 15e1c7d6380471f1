// Byte-level input for trace files: a plain file or a gzip stream, chosen by the file's magic
// bytes (1f 8b), and a line reader on top that never allocates per line.
//
// Thread-safety: not thread-safe; each object belongs to one thread.
#ifndef RINGCACHE_TOOLS_SIM_BYTE_SOURCE_H_
#define RINGCACHE_TOOLS_SIM_BYTE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringcache::sim {

// A sequential reader of a file's (decompressed) bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;

  // Opens `path`. A file starting with the gzip magic is decompressed transparently (zlib);
  // anything else is read as is. Errors: kNotFound / kPermissionDenied / kInternal from open(2).
  static absl::StatusOr<std::unique_ptr<ByteSource>> Open(const std::string& path);

  // Reads up to `n` bytes into `buf`; returns the count, 0 at the end of the data.
  virtual absl::StatusOr<size_t> Read(void* buf, size_t n) = 0;

  // Reads exactly `n` bytes unless the data ends first; returns the count read.
  absl::StatusOr<size_t> ReadFull(void* buf, size_t n);

  virtual bool compressed() const = 0;
  const std::string& path() const { return path_; }

 protected:
  explicit ByteSource(std::string path) : path_(std::move(path)) {}

 private:
  std::string path_;
};

// Reports whether the file at `path` starts with the gzip magic bytes. False if unreadable.
bool IsGzipFile(const std::string& path);

// Splits a ByteSource into lines. A line excludes its '\n' (and a trailing '\r'); the last line
// may lack a newline. Lines are views into an internal buffer, valid until the next call.
class LineReader {
 public:
  // Lines longer than `max_line` bytes are reported as errors (a binary file fed as text).
  explicit LineReader(std::unique_ptr<ByteSource> src, size_t buffer_bytes = 1 << 20,
                      size_t max_line = 1 << 16);

  // Sets *line to the next line. Returns false at the end of input.
  absl::StatusOr<bool> Next(absl::string_view* line);

  // 1-based number of the line last returned.
  uint64_t line_number() const { return line_number_; }
  const std::string& path() const { return src_->path(); }

 private:
  absl::Status Fill();

  std::unique_ptr<ByteSource> src_;
  std::vector<char> buf_;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last valid byte
  size_t max_line_;
  bool eof_ = false;
  uint64_t line_number_ = 0;
};

}  // namespace ringcache::sim

#endif  // RINGCACHE_TOOLS_SIM_BYTE_SOURCE_H_
