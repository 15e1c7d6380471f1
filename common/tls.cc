#include "common/tls.h"

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/gnutls_datum.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace ringcache::tls {
namespace {

// Priorities: GnuTLS's defaults (TLS 1.2 and 1.3), plus the PSK key exchanges when PSK serves.
constexpr char kPriority[] = "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1";
constexpr char kPriorityPsk[] = "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1:+ECDHE-PSK:+DHE-PSK:+PSK";

absl::Status GnutlsError(absl::string_view what, int rc) {
  return absl::UnavailableError(absl::StrCat(what, ": ", gnutls_strerror(rc)));
}

std::string DnField(gnutls_x509_crt_t crt, const char* oid) {
  char buf[512];
  size_t size = sizeof(buf);
  if (gnutls_x509_crt_get_dn_by_oid(crt, oid, 0, 0, buf, &size) != 0) return "";
  return std::string(buf, size);
}

absl::StatusOr<CertName> NameOf(const gnutls_datum_t& data, gnutls_x509_crt_fmt_t fmt) {
  gnutls_x509_crt_t crt;
  gnutls_x509_crt_init(&crt);
  const int rc = gnutls_x509_crt_import(crt, &data, fmt);
  if (rc != 0) {
    gnutls_x509_crt_deinit(crt);
    return absl::InvalidArgumentError(absl::StrCat("not a certificate: ", gnutls_strerror(rc)));
  }
  CertName n;
  n.cluster = DnField(crt, GNUTLS_OID_X520_ORGANIZATION_NAME);
  n.role = DnField(crt, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME);
  n.name = DnField(crt, GNUTLS_OID_X520_COMMON_NAME);
  gnutls_x509_crt_deinit(crt);
  return n;
}

// Allocates certificate credentials into *out (owned by the caller's context even on error)
// holding `id`'s key pair and, when it has one, its CA as the trust anchor. Returns a GnuTLS code.
int NewCredentials(const Identity& id, void** out) {
  gnutls_certificate_credentials_t cred;
  gnutls_certificate_allocate_credentials(&cred);
  *out = cred;
  const gnutls_datum_t c = Datum(id.cert_pem), k = Datum(id.key_pem), a = Datum(id.ca_pem);
  int rc = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
  if (rc >= 0 && a.size > 0) {
    rc = gnutls_certificate_set_x509_trust_mem(cred, &a, GNUTLS_X509_FMT_PEM);
  }
  if (rc >= 0 && !id.crl_pem.empty()) {  // revoked certificates then fail verification
    const gnutls_datum_t crl = Datum(id.crl_pem);
    rc = gnutls_certificate_set_x509_crl_mem(cred, &crl, GNUTLS_X509_FMT_PEM);
  }
  return rc;
}

}  // namespace

// Sets the session up for socket `fd` with the handshake timeout: sends go to the socket as
// GnuTLS's own functions send them; receives go through the session's read-ahead buffer.
void Session::Attach(int fd, absl::Duration timeout) {
  auto s = static_cast<gnutls_session_t>(session_);
  fd_ = fd;
  gnutls_transport_set_ptr2(s, this, reinterpret_cast<gnutls_transport_ptr_t>(intptr_t{fd}));
  gnutls_transport_set_pull_function(s, &Session::Pull);
  gnutls_transport_set_pull_timeout_function(s, &Session::PullTimeout);
  gnutls_handshake_set_timeout(s, static_cast<unsigned>(absl::ToInt64Milliseconds(timeout)));
}

namespace {

int RunHandshake(gnutls_session_t s) {
  int rc;
  do {
    rc = gnutls_handshake(s);
  } while (rc < 0 && gnutls_error_is_fatal(rc) == 0);
  return rc;
}

// What a certificate verification status names.
std::string StatusText(unsigned status) {
  gnutls_datum_t why{};
  gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &why, 0);
  std::string text(reinterpret_cast<char*>(why.data), why.size);
  gnutls_free(why.data);
  return text;
}

// The peer's certificate subject after a verified handshake.
absl::StatusOr<CertName> PeerCertName(gnutls_session_t s) {
  unsigned int n = 0;
  const gnutls_datum_t* certs = gnutls_certificate_get_peers(s, &n);
  if (certs == nullptr || n == 0) return absl::UnauthenticatedError("no peer certificate");
  return NameOf(certs[0], GNUTLS_X509_FMT_DER);
}

}  // namespace

