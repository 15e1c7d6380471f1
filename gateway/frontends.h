// Frontends: the gateway's listeners — NBD (the Router as export provider), the Admin gRPC service
// and HTTP /metrics — started and stopped together by ringcache-gateway and ringcache-local.
//
// Thread-safety: Start/Stop from one thread.
#ifndef RINGCACHE_GATEWAY_FRONTENDS_H_
#define RINGCACHE_GATEWAY_FRONTENDS_H_

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/daemon.h"
#include "common/metrics.h"
#include "common/tls.h"
#include "gateway/admin_service.h"
#include "gateway/nbd_server.h"
#include "gateway/router.h"

namespace ringcache::gateway {

struct FrontendConfig {
  std::string nbd_listen = "127.0.0.1:10809";
  std::string admin_listen = "127.0.0.1:7200";
  std::string http_listen = "127.0.0.1:9200";
  // NBD TLS (NbdServerConfig::tls, tls_context) and HTTPS for /metrics (MetricsServer).
  nbd::TlsMode nbd_tls = nbd::TlsMode::kOff;
  std::shared_ptr<const tls::ServerContext> nbd_tls_context{};
  // NbdServerConfig::max_connections, max_connections_per_peer.
  int nbd_max_connections = 256;
  int nbd_max_connections_per_peer = 0;
  // NbdServerConfig::idle_timeout_ms (0: never).
  int nbd_idle_timeout_ms = 0;
  // NbdServerConfig::max_inflight_bytes_per_peer.
  uint64_t nbd_memory_per_peer = 512ull << 20;
  std::string metrics_web_config{};
};

// The NBD front's flags of ringcache-gateway and ringcache-local: --nbd-tls off|on|require,
// --nbd-tls-verify-peer, --nbd-tls-psk FILE, --nbd-max-connections N,
// --nbd-max-connections-per-peer N, --nbd-idle-timeout SECONDS, --nbd-memory-per-peer SIZE.
struct NbdFlags {
  std::string mode;  // empty: require when credentials are given, else off
  bool verify_peer = false;
  std::string psk_file;
  int max_connections = 256;
  int max_connections_per_peer = 0;
  int idle_timeout_s = 0;
  std::string memory_per_peer = "512MiB";

  void AddTo(CLI::App* app);
  // Fills config's NBD fields from the flags and `identity` (the --tls-dir certificate; may be
  // null). kInvalidArgument when TLS is asked for without credentials.
  absl::Status Resolve(std::shared_ptr<const tls::Identity> identity, FrontendConfig* config) const;
};

// Creates each VDI given as "NAME:SIZE" (SIZE with units) unless one of that name exists.
absl::Status CreateVdisFromSpecs(Router* router, const std::vector<std::string>& specs);

class Frontends {
 public:
  // `router` and `registry` are not owned and must outlive Stop().
  absl::Status Start(const FrontendConfig& config, Router* router, std::vector<v1::NodeInfo> nodes,
                     metrics::Registry* registry);
  void Stop();
  int nbd_port() const { return nbd_port_; }
  int admin_port() const { return admin_port_; }
  int http_port() const { return http_port_; }
  // The admin service (null before Start).
  AdminService* admin() const { return admin_.get(); }

 private:
  std::unique_ptr<NbdServer> nbd_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> admin_server_;
  MetricsServer http_;
  int nbd_port_ = 0, admin_port_ = 0, http_port_ = 0;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_FRONTENDS_H_
