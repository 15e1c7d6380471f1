// A connection's input read in large pieces: see stream_reader.h.
#include "common/stream_reader.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/socket.h"

namespace ringcache {

absl::Status StreamReader::FillTo(size_t n, const std::function<absl::Status()>& on_timeout,
                                  bool* clean_end) {
  if (clean_end != nullptr) *clean_end = false;
  if (buf_.size() - begin_ < n) {  // make room at the end
    std::memmove(buf_.data(), buf_.data() + begin_, available());
    end_ -= begin_;
    begin_ = 0;
  }
  while (available() < n) {
    long got;
    if (session_ != nullptr) {
      got = session_->Read(buf_.data() + end_, buf_.size() - end_);
      // The socket's receive timeout, or the session wants to be called again: only a caller
      // that set a timeout (and gave on_timeout) looks at the clock.
      if (got == -EAGAIN && on_timeout == nullptr) continue;
      if (got < 0) errno = static_cast<int>(-got);
    } else {
      got = ::recv(fd_, buf_.data() + end_, buf_.size() - end_, 0);
    }
    if (got > 0) {
      end_ += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT)) {
      if (on_timeout == nullptr) return absl::DeadlineExceededError("nothing received in time");
      if (absl::Status s = on_timeout(); !s.ok()) return s;
      continue;
    }
    if (got == 0) {
      if (clean_end != nullptr) *clean_end = available() == 0;
      return absl::UnavailableError("connection closed by the peer");
    }
    return absl::UnavailableError(absl::StrCat("receive: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status StreamReader::ReadTo(char* out, size_t len, absl::Time deadline) {
  const size_t have = std::min(available(), len);
  std::memcpy(out, data(), have);
  Consume(have);
  if (have == len) return absl::OkStatus();
  if (session_ == nullptr) return ReadFull(fd_, out + have, len - have, deadline);
  // A receive timeout (SO_RCVTIMEO) wakes the loop to look at the deadline.
  for (size_t got = have; got < len;) {
    const long n = session_->Read(out + got, len - got);
    // The deadline holds whatever arrives: a sender of a byte now and then meets it too.
    if (n > 0) {
      got += static_cast<size_t>(n);
      if (got < len && absl::Now() >= deadline) {
        return absl::DeadlineExceededError("not received in time");
      }
    } else if (n == -EAGAIN) {
      if (absl::Now() >= deadline) return absl::DeadlineExceededError("nothing received in time");
    } else if (n == 0) {
      return absl::UnavailableError("connection closed by the peer");
    } else {
      return absl::UnavailableError("TLS receive failed");
    }
  }
  return absl::OkStatus();
}

}  // namespace ringcache
