// The write-back log against real (embedded) data nodes: where log copies go (N = 2 and 3, and a
// cluster too small to keep them apart from the homes), reclaim after destage, replay after the
// loss of a cache node (latest record wins, never over a newer home copy), repair of damaged
// dirty SSD slots from their records, and a warm cache across a restart.
#include "cachenode/write_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "cachenode/cache_node.h"
#include "datanode/client/log_replay.h"
#include "cachenode/testing/cache_node_harness.h"
#include "common/checksum.h"
#include "common/errors.h"
#include "gtest/gtest.h"

namespace ringcache::cachenode {
namespace {

constexpr uint32_t kBs = 4096;
constexpr uint32_t kObj = 64 * 1024;  // 16 blocks per object
constexpr uint32_t kPerObj = kObj / kBs;

class WriteLogTest : public testing::CacheNodeHarness {
 protected:
  void Init(int data_nodes, uint32_t replication) { SetUpCluster(data_nodes, replication, 9); }
  // A log record of cache node 9 for block `block` of VDI 1's object 0.
  static v1::LogRecord Record(uint64_t seq, uint32_t block, const std::string& data) {
    v1::LogRecord r;
    r.set_cache_node_id(9);
    r.set_sequence(seq);
    r.set_vdi_id(1);
    r.set_object_index(0);
    r.set_block_index(block);
    r.set_data(data);
    r.set_checksum(BlockChecksum(data));
    return r;
  }
  absl::Status WriteBlock(uint64_t block, const std::string& data) {
    return node_->Write(1, block / kPerObj, (block % kPerObj) * kBs, kBs, data.data());
  }
  std::string ReadBlock(uint64_t block) {
    std::string out(kBs, '\0');
    EXPECT_TRUE(node_->Read(1, block / kPerObj, (block % kPerObj) * kBs, kBs, out.data()).ok());
    return out;
  }
  std::string HomeBlock(uint64_t block) {
    auto run = pool_->Read(1, block / kPerObj, block % kPerObj, 1,
                           static_cast<int>(geometry_.replication()), kBs);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? run->data : "";
  }
  // Log records of cache node 9 per data node id: sequence -> (object, block).
  std::map<uint32_t, std::vector<datanode::LogEntry>> LogsByDataNode() {
    std::map<uint32_t, std::vector<datanode::LogEntry>> out;
    for (size_t i = 0; i < dns_->endpoints().size(); ++i) {
      uint64_t next;
      bool done;
      auto recs = dns_->store(static_cast<int>(i))->LogScan(9, 0, 100000, true, &next, &done);
      EXPECT_TRUE(recs.ok());
      out[dns_->endpoints()[i].id] = *recs;
    }
    return out;
  }
  size_t TotalRecords() {
    size_t n = 0;
    for (auto& [id, recs] : LogsByDataNode()) n += recs.size();
    return n;
  }
  static std::string Pattern(uint64_t seed) {
    std::string s(kBs, '\0');
    std::mt19937_64 r(seed);
    for (char& c : s) c = static_cast<char>(r());
    return s;
  }
  // Checks that every record has exactly n-1 copies and where they are.
  void ExpectCopies(uint32_t n, bool expect_overlap) {
    std::map<uint64_t, std::vector<uint32_t>> holders;
    std::map<uint64_t, datanode::LogEntry> rec;
    for (auto& [id, recs] : LogsByDataNode()) {
      for (auto& r : recs) {
        holders[r.sequence].push_back(id);
        rec[r.sequence] = r;
      }
    }
    ASSERT_FALSE(holders.empty());
    bool overlapped = false;
    for (auto& [seq, ids] : holders) {
      EXPECT_EQ(ids.size(), n - 1) << "record " << seq;
      auto homes = pool_->Homes(1, rec[seq].object_index, static_cast<int>(n));
      ASSERT_TRUE(homes.ok());
      for (uint32_t id : ids) {
        const bool home = std::find(homes->begin(), homes->end(), id) != homes->end();
        overlapped |= home;
        if (!expect_overlap) {
          EXPECT_FALSE(home) << "record " << seq << " on home " << id;
        }
      }
      EXPECT_EQ(BlockChecksum(rec[seq].data), rec[seq].checksum);
    }
    EXPECT_EQ(overlapped, expect_overlap);
  }

};

// Concurrent appends to the same data nodes are group-committed: while one LogAppend call is in
// flight, the appends that arrive wait and go together in the next call. Every append is still
// acknowledged only with its own records durable, and every record lands. Over gRPC, and over
// the log ports, where an append that finds its link idle is sent on its own thread and the
// appends queued behind it go on in the link's next call.
class ConcurrentAppendsTest : public WriteLogTest, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(Transport, ConcurrentAppendsTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "LogPort" : "Grpc"; });

TEST_P(ConcurrentAppendsTest, ShareLogAppendCalls) {
  ASSERT_NO_FATAL_FAILURE(Init(3, 2));
  const bool ports = GetParam();
  if (ports) pool_->ProbeAll(5000);  // the nodes announce their log ports
  constexpr int kThreads = 16, kEach = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        v1::LogAppendRequest req;
        const uint64_t seq = 1 + uint64_t(t) * kEach + i;
        // One object: the same log node for every append.
        *req.add_records() = Record(seq, static_cast<uint32_t>(seq % kPerObj), Pattern(seq));
        if (!pool_->LogAppend(1, 0, 2, 1, req).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  size_t records = 0;
  for (auto& [id, recs] : LogsByDataNode()) {
    for (auto& r : recs) EXPECT_EQ(r.data, Pattern(r.sequence)) << r.sequence;
    records += recs.size();
  }
  EXPECT_EQ(records, size_t{kThreads} * kEach);
  double calls = 0;
  for (const auto& e : dns_->endpoints()) {
    calls += registry_.GetCounter("ringcache_cachenode_log_append_calls_total", "",
                                  {{"datanode", absl::StrCat(e.id)}})->Value();
  }
  EXPECT_GT(calls, 0);
  EXPECT_LT(calls, kThreads * kEach) << "no append shared a call with another";
  const double on_port = dns_->LogPortRequests();
  const double inline_sent =
      registry_.GetCounter("ringcache_cachenode_log_appends_inline_total", "")->Value();
  if (ports) {
    EXPECT_EQ(on_port, calls) << "every call should take the log port";
    EXPECT_GT(inline_sent, 0) << "no append found its link idle";
    EXPECT_LT(inline_sent, calls) << "no call was handed to a link's thread";
  } else {
    EXPECT_EQ(on_port, 0);
    EXPECT_EQ(inline_sent, 0);
  }
}

// Appends take a data node's log port once the node announced it (Health, seen by ProbeAll)
// instead of the LogAppend RPC. When the port fails, the append still lands (the pool retries it
// over gRPC); after the node restarted on new ports, the next probes find the new one.
TEST_F(WriteLogTest, AppendsTakeTheLogPortOnceAnnouncedAndFollowARestart) {
  ASSERT_NO_FATAL_FAILURE(Init(3, 3));
  uint64_t seq = 0;
  auto append = [&] {
    v1::LogAppendRequest req;
    ++seq;
    *req.add_records() = Record(seq, static_cast<uint32_t>(seq % kPerObj), Pattern(seq));
    auto appended = pool_->LogAppend(1, 0, 3, 2, req);
    EXPECT_TRUE(appended.ok()) << appended.status();
  };
  append();
  EXPECT_EQ(dns_->LogPortRequests(), 0) << "no port is known before a probe";
  pool_->ProbeAll(5000);
  append();
  EXPECT_EQ(dns_->LogPortRequests(), 2) << "both copies should take the log port";
  // Nothing else was in flight: both went on this thread, no hand-off to a link's thread.
  EXPECT_EQ(registry_.GetCounter("ringcache_cachenode_log_appends_inline_total", "")->Value(), 2);

  for (int i = 0; i < 3; ++i) dns_->StopLogPortForTest(i);
  append();  // over gRPC, after the ports failed
  EXPECT_EQ(dns_->LogPortRequests(), 2);

  for (int i = 0; i < 3; ++i) {
    dns_->StopForTest(i);
    dns_->RestartForTest(i);
  }
  // Until the gRPC channels are back and a probe saw the new ports.
  const double before = dns_->LogPortRequests();
  for (int i = 0; i < 100 && dns_->LogPortRequests() == before; ++i) {
    pool_->ProbeAll(5000);
    append();
  }
  EXPECT_GT(dns_->LogPortRequests(), before) << "the new log ports were never used";
  // Every record is held by two data nodes, whichever way it went.
  size_t held = 0;
  for (auto& [id, recs] : LogsByDataNode()) {
    for (auto& r : recs) EXPECT_EQ(r.data, Pattern(r.sequence)) << r.sequence;
    held += recs.size();
  }
  EXPECT_EQ(held, 2 * seq);
}

// A transient fault is retried, not reported: every data node drops its first append as a
// reset connection (the compose test once failed a client write on one), and the append still
// lands on as many nodes as asked, counted as retries. A node that keeps failing fails the
// append, naming it.
TEST_F(WriteLogTest, AppendsRetryDataNodesThatResetTheirConnection) {
  Init(3, 3);  // two log copies, three candidates
  absl::Mutex mu;
  std::map<uint32_t, int> calls;
  pool_->set_log_fault_for_test([&](uint32_t node) {
    absl::MutexLock l(&mu);
    return ++calls[node] == 1 ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                             "recvmsg: Connection reset by peer")
                              : grpc::Status::OK;
  });
  v1::LogAppendRequest req;
  v1::LogRecord& r = *req.add_records();
  r = Record(1, 0, Pattern(1));
  auto appended = pool_->LogAppend(1, 0, 3, 2, req);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->nodes.size(), 2u);
  size_t held = 0;
  for (auto& [id, recs] : LogsByDataNode()) held += recs.size();
  EXPECT_EQ(held, 2u);
  EXPECT_GE(registry_.GetCounter("ringcache_cachenode_log_append_retries_total", "")->Value(), 1);

