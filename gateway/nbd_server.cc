// NbdServer: sockets, threads and request execution around the pure protocol code in
// nbd_protocol.{h,cc}. See nbd_server.h for the threading model and limits.
#include "gateway/nbd_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/socket.h"

namespace ringcache::gateway {

using nbd::Request;

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
  if (max_inflight_bytes < max_payload) {
    return bad("max_inflight_bytes", "must be at least max_payload");
  }
  if (max_option_length < nbd::kMaxStringLength + 16) {
    return bad("max_option_length", absl::StrCat("must be at least ", nbd::kMaxStringLength + 16,
                                                 " (room for a maximal export name)"));
  }
  if (max_options < 1) return bad("max_options", "must be at least 1");
  if (handshake_timeout_ms < 1) return bad("handshake_timeout_ms", "must be positive");
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

// ---- Metrics ------------------------------------------------------------------------------------

struct NbdServer::Metrics {
  static constexpr int kCommands = 9;  // NBD_CMD_READ..NBD_CMD_BLOCK_STATUS, then "unknown"
  static constexpr int kResults = 9;
  static constexpr uint32_t kResultErrno[kResults] = {0,          nbd::kEperm,    nbd::kEio,
                                                      nbd::kEnomem, nbd::kEinval, nbd::kEnospc,
                                                      nbd::kEoverflow, nbd::kEnotsup,
                                                      nbd::kEshutdown};

  // The series of one export (VDI): requests, bytes and latency, labelled vdi="<name>". Shared by
  // the connections serving it; dropped from the registry once the VDI is deleted and its last
  // connection has closed (ForgetExport).
  struct Vdi {
    std::string name;
    std::atomic<metrics::Counter*> requests[kCommands][kResults];
    metrics::Histogram* duration[kCommands - 1] = {};
    metrics::Counter* bytes_read = nullptr;
    metrics::Counter* bytes_written = nullptr;
    int users = 0;           // connections serving it; guarded by Metrics::mu
    bool forgotten = false;  // deleted while in use; guarded by Metrics::mu
  };

  explicit Metrics(metrics::Registry* r) : registry(r) {
    connections = registry->GetGauge("ringcache_nbd_connections", "Open NBD client connections.");
    accepted = registry->GetCounter("ringcache_nbd_connections_accepted_total",
                                    "NBD connections accepted.");
    rejected = registry->GetCounter("ringcache_nbd_connections_rejected_total",
                                    "NBD connections closed at once because max_connections "
                                    "were open.");
  }

  // Returns the series of export `name` for a new connection; Release() it when the connection
  // ends.
  Vdi* Acquire(const std::string& name) {
    absl::MutexLock l(&mu);
    std::unique_ptr<Vdi>& v = vdis[name];
    if (!v) {
      v = std::make_unique<Vdi>();
      v->name = name;
      for (int c = 0; c < kCommands; ++c) {
        for (int e = 0; e < kResults; ++e) v->requests[c][e].store(nullptr);
      }
      const metrics::Labels vdi{{"vdi", name}};
      for (int c = 0; c < kCommands - 1; ++c) {
        Counter(v.get(), c, 0);  // pre-create the "ok" series so dashboards see zeros
        if (c == nbd::kCmdDisc) continue;  // has no reply, so no latency
        v->duration[c] = registry->GetHistogram(
            "ringcache_nbd_request_duration_seconds",
            "Time from a request being read to its reply being queued, by VDI and NBD command "
            "(requests rejected before execution are not timed).",
            {{"vdi", name}, {"command", nbd::CommandName(static_cast<uint16_t>(c))}});
      }
      const char* bytes_help =
          "Bytes of NBD data by VDI: read = sent to clients by READ, write = received from "
          "clients by WRITE.";
      v->bytes_read = registry->GetCounter("ringcache_nbd_bytes_total", bytes_help,
                                           {{"vdi", name}, {"direction", "read"}});
      v->bytes_written = registry->GetCounter("ringcache_nbd_bytes_total", bytes_help,
                                              {{"vdi", name}, {"direction", "write"}});
    }
    v->forgotten = false;  // a VDI of that name exists (again)
    ++v->users;
    return v.get();
  }

  void Release(Vdi* v) {
    absl::MutexLock l(&mu);
    if (--v->users == 0 && v->forgotten) Drop(v->name);
  }

