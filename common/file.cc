#include "common/file.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <climits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/iovec.h"
#include "common/status_macros.h"

namespace ringcache {
namespace {

absl::Status Errno(const std::string& what, int e) {
  std::string msg = absl::StrCat(what, ": ", strerror(e));
  if (e == ENOSPC) return absl::ResourceExhaustedError(msg);
  return absl::UnavailableError(msg);
}

class PosixFile : public File {
 public:
  PosixFile(int fd, std::string path, bool blk) : fd_(fd), path_(std::move(path)), blk_(blk) {}
  ~PosixFile() override { ::close(fd_); }

  absl::Status PRead(void* buf, size_t len, uint64_t off) const override {
    char* p = static_cast<char*>(buf);
    while (len > 0) {
      ssize_t n = ::pread(fd_, p, len, static_cast<off_t>(off));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno(absl::StrCat("read ", path_), errno);
      if (n == 0) return absl::OutOfRangeError(absl::StrCat("read ", path_, ": short file"));
      p += n;
      len -= static_cast<size_t>(n);
      off += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }
  absl::Status PReadV(const struct iovec* iov, int n, uint64_t off) const override {
    // Copies the vector so a short read can advance it (preadv may stop anywhere).
    std::vector<struct iovec> v(iov, iov + n);
    struct iovec* at = v.data();
    int left = n;
    while (left > 0) {
      ssize_t got = ::preadv(fd_, at, std::min(left, IOV_MAX), static_cast<off_t>(off));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return Errno(absl::StrCat("read ", path_), errno);
      if (got == 0) return absl::OutOfRangeError(absl::StrCat("read ", path_, ": short file"));
      off += static_cast<uint64_t>(got);
      ConsumeIov(&at, &left, static_cast<size_t>(got));
    }
    return absl::OkStatus();
  }
  absl::Status PWrite(const void* buf, size_t len, uint64_t off) override {
    const char* p = static_cast<const char*>(buf);
    while (len > 0) {
      ssize_t n = ::pwrite(fd_, p, len, static_cast<off_t>(off));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno(absl::StrCat("write ", path_), errno);
      p += n;
      len -= static_cast<size_t>(n);
      off += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fdatasync(fd_) != 0) return Errno(absl::StrCat("fdatasync ", path_), errno);
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Size() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Errno(absl::StrCat("stat ", path_), errno);
    uint64_t size = static_cast<uint64_t>(st.st_size);
    if (blk_ && ::ioctl(fd_, BLKGETSIZE64, &size) != 0) {
      return Errno(absl::StrCat("BLKGETSIZE64 ", path_), errno);
    }
    return size;
  }
  absl::Status Preallocate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return Errno(absl::StrCat("ftruncate ", path_), errno);
    }
    // Best effort: a file system without fallocate still gets the size.
    int rc = ::posix_fallocate(fd_, 0, static_cast<off_t>(size));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
      return Errno(absl::StrCat("preallocate ", size, " bytes for ", path_), rc);
    }
    return absl::OkStatus();
  }
  bool IsBlockDevice() const override { return blk_; }

 private:
  const int fd_;
  const std::string path_;
  const bool blk_;
};

}  // namespace

absl::Status File::PReadV(const struct iovec* iov, int n, uint64_t off) const {
  for (int i = 0; i < n; ++i) {
    RC_RETURN_IF_ERROR(PRead(iov[i].iov_base, iov[i].iov_len, off));
    off += iov[i].iov_len;
  }
  return absl::OkStatus();
}

bool IsBlockDevicePath(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
}

absl::StatusOr<std::unique_ptr<File>> OpenPosixFile(const std::string& path, bool create) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
  if (fd < 0) return Errno(absl::StrCat("open ", path), errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Errno(absl::StrCat("stat ", path), e);
  }
  return std::unique_ptr<File>(new PosixFile(fd, path, S_ISBLK(st.st_mode)));
}

void FaultInjectionFile::DropUnsynced() {
  absl::MutexLock l(&mu_);
  pending_.clear();
}

absl::Status FaultInjectionFile::PRead(void* buf, size_t len, uint64_t off) const {
  absl::Status s = base_->PRead(buf, len, off);
  if (!s.ok()) return s;
  absl::MutexLock l(&mu_);
  // Overlay pending writes that overlap [off, off + len).
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    const uint64_t w_lo = it->first, w_hi = it->first + it->second.size();
    const uint64_t lo = std::max(w_lo, off), hi = std::min(w_hi, off + len);
    if (lo >= hi) continue;
    std::memcpy(static_cast<char*>(buf) + (lo - off), it->second.data() + (lo - w_lo), hi - lo);
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFile::PWrite(const void* buf, size_t len, uint64_t off) {
  if (fail_writes_.load()) return absl::UnavailableError("write: injected EIO");
  absl::MutexLock l(&mu_);
  // Writes are applied in order on Sync; an exact overwrite replaces the earlier one.
  std::string& slot = pending_[off];
  if (slot.size() > len) {
    slot.replace(0, len, static_cast<const char*>(buf), len);
  } else {
    slot.assign(static_cast<const char*>(buf), len);
  }
  return absl::OkStatus();
}

absl::Status FaultInjectionFile::Sync() {
  std::map<uint64_t, std::string> batch;
  {
    absl::MutexLock l(&mu_);
    batch.swap(pending_);
  }
  int left = fail_syncs_.load();
  while (left > 0 && !fail_syncs_.compare_exchange_weak(left, left - 1)) {
  }
  if (left > 0) {
    // The kernel reported the writeback error once and dropped the pages: the data is gone.
    return absl::UnavailableError("fdatasync: injected EIO");
  }
  for (const auto& [off, data] : batch) {
    if (absl::Status s = base_->PWrite(data.data(), data.size(), off); !s.ok()) return s;
  }
  return base_->Sync();
}

}  // namespace ringcache