  // Data node 2 resets every connection: the others hold the copies, and when they are not
  // enough the append fails, naming it.
  pool_->set_log_fault_for_test([](uint32_t node) {
    return node == 2 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "Connection reset by peer")
                     : grpc::Status::OK;
  });
  r.set_sequence(2);
  appended = pool_->LogAppend(1, 0, 3, 2, req);
  ASSERT_TRUE(appended.ok()) << appended.status();
  r.set_sequence(3);
  auto refused = pool_->LogAppend(1, 0, 3, 3, req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("log records on 2 of 3 data nodes"),
            std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("data node 2"), std::string::npos)
      << refused.status();
}

// The same for versioned writes home (destage, write-through, replay): a home that resets its
// connection once is asked again, and the write succeeds; one that keeps resetting fails it.
TEST_F(WriteLogTest, StampedHomeWritesRetryDataNodesThatResetTheirConnection) {
  ASSERT_NO_FATAL_FAILURE(Init(3, 3));
  absl::Mutex mu;
  std::map<uint32_t, int> calls;
  pool_->set_write_fault_for_test([&](uint32_t node) {
    absl::MutexLock l(&mu);
    return ++calls[node] == 1 ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                             "recvmsg: Connection reset by peer")
                              : grpc::Status::OK;
  });
  datanode::HomeStamp stamp{9, {5}, false, {1}};
  ASSERT_TRUE(pool_->WriteAll(1, 0, 2, Pattern(7), 3, &stamp).ok());
  EXPECT_EQ(HomeBlock(2), Pattern(7));
  EXPECT_GE(registry_.GetCounter("ringcache_cachenode_home_write_retries_total", "")->Value(), 3);
  pool_->set_write_fault_for_test([](uint32_t node) {
    return node == 2 ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "Connection reset by peer")
                     : grpc::Status::OK;
  });
  stamp.seqs = {6};
  absl::Status s = pool_->WriteAll(1, 0, 2, Pattern(8), 3, &stamp);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("data node 2"), std::string::npos) << s;
  pool_->set_write_fault_for_test(nullptr);
}

