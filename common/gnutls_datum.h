// Datum: a GnuTLS datum viewing `s` (no copy; valid while `s` is). Shared by the GnuTLS code
// of common/ (tls.cc, tls_identity.cc, tls_certs.cc).
#ifndef RINGCACHE_COMMON_GNUTLS_DATUM_H_
#define RINGCACHE_COMMON_GNUTLS_DATUM_H_

#include <gnutls/gnutls.h>

#include "absl/strings/string_view.h"

namespace ringcache::tls {

inline gnutls_datum_t Datum(absl::string_view s) {
  return gnutls_datum_t{reinterpret_cast<unsigned char*>(const_cast<char*>(s.data())),
                        static_cast<unsigned int>(s.size())};
}

}  // namespace ringcache::tls

#endif  // RINGCACHE_COMMON_GNUTLS_DATUM_H_
