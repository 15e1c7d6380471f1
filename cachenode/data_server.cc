#include "cachenode/data_server.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <spdlog/spdlog.h>


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
  s->tls_ = options.tls;
  ConnectionServer::Options o;
  o.host = options.host;
  o.port = options.port;
  o.max_connections = options.max_connections;
  RC_ASSIGN_OR_RETURN(
      s->server_, ConnectionServer::Start(o, [p = s.get()](int fd) { p->Serve(fd); },
                                          [p = s.get()] { p->refused_connections_->Increment(); }));
  return s;
}

DataServer::~DataServer() { Stop(); }

void DataServer::Stop() {
  if (server_ != nullptr) server_->Stop();
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
      return;
    }
  }
  for (;;) {
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
  session.reset();  // the session goes before its socket (closed by the ConnectionServer)
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
  }
  return absl::InvalidArgumentError("unknown op");
}

}  // namespace ringcache::cachenode
