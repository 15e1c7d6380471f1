// TLS for ringcache's own byte protocols (NBD, the block data protocol), on GnuTLS, and the
// identity model every port shares (docs/security.md):
//
//   - One CA per cluster. A certificate's subject says who holds it: O = the cluster's name,
//     OU = the role (gateway, cachenode, datanode, admin, client, etcd), CN = the holder's name.
//   - A daemon's credentials are a directory (--tls-dir) holding ca-cert.pem, cert.pem and
//     key.pem. Its cluster is the O of its own certificate.
//   - A peer is accepted when its certificate chains to the CA, carries the same cluster and a
//     role the port admits (CheckPeer). Addresses play no part: peers are known by their roles.
//
// Session runs TLS over a connected, blocking socket (the socket's SO_RCVTIMEO/SO_SNDTIMEO still
// bound each receive/send). One thread may send while another receives.
//
// Thread-safety: Identity, ServerContext and ClientContext are immutable and thread-safe; a
// Session is used by at most one sending and one receiving thread at a time.
#ifndef RINGCACHE_COMMON_TLS_H_
#define RINGCACHE_COMMON_TLS_H_

#include <sys/uio.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringcache::tls {

// Roles (a certificate's OU).
inline constexpr char kRoleGateway[] = "gateway";
inline constexpr char kRoleCacheNode[] = "cachenode";
inline constexpr char kRoleDataNode[] = "datanode";
inline constexpr char kRoleAdmin[] = "admin";    // ringcachectl
inline constexpr char kRoleClient[] = "client";  // an NBD client (a hypervisor's QEMU)
inline constexpr char kRoleEtcd[] = "etcd";

// File names inside a credentials directory.
inline constexpr char kCaFile[] = "ca-cert.pem";
inline constexpr char kCertFile[] = "cert.pem";
inline constexpr char kKeyFile[] = "key.pem";
inline constexpr char kCrlFile[] = "crl.pem";  // optional: the CA's revocation list

// Who a certificate names.
struct CertName {
  std::string cluster;  // O
  std::string role;     // OU
  std::string name;     // CN
  std::string ToString() const;  // "cachenode 'cache-1' of cluster 'prod'"
};

// Returns the subject of the first certificate in `pem`.
absl::StatusOr<CertName> NameOfPem(absl::string_view pem);
absl::StatusOr<CertName> NameOfDer(absl::string_view der);

// A daemon's credentials, loaded from a directory.
struct Identity {
  std::string dir;
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string crl_pem;  // dir/crl.pem when present: certificates the CA revoked
  CertName name;  // of cert_pem
};

// Loads dir/ca-cert.pem, dir/cert.pem and dir/key.pem, and checks that the certificate is signed
// by the CA, is valid now, and names a cluster and a role. kInvalidArgument naming the file.
absl::StatusOr<std::shared_ptr<const Identity>> LoadIdentity(const std::string& dir);
// The same from three files; `ca_file` may be empty (nothing to verify peers with) and the
// certificate need not name a cluster or role (an HTTPS server's certificate).
absl::StatusOr<std::shared_ptr<const Identity>> LoadIdentityFiles(const std::string& ca_file,
                                                                  const std::string& cert_file,
                                                                  const std::string& key_file);

// The identity this process presents and trusts peers by (null: plaintext). Contexts made from
// it (ServerContext, ClientContext, gRPC credentials) follow a later SetProcessIdentity: the
// next handshake uses the new certificate and revocation list; sessions already open keep theirs.
void SetProcessIdentity(std::shared_ptr<const Identity> identity);
std::shared_ptr<const Identity> ProcessIdentity();
// Loads the process identity's directory again (SIGHUP): a renewed certificate and key, a new CA
// bundle or revocation list. The new certificate must name the same cluster and role; otherwise,
// or when a file is bad, the old identity stays and the error says why. Returns a line for the
// log; "" when the process runs without TLS.
absl::StatusOr<std::string> ReloadProcessIdentity();

// kPermissionDenied when the first certificate of `peer_pem` is on `id`'s revocation list.
absl::Status CheckNotRevoked(const Identity& id, absl::string_view peer_pem);

// OK when `peer` belongs to `cluster` and has one of `roles`; kPermissionDenied saying why.
absl::Status CheckPeer(const CertName& peer, const std::string& cluster,
                       const std::vector<std::string>& roles);

// What a TLS server asks of its clients.
enum class ClientCerts {
  kNone,     // no certificate is asked for (PSK or anonymous-to-us clients)
  kRequest,  // asked for; when one is sent it must verify
  kRequire,  // must be sent and verify
};

struct ServerOptions {
  ClientCerts client_certs = ClientCerts::kRequire;
  // Roles a client certificate must carry (empty: any role of the cluster).
  std::vector<std::string> roles;
  // A PSK key file ("identity:hex-key" lines, as psktool writes); empty: no PSK.
  std::string psk_file;
  // Whether an X.509 identity serves at all (false: PSK only).
  bool x509 = true;
  // Whether a client certificate must name this server's cluster (off for HTTPS scrapers, whose
  // certificates may come from another CA).
  bool check_cluster = true;
  // Only TLS 1.3 (the default also takes TLS 1.2).
  bool tls13_only = false;
};

class Session;

