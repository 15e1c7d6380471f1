// Who may call which data node method with TLS (docs/security.md, "Who may call what"): the port
// admits cache node and gateway certificates, and its control methods are the gateways' alone.
// A real gRPC server with mutual TLS in the process; the process identity is switched between
// making the server's and each client's credentials (each keeps the one it was made with).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/formats.h"
#include "common/grpc_tls.h"
#include "common/tls.h"
#include "common/tls_certs.h"
#include "datanode/hdd_emulator.h"
#include "datanode/service.h"

#include "common/formats.h"
#include "datanode/store.h"
#include "ringcache/v1/datanode.grpc.pb.h"

namespace ringcache::datanode {
namespace {

class ServiceRolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test: ctest runs the tests of this fixture side by side.
    dir_ = ::testing::TempDir() + "/service_roles_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(tls::WriteCa(dir_ + "/ca", "alpha", 2).ok());
    auto store = BlockStore::Open({dir_ + "/store", 8 << 20});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    hdd_ = std::make_unique<HddEmulator>(HddConfig{}, Clock::Real());
    service_ = std::make_unique<DataNodeService>(1, store_.get(), hdd_.get(), &registry_);
    tls::SetProcessIdentity(Identity(tls::kRoleDataNode, "datanode-1"));
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0",
                       tls::ServerCredentialsFor({tls::kRoleCacheNode, tls::kRoleGateway}),
                       &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr && port_ != 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    tls::SetProcessIdentity(nullptr);
    std::filesystem::remove_all(dir_);
  }
  std::shared_ptr<const tls::Identity> Identity(const std::string& role, const std::string& name) {
    tls::CertRequest req;
    req.role = role;
    req.name = name;
    req.ips = {"127.0.0.1"};
    const std::string out = dir_ + "/" + name;
    EXPECT_TRUE(tls::WriteIssued(dir_ + "/ca", req, out).ok());
    auto id = tls::LoadIdentity(out);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : nullptr;
  }
  // A stub that presents a certificate of `role`.
  std::unique_ptr<v1::DataNode::Stub> StubAs(const std::string& role, const std::string& name) {
    tls::SetProcessIdentity(Identity(role, name));
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                       tls::ChannelCredentialsFor(tls::kRoleDataNode));
    return v1::DataNode::NewStub(channel);
  }

  std::string dir_;
  metrics::Registry registry_;
  std::unique_ptr<BlockStore> store_;
  std::unique_ptr<HddEmulator> hdd_;
  std::unique_ptr<DataNodeService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// The node-api handshake (common/formats.h): Health says the node's version, and a caller that
// says one the node does not speak is refused, naming both.
TEST_F(ServiceRolesTest, HealthSaysTheApiVersionAndRefusesOneItDoesNotSpeak) {
  auto gateway = StubAs(tls::kRoleGateway, "gateway-1");
  auto health = [&](uint32_t version, v1::HealthResponse* resp) {
    grpc::ClientContext ctx;
    v1::HealthRequest req;
    req.set_api_version(version);
    return gateway->Health(&ctx, req, resp);
  };
  v1::HealthResponse resp;
  ASSERT_TRUE(health(kNodeApiFormat.writes, &resp).ok());
  EXPECT_EQ(resp.api_version(), kNodeApiFormat.writes);
  EXPECT_TRUE(health(0, &resp).ok()) << "a release that does not say speaks version 1";
  grpc::Status newer = health(kNodeApiFormat.writes + 1, &resp);
  EXPECT_EQ(newer.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(newer.error_message().find("node-api version"), std::string::npos)
      << newer.error_message();
}

TEST_F(ServiceRolesTest, ControlMethodsAreTheGatewaysAlone) {
  auto cache = StubAs(tls::kRoleCacheNode, "cachenode-3");
  auto gateway = StubAs(tls::kRoleGateway, "gateway-1");
  auto call_seal = [](v1::DataNode::Stub* stub) {
    grpc::ClientContext ctx;
    v1::SealLogRequest req;
    req.set_cache_node_id(2);
    req.set_below_epoch(5);
    v1::SealLogResponse resp;
    return stub->SealLog(&ctx, req, &resp);
  };
  auto call_clear = [](v1::DataNode::Stub* stub) {
    grpc::ClientContext ctx;
    v1::ClearStoreRequest req;
    v1::ClearStoreResponse resp;
    return stub->ClearStore(&ctx, req, &resp);
  };
  auto call_stats = [](v1::DataNode::Stub* stub) {
    grpc::ClientContext ctx;
    v1::StatsRequest req;
    v1::StatsResponse resp;
    return stub->Stats(&ctx, req, &resp);
  };
  // A cache node reads, writes and asks for stats, but seals and clears nothing.
  EXPECT_TRUE(call_stats(cache.get()).ok());
  grpc::Status seal = call_seal(cache.get());
  EXPECT_EQ(seal.error_code(), grpc::StatusCode::PERMISSION_DENIED) << seal.error_message();
  EXPECT_NE(seal.error_message().find("SealLog is for gateway"), std::string::npos)
      << seal.error_message();
  EXPECT_EQ(call_clear(cache.get()).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // It reclaims its own records, but carries no coordinator term: a raised term would make
  // every real coordinator's control steps stale.
  auto call_reclaim = [](v1::DataNode::Stub* stub, uint64_t term) {
    grpc::ClientContext ctx;
    v1::LogReclaimRequest req;
    req.set_cache_node_id(3);
    req.add_sequences(7);
    req.mutable_fence()->set_term(term);
    v1::LogReclaimResponse resp;
    return stub->LogReclaim(&ctx, req, &resp);
  };
  EXPECT_TRUE(call_reclaim(cache.get(), 0).ok());
  EXPECT_EQ(call_reclaim(cache.get(), ~0ull).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(call_reclaim(gateway.get(), 4).ok());
  // A gateway may.
  EXPECT_TRUE(call_stats(gateway.get()).ok());
  grpc::Status by_gateway = call_seal(gateway.get());
  EXPECT_TRUE(by_gateway.ok()) << by_gateway.error_message();
}

}  // namespace
}  // namespace ringcache::datanode