// Home writes (the destager's) and reads take the data nodes' log ports once a probe announced
// them (and node-api 2), each copy landing as over gRPC; a port that fails sends them back to
// gRPC, the write itself succeeding (retried: a stamped write is idempotent).
TEST_F(WriteLogTest, HomeWritesAndReadsTakeTheLogPortOnceAnnouncedAndFallBackToGrpc) {
  ASSERT_NO_FATAL_FAILURE(Init(3, 3));
  datanode::HomeStamp stamp{9, {5}, false, {1}};
  ASSERT_TRUE(pool_->WriteAll(1, 0, 2, Pattern(7), 3, &stamp).ok());
  EXPECT_EQ(dns_->LogPortBlockWrites(), 0) << "no port is known before a probe";
  pool_->ProbeAll(5000);
  stamp.seqs = {6};
  ASSERT_TRUE(pool_->WriteAll(1, 0, 2, Pattern(8), 3, &stamp).ok());
  EXPECT_EQ(dns_->LogPortBlockWrites(), 3) << "every home should take its copy on the port";
  for (int i = 0; i < 3; ++i) {
    auto got = dns_->store(i)->ReadBlocks(1, 0, 2, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->data, Pattern(8)) << "data node " << i;
    ASSERT_EQ(got->versions.size(), 1u);
    EXPECT_EQ(got->versions[0].seq, 6u);
    EXPECT_EQ(got->versions[0].writer, 9u);
  }
  EXPECT_EQ(dns_->LogPortBlockReads(), 0);
  EXPECT_EQ(HomeBlock(2), Pattern(8));
  EXPECT_EQ(dns_->LogPortBlockReads(), 1) << "the read should take a home's port";
  for (int i = 0; i < 3; ++i) dns_->StopLogPortForTest(i);
  stamp.seqs = {7};
  ASSERT_TRUE(pool_->WriteAll(1, 0, 2, Pattern(9), 3, &stamp).ok());
  EXPECT_EQ(dns_->LogPortBlockWrites(), 3);
  EXPECT_EQ(HomeBlock(2), Pattern(9)) << "a read whose port failed goes over gRPC";
  EXPECT_EQ(dns_->LogPortBlockReads(), 1);
}

