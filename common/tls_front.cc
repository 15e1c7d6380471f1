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
  ConnectionServer::Options o;
  if (absl::Status s = SplitHostPort(listen, &o.host, &o.port); !s.ok()) return s;
  o.max_connections = kMaxConnections;
  std::unique_ptr<TlsFront> f(new TlsFront());
  f->context_ = std::move(context);
  f->inner_port_ = inner_port;
  absl::StatusOr<std::unique_ptr<ConnectionServer>> server =
      ConnectionServer::Start(o, [p = f.get()](int fd) { p->Relay(fd); });
  if (!server.ok()) return server.status();
  f->server_ = *std::move(server);
  return f;
}

TlsFront::~TlsFront() { Stop(); }

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
}

}  // namespace ringcache::tls
