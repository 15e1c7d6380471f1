#include "common/tls_certs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/gnutls_datum.h"
#include "common/status_macros.h"
#include "common/tls.h"

namespace ringcache::tls {
namespace {

// Owns the GnuTLS objects of one issuance.
struct Objects {
  gnutls_x509_privkey_t key = nullptr;
  gnutls_x509_crt_t crt = nullptr;
  gnutls_x509_privkey_t ca_key = nullptr;
  gnutls_x509_crt_t ca_crt = nullptr;
  ~Objects() {
    if (key != nullptr) gnutls_x509_privkey_deinit(key);
    if (crt != nullptr) gnutls_x509_crt_deinit(crt);
    if (ca_key != nullptr) gnutls_x509_privkey_deinit(ca_key);
    if (ca_crt != nullptr) gnutls_x509_crt_deinit(ca_crt);
  }
};

absl::Status Check(int rc, const char* what) {
  if (rc >= 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", gnutls_strerror(rc)));
}

absl::Status SetDn(gnutls_x509_crt_t crt, const char* oid, const std::string& value) {
  if (value.empty()) return absl::OkStatus();
  return Check(gnutls_x509_crt_set_dn_by_oid(crt, oid, 0, value.data(),
                                             static_cast<unsigned>(value.size())),
               "subject");
}

// Key, serial, validity and subject common to CA and leaf certificates.
absl::Status Prepare(Objects* o, const std::string& cluster, const std::string& role,
                     const std::string& name, int days) {
  if (days <= 0) return absl::InvalidArgumentError("validity must be at least one day");
  gnutls_x509_privkey_init(&o->key);
  if (absl::Status s = Check(gnutls_x509_privkey_generate(o->key, GNUTLS_PK_ECDSA,
                                                          GNUTLS_CURVE_TO_BITS(
                                                              GNUTLS_ECC_CURVE_SECP256R1),
                                                          0),
                             "key generation");
      !s.ok()) {
    return s;
  }
  gnutls_x509_crt_init(&o->crt);
  gnutls_x509_crt_set_version(o->crt, 3);
  unsigned char serial[16];
  gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  gnutls_x509_crt_set_serial(o->crt, serial, sizeof(serial));
  const time_t now = time(nullptr);
  gnutls_x509_crt_set_activation_time(o->crt, now - 3600);  // clocks of a cluster differ a bit
  gnutls_x509_crt_set_expiration_time(o->crt, now + static_cast<time_t>(days) * 86400);
  if (absl::Status s = SetDn(o->crt, GNUTLS_OID_X520_ORGANIZATION_NAME, cluster); !s.ok()) {
    return s;
  }
  if (absl::Status s = SetDn(o->crt, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, role); !s.ok()) {
    return s;
  }
  if (absl::Status s = SetDn(o->crt, GNUTLS_OID_X520_COMMON_NAME, name); !s.ok()) return s;
  if (absl::Status s = Check(gnutls_x509_crt_set_key(o->crt, o->key), "set key"); !s.ok()) {
    return s;
  }
  unsigned char id[64];
  size_t id_len = sizeof(id);
  if (gnutls_x509_crt_get_key_id(o->crt, 0, id, &id_len) == 0) {
    gnutls_x509_crt_set_subject_key_id(o->crt, id, id_len);
  }
  return absl::OkStatus();
}

absl::StatusOr<Pem> Export(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key) {
  Pem out;
  gnutls_datum_t d{};
  if (absl::Status s = Check(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &d), "export");
      !s.ok()) {
    return s;
  }
  out.cert.assign(reinterpret_cast<char*>(d.data), d.size);
  gnutls_free(d.data);
  d = {};
  if (absl::Status s = Check(gnutls_x509_privkey_export2_pkcs8(key, GNUTLS_X509_FMT_PEM, nullptr,
                                                               GNUTLS_PKCS_PLAIN, &d),
                             "export key");
      !s.ok()) {
    return s;
  }
  out.key.assign(reinterpret_cast<char*>(d.data), d.size);
  gnutls_free(d.data);
  return out;
}

absl::Status WriteFile(const std::string& path, const std::string& content, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
  }
  ::fchmod(fd, mode);
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Pem> MakeCa(const std::string& cluster, int days) {
  if (cluster.empty()) return absl::InvalidArgumentError("the cluster name is empty");
  Objects o;
  if (absl::Status s = Prepare(&o, cluster, "ca", cluster + " CA", days); !s.ok()) return s;
  gnutls_x509_crt_set_basic_constraints(o.crt, 1, -1);
  gnutls_x509_crt_set_key_usage(o.crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN);
  if (absl::Status s = Check(gnutls_x509_crt_sign2(o.crt, o.crt, o.key, GNUTLS_DIG_SHA256, 0),
                             "self-sign");
      !s.ok()) {
    return s;
  }
  return Export(o.crt, o.key);
}

absl::StatusOr<Pem> Issue(const Pem& ca, const CertRequest& req) {
  if (req.role.empty() || req.name.empty()) {
    return absl::InvalidArgumentError("a certificate needs a role and a name");
  }
  Objects o;
  gnutls_x509_crt_init(&o.ca_crt);
  gnutls_x509_privkey_init(&o.ca_key);
  const gnutls_datum_t ca_cert = Datum(ca.cert), ca_key = Datum(ca.key);
  if (absl::Status s = Check(gnutls_x509_crt_import(o.ca_crt, &ca_cert, GNUTLS_X509_FMT_PEM),
                             "CA certificate");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Check(gnutls_x509_privkey_import(o.ca_key, &ca_key, GNUTLS_X509_FMT_PEM),
                             "CA key");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<CertName> ca_name = NameOfPem(ca.cert);
  if (!ca_name.ok()) return ca_name.status();
  if (absl::Status s = Prepare(&o, ca_name->cluster, req.role, req.name, req.days); !s.ok()) {
    return s;
  }
  gnutls_x509_crt_set_basic_constraints(o.crt, 0, -1);
  gnutls_x509_crt_set_key_usage(o.crt, GNUTLS_KEY_DIGITAL_SIGNATURE | GNUTLS_KEY_KEY_ENCIPHERMENT);
  gnutls_x509_crt_set_key_purpose_oid(o.crt, GNUTLS_KP_TLS_WWW_SERVER, 0);
  gnutls_x509_crt_set_key_purpose_oid(o.crt, GNUTLS_KP_TLS_WWW_CLIENT, 0);
  for (const std::string& ip : req.ips) {
    unsigned char raw[16];
    unsigned len = 0;
    if (inet_pton(AF_INET, ip.c_str(), raw) == 1) {
      len = 4;
    } else if (inet_pton(AF_INET6, ip.c_str(), raw) == 1) {
      len = 16;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("'", ip, "' is not an IP address"));
    }
    gnutls_x509_crt_set_subject_alt_name(o.crt, GNUTLS_SAN_IPADDRESS, raw, len,
                                         GNUTLS_FSAN_APPEND);
  }
  for (const std::string& name : req.dns) {
    gnutls_x509_crt_set_subject_alt_name(o.crt, GNUTLS_SAN_DNSNAME, name.data(),
                                         static_cast<unsigned>(name.size()), GNUTLS_FSAN_APPEND);
  }
  unsigned char id[64];
  size_t id_len = sizeof(id);
  if (gnutls_x509_crt_get_subject_key_id(o.ca_crt, id, &id_len, nullptr) == 0) {
    gnutls_x509_crt_set_authority_key_id(o.crt, id, id_len);
  }
  if (absl::Status s = Check(gnutls_x509_crt_sign2(o.crt, o.ca_crt, o.ca_key, GNUTLS_DIG_SHA256,
                                                   0),
                             "sign");
      !s.ok()) {
    return s;
  }
  return Export(o.crt, o.key);
}

absl::Status WriteCa(const std::string& dir, const std::string& cluster, int days) {
  const std::string cert = dir + "/" + kCaFile, key = dir + "/" + kCaKeyFile;
  if (std::filesystem::exists(cert) || std::filesystem::exists(key)) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " already holds a CA"));
  }
  absl::StatusOr<Pem> ca = MakeCa(cluster, days);
  if (!ca.ok()) return ca.status();
  if (absl::Status s = MakeDir(dir); !s.ok()) return s;
  if (absl::Status s = WriteFile(key, ca->key, 0600); !s.ok()) return s;
  return WriteFile(cert, ca->cert, 0644);
}