// A destage batch's runs go to each data node in one request (node-api 3) once the ports are
// known, over gRPC before; each run is answered alone: one a home refuses as older than its
// copy fails with kOlderVersion, the others land on every home.
TEST_F(WriteLogTest, ABatchOfRunsTakesOneRequestPerDataNodeAndFailsRunsAlone) {
  ASSERT_NO_FATAL_FAILURE(Init(3, 3));
  const std::string data[4] = {Pattern(1), Pattern(2), Pattern(3), Pattern(4)};
  auto batch = [&](uint64_t seq) {
    std::vector<datanode::RunWrite> runs;
    for (uint64_t object = 0; object < 4; ++object) {
      runs.push_back({1, object, 1, &data[object], 3,
                      datanode::HomeStamp{9, {seq + object}, false, {1}}});
    }
    return pool_->WriteAllBatch(runs);
  };
  for (const absl::Status& s : batch(10)) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(dns_->LogPortBlockWrites(), 0) << "no port is known before a probe";
  pool_->ProbeAll(5000);
  // Object 2's block 1 holds a newer version on every home.
  datanode::HomeStamp newer{9, {500}, false, {1}};
  ASSERT_TRUE(pool_->WriteAll(1, 2, 1, Pattern(9), 3, &newer).ok());
  const double before = dns_->LogPortBlockWrites();
  const std::vector<absl::Status> got = batch(20);
  EXPECT_EQ(dns_->LogPortBlockWrites() - before, 3) << "one request per data node";
  ASSERT_EQ(got.size(), 4u);
  for (uint64_t object = 0; object < 4; ++object) {
    if (object == 2) {
      EXPECT_TRUE(IsKind(got[object], ErrorKind::kOlderVersion)) << got[object];
      continue;
    }
    EXPECT_TRUE(got[object].ok()) << got[object];
    for (int i = 0; i < 3; ++i) {
      auto r = dns_->store(i)->ReadBlocks(1, object, 1, 1);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->data, data[object]) << "data node " << i;
      EXPECT_EQ(r->versions[0].seq, 20 + object);
    }
  }
  EXPECT_EQ(dns_->store(0)->ReadBlocks(1, 2, 1, 1)->data, Pattern(9));
}

TEST_F(WriteLogTest, TwoReplicasKeepOneLogCopyOutsideTheHomes) {
  ASSERT_NO_FATAL_FAILURE(Init(4, 2));
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 40; ++b) ASSERT_TRUE(WriteBlock(b * 3, Pattern(b)).ok());
  ExpectCopies(2, false);
}

TEST_F(WriteLogTest, ThreeReplicasKeepTwoLogCopiesOutsideTheHomes) {
  ASSERT_NO_FATAL_FAILURE(Init(5, 3));
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 40; ++b) ASSERT_TRUE(WriteBlock(b * 5, Pattern(b)).ok());
  ExpectCopies(3, false);
}

TEST_F(WriteLogTest, TooSmallClusterOverlapsHomesAndCountsIt) {
  Init(3, 3);  // 2N-1 = 5 > 3 data nodes
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 10; ++b) ASSERT_TRUE(WriteBlock(b * 17, Pattern(b)).ok());
  ExpectCopies(3, true);
  EXPECT_NE(registry_.Render().find("ringcache_cachenode_log_overlap_records_total{node=\"9\"} 20"),
            std::string::npos)
      << registry_.Render();
}

