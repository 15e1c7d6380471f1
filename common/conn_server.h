// ConnectionServer: a TCP listener that serves each accepted connection on a thread of its own,
// up to a connection limit in total and per peer address. The cache node's block data port
// (cachenode/data_server.h) and the HTTPS front of /metrics (common/tls_front.h) are built on it;
// they supply what a connection does, it owns accepting, the limit, and an orderly stop.
//
// Thread-safety: Start/Stop from one thread; the handler runs on the connection's thread.
#ifndef RINGCACHE_COMMON_CONN_SERVER_H_
#define RINGCACHE_COMMON_CONN_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/conn_slots.h"

namespace ringcache {

class ConnectionServer {
 public:
  struct Options {
    std::string host = "127.0.0.1";
    int port = 0;                // 0: any free port
    int max_connections = 4096;  // one thread each; more are closed at once
    // From any one address (common/conn_slots.h); 0: half of max_connections.
    int max_connections_per_peer = 0;
  };
  // Serves one connection until it ends; the server closes `fd` after it returns.
  using Handler = std::function<void(int fd)>;
  // Called (under the server's lock: keep it short) for a connection closed over a limit, with
  // the limit ("total" or "peer") and the peer's address.
  using Refused = std::function<void(const char* limit, const std::string& peer)>;

  static absl::StatusOr<std::unique_ptr<ConnectionServer>> Start(const Options& options,
                                                                 Handler handler,
                                                                 Refused refused = nullptr);
  ~ConnectionServer();  // Stop()
  // Closes the listener, shuts every connection down and waits for their handlers. Idempotent.
  void Stop();
  int port() const { return port_; }

 private:
  ConnectionServer() = default;
  void AcceptLoop();
  void Serve(int fd, const std::string& peer);

  Handler handler_;
  Refused refused_;
  std::unique_ptr<ConnectionSlots> slots_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  absl::Mutex mu_;
  absl::flat_hash_set<int> conns_ ABSL_GUARDED_BY(mu_);
  int threads_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_CONN_SERVER_H_
