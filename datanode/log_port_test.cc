// The data node's log port (datanode/log_port.h) and a cache node's end of it
// (datanode/client/log_link.h): appends land in the store as over gRPC, refusals keep their
// kind, a malformed request closes the connection, and the link parks on a transport failure,
// retries a kept connection the node closed, and follows the node to a new port.
#include "datanode/log_port.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/block_wire.h"
#include "common/checksum.h"
#include "common/errors.h"
#include "common/socket.h"
#include "common/tls.h"
#include "common/testing/test_ca.h"
#include "datanode/client/log_link.h"
#include "datanode/hdd_emulator.h"
#include "datanode/service.h"
#include "datanode/store.h"

namespace ringcache::datanode {
namespace {

constexpr uint32_t kWriter = 7;

class LogPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A directory per test: ctest runs each test case as a process of its own, side by side.
    dir_ = ::testing::TempDir() + "/log_port_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    auto store = BlockStore::Open({dir_ + "/store", 8 << 20});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    v1::VdiGeometry g;
    g.set_vdi_id(1);
    g.set_size_bytes(64 << 20);
    g.set_object_size(4 << 20);
    g.set_block_size(4096);
    g.set_replication(2);
    ASSERT_TRUE(store_->PutVdi(g, true).ok());
    hdd_ = std::make_unique<HddEmulator>(HddConfig{}, Clock::Real());
    service_ = std::make_unique<DataNodeService>(1, store_.get(), hdd_.get(), &registry_);
    StartPort(0);
  }
  void TearDown() override {
    port_.reset();
    tls::SetProcessIdentity(nullptr);
    std::filesystem::remove_all(dir_);
  }
  void StartPort(int port, std::shared_ptr<const tls::ServerContext> tls = nullptr) {
    LogPortOptions o;
    o.port = port;
    o.tls = std::move(tls);
    auto p = LogPort::Start(o, service_.get(), &registry_);
    ASSERT_TRUE(p.ok()) << p.status();
    port_ = *std::move(p);
  }
  // The node's log port stopped and started again on the same port number: a kept connection
  // to it is closed.
  void RestartOnTheSamePort() {
    const int port = port_->port();
    port_.reset();
    StartPort(port);
  }
  static v1::LogAppendRequest Records(uint64_t first, int n, uint64_t epoch = 1) {
    v1::LogAppendRequest req;
    for (int i = 0; i < n; ++i) {
      v1::LogRecord& r = *req.add_records();
      r.set_cache_node_id(kWriter);
      r.set_sequence(first + i);
      r.set_vdi_id(1);
      r.set_object_index(0);
      r.set_block_index(static_cast<uint32_t>(i));
      r.set_data(std::string(4096, static_cast<char>('a' + (first + i) % 26)));
      r.set_checksum(BlockChecksum(r.data()));
      r.set_epoch(epoch);
    }
    return req;
  }
  size_t Held() {
    uint64_t next = 0;
    bool done = false;
    auto recs = store_->LogScan(kWriter, 0, 1000, true, &next, &done);
    EXPECT_TRUE(recs.ok()) << recs.status();
    return recs.ok() ? recs->size() : 0;
  }
  double Counter(const char* name) { return registry_.GetCounter(name, "")->Value(); }

  std::string dir_;
  metrics::Registry registry_;
  std::unique_ptr<BlockStore> store_;
  std::unique_ptr<HddEmulator> hdd_;
  std::unique_ptr<DataNodeService> service_;
  std::unique_ptr<LogPort> port_;
};

TEST_F(LogPortTest, AppendsLandInTheStoreAndAnswerTheLogSize) {
  LogLink link(1, "127.0.0.1", 5000);
  EXPECT_FALSE(link.usable()) << "no port announced yet";
  link.SetPort(port_->port());
  ASSERT_TRUE(link.usable());
  v1::LogAppendResponse resp;
  ASSERT_TRUE(link.Call(Records(1, 3), &resp).ok());
  EXPECT_GT(resp.log_bytes(), 3u * 4096);
  ASSERT_TRUE(link.Call(Records(4, 2), &resp).ok());  // the same connection again
  EXPECT_EQ(Held(), 5u);
  EXPECT_EQ(Counter("ringcache_datanode_log_port_requests_total"), 2);
  // The RPC's metrics count the port's appends too: one view of the node's appends.
  EXPECT_EQ(registry_
                .GetCounter("ringcache_datanode_requests_total", "",
                            {{"op", "log_append"}, {"result", "ok"}})
                ->Value(),
            2);
}

