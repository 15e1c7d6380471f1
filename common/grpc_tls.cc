#include "common/grpc_tls.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace ringcache::tls {
namespace {

namespace gx = grpc::experimental;

// Runs after gRPC verified the peer's chain against the CA: the certificate must name our
// cluster and one of `roles_`.
class RoleVerifier : public gx::ExternalCertificateVerifier {
 public:
  RoleVerifier(std::string cluster, std::vector<std::string> roles)
      : cluster_(std::move(cluster)), roles_(std::move(roles)) {}

  bool Verify(gx::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)> /*callback*/, grpc::Status* sync_status) override {
    const grpc::string_ref pem = request->peer_cert();
    absl::StatusOr<CertName> peer = NameOfPem(absl::string_view(pem.data(), pem.size()));
    absl::Status s = peer.ok() ? CheckPeer(*peer, cluster_, roles_) : peer.status();
    if (s.ok()) {  // the revocation list of the moment (reloaded with SIGHUP)
      if (std::shared_ptr<const Identity> id = ProcessIdentity(); id != nullptr) {
        s = CheckNotRevoked(*id, absl::string_view(pem.data(), pem.size()));
      }
    }
    *sync_status = s.ok() ? grpc::Status::OK
                          : grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                         std::string(s.message()));
    return true;
  }
  void Cancel(gx::TlsCustomVerificationCheckRequest* /*request*/) override {}

 private:
  const std::string cluster_;
  const std::vector<std::string> roles_;
};

// gRPC cannot swap the certificates of a running server or channel; it can watch files. So its
// ports read the identity's directory themselves, every few seconds, and a renewed certificate
// (or CA bundle) there serves new connections without a restart. (The process checked the files
// at start: a key others can read was refused then.)
constexpr unsigned kWatchSeconds = 5;

std::shared_ptr<gx::CertificateProviderInterface> Provider(const Identity& id) {
  if (id.dir.empty()) {
    return std::make_shared<gx::StaticDataCertificateProvider>(
        id.ca_pem, std::vector<gx::IdentityKeyCertPair>{{id.key_pem, id.cert_pem}});
  }
  return std::make_shared<gx::FileWatcherCertificateProvider>(
      absl::StrCat(id.dir, "/", kKeyFile), absl::StrCat(id.dir, "/", kCertFile),
      absl::StrCat(id.dir, "/", kCaFile), kWatchSeconds);
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(
    const std::vector<std::string>& roles) {
  std::shared_ptr<const Identity> id = ProcessIdentity();
  if (id == nullptr) return grpc::InsecureServerCredentials();
  gx::TlsServerCredentialsOptions options(Provider(*id));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.set_certificate_verifier(
      gx::ExternalCertificateVerifier::Create<RoleVerifier>(id->name.cluster, roles));
  return gx::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const std::string& server_role) {
  std::shared_ptr<const Identity> id = ProcessIdentity();
  if (id == nullptr) return grpc::InsecureChannelCredentials();
  gx::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(*id));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  // Peers are known by the role and cluster in their certificates, not by their addresses.
  options.set_check_call_host(false);
  options.set_certificate_verifier(gx::ExternalCertificateVerifier::Create<RoleVerifier>(
      id->name.cluster, std::vector<std::string>{server_role}));
  return gx::TlsCredentials(options);
}

std::string PeerRole(const grpc::ServerContext& ctx) {
  const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr) return "";
  for (const grpc::string_ref& pem : auth->FindPropertyValues("x509_pem_cert")) {
    absl::StatusOr<CertName> name = NameOfPem(absl::string_view(pem.data(), pem.size()));
    if (name.ok()) return name->role;
  }
  return "";
}

grpc::Status RequirePeerRole(const grpc::ServerContext& ctx,
                             const std::vector<std::string>& roles, const char* method) {
  // A plaintext port (no identity: loopback, --insecure) knows no roles; on a TLS one
  // (ServerCredentialsFor) every caller showed a verified certificate, whose role decides.
  if (ProcessIdentity() == nullptr) return grpc::Status::OK;
  const std::string role = PeerRole(ctx);
  for (const std::string& r : roles) {
    if (r == role) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(method, " is for ", absl::StrJoin(roles, " or "),
                                   " certificates; the caller's is a ",
                                   role.empty() ? "certificate without a role" : role));
}

std::shared_ptr<grpc::ChannelCredentials> EtcdChannelCredentials() {
  std::shared_ptr<const Identity> id = ProcessIdentity();
  if (id == nullptr) return grpc::InsecureChannelCredentials();
  // etcd is no ringcache peer (its certificate's role is etcd's): the chain to the CA and the
  // host name are checked, as grpc::SslCredentials would; the files are watched like the other
  // ports', so a renewed certificate reaches etcd too.
  gx::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(*id));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(std::make_shared<gx::HostNameCertificateVerifier>());
  return gx::TlsCredentials(options);
}

}  // namespace ringcache::tls
