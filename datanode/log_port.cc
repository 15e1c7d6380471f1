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
  protocol_errors_ = registry->GetCounter(
      "ringcache_datanode_log_port_protocol_errors_total",
      "Log port connections closed on a malformed request (another op, a payload that does "
      "not parse).");
  tls_refused_ = registry->GetCounter(
      "ringcache_datanode_log_port_tls_refused_total",
      "Log port connections whose TLS handshake failed or whose certificate was refused.");
  wrong_store_ = registry->GetCounter(
      "ringcache_datanode_log_port_wrong_store_total",
      "Log port connections closed unanswered: the append was meant for another store (a port "
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
  std::string payload, answer;
  v1::LogAppendRequest req;
  v1::LogAppendResponse resp;
  for (;;) {
    if (!in.FillTo(wire::kRequestBytes).ok()) break;
    wire::Request r;
    absl::Status bad = wire::DecodeRequest(in.data(), &r);
    if (bad.ok() && r.op != wire::Op::kLogAppend) {
      bad = absl::InvalidArgumentError(
          absl::StrCat("op ", static_cast<int>(r.op), " on a data node's log port"));
    }
    if (bad.ok()) {
      in.Consume(wire::kRequestBytes);
      payload.resize(r.length);
      if (!in.ReadTo(payload.data(), r.length).ok()) break;
      if (!req.ParseFromString(payload)) {
        bad = absl::InvalidArgumentError("a log append that does not parse");
      }
    }
    if (!bad.ok()) {
      protocol_errors_->Increment();
      spdlog::warn("log port connection closed: {}", bad.ToString());
      break;
    }
    if (!req.expect_store_incarnation().empty() &&
        req.expect_store_incarnation() != service_->store_incarnation()) {
      wrong_store_->Increment();
      spdlog::warn("log port connection closed: an append meant for store {}, this one is {}",
                   req.expect_store_incarnation(), service_->store_incarnation());
      break;
    }
    requests_->Increment();
    resp.Clear();
    const absl::Status st = service_->AppendLog(req, &resp);
    answer.clear();
    if (st.ok()) resp.SerializeToString(&answer);
    wire::Response head = wire::FromStatus(st, static_cast<uint32_t>(answer.size()));
    head.tag = r.tag;
    char h[wire::kResponseBytes];
    wire::EncodeResponse(head, h);
    iovec iov[3] = {{h, sizeof(h)},
                    {const_cast<char*>(st.message().data()), head.message_len},
                    {answer.data(), answer.size()}};
    if (!tls::WriteFullVOn(fd, session.get(), iov, 3).ok()) break;
    if (payload.capacity() > (4u << 20)) std::string().swap(payload);  // not kept
  }
  session.reset();  // the session goes before its socket (closed by the ConnectionServer)
}

}  // namespace ringcache::datanode
