// LogPort: the data node's log port — a cache node's write-back log appends, its destage writes
// and its reads of blocks, as block-data frames (common/block_wire.h, ops kLogAppend,
// kStoreBlocks, kLoadBlocks) over TCP,
// next to the gRPC service that carries everything else. A durable write sends N-1 log copies,
// each one call to a data node, and its destage N block writes later; over unary gRPC each call
// cost the data node and the cache node more CPU than the work itself (HTTP/2 framing, call
// setup, thread hand-offs: docs/benchmarks.md). Here a connection is served on its own thread,
// which reads a request, runs it inline (DataNodeService::AppendLog, ::StoreBlocks,
// ::LoadBlocks: the same checks, metrics and typed errors as the RPCs) and writes the answer.
//
//   append:   RequestHeader{op = kLogAppend, length, tag, timeout_ms} + a serialized
//             v1::LogAppendRequest of `length` bytes
//   write:    RequestHeader{op = kStoreBlocks, ...} + the store prefix (2-byte length and the
//             store incarnation meant, wire::EncodeStorePrefix) + a serialized
//             v1::WriteBlocksRequest (node-api 2: a data node that says 1 gets no such frame)
//   read:     RequestHeader{op = kLoadBlocks, ...} + the store prefix + a serialized
//             v1::ReadBlocksRequest (node-api 2)
//   batch:    RequestHeader{op = kStoreBlocksBatch, ...} + the store prefix + a serialized
//             v1::WriteBlocksBatchRequest (node-api 3): the writes of several objects in one
//             commit (DataNodeService::StoreBlocksBatch), answered one result per write
//   answer:   ResponseHeader{code, kind, tag} [+ message] [+ the serialized response
//             (v1::LogAppendResponse, v1::WriteBlocksResponse, v1::ReadBlocksResponse):
//             data_len bytes, on success]
//
// Requests of a connection are answered in order. Any other op, or a payload that does not
// parse, closes the connection (ringcache_datanode_log_port_protocol_errors_total); so does a
// request meant for another store (the append's `expect_store_incarnation`, the write's prefix:
// the port number now belongs to another data node, ringcache_datanode_log_port_wrong_store_total),
// before anything is stored. With TLS the client must present a cache node's or a gateway's
// certificate of the cluster, as on gRPC. The port is announced in the Health RPC (`log_port`)
// and the ready file; cache nodes find it there (datanode/client/log_link.h) and use gRPC where
// there is none.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_DATANODE_LOG_PORT_H_
#define RINGCACHE_DATANODE_LOG_PORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/block_wire.h"
#include "common/conn_server.h"
#include "common/metrics.h"
#include "common/tls.h"
#include "datanode/service.h"

namespace ringcache::datanode {

struct LogPortOptions {
  std::string host = "127.0.0.1";
  int port = 0;                // 0: any free port
  int max_connections = 1024;  // one thread each; a cache node holds one per data node
  // TLS for every connection; null: plaintext.
  std::shared_ptr<const tls::ServerContext> tls{};
};

class LogPort {
 public:
  // Listens and starts accepting; appends go to `service` (not owned, outlives the port).
  static absl::StatusOr<std::unique_ptr<LogPort>> Start(const LogPortOptions& options,
                                                        DataNodeService* service,
                                                        metrics::Registry* registry);
  ~LogPort();  // Stop()
  // Closes the listener and every connection, and waits for their threads. Idempotent.
  void Stop();
  int port() const { return server_->port(); }

 private:
  LogPort(DataNodeService* service, metrics::Registry* registry);
  void Serve(int fd);
  // Runs one request of `op` whose payload is `payload`; its answer's data goes to *answer.
  // Returns false (the connection is closed unanswered, *closing says why) for a payload that
  // does not parse or is meant for another store.
  bool Handle(wire::Op op, const std::string& payload, absl::Status* result, std::string* answer,
              std::string* closing);
  // kStoreBlocks and kLoadBlocks: the store prefix checked, the request parsed and run by `fn`.
  template <typename Req, typename Resp, typename Fn>
  bool Blocks(const std::string& payload, const char* what, metrics::Counter* served,
              absl::Status* result, std::string* answer, std::string* closing, Fn&& fn);

  DataNodeService* const service_;
  metrics::Counter* requests_ = nullptr;        // log appends
  metrics::Counter* block_writes_ = nullptr;    // kStoreBlocks
  metrics::Counter* block_reads_ = nullptr;     // kLoadBlocks
  metrics::Counter* protocol_errors_ = nullptr;
  metrics::Counter* tls_refused_ = nullptr;
  metrics::Counter* wrong_store_ = nullptr;
  metrics::Counter* refused_connections_ = nullptr;
  std::shared_ptr<const tls::ServerContext> tls_;
  std::unique_ptr<ConnectionServer> server_;  // last: stopped first, while the rest is alive
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_LOG_PORT_H_
