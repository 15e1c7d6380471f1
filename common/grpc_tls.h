// gRPC credentials from the process's TLS identity (common/tls.h): mutual TLS between ringcache
// daemons, where each side checks the other's certificate names this cluster and a role that
// may be at that end of the call. Without an identity (no --tls-dir) they are insecure
// credentials, as before.
//
// Who may call whom (docs/security.md):
//   data node      <- cache nodes, gateways (its control methods: gateways only, RequirePeerRole)
//   cache node     <- gateways
//   gateway admin  <- ringcachectl (admin)
//
// Certificates: gRPC watches the identity's files itself (a renewed certificate serves new
// connections within seconds); the revocation list is the process identity's of the moment.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_COMMON_GRPC_TLS_H_
#define RINGCACHE_COMMON_GRPC_TLS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "common/tls.h"

namespace ringcache::tls {

// SetProcessIdentity, ProcessIdentity and ReloadProcessIdentity: common/tls.h.

// Server credentials admitting clients of `roles` (mutual TLS), or insecure ones.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const std::vector<std::string>& roles);
// Channel credentials for a server of `server_role`, or insecure ones.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const std::string& server_role);
// The role (certificate OU) of the client of a call served with ServerCredentialsFor; "" when
// the server runs without TLS.
std::string PeerRole(const grpc::ServerContext& ctx);
// A port admits several roles (ServerCredentialsFor); some methods are one role's alone: OK when
// the caller has one of `roles` or the server runs without TLS (loopback, --insecure), else
// PERMISSION_DENIED naming `method` and the caller's role.
grpc::Status RequirePeerRole(const grpc::ServerContext& ctx,
                             const std::vector<std::string>& roles, const char* method);
// Credentials for etcd: standard TLS with a client certificate (etcd checks the CA and, as Go
// does, the address against the server certificate's subjectAltNames), or insecure ones.
std::shared_ptr<grpc::ChannelCredentials> EtcdChannelCredentials();

}  // namespace ringcache::tls

#endif  // RINGCACHE_COMMON_GRPC_TLS_H_
