// Crash-safe replacement of small state files.
#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace ringcache {

absl::Status WriteFileAtomically(const std::string& path, absl::string_view content) {
  const std::string tmp = path + ".tmp";
  auto fail = [&](const std::string& what) {
    return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
  };
  // A new file, never through a link: whatever sits at the ".tmp" name (a crash's leftover, or
  // a link planted to make us write elsewhere) goes first.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    return fail(absl::StrCat("cannot remove the leftover ", tmp));
  }
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return fail(absl::StrCat("cannot create ", tmp));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return fail(absl::StrCat("cannot write ", tmp));
    }
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd) != 0) {
    ::close(fd);
    return fail(absl::StrCat("cannot sync ", tmp));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  // Make the rename itself durable.
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<int> OpenForRead(const std::string& path, bool follow_links = true) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
  if (fd >= 0) return fd;
  const int err = errno;
  if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
  if (err == ELOOP && !follow_links) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " is a symbolic link: ringcache does not follow links to its state files (one "
                     "could point them at another file); put the file itself there"));
  }
  return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(err)));
}

// Reads the rest of `fd` and closes it.
absl::StatusOr<std::string> ReadAndClose(int fd, const std::string& path, size_t max_bytes) {
  std::string out;
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("cannot read ", path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
    }
  }
  ::close(fd);
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  RC_ASSIGN_OR_RETURN(const int fd, OpenForRead(path));
  return ReadAndClose(fd, path, max_bytes);
}

absl::StatusOr<std::string> ReadStateFile(const std::string& path, size_t max_bytes) {
  RC_ASSIGN_OR_RETURN(const int fd, OpenForRead(path, /*follow_links=*/false));
  return ReadAndClose(fd, path, max_bytes);
}

absl::StatusOr<std::string> ReadPrivateFile(const std::string& path, size_t max_bytes) {
  RC_ASSIGN_OR_RETURN(const int fd, OpenForRead(path));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  const uid_t me = ::geteuid();
  std::string why;
  if (!S_ISREG(st.st_mode)) {
    why = "is not a regular file";
  } else if (st.st_uid != me) {
    why = absl::StrCat("is owned by uid ", st.st_uid, ", not by this process's user (uid ", me,
                       "); chown it");
  } else if ((st.st_mode & 077) != 0) {
    why = absl::StrFormat("is open to group or others (mode %04o); chmod 600 %s",
                          st.st_mode & 07777, path);
  }
  if (!why.empty()) {
    ::close(fd);
    return absl::PermissionDeniedError(
        absl::StrCat(path, " holds a secret but ", why,
                     " (a private key or PSK file must be "
                     "0600 or 0400 and owned by the user that reads it)"));
  }
  return ReadAndClose(fd, path, max_bytes);
}

}  // namespace ringcache
