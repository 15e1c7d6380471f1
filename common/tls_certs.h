// Making a cluster's throwaway or test PKI with GnuTLS: a CA, and certificates it signs that name
// their holder's cluster, role and name (common/tls.h). `ringcachectl tls` and the tests use it;
// production clusters may use any CA whose certificates carry the same subject fields.
//
// Keys are ECDSA P-256; certificates can serve as TLS server and client (both key purposes).
//
// Thread-safety: thread-safe (no shared state).
#ifndef RINGCACHE_COMMON_TLS_CERTS_H_
#define RINGCACHE_COMMON_TLS_CERTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringcache::tls {

inline constexpr char kCaKeyFile[] = "ca-key.pem";

struct Pem {
  std::string cert;
  std::string key;
};

// A self-signed CA for `cluster` valid for `days`.
absl::StatusOr<Pem> MakeCa(const std::string& cluster, int days);

struct CertRequest {
  std::string role;              // OU
  std::string name;              // CN
  std::vector<std::string> ips;  // subjectAltName IP addresses
  std::vector<std::string> dns;  // subjectAltName DNS names
  int days = 365;
};

// A certificate signed by `ca`, of `ca`'s cluster.
absl::StatusOr<Pem> Issue(const Pem& ca, const CertRequest& req);

// Writes ca-cert.pem and ca-key.pem (mode 0600) of a new CA into `dir` (created if missing).
// kAlreadyExists when a CA is there already.
absl::Status WriteCa(const std::string& dir, const std::string& cluster, int days);
// Reads the CA of `ca_dir`, issues `req` and writes `out_dir`/{ca-cert,cert,key}.pem. For the
// client role it also writes client-cert.pem and client-key.pem, the names QEMU's
// tls-creds-x509 and libnbd look for, so the directory serves them as it is.
absl::Status WriteIssued(const std::string& ca_dir, const CertRequest& req,
                         const std::string& out_dir);

// A revocation list of the CA `ca`, valid for `days`: the entries of `old_crl` (a PEM CRL of the
// same CA, or "") and the certificates `certs` (PEM, each issued by `ca`).
absl::StatusOr<std::string> Revoke(const Pem& ca, const std::string& old_crl,
                                   const std::vector<std::string>& certs, int days);
// Adds the certificates of `cert_files` to `ca_dir`/crl.pem (made if missing), signed by the CA
// of `ca_dir`. Copy it into each daemon's --tls-dir and send them SIGHUP (docs/security.md).
absl::Status WriteRevoked(const std::string& ca_dir, const std::vector<std::string>& cert_files,
                          int days);

}  // namespace ringcache::tls

#endif  // RINGCACHE_COMMON_TLS_CERTS_H_