TEST_F(WriteLogTest, DestageReclaimsRecordsAndOverwritesRetireOldOnes) {
  ASSERT_NO_FATAL_FAILURE(Init(4, 3));
  ASSERT_NO_FATAL_FAILURE(Start());
  for (int round = 0; round < 5; ++round) {
    for (uint64_t b = 0; b < 20; ++b) ASSERT_TRUE(WriteBlock(b, Pattern(round * 100 + b)).ok());
  }
  // Superseded records go in the background: eventually only the latest 20 remain (2 copies).
  for (int i = 0; i < 200 && TotalRecords() > 40; ++i) usleep(50 * 1000);
  EXPECT_EQ(TotalRecords(), 40u);
  ASSERT_TRUE(node_->Flush(0).ok());
  for (int i = 0; i < 200 && TotalRecords() > 0; ++i) usleep(50 * 1000);
  EXPECT_EQ(TotalRecords(), 0u);
  for (uint64_t b = 0; b < 20; ++b) EXPECT_EQ(HomeBlock(b), Pattern(400 + b));
}

TEST_F(WriteLogTest, ReplayAfterLossRestoresLatestAcknowledgedData) {
  ASSERT_NO_FATAL_FAILURE(Init(5, 3));
  ASSERT_NO_FATAL_FAILURE(Start());
  // Block 1: destaged v1, then dirty v2. Block 2: v1 then v2, both dirty (superseded record).
  // Block 3: dirty, then trimmed. Block 20..35: a whole dirty object.
  ASSERT_TRUE(WriteBlock(1, Pattern(11)).ok());
  ASSERT_TRUE(node_->Flush(0).ok());
  ASSERT_TRUE(WriteBlock(1, Pattern(12)).ok());
  ASSERT_TRUE(WriteBlock(2, Pattern(21)).ok());
  ASSERT_TRUE(WriteBlock(2, Pattern(22)).ok());
  ASSERT_TRUE(WriteBlock(3, Pattern(31)).ok());
  ASSERT_TRUE(node_->Trim(1, 0, 3 * kBs, kBs, false).ok());
  for (uint64_t b = 32; b < 48; ++b) ASSERT_TRUE(WriteBlock(b, Pattern(b)).ok());
  // A stale record of block 3 older than the trim, as a crash before its reclaim would leave.
  v1::LogAppendRequest append;
  *append.add_records() = Record(1, 3, Pattern(31));
  ASSERT_TRUE(pool_->LogAppend(1, 0, 3, 2, append).ok());
  EXPECT_EQ(HomeBlock(1), Pattern(11)) << "write-back: v2 not home yet";

  node_.reset();  // the cache node is lost (its SSD is never read again)
  auto stats = datanode::ReplayCacheNodeLog(pool_.get(), 9, [](uint32_t vdi) { return vdi == 1 ? 3 : 0; });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->blocks_written, 18u);
  // The stale record of block 3 is skipped by the replay, or was reclaimed in the background
  // before the node was lost (the trim retires its block's records): either way block 3 stays
  // trimmed below, which is what matters. (Counting it as skipped raced with the reclaim under
  // a loaded sanitizer run.)
  EXPECT_EQ(HomeBlock(1), Pattern(12));
  EXPECT_EQ(HomeBlock(2), Pattern(22));
  EXPECT_EQ(HomeBlock(3), std::string(kBs, '\0'));
  for (uint64_t b = 32; b < 48; ++b) EXPECT_EQ(HomeBlock(b), Pattern(b)) << b;
  EXPECT_EQ(TotalRecords(), 0u);
  // A second replay finds nothing and changes nothing.
  stats = datanode::ReplayCacheNodeLog(pool_.get(), 9, [](uint32_t) { return 3; });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->blocks, 0u);
}

