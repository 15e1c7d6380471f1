// The etcd users and roles of a ringcache cluster. With TLS, etcd runs with --client-cert-auth and
// knows each caller by the CN of its certificate; with authentication on, a caller may touch only
// what its user's roles grant. One role per component, under the cluster's key prefix P:
//
//   component   etcd role        may read    may write
//   gateway     <P>-gateway      P/          P/          (membership, rings, catalog, election)
//   cachenode   <P>-cachenode    P/          P/nodes/cache/   (the cache nodes' registrations)
//   datanode    <P>-datanode     P/          P/nodes/data/
//   admin       root             everything  everything  (ringcachectl; adds users later)
//   client      none: an NBD client's certificate gets no user, so etcd refuses it everything.
//
// (<P> is the prefix without its leading slash: "/ringcache" -> "ringcache-gateway".)
// docs/security.md, "etcd", is the user's side of this table.
#ifndef RINGCACHE_MEMBERSHIP_ETCD_AUTH_H_
#define RINGCACHE_MEMBERSHIP_ETCD_AUTH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "membership/etcd_client.h"

namespace ringcache::membership {

// The etcd role and grants of one component (a TLS role: gateway, cachenode, datanode, admin).
struct EtcdComponentRole {
  std::string role;  // the etcd role: "<P>-gateway", ..., "root" for admin
  std::vector<EtcdGrant> grants;  // empty for root (etcd's own role: everything)
};

// The role of `component` under `prefix`; kInvalidArgument for a component without one (client,
// etcd, anything else), naming the ones that have one.
absl::StatusOr<EtcdComponentRole> EtcdRoleOf(absl::string_view prefix, absl::string_view component);

// Creates the roles of every component, the user `root` and `admin_user` (the CN of the admin
// certificate making the call) with the role root, then turns authentication on. Idempotent:
// run again on a cluster whose auth is on, it changes nothing (the caller must then be root).
absl::Status EnableEtcdAuth(EtcdClient& etcd, absl::string_view prefix,
                            const std::string& admin_user);

// Creates user `name` (the CN of a certificate) with the role of `component`. Idempotent.
absl::Status AddEtcdUser(EtcdClient& etcd, absl::string_view prefix, absl::string_view component,
                         const std::string& name);

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_ETCD_AUTH_H_