std::string CertName::ToString() const {
  return absl::StrCat(role.empty() ? "certificate" : role, " '", name, "' of cluster '", cluster,
                      "'");
}

absl::StatusOr<CertName> NameOfPem(absl::string_view pem) {
  return NameOf(Datum(pem), GNUTLS_X509_FMT_PEM);
}

absl::StatusOr<CertName> NameOfDer(absl::string_view der) {
  return NameOf(Datum(der), GNUTLS_X509_FMT_DER);
}

// ---- X509Source ------------------------------------------------------------------------------

struct X509Source::Creds {
  std::shared_ptr<const Identity> identity;
  gnutls_certificate_credentials_t cred = nullptr;
  ~Creds() {
    if (cred != nullptr) gnutls_certificate_free_credentials(cred);
  }
};

namespace {

absl::StatusOr<std::shared_ptr<const X509Source::Creds>> BuildCreds(
    std::shared_ptr<const Identity> identity) {
  auto creds = std::make_shared<X509Source::Creds>();
  creds->identity = std::move(identity);
  void* raw = nullptr;
  const int rc = NewCredentials(*creds->identity, &raw);
  creds->cred = static_cast<gnutls_certificate_credentials_t>(raw);
  if (rc < 0) return GnutlsError("TLS credentials", rc);
  return std::shared_ptr<const X509Source::Creds>(std::move(creds));
}

}  // namespace

absl::Status X509Source::Init(std::shared_ptr<const Identity> identity) {
  follows_process_ = identity != nullptr && identity == ProcessIdentity();
  RC_ASSIGN_OR_RETURN(std::shared_ptr<const Creds> creds, BuildCreds(std::move(identity)));
  absl::MutexLock l(&mu_);
  creds_ = std::move(creds);
  return absl::OkStatus();
}

bool X509Source::empty() const {
  absl::MutexLock l(&mu_);
  return creds_ == nullptr;
}

std::shared_ptr<const X509Source::Creds> X509Source::Current() const {
  absl::MutexLock l(&mu_);
  if (!follows_process_ || creds_ == nullptr) return creds_;
  std::shared_ptr<const Identity> now = ProcessIdentity();
  if (now == nullptr || now == creds_->identity) return creds_;
  absl::StatusOr<std::shared_ptr<const Creds>> fresh = BuildCreds(now);
  if (!fresh.ok()) {
    spdlog::error("TLS: new credentials of {} refused ({}); the old ones serve",
                  now->name.ToString(), fresh.status().ToString());
    return creds_;
  }
  creds_ = *std::move(fresh);
  return creds_;
}

absl::Status CheckPeer(const CertName& peer, const std::string& cluster,
                       const std::vector<std::string>& roles) {
  if (peer.cluster != cluster) {
    return absl::PermissionDeniedError(
        absl::StrCat(peer.ToString(), " is not of this cluster ('", cluster, "')"));
  }
  if (roles.empty()) return absl::OkStatus();
  for (const std::string& r : roles) {
    if (peer.role == r) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(peer.ToString(), " may not connect here (",
                                                  absl::StrJoin(roles, " or "), " only)"));
}