// A replay writes home in batches of runs (16 at a time): 40 runs of 40 objects all land, each
// counted once, and a block whose home holds a newer version is skipped, not failed.
TEST_F(WriteLogTest, ReplayOfManyRunsWritesThemHomeInBatches) {
  ASSERT_NO_FATAL_FAILURE(Init(4, 3));
  ASSERT_NO_FATAL_FAILURE(Start());
  pool_->ProbeAll(5000);
  for (uint64_t object = 0; object < 40; ++object) {
    ASSERT_TRUE(WriteBlock(object * 16 + 5, Pattern(object)).ok());
  }
  node_.reset();  // lost
  // Object 7's block is newer at home already (another owner wrote it after): skipped.
  datanode::HomeStamp newer{9, {1000000}, false, {1000}};
  ASSERT_TRUE(pool_->WriteAll(1, 7, 5, Pattern(99), 3, &newer).ok());
  auto stats = datanode::ReplayCacheNodeLog(pool_.get(), 9, [](uint32_t) { return 3; });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->blocks, 40u);
  EXPECT_EQ(stats->blocks_written, 39u);
  EXPECT_EQ(stats->blocks_skipped, 1u);
  for (uint64_t object = 0; object < 40; ++object) {
    EXPECT_EQ(HomeBlock(object * 16 + 5), object == 7 ? Pattern(99) : Pattern(object)) << object;
  }
}

TEST_F(WriteLogTest, DamagedDirtySlotsAreRestoredFromTheLog) {
  ASSERT_NO_FATAL_FAILURE(Init(4, 2));
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 8; ++b) ASSERT_TRUE(WriteBlock(b, Pattern(70 + b)).ok());
  node_.reset();
  // Flip a byte in every slot's data (data area starts at 1 MiB for 256 slots).
  auto corrupt_all = [&] {
    const int fd = ::open(config_.ssd_path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    for (uint64_t slot = 0; slot < 256; ++slot) {
      char c;
      const off_t off = static_cast<off_t>((1 << 20) + slot * kBs + 100);
      ASSERT_EQ(::pread(fd, &c, 1, off), 1);
      c = static_cast<char>(c ^ 0x5a);
      ASSERT_EQ(::pwrite(fd, &c, 1, off), 1);
    }
    ::fsync(fd);
    ::close(fd);
  };
  corrupt_all();
  Start();  // recovery finds the damage and restores each block from its log record
  EXPECT_GE(node_->recovery().torn_or_corrupt, 8u);
  EXPECT_EQ(node_->dirty_blocks(), 8u);
  // Damage again while running: reads (SSD hits) are served from the log and repaired.
  corrupt_all();
  for (uint64_t b = 0; b < 8; ++b) EXPECT_EQ(ReadBlock(b), Pattern(70 + b)) << b;
  EXPECT_NE(registry_.Render().find("ringcache_cachenode_ssd_repairs_total{node=\"9\"} 16"),
            std::string::npos);
  ASSERT_TRUE(node_->Flush(0).ok());
  for (uint64_t b = 0; b < 8; ++b) EXPECT_EQ(HomeBlock(b), Pattern(70 + b)) << b;
}

// A data node that is down misses the reclaim of the records its blocks' overwrites retired,
// and some of those copies rot meanwhile (a scrub lists them). When it is back, the collector
// drops the leftovers, the damaged ones too: left behind, they would stay listed for good.
TEST_F(WriteLogTest, DamagedLeftoverRecordsAreCollected) {
  ASSERT_NO_FATAL_FAILURE(Init(5, 2));
  // No background destage: it would retire the first writes' records before the data node
  // goes down, and the test would damage records already gone.
  config_.idle_ops_per_s = 1e9;
  config_.idle_window_ms = 1000000;
  config_.dirty_age_target_ms = 0;
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 32; ++b) ASSERT_TRUE(WriteBlock(b, Pattern(b)).ok());
  auto logs = LogsByDataNode();
  uint32_t down = 0;
  for (auto& [id, recs] : logs) {
    if (down == 0 || recs.size() > logs[down].size()) down = id;
  }
  ASSERT_GE(logs[down].size(), 2u);
  dns_->StopForTest(static_cast<int>(down - 1));
  // Every block written again: the old records are retired while `down` cannot hear it.
  for (uint64_t b = 0; b < 32; ++b) ASSERT_TRUE(WriteBlock(b, Pattern(100 + b)).ok());
  std::vector<datanode::ScrubFinding> rotten;
  for (const datanode::LogEntry& e : logs[down]) {
    if (rotten.size() == 2) break;
    ASSERT_TRUE(dns_->store(static_cast<int>(down - 1))->DamageLogRecordForTest(9, e.sequence)
                    .ok());
    datanode::ScrubFinding f;
    f.log = true;
    f.cache_node_id = 9;
    f.sequence = e.sequence;
    rotten.push_back(f);
  }
  // Records of the first round still held by data node `id`.
  auto leftovers_on = [&](uint32_t id) {
    size_t n = 0;
    auto now = LogsByDataNode();  // (a temporary's element would not outlive the loop's start)
    for (const datanode::LogEntry& e : now[id]) {
      for (const datanode::LogEntry& old : logs[id]) n += e.sequence == old.sequence;
    }
    return n;
  };
  // The reclaim went out (the live nodes dropped their copies) while `down` was down.
  auto live_leftovers = [&] {
    size_t n = 0;
    for (const auto& [id, recs] : logs) n += id == down ? 0 : leftovers_on(id);
    return n;
  };
  for (int i = 0; i < 300 && live_leftovers() > 0; ++i) usleep(50 * 1000);
  ASSERT_EQ(live_leftovers(), 0u);
  dns_->RestartForTest(static_cast<int>(down - 1));
  auto leftovers = [&] { return leftovers_on(down); };
  for (int i = 0; i < 300 && leftovers() > 0; ++i) usleep(50 * 1000);
  EXPECT_EQ(leftovers(), 0u) << "records retired while data node " << down << " was down";
  for (const auto& f : rotten) {
    EXPECT_FALSE(dns_->store(static_cast<int>(down - 1))->StillDamaged(f)) << f.sequence;
  }
  for (uint64_t b = 0; b < 32; ++b) EXPECT_EQ(ReadBlock(b), Pattern(100 + b)) << b;
}

