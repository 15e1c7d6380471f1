#include "common/conn_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <utility>

#include "common/socket.h"

namespace ringcache {

absl::StatusOr<std::unique_ptr<ConnectionServer>> ConnectionServer::Start(const Options& options,
                                                                          Handler handler,
                                                                          Refused refused) {
  std::unique_ptr<ConnectionServer> s(new ConnectionServer());
  s->handler_ = std::move(handler);
  s->refused_ = std::move(refused);
  s->slots_ =
      std::make_unique<ConnectionSlots>(options.max_connections, options.max_connections_per_peer);
  absl::StatusOr<int> fd = ListenTcp(options.host, options.port, &s->port_);
  if (!fd.ok()) return fd.status();
  s->listen_fd_ = *fd;
  s->acceptor_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

ConnectionServer::~ConnectionServer() { Stop(); }

void ConnectionServer::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);
  }
  if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_ == 0; };
  mu_.Await(absl::Condition(&done));
}

void ConnectionServer::AcceptLoop() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      absl::MutexLock l(&mu_);
      if (stopping_) return;
      if (errno == EMFILE || errno == ENFILE) {  // out of fds: let connections finish
        mu_.Unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        mu_.Lock();
      }
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string peer = PeerAddressOf(fd);
    absl::MutexLock l(&mu_);
    const ConnectionSlots::Refusal refusal =
        stopping_ ? ConnectionSlots::Refusal::kTotal : slots_->Take(peer);
    if (refusal != ConnectionSlots::Refusal::kNone) {
      if (!stopping_ && refused_) refused_(ConnectionSlots::Name(refusal), peer);
      ::close(fd);
      continue;
    }
    conns_.insert(fd);
    ++threads_;
    std::thread([this, fd, peer = std::move(peer)] { Serve(fd, peer); }).detach();
  }
}

void ConnectionServer::Serve(int fd, const std::string& peer) {
  handler_(fd);
  slots_->Give(peer);
  absl::MutexLock l(&mu_);
  conns_.erase(fd);
  ::close(fd);
  --threads_;
}

}  // namespace ringcache