// A sealed log refuses the writer's older records with the same typed error as the RPC; the
// refusal is the node's answer, so the link stays in use.
TEST_F(LogPortTest, ASealedLogIsRefusedTypedAndTheLinkStaysUsable) {
  ASSERT_TRUE(store_->SealLog(kWriter, 5).ok());
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port());
  v1::LogAppendResponse resp;
  const absl::Status s = link.Call(Records(1, 1, /*epoch=*/4), &resp);
  EXPECT_TRUE(IsKind(s, ErrorKind::kLogSealed)) << s;
  EXPECT_TRUE(link.usable());
  EXPECT_TRUE(link.Call(Records(2, 1, /*epoch=*/5), &resp).ok());
  EXPECT_EQ(Held(), 1u);
}

// Another op (a client that took the wrong port) closes the connection and is counted.
TEST_F(LogPortTest, AnotherOpClosesTheConnection) {
  absl::StatusOr<int> fd = DialTcp("127.0.0.1", port_->port(), absl::Seconds(2));
  ASSERT_TRUE(fd.ok()) << fd.status();
  wire::Request r;
  r.op = wire::Op::kRead;
  r.length = 4096;
  char head[wire::kRequestBytes];
  wire::EncodeRequest(r, head);
  ASSERT_EQ(send(*fd, head, sizeof(head), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(head)));
  SetReceiveTimeout(*fd, absl::Seconds(10));
  char byte;
  EXPECT_EQ(read(*fd, &byte, 1), 0) << "the connection should be closed without an answer";
  close(*fd);
  EXPECT_EQ(Counter("ringcache_datanode_log_port_protocol_errors_total"), 1);
  EXPECT_EQ(Held(), 0u);
}

// A port that fails parks the link (the pool appends over gRPC meanwhile); the node announcing
// a port again, here a new one after a restart, makes it usable there.
TEST_F(LogPortTest, TheLinkParksOnAFailureAndFollowsTheNodeToANewPort) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port());
  v1::LogAppendResponse resp;
  ASSERT_TRUE(link.Call(Records(1, 1), &resp).ok());
  const int old_port = port_->port();
  port_.reset();
  const absl::Status s = link.Call(Records(2, 1), &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(link.usable());
  StartPort(0);
  ASSERT_NE(port_->port(), old_port);
  link.SetPort(port_->port());
  ASSERT_TRUE(link.usable());
  EXPECT_TRUE(link.Call(Records(2, 1), &resp).ok());
  EXPECT_EQ(Held(), 2u);
}

// An append meant for another store (the port number now belongs to another data node, or to
// another cluster's on the same host) is closed unanswered and never stored; the link parks.
TEST_F(LogPortTest, AnAppendMeantForAnotherStoreIsNeverStored) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port(), std::string(32, 'f'));
  v1::LogAppendResponse resp;
  const absl::Status s = link.Call(Records(1, 1), &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(link.usable());
  EXPECT_EQ(Held(), 0u);
  EXPECT_EQ(Counter("ringcache_datanode_log_port_wrong_store_total"), 1);
  link.SetPort(port_->port(), store_->incarnation());
  EXPECT_TRUE(link.Call(Records(1, 1), &resp).ok());
  EXPECT_EQ(Held(), 1u);
}

// A kept connection that the node closed (it restarted on the same port) is tried again once
// on a fresh one: the append succeeds and the link stays usable.
TEST_F(LogPortTest, AKeptConnectionTheNodeClosedIsRetriedOnAFreshOne) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port());
  v1::LogAppendResponse resp;
  ASSERT_TRUE(link.Call(Records(1, 1), &resp).ok());
  RestartOnTheSamePort();
  const absl::Status s = link.Call(Records(2, 1), &resp);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(link.usable());
  EXPECT_EQ(Held(), 2u);
}

// An append in two halves on the caller's thread: the request goes out, the caller works, the
// answer is read. A refusal is the node's answer and leaves the link in use; the connection is
// the one Call uses.
TEST_F(LogPortTest, BeginAndFinishCarryAnAppendOnTheCallersThread) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port());
  ASSERT_TRUE(link.BeginCall(Records(1, 2)).ok());
  v1::LogAppendResponse resp;
  ASSERT_TRUE(link.FinishCall(&resp).ok());
  EXPECT_GT(resp.log_bytes(), 2u * 4096);
  EXPECT_EQ(Held(), 2u);
  ASSERT_TRUE(link.Call(Records(3, 1), &resp).ok());
  ASSERT_TRUE(store_->SealLog(kWriter, 5).ok());
  ASSERT_TRUE(link.BeginCall(Records(4, 1, /*epoch=*/4)).ok());
  const absl::Status s = link.FinishCall(&resp);
  EXPECT_TRUE(IsKind(s, ErrorKind::kLogSealed)) << s;
  EXPECT_TRUE(link.usable());
  EXPECT_EQ(Held(), 3u);
  EXPECT_EQ(Counter("ringcache_datanode_log_port_requests_total"), 3);
}