  // The VDI `name` was deleted: its series go now, or when its last connection ends.
  void Forget(const std::string& name) {
    absl::MutexLock l(&mu);
    auto it = vdis.find(name);
    if (it == vdis.end()) {
      registry->RemoveSeries({{"vdi", name}});  // none of ours; other components' series of it
      return;
    }
    if (it->second->users == 0) {
      Drop(name);
    } else {
      it->second->forgotten = true;
    }
  }

  void Drop(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    registry->RemoveSeries({{"vdi", name}});
    vdis.erase(name);
  }

  static int CommandIndex(uint16_t type) { return type < kCommands - 1 ? type : kCommands - 1; }
  static int ResultIndex(uint32_t error) {
    for (int i = 0; i < kResults; ++i) {
      if (kResultErrno[i] == error) return i;
    }
    return 2;  // unnamed errors are reported as EIO
  }

  metrics::Counter* Counter(Vdi* v, int command, int result) {
    metrics::Counter* c = v->requests[command][result].load(std::memory_order_acquire);
    if (c == nullptr) {
      // GetCounter is idempotent, so racing threads store the same pointer.
      c = registry->GetCounter(
          "ringcache_nbd_requests_total", "NBD requests answered, by VDI, command and result.",
          {{"vdi", v->name},
           {"command", nbd::CommandName(static_cast<uint16_t>(command))},
           {"result", nbd::ErrnoName(kResultErrno[result])}});
      v->requests[command][result].store(c, std::memory_order_release);
    }
    return c;
  }

  // Counts an answered request; `seconds` < 0 means "rejected before execution, not timed".
  void Request(Vdi* v, uint16_t type, uint32_t error, double seconds) {
    const int c = CommandIndex(type);
    Counter(v, c, ResultIndex(error))->Increment();
    if (seconds >= 0 && c < kCommands - 1 && v->duration[c] != nullptr) {
      v->duration[c]->Observe(seconds);
    }
  }

  void ProtocolError(const char* reason) {
    registry
        ->GetCounter("ringcache_nbd_protocol_errors_total",
                     "NBD connections ended because the client broke the protocol, by reason.",
                     {{"reason", reason}})
        ->Increment();
  }