TEST_F(WriteLogTest, RestartKeepsTheHotSetWarm) {
  ASSERT_NO_FATAL_FAILURE(Init(3, 2));
  config_.ssd_bytes = 1024 * kBs;
  config_.ram_bytes = 32 * kBs;  // RAM is not persistent: ~6% of the hot set, as by default
  ASSERT_NO_FATAL_FAILURE(Start());
  const uint64_t hot = 500;
  for (uint64_t b = 0; b < hot; ++b) ASSERT_TRUE(WriteBlock(b, Pattern(b)).ok());
  ASSERT_TRUE(node_->Flush(0).ok());  // clean, as a hot set usually is
  auto hit_ratio = [&] {
    std::vector<v1::VdiCacheStats> before, after;
    node_->Stats(1, &before);
    for (uint64_t b = 0; b < hot; ++b) EXPECT_EQ(ReadBlock(b), Pattern(b));
    node_->Stats(1, &after);
    const double hits = (after[0].hits_ram() + after[0].hits_ssd()) -
                        (before[0].hits_ram() + before[0].hits_ssd());
    return hits / hot;
  };
  hit_ratio();
  const double warm = hit_ratio();
  Start();  // restart on the same SSD file
  const double restarted = hit_ratio();
  EXPECT_GE(restarted, 0.9 * warm) << "warm " << warm << ", after restart " << restarted;
}

TEST_F(WriteLogTest, LogCopiesOnALostDataNodeAreWrittenAgainElsewhere) {
  ASSERT_NO_FATAL_FAILURE(Init(5, 3));
  config_.relog_after_ms = 300;
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 48; ++b) ASSERT_TRUE(WriteBlock(b * 7, Pattern(b)).ok());
  // Lose the data node that holds the most log copies.
  auto logs = LogsByDataNode();
  uint32_t lost = 0;
  for (auto& [id, recs] : logs) {
    if (lost == 0 || recs.size() > logs[lost].size()) lost = id;
  }
  ASSERT_GT(logs[lost].size(), 0u);
  dns_->StopForTest(static_cast<int>(lost - 1));
  // Every dirty block gets back to N-1 = 2 live copies of its current record.
  auto live_copies_ok = [&] {
    std::map<uint64_t, int> copies;
    for (auto& [id, recs] : LogsByDataNode()) {
      if (id == lost) continue;
      for (auto& r : recs) copies[r.sequence]++;
    }
    int full = 0;
    for (auto& [seq, c] : copies) full += c >= 2;
    return full >= 48;
  };
  bool ok = false;
  for (int i = 0; i < 200 && !(ok = live_copies_ok()); ++i) usleep(100 * 1000);
  EXPECT_TRUE(ok) << "dirty blocks still have copies on the lost data node only";
  // And a restart keeps pointing at the new records (the slots were updated).
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 48; ++b) EXPECT_EQ(ReadBlock(b * 7), Pattern(b)) << b;
}

