// One NBD client connection of the gateway's server (nbd_connection.h): the handshake (with
// STARTTLS), the transmission phase's reader, the workers that execute requests, and the writer
// that sends replies in batches.
#include "gateway/nbd_connection.h"

#include "common/socket.h"
#include "common/stream_reader.h"

namespace ringcache::gateway {
namespace {

bool SendAll(int fd, const std::string& bytes) {
  if (bytes.empty()) return true;
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  return WriteFullV(fd, &iov, 1).ok();
}

}  // namespace

void NbdServer::Connection::Run() {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{};
  tv.tv_sec = config_->send_timeout_ms / 1000;
  tv.tv_usec = (config_->send_timeout_ms % 1000) * 1000;
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  socklen_t len = sizeof(sndbuf_);
  if (getsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &sndbuf_, &len) != 0) sndbuf_ = 0;
  // Every receive wakes within a second to look at the clock (the handshake's deadline, then
  // the request and idle timeouts); over TLS too, however slowly a record comes (StartTls).
  SetReceiveTimeout(fd_, absl::Seconds(1));

  if (Handshake()) {
    {
      absl::MutexLock l(&mu_);
      last_reply_ = absl::Now();  // idle from here until the first request
    }
    spdlog::debug("nbd {}: serving export '{}' (structured replies {}, base:allocation {})", peer_,
                  session_.info.name, session_.structured_replies, session_.base_allocation);
    vdi_ = metrics_->Acquire(session_.info.name);
    writer_ = std::thread([this] { WriterLoop(); });
    Transmit();
    {
      absl::MutexLock l(&mu_);
      auto drained = [this]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return inflight_requests_ == 0; };
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
  slots_->Give(address_);
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
    spdlog::info("nbd {}: TLS handshake failed: {}", peer_,
                 std::string(session.status().message()));
    metrics_->ProtocolError("tls_handshake");
    return false;
  }
  tls_ = *std::move(session);
  // A TLS record trickled a byte a second must not hold a read past the receive timeout: the
  // request deadlines (slow_request, idle) are checked between reads.
  tls_->SetReadSlice(absl::Seconds(1));
  hs->TlsStarted(tls_->peer().name);
  spdlog::debug("nbd {}: TLS up ({}), client '{}'", peer_, tls_->Description(), tls_->peer().name);
  return true;
}

bool NbdServer::Connection::SendBytes(const std::string& bytes) {
  if (tls_ == nullptr) return SendAll(fd_, bytes);
  return bytes.empty() || tls_->Write(bytes).ok();
}

bool NbdServer::Connection::SendV(iovec* iov, int count) {
  return tls::WriteFullVOn(fd_, tls_.get(), iov, count).ok();
}

