// Cross-process tests of ringcache-datanode: a real daemon on 127.0.0.1, driven over gRPC, killed
// with SIGKILL, fed garbage, and with its on-disk bytes corrupted.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/checksum.h"
#include "gtest/gtest.h"
#include "ringcache/v1/datanode.grpc.pb.h"
#include "tests/support/process.h"

namespace ringcache {
namespace {

using testing::DaemonProcess;

constexpr uint32_t kBlock = 4096;
constexpr uint32_t kVdi = 3;

class DataNodeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    StartNode();
    v1::PutVdiRequest req;
    auto* g = req.mutable_vdi();
    g->set_vdi_id(kVdi);
    g->set_name("t");
    g->set_size_bytes(256ull << 20);
    g->set_object_size(4 << 20);
    g->set_block_size(kBlock);
    g->set_replication(3);
    v1::PutVdiResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->PutVdi(&ctx, req, &resp).ok());
  }

  void TearDown() override {
    node_.Kill(SIGKILL);
    if (!HasFailure()) std::filesystem::remove_all(dir_);  // keep logs of failures
  }

  void StartNode() {
    const std::string ready = dir_ + "/ready.json";
    std::filesystem::remove(ready);
    ASSERT_TRUE(node_.Start(RINGCACHE_DATANODE_BIN,
                            {"--node-id", "1", "--listen", "127.0.0.1:0", "--http-listen",
                             "127.0.0.1:0", "--data-dir", dir_ + "/data", "--ready-file", ready},
                            dir_ + "/datanode.log"));
    ASSERT_TRUE(node_.WaitReady(ready)) << testing::ReadFile(dir_ + "/datanode.log");
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(node_.port("grpc_port")),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::DataNode::NewStub(channel_);
  }

  grpc::Status Write(uint64_t object, uint32_t block, const std::string& data) {
    v1::WriteBlocksRequest req;
    req.mutable_range()->set_vdi_id(kVdi);
    req.mutable_range()->set_object_index(object);
    req.mutable_range()->set_first_block(block);
    req.set_data(data);
    v1::WriteBlocksResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->WriteBlocks(&ctx, req, &resp);
  }

  grpc::Status Read(uint64_t object, uint32_t block, uint32_t count, std::string* data) {
    v1::ReadBlocksRequest req;
    req.mutable_range()->set_vdi_id(kVdi);
    req.mutable_range()->set_object_index(object);
    req.mutable_range()->set_first_block(block);
    req.mutable_range()->set_block_count(count);
    v1::ReadBlocksResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status s = stub_->ReadBlocks(&ctx, req, &resp);
    *data = resp.data();
    return s;
  }

  bool Healthy() {
    v1::HealthRequest req;
    v1::HealthResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return stub_->Health(&ctx, req, &resp).ok() && resp.status() == "serving";
  }

  std::string dir_;
  DaemonProcess node_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DataNode::Stub> stub_;
};

std::string Versioned(uint64_t object, uint32_t block, uint32_t version) {
  std::string s(kBlock, '\0');
  std::mt19937_64 rng(object * 1000003 + block * 7919 + version);
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

TEST_F(DataNodeProcessTest, WriteReadRoundTrip) {
  const std::string a = Versioned(5, 10, 1), b = Versioned(5, 11, 1);
  ASSERT_TRUE(Write(5, 10, a + b).ok());
  std::string got;
  ASSERT_TRUE(Read(5, 9, 3, &got).ok());
  EXPECT_EQ(got, std::string(kBlock, '\0') + a + b);
}

TEST_F(DataNodeProcessTest, AcknowledgedWritesSurviveKill9) {
  // Four writers overwrite a set of blocks with increasing versions; the node is killed -9 while
  // they run. Every acknowledged version (the latest per block) must read back after restart.
  constexpr int kWriters = 4, kBlocksPerWriter = 16;
  std::vector<std::vector<uint32_t>> acked(kWriters, std::vector<uint32_t>(kBlocksPerWriter, 0));
  std::atomic<int> total_acks{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (uint32_t version = 1; !stop; ++version) {
        for (int b = 0; b < kBlocksPerWriter && !stop; ++b) {
          const uint64_t obj = static_cast<uint64_t>(w);
          if (!Write(obj, b, Versioned(obj, b, version)).ok()) return;  // node died
          acked[w][b] = version;
          ++total_acks;
        }
      }
    });
  }
  while (total_acks < 300) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  node_.Kill(SIGKILL);
  stop = true;
  for (auto& t : writers) t.join();
  std::cout << "acknowledged writes before kill -9: " << total_acks << "\n";

  StartNode();
  int verified = 0;
  for (int w = 0; w < kWriters; ++w) {
    for (int b = 0; b < kBlocksPerWriter; ++b) {
      if (acked[w][b] == 0) continue;
      std::string got;
      ASSERT_TRUE(Read(w, b, 1, &got).ok());
      // The write in flight at the kill may have landed too: latest acked or the one after it.
      const bool ok = got == Versioned(w, b, acked[w][b]) || got == Versioned(w, b, acked[w][b] + 1);
      EXPECT_TRUE(ok) << "object " << w << " block " << b << " lost version " << acked[w][b];
      ++verified;
    }
  }
  EXPECT_GT(verified, 0);
}