// ---- ServerContext ---------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<const ServerContext>> ServerContext::Create(
    std::shared_ptr<const Identity> identity, ServerOptions options) {
  std::shared_ptr<ServerContext> ctx(new ServerContext());
  ctx->identity_ = std::move(identity);
  ctx->options_ = std::move(options);
  if (ctx->options_.x509) {
    if (ctx->identity_ == nullptr) {
      return absl::InvalidArgumentError("a TLS server needs a certificate (--tls-dir)");
    }
    RC_RETURN_IF_ERROR(ctx->x509_.Init(ctx->identity_));
  }
  if (!ctx->options_.psk_file.empty()) {
    if (absl::StatusOr<std::string> f = ReadPrivateFile(ctx->options_.psk_file); !f.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("PSK file: ", f.status().message()));
    }
    gnutls_psk_server_credentials_t psk;
    gnutls_psk_allocate_server_credentials(&psk);
    ctx->psk_ = psk;
    const int rc = gnutls_psk_set_server_credentials_file(psk, ctx->options_.psk_file.c_str());
    if (rc < 0) return GnutlsError("PSK file " + ctx->options_.psk_file, rc);
  }
  if (ctx->x509_.empty() && ctx->psk_ == nullptr) {
    return absl::InvalidArgumentError("a TLS server needs a certificate or a PSK file");
  }
  return std::shared_ptr<const ServerContext>(std::move(ctx));
}

ServerContext::~ServerContext() {
  if (psk_ != nullptr) {
    gnutls_psk_free_server_credentials(static_cast<gnutls_psk_server_credentials_t>(psk_));
  }
}

absl::StatusOr<std::unique_ptr<Session>> ServerContext::Accept(int fd,
                                                               absl::Duration timeout) const {
  std::unique_ptr<Session> out(new Session());
  gnutls_session_t s;
  gnutls_init(&s, GNUTLS_SERVER | GNUTLS_NO_SIGNAL);
  out->session_ = s;
  std::string priority = psk_ != nullptr ? kPriorityPsk : kPriority;
  if (options_.tls13_only) priority += ":-VERS-TLS1.2";
  gnutls_priority_set_direct(s, priority.c_str(), nullptr);
  out->creds_ = x509_.Current();
  if (out->creds_ != nullptr) {
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, out->creds_->cred);
    switch (options_.client_certs) {
      case ClientCerts::kNone:
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_IGNORE);
        break;
      case ClientCerts::kRequest:
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUEST);
        break;
      case ClientCerts::kRequire:
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
        break;
    }
    // A required client certificate is verified against the CA during the handshake. GnuTLS
    // would then fail a client that sends none even when one is only requested, so a requested
    // certificate is verified after the handshake, when sent.
    if (options_.client_certs == ClientCerts::kRequire) gnutls_session_set_verify_cert(s, nullptr, 0);
  }
  if (psk_ != nullptr) gnutls_credentials_set(s, GNUTLS_CRD_PSK, psk_);
  out->Attach(fd, timeout);
  const int rc = RunHandshake(s);
  if (rc < 0) {
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
      const unsigned status = gnutls_session_get_verify_cert_status(s);
      return absl::UnauthenticatedError("client certificate refused: " + StatusText(status));
    }
    return GnutlsError("TLS handshake", rc);
  }
  if (gnutls_auth_get_type(s) == GNUTLS_CRD_PSK) {
    const char* user = gnutls_psk_server_get_username(s);
    out->peer_.name = user != nullptr ? user : "";
    out->authenticated_ = true;
    return out;
  }
  absl::StatusOr<CertName> peer = PeerCertName(s);
  if (!peer.ok()) {
    if (options_.client_certs == ClientCerts::kRequire) return peer.status();
    return out;  // no client certificate, and none needed
  }
  if (options_.client_certs == ClientCerts::kRequest) {
    unsigned status = 0;
    const int vrc = gnutls_certificate_verify_peers2(s, &status);
    if (vrc < 0) return GnutlsError("verify the client certificate", vrc);
    if (status != 0) {
      return absl::UnauthenticatedError("client certificate refused: " + StatusText(status));
    }
  }
  out->peer_ = *std::move(peer);
  out->authenticated_ = true;
  if (options_.check_cluster) {
    absl::Status c = CheckPeer(out->peer_, out->creds_->identity->name.cluster, options_.roles);
    if (!c.ok()) return c;
  }
  return out;
}

