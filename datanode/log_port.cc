#include "datanode/log_port.h"

#include <spdlog/spdlog.h>
#include <sys/uio.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/block_wire.h"
#include "common/status_macros.h"
#include "common/stream_reader.h"

namespace ringcache::datanode {

LogPort::LogPort(DataNodeService* service, metrics::Registry* registry) : service_(service) {
  requests_ = registry->GetCounter("ringcache_datanode_log_port_requests_total",
                                   "Log appends served on the log port (not over gRPC).");
  block_writes_ = registry->GetCounter(
      "ringcache_datanode_log_port_block_writes_total",
      "Block writes (destage, write-through) served on the log port (not over gRPC).");
  block_reads_ = registry->GetCounter(
      "ringcache_datanode_log_port_block_reads_total",
      "Block reads (cache misses) served on the log port (not over gRPC).");
  protocol_errors_ = registry->GetCounter(
      "ringcache_datanode_log_port_protocol_errors_total",
      "Log port connections closed on a malformed request (another op, a payload that does "
      "not parse).");
  tls_refused_ = registry->GetCounter(
      "ringcache_datanode_log_port_tls_refused_total",
      "Log port connections whose TLS handshake failed or whose certificate was refused.");
  wrong_store_ = registry->GetCounter(
      "ringcache_datanode_log_port_wrong_store_total",
      "Log port connections closed unanswered: the request was meant for another store (a port "
      "number reused by another node).");
  refused_connections_ = registry->GetCounter(
      "ringcache_datanode_log_port_refused_connections_total",
      "Log port connections closed at once: over the connection limit.");
}

absl::StatusOr<std::unique_ptr<LogPort>> LogPort::Start(const LogPortOptions& options,
                                                        DataNodeService* service,
                                                        metrics::Registry* registry) {
  std::unique_ptr<LogPort> p(new LogPort(service, registry));
  p->tls_ = options.tls;
  ConnectionServer::Options o;
  o.host = options.host;
  o.port = options.port;
  o.max_connections = options.max_connections;
  RC_ASSIGN_OR_RETURN(p->server_,
                      ConnectionServer::Start(
                          o, [s = p.get()](int fd) { s->Serve(fd); },
                          [s = p.get()](const char*, const std::string&) {
                            s->refused_connections_->Increment();
                          }));
  return p;
}

LogPort::~LogPort() { Stop(); }

void LogPort::Stop() {
  if (server_ != nullptr) server_->Stop();
}

void LogPort::Serve(int fd) {
  std::unique_ptr<tls::Session> session;
  if (tls_ != nullptr) {
    absl::StatusOr<std::unique_ptr<tls::Session>> s = tls_->Accept(fd, absl::Seconds(10));
    if (!s.ok()) {
      tls_refused_->Increment();
      spdlog::warn("log port connection refused: {}", std::string(s.status().message()));
      return;
    }
    session = *std::move(s);
  }
  StreamReader in(fd, session.get());
  std::string payload, answer, closing;
  for (;;) {
    if (!in.FillTo(wire::kRequestBytes).ok()) break;
    wire::Request r;
    absl::Status bad = wire::DecodeRequest(in.data(), &r);
    if (bad.ok() && !wire::ForDataNode(r.op)) {
      bad = absl::InvalidArgumentError(
          absl::StrCat("op ", static_cast<int>(r.op), " on a data node's log port"));
    }
    if (!bad.ok()) {
      protocol_errors_->Increment();
      spdlog::warn("log port connection closed: {}", bad.ToString());
      break;
    }
    in.Consume(wire::kRequestBytes);
    payload.resize(r.length);
    if (!in.ReadTo(payload.data(), r.length).ok()) break;
    absl::Status st;
    answer.clear();
    if (!Handle(r.op, payload, &st, &answer, &closing)) {
      spdlog::warn("log port connection closed: {}", closing);
      break;
    }
    wire::Response head = wire::FromStatus(st, static_cast<uint32_t>(answer.size()));
    head.tag = r.tag;
    char h[wire::kResponseBytes];
    wire::EncodeResponse(head, h);
    iovec iov[3] = {{h, sizeof(h)},
                    {const_cast<char*>(st.message().data()), head.message_len},
                    {answer.data(), st.ok() ? answer.size() : 0}};
    if (!tls::WriteFullVOn(fd, session.get(), iov, 3).ok()) break;
    if (payload.capacity() > (4u << 20)) std::string().swap(payload);  // not kept
  }
  session.reset();  // the session goes before its socket (closed by the ConnectionServer)
}

bool LogPort::Handle(wire::Op op, const std::string& payload, absl::Status* result,
                     std::string* answer, std::string* closing) {
  const std::string& mine = service_->store_incarnation();
  if (op == wire::Op::kLogAppend) {
    v1::LogAppendRequest req;
    if (!req.ParseFromString(payload)) {
      protocol_errors_->Increment();
      *closing = "a log append that does not parse";
      return false;
    }
    if (!req.expect_store_incarnation().empty() && req.expect_store_incarnation() != mine) {
      wrong_store_->Increment();
      *closing = absl::StrCat("an append meant for store ", req.expect_store_incarnation(),
                              ", this one is ", mine);
      return false;
    }
    requests_->Increment();
    v1::LogAppendResponse resp;
    *result = service_->AppendLog(req, &resp);
    if (result->ok()) resp.SerializeToString(answer);
    return true;
  }
  if (op == wire::Op::kStoreBlocks) {
    return Blocks<v1::WriteBlocksRequest, v1::WriteBlocksResponse>(
        payload, "a block write", block_writes_, result, answer, closing,
        [this](const auto& req, auto* resp) { return service_->StoreBlocks(req, resp); });
  }
  if (op == wire::Op::kStoreBlocksBatch) {
    return Blocks<v1::WriteBlocksBatchRequest, v1::WriteBlocksBatchResponse>(
        payload, "a batch of block writes", block_writes_, result, answer, closing,
        [this](const auto& req, auto* resp) { return service_->StoreBlocksBatch(req, resp); });
  }
  return Blocks<v1::ReadBlocksRequest, v1::ReadBlocksResponse>(
      payload, "a block read", block_reads_, result, answer, closing,
      [this](const auto& req, auto* resp) { return service_->LoadBlocks(req, resp); });
}

template <typename Req, typename Resp, typename Fn>
bool LogPort::Blocks(const std::string& payload, const char* what, metrics::Counter* served,
                     absl::Status* result, std::string* answer, std::string* closing, Fn&& fn) {
  std::string meant;
  size_t at = 0;
  Req req;
  if (!wire::DecodeStorePrefix(payload, &meant, &at).ok() ||
      !req.ParseFromArray(payload.data() + at, static_cast<int>(payload.size() - at))) {
    protocol_errors_->Increment();
    *closing = absl::StrCat(what, " that does not parse");
    return false;
  }
  const std::string& mine = service_->store_incarnation();
  if (!meant.empty() && meant != mine) {
    wrong_store_->Increment();
    *closing = absl::StrCat(what, " meant for store ", meant, ", this one is ", mine);
    return false;
  }
  served->Increment();
  Resp resp;
  *result = fn(req, &resp);
  if (result->ok()) resp.SerializeToString(answer);
  return true;
}

}  // namespace ringcache::datanode