TEST_F(DataNodeProcessTest, LogAppendScanReclaim) {
  v1::LogAppendRequest app;
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    auto* r = app.add_records();
    r->set_cache_node_id(9);
    r->set_sequence(seq);
    r->set_vdi_id(kVdi);
    r->set_object_index(1);
    r->set_block_index(static_cast<uint32_t>(seq));
    r->set_data(Versioned(1, static_cast<uint32_t>(seq), 0));
    r->set_checksum(BlockChecksum(r->data()));
  }
  v1::LogAppendResponse app_resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->LogAppend(&ctx, app, &app_resp).ok());
    EXPECT_GT(app_resp.log_bytes(), 5u * kBlock);
  }
  // Survives a kill -9.
  node_.Kill(SIGKILL);
  StartNode();
  v1::LogScanRequest scan;
  scan.set_cache_node_id(9);
  scan.set_limit(3);
  scan.set_include_data(true);
  v1::LogScanResponse page;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->LogScan(&ctx, scan, &page).ok());
  }
  ASSERT_EQ(page.records_size(), 3);
  EXPECT_EQ(page.records(2).sequence(), 3u);
  EXPECT_EQ(page.records(2).data(), Versioned(1, 3, 0));
  EXPECT_FALSE(page.done());

  v1::LogReclaimRequest rec;
  rec.set_cache_node_id(9);
  rec.set_below_sequence(3);
  rec.add_sequences(5);
  v1::LogReclaimResponse rec_resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->LogReclaim(&ctx, rec, &rec_resp).ok());
  }
  EXPECT_EQ(rec_resp.records_reclaimed(), 3u);
  scan.set_from_sequence(0);
  scan.set_limit(0);
  v1::LogScanResponse rest;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->LogScan(&ctx, scan, &rest).ok());
  }
  ASSERT_EQ(rest.records_size(), 2);
  EXPECT_EQ(rest.records(0).sequence(), 3u);
  EXPECT_EQ(rest.records(1).sequence(), 4u);
  EXPECT_TRUE(rest.done());
}

