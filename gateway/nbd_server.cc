// NbdServer: sockets, threads and request execution around the pure protocol code in
// nbd_protocol.{h,cc}. See nbd_server.h for the threading model and limits.
#include "gateway/nbd_server.h"

#include "gateway/nbd_connection.h"

namespace ringcache::gateway {

namespace {

// "address:port" of a client, for the logs (its slot is PeerAddress, common/conn_slots.h).
std::string PeerName(const sockaddr_storage& ss) {
  int port = 0;
  if (ss.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  }
  return absl::StrCat(PeerAddress(ss), ":", port);
}

}  // namespace

absl::Status NbdServerConfig::Validate() const {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(listen, &host, &port); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("listen: ", s.message()));
  }
  auto bad = [](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  if (max_connections < 1) return bad("max_connections", "must be at least 1");
  if (max_connections_per_peer < 0 || max_connections_per_peer > max_connections) {
    return bad("max_connections_per_peer", "must be in 0..max_connections (0: half of it)");
  }
  if (worker_threads < 1 || worker_threads > 1024) {
    return bad("worker_threads", "must be in 1..1024");
  }
  if (max_worker_threads < worker_threads || max_worker_threads > 4096) {
    return bad("max_worker_threads", "must be in worker_threads..4096");
  }
  if (vdi_worker_limit < 1 || vdi_worker_limit > max_worker_threads) {
    return bad("vdi_worker_limit", "must be in 1..max_worker_threads");
  }
  if (max_inflight_requests < 1) return bad("max_inflight_requests", "must be at least 1");
  if (max_payload < 4096 || max_payload > nbd::kMaxPayloadLength) {
    return bad("max_payload", absl::StrCat("must be in 4096..", nbd::kMaxPayloadLength));
  }
  if (max_inflight_bytes_per_peer < max_inflight_bytes) {
    return bad("max_inflight_bytes_per_peer", "must be at least max_inflight_bytes");
  }
  if (max_inflight_bytes < max_payload) {
    return bad("max_inflight_bytes", "must be at least max_payload");
  }
  if (max_option_length < nbd::kMaxStringLength + 16) {
    return bad("max_option_length", absl::StrCat("must be at least ", nbd::kMaxStringLength + 16,
                                                 " (room for a maximal export name)"));
  }
  if (max_options < 1) return bad("max_options", "must be at least 1");
  if (handshake_timeout_ms < 1) return bad("handshake_timeout_ms", "must be positive");
  if (request_timeout_ms < 1) return bad("request_timeout_ms", "must be positive");
  if (idle_timeout_ms < 0) return bad("idle_timeout_ms", "must be 0 (never) or positive");
  if (send_timeout_ms < 1) return bad("send_timeout_ms", "must be positive");
  if (stop_grace_ms < 0) return bad("stop_grace_ms", "must not be negative");
  if (max_block_status_descriptors < 1) {
    return bad("max_block_status_descriptors", "must be at least 1");
  }
  if (tls != nbd::TlsMode::kOff && tls_context == nullptr) {
    return absl::InvalidArgumentError("nbd: TLS mode '" + std::string(nbd::TlsModeName(tls)) +
                                      "' needs TLS credentials");
  }
  return absl::OkStatus();
}

NbdServer::NbdServer(NbdServerConfig config, ExportProvider* exports, metrics::Registry* registry)
    : config_(std::move(config)),
      exports_(exports),
      metrics_(
          std::make_unique<Metrics>(registry != nullptr ? registry : metrics::Registry::Default())),
      slots_(config_.max_connections, config_.max_connections_per_peer) {}

NbdServer::~NbdServer() { Stop(); }

void NbdServer::ForgetExport(const std::string& name) { metrics_->Forget(name); }

absl::StatusOr<int> NbdServer::Start() {
  if (started_) return absl::FailedPreconditionError("NbdServer already started");
  if (absl::Status s = config_.Validate(); !s.ok()) return s;
  std::string host;
  int port = 0;
  (void)SplitHostPort(config_.listen, &host, &port);  // Validate checked it
  absl::StatusOr<int> fd = ListenTcp(host, port, &port_);
  if (!fd.ok()) return fd.status();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(*fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  listen_fd_ = *fd;
  TaskPool::Options po;
  po.threads = config_.worker_threads;
  po.max_threads = config_.max_worker_threads;
  po.lane_limit = config_.vdi_worker_limit;
  pool_ = std::make_unique<TaskPool>(po);
  started_ = true;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  spdlog::info("nbd: listening on {} (port {})", config_.listen, port_);
  return port_;
}

void NbdServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int r = ::poll(fds, 2, 1000);  // the timeout only paces the reaping of old connections
    Reap(false);
    if (r <= 0) continue;
    if (fds[1].revents != 0) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        spdlog::warn("nbd: accept: {}", std::strerror(errno));
        absl::SleepFor(absl::Milliseconds(50));  // let connections close before trying again
      }
      continue;
    }
    std::string address = PeerAddress(ss);
    if (const ConnectionSlots::Refusal r = slots_.Take(address);
        r != ConnectionSlots::Refusal::kNone) {
      const bool peer = r == ConnectionSlots::Refusal::kPeer;
      (peer ? metrics_->rejected_peer : metrics_->rejected_total)->Increment();
      ::close(fd);
      const uint64_t n = ++rejections_;
      if ((n & (n - 1)) != 0) continue;
      spdlog::warn(
          "nbd {}: rejected: {} ({} rejected so far)", PeerName(ss),
          peer ? absl::StrCat(slots_.max_per_peer(), " connections from ", address,
                              " are open (--nbd-max-connections-per-peer)")
               : absl::StrCat(slots_.max_total(), " connections are open (--nbd-max-connections)"),
          n);
      continue;
    }
    metrics_->accepted->Increment();
    auto conn = std::make_shared<Connection>(fd, PeerName(ss), &config_, exports_, metrics_.get(),
                                             pool_.get(), &stopping_, &slots_, std::move(address),
                                             &admission_waits_);
    {
      absl::MutexLock l(&mu_);
      connections_.push_back(conn);
    }
    conn->Start();
  }
}

void NbdServer::Reap(bool all) {
  std::list<std::shared_ptr<Connection>> done;
  {
    absl::MutexLock l(&mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      auto next = std::next(it);
      if (all || (*it)->finished()) done.splice(done.end(), connections_, it);
      it = next;
    }
  }
  for (auto& c : done) c->Join();
}

void NbdServer::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  acceptor_.join();
  ::close(listen_fd_);
  listen_fd_ = -1;
  {
    absl::MutexLock l(&mu_);
    for (auto& c : connections_) c->BeginStop();
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(config_.stop_grace_ms);
  while (slots_.total() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  {
    absl::MutexLock l(&mu_);
    for (auto& c : connections_) {
      if (!c->finished()) c->ForceClose();
    }
  }
  Reap(true);
  pool_->Shutdown();
  ::close(wake_fd_);
  wake_fd_ = -1;
  spdlog::info("nbd: stopped");
}

}  // namespace ringcache::gateway