absl::Status WriteIssued(const std::string& ca_dir, const CertRequest& req,
                         const std::string& out_dir) {
  Pem ca;
  absl::StatusOr<std::string> cert = ReadSmallFile(ca_dir + "/" + kCaFile);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPrivateFile(ca_dir + "/" + kCaKeyFile);
  if (!key.ok()) return key.status();
  ca.cert = *std::move(cert);
  ca.key = *std::move(key);
  absl::StatusOr<Pem> issued = Issue(ca, req);
  if (!issued.ok()) return issued.status();
  if (absl::Status s = MakeDir(out_dir); !s.ok()) return s;
  if (absl::Status s = WriteFile(out_dir + "/" + kCaFile, ca.cert, 0644); !s.ok()) return s;
  if (absl::Status s = WriteFile(out_dir + "/" + kKeyFile, issued->key, 0600); !s.ok()) return s;
  if (absl::Status s = WriteFile(out_dir + "/" + kCertFile, issued->cert, 0644); !s.ok()) {
    return s;
  }
  if (req.role == kRoleClient) {
    if (absl::Status s = WriteFile(out_dir + "/client-key.pem", issued->key, 0600); !s.ok()) {
      return s;
    }
    return WriteFile(out_dir + "/client-cert.pem", issued->cert, 0644);
  }
  return absl::OkStatus();
}

