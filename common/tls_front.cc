#include "common/tls_front.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/socket.h"

namespace ringcache::tls {

absl::StatusOr<std::unique_ptr<TlsFront>> TlsFront::Start(
    const std::string& listen, std::shared_ptr<const ServerContext> context, int inner_port) {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(listen, &host, &port); !s.ok()) return s;
  std::unique_ptr<TlsFront> f(new TlsFront());
  f->context_ = std::move(context);
  f->inner_port_ = inner_port;
  absl::StatusOr<int> fd = ListenTcp(host, port, &f->port_);
  if (!fd.ok()) return fd.status();
  f->listen_fd_ = *fd;
  f->acceptor_ = std::thread([p = f.get()] { p->AcceptLoop(); });
  return f;
}

TlsFront::~TlsFront() { Stop(); }

void TlsFront::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);
  }
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_ == 0; };
  mu_.Await(absl::Condition(&done));
}

void TlsFront::AcceptLoop() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    absl::MutexLock l(&mu_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) continue;
    if (static_cast<int>(conns_.size()) >= kMaxConnections) {
      ::close(fd);
      continue;
    }
    conns_.insert(fd);
    ++threads_;
    std::thread([this, fd] { Relay(fd); }).detach();
  }
}

void TlsFront::Relay(int fd) {
  SetReceiveTimeout(fd, absl::Seconds(30));
  absl::StatusOr<std::unique_ptr<Session>> session = context_->Accept(fd, absl::Seconds(10));
  int inner = -1;
  if (session.ok()) {
    absl::StatusOr<int> dialed = DialTcp("127.0.0.1", inner_port_, absl::Seconds(2));
    if (dialed.ok()) inner = *dialed;
  }
  char buf[16384];
  while (inner >= 0) {
    bool tls_ready = (*session)->Pending() > 0;
    bool inner_ready = false;
    if (!tls_ready) {
      pollfd p[2] = {{fd, POLLIN, 0}, {inner, POLLIN, 0}};
      const int r = ::poll(p, 2, 30000);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;  // idle for 30 s, or an error
      tls_ready = (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
      inner_ready = (p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    }
    if (tls_ready) {
      const long n = (*session)->Read(buf, sizeof(buf));
      if (n == -EAGAIN) continue;
      if (n <= 0) break;
      iovec iov{buf, static_cast<size_t>(n)};
      if (!WriteFullV(inner, &iov, 1).ok()) break;
    }
    if (inner_ready) {
      const ssize_t n = ::recv(inner, buf, sizeof(buf), 0);
      if (n <= 0) break;
      if (!(*session)->Write(absl::string_view(buf, static_cast<size_t>(n))).ok()) break;
    }
  }
  if (session.ok()) (*session)->Close();
  if (inner >= 0) ::close(inner);
  session = absl::UnknownError("closed");  // the session goes before its socket
  absl::MutexLock l(&mu_);
  conns_.erase(fd);
  ::close(fd);
  --threads_;
}

}  // namespace ringcache::tls
