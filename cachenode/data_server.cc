#include "cachenode/data_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/stream_reader.h"

namespace ringcache::cachenode {

DataServer::DataServer(CacheNode* node, RequestGate* gate, metrics::Registry* registry)
    : node_(node), gate_(gate) {
  const char* names[] = {"", "read", "write", "trim", "zero"};
  for (int op = 1; op <= 4; ++op) {
    requests_[op] = registry->GetCounter("ringcache_cachenode_data_requests_total",
                                         "Block requests served over the block data protocol.",
                                         {{"op", names[op]}});
  }
  refused_connections_ =
      registry->GetCounter("ringcache_cachenode_data_refused_connections_total",
                           "Block data connections closed at once: over the connection limit "
                           "in total or from one address.");
  protocol_errors_ = registry->GetCounter("ringcache_cachenode_data_protocol_errors_total",
                                          "Block data connections closed on a malformed request.");
  aside_reads_ = registry->GetCounter(
      "ringcache_cachenode_data_aside_reads_total",
      "Pipelined block reads that needed the data nodes and ran aside, answered out of order.");
  tls_refused_ = registry->GetCounter(
      "ringcache_cachenode_data_tls_refused_total",
      "Block data connections whose TLS handshake failed or whose certificate was refused.");
}

absl::StatusOr<std::unique_ptr<DataServer>> DataServer::Start(const DataServerOptions& options,
                                                              CacheNode* node, RequestGate* gate,
                                                              metrics::Registry* registry) {
  std::unique_ptr<DataServer> s(new DataServer(node, gate, registry));
  s->tls_ = options.tls;
  ConnectionServer::Options o;
  o.host = options.host;
  o.port = options.port;
  o.max_connections = options.max_connections;
  o.max_connections_per_peer = options.max_connections_per_peer;
  RC_ASSIGN_OR_RETURN(s->server_, ConnectionServer::Start(
                                      o, [p = s.get()](int fd) { p->Serve(fd); },
                                      [p = s.get()](const char* limit, const std::string& peer) {
                                        p->refused_connections_->Increment();
                                        const uint64_t n = ++p->refusals_;  // server's lock held
                                        if ((n & (n - 1)) != 0) return;
                                        spdlog::warn(
                                            "block data connection from {} refused: the {} "
                                            "connection limit is reached ({} refused so far)",
                                            peer, limit, n);
                                      }));
  return s;
}

DataServer::~DataServer() { Stop(); }

void DataServer::Stop() {
  if (server_ != nullptr) server_->Stop();
}

namespace {

// The answers not sent yet: flushed with one writev when the connection has no complete
// request left to run (or the batch is large), so pipelined requests share a send.
class OutBatch {
 public:
  // A buffer for the data of the next answer (valid until Flush). It counts toward the batch's
  // bytes whether the answer carries it or fails: a burst of large reads is flushed (and its
  // buffers let go) one at a time.
  char* DataBuffer(size_t len) {
    if (data_.size() <= count_) data_.emplace_back();
    data_[count_].resize(std::max(data_[count_].size(), len));
    reserved_ = len;
    return data_[count_].data();
  }
  void Add(const absl::Status& st, uint32_t data_len, uint64_t tag) {
    if (heads_.size() <= count_) heads_.emplace_back();
    if (messages_.size() <= count_) messages_.emplace_back();
    if (data_.size() <= count_) data_.emplace_back();
    wire::Response resp = wire::FromStatus(st, data_len);
    resp.tag = tag;
    wire::EncodeResponse(resp, heads_[count_].data());
    messages_[count_].assign(st.message().data(), resp.message_len);
    lens_.resize(std::max(lens_.size(), count_ + 1));
    lens_[count_] = resp.data_len;
    bytes_ += wire::kResponseBytes + resp.message_len + std::max<size_t>(resp.data_len, reserved_);
    reserved_ = 0;
    ++count_;
  }
  bool full() const { return count_ >= kMaxAnswers || bytes_ >= kMaxBytes; }
  // Sends the batch while holding `send_mu` (answers run aside share the socket).
  bool Flush(int fd, tls::Session* session, absl::Mutex* send_mu) {
    if (count_ == 0) return true;
    iov_.clear();
    for (size_t i = 0; i < count_; ++i) {
      iov_.push_back({heads_[i].data(), wire::kResponseBytes});
      if (!messages_[i].empty()) iov_.push_back({messages_[i].data(), messages_[i].size()});
      if (lens_[i] > 0) iov_.push_back({data_[i].data(), lens_[i]});
    }
    const size_t sent = count_;
    count_ = 0;
    bytes_ = 0;
    bool ok;
    {
      absl::MutexLock l(send_mu);
      ok = tls::WriteFullVOn(fd, session, iov_.data(), static_cast<int>(iov_.size())).ok();
    }
    // A large answer's buffer is not kept for the next ones.
    for (size_t i = 0; i < sent; ++i) {
      if (data_[i].capacity() > kMaxBytes) std::vector<char>().swap(data_[i]);
    }
    return ok;
  }