namespace {

// Owns the GnuTLS objects of one revocation list.
struct CrlObjects {
  gnutls_x509_crl_t crl = nullptr;
  gnutls_x509_crl_t old = nullptr;
  gnutls_x509_crt_t ca_crt = nullptr;
  gnutls_x509_privkey_t ca_key = nullptr;
  std::vector<gnutls_x509_crt_t> revoked;
  ~CrlObjects() {
    if (crl != nullptr) gnutls_x509_crl_deinit(crl);
    if (old != nullptr) gnutls_x509_crl_deinit(old);
    if (ca_crt != nullptr) gnutls_x509_crt_deinit(ca_crt);
    if (ca_key != nullptr) gnutls_x509_privkey_deinit(ca_key);
    for (gnutls_x509_crt_t c : revoked) gnutls_x509_crt_deinit(c);
  }
};

}  // namespace

absl::StatusOr<std::string> Revoke(const Pem& ca, const std::string& old_crl,
                                   const std::vector<std::string>& certs, int days) {
  if (days <= 0) return absl::InvalidArgumentError("validity must be at least one day");
  CrlObjects o;
  gnutls_x509_crt_init(&o.ca_crt);
  gnutls_x509_privkey_init(&o.ca_key);
  gnutls_x509_crl_init(&o.crl);
  const gnutls_datum_t ca_cert = Datum(ca.cert), ca_key = Datum(ca.key);
  RC_RETURN_IF_ERROR(
      Check(gnutls_x509_crt_import(o.ca_crt, &ca_cert, GNUTLS_X509_FMT_PEM), "CA certificate"));
  RC_RETURN_IF_ERROR(
      Check(gnutls_x509_privkey_import(o.ca_key, &ca_key, GNUTLS_X509_FMT_PEM), "CA key"));
  const time_t now = time(nullptr);
  gnutls_x509_crl_set_version(o.crl, 2);
  gnutls_x509_crl_set_this_update(o.crl, now);
  gnutls_x509_crl_set_next_update(o.crl, now + static_cast<time_t>(days) * 86400);
  if (!old_crl.empty()) {  // the entries of the list so far stay on it
    gnutls_x509_crl_init(&o.old);
    const gnutls_datum_t d = Datum(old_crl);
    RC_RETURN_IF_ERROR(
        Check(gnutls_x509_crl_import(o.old, &d, GNUTLS_X509_FMT_PEM), "the old revocation list"));
    const int n = gnutls_x509_crl_get_crt_count(o.old);
    for (int i = 0; i < n; ++i) {
      unsigned char serial[64];
      size_t size = sizeof(serial);
      time_t when = 0;
      RC_RETURN_IF_ERROR(Check(gnutls_x509_crl_get_crt_serial(o.old, i, serial, &size, &when),
                               "the old revocation list"));
      gnutls_x509_crl_set_crt_serial(o.crl, serial, size, when);
    }
  }
  for (const std::string& pem : certs) {
    gnutls_x509_crt_t crt;
    gnutls_x509_crt_init(&crt);
    o.revoked.push_back(crt);
    const gnutls_datum_t d = Datum(pem);
    RC_RETURN_IF_ERROR(Check(gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM), "certificate"));
    unsigned int verify = 0;
    gnutls_x509_crt_verify(crt, &o.ca_crt, 1, GNUTLS_VERIFY_DISABLE_TIME_CHECKS, &verify);
    if (verify != 0) {
      return absl::InvalidArgumentError("a certificate to revoke was not issued by this CA");
    }
    RC_RETURN_IF_ERROR(Check(gnutls_x509_crl_set_crt(o.crl, crt, now), "revoke"));
  }
  unsigned char id[64];
  size_t id_len = sizeof(id);
  if (gnutls_x509_crt_get_subject_key_id(o.ca_crt, id, &id_len, nullptr) == 0) {
    gnutls_x509_crl_set_authority_key_id(o.crl, id, id_len);
  }
  RC_RETURN_IF_ERROR(
      Check(gnutls_x509_crl_sign2(o.crl, o.ca_crt, o.ca_key, GNUTLS_DIG_SHA256, 0), "sign"));
  gnutls_datum_t out{};
  RC_RETURN_IF_ERROR(Check(gnutls_x509_crl_export2(o.crl, GNUTLS_X509_FMT_PEM, &out), "export"));
  std::string text(reinterpret_cast<char*>(out.data), out.size);
  gnutls_free(out.data);
  return text;
}

absl::Status WriteRevoked(const std::string& ca_dir, const std::vector<std::string>& cert_files,
                          int days) {
  Pem ca;
  RC_ASSIGN_OR_RETURN(ca.cert, ReadSmallFile(ca_dir + "/" + kCaFile));
  RC_ASSIGN_OR_RETURN(ca.key, ReadPrivateFile(ca_dir + "/" + kCaKeyFile));
  const std::string crl_path = ca_dir + "/" + kCrlFile;
  std::string old;
  if (std::filesystem::exists(crl_path)) {
    RC_ASSIGN_OR_RETURN(old, ReadSmallFile(crl_path));
  }
  std::vector<std::string> certs;
  for (const std::string& f : cert_files) {
    RC_ASSIGN_OR_RETURN(std::string pem, ReadSmallFile(f));
    certs.push_back(std::move(pem));
  }
  RC_ASSIGN_OR_RETURN(std::string crl, Revoke(ca, old, certs, days));
  return WriteFile(crl_path, crl, 0644);
}

}  // namespace ringcache::tls
