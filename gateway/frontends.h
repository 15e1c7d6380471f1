// Frontends: the gateway's listeners — NBD (the Router as export provider), the Admin gRPC service
// and HTTP /metrics — started and stopped together by ringcache-gateway and ringcache-local.
//
// Thread-safety: Start/Stop from one thread.
#ifndef RINGCACHE_GATEWAY_FRONTENDS_H_
#define RINGCACHE_GATEWAY_FRONTENDS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/daemon.h"
#include "common/metrics.h"
#include "gateway/admin_service.h"
#include "gateway/nbd_server.h"
#include "gateway/router.h"

namespace ringcache::gateway {

struct FrontendConfig {
  std::string nbd_listen = "127.0.0.1:10809";
  std::string admin_listen = "127.0.0.1:7200";
  std::string http_listen = "127.0.0.1:9200";
};

// Creates each VDI given as "NAME:SIZE" (SIZE with units) unless one of that name exists.
absl::Status CreateVdisFromSpecs(Router* router, const std::vector<std::string>& specs);

class Frontends {
 public:
  // `router` and `registry` are not owned and must outlive Stop().
  absl::Status Start(const FrontendConfig& config, Router* router,
                     std::vector<v1::NodeInfo> nodes, metrics::Registry* registry);
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
