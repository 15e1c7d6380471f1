#include "common/tls.h"

#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "common/atomic_file.h"
#include "common/tls_certs.h"
#include "gtest/gtest.h"

namespace ringcache::tls {
namespace {

// A CA of cluster "alpha" and one of cluster "beta", with certificates issued on demand.
class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = ::testing::TempDir() + "/tls_" + info->name();
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(WriteCa(dir_ + "/ca", "alpha", 2).ok());
    ASSERT_TRUE(WriteCa(dir_ + "/other-ca", "beta", 2).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::shared_ptr<const Identity> Make(const std::string& role, const std::string& name,
                                       const std::string& ca = "ca") {
    CertRequest req;
    req.role = role;
    req.name = name;
    req.ips = {"127.0.0.1"};
    const std::string out = dir_ + "/" + ca + "-" + role + "-" + name;
    EXPECT_TRUE(WriteIssued(dir_ + "/" + ca, req, out).ok());
    absl::StatusOr<std::shared_ptr<const Identity>> id = LoadIdentity(out);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : nullptr;
  }

  // Runs a handshake between `server` (accepting `roles`) and a client of `client`, which expects
  // a server of `server_role`. Returns the server's and the client's outcome.
  std::pair<absl::Status, absl::Status> Handshake(std::shared_ptr<const Identity> server,
                                                  std::vector<std::string> roles,
                                                  std::shared_ptr<const Identity> client,
                                                  const std::string& server_role) {
    ServerOptions so;
    so.roles = std::move(roles);
    auto sctx = ServerContext::Create(server, so);
    EXPECT_TRUE(sctx.ok());
    if (!sctx.ok()) return {sctx.status(), sctx.status()};
    return HandshakeWith(**sctx, client, server_role);
  }

  // The same against a server context made beforehand.
  std::pair<absl::Status, absl::Status> HandshakeWith(const ServerContext& server,
                                                      std::shared_ptr<const Identity> client,
                                                      const std::string& server_role) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    const ServerContext* sctx = &server;
    auto cctx = ClientContext::Create(client, server_role);
    EXPECT_TRUE(cctx.ok());
    auto server_side = std::async(std::launch::async, [&] {
      auto s = sctx->Accept(sv[0], absl::Seconds(5));
      absl::Status st = s.status();
      if (s.ok()) {
        char buf[5];
        st = (*s)->ReadFull(buf, 5);
        if (st.ok() && std::string(buf, 5) != "hello") st = absl::DataLossError("bad bytes");
        if (st.ok()) st = (*s)->Write("world");
        if (st.ok() && (*s)->peer().role != client->name.role) st = absl::InternalError("peer");
      } else {
        shutdown(sv[0], SHUT_RDWR);
      }
      return st;
    });
    absl::Status client_status;
    {
      auto c = (*cctx)->Connect(sv[1], absl::Seconds(5));
      client_status = c.status();
      if (c.ok()) {
        client_status = (*c)->Write("hello");
        char buf[5];
        if (client_status.ok()) client_status = (*c)->ReadFull(buf, 5);
        if (client_status.ok() && std::string(buf, 5) != "world") {
          client_status = absl::DataLossError("bad reply");
        }
      } else {
        shutdown(sv[1], SHUT_RDWR);
      }
    }
    absl::Status server_status = server_side.get();
    close(sv[0]);
    close(sv[1]);
    return {server_status, client_status};
  }

  std::string dir_;
};

TEST_F(TlsTest, CertificatesNameClusterRoleAndHolder) {
  auto id = Make(kRoleCacheNode, "cache-1");
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->name.cluster, "alpha");
  EXPECT_EQ(id->name.role, "cachenode");
  EXPECT_EQ(id->name.name, "cache-1");
  // The CA's key stays private to its owner.
  EXPECT_EQ(std::filesystem::status(dir_ + "/ca/ca-key.pem").permissions() &
                std::filesystem::perms::others_read,
            std::filesystem::perms::none);
  EXPECT_TRUE(absl::IsAlreadyExists(WriteCa(dir_ + "/ca", "alpha", 2)));
}