bool NbdServer::Connection::Admit(uint64_t charge) {
  {
    absl::MutexLock l(&mu_);
    auto room = [this, charge]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return broken_ ||
             (inflight_requests_ < config_->max_inflight_requests &&
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
  }
  // The address's share: every connection from one host together (a host cannot multiply the
  // connection's budget by opening connections).
  bool waited = false;
  while (!slots_->ReserveBytes(address_, charge, config_->max_inflight_bytes_per_peer,
                               absl::Milliseconds(100))) {
    if (!waited) {
      waited = true;
      metrics_->peer_memory_waits->Increment();
      admission_waits_->fetch_add(1);
    }
    absl::MutexLock relock(&mu_);
    if (broken_ || stopping_->load()) {
      --inflight_requests_;
      inflight_bytes_ -= charge;
      admission_waits_->fetch_sub(1);
      return false;
    }
  }
  if (waited) admission_waits_->fetch_sub(1);
  metrics_->inflight_bytes->Increment(static_cast<double>(charge));
  return true;
}

void NbdServer::Connection::ReleasePeerBytes(uint64_t charge) {
  slots_->ReleaseBytes(address_, charge);
  metrics_->inflight_bytes->Decrement(static_cast<double>(charge));
}

bool NbdServer::Connection::NextHeader(StreamReader* in) {
  // The receive timeout (set in Run) wakes the reader once a second to look at the clock: a
  // header begun and not finished in request_timeout_ms (slowloris), or no request for
  // idle_timeout_ms while none is in flight, closes the connection.
  const absl::Duration request_timeout = absl::Milliseconds(config_->request_timeout_ms);
  bool clean_end = false;
  absl::Time partial_since = absl::InfiniteFuture();
  const char* why = nullptr;
  auto on_timeout = [&]() -> absl::Status {
    const absl::Time now = absl::Now();
    if (in->available() > 0 && partial_since == absl::InfiniteFuture()) partial_since = now;
    if (now - partial_since > request_timeout) {
      why = "slow_request";
    } else if (in->available() == 0 && config_->idle_timeout_ms > 0 &&
               now - QuietSince() > absl::Milliseconds(config_->idle_timeout_ms)) {
      why = "idle";
    }
    return why == nullptr ? absl::OkStatus() : absl::DeadlineExceededError(why);
  };
  if (in->FillTo(nbd::kRequestHeaderSize, on_timeout, &clean_end).ok()) return true;
  if (why != nullptr) {
    spdlog::info("nbd {}: closing: {}", peer_,
                 std::string(why) == "idle" ? "idle for too long"
                                            : "a request header took too long to arrive");
    metrics_->ProtocolError(why);
  } else if (!clean_end && !stopping_->load()) {
    spdlog::info("nbd {}: connection lost inside a request header", peer_);
    metrics_->ProtocolError("truncated_header");
  }
  return false;
}

void NbdServer::Connection::Transmit() {
  const nbd::RequestLimits limits = nbd::LimitsFor(session_, config_->max_payload);
  const absl::Duration request_timeout = absl::Milliseconds(config_->request_timeout_ms);
  // Nothing is buffered past the handshake (it reads exactly what it needs), so the requests
  // start here.
  StreamReader in(fd_, tls_.get());
  while (NextHeader(&in)) {
    const absl::Time start = absl::Now();
    absl::StatusOr<Request> req = nbd::ParseRequestHeader(in.data(), nbd::kRequestHeaderSize);
    in.Consume(nbd::kRequestHeaderSize);
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
      // A large payload gets the time it needs at 1 MiB/s on top.
      const absl::Status got = in.ReadTo(
          payload.get(), check.payload,
          absl::Now() + request_timeout + absl::Seconds(static_cast<double>(check.payload) / (1 << 20)));
      if (!got.ok()) {
        if (absl::IsDeadlineExceeded(got)) {
          spdlog::info("nbd {}: closing: a WRITE payload took too long to arrive", peer_);
          metrics_->ProtocolError("slow_request");
        } else if (!stopping_->load()) {
          spdlog::info("nbd {}: connection lost inside a WRITE payload", peer_);
          metrics_->ProtocolError("truncated_payload");
        }
        ReleasePeerBytes(charge);
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
    pool_->Submit(session_.info.name,
                  [self = shared_from_this(), r = *req, p = std::move(payload), charge,
                   start]() mutable { self->Execute(r, std::move(p), charge, start); });
  }
}

// The reply to `req`: an error, the data read, the block status descriptors, or done.
void NbdServer::Connection::AppendReply(const Request& req, uint32_t error,
                                        const std::string& message,
                                        const std::vector<nbd::BlockStatusDescriptor>& descriptors,
                                        OutMsg* msg) {
  const bool structured = session_.structured_replies;
  if (error != 0) {
    msg->data.reset();
    if (structured) {
      nbd::AppendStructuredError(&msg->header, nbd::kReplyFlagDone, req.handle, error, message);
    } else {
      nbd::AppendSimpleReply(&msg->header, error, req.handle);
    }
  } else if (req.type == nbd::kCmdRead) {
    AppendReadReply(req, msg);
  } else if (req.type == nbd::kCmdBlockStatus) {
    nbd::AppendBlockStatus(&msg->header, nbd::kReplyFlagDone, req.handle, nbd::kBaseAllocationId,
                           descriptors);
  } else {
    nbd::AppendSimpleReply(&msg->header, 0, req.handle);
    if (req.type == nbd::kCmdWrite) vdi_->bytes_written->Increment(req.length);
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
        descriptors =
            nbd::ToDescriptors(extents, req.length, (req.flags & nbd::kCmdFlagReqOne) != 0,
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
    // The guest sees this as an I/O error: say which request and why.
    spdlog::warn("nbd {}: {} at {}+{} answered {}: {}", peer_, nbd::CommandName(req.type),
                 req.offset, req.length, nbd::ErrnoName(error), status.ToString());
  }

  AppendReply(req, error, message, descriptors, &msg);
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

bool NbdServer::Connection::StartAsyncRead(const Request& req, uint64_t charge, absl::Time start) {
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
  ReleasePeerBytes(charge);
  absl::MutexLock l(&mu_);
  if (!ok && !broken_) {
    broken_ = true;
    spdlog::info("nbd {}: cannot send replies; dropping the connection", peer_);
    ShutdownSocket(SHUT_RDWR);
  }
  inflight_requests_ -= count;
  last_reply_ = absl::Now();
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

// ---- NbdServer
// -------------------------------------------------------------------------------------

}  // namespace ringcache::gateway