// The partial partition: the coordinator takes the objects of a node it cannot reach and
// replays its log, while another gateway still sends the node writes. The replay seals the log
// first, so a write whose records were not durable when the scan ran is refused (kFenced: the
// gateway retries it on the new owner), never acknowledged and missed.
TEST_F(WriteLogTest, WriteOfANodeWhoseLogWasSealedIsNotAcknowledged) {
  ASSERT_NO_FATAL_FAILURE(Init(5, 3));
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(node_->ownership()->ObserveEpoch(5).ok());
  ASSERT_TRUE(WriteBlock(1, Pattern(1)).ok());
  const size_t before = TotalRecords();
  // The coordinator publishes epoch 6 without the node, seals its log and replays it.
  auto stats = datanode::ReplayCacheNodeLog(pool_.get(), 9, [](uint32_t) { return 3; }, 6);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(HomeBlock(1), Pattern(1));
  // The node, cut off from the coordinator, still stamps epoch 5.
  absl::Status late = WriteBlock(2, Pattern(2));
  EXPECT_TRUE(IsKind(late, ErrorKind::kFenced)) << late;
  EXPECT_NE(late.message().find("sealed"), std::string::npos) << late;
  EXPECT_EQ(TotalRecords(), 0u) << "no record of the refused write landed (the replay dropped "
                                   "the " << before << " before it)";
  EXPECT_EQ(HomeBlock(2), std::string(kBs, '\0'));
  // Re-admitted at a newer epoch, the node writes again.
  ASSERT_TRUE(node_->Readmit(7).ok());
  EXPECT_TRUE(WriteBlock(2, Pattern(3)).ok());
  EXPECT_EQ(ReadBlock(2), Pattern(3));
  // Seals and coordinator reclaims carry the term; a data node that has seen a newer
  // coordinator refuses them (a replay of a coordinator that lost its election stops there).
  pool_->SetControlTerm(9);
  ASSERT_TRUE(pool_->SealLog(9, 7).ok());
  EXPECT_EQ(dns_->store(0)->control_term(), 9u);
  ASSERT_TRUE(dns_->store(1)->ObserveControlTerm(12).ok());  // a newer coordinator spoke to it
  absl::Status stale = pool_->SealLog(9, 8);
  EXPECT_TRUE(IsKind(stale, ErrorKind::kStaleTerm)) << stale;
  EXPECT_EQ(pool_->LogReclaim(9, {}, 1000), std::vector<uint32_t>{dns_->endpoints()[1].id});
}

TEST_F(WriteLogTest, FencedNodeDoesNotLogAgainForALostDataNode) {
  // Cluster mode: a fenced node's log may already have been replayed and dropped by the gateway;
  // a record written again after that would outlive the replay (and a later replay would put it
  // over newer data). Relogging waits for the gate, like background destage.
  ASSERT_NO_FATAL_FAILURE(Init(5, 3));
  config_.relog_after_ms = 300;
  ASSERT_NO_FATAL_FAILURE(Start());
  std::atomic<bool> open{true};
  node_->SetDestageGate([&open] { return open.load(); });
  for (uint64_t b = 0; b < 48; ++b) ASSERT_TRUE(WriteBlock(b * 7, Pattern(b)).ok());
  open = false;  // fenced from here on (a fenced node refuses writes too: service_test)
  auto logs = LogsByDataNode();
  uint32_t lost = 0;
  for (auto& [id, recs] : logs) {
    if (lost == 0 || recs.size() > logs[lost].size()) lost = id;
  }
  ASSERT_GT(logs[lost].size(), 0u);
  auto live_records = [&] {
    size_t n = 0;
    for (auto& [id, recs] : LogsByDataNode()) n += id == lost ? 0 : recs.size();
    return n;
  };
  const size_t before = live_records();
  dns_->StopForTest(static_cast<int>(lost - 1));
  // Several relog checks (one a second) past relog_after_ms: nothing is logged again.
  usleep(2500 * 1000);
  EXPECT_EQ(live_records(), before) << "a fenced node logged dirty blocks again";
  // Once the gate opens (the lease is valid again), the lost copies are made again.
  open = true;
  bool relogged = false;
  for (int i = 0; i < 200 && !(relogged = live_records() > before); ++i) usleep(100 * 1000);
  EXPECT_TRUE(relogged) << "no relog after the gate opened";
  node_->SetDestageGate(nullptr);
}

}  // namespace
}  // namespace ringcache::cachenode