// The GnuTLS certificate credentials of a context: built from its identity, or, when that was the
// process identity, rebuilt from the process identity after it changed (a reload). Sessions hold
// the credentials they were made with.
class X509Source {
 public:
  struct Creds;  // in tls.cc: the gnutls credentials and the identity they came from
  // Builds from `identity`; follows the process identity if `identity` is it.
  absl::Status Init(std::shared_ptr<const Identity> identity);
  bool empty() const;
  // The credentials for a new session (rebuilt first if the process identity changed; a rebuild
  // that fails keeps the old ones and is logged).
  std::shared_ptr<const Creds> Current() const;

 private:
  mutable absl::Mutex mu_;
  mutable std::shared_ptr<const Creds> creds_ ABSL_GUARDED_BY(mu_);
  bool follows_process_ = false;
};

class ServerContext {
 public:
  // `identity` may be null only for a PSK-only server.
  static absl::StatusOr<std::shared_ptr<const ServerContext>> Create(
      std::shared_ptr<const Identity> identity, ServerOptions options);
  ~ServerContext();
  // Runs the server side of a handshake on `fd` (not owned) within `timeout`.
  absl::StatusOr<std::unique_ptr<Session>> Accept(int fd, absl::Duration timeout) const;
  const ServerOptions& options() const { return options_; }

 private:
  ServerContext() = default;
  std::shared_ptr<const Identity> identity_;
  ServerOptions options_;
  X509Source x509_;
  void* psk_ = nullptr;  // gnutls_psk_server_credentials_t
};

class ClientContext {
 public:
  // A client presenting `identity` that accepts a server of `server_role` in its cluster.
  static absl::StatusOr<std::shared_ptr<const ClientContext>> Create(
      std::shared_ptr<const Identity> identity, std::string server_role);
  ~ClientContext();
  absl::StatusOr<std::unique_ptr<Session>> Connect(int fd, absl::Duration timeout) const;

 private:
  ClientContext() = default;
  std::string server_role_;
  X509Source x509_;
};

// One TLS connection over a socket the caller owns (and closes after the session is gone).
class Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Writes every byte of the buffers as one flush. kUnavailable on error or send timeout.
  absl::Status WriteV(const iovec* iov, int count);
  absl::Status Write(absl::string_view bytes);
  // Reads up to `len` bytes: > 0 read, 0 the peer closed, < 0 an error (errno-like: -EAGAIN on
  // the socket's receive timeout, -EIO otherwise).
  long Read(char* buf, size_t len);
  // Reads exactly `len` bytes; kUnavailable on EOF/error (*eof_at_start as in socket.h),
  // kDeadlineExceeded on the socket's receive timeout.
  absl::Status ReadFull(char* buf, size_t len, bool* eof_at_start = nullptr);
  // Bounds each Read to about `slice` even while a TLS record trickles in: a record's bytes
  // are received one recv() after another inside GnuTLS, each within the socket's receive
  // timeout, so a peer sending a byte a second would otherwise hold one Read for as long as the
  // record takes. Past the slice Read returns -EAGAIN like a receive timeout (the partial record
  // stays buffered; the next Read goes on with it), and the caller's deadline decides.
  void SetReadSlice(absl::Duration slice);
  // Bytes already received and waiting to be read (a poll() on the socket does not see them):
  // decrypted ones, and those of the read-ahead buffer.
  size_t Pending() const;
  // Sends the TLS close notification (best effort).
  void Close();

  // The peer: its certificate's subject, or for PSK its identity in `name` (role and cluster
  // empty). `authenticated`: a certificate or PSK proved it.
  const CertName& peer() const { return peer_; }
  bool authenticated() const { return authenticated_; }
  // "TLS1.3 / ECDHE-SECP256R1-AES-256-GCM" style.
  std::string Description() const;

 private:
  friend class ServerContext;
  friend class ClientContext;
  Session() = default;
  void Attach(int fd, absl::Duration timeout);
  static ssize_t Pull(void* session, void* buf, size_t size);
  static int PullTimeout(void* session, unsigned int ms);

  static constexpr size_t kReadAhead = 64 << 10;
  static constexpr size_t kRecord = 16384;  // TLS's largest record payload
  std::shared_ptr<const X509Source::Creds> creds_;  // outlive the session (GnuTLS needs them)
  void* session_ = nullptr;  // gnutls_session_t
  int fd_ = -1;
  // What one recv() took and GnuTLS has not asked for yet; used by the receiving thread only.
  std::unique_ptr<char[]> rbuf_;
  size_t rbegin_ = 0, rend_ = 0;
  // WriteV's record being gathered; used by the sending thread only.
  std::unique_ptr<char[]> wbuf_;
  absl::Duration read_slice_ = absl::InfiniteDuration();
  CertName peer_;
  bool authenticated_ = false;
};

// A socket's byte stream with or without TLS: `session` null means the plain socket. Same
// contracts as ReadFull/WriteFullV in common/socket.h (receive and send timeouts of the socket
// apply either way).
absl::Status ReadFullOn(int fd, Session* session, char* buf, size_t len,
                        bool* eof_at_start = nullptr);
absl::Status WriteFullVOn(int fd, Session* session, iovec* iov, int count);

}  // namespace ringcache::tls

#endif  // RINGCACHE_COMMON_TLS_H_