// ---- ClientContext ---------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<const ClientContext>> ClientContext::Create(
    std::shared_ptr<const Identity> identity, std::string server_role) {
  if (identity == nullptr) return absl::InvalidArgumentError("a TLS client needs --tls-dir");
  std::shared_ptr<ClientContext> ctx(new ClientContext());
  ctx->server_role_ = std::move(server_role);
  RC_RETURN_IF_ERROR(ctx->x509_.Init(std::move(identity)));
  return std::shared_ptr<const ClientContext>(std::move(ctx));
}

ClientContext::~ClientContext() = default;

absl::StatusOr<std::unique_ptr<Session>> ClientContext::Connect(int fd,
                                                                absl::Duration timeout) const {
  std::unique_ptr<Session> out(new Session());
  gnutls_session_t s;
  gnutls_init(&s, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL);
  out->session_ = s;
  gnutls_priority_set_direct(s, kPriority, nullptr);
  out->creds_ = x509_.Current();
  gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, out->creds_->cred);
  gnutls_session_set_verify_cert(s, nullptr, 0);  // the chain; the role is checked below
  out->Attach(fd, timeout);
  const int rc = RunHandshake(s);
  if (rc < 0) return GnutlsError("TLS handshake", rc);
  absl::StatusOr<CertName> peer = PeerCertName(s);
  if (!peer.ok()) return peer.status();
  out->peer_ = *std::move(peer);
  out->authenticated_ = true;
  if (absl::Status c = CheckPeer(out->peer_, out->creds_->identity->name.cluster, {server_role_});
      !c.ok()) {
    return c;
  }
  return out;
}

// ---- Session ------------------------------------------------------------------------------------

Session::~Session() {
  if (session_ != nullptr) gnutls_deinit(static_cast<gnutls_session_t>(session_));
}

absl::Status Session::WriteV(const iovec* iov, int count) {
  auto s = static_cast<gnutls_session_t>(session_);
  // Every record costs a send() and its own encryption, so small buffers (answer headers, 4K
  // payloads: a batch of pipelined answers) are gathered into full records, as one writev
  // would gather them into segments; only what does not fit a record's remainder is sent
  // straight from the caller's buffer, a full record per call (a 1 MiB read's payload).
  auto send = [s](const char* p, size_t n) -> absl::Status {
    while (n > 0) {
      const ssize_t rc = gnutls_record_send(s, p, n);
      if (rc == GNUTLS_E_INTERRUPTED) continue;  // again with the same buffer, as GnuTLS asks
      if (rc < 0) return GnutlsError("TLS send", static_cast<int>(rc));
      p += rc;
      n -= static_cast<size_t>(rc);
    }
    return absl::OkStatus();
  };
  size_t staged = 0;
  for (int i = 0; i < count; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      if (staged == 0 && left >= kRecord) {
        RC_RETURN_IF_ERROR(send(p, kRecord));
        p += kRecord;
        left -= kRecord;
        continue;
      }
      if (wbuf_ == nullptr) wbuf_ = std::make_unique<char[]>(kRecord);
      const size_t n = std::min(left, kRecord - staged);
      std::memcpy(wbuf_.get() + staged, p, n);
      staged += n;
      p += n;
      left -= n;
      if (staged == kRecord) {
        RC_RETURN_IF_ERROR(send(wbuf_.get(), staged));
        staged = 0;
      }
    }
  }
  if (staged > 0) return send(wbuf_.get(), staged);
  return absl::OkStatus();
}

absl::Status Session::Write(absl::string_view bytes) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  return WriteV(&iov, 1);
}

namespace {

// When the Read running on this thread gives up (SetReadSlice); infinite outside such a Read.
thread_local absl::Time read_give_up = absl::InfiniteFuture();

}  // namespace