// A begun append on a kept connection that the node closed (it restarted on the same port) is
// sent again on a fresh one, whichever half finds the connection gone; a begin that cannot
// connect at all fails at once and parks the link (no FinishCall follows).
TEST_F(LogPortTest, ABegunAppendOutlivesARestartAndAFailedBeginParksTheLink) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port());
  v1::LogAppendResponse resp;
  ASSERT_TRUE(link.Call(Records(1, 1), &resp).ok());
  RestartOnTheSamePort();
  absl::Status s = link.BeginCall(Records(2, 1));
  ASSERT_TRUE(s.ok()) << s;
  s = link.FinishCall(&resp);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(link.usable());
  EXPECT_EQ(Held(), 2u);

  port_.reset();
  s = link.BeginCall(Records(3, 1));
  if (s.ok()) s = link.FinishCall(&resp);  // the request may still fit the closed socket
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(link.usable());
  s = link.BeginCall(Records(3, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(Held(), 2u);
}

// Send runs the call on the link's thread and hands the answer to `done` there.
TEST_F(LogPortTest, SendAnswersOnTheLinksThread) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port());
  const v1::LogAppendRequest req = Records(1, 2);
  v1::LogAppendResponse resp;
  absl::Notification done;
  absl::Status got;
  link.Send(&req, &resp, [&](absl::Status s) {
    got = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(got.ok()) << got;
  EXPECT_GT(resp.log_bytes(), 0u);
  EXPECT_EQ(Held(), 2u);
}

// Block writes: a link to a node that said node-api 2 takes them (a node of an older API never
// gets a kStoreBlocks frame); each lands as over gRPC, counted by both metrics, and a refusal
// is the node's typed answer, which leaves the link in use.
TEST_F(LogPortTest, BlockWritesLandAsOverGrpcOnlyForNodeApiTwo) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port(), store_->incarnation(), 1);
  EXPECT_TRUE(link.usable());
  EXPECT_FALSE(link.stores_blocks()) << "node-api 1 takes no block writes";
  link.SetPort(port_->port(), store_->incarnation(), 2);
  ASSERT_TRUE(link.stores_blocks());
  v1::WriteBlocksRequest req;
  req.mutable_range()->set_vdi_id(1);
  req.mutable_range()->set_object_index(0);
  req.mutable_range()->set_first_block(3);
  req.set_data(std::string(4096, 'x') + std::string(4096, 'y'));
  req.set_writer_node(kWriter);
  req.add_versions(11);
  req.add_versions(12);
  req.add_epochs(1);
  req.add_epochs(1);
  v1::WriteBlocksResponse resp;
  const absl::Status s = link.CallStore(req, &resp);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(resp.blocks_stored(), 2u);
  auto got = store_->ReadBlocks(1, 0, 3, 2);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, req.data());
  ASSERT_EQ(got->versions.size(), 2u);
  EXPECT_EQ(got->versions[1].seq, 12u);
  EXPECT_EQ(Counter("ringcache_datanode_log_port_block_writes_total"), 1);
  EXPECT_EQ(registry_
                .GetCounter("ringcache_datanode_requests_total", "",
                            {{"op", "write_blocks"}, {"result", "ok"}})
                ->Value(),
            1);
  req.mutable_range()->set_vdi_id(99);  // a VDI the node does not know
  const absl::Status refused = link.CallStore(req, &resp);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_TRUE(link.stores_blocks());

  // Reads: the blocks and their versions as ReadBlocks answers them.
  v1::ReadBlocksRequest read;
  read.mutable_range()->set_vdi_id(1);
  read.mutable_range()->set_object_index(0);
  read.mutable_range()->set_first_block(2);
  read.mutable_range()->set_block_count(3);
  v1::ReadBlocksResponse got_resp;
  absl::Status read_status;
  ASSERT_TRUE(link.TryCallLoad(read, &got_resp, &read_status)) << "the link is free";
  ASSERT_TRUE(read_status.ok()) << read_status;
  EXPECT_EQ(got_resp.data(), std::string(4096, '\0') + req.data());
  ASSERT_EQ(got_resp.present_size(), 3);
  EXPECT_FALSE(got_resp.present(0));
  EXPECT_TRUE(got_resp.present(2));
  ASSERT_EQ(got_resp.versions_size(), 3);
  EXPECT_EQ(got_resp.versions(1), 11u);
  EXPECT_EQ(Counter("ringcache_datanode_log_port_block_reads_total"), 1);
  EXPECT_EQ(registry_
                .GetCounter("ringcache_datanode_requests_total", "",
                            {{"op", "read_blocks"}, {"result", "ok"}})
                ->Value(),
            1);
}