  metrics::Registry* const registry;
  metrics::Gauge* connections;
  metrics::Counter* accepted;
  metrics::Counter* rejected;
  absl::Mutex mu;
  std::map<std::string, std::unique_ptr<Vdi>> vdis ABSL_GUARDED_BY(mu);
};

// ---- Socket helpers --------------------------------------------------------------------------------

namespace {

enum class ReadResult { kOk, kEof, kTruncated, kError };

// Reads exactly `len` bytes. kEof: the peer closed before the first byte; kTruncated: after some.
ReadResult ReadFull(int fd, char* buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    const ssize_t n = ::recv(fd, buf + got, len - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return got == 0 ? ReadResult::kEof : ReadResult::kTruncated;
    } else if (errno != EINTR) {
      return ReadResult::kError;
    }
  }
  return ReadResult::kOk;
}

bool SendAll(int fd, const std::string& bytes) {
  if (bytes.empty()) return true;
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  return WriteFullV(fd, &iov, 1).ok();
}

std::string PeerName(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace

// ---- Connection --------------------------------------------------------------------------------------

class NbdServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(int fd, std::string peer, const NbdServerConfig* config, ExportProvider* exports,
             Metrics* metrics, TaskPool* pool, const std::atomic<bool>* stopping,
             std::atomic<int>* active, std::atomic<int>* admission_waits)
      : fd_(fd),
        peer_(std::move(peer)),
        config_(config),
        exports_(exports),
        metrics_(metrics),
        pool_(pool),
        stopping_(stopping),
        active_(active),
        admission_waits_(admission_waits) {}

  ~Connection() {
    if (reader_.joinable()) reader_.join();
    CloseSocket();
  }

  // Starts the reader thread. The server keeps a reference until Join() has returned.
  void Start() {
    metrics_->connections->Increment();
    reader_ = std::thread([this] { Run(); });
  }
  void Join() {
    if (reader_.joinable()) reader_.join();
  }
  bool finished() const { return finished_.load(); }

  // Stops reading requests; in-flight ones are still answered.
  void BeginStop() { ShutdownSocket(SHUT_RD); }
  // Breaks the connection both ways (in-flight replies are dropped).
  void ForceClose() { ShutdownSocket(SHUT_RDWR); }

 private:
  struct OutMsg {
    std::string header;
    std::unique_ptr<char[]> data;
    uint32_t data_len = 0;
    uint64_t charge = 0;  // bytes returned to the in-flight budget once sent
  };

  void Run();
  bool Handshake();
  void Transmit();
  bool Admit(uint64_t charge);
  void Execute(const Request& req, std::unique_ptr<char[]> payload, uint64_t charge,
               absl::Time start);
  // Starts a READ on the device's asynchronous path (BlockDevice::ReadAsync), which answers it
  // from the device's completion thread without a worker; false when the device has none for
  // it. A failed asynchronous read is done again by a worker (Execute), whose device call
  // retries and re-routes.
  bool StartAsyncRead(const Request& req, uint64_t charge, absl::Time start);
  // The successful reply to READ `req` (its data in msg->data) and its accounting.
  void AppendReadReply(const Request& req, OutMsg* msg);
  void QueueError(const Request& req, uint32_t error, const std::string& message, uint64_t charge);
  void Enqueue(OutMsg msg);
  // The connection's byte stream: the socket, or its TLS session once STARTTLS succeeded.
  ReadResult ReadExact(char* buf, size_t len);
  bool SendBytes(const std::string& bytes);
  bool SendV(iovec* iov, int count);
  // Runs the TLS handshake after NBD_OPT_STARTTLS was acknowledged.
  bool StartTls(nbd::ServerHandshake* hs, absl::Time deadline);
  // Whether `bytes` fit in the socket's send buffer now (a send would not block).
  bool SocketHasRoom(size_t bytes) const;
  // Sends the replies (nothing if `broken`) and returns their budget. REQUIRES: mu_ not held,
  // this thread set sending_.
  void SendBatch(std::vector<OutMsg>* batch, bool broken);
  void WriterLoop();

  void ShutdownSocket(int how) {
    absl::MutexLock l(&fd_mu_);
    if (fd_ >= 0) ::shutdown(fd_, how);
  }
  void CloseSocket() {
    absl::MutexLock l(&fd_mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The socket. Read by the reader thread and written by one thread at a time (sending_: the
  // writer, or a worker sending its own reply) without fd_mu_: the descriptor only changes
  // (closes) in CloseSocket(), after every reply was sent.
  // fd_mu_ guards it against Stop()'s shutdown() racing with that close.
  int fd_;
  absl::Mutex fd_mu_;
  const std::string peer_;
  const NbdServerConfig* const config_;
  ExportProvider* const exports_;
  Metrics* const metrics_;
  TaskPool* const pool_;
  const std::atomic<bool>* const stopping_;
  std::atomic<int>* const active_;
  std::atomic<int>* const admission_waits_;
  nbd::Session session_;  // written by the reader before any worker or the writer starts
  // The TLS session after STARTTLS; set by the reader in the handshake, before any worker or
  // the writer starts, and gone with the connection.
  std::unique_ptr<tls::Session> tls_;
  Metrics::Vdi* vdi_ = nullptr;  // the export's series; set with session_
  std::thread reader_;
  std::thread writer_;
  std::atomic<bool> finished_{false};

  absl::Mutex mu_;
  std::deque<OutMsg> queue_ ABSL_GUARDED_BY(mu_);
  uint32_t inflight_requests_ ABSL_GUARDED_BY(mu_) = 0;  // admitted, reply not yet sent
  uint64_t inflight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;       // a send failed; replies are dropped
  bool writer_stop_ ABSL_GUARDED_BY(mu_) = false;
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // a thread is writing replies to the socket
  int sndbuf_ = 0;                             // SO_SNDBUF, read once at the start
};

void NbdServer::Connection::Run() {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{};
  tv.tv_sec = config_->send_timeout_ms / 1000;
  tv.tv_usec = (config_->send_timeout_ms % 1000) * 1000;
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  socklen_t len = sizeof(sndbuf_);
  if (getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf_, &len) != 0) sndbuf_ = 0;

  if (Handshake()) {
    spdlog::debug("nbd {}: serving export '{}' (structured replies {}, base:allocation {})", peer_,
                  session_.info.name, session_.structured_replies, session_.base_allocation);
    vdi_ = metrics_->Acquire(session_.info.name);
    writer_ = std::thread([this] { WriterLoop(); });
    Transmit();
    {
      absl::MutexLock l(&mu_);
      auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return inflight_requests_ == 0;
      };
      mu_.Await(absl::Condition(&drained));
      writer_stop_ = true;
    }
    writer_.join();
    metrics_->Release(vdi_);
  }
  if (tls_ != nullptr) tls_->Close();  // every reply was sent: no other thread uses it now
  ShutdownSocket(SHUT_RDWR);
  session_.device.reset();
  metrics_->connections->Decrement();
  active_->fetch_sub(1);
  finished_.store(true);
}

bool NbdServer::Connection::Handshake() {
  nbd::HandshakeOptions options;
  options.max_option_length = config_->max_option_length;
  options.max_options = config_->max_options;
  options.advertise_fast_zero = true;
  options.max_payload = config_->max_payload;
  options.tls = config_->tls;
  nbd::ServerHandshake hs(exports_, options);
  std::string out;
  hs.Start(&out);
  if (!SendBytes(out)) return false;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(config_->handshake_timeout_ms);
  std::vector<char> buf(64 * 1024);
  while (true) {
    hs.set_shutting_down(stopping_->load());
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) {
      spdlog::info("nbd {}: handshake timed out", peer_);
      metrics_->ProtocolError("handshake_timeout");
      return false;
    }
    if (tls_ == nullptr || tls_->Pending() == 0) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(wait_ms, 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;  // the deadline check above ends the loop
    }
    const size_t want = std::min(hs.BytesWanted(), buf.size());
    ssize_t n;
    if (tls_ != nullptr) {
      n = tls_->Read(buf.data(), want);
      if (n == -EAGAIN) continue;
    } else {
      n = ::recv(fd_, buf.data(), want, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    }
    if (n <= 0) {
      // The client went away during option haggling (nbdinfo --list does this after ABORT too).
      return false;
    }
    out.clear();
    absl::StatusOr<size_t> used = hs.Feed(buf.data(), static_cast<size_t>(n), &out);
    if (!SendBytes(out)) return false;
    if (!used.ok()) {
      spdlog::info("nbd {}: handshake ended: {}", peer_, used.status().ToString());
      metrics_->ProtocolError("handshake");
      return false;
    }
    if (hs.state() == nbd::ServerHandshake::State::kStartTls && !StartTls(&hs, deadline)) {
      return false;
    }
    if (hs.closed()) return false;  // NBD_OPT_ABORT
    if (hs.in_transmission()) {
      session_ = hs.TakeSession();
      return true;
    }
  }
}

bool NbdServer::Connection::StartTls(nbd::ServerHandshake* hs, absl::Time deadline) {
  // Whatever the client sent after NBD_OPT_STARTTLS is still unread in the socket: the TLS
  // handshake reads it as TLS records, so injected plaintext fails the handshake instead of being
  // taken as options.
  absl::StatusOr<std::unique_ptr<tls::Session>> session =
      config_->tls_context->Accept(fd_, std::max(deadline - absl::Now(), absl::Milliseconds(1)));
  if (!session.ok()) {
    spdlog::info("nbd {}: TLS handshake failed: {}", peer_, std::string(session.status().message()));
    metrics_->ProtocolError("tls_handshake");
    return false;
  }
  tls_ = *std::move(session);
  hs->TlsStarted(tls_->peer().name);
  spdlog::debug("nbd {}: TLS up ({}), client '{}'", peer_, tls_->Description(),
                tls_->peer().name);
  return true;
}

ReadResult NbdServer::Connection::ReadExact(char* buf, size_t len) {
  if (tls_ == nullptr) return ReadFull(fd_, buf, len);
  bool eof_at_start = false;
  const absl::Status s = tls_->ReadFull(buf, len, &eof_at_start);
  if (s.ok()) return ReadResult::kOk;
  if (eof_at_start) return ReadResult::kEof;
  return absl::IsUnavailable(s) && s.message() == "connection closed by peer"
             ? ReadResult::kTruncated
             : ReadResult::kError;
}

bool NbdServer::Connection::SendBytes(const std::string& bytes) {
  if (tls_ == nullptr) return SendAll(fd_, bytes);
  return bytes.empty() || tls_->Write(bytes).ok();
}

bool NbdServer::Connection::SendV(iovec* iov, int count) {
  return tls::WriteFullVOn(fd_, tls_.get(), iov, count).ok();
}

bool NbdServer::Connection::Admit(uint64_t charge) {
  absl::MutexLock l(&mu_);
  auto room = [this, charge]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return broken_ || (inflight_requests_ < config_->max_inflight_requests &&
                       (inflight_bytes_ == 0 || inflight_bytes_ + charge <= config_->max_inflight_bytes));
  };
  if (!room()) {
    admission_waits_->fetch_add(1);
    mu_.Await(absl::Condition(&room));
    admission_waits_->fetch_sub(1);
  }
  if (broken_) return false;
  ++inflight_requests_;
  inflight_bytes_ += charge;
  return true;
}

void NbdServer::Connection::Transmit() {
  const nbd::RequestLimits limits = nbd::LimitsFor(session_, config_->max_payload);
  char header[nbd::kRequestHeaderSize];
  while (true) {
    const ReadResult rr = ReadExact(header, sizeof(header));
    if (rr == ReadResult::kEof) break;
    if (rr != ReadResult::kOk) {
      if (!stopping_->load()) {
        spdlog::info("nbd {}: connection lost inside a request header", peer_);
        metrics_->ProtocolError("truncated_header");
      }
      break;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<Request> req = nbd::ParseRequestHeader(header, sizeof(header));
    if (!req.ok()) {
      spdlog::info("nbd {}: closing: {}", peer_, req.status().ToString());
      metrics_->ProtocolError("bad_request_magic");
      break;
    }
    if (req->type == nbd::kCmdDisc) {
      metrics_->Request(vdi_, req->type, 0, -1);
      break;
    }
    const nbd::RequestCheck check = nbd::CheckRequest(*req, limits);
    uint64_t charge = 0;
    if (req->type == nbd::kCmdWrite && !check.close) charge = req->length;
    if (req->type == nbd::kCmdRead && check.error == 0) charge = req->length;
    if (!Admit(charge)) break;
    if (check.close) {
      spdlog::info("nbd {}: closing: WRITE of {} bytes exceeds the {}-byte limit", peer_,
                   req->length, limits.max_payload);
      metrics_->ProtocolError("payload_too_large");
      QueueError(*req, check.error, check.reason, 0);
      break;
    }
    std::unique_ptr<char[]> payload;
    if (check.payload > 0) {
      payload.reset(new char[check.payload]);
      if (ReadExact(payload.get(), check.payload) != ReadResult::kOk) {
        if (!stopping_->load()) {
          spdlog::info("nbd {}: connection lost inside a WRITE payload", peer_);
          metrics_->ProtocolError("truncated_payload");
        }
        absl::MutexLock l(&mu_);
        --inflight_requests_;
        inflight_bytes_ -= charge;
        break;
      }
    }
    if (check.error != 0) {
      QueueError(*req, check.error, check.reason, charge);
      continue;
    }
    if (req->type == nbd::kCmdRead && req->length > 0 && StartAsyncRead(*req, charge, start)) {
      continue;
    }
    pool_->Submit(session_.info.name, [self = shared_from_this(), r = *req,
                                       p = std::move(payload), charge, start]() mutable {
      self->Execute(r, std::move(p), charge, start);
    });
  }
}

void NbdServer::Connection::Execute(const Request& req, std::unique_ptr<char[]> payload,
                                    uint64_t charge, absl::Time start) {
  BlockDevice* device = session_.device.get();
  const bool fua = (req.flags & nbd::kCmdFlagFua) != 0;
  absl::Status status;
  uint32_t error = 0;
  std::string message;
  OutMsg msg;
  msg.charge = charge;
  std::vector<nbd::BlockStatusDescriptor> descriptors;
  switch (req.type) {
    case nbd::kCmdRead:
      if (req.length > 0) {
        msg.data.reset(new char[req.length]);
        status = device->Read(req.offset, req.length, msg.data.get());
      }
      break;
    case nbd::kCmdWrite:
      status = device->Write(req.offset, req.length, payload.get(), fua);
      break;
    case nbd::kCmdFlush:
      status = device->Flush();
      break;
    case nbd::kCmdTrim:
      status = device->Trim(req.offset, req.length);
      break;
    case nbd::kCmdCache:
      status = device->Cache(req.offset, req.length);
      break;
    case nbd::kCmdWriteZeroes: {
      const bool no_hole = (req.flags & nbd::kCmdFlagNoHole) != 0;
      const bool fast = (req.flags & nbd::kCmdFlagFastZero) != 0;
      if (fast && (no_hole || !config_->fast_zero)) {
        error = nbd::kEnotsup;  // fail fast, export untouched
        message = "fast zeroing is not available for this request";
      } else {
        status = device->WriteZeroes(req.offset, req.length, /*may_trim=*/!no_hole, fua);
      }
      break;
    }
    case nbd::kCmdBlockStatus: {
      std::vector<Extent> extents;
      status = device->BlockStatus(req.offset, req.length, &extents);
      if (status.ok()) {
        descriptors = nbd::ToDescriptors(extents, req.length,
                                         (req.flags & nbd::kCmdFlagReqOne) != 0,
                                         config_->max_block_status_descriptors);
      }
      break;
    }
    default:
      error = nbd::kEinval;  // unreachable: CheckRequest rejects unknown commands
      message = "unknown command";
      break;
  }
  if (!status.ok()) {
    error = nbd::ErrnoFromStatus(status);
    message = std::string(status.message());
  }

  const bool structured = session_.structured_replies;
  if (error != 0) {
    msg.data.reset();
    if (structured) {
      nbd::AppendStructuredError(&msg.header, nbd::kReplyFlagDone, req.handle, error, message);
    } else {
      nbd::AppendSimpleReply(&msg.header, error, req.handle);
    }
  } else if (req.type == nbd::kCmdRead) {
    AppendReadReply(req, &msg);
  } else if (req.type == nbd::kCmdBlockStatus) {
    nbd::AppendBlockStatus(&msg.header, nbd::kReplyFlagDone, req.handle, nbd::kBaseAllocationId,
                           descriptors);
  } else {
    nbd::AppendSimpleReply(&msg.header, 0, req.handle);
    if (req.type == nbd::kCmdWrite) vdi_->bytes_written->Increment(req.length);
  }
  metrics_->Request(vdi_, req.type, error, absl::ToDoubleSeconds(absl::Now() - start));
  payload.reset();
  Enqueue(std::move(msg));
}

void NbdServer::Connection::AppendReadReply(const Request& req, OutMsg* msg) {
  // One content chunk carries the whole read, which also satisfies NBD_CMD_FLAG_DF.
  if (!session_.structured_replies) {
    nbd::AppendSimpleReply(&msg->header, 0, req.handle);
  } else if (req.length > 0) {
    nbd::AppendOffsetDataHeader(&msg->header, nbd::kReplyFlagDone, req.handle, req.offset,
                                req.length);
  } else {
    nbd::AppendStructuredNone(&msg->header, req.handle);
  }
  msg->data_len = req.length;
  vdi_->bytes_read->Increment(req.length);
}

bool NbdServer::Connection::StartAsyncRead(const Request& req, uint64_t charge,
                                           absl::Time start) {
  std::unique_ptr<char[]> data(new char[req.length]);
  char* buf = data.get();
  return session_.device->ReadAsync(
      req.offset, req.length, buf,
      [self = shared_from_this(), req, data = std::move(data), charge,
       start](absl::Status s) mutable {
        if (!s.ok()) {
          data.reset();
          self->pool_->Submit(self->session_.info.name, [self, req, charge, start] {
            self->Execute(req, nullptr, charge, start);
          });
          return;
        }
        OutMsg msg;
        msg.charge = charge;
        msg.data = std::move(data);
        self->AppendReadReply(req, &msg);
        self->metrics_->Request(self->vdi_, req.type, 0,
                                absl::ToDoubleSeconds(absl::Now() - start));
        self->Enqueue(std::move(msg));
      });
}

void NbdServer::Connection::QueueError(const Request& req, uint32_t error,
                                       const std::string& message, uint64_t charge) {
  spdlog::debug("nbd {}: {} at {}+{}: {} ({})", peer_, nbd::CommandName(req.type), req.offset,
                req.length, nbd::ErrnoName(error), message);
  OutMsg msg;
  msg.charge = charge;
  if (session_.structured_replies) {
    nbd::AppendStructuredError(&msg.header, nbd::kReplyFlagDone, req.handle, error, message);
  } else {
    nbd::AppendSimpleReply(&msg.header, error, req.handle);
  }
  metrics_->Request(vdi_, req.type, error, -1);
  Enqueue(std::move(msg));
}

void NbdServer::Connection::Enqueue(OutMsg msg) {
  absl::MutexLock l(&mu_);
  const size_t bytes = msg.header.size() + msg.data_len;
  queue_.push_back(std::move(msg));
  // At low queue depth the worker sends its reply itself, saving the hand-off to the writer
  // thread (a wake-up per request) — but only when the socket can take it without blocking, so a
  // client that stops reading never holds a worker. Deeper queues go to the writer, which sends
  // many replies per writev.
  if (sending_ || queue_.size() > 1 || inflight_requests_ > 2 || !SocketHasRoom(bytes)) return;
  sending_ = true;
  std::vector<OutMsg> batch;
  batch.push_back(std::move(queue_.front()));
  queue_.pop_front();
  const bool broken = broken_;
  mu_.Unlock();
  SendBatch(&batch, broken);
  mu_.Lock();
  sending_ = false;  // the writer takes what queued up meanwhile
}

bool NbdServer::Connection::SocketHasRoom(size_t bytes) const {
  int queued = 0;
  if (sndbuf_ <= 0 || ioctl(fd_, SIOCOUTQ, &queued) != 0) return false;
  return queued >= 0 && static_cast<size_t>(sndbuf_ - queued) > bytes;
}

void NbdServer::Connection::SendBatch(std::vector<OutMsg>* batch, bool broken) {
  bool ok = true;
  if (!broken) {
    std::vector<iovec> iov;
    for (OutMsg& m : *batch) {
      iov.push_back({m.header.data(), m.header.size()});
      if (m.data != nullptr && m.data_len > 0) iov.push_back({m.data.get(), m.data_len});
    }
    ok = SendV(iov.data(), static_cast<int>(iov.size()));
  }
  uint64_t charge = 0;
  for (const OutMsg& m : *batch) charge += m.charge;
  const auto count = static_cast<uint32_t>(batch->size());
  batch->clear();  // free read buffers before the budget is returned
  absl::MutexLock l(&mu_);
  if (!ok && !broken_) {
    broken_ = true;
    spdlog::info("nbd {}: cannot send replies; dropping the connection", peer_);
    ShutdownSocket(SHUT_RDWR);
  }
  inflight_requests_ -= count;
  inflight_bytes_ -= charge;
}

void NbdServer::Connection::WriterLoop() {
  constexpr size_t kBatch = 32;
  std::vector<OutMsg> batch;
  while (true) {
    bool broken = false;
    batch.clear();
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return (!queue_.empty() && !sending_) || (writer_stop_ && !sending_);
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;
      while (!queue_.empty() && batch.size() < kBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      broken = broken_;
      sending_ = true;
    }
    SendBatch(&batch, broken);
    absl::MutexLock l(&mu_);
    sending_ = false;
  }
}

// ---- NbdServer -------------------------------------------------------------------------------------

NbdServer::NbdServer(NbdServerConfig config, ExportProvider* exports, metrics::Registry* registry)
    : config_(std::move(config)),
      exports_(exports),
      metrics_(std::make_unique<Metrics>(registry != nullptr ? registry
                                                             : metrics::Registry::Default())) {}

NbdServer::~NbdServer() { Stop(); }

void NbdServer::ForgetExport(const std::string& name) { metrics_->Forget(name); }

absl::StatusOr<int> NbdServer::Start() {
  if (started_) return absl::FailedPreconditionError("NbdServer already started");
  if (absl::Status s = config_.Validate(); !s.ok()) return s;
  std::string host;
  int port = 0;
  (void)SplitHostPort(config_.listen, &host, &port);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_str = absl::StrCat(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", config_.listen, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) break;
    last_error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config_.listen, ": ",
                                               last_error));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  port_ = bound.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
              : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  listen_fd_ = fd;
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
    if (active_.load() >= config_.max_connections) {
      metrics_->rejected->Increment();
      spdlog::info("nbd {}: rejected, {} connections open", PeerName(ss), active_.load());
      ::close(fd);
      continue;
    }
    active_.fetch_add(1);
    metrics_->accepted->Increment();
    auto conn = std::make_shared<Connection>(fd, PeerName(ss), &config_, exports_, metrics_.get(),
                                             pool_.get(), &stopping_, &active_,
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
  while (active_.load() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
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
