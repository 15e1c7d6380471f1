// Presence: how a ringcache daemon takes part in cluster mode (docs/design.md §7). It connects to
// etcd and keeps the daemon's NodeRecord registered under a lease (NodeRegistration); destroying it
// revokes the lease, so a clean shutdown leaves the membership at once. Daemons create one only
// when etcd endpoints are configured (--etcd / etcd_endpoints:); without it they run exactly as in
// static mode.
//
// Thread-safety: thread-safe (as NodeRegistration and EtcdClient).
#ifndef RINGCACHE_MEMBERSHIP_PRESENCE_H_
#define RINGCACHE_MEMBERSHIP_PRESENCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "membership/etcd_client.h"
#include "membership/membership.h"

namespace ringcache::membership {

struct EtcdSettings {
  std::string endpoints;  // "host:port,host:port"; empty: static mode
  std::string prefix = std::string(kDefaultPrefix);
  int lease_ttl_s = 5;

  bool enabled() const { return !endpoints.empty(); }
  // Returns OK, or kInvalidArgument naming the bad setting.
  absl::Status Validate() const;
};

// Splits a comma-separated endpoint list, dropping empty items and spaces.
std::vector<std::string> SplitEndpoints(absl::string_view list);

// Returns a client for the settings' endpoints (connects lazily).
absl::StatusOr<std::unique_ptr<EtcdClient>> ConnectEtcd(const EtcdSettings& settings);

class Presence {
 public:
  // Connects and registers `record`; the error names etcd when it cannot be reached.
  // `on_reregistered` (may be empty) runs after the lease was lost and a new one granted.
  static absl::StatusOr<std::unique_ptr<Presence>> Start(
      const EtcdSettings& settings, NodeRecord record,
      NodeRegistration::ReregisteredCallback on_reregistered = nullptr);
  ~Presence();  // revokes the lease (best effort), then closes the client

  EtcdClient* client() const { return client_.get(); }
  NodeRegistration* registration() const { return registration_.get(); }

 private:
  Presence() = default;
  std::unique_ptr<EtcdClient> client_;
  std::unique_ptr<NodeRegistration> registration_;  // destroyed first (see ~Presence)
};

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_PRESENCE_H_
