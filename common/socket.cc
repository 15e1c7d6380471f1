#include "common/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/iovec.h"

namespace ringcache {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::StatusOr<sockaddr_storage> Resolve(const std::string& host, int port, socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string h = host.empty() ? "0.0.0.0" : host;
  const int rc = getaddrinfo(h.c_str(), absl::StrCat(port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", h, ": ", gai_strerror(rc)));
  }
  sockaddr_storage addr{};
  std::memcpy(&addr, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return addr;
}

// Waits until `fd` is ready for `events` or `deadline`; false on timeout.
bool WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1,
                                                      60 * 60 * 1000));
    const int rc = poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the I/O call report the error
  }
}

}  // namespace

absl::StatusOr<int> ListenTcp(const std::string& host, int port, int* bound) {
  socklen_t len = 0;
  auto addr = Resolve(host, port, &len);
  if (!addr.ok()) return addr.status();
  const int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&*addr), len) != 0 || listen(fd, 256) != 0) {
    absl::Status s = Errno(absl::StrCat("cannot listen on ", host, ":", port));
    close(fd);
    return s;
  }
  sockaddr_storage got{};
  socklen_t got_len = sizeof(got);
  getsockname(fd, reinterpret_cast<sockaddr*>(&got), &got_len);
  *bound = ntohs(got.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&got)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  return fd;
}

absl::StatusOr<int> DialTcp(const std::string& host, int port, absl::Duration timeout) {
  socklen_t len = 0;
  auto addr = Resolve(host, port, &len);
  if (!addr.ok()) return addr.status();
  const int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Errno("socket");
  const std::string what = absl::StrCat("connect to ", host, ":", port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&*addr), len) != 0) {
    if (errno != EINPROGRESS) {
      absl::Status s = Errno(what);
      close(fd);
      return s;
    }
    if (!WaitFor(fd, POLLOUT, absl::Now() + timeout)) {
      close(fd);
      return absl::UnavailableError(absl::StrCat(what, ": timed out"));
    }
    int err = 0;
    socklen_t err_len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) {
      close(fd);
      return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
    }
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

absl::Status ReadFull(int fd, char* buf, size_t n, absl::Time deadline, bool* eof_at_start) {
  size_t got = 0;
  if (eof_at_start != nullptr) *eof_at_start = false;
  const bool bounded = deadline != absl::InfiniteFuture();
  while (got < n) {
    // Data already there costs one call; wait (poll) only when there is none yet.
    const ssize_t r = recv(fd, buf + got, n - got, bounded ? MSG_DONTWAIT : 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      if (got == 0 && eof_at_start != nullptr) *eof_at_start = true;
      return absl::UnavailableError("connection closed by the peer");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // Unbounded reads time out only through the socket's SO_RCVTIMEO.
      if (!bounded || !WaitFor(fd, POLLIN, deadline)) {
        return absl::DeadlineExceededError("no answer before the deadline");
      }
      continue;
    }
    return Errno("recv");
  }
  return absl::OkStatus();
}

void SetReceiveTimeout(int fd, absl::Duration timeout) {
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

absl::Status WriteFullV(int fd, struct iovec* iov, int count) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(std::min(count, IOV_MAX));
    const ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("send");  // also EAGAIN after a send timeout (SO_SNDTIMEO)
    }
    ConsumeIov(&iov, &count, static_cast<size_t>(w));
  }
  return absl::OkStatus();
}

absl::Status SplitHostPort(const std::string& addr, std::string* host, int* port) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("address '", addr, "' is not host:port"));
  }
  std::string h = addr.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(addr.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address '", addr, "' has a bad port"));
  }
  *host = h;
  *port = p;
  return absl::OkStatus();
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

}  // namespace ringcache