// Batches of block writes (kStoreBlocksBatch): only to a node that said node-api 3; the writes of
// several objects land in one request, each answered alone: one the node refuses (a newer
// version is stored) fails with its kind while the others are stored.
TEST_F(LogPortTest, ABatchOfBlockWritesLandsWriteByWriteOnlyForNodeApiThree) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port(), store_->incarnation(), 2);
  EXPECT_TRUE(link.stores_blocks());
  EXPECT_FALSE(link.stores_batches()) << "node-api 2 takes no batches";
  link.SetPort(port_->port(), store_->incarnation(), 3);
  ASSERT_TRUE(link.stores_batches());
  // Block 0 of object 2 holds version 50 already: the batch's older write of it is refused.
  ASSERT_TRUE(store_->WriteBlocks(1, 2, 0, std::string(4096, 'n'), {},
                                  WriteStamp{kWriter, {50}, false, false, {1}})
                  .ok());
  v1::WriteBlocksBatchRequest batch;
  for (uint64_t object : {0, 1, 2}) {
    v1::WriteBlocksRequest& w = *batch.add_writes();
    w.mutable_range()->set_vdi_id(1);
    w.mutable_range()->set_object_index(object);
    w.mutable_range()->set_first_block(0);
    w.set_data(std::string(4096, static_cast<char>('a' + object)));
    w.set_writer_node(kWriter);
    w.add_versions(20 + object);
    w.add_epochs(1);
  }
  absl::Status sent;
  ASSERT_TRUE(link.TryBeginStoreBatch(batch, &sent)) << "the link is free";
  ASSERT_TRUE(sent.ok()) << sent;
  v1::WriteBlocksBatchResponse resp;
  const absl::Status s = link.FinishStoreBatch(&resp);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(resp.results_size(), 3);
  for (uint64_t object : {0, 1}) {
    EXPECT_EQ(resp.results(object).code(), 0) << resp.results(object).message();
    EXPECT_EQ(resp.results(object).blocks_stored(), 1u);
    auto got = store_->ReadBlocks(1, object, 0, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->data, std::string(4096, static_cast<char>('a' + object)));
  }
  EXPECT_EQ(resp.results(2).code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(resp.results(2).kind(), ErrorKindName(ErrorKind::kOlderVersion));
  auto kept = store_->ReadBlocks(1, 2, 0, 1);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->data, std::string(4096, 'n')) << "the newer copy stays";
  EXPECT_EQ(Counter("ringcache_datanode_log_port_block_writes_total"), 1);
  EXPECT_TRUE(link.stores_batches()) << "a refusal leaves the link in use";
}

// A block write begun on the writer's thread (TryBeginStore) holds the link until FinishStore:
// meanwhile neither another begun write nor the link's thread (TrySendStore) takes it, so the
// pool sends those another way. Finished, it has landed and the link is free again; begun on a
// kept connection the node closed (a restart), it is sent once more on a fresh one.
TEST_F(LogPortTest, ABegunBlockWriteHoldsTheLinkUntilFinishedAndOutlivesARestart) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port(), store_->incarnation(), 2);
  v1::WriteBlocksRequest req;
  req.mutable_range()->set_vdi_id(1);
  req.mutable_range()->set_object_index(0);
  req.mutable_range()->set_first_block(5);
  req.set_data(std::string(4096, 'b'));
  req.set_writer_node(kWriter);
  req.add_versions(21);
  req.add_epochs(1);
  absl::Status sent;
  ASSERT_TRUE(link.TryBeginStore(req, &sent)) << "the link is free";
  ASSERT_TRUE(sent.ok()) << sent;
  absl::Status other;
  EXPECT_FALSE(link.TryBeginStore(req, &other)) << "a second write while one is begun";
  v1::WriteBlocksResponse queued_resp;
  EXPECT_FALSE(link.TrySendStore(&req, &queued_resp, [](absl::Status) {}));
  v1::WriteBlocksResponse resp;
  absl::Status s = link.FinishStore(&resp);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(resp.blocks_stored(), 1u);
  auto got = store_->ReadBlocks(1, 0, 5, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, req.data());
  EXPECT_EQ(Counter("ringcache_datanode_log_port_block_writes_total"), 1);
  EXPECT_EQ(link.FinishStore(&resp).code(), absl::StatusCode::kFailedPrecondition)
      << "nothing begun";

  RestartOnTheSamePort();
  req.set_data(std::string(4096, 'c'));
  req.set_versions(0, 22);
  ASSERT_TRUE(link.TryBeginStore(req, &sent)) << "free again after FinishStore";
  ASSERT_TRUE(sent.ok()) << sent;
  s = link.FinishStore(&resp);
  ASSERT_TRUE(s.ok()) << s;
  got = store_->ReadBlocks(1, 0, 5, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, req.data());
  EXPECT_TRUE(link.stores_blocks());
}

