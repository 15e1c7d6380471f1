// TlsFront: HTTPS in front of a plaintext HTTP server that listens on loopback. It accepts TLS
// connections on its own address (GnuTLS, common/tls.h) and relays each one's bytes to the inner
// server. The daemons' /metrics use it (MetricsServer with a web configuration): civetweb, which
// prometheus-cpp serves with, loads OpenSSL at run time and its Debian build crashes with
// OpenSSL 3 when HTTPS is on, so the exposer stays plaintext on loopback behind this front.
//
// Thread-safety: Start/Stop from one thread; one thread per open connection (at most
// kMaxConnections; more are closed at once).
#ifndef RINGCACHE_COMMON_TLS_FRONT_H_
#define RINGCACHE_COMMON_TLS_FRONT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/conn_server.h"
#include "common/tls.h"

namespace ringcache::tls {

class TlsFront {
 public:
  static constexpr int kMaxConnections = 32;

  // Listens on `listen` (host:port; port 0 picks one) and relays to 127.0.0.1:`inner_port`.
  static absl::StatusOr<std::unique_ptr<TlsFront>> Start(
      const std::string& listen, std::shared_ptr<const ServerContext> context, int inner_port);
  ~TlsFront();  // Stop()
  // Closes the listener and every connection, and waits for their threads. Idempotent.
  void Stop() {
    if (server_ != nullptr) server_->Stop();
  }
  int port() const { return server_->port(); }

 private:
  TlsFront() = default;
  void Relay(int fd);

  std::shared_ptr<const ServerContext> context_;
  int inner_port_ = 0;
  std::unique_ptr<ConnectionServer> server_;  // last: stopped first, while the rest is alive
};

}  // namespace ringcache::tls

#endif  // RINGCACHE_COMMON_TLS_FRONT_H_