// GnuTLS's pull function: what the read-ahead buffer holds, else one recv() of as much as the
// socket has (up to kReadAhead) into it. GnuTLS asks for a record's 5-byte header and then its
// body, each a recv() of its own without this: two system calls per record, where a pipelined
// connection's records (a 4K answer each) now share one. Past the slice of the Read on this
// thread (SetReadSlice) it says "would block", as a receive timeout does.
ssize_t Session::Pull(void* ptr, void* buf, size_t size) {
  auto* self = static_cast<Session*>(ptr);
  if (self->rbegin_ == self->rend_) {
    if (read_give_up != absl::InfiniteFuture() && absl::Now() >= read_give_up) {
      errno = EAGAIN;
      return -1;
    }
    if (self->rbuf_ == nullptr) self->rbuf_ = std::make_unique<char[]>(kReadAhead);
    ssize_t n;
    do {
      n = ::recv(self->fd_, self->rbuf_.get(), kReadAhead, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    self->rbegin_ = 0;
    self->rend_ = static_cast<size_t>(n);
  }
  const size_t k = std::min(size, self->rend_ - self->rbegin_);
  std::memcpy(buf, self->rbuf_.get() + self->rbegin_, k);
  self->rbegin_ += k;
  return static_cast<ssize_t>(k);
}

// GnuTLS's wait for input (the handshake's timeout): at once when the buffer holds some.
int Session::PullTimeout(void* ptr, unsigned int ms) {
  auto* self = static_cast<Session*>(ptr);
  if (self->rbegin_ != self->rend_) return 1;
  pollfd p{self->fd_, POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : static_cast<int>(ms));
  } while (rc < 0 && errno == EINTR);
  return rc;
}

void Session::SetReadSlice(absl::Duration slice) { read_slice_ = slice; }

long Session::Read(char* buf, size_t len) {
  auto s = static_cast<gnutls_session_t>(session_);
  struct SliceScope {  // the slice of this Read, for PullWithinSlice on this thread
    explicit SliceScope(absl::Duration slice) : set(slice != absl::InfiniteDuration()) {
      if (set) read_give_up = absl::Now() + slice;  // no clock read on sessions without a slice
    }
    ~SliceScope() {
      if (set) read_give_up = absl::InfiniteFuture();
    }
    const bool set;
  } scope(read_slice_);
  while (true) {
    const ssize_t rc = gnutls_record_recv(s, buf, len);
    if (rc >= 0) return rc;
    if (rc == GNUTLS_E_INTERRUPTED) continue;
    if (rc == GNUTLS_E_AGAIN) return -EAGAIN;
    // A peer that closes without a close notification ends the stream like a TCP EOF.
    if (rc == GNUTLS_E_PREMATURE_TERMINATION) return 0;
    return -EIO;
  }
}

absl::Status Session::ReadFull(char* buf, size_t len, bool* eof_at_start) {
  if (eof_at_start != nullptr) *eof_at_start = false;
  size_t got = 0;
  while (got < len) {
    const long n = Read(buf + got, len - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      if (got == 0 && eof_at_start != nullptr) *eof_at_start = true;
      return absl::UnavailableError("connection closed by peer");
    }
    if (n == -EAGAIN) return absl::DeadlineExceededError("TLS receive timed out");
    return absl::UnavailableError("TLS receive failed");
  }
  return absl::OkStatus();
}

size_t Session::Pending() const {
  return gnutls_record_check_pending(static_cast<gnutls_session_t>(session_)) +
         (rend_ - rbegin_);
}

void Session::Close() { (void)gnutls_bye(static_cast<gnutls_session_t>(session_), GNUTLS_SHUT_WR); }

std::string Session::Description() const {
  auto s = static_cast<gnutls_session_t>(session_);
  char* d = gnutls_session_get_desc(s);
  std::string out = d != nullptr ? d : "";
  gnutls_free(d);
  return out;
}

absl::Status ReadFullOn(int fd, Session* session, char* buf, size_t len, bool* eof_at_start) {
  if (session != nullptr) return session->ReadFull(buf, len, eof_at_start);
  return ReadFull(fd, buf, len, absl::InfiniteFuture(), eof_at_start);
}

absl::Status WriteFullVOn(int fd, Session* session, iovec* iov, int count) {
  if (session != nullptr) return session->WriteV(iov, count);
  return WriteFullV(fd, iov, count);
}

}  // namespace ringcache::tls