 private:
  static constexpr size_t kMaxAnswers = 64;  // IOV_MAX / 3 would allow 341
  static constexpr size_t kMaxBytes = 1 << 20;
  std::vector<std::array<char, wire::kResponseBytes>> heads_;
  std::vector<std::string> messages_;
  std::vector<std::vector<char>> data_;
  std::vector<uint32_t> lens_;
  std::vector<iovec> iov_;
  size_t count_ = 0;
  size_t bytes_ = 0;
  size_t reserved_ = 0;  // the data buffer set aside for the answer being made
};

}  // namespace

void DataServer::Serve(int fd) {
  std::vector<char> payload;
  std::unique_ptr<tls::Session> session;
  if (tls_ != nullptr) {
    absl::StatusOr<std::unique_ptr<tls::Session>> s = tls_->Accept(fd, absl::Seconds(10));
    if (s.ok()) {
      session = *std::move(s);
    } else {
      tls_refused_->Increment();
      spdlog::warn("block data connection refused: {}", std::string(s.status().message()));
      return;
    }
  }
  // Requests are run in the order they arrive and answered in that order (answers wait in `out`
  // while more requests are already buffered, and go out together before the connection waits
  // for input) — except a read flagged kMayReorder that needs the data nodes: it runs aside on
  // the pool and answers when done, so the cached reads behind it are not held up. Under TLS its
  // answer goes through the session as this thread's do, under the same send lock: one sender
  // and one receiver at a time, the sharing GnuTLS allows.
  StreamReader in(fd, session.get());
  OutBatch out;
  auto conn = std::make_shared<Aside>();
  for (;;) {
    if (in.available() < wire::kRequestBytes) {
      if (!out.Flush(fd, session.get(), &conn->send_mu)) break;
      if (!in.FillTo(wire::kRequestBytes).ok()) break;
    }
    wire::Request r;
    if (absl::Status d = wire::DecodeRequest(in.data(), &r); !d.ok()) {
      protocol_errors_->Increment();
      spdlog::warn("block data connection closed: {}", d.ToString());
      break;
    }
    if (wire::ForDataNode(r.op)) {  // a data node's op: a client on the wrong port
      protocol_errors_->Increment();
      spdlog::warn("block data connection closed: a data node's op ({}) sent to a cache node",
                   static_cast<int>(r.op));
      break;
    }
    in.Consume(wire::kRequestBytes);
    requests_[static_cast<int>(r.op)]->Increment();
    if (absl::Status c = r.op == wire::Op::kRead ? node_->CheckRange(r.vdi, r.offset, r.length)
                                                 : absl::OkStatus();
        !c.ok()) {  // refused before a buffer is set aside for its answer
      out.Add(c, 0, r.tag);
      if (out.full() && !out.Flush(fd, session.get(), &conn->send_mu)) break;
      continue;
    }
    if (r.op == wire::Op::kRead && (r.flags & wire::kMayReorder) != 0 &&
        !node_->IsStored(r.vdi, r.object, r.offset, r.length)) {
      RunAside(fd, session.get(), conn, r);
      continue;
    }
    const char* body = nullptr;
    bool in_place = false;  // the payload is used where it lies in the input buffer
    if (r.op == wire::Op::kWrite) {
      if (in.available() >= r.length) {
        body = in.data();
        in_place = true;
      } else {
        payload.resize(r.length);
        if (!in.ReadTo(payload.data(), r.length).ok()) break;
        body = payload.data();
      }
    }
    const bool read = r.op == wire::Op::kRead;
    char* data = read ? out.DataBuffer(r.length) : nullptr;
    const absl::Status st = Handle(r, body, data);
    if (in_place) in.Consume(r.length);
    if (payload.capacity() > (1u << 20)) std::vector<char>().swap(payload);  // not kept
    out.Add(st, read ? r.length : 0, r.tag);
    if (out.full() && !out.Flush(fd, session.get(), &conn->send_mu)) break;
  }
  {
    // The reads run aside answer on this socket, which closes when we return.
    absl::MutexLock l(&conn->mu);
    shutdown(fd, SHUT_RD);
    auto done = [&conn]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu) { return conn->running == 0; };
    conn->mu.Await(absl::Condition(&done));
  }
  session.reset();  // the session goes before its socket (closed by the ConnectionServer)
}

void DataServer::RunAside(int fd, tls::Session* session, const std::shared_ptr<Aside>& conn,
                          const wire::Request& r) {
  {
    absl::MutexLock l(&conn->mu);
    ++conn->running;
  }
  aside_reads_->Increment();
  aside_->Submit([this, fd, session, conn, r] {
    std::vector<char> data(r.length);
    const absl::Status st = Handle(r, nullptr, data.data());
    wire::Response resp = wire::FromStatus(st, r.length);
    resp.tag = r.tag;
    char head[wire::kResponseBytes];
    wire::EncodeResponse(resp, head);
    iovec iov[3] = {{head, sizeof(head)},
                    {const_cast<char*>(st.message().data()), resp.message_len},
                    {data.data(), resp.data_len}};
    bool sent;
    {
      absl::MutexLock l(&conn->send_mu);
      sent = tls::WriteFullVOn(fd, session, iov, 3).ok();
    }
    absl::MutexLock l(&conn->mu);
    if (!sent) shutdown(fd, SHUT_RDWR);  // the connection's reader sees the end
    --conn->running;
  });
}

absl::Status DataServer::Handle(const wire::Request& r, const char* payload, char* data) {
  RequestGate::Pass pass;
  RC_RETURN_IF_ERROR(gate_->Admit(r.epoch, &pass));
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
    case wire::Op::kLogAppend:
    case wire::Op::kStoreBlocks:
    case wire::Op::kLoadBlocks:
    case wire::Op::kStoreBlocksBatch:
      break;  // refused by Serve
  }
  return absl::InvalidArgumentError("unknown op");
}

}  // namespace ringcache::cachenode
