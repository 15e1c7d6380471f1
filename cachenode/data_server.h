// DataServer: the cache node's end of the block data protocol (common/block_wire.h) — reads,
// writes and trims as fixed binary frames over TCP, each connection served on its own thread,
// each request run inline on it (no hand-off between threads), in arrival order. Requests a
// client pipelined arrive with one receive and their answers leave with one writev. Every request
// passes the same RequestGate as the gRPC service (ownership, then ring epoch), so the two
// transports refuse alike. The port is announced in the Stats RPC's `data_port` (gateways find it
// there) and in the ready file.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_CACHENODE_DATA_SERVER_H_
#define RINGCACHE_CACHENODE_DATA_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cachenode/cache_node.h"
#include "cachenode/service.h"
#include "common/block_wire.h"
#include "common/conn_server.h"
#include "common/metrics.h"
#include "common/task_pool.h"
#include "common/tls.h"

namespace ringcache::cachenode {

struct DataServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                      // 0: any free port
  int max_connections = 4096;        // one thread each; more are refused (closed at once)
  int max_connections_per_peer = 0;  // from one address; 0: half of max_connections
  // TLS for every connection (gateways only); null: plaintext.
  std::shared_ptr<const tls::ServerContext> tls{};
};

class DataServer {
 public:
  // Listens and starts accepting. `node`, `gate` and `registry` are not owned.
  static absl::StatusOr<std::unique_ptr<DataServer>> Start(const DataServerOptions& options,
                                                           CacheNode* node, RequestGate* gate,
                                                           metrics::Registry* registry);
  ~DataServer();  // Stop()
  // Closes the listener and every connection, and waits for their threads. Idempotent.
  void Stop();
  int port() const { return server_->port(); }

 private:
  DataServer(CacheNode* node, RequestGate* gate, metrics::Registry* registry);
  // What a connection shares with the reads it runs aside.
  struct Aside {
    absl::Mutex send_mu;  // held for each whole send on the socket
    absl::Mutex mu;
    int running ABSL_GUARDED_BY(mu) = 0;
  };
  void Serve(int fd);
  // Runs read `r` of connection `fd` on the pool and sends its answer when done.
  void RunAside(int fd, tls::Session* session, const std::shared_ptr<Aside>& conn,
                const wire::Request& r);
  // Runs one request; reads leave their data in *data.
  absl::Status Handle(const wire::Request& r, const char* payload, char* data);

  CacheNode* const node_;
  RequestGate* const gate_;
  metrics::Counter* requests_[5] = {};  // by wire::Op
  metrics::Counter* refused_connections_ = nullptr;
  uint64_t refusals_ = 0;  // logged at the 1st, 2nd, 4th, 8th...: a flood writes few lines
  metrics::Counter* protocol_errors_ = nullptr;
  metrics::Counter* tls_refused_ = nullptr;
  metrics::Counter* aside_reads_ = nullptr;
  std::shared_ptr<const tls::ServerContext> tls_;
  // Runs the reads that must fetch from the data nodes (RunAside).
  std::unique_ptr<TaskPool> aside_ = std::make_unique<TaskPool>(32);
  std::unique_ptr<ConnectionServer> server_;  // last: stopped first, while the rest is alive
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_DATA_SERVER_H_
