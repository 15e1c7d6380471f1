#include "cachenode/data_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

DataServer::DataServer(CacheNode* node, RequestGate* gate, metrics::Registry* registry)
    : node_(node), gate_(gate) {
  const char* names[] = {"", "read", "write", "trim", "zero"};
  for (int op = 1; op <= 4; ++op) {
    requests_[op] = registry->GetCounter("ringcache_cachenode_data_requests_total",
                                         "Block requests served over the block data protocol.",
                                         {{"op", names[op]}});
  }
  refused_connections_ = registry->GetCounter(
      "ringcache_cachenode_data_refused_connections_total",
      "Block data connections closed at once: over the connection limit.");
  protocol_errors_ = registry->GetCounter(
      "ringcache_cachenode_data_protocol_errors_total",
      "Block data connections closed on a malformed request.");
  tls_refused_ = registry->GetCounter(
      "ringcache_cachenode_data_tls_refused_total",
      "Block data connections whose TLS handshake failed or whose certificate was refused.");
}

absl::StatusOr<std::unique_ptr<DataServer>> DataServer::Start(const DataServerOptions& options,
                                                              CacheNode* node, RequestGate* gate,
                                                              metrics::Registry* registry) {
  std::unique_ptr<DataServer> s(new DataServer(node, gate, registry));
  s->max_connections_ = options.max_connections;
  s->tls_ = options.tls;
  RC_ASSIGN_OR_RETURN(s->listen_fd_, ListenTcp(options.host, options.port, &s->port_));
  s->acceptor_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

DataServer::~DataServer() { Stop(); }

void DataServer::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (int fd : conns_) shutdown(fd, SHUT_RDWR);
  }
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_ == 0; };
  mu_.Await(absl::Condition(&done));
}

void DataServer::AcceptLoop() {
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
    absl::MutexLock l(&mu_);
    if (stopping_ || static_cast<int>(conns_.size()) >= max_connections_) {
      if (!stopping_) refused_connections_->Increment();
      close(fd);
      continue;
    }
    conns_.insert(fd);
    ++threads_;
    std::thread([this, fd] { Serve(fd); }).detach();
  }
}

void DataServer::Serve(int fd) {
  std::vector<char> payload, data;
  char head[wire::kRequestBytes];
  std::unique_ptr<tls::Session> session;
  if (tls_ != nullptr) {
    absl::StatusOr<std::unique_ptr<tls::Session>> s = tls_->Accept(fd, absl::Seconds(10));
    if (s.ok()) {
      session = *std::move(s);
    } else {
      tls_refused_->Increment();
      spdlog::warn("block data connection refused: {}", std::string(s.status().message()));
    }
  }
  for (;;) {
    if (tls_ != nullptr && session == nullptr) break;
    if (!tls::ReadFullOn(fd, session.get(), head, sizeof(head)).ok()) break;
    wire::Request r;
    if (absl::Status d = wire::DecodeRequest(head, &r); !d.ok()) {
      protocol_errors_->Increment();
      spdlog::warn("block data connection closed: {}", d.ToString());
      break;
    }
    if (r.op == wire::Op::kWrite) {
      payload.resize(r.length);
      if (!tls::ReadFullOn(fd, session.get(), payload.data(), r.length).ok()) break;
    }
    if (r.op == wire::Op::kRead && data.size() < r.length) data.resize(r.length);
    requests_[static_cast<int>(r.op)]->Increment();
    const absl::Status st = Handle(r, payload.data(), data.data());
    const bool read = r.op == wire::Op::kRead;
    const wire::Response resp = wire::FromStatus(st, read ? r.length : 0);
    char out[wire::kResponseBytes];
    wire::EncodeResponse(resp, out);
    iovec iov[3] = {{out, sizeof(out)},
                    {const_cast<char*>(st.message().data()), resp.message_len},
                    {data.data(), resp.data_len}};
    if (!tls::WriteFullVOn(fd, session.get(), iov, 3).ok()) break;
  }
  session.reset();
  absl::MutexLock l(&mu_);
  conns_.erase(fd);
  close(fd);
  --threads_;
}

absl::Status DataServer::Handle(const wire::Request& r, const char* payload, char* data) {
  RC_RETURN_IF_ERROR(gate_->Admit(r.epoch));
  switch (r.op) {
    case wire::Op::kRead:
      return node_->Read(r.vdi, r.object, r.offset, r.length, data);
    case wire::Op::kWrite: {
      const absl::Time deadline = RequestGate::WriteDeadline(
          r.timeout_ms == 0 ? absl::InfiniteFuture()
                            : absl::Now() + absl::Milliseconds(r.timeout_ms));
      return node_->Write(r.vdi, r.object, r.offset, r.length, payload, deadline);
    }
    case wire::Op::kTrim:
    case wire::Op::kZero:
      return node_->Trim(r.vdi, r.object, r.offset, r.length, r.op == wire::Op::kZero);
  }
  return absl::InvalidArgumentError("unknown op");
}

}  // namespace ringcache::cachenode