TEST_F(DataNodeProcessTest, BadRequestsAreRejectedAndNodeKeepsServing) {
  // Block index beyond the object (4 MiB / 4 KiB = 1024 blocks).
  EXPECT_EQ(Write(0, 1024, std::string(kBlock, 'x')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Payload of the wrong size.
  EXPECT_EQ(Write(0, 0, std::string(100, 'x')).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Unknown VDI.
  {
    v1::WriteBlocksRequest req;
    req.mutable_range()->set_vdi_id(999);
    req.set_data(std::string(kBlock, 'x'));
    v1::WriteBlocksResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->WriteBlocks(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("unknown VDI"), std::string::npos) << s.error_message();
  }
  std::string got;
  EXPECT_EQ(Read(0, 1000, 100, &got).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Garbage bytes on the gRPC port: the server closes that connection.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(node_.port("grpc_port")));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  std::mt19937 rng(42);
  std::string garbage(64 * 1024, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  ::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
  }
  EXPECT_EQ(n, 0) << "server should close a connection that speaks garbage";
  ::close(fd);

  // Other clients are unaffected.
  EXPECT_TRUE(Healthy());
  ASSERT_TRUE(Write(1, 1, Versioned(1, 1, 1)).ok());
  ASSERT_TRUE(Read(1, 1, 1, &got).ok());
  EXPECT_EQ(got, Versioned(1, 1, 1));
}

TEST_F(DataNodeProcessTest, CorruptedBlockOnDiskIsDataLossNeverGoodData) {
  const std::string victim = Versioned(7, 7, 7), bystander = Versioned(8, 8, 8);
  ASSERT_TRUE(Write(7, 7, victim).ok());
  ASSERT_TRUE(Write(8, 8, bystander).ok());
  // A stop leaves the writes in the synced WAL (no flush at shutdown); the next open replays the
  // WAL into a new SST file (RocksDB flushes recovered memtables), so after a second stop the
  // block's bytes sit in an SST file.
  node_.Kill(SIGTERM);
  StartNode();
  node_.Kill(SIGTERM);
  int flipped = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/data")) {
    if (e.path().extension() != ".sst") continue;
    std::string bytes = testing::ReadFile(e.path());
    size_t pos = bytes.find(victim.substr(0, 256));
    if (pos == std::string::npos) continue;
    bytes[pos + 100] ^= 0x01;
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << bytes;
    ++flipped;
  }
  ASSERT_EQ(flipped, 1) << "the victim block should be in exactly one SST file";
  StartNode();
  std::string got;
  grpc::Status s = Read(7, 7, 1, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_NE(got, victim.substr(0, 0) + got.substr(0, 0) + victim) << "must not return data";
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(Healthy());
  // Repair by rewriting the block (what a cache node does from another replica).
  ASSERT_TRUE(Write(7, 7, victim).ok());
  ASSERT_TRUE(Read(7, 7, 1, &got).ok());
  EXPECT_EQ(got, victim);
}

TEST_F(DataNodeProcessTest, MetricsPassPromtoolAndHealthz) {
  std::string got;
  ASSERT_TRUE(Write(0, 0, Versioned(0, 0, 1)).ok());
  ASSERT_TRUE(Read(0, 0, 1, &got).ok());
  std::string body;
  ASSERT_EQ(testing::HttpGet(node_.port("http_port"), "/healthz", &body), 200);
  EXPECT_NE(body.find("\nringcache_healthy 1\n"), std::string::npos) << body;
  ASSERT_EQ(testing::HttpGet(node_.port("http_port"), "/metrics", &body), 200);
  EXPECT_NE(body.find("ringcache_datanode_requests_total{op=\"write_blocks\",result=\"ok\"} 1"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("ringcache_datanode_request_duration_seconds_bucket"), std::string::npos);
  EXPECT_NE(body.find("\nringcache_datanode_log_limit_bytes "), std::string::npos) << body;
  EXPECT_EQ(body.find("\nringcache_datanode_log_limit_bytes 0\n"), std::string::npos) << body;
  const std::string path = dir_ + "/metrics.txt";
  std::ofstream(path) << body;
  std::string out;
  EXPECT_EQ(testing::RunCommand(std::string(RINGCACHE_PROMTOOL) + " check metrics < " + path, &out),
            0)
      << out;
  EXPECT_EQ(out, "") << "promtool lint findings: " << out;
}

// Configuration errors: clear message, non-zero exit, nothing served.
class DataNodeConfigProcessTest : public ::testing::Test {
 protected:
  int Run(const std::vector<std::string>& args, std::string* log) {
    const std::string dir = testing::FreshDir("cfg");
    DaemonProcess p;
    EXPECT_TRUE(p.Start(RINGCACHE_DATANODE_BIN, args, dir + "/log"));
    int code = p.WaitExit(30);
    *log = testing::ReadFile(dir + "/log");
    return code;
  }
};

TEST_F(DataNodeConfigProcessTest, HelpExitsZero) {
  std::string log;
  EXPECT_EQ(Run({"--help"}, &log), 0);
  EXPECT_NE(log.find("--config"), std::string::npos) << log;
  EXPECT_NE(log.find("--data-dir"), std::string::npos) << log;
}

TEST_F(DataNodeConfigProcessTest, UnknownKeyBadValueUnwritableDir) {
  const std::string dir = testing::FreshDir("cfgfiles");
  std::ofstream(dir + "/unknown.yaml") << "node_id: 1\ndata_dir: " << dir << "/d\nlisten_port: 5\n";
  std::ofstream(dir + "/badvalue.yaml") << "node_id: one\n";
  std::ofstream(dir + "/baddir.yaml") << "data_dir: /proc/ringcache\nhttp_listen: 127.0.0.1:0\n"
                                      << "listen: 127.0.0.1:0\n";
  std::string log;
  EXPECT_EQ(Run({"--config", dir + "/unknown.yaml"}, &log), 2);
  EXPECT_NE(log.find("unknown key(s): listen_port"), std::string::npos) << log;
  EXPECT_EQ(Run({"--config", dir + "/badvalue.yaml"}, &log), 2);
  EXPECT_NE(log.find("node_id"), std::string::npos) << log;
  EXPECT_EQ(Run({"--config", dir + "/baddir.yaml"}, &log), 2);
  EXPECT_NE(log.find("/proc/ringcache"), std::string::npos) << log;
  EXPECT_EQ(Run({"--node-id", "abc"}, &log), 2);
  EXPECT_EQ(Run({"--config", dir + "/missing.yaml"}, &log), 2);
  EXPECT_EQ(Run({"--listen", "nonsense", "--data-dir", dir + "/x"}, &log), 2);
  EXPECT_NE(log.find("nonsense"), std::string::npos) << log;
}

}  // namespace
}  // namespace ringcache
