// Test-only: a throwaway CA (common/tls_certs.h) and identities it issues, for tests of TLS
// ports. Header-only; include from tests that link rc_tls.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/tls.h"
#include "common/tls_certs.h"

namespace ringcache::tls::testing {

class TestCa {
 public:
  // Writes a CA of cluster "alpha" under `dir`/ca.
  explicit TestCa(std::string dir) : dir_(std::move(dir)) {
    EXPECT_TRUE(WriteCa(dir_ + "/ca", "alpha", 2).ok());
  }
  // A certificate of `role` named `name` for 127.0.0.1, issued and loaded; null (and a test
  // failure) when that fails.
  std::shared_ptr<const Identity> Issue(const std::string& role, const std::string& name) const {
    CertRequest req;
    req.role = role;
    req.name = name;
    req.ips = {"127.0.0.1"};
    EXPECT_TRUE(WriteIssued(dir_ + "/ca", req, dir_ + "/" + name).ok());
    auto id = LoadIdentity(dir_ + "/" + name);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : nullptr;
  }

 private:
  std::string dir_;
};

}  // namespace ringcache::tls::testing
