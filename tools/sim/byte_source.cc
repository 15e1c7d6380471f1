// Plain and gzip byte sources, and the line reader. See byte_source.h.
#include "tools/sim/byte_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ringcache::sim {
namespace {

absl::Status ErrnoStatus(int err, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

class PlainSource : public ByteSource {
 public:
  PlainSource(std::string path, int fd) : ByteSource(std::move(path)), fd_(fd) {}
  ~PlainSource() override { ::close(fd_); }

  absl::StatusOr<size_t> Read(void* buf, size_t n) override {
    while (true) {
      ssize_t r = ::read(fd_, buf, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("read ", path()));
    }
  }
  bool compressed() const override { return false; }

 private:
  int fd_;
};

class GzipSource : public ByteSource {
 public:
  GzipSource(std::string path, gzFile gz) : ByteSource(std::move(path)), gz_(gz) {}
  ~GzipSource() override { gzclose(gz_); }

  absl::StatusOr<size_t> Read(void* buf, size_t n) override {
    // gzread takes an unsigned count; stay well inside it.
    unsigned want = static_cast<unsigned>(n > (1u << 30) ? (1u << 30) : n);
    int r = gzread(gz_, buf, want);
    if (r < 0) {
      int errnum = 0;
      const char* msg = gzerror(gz_, &errnum);
      return absl::DataLossError(
          absl::StrCat(path(), ": gzip: ", msg != nullptr ? msg : "read error"));
    }
    return static_cast<size_t>(r);
  }
  bool compressed() const override { return true; }

 private:
  gzFile gz_;
};

}  // namespace

bool IsGzipFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char magic[2] = {0, 0};
  ssize_t r = ::read(fd, magic, 2);
  ::close(fd);
  return r == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

absl::StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", path));
  unsigned char magic[2] = {0, 0};
  ssize_t r = ::pread(fd, magic, 2, 0);
  if (r == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    // gzdopen takes ownership of fd; it reads from the current offset (0).
    gzFile gz = gzdopen(fd, "rb");
    if (gz == nullptr) {
      ::close(fd);
      return absl::InternalError(absl::StrCat("gzdopen ", path, " failed"));
    }
    gzbuffer(gz, 1 << 18);
    return std::unique_ptr<ByteSource>(new GzipSource(path, gz));
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<ByteSource>(new PlainSource(path, fd));
}

absl::StatusOr<size_t> ByteSource::ReadFull(void* buf, size_t n) {
  size_t done = 0;
  char* p = static_cast<char*>(buf);
  while (done < n) {
    absl::StatusOr<size_t> r = Read(p + done, n - done);
    if (!r.ok()) return r.status();
    if (*r == 0) break;
    done += *r;
  }
  return done;
}

LineReader::LineReader(std::unique_ptr<ByteSource> src, size_t buffer_bytes, size_t max_line)
    : src_(std::move(src)), buf_(buffer_bytes < 2 * max_line ? 2 * max_line : buffer_bytes),
      max_line_(max_line) {}

absl::Status LineReader::Fill() {
  // Move the unconsumed tail to the front, then read as much as fits.
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  while (!eof_ && end_ < buf_.size()) {
    absl::StatusOr<size_t> r = src_->Read(buf_.data() + end_, buf_.size() - end_);
    if (!r.ok()) return r.status();
    if (*r == 0) {
      eof_ = true;
      break;
    }
    end_ += *r;
    if (end_ - begin_ >= max_line_) break;  // enough to find the next newline or fail
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> LineReader::Next(absl::string_view* line) {
  while (true) {
    const char* start = buf_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    if (nl != nullptr) {
      size_t len = static_cast<const char*>(nl) - start;
      begin_ += len + 1;
      if (len > 0 && start[len - 1] == '\r') --len;
      *line = absl::string_view(start, len);
      ++line_number_;
      return true;
    }
    if (end_ - begin_ > max_line_) {
      return absl::InvalidArgumentError(
          absl::StrCat(path(), ":", line_number_ + 1, ": line longer than ", max_line_,
                       " bytes (is this a binary file?)"));
    }
    if (eof_) {
      if (begin_ == end_) return false;
      size_t len = end_ - begin_;
      if (start[len - 1] == '\r') --len;
      *line = absl::string_view(start, len);
      begin_ = end_;
      ++line_number_;
      return true;
    }
    absl::Status s = Fill();
    if (!s.ok()) return s;
  }
}

}  // namespace ringcache::sim