TEST_F(TlsTest, ClientCertificatesAlsoGetTheNamesQemuLooksFor) {
  CertRequest req{kRoleClient, "hv-1", {}, {}, 2};
  ASSERT_TRUE(WriteIssued(dir_ + "/ca", req, dir_ + "/client").ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/client/client-cert.pem"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/client/client-key.pem"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/client/ca-cert.pem"));
}

TEST_F(TlsTest, LoadIdentityRefusesACertificateOfAnotherCa) {
  auto stranger = Make(kRoleCacheNode, "x", "other-ca");
  ASSERT_NE(stranger, nullptr);
  // Pair the stranger's certificate with the cluster's CA.
  const std::string mixed = dir_ + "/mixed";
  std::filesystem::create_directories(mixed);
  std::filesystem::copy_file(dir_ + "/ca/ca-cert.pem", mixed + "/ca-cert.pem");
  std::filesystem::copy_file(stranger->dir + "/cert.pem", mixed + "/cert.pem");
  std::filesystem::copy_file(stranger->dir + "/key.pem", mixed + "/key.pem");
  absl::StatusOr<std::shared_ptr<const Identity>> id = LoadIdentity(mixed);
  EXPECT_TRUE(absl::IsInvalidArgument(id.status())) << id.status();
  EXPECT_TRUE(absl::IsInvalidArgument(LoadIdentity(dir_ + "/missing").status()));
}

TEST_F(TlsTest, PrivateKeysOthersCanReadAreRefused) {
  auto id = Make(kRoleGateway, "g1");
  ASSERT_NE(id, nullptr);
  const std::string key = id->dir + "/key.pem";
  namespace fs = std::filesystem;
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  absl::StatusOr<std::shared_ptr<const Identity>> got = LoadIdentity(id->dir);
  EXPECT_TRUE(absl::IsPermissionDenied(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("chmod 600 " + key), std::string::npos) << got.status();
  fs::permissions(key, fs::perms::owner_read);  // 0400 is private too
  EXPECT_TRUE(LoadIdentity(id->dir).ok());
  if (::geteuid() == 0) {  // a key owned by another user
    ASSERT_EQ(::chown(key.c_str(), 65534, 65534), 0);
    got = LoadIdentity(id->dir);
    EXPECT_TRUE(absl::IsPermissionDenied(got.status())) << got.status();
    EXPECT_NE(got.status().message().find("owned by uid 65534"), std::string::npos) << got.status();
    ASSERT_EQ(::chown(key.c_str(), 0, 0), 0);
  }
  // Not a file at all; and the CA's key when a certificate is issued.
  EXPECT_TRUE(absl::IsPermissionDenied(ReadPrivateFile(id->dir).status()));
  fs::permissions(dir_ + "/ca/ca-key.pem", fs::perms::others_read, fs::perm_options::add);
  CertRequest req{kRoleClient, "hv-1", {}, {}, 2};
  EXPECT_TRUE(absl::IsPermissionDenied(WriteIssued(dir_ + "/ca", req, dir_ + "/client")));
}

TEST_F(TlsTest, MutualTlsBetweenAllowedRoles) {
  auto [server, client] = Handshake(Make(kRoleCacheNode, "c1"), {kRoleGateway},
                                    Make(kRoleGateway, "g1"), kRoleCacheNode);
  EXPECT_TRUE(server.ok()) << server;
  EXPECT_TRUE(client.ok()) << client;
}

TEST_F(TlsTest, ServerRefusesAClientOfTheWrongRole) {
  auto [server, client] = Handshake(Make(kRoleCacheNode, "c1"), {kRoleGateway},
                                    Make(kRoleDataNode, "d1"), kRoleCacheNode);
  EXPECT_TRUE(absl::IsPermissionDenied(server)) << server;
  EXPECT_FALSE(client.ok());
}

TEST_F(TlsTest, ClientRefusesAServerOfTheWrongRole) {
  auto [server, client] = Handshake(Make(kRoleDataNode, "d1"), {kRoleGateway},
                                    Make(kRoleGateway, "g1"), kRoleCacheNode);
  EXPECT_TRUE(absl::IsPermissionDenied(client)) << client;
  EXPECT_FALSE(server.ok());
}

TEST_F(TlsTest, CertificatesOfAnotherCaAreRefusedBothWays) {
  auto [server, client] = Handshake(Make(kRoleCacheNode, "c1"), {kRoleGateway},
                                    Make(kRoleGateway, "g1", "other-ca"), kRoleCacheNode);
  EXPECT_FALSE(server.ok());
  EXPECT_FALSE(client.ok());
}

// SIGHUP's reload: a revocation list (or a renewed certificate) put into the process identity's
// directory serves the next handshake of a context made before; a session already open stays.
TEST_F(TlsTest, ReloadBringsTheRevocationListToTheNextHandshake) {
  std::shared_ptr<const Identity> node = Make(kRoleCacheNode, "c1");
  std::shared_ptr<const Identity> g1 = Make(kRoleGateway, "g1"), g2 = Make(kRoleGateway, "g2");
  SetProcessIdentity(node);
  ServerOptions so;
  so.roles = {kRoleGateway};
  auto sctx = ServerContext::Create(ProcessIdentity(), so);
  ASSERT_TRUE(sctx.ok()) << sctx.status();
  EXPECT_TRUE(HandshakeWith(**sctx, g1, kRoleCacheNode).first.ok());
  // A session of g1 open across the reload.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto open_server = std::async(std::launch::async,
                                [&] { return (*sctx)->Accept(sv[0], absl::Seconds(5)); });
  auto open_client = (*ClientContext::Create(g1, kRoleCacheNode))->Connect(sv[1], absl::Seconds(5));
  auto open_server_session = open_server.get();
  ASSERT_TRUE(open_client.ok() && open_server_session.ok());

  ASSERT_TRUE(WriteRevoked(dir_ + "/ca", {g1->dir + "/" + kCertFile}, 1).ok());
  std::filesystem::copy_file(dir_ + "/ca/" + kCrlFile, node->dir + "/" + kCrlFile);
  absl::StatusOr<std::string> reloaded = ReloadProcessIdentity();
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_NE(reloaded->find("revocation list"), std::string::npos) << *reloaded;
  EXPECT_TRUE(absl::IsPermissionDenied(CheckNotRevoked(*ProcessIdentity(), g1->cert_pem)));
  EXPECT_TRUE(CheckNotRevoked(*ProcessIdentity(), g2->cert_pem).ok());

  auto [revoked, revoked_client] = HandshakeWith(**sctx, g1, kRoleCacheNode);
  EXPECT_FALSE(revoked.ok()) << "a revoked certificate was let in";
  EXPECT_NE(std::string(revoked.message()).find("revoked"), std::string::npos) << revoked;
  EXPECT_TRUE(HandshakeWith(**sctx, g2, kRoleCacheNode).first.ok());
  // The session opened before the reload still carries bytes both ways.
  ASSERT_TRUE((*open_client)->Write("ping!").ok());
  char buf[5];
  ASSERT_TRUE((*open_server_session)->ReadFull(buf, 5).ok());
  EXPECT_EQ(std::string(buf, 5), "ping!");
  open_client->reset();
  open_server_session->reset();
  close(sv[0]);
  close(sv[1]);

  // A certificate of another role in the directory is not taken: the old identity stays.
  std::shared_ptr<const Identity> before = ProcessIdentity();
  std::shared_ptr<const Identity> data = Make(kRoleDataNode, "d1");
  std::filesystem::copy_file(data->dir + "/" + kCertFile, node->dir + "/" + kCertFile,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(data->dir + "/" + kKeyFile, node->dir + "/" + kKeyFile,
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_FALSE(ReloadProcessIdentity().ok());
  EXPECT_EQ(ProcessIdentity(), before);
  SetProcessIdentity(nullptr);
}

TEST_F(TlsTest, RevocationListsAccumulateAndMustComeFromTheCa) {
  std::shared_ptr<const Identity> a = Make(kRoleClient, "a"), b = Make(kRoleClient, "b");
  ASSERT_TRUE(WriteRevoked(dir_ + "/ca", {a->dir + "/" + kCertFile}, 1).ok());
  ASSERT_TRUE(WriteRevoked(dir_ + "/ca", {b->dir + "/" + kCertFile}, 1).ok());
  auto id = std::make_shared<Identity>(*a);
  id->crl_pem = *ReadSmallFile(dir_ + "/ca/" + kCrlFile);
  EXPECT_TRUE(absl::IsPermissionDenied(CheckNotRevoked(*id, a->cert_pem)));
  EXPECT_TRUE(absl::IsPermissionDenied(CheckNotRevoked(*id, b->cert_pem)));
  EXPECT_TRUE(CheckNotRevoked(*id, Make(kRoleClient, "c")->cert_pem).ok());
  // Another CA cannot revoke ours, and a list it signed is not loaded.
  EXPECT_FALSE(WriteRevoked(dir_ + "/other-ca", {a->dir + "/" + kCertFile}, 1).ok());
  ASSERT_TRUE(
      WriteRevoked(dir_ + "/other-ca", {Make(kRoleClient, "x", "other-ca")->dir + "/cert.pem"}, 1)
          .ok());
  std::filesystem::copy_file(dir_ + "/other-ca/" + kCrlFile, a->dir + "/" + kCrlFile);
  absl::StatusOr<std::shared_ptr<const Identity>> loaded = LoadIdentity(a->dir);
  EXPECT_TRUE(absl::IsInvalidArgument(loaded.status())) << loaded.status();
}

// WriteV corks small buffers into one record and sends the rest of a large one uncorked: every
// byte must arrive once and in order, whatever the mix of sizes.
TEST_F(TlsTest, WriteVDeliversSmallAndLargeBuffersInOrder) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ServerOptions so;
  so.roles = {kRoleGateway};
  auto sctx = ServerContext::Create(Make(kRoleCacheNode, "c1"), so);
  auto cctx = ClientContext::Create(Make(kRoleGateway, "g1"), kRoleCacheNode);
  ASSERT_TRUE(sctx.ok() && cctx.ok());
  // Header-like, bulk, tiny, exactly one record, record minus one, empty, bulk again.
  const std::vector<size_t> sizes = {16, (1u << 20) + 3, 1, 16384, 16383, 0, 70000, 4};
  std::vector<std::string> bufs;
  std::string all;
  uint32_t x = 12345;
  for (size_t n : sizes) {
    std::string b(n, '\0');
    for (char& c : b) c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
    all += b;
    bufs.push_back(std::move(b));
  }
  auto reader = std::async(std::launch::async, [&] {
    auto s = (*sctx)->Accept(sv[0], absl::Seconds(10));
    std::string got(all.size() * 2, '\0');
    if (!s.ok()) return std::string("accept: ") + std::string(s.status().message());
    for (int round = 0; round < 2; ++round) {
      absl::Status st = (*s)->ReadFull(got.data() + round * all.size(), all.size());
      if (!st.ok()) return std::string(st.message());
    }
    return got == all + all ? std::string("ok") : std::string("bytes differ");
  });
  auto c = (*cctx)->Connect(sv[1], absl::Seconds(10));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<iovec> iov;
  for (std::string& b : bufs) iov.push_back({b.data(), b.size()});
  ASSERT_TRUE((*c)->WriteV(iov.data(), static_cast<int>(iov.size())).ok());
  // The same bytes again from one buffer per call: corking starts over each time.
  for (std::string& b : bufs) ASSERT_TRUE((*c)->Write(b).ok());
  EXPECT_EQ(reader.get(), "ok");
  close(sv[0]);
  close(sv[1]);
}

TEST(CheckPeerTest, ClusterAndRoleMustMatch) {
  CertName n{"alpha", "gateway", "g"};
  EXPECT_TRUE(CheckPeer(n, "alpha", {"gateway"}).ok());
  EXPECT_TRUE(CheckPeer(n, "alpha", {}).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(CheckPeer(n, "beta", {"gateway"})));
  EXPECT_TRUE(absl::IsPermissionDenied(CheckPeer(n, "alpha", {"admin"})));
}

}  // namespace
}  // namespace ringcache::tls
