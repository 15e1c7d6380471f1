// Identity loading and the process identity (common/tls.h): LoadIdentity and LoadIdentityFiles
// (key, certificate, CA, optional revocation list, all checked), SetProcessIdentity,
// ProcessIdentity, ReloadProcessIdentity (SIGHUP) and CheckNotRevoked. Sessions and contexts
// are in tls.cc.
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/gnutls_datum.h"
#include "common/status_macros.h"
#include "common/tls.h"

namespace ringcache::tls {
namespace {

// Checks that `crl_pem` parses and is signed by the CA of `ca_pem`.
absl::Status CheckCrl(const std::string& crl_pem, const std::string& ca_pem) {
  gnutls_x509_crl_t crl;
  gnutls_x509_crt_t ca;
  gnutls_x509_crl_init(&crl);
  gnutls_x509_crt_init(&ca);
  const gnutls_datum_t c = Datum(crl_pem), a = Datum(ca_pem);
  unsigned int verify = 0;
  int rc = gnutls_x509_crl_import(crl, &c, GNUTLS_X509_FMT_PEM);
  if (rc == 0) rc = gnutls_x509_crt_import(ca, &a, GNUTLS_X509_FMT_PEM);
  if (rc == 0) rc = gnutls_x509_crl_verify(crl, &ca, 1, 0, &verify);
  gnutls_x509_crl_deinit(crl);
  gnutls_x509_crt_deinit(ca);
  if (rc < 0) return absl::InvalidArgumentError(gnutls_strerror(rc));
  if (verify != 0) return absl::InvalidArgumentError("not signed by the CA of ca-cert.pem");
  return absl::OkStatus();
}

struct ProcessState {
  absl::Mutex mu;
  std::shared_ptr<const Identity> identity ABSL_GUARDED_BY(mu);
};

ProcessState& State() {
  static ProcessState* state = new ProcessState();  // never destroyed: used until exit
  return *state;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const Identity>> LoadIdentityFiles(const std::string& ca_file,
                                                                  const std::string& cert_file,
                                                                  const std::string& key_file) {
  auto id = std::make_shared<Identity>();
  for (auto [path, out] :
       {std::pair{&ca_file, &id->ca_pem}, {&cert_file, &id->cert_pem}, {&key_file, &id->key_pem}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> text =
        out == &id->key_pem ? ReadPrivateFile(*path) : ReadSmallFile(*path);
    if (absl::IsPermissionDenied(text.status())) {  // a key others can read: says the fix
      return absl::PermissionDeniedError(
          absl::StrCat("TLS credentials: ", text.status().message()));
    }
    if (!text.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS credentials: cannot read ", *path, ": ", text.status().message()));
    }
    *out = *std::move(text);
  }
  absl::StatusOr<CertName> name = NameOfPem(id->cert_pem);
  if (!name.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS credentials: ", cert_file, ": ", name.status().message()));
  }
  id->name = *std::move(name);
  // The key must match the certificate, and the certificate chain to the CA and be valid now.
  gnutls_certificate_credentials_t cred;
  gnutls_certificate_allocate_credentials(&cred);
  const gnutls_datum_t c = Datum(id->cert_pem), k = Datum(id->key_pem), a = Datum(id->ca_pem);
  int rc = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
  gnutls_certificate_free_credentials(cred);
  if (rc < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS credentials: ", key_file, " does not go with ", cert_file, ": ", gnutls_strerror(rc)));
  }
  if (ca_file.empty()) return std::shared_ptr<const Identity>(std::move(id));
  gnutls_x509_crt_t crt, ca_crt;
  gnutls_x509_crt_init(&crt);
  gnutls_x509_crt_init(&ca_crt);
  unsigned int verify = 0;
  rc = gnutls_x509_crt_import(crt, &c, GNUTLS_X509_FMT_PEM);
  if (rc == 0) rc = gnutls_x509_crt_import(ca_crt, &a, GNUTLS_X509_FMT_PEM);
  if (rc == 0) rc = gnutls_x509_crt_verify(crt, &ca_crt, 1, 0, &verify);
  gnutls_x509_crt_deinit(crt);
  gnutls_x509_crt_deinit(ca_crt);
  if (rc < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS credentials: ", ca_file, ": ", gnutls_strerror(rc)));
  }
  if (verify != 0) {
    gnutls_datum_t why{};
    gnutls_certificate_verification_status_print(verify, GNUTLS_CRT_X509, &why, 0);
    std::string text(reinterpret_cast<char*>(why.data), why.size);
    gnutls_free(why.data);
    return absl::InvalidArgumentError(
        absl::StrCat("TLS credentials: ", cert_file, " is not accepted by ", ca_file, ": ", text));
  }
  return std::shared_ptr<const Identity>(std::move(id));
}

absl::StatusOr<std::shared_ptr<const Identity>> LoadIdentity(const std::string& dir) {
  absl::StatusOr<std::shared_ptr<const Identity>> id =
      LoadIdentityFiles(dir + "/" + kCaFile, dir + "/" + kCertFile, dir + "/" + kKeyFile);
  if (!id.ok()) return id.status();
  if ((*id)->name.cluster.empty() || (*id)->name.role.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS credentials: ", dir, "/", kCertFile,
                     " names no cluster (O) or role (OU); make it with `ringcachectl tls issue`"));
  }
  auto out = std::make_shared<Identity>(**id);
  out->dir = dir;
  const std::string crl_file = absl::StrCat(dir, "/", kCrlFile);
  if (access(crl_file.c_str(), F_OK) == 0) {
    absl::StatusOr<std::string> crl = ReadSmallFile(crl_file);
    if (!crl.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS credentials: cannot read ", crl_file, ": ", crl.status().message()));
    }
    if (absl::Status c = CheckCrl(*crl, out->ca_pem); !c.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS credentials: ", crl_file, ": ", c.message()));
    }
    out->crl_pem = *std::move(crl);
  }
  return std::shared_ptr<const Identity>(std::move(out));
}

void SetProcessIdentity(std::shared_ptr<const Identity> identity) {
  absl::MutexLock l(&State().mu);
  State().identity = std::move(identity);
}

std::shared_ptr<const Identity> ProcessIdentity() {
  absl::MutexLock l(&State().mu);
  return State().identity;
}

absl::StatusOr<std::string> ReloadProcessIdentity() {
  const std::shared_ptr<const Identity> old = ProcessIdentity();
  if (old == nullptr) return std::string();
  RC_ASSIGN_OR_RETURN(std::shared_ptr<const Identity> fresh, LoadIdentity(old->dir));
  if (fresh->name.cluster != old->name.cluster || fresh->name.role != old->name.role) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS credentials in ", old->dir, " now name ", fresh->name.ToString(), ", not a ",
        old->name.role, " of cluster '", old->name.cluster, "': kept the old ones"));
  }
  SetProcessIdentity(fresh);
  return absl::StrCat("TLS credentials reloaded from ", old->dir, ": ", fresh->name.ToString(),
                      fresh->cert_pem == old->cert_pem ? " (same certificate)" : " (new certificate)",
                      fresh->crl_pem.empty() ? ", no revocation list"
                                             : ", with the revocation list of crl.pem");
}

absl::Status CheckNotRevoked(const Identity& id, absl::string_view peer_pem) {
  if (id.crl_pem.empty()) return absl::OkStatus();
  gnutls_x509_crt_t crt;
  gnutls_x509_crl_t crl;
  gnutls_x509_crt_init(&crt);
  gnutls_x509_crl_init(&crl);
  const gnutls_datum_t c = Datum(peer_pem), l = Datum(id.crl_pem);
  int rc = gnutls_x509_crt_import(crt, &c, GNUTLS_X509_FMT_PEM);
  if (rc == 0) rc = gnutls_x509_crl_import(crl, &l, GNUTLS_X509_FMT_PEM);
  // 1: revoked, 0: not, < 0: an error (a certificate we cannot read is not let in either).
  if (rc == 0) rc = gnutls_x509_crt_check_revocation(crt, &crl, 1);
  gnutls_x509_crt_deinit(crt);
  gnutls_x509_crl_deinit(crl);
  if (rc == 0) return absl::OkStatus();
  return absl::PermissionDeniedError(rc == 1 ? "the certificate is revoked (crl.pem)"
                                             : absl::StrCat("revocation check: ", gnutls_strerror(rc)));
}

}  // namespace ringcache::tls