// A block write meant for another store is closed unanswered and never stored; the link parks.
TEST_F(LogPortTest, ABlockWriteMeantForAnotherStoreIsNeverStored) {
  LogLink link(1, "127.0.0.1", 5000);
  link.SetPort(port_->port(), std::string(32, 'f'), 2);
  v1::WriteBlocksRequest req;
  req.mutable_range()->set_vdi_id(1);
  req.mutable_range()->set_first_block(0);
  req.set_data(std::string(4096, 'z'));
  v1::WriteBlocksResponse resp;
  const absl::Status s = link.CallStore(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(link.stores_blocks());
  EXPECT_EQ(Counter("ringcache_datanode_log_port_wrong_store_total"), 1);
  auto got = store_->ReadBlocks(1, 0, 0, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->present[0]);
}

// TrySendStore takes one write at a time: while one waits for its answer (here from a listener
// that never answers), the next is handed back for gRPC; its `done` runs once the first fails.
TEST_F(LogPortTest, TrySendStoreTakesOneWriteAtATime) {
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(silent, 4), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len), 0);
  LogLink link(1, "127.0.0.1", 1000);
  link.SetPort(ntohs(a.sin_port), "", 2);
  v1::WriteBlocksRequest req;
  req.set_data(std::string(4096, 'q'));
  v1::WriteBlocksResponse resp1, resp2;
  absl::Notification first_done;
  absl::Status first;
  ASSERT_TRUE(link.TrySendStore(&req, &resp1, [&](absl::Status s) {
    first = std::move(s);
    first_done.Notify();
  }));
  bool second_ran = false;
  EXPECT_FALSE(link.TrySendStore(&req, &resp2, [&](absl::Status) { second_ran = true; }))
      << "a second write while one is on the link should go another way";
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable) << first;
  EXPECT_FALSE(second_ran);
  close(silent);
}

// With TLS the port admits cache nodes (and gateways), as the gRPC port does; a certificate of
// another role is refused at the handshake.
TEST_F(LogPortTest, UnderTlsOnlyCacheNodesAndGatewaysAreAdmitted) {
  const tls::testing::TestCa ca(dir_);
  auto identity = [&](const std::string& role, const std::string& name) {
    return ca.Issue(role, name);
  };
  tls::ServerOptions o;
  o.roles = {tls::kRoleCacheNode, tls::kRoleGateway};
  auto server = tls::ServerContext::Create(identity(tls::kRoleDataNode, "datanode-1"), o);
  ASSERT_TRUE(server.ok()) << server.status();
  port_.reset();
  StartPort(0, *server);
  v1::LogAppendResponse resp;

  tls::SetProcessIdentity(identity(tls::kRoleCacheNode, "cachenode-3"));
  LogLink cache(1, "127.0.0.1", 5000);
  cache.SetPort(port_->port());
  const absl::Status ok = cache.Call(Records(1, 1), &resp);
  EXPECT_TRUE(ok.ok()) << ok;

  tls::SetProcessIdentity(identity(tls::kRoleClient, "qemu-1"));
  LogLink client(1, "127.0.0.1", 5000);
  client.SetPort(port_->port());
  EXPECT_FALSE(client.Call(Records(2, 1), &resp).ok());
  EXPECT_EQ(Counter("ringcache_datanode_log_port_tls_refused_total"), 1);
  EXPECT_EQ(Held(), 1u);
}

}  // namespace
}  // namespace ringcache::datanode
