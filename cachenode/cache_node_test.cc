// CacheNode against real data nodes (embedded, over gRPC on 127.0.0.1): data path, restart
// recovery, eviction with destage, cache modes, corruption, trim, idle destage, concurrency.
#include "cachenode/cache_node.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <thread>

#include "cachenode/stripes.h"
#include "cachenode/testing/cache_node_harness.h"
#include "gtest/gtest.h"

namespace ringcache::cachenode {
namespace {

constexpr uint32_t kBs = 4096;
constexpr uint32_t kObj = 64 * 1024;  // 16 blocks per object: small objects, many of them

class CacheNodeTest : public testing::CacheNodeHarness {
 protected:
  void SetUp() override { SetUpCluster(3, 2, 1); }
  // Writes/reads at a VDI byte offset that may span objects.
  absl::Status Write(uint64_t off, const std::string& data) {
    uint64_t done = 0;
    while (done < data.size()) {
      const uint64_t pos = off + done;
      const uint32_t in = pos % kObj;
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(data.size() - done, kObj - in));
      absl::Status s = node_->Write(1, pos / kObj, in, n, data.data() + done);
      if (!s.ok()) return s;
      done += n;
    }
    return absl::OkStatus();
  }
  std::string Read(uint64_t off, uint64_t len) {
    std::string out(len, '\0');
    uint64_t done = 0;
    while (done < len) {
      const uint64_t pos = off + done;
      const uint32_t in = pos % kObj;
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(len - done, kObj - in));
      EXPECT_TRUE(node_->Read(1, pos / kObj, in, n, out.data() + done).ok());
      done += n;
    }
    return out;
  }
  // Reads a block straight from the data nodes (what a cache miss would see).
  std::string HomeBlock(uint64_t block) {
    auto run = pool_->Read(1, block / (kObj / kBs), block % (kObj / kBs), 1, 2, kBs);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? run->data : "";
  }
  // `threads` writers, each of `blocks` distinct blocks (writer t: blocks t*blocks...), block b
  // holding Pattern(seed + b); returns how many writes failed.
  int WriteDistinctBlocks(int threads, int blocks, uint64_t seed) {
    std::atomic<int> errors{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t) {
      writers.emplace_back([&, t] {
        for (int b = 0; b < blocks; ++b) {
          const uint64_t block = static_cast<uint64_t>(t) * blocks + b;
          if (!Write(block * kBs, Pattern(seed + block, kBs)).ok()) ++errors;
        }
      });
    }
    for (auto& w : writers) w.join();
    return errors.load();
  }
  static std::string Pattern(uint64_t seed, size_t n) {
    std::string s(n, '\0');
    std::mt19937_64 r(seed);
    for (char& c : s) c = static_cast<char>(r());
    return s;
  }
  // Writer `t` of `threads`: writes block b = i * threads + t (i < blocks) with pattern
  // b * 10 + round and reads it back, `rounds` times over, counting failures in *errors;
  // `also(i, b)` runs after each block.
  void WriteVerify(int t, int threads, int blocks, int rounds, std::atomic<int>* errors,
                   const std::function<bool(int i, uint64_t b)>& also = nullptr) {
    for (int r = 0; r < rounds; ++r) {
      for (int i = 0; i < blocks; ++i) {
        const uint64_t b = uint64_t(i) * threads + t;
        const std::string data = Pattern(b * 10 + r, kBs);
        if (!Write(b * kBs, data).ok()) ++*errors;
        if (Read(b * kBs, kBs) != data) ++*errors;
        if (also && !also(i, b)) ++*errors;
      }
    }
  }
};

TEST_F(CacheNodeTest, UnalignedWritesReadBackAndUnwrittenIsZero) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a = Pattern(1, 10000);
  ASSERT_TRUE(Write(kObj - 3000, a).ok());  // crosses an object boundary, partial blocks
  EXPECT_EQ(Read(kObj - 3000, a.size()), a);
  EXPECT_EQ(Read(5 * kObj, 8192), std::string(8192, '\0'));
  EXPECT_GT(node_->dirty_blocks(), 0u);
}

TEST_F(CacheNodeTest, DirtyBlocksSurviveRestartAndFlushReachesHome) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a = Pattern(2, 3 * kBs);
  ASSERT_TRUE(Write(7 * kBs, a).ok());
  const uint64_t dirty = node_->dirty_blocks();
  EXPECT_EQ(dirty, 3u);
  EXPECT_EQ(HomeBlock(7), std::string(kBs, '\0')) << "write-back: nothing home yet";
  Start();  // restart on the same SSD file
  EXPECT_EQ(node_->recovery().slots_dirty, 3u);
  EXPECT_EQ(node_->dirty_blocks(), 3u);
  EXPECT_EQ(Read(7 * kBs, a.size()), a);
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(8), a.substr(kBs, kBs));
}

// A flush ends while writes go on: it destages the blocks dirty when it began, each in its
// newest copy, and leaves those written meanwhile. (It used to loop until no block was dirty,
// which never ended under a writer faster than destage: a fault run's flush under a side load
// ran out of its 400 s.) Here every destage the flush plans dirties a block of a new object.
TEST_F(CacheNodeTest, FlushEndsWhileWritesGoOn) {
  ASSERT_NO_FATAL_FAILURE(Start());
  constexpr uint64_t kPerObj = kObj / kBs;
  // Objects whose stripes differ from every other one's (the node hashes as this copy does):
  // the hook writes while the flush holds the stripe of the object it destages.
  ObjectStripes stripes;
  std::set<const absl::Mutex*> taken;
  uint64_t next = 0;
  auto fresh_object = [&] {
    while (!taken.insert(&stripes.Of(1, next)).second) ++next;
    return next++;
  };
  std::vector<uint64_t> before;
  for (int i = 0; i < 8; ++i) {
    before.push_back(fresh_object());
    ASSERT_TRUE(Write(before.back() * kObj, Pattern(before.back(), kBs)).ok());
  }
  const std::thread::id flusher = std::this_thread::get_id();
  int planned = 0;
  int written_meanwhile = 0;
  node_->SetDestagePlannedHookForTest([&] {
    if (std::this_thread::get_id() != flusher) return;  // a background destage
    ++planned;
    if (written_meanwhile >= 24) return;  // bounded, so that the old loop ended too
    const uint64_t o = fresh_object();
    EXPECT_TRUE(Write(o * kObj, Pattern(o, kBs)).ok());
    ++written_meanwhile;
  });
  ASSERT_TRUE(node_->Flush(0).ok());
  node_->SetDestagePlannedHookForTest(nullptr);
  EXPECT_LE(planned, static_cast<int>(before.size()))
      << "the flush destaged blocks written after it began";
  for (uint64_t o : before) EXPECT_EQ(HomeBlock(o * kPerObj), Pattern(o, kBs)) << "object " << o;
  EXPECT_GT(node_->dirty_blocks(), 0u) << "the blocks written during the flush are still dirty";
}

// A new SSD (docs/durability.md, "Incarnations"): the node's dirty blocks live on only in its
// log records on the data nodes. The new incarnation replays them home before it serves, and
// its own writes order after everything the old one wrote (else the data nodes would refuse
// their destage as older).
TEST_F(CacheNodeTest, NewSsdReplaysTheOldIncarnationsLogBeforeServing) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string old_id = node_->incarnation();
  const std::string a = Pattern(3, 4 * kBs);
  ASSERT_TRUE(Write(20 * kBs, a).ok());
  ASSERT_EQ(node_->dirty_blocks(), 4u);
  EXPECT_EQ(HomeBlock(20), std::string(kBs, '\0')) << "write-back: nothing home yet";
  node_.reset();
  // The new disk: the slot file and every state file beside it.
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    if (e.path().filename().string().rfind("ssd.slots", 0) == 0) std::filesystem::remove(e.path());
  }
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_NE(node_->incarnation(), old_id);
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(21), a.substr(kBs, kBs));
  EXPECT_EQ(Read(20 * kBs, a.size()), a);
  const std::string b = Pattern(4, kBs);
  ASSERT_TRUE(Write(21 * kBs, b).ok());
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(21), b);
}

// The old SSD put back after a new one took over (docs/durability.md, "Incarnations"): its dirty
// blocks went home with the takeover and were overwritten since, so serving them would return
// stale data. The data nodes record the newer store as the node's current one; the old one is
// refused, the current one starts.
TEST_F(CacheNodeTest, OldSsdPutBackAfterATakeoverIsRefused) {
  namespace fs = std::filesystem;
  // Moves the disk (the slot file and the state files beside it) from one directory to another.
  auto move_disk = [](const fs::path& from, const fs::path& to) {
    fs::create_directories(to);
    for (const auto& e : fs::directory_iterator(from)) {
      if (e.path().filename().string().rfind("ssd.slots", 0) == 0) {
        fs::rename(e.path(), to / e.path().filename());
      }
    }
  };
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a = Pattern(5, 2 * kBs);
  ASSERT_TRUE(Write(30 * kBs, a).ok());  // dirty on the old SSD
  node_.reset();
  move_disk(dir_, dir_ + "/old-disk");
  Start();  // the new SSD takes over: the old one's blocks go home
  const std::string current = node_->incarnation();
  const std::string b = Pattern(6, 2 * kBs);
  ASSERT_TRUE(Write(30 * kBs, b).ok());
  ASSERT_TRUE(node_->Flush(0).ok());
  node_.reset();
  move_disk(dir_, dir_ + "/current-disk");  // the old disk put back, the current one aside
  move_disk(dir_ + "/old-disk", dir_);
  auto stale = CacheNode::Create(config_, pool_.get(), Clock::Real(), &registry_);
  ASSERT_FALSE(stale.ok()) << "an old SSD holding stale dirty blocks was served";
  EXPECT_TRUE(absl::IsFailedPrecondition(stale.status())) << stale.status();
  EXPECT_NE(stale.status().message().find(current), absl::string_view::npos) << stale.status();
  move_disk(dir_, dir_ + "/stale-disk");
  move_disk(dir_ + "/current-disk", dir_);
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(node_->incarnation(), current);
  EXPECT_EQ(Read(30 * kBs, b.size()), b);
}

// A data node that lost its store learns the VDI again, incomplete for it (docs/durability.md,
// "Absent is not zero"): reads never take its "absent" for zeros while another replica holds
// the block, repair it from that replica, and fail (never zeros) when only it answers.
TEST_F(CacheNodeTest, IncompleteReplicaNeverAnswersZerosForABlockOthersHold) {
  const std::string a = Pattern(5, kBs);
  datanode::HomeStamp stamp{7, {100}, false, {3}};
  ASSERT_TRUE(pool_->WriteAll(1, 0, 0, a, 2, &stamp).ok());
  auto homes = pool_->Homes(1, 0, 2);
  ASSERT_TRUE(homes.ok());
  auto index_of = [&](uint32_t id) {
    for (size_t i = 0; i < dns_->endpoints().size(); ++i) {
      if (dns_->endpoints()[i].id == id) return static_cast<int>(i);
    }
    return -1;
  };
  const int wiped = index_of((*homes)[0]), other = index_of((*homes)[1]);
  auto wipe = [&] {  // the store lost everything and learnt the VDI again, unvouched
    ASSERT_TRUE(dns_->store(wiped)->DeleteVdi(1).ok());
    ASSERT_TRUE(dns_->store(wiped)->PutVdi(geometry_, /*complete=*/false).ok());
    EXPECT_FALSE(dns_->store(wiped)->VdiComplete(1));
  };
  wipe();
  // Whichever replica a read asks first, it returns the data; asked first, the wiped one gets
  // the block back from the other.
  for (bool wiped_first : {false, true}) {
    pool_->set_read_order_for_test([&, wiped_first](std::vector<uint32_t>* ids) {
      std::sort(ids->begin(), ids->end(), [&](uint32_t x, uint32_t y) {
        return (x == (*homes)[0]) == wiped_first && (y == (*homes)[0]) != wiped_first;
      });
    });
    auto run = pool_->Read(1, 0, 0, 1, 2, kBs);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->data, a);
    EXPECT_TRUE(run->present[0]);
    EXPECT_EQ(dns_->store(wiped)->ReadBlocks(1, 0, 0, 1)->present[0], wiped_first);
  }
  auto healed = dns_->store(wiped)->ReadBlocks(1, 0, 0, 1);
  ASSERT_TRUE(healed.ok());
  EXPECT_TRUE(healed->present[0]) << "the incomplete replica was not repaired";
  EXPECT_EQ(healed->data, a);
  EXPECT_EQ(healed->versions[0].seq, 100u);  // the good copy's version, kept
  auto alloc = pool_->Presence(1, 0, 0, 2, 2);
  ASSERT_TRUE(alloc.ok());
  EXPECT_EQ(*alloc, (std::vector<bool>{true, false}));  // block 1: no replica holds it
  // Every replica answers and all are incomplete (both wiped): the block is lost, an error,
  // never zeros.
  wipe();
  ASSERT_TRUE(dns_->store(other)->DeleteVdi(1).ok());
  ASSERT_TRUE(dns_->store(other)->PutVdi(geometry_, /*complete=*/false).ok());
  auto gone = pool_->Read(1, 0, 0, 1, 2, kBs);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kDataLoss) << gone.status();
  ASSERT_TRUE(dns_->store(other)->PutVdi(geometry_, /*complete=*/true).ok());  // back: vouched
  ASSERT_TRUE(dns_->store(other)->WriteBlocks(1, 0, 0, a, {}, {7, {100}, false, false, {3}}).ok());
  // Only the incomplete replica answers (the complete one is down): unavailable, never zeros;
  // block status says allocated.
  dns_->StopForTest(other);
  auto lone = pool_->Read(1, 0, 0, 1, 2, kBs);
  EXPECT_EQ(lone.status().code(), absl::StatusCode::kUnavailable) << lone.status();
  auto lone_alloc = pool_->Presence(1, 0, 0, 1, 2);
  ASSERT_TRUE(lone_alloc.ok());
  EXPECT_TRUE((*lone_alloc)[0]);
  EXPECT_GE(pool_->unconfirmed_reads(), 2u);
  // Vouching (a finished refill) makes its answers authoritative again.
  ASSERT_TRUE(dns_->store(wiped)->PutVdi(geometry_, /*complete=*/true).ok());
  auto after = pool_->Read(1, 0, 0, 1, 2, kBs);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->present[0]);
}

// With a state directory, every state file goes there and nothing is created beside the SSD
// (a block device's /dev entry must never get neighbours); the dirty data survives a restart.
TEST_F(CacheNodeTest, StateFilesGoToTheStateDirectory) {
  const std::string ssd_dir = dir_ + "/ssd", state = dir_ + "/state";
  std::filesystem::create_directories(ssd_dir);
  std::filesystem::create_directories(state);
  config_.ssd_path = ssd_dir + "/device";
  config_.state_dir = state;
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a = Pattern(5, 2 * kBs);
  ASSERT_TRUE(Write(3 * kBs, a).ok());
  Start();  // restart: ownership, VDIs and log sequence come back from the state directory
  EXPECT_EQ(node_->dirty_blocks(), 2u);
  EXPECT_EQ(Read(3 * kBs, a.size()), a);
  std::vector<std::string> beside, kept;
  for (const auto& e : std::filesystem::directory_iterator(ssd_dir)) {
    beside.push_back(e.path().filename());
  }
  for (const auto& e : std::filesystem::directory_iterator(state)) {
    kept.push_back(e.path().filename());
  }
  EXPECT_EQ(beside, std::vector<std::string>{"device"});
  EXPECT_FALSE(kept.empty());
  for (const std::string& f : kept) EXPECT_EQ(f.rfind("cache.", 0), 0u) << f;
}

// A block device without a state directory is a configuration error (no file is created).
TEST_F(CacheNodeTest, BlockDeviceWithoutStateDirectoryIsRefused) {
  std::string device;
  for (const auto& e : std::filesystem::directory_iterator("/dev")) {
    if (e.is_block_file()) {
      device = e.path();
      break;
    }
  }
  if (device.empty()) GTEST_SKIP() << "no block device in /dev";
  CacheNodeConfig c = config_;
  c.ssd_path = device;
  c.state_dir.clear();
  const absl::Status s = c.Validate();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("--state-dir"), std::string::npos) << s;
  c.state_dir = dir_;
  EXPECT_TRUE(c.Validate().ok());
}

TEST_F(CacheNodeTest, EvictionDestagesDirtyBlocksBeforeReuse) {
  ASSERT_NO_FATAL_FAILURE(Start());
  // Four times the cache: most blocks are evicted, and each dirty one must be destaged first.
  const int blocks = 1024;
  for (int b = 0; b < blocks; ++b) {
    ASSERT_TRUE(Write(static_cast<uint64_t>(b) * kBs, Pattern(100 + b, kBs)).ok()) << b;
  }
  for (int b = 0; b < blocks; ++b) {
    ASSERT_EQ(Read(static_cast<uint64_t>(b) * kBs, kBs), Pattern(100 + b, kBs)) << "block " << b;
  }
  // An evicted block stays in the map (serving reads) until the reclaimer has destaged and freed
  // it; under load the reclaimer may still be behind here. Once it has caught up, the cache holds
  // no more than its SSD's slots (waits up to 30 s for that, then fails).
  for (int i = 0; i < 3000 && node_->cached_blocks() > 256; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(node_->cached_blocks(), 256u);
}

TEST_F(CacheNodeTest, ModesAndLeavingWriteBackDestagesFirst) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Write(0, Pattern(3, kBs)).ok());
  EXPECT_EQ(node_->dirty_blocks(), 1u);
  ASSERT_TRUE(node_->SetMode(1, CacheMode::kWriteThrough).ok());
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(0), Pattern(3, kBs));
  // Write-through: home at once, cached clean.
  ASSERT_TRUE(Write(kBs, Pattern(4, kBs)).ok());
  EXPECT_EQ(HomeBlock(1), Pattern(4, kBs));
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  // Write-around: home at once, the cached copy dropped.
  ASSERT_TRUE(node_->SetMode(1, CacheMode::kWriteAround).ok());
  const uint64_t before = node_->cached_blocks();
  ASSERT_TRUE(Write(kBs, Pattern(5, kBs)).ok());
  EXPECT_EQ(HomeBlock(1), Pattern(5, kBs));
  EXPECT_EQ(node_->cached_blocks(), before - 1);
  EXPECT_EQ(Read(kBs, kBs), Pattern(5, kBs));
  // Pass-through: reads do not fill the cache.
  ASSERT_TRUE(node_->SetMode(1, CacheMode::kPassThrough).ok());
  const uint64_t cached = node_->cached_blocks();
  for (int b = 20; b < 40; ++b) Read(static_cast<uint64_t>(b) * kBs, kBs);
  EXPECT_EQ(node_->cached_blocks(), cached);
  EXPECT_EQ(*node_->GetMode(1), CacheMode::kPassThrough);
}

TEST_F(CacheNodeTest, CorruptCleanSlotIsRefetchedNeverReturned) {
  config_.ram_bytes = 0;  // keep the block on SSD
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(node_->SetMode(1, CacheMode::kWriteThrough).ok());
  const std::string a = Pattern(6, kBs);
  ASSERT_TRUE(Write(3 * kBs, a).ok());
  node_.reset();
  // Flip every byte that matches the block's first 64 bytes in the slot file.
  {
    std::string file(std::filesystem::file_size(config_.ssd_path), '\0');
    int fd = ::open(config_.ssd_path.c_str(), O_RDWR);
    ASSERT_EQ(::pread(fd, file.data(), file.size(), 0), static_cast<ssize_t>(file.size()));
    const size_t pos = file.find(a.substr(0, 64));
    ASSERT_NE(pos, std::string::npos);
    char c = static_cast<char>(file[pos + 100] ^ 0x5a);
    ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(pos + 100)), 1);
    ::close(fd);
  }
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(Read(3 * kBs, kBs), a) << "a corrupt clean copy is replaced by the home copy";
}

TEST_F(CacheNodeTest, WriteZeroesAndTrim) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Write(0, Pattern(7, 4 * kBs)).ok());
  ASSERT_TRUE(node_->Trim(1, 0, 1000, 2 * kBs, /*zero=*/true).ok());
  const std::string got = Read(0, 4 * kBs);
  const std::string want = Pattern(7, 4 * kBs);
  EXPECT_EQ(got.substr(0, 1000), want.substr(0, 1000));
  EXPECT_EQ(got.substr(1000, 2 * kBs), std::string(2 * kBs, '\0'));
  EXPECT_EQ(got.substr(1000 + 2 * kBs), want.substr(1000 + 2 * kBs));
  std::vector<bool> alloc;
  ASSERT_TRUE(node_->Allocation(1, 1, 0, kObj, &alloc).ok());
  EXPECT_EQ(std::count(alloc.begin(), alloc.end(), true), 0);
  ASSERT_TRUE(node_->Allocation(1, 0, 0, 4 * kBs, &alloc).ok());
  EXPECT_EQ(alloc, (std::vector<bool>{true, false, true, true}));  // block 1 wholly zeroed
}

// Block status of a cached hole: a block never written, read (and cached, as zeros, by a policy
// that admits every miss), is still a hole; a written one is allocated while only the cache has
// it, and after its destage.
TEST_F(CacheNodeTest, ACachedHoleIsStillReportedUnallocated) {
  config_.policy = "vbq+lru";  // every read miss admitted
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string zeros(2 * kBs, '\0');
  ASSERT_EQ(Read(0, 2 * kBs), zeros);
  ASSERT_EQ(Read(0, 2 * kBs), zeros);
  EXPECT_EQ(node_->cached_blocks(), 2u);
  ASSERT_TRUE(Write(3 * kBs, Pattern(4, kBs)).ok());
  std::vector<bool> alloc;
  ASSERT_TRUE(node_->Allocation(1, 0, 0, 4 * kBs, &alloc).ok());
  EXPECT_EQ(alloc, (std::vector<bool>{false, false, false, true}));
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  ASSERT_TRUE(node_->Allocation(1, 0, 0, 4 * kBs, &alloc).ok());
  EXPECT_EQ(alloc, (std::vector<bool>{false, false, false, true}));
}

TEST_F(CacheNodeTest, IdleNodeDestagesByItself) {
  config_.idle_ops_per_s = 1;
  config_.idle_window_ms = 100;
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Write(0, Pattern(8, 8 * kBs)).ok());
  // Bounded wait for the background destager (a liveness check, not a speed assertion).
  for (int i = 0; i < 600 && node_->dirty_blocks() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(5), Pattern(8, 8 * kBs).substr(5 * kBs, kBs));
}

// Destage writes the runs of several objects together: each data node gets one request for a
// batch (its log port, node-api 3), not one per run; every block lands on both homes.
TEST_F(CacheNodeTest, DestageSendsEachDataNodeOneRequestPerBatch) {
  // Idle once writes stop for 2 s: the 8 writes below are dirty together by then.
  config_.idle_ops_per_s = 1;
  config_.idle_window_ms = 2000;
  ASSERT_NO_FATAL_FAILURE(Start());
  pool_->ProbeAll(5000);  // the data nodes' log ports and node-api
  const double before = dns_->LogPortBlockWrites();
  // One block in each of 8 objects: 8 runs, not adjacent.
  for (uint64_t object = 0; object < 8; ++object) {
    ASSERT_TRUE(Write(object * kObj + 3 * kBs, Pattern(static_cast<int>(object), kBs)).ok());
  }
  // Bounded wait for the background destager (a liveness check, not a speed assertion).
  for (int i = 0; i < 600 && node_->dirty_blocks() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(node_->dirty_blocks(), 0u);
  // 8 runs on 2 homes each among 3 data nodes: 16 requests one by one, at most 3 batched.
  EXPECT_LE(dns_->LogPortBlockWrites() - before, 3) << "a request per run and home";
  for (uint64_t object = 0; object < 8; ++object) {
    EXPECT_EQ(HomeBlock(object * (kObj / kBs) + 3), Pattern(static_cast<int>(object), kBs));
  }
}

TEST_F(CacheNodeTest, ClosedDestageGateStopsBackgroundDestageButNotFlush) {
  // Cluster mode: a fenced node must not write home in the background (its objects may already
  // have a new owner); the gateway's explicit Flush still destages.
  config_.idle_ops_per_s = 1;
  config_.idle_window_ms = 100;
  ASSERT_NO_FATAL_FAILURE(Start());
  std::atomic<bool> open{true};
  node_->SetDestageGate([&open] { return open.load(); });
  ASSERT_TRUE(Write(0, Pattern(8, 8 * kBs)).ok());
  open.store(false);  // fenced from here on (writes are refused too: service_test)
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // several idle windows
  EXPECT_EQ(node_->dirty_blocks(), 8u) << "destaged while fenced";
  EXPECT_EQ(HomeBlock(5), std::string(kBs, '\0'));
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(5), Pattern(8, 8 * kBs).substr(5 * kBs, kBs));
  node_->SetDestageGate(nullptr);
}

TEST_F(CacheNodeTest, DropBlocksKeepsOwnedObjectsAndNeverDestages) {
  ASSERT_NO_FATAL_FAILURE(Start());
  // Two members: find one object this node (id 1) owns and one it does not.
  ring::RingConfig rc;
  rc.members = {{1, 1.0, ""}, {2, 1.0, ""}};
  rc.cached_owners = 1;
  auto ring = ring::Ring::Build(rc);
  ASSERT_TRUE(ring.ok());
  int64_t mine = -1, theirs = -1;
  for (uint64_t o = 0; o < 64 && (mine < 0 || theirs < 0); ++o) {
    (ring->Owner(ring::ObjectKey{1, o}) == 1 ? mine : theirs) = static_cast<int64_t>(o);
  }
  ASSERT_GE(mine, 0);
  ASSERT_GE(theirs, 0);
  ASSERT_TRUE(Write(mine * kObj, Pattern(3, kBs)).ok());
  ASSERT_TRUE(Write(theirs * kObj, Pattern(4, kBs)).ok());
  // Dirty blocks survive a ring-filtered drop (they were not settled).
  auto r = node_->DropBlocks(false, &*ring);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dropped, 0u);
  EXPECT_EQ(r->dirty_kept, 1u);
  ASSERT_TRUE(node_->Flush(0).ok());
  r = node_->DropBlocks(false, &*ring);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dropped, 1u) << "the clean block of the object owned by node 2";
  EXPECT_EQ(node_->cached_blocks(), 1u);
  // Drop all: dirty blocks go too, without reaching home.
  ASSERT_TRUE(Write(mine * kObj + kBs, Pattern(5, kBs)).ok());
  r = node_->DropBlocks(true, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dropped, 2u);
  EXPECT_EQ(node_->cached_blocks(), 0u);
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(mine * (kObj / kBs) + 1), std::string(kBs, '\0'));
  EXPECT_EQ(Read(mine * kObj, kBs), Pattern(3, kBs)) << "destaged earlier: read from home";
}

TEST_F(CacheNodeTest, InvalidateVdiDropsCleanBlocksKeepsDirtyOnesAndLosesNoConcurrentWrite) {
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 10; ++b) ASSERT_TRUE(Write(b * kBs, Pattern(b, kBs)).ok());
  ASSERT_TRUE(node_->Flush(0).ok());
  ASSERT_TRUE(Write(20 * kBs, Pattern(20, kBs)).ok());  // dirty: the only copy
  const CacheNode::Usage before = node_->usage();
  EXPECT_EQ(before.dirty_bytes, kBs);
  EXPECT_GE(before.ssd_used_bytes, 11u * kBs);
  EXPECT_GT(before.ssd_bytes, before.ssd_used_bytes);
  auto r = node_->InvalidateVdi(1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dropped, 10u);
  EXPECT_EQ(r->dirty_kept, 1u);
  EXPECT_EQ(node_->cached_blocks(), 1u);
  EXPECT_LT(node_->usage().ssd_used_bytes, before.ssd_used_bytes);
  for (uint64_t b = 0; b < 10; ++b) EXPECT_EQ(Read(b * kBs, kBs), Pattern(b, kBs)) << b;
  EXPECT_EQ(Read(20 * kBs, kBs), Pattern(20, kBs));
  EXPECT_EQ(node_->InvalidateVdi(99).status().code(), absl::StatusCode::kFailedPrecondition);

  // Writers go on while the VDI is invalidated over and over: a block dirtied between the scan
  // and its drop is kept, so every write reads back.
  constexpr int kThreads = 3, kBlocks = 60, kRounds = 4;
  std::atomic<int> errors{0};
  std::atomic<bool> writing{true};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] { WriteVerify(t, kThreads, kBlocks, kRounds, &errors); });
  }
  std::thread invalidator([&] {
    while (writing.load()) {
      if (!node_->InvalidateVdi(1).ok()) ++errors;
    }
  });
  for (auto& w : writers) w.join();
  writing = false;
  invalidator.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_TRUE(node_->InvalidateVdi(1).ok());
  for (uint64_t b = 0; b < kThreads * kBlocks; ++b) {
    ASSERT_EQ(Read(b * kBs, kBs), Pattern(b * 10 + kRounds - 1, kBs)) << b;
  }
}

TEST_F(CacheNodeTest, DirtyHighWatermarkForcesDestageUnderLoad) {
  // Never idle, so only the watermark can start destage: above 20% of the 256 slots dirty it must
  // destage down to below 10%, even though the foreground keeps writing.
  config_.dirty_high_watermark = 0.2;
  config_.dirty_low_watermark = 0.1;
  ASSERT_NO_FATAL_FAILURE(Start());
  for (int b = 0; b < 80; ++b) ASSERT_TRUE(Write(static_cast<uint64_t>(b) * kBs, Pattern(300 + b, kBs)).ok());
  for (int i = 0; i < 600 && node_->dirty_blocks() >= 0.1 * 256; ++i) {
    ASSERT_TRUE(Write(100 * kBs, Pattern(i, kBs)).ok());  // keep the node busy
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LT(node_->dirty_blocks(), 0.1 * 256);
  EXPECT_EQ(HomeBlock(3), Pattern(303, kBs)) << "destaged blocks reached their home replicas";
}

TEST_F(CacheNodeTest, AgingDestagesOldDirtyBlocksUnderLoadBelowTheWatermarks) {
  // Never idle and far below the watermarks (20 of 256 slots): only the age target can start
  // destage. Blocks dirty for more than half of 400 ms go home while the foreground keeps
  // writing one other block.
  config_.dirty_age_target_ms = 400;
  ASSERT_NO_FATAL_FAILURE(Start());
  for (int b = 0; b < 20; ++b) ASSERT_TRUE(Write(static_cast<uint64_t>(b) * kBs, Pattern(500 + b, kBs)).ok());
  bool home = false;
  for (int i = 0; i < 400 && !home; ++i) {
    ASSERT_TRUE(Write(100 * kBs, Pattern(i, kBs)).ok());  // keep the node busy
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    home = HomeBlock(19) == Pattern(519, kBs);
  }
  EXPECT_TRUE(home) << "the oldest dirty blocks reached their home replicas under load";
  EXPECT_EQ(HomeBlock(0), Pattern(500, kBs));
  EXPECT_LT(node_->dirty_blocks(), 20u);
}

TEST_F(CacheNodeTest, WritersAreHeldBeforeTheDirtyCapNeverFailed) {
  // 256 slots: writers slow down above 10% dirty and are held at 20%; destage is forced from
  // 10% and runs unpaced at the cap. Four writers of 120 distinct blocks each (more than the
  // cap) all succeed, and the throttle shows in the metrics.
  config_.dirty_high_watermark = 0.1;
  config_.dirty_low_watermark = 0.05;
  config_.dirty_cap = 0.2;
  config_.dirty_age_target_ms = 0;
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(WriteDistinctBlocks(4, 30, 700), 0);
  for (uint64_t b = 0; b < 4 * 30; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(700 + b, kBs)) << b;
  const std::string text = registry_.Render();
  const size_t at = text.find("ringcache_cachenode_writes_throttled_total{");
  ASSERT_NE(at, std::string::npos) << text;
  const double throttled = std::stod(text.substr(text.find('}', at) + 1));
  EXPECT_GT(throttled, 0) << "writes above the high watermark were held back";
}

// The default's frequency gate (sieve(freq=1)) shows its bar per VDI: -1 until the VDI's first
// eviction, then the mean estimate of its recent victims; and its region test's margin
// (region_adapt=1): -1 until the test admitted a block of the VDI, then within 0-8; and a write
// budget's margin (budget=2), the same; the node's stats carry them.
TEST_F(CacheNodeTest, TheFrequencyGateShowsItsBarPerVdi) {
  config_.policy = "vbq(share=utility)+arc+sieve(freq=1,region_adapt=1,budget=2)+lcr";
  config_.ram_bytes = 0;
  ASSERT_NO_FATAL_FAILURE(Start());
  auto gauge = [&](const std::string& name) {
    const std::string text = registry_.Render();
    const size_t at = text.find(name + "{");
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? -2.0 : std::stod(text.substr(text.find('}', at) + 1));
  };
  EXPECT_EQ(gauge("ringcache_vdi_admission_victim_frequency"), -1.0);
  EXPECT_EQ(gauge("ringcache_vdi_admission_region_margin"), -1.0);
  EXPECT_EQ(gauge("ringcache_vdi_admission_budget_margin"), -1.0);
  // 600 blocks read once and 300 of them again: more than the 256 slots, so blocks leave.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t b = 0; b < (pass == 0 ? 600u : 300u); ++b) Read(b * kBs, kBs);
  }
  EXPECT_GE(gauge("ringcache_vdi_admission_victim_frequency"), 0.0);
  const double margin = gauge("ringcache_vdi_admission_region_margin");
  EXPECT_TRUE(margin >= 0 && margin <= 8) << margin;
  const double budget_margin = gauge("ringcache_vdi_admission_budget_margin");
  EXPECT_TRUE(budget_margin >= 0 && budget_margin <= 8) << budget_margin;
  // The same state in the node's stats (`ringcachectl stats`' ADMISSION column).
  std::vector<v1::VdiCacheStats> stats;
  node_->Stats(0, &stats);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_TRUE(stats[0].has_admit_bar());
  EXPECT_NEAR(stats[0].admit_bar(), gauge("ringcache_vdi_admission_victim_frequency"), 1e-3);
  ASSERT_TRUE(stats[0].has_admit_region_margin());
  EXPECT_EQ(stats[0].admit_region_margin(), margin);
  ASSERT_TRUE(stats[0].has_admit_budget_margin());
  EXPECT_EQ(stats[0].admit_budget_margin(), budget_margin);
  EXPECT_FALSE(stats[0].has_admit_first()) << "the default's sieve does not climb";
}

// The default judges write misses as read misses (sieve writes=1): once the VDI's queue has
// evicted, a block written for the first time goes home (durable on the data nodes, nothing
// dirty in the cache), counted as rejected and bypassed; written again it is cached, dirty.
// Everything reads back.
TEST_F(CacheNodeTest, AFirstWriteTheAdmissionRefusesGoesHomeASecondIsCached) {
  config_.ram_bytes = 0;
  ASSERT_NO_FATAL_FAILURE(Start());  // the default policy
  for (uint64_t b = 0; b < 600; ++b) Read(b * kBs, kBs);  // more than the 256 slots: evictions
  const uint64_t dirty = node_->dirty_blocks();
  for (uint64_t b = 1000; b < 1020; ++b) ASSERT_TRUE(Write(b * kBs, Pattern(b, kBs)).ok());
  EXPECT_EQ(node_->dirty_blocks(), dirty);
  for (uint64_t b = 1000; b < 1020; ++b) {
    EXPECT_EQ(HomeBlock(b), Pattern(b, kBs)) << b;  // home at once
    EXPECT_EQ(Read(b * kBs, kBs), Pattern(b, kBs)) << b;
  }
  std::vector<v1::VdiCacheStats> stats;
  node_->Stats(1, &stats);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_GE(stats[0].bypassed(), 20u);
  const std::string text = registry_.Render();
  const size_t at = text.find("ringcache_vdi_admissions_rejected_total{");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GE(std::stod(text.substr(text.find('}', at) + 1)), 20.0);
  // Block 1500: written twice, so seen before at its second write.
  ASSERT_TRUE(Write(1500 * kBs, Pattern(1, kBs)).ok());
  EXPECT_EQ(node_->dirty_blocks(), dirty);
  ASSERT_TRUE(Write(1500 * kBs, Pattern(2, kBs)).ok());
  EXPECT_EQ(node_->dirty_blocks(), dirty + 1);
  EXPECT_EQ(Read(1500 * kBs, kBs), Pattern(2, kBs));
  // One request over block 1500 (cached) and 1501 (never seen): not written around, which would
  // drop 1500's cached copy; the run is cached and 1501 destaged from there.
  stats.clear();
  node_->Stats(1, &stats);
  const uint64_t bypassed = stats[0].bypassed();
  const std::string two = Pattern(3, kBs) + Pattern(4, kBs);
  ASSERT_TRUE(Write(1500 * kBs, two).ok());
  stats.clear();
  node_->Stats(1, &stats);
  EXPECT_EQ(stats[0].bypassed(), bypassed);
  EXPECT_EQ(Read(1500 * kBs, 2 * kBs), two);
}

TEST_F(CacheNodeTest, AVdiAtItsDirtyCapIsDestagedFirstAndItsWritersHeld) {
  // Never idle, no aging, far below the node's watermarks (60 of 256 slots): only the per-VDI
  // cap (10% = 25 blocks) can start destage. Its writers are held while its blocks go home, and
  // every write succeeds.
  config_.vdi_dirty_cap = 0.1;
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(WriteDistinctBlocks(2, 30, 900), 0);
  EXPECT_LT(node_->dirty_blocks(), 60u) << "the VDI at its cap was destaged under load";
  EXPECT_EQ(HomeBlock(0), Pattern(900, kBs)) << "its oldest blocks went home first";
  for (uint64_t b = 0; b < 60; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(900 + b, kBs)) << b;
}

TEST_F(CacheNodeTest, ConcurrentWritersAndReadersSeeTheirData) {
  config_.idle_ops_per_s = 1;
  config_.idle_window_ms = 50;  // destage runs concurrently too
  ASSERT_NO_FATAL_FAILURE(Start());
  constexpr int kThreads = 4, kBlocksPerThread = 200, kRounds = 3;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kBlocksPerThread; ++i) {
          const uint64_t b = static_cast<uint64_t>(i) * kThreads + t;  // interleaved: objects shared
          const std::string data = Pattern(b * 10 + r, kBs);
          if (!Write(b * kBs, data).ok()) ++errors;
          if (Read(b * kBs, kBs) != data) ++errors;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  for (uint64_t b = 0; b < kThreads * kBlocksPerThread; ++b) {
    ASSERT_EQ(Read(b * kBs, kBs), Pattern(b * 10 + kRounds - 1, kBs)) << b;
  }
}

TEST_F(CacheNodeTest, DestageTakesTheColdestQueueFirst) {
  ASSERT_NO_FATAL_FAILURE(Start());
  v1::VdiGeometry cold = geometry_;
  cold.set_vdi_id(2);
  cold.set_name("cold");
  ASSERT_TRUE(pool_->PutVdi(cold, datanode::DataNodePool::AllComplete).ok());
  ASSERT_TRUE(node_->RegisterVdi(cold).ok());
  // VDI 1 is dirtied first (oldest) but is hot; VDI 2 is dirtied later and never read.
  for (uint64_t b = 0; b < 4; ++b) ASSERT_TRUE(Write(b * kBs, Pattern(b, kBs)).ok());
  const std::string x = Pattern(9, kBs);
  for (uint32_t b = 0; b < 4; ++b) ASSERT_TRUE(node_->Write(2, 0, b * kBs, kBs, x.data()).ok());
  for (int i = 0; i < 50; ++i) Read(0, 4 * kBs);
  auto next = node_->NextDestageForTest();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->vdi, 2u) << "the cold VDI's queue goes first (VBQ order, DESIGN §4)";
  EXPECT_EQ(next->block, 0u) << "oldest dirty block of that queue first";
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_FALSE(node_->NextDestageForTest().has_value());
}

TEST_F(CacheNodeTest, PolicySwitchesUnderAWriteLoopLoseNothing) {
  config_.idle_ops_per_s = 1;
  config_.idle_window_ms = 50;  // destage runs concurrently too
  ASSERT_NO_FATAL_FAILURE(Start());
  // Two writers write, read back and verify 300 blocks (more than the SSD holds, so blocks are
  // evicted and dirty ones destaged first) while VDI 1's policy switches among the orders,
  // admissions, bypasses and victims, and back to the node's.
  const std::vector<std::string> specs = {"arc+sieve",  "lru",         "s3fifo+cmf", "fifo+lcr",
                                          "cflru",      "lru+seqcut",  "default",    "s3fifo"};
  constexpr int kThreads = 2, kBlocksPerThread = 150, kRounds = 4;
  std::atomic<int> errors{0}, writers_left{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      WriteVerify(t, kThreads, kBlocksPerThread, kRounds, &errors);
      --writers_left;
    });
  }
  int switches = 0;
  std::atomic<int> switch_errors{0};
  std::thread switcher([&] {
    // At least one full cycle, and on until the writers are done.
    for (size_t i = 0; writers_left.load() > 0 || i < specs.size(); ++i) {
      if (!node_->SetPolicy(1, specs[i % specs.size()]).ok()) ++switch_errors;
      ++switches;
    }
  });
  for (auto& th : threads) th.join();
  switcher.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(switch_errors.load(), 0);
  EXPECT_GE(switches, static_cast<int>(specs.size()));
  for (uint64_t b = 0; b < kThreads * kBlocksPerThread; ++b) {
    ASSERT_EQ(Read(b * kBs, kBs), Pattern(b * 10 + kRounds - 1, kBs)) << b;
  }
  ASSERT_TRUE(node_->Flush(0).ok());
  for (uint64_t b = 0; b < kThreads * kBlocksPerThread; b += 7) {
    ASSERT_EQ(HomeBlock(b), Pattern(b * 10 + kRounds - 1, kBs)) << b;
  }

  // A bad spec changes nothing; a good one shows in stats and metrics and survives a restart.
  ASSERT_TRUE(node_->SetPolicy(1, "default").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(node_->SetPolicy(1, "uarc")));
  EXPECT_TRUE(absl::IsInvalidArgument(node_->SetPolicy(1, "lru+bogus")));
  EXPECT_EQ(node_->PolicyOf(1), config_.policy);
  ASSERT_TRUE(node_->SetPolicy(1, "arc + sieve").ok());
  EXPECT_EQ(node_->PolicyOf(1), "arc+sieve");
  std::vector<v1::VdiCacheStats> stats;
  node_->Stats(1, &stats);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].policy(), "arc+sieve");
  const std::string text = registry_.Render();
  EXPECT_NE(text.find("policy=\"arc+sieve\""), std::string::npos) << text;
  // One series per VDI: each switch replaces the last one's.
  size_t series = 0;
  for (size_t p = 0; (p = text.find("ringcache_vdi_policy_info{", p)) != std::string::npos; ++p) {
    ++series;
  }
  EXPECT_EQ(series, 1u) << text;
  const std::string a = Pattern(5, 2 * kBs);
  ASSERT_TRUE(Write(0, a).ok());
  node_.reset();
  auto n = CacheNode::Create(config_, pool_.get(), Clock::Real(), &registry_);
  ASSERT_TRUE(n.ok()) << n.status();
  node_ = std::move(*n);
  EXPECT_EQ(node_->PolicyOf(1), "arc+sieve");
  EXPECT_EQ(Read(0, a.size()), a);
}

TEST_F(CacheNodeTest, SieveOfTheRamTierDropsBlocksReadOnceInsteadOfWritingThem) {
  // SE-UARC's sieve (here over the LRU placement, whose demotion order is plain recency): a
  // clean block that leaves the 16-block RAM tier after one read leaves the cache; one read
  // twice gets an SSD slot.
  config_.policy = "vbq+lru";  // every read miss is admitted (into RAM)
  config_.placement = "lru(sieve=1)";
  ASSERT_NO_FATAL_FAILURE(Start());
  auto ssd_writes = [&] {
    std::vector<v1::VdiCacheStats> stats;
    node_->Stats(1, &stats);
    return stats.empty() ? uint64_t{0} : stats[0].ssd_writes();
  };
  const std::string zeros(kBs, '\0');
  for (uint64_t b = 0; b < 40; ++b) ASSERT_EQ(Read(b * kBs, kBs), zeros);
  EXPECT_EQ(ssd_writes(), 0u);
  EXPECT_LE(node_->cached_blocks(), 16u);  // only what RAM holds
  for (int r = 0; r < 2; ++r) {
    for (uint64_t b = 100; b < 104; ++b) ASSERT_EQ(Read(b * kBs, kBs), zeros);
  }
  for (uint64_t b = 200; b < 240; ++b) ASSERT_EQ(Read(b * kBs, kBs), zeros);
  // Blocks 100..103 are demoted into slots by the reclaimer thread: wait for it (bounded).
  for (int i = 0; i < 1000 && ssd_writes() < 4; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(ssd_writes(), 4u);
  // A dropped block reads back from home.
  const std::string a = Pattern(3, kBs);
  ASSERT_TRUE(Write(5 * kBs, a).ok());
  EXPECT_EQ(Read(5 * kBs, kBs), a);
}

// Exclusive tiers ("uarc(exclusive)"): the RAM tier adds capacity, so the node holds more
// blocks than its SSD has slots; slot pressure sheds members; nothing written is lost, through
// a write loop with idle destage, a flush and a restart.
TEST_F(CacheNodeTest, ExclusiveRamTierAddsCapacityAndLosesNothing) {
  config_.policy = "vbq+lru";  // every read miss is admitted (into RAM)
  config_.placement = "uarc(exclusive)";
  config_.ram_bytes = 128 * kBs;  // 256 slots (230 after the reserve) + 128 RAM blocks
  config_.idle_ops_per_s = 1;
  config_.idle_window_ms = 50;  // destage runs concurrently
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string zeros(kBs, '\0');
  // 330 blocks read three times: more than the SSD's slots, less than slots + RAM.
  for (int pass = 0; pass < 3; ++pass) {
    for (uint64_t b = 1000; b < 1330; ++b) ASSERT_EQ(Read(b * kBs, kBs), zeros) << b;
  }
  // The reclaimer writes RAM's overflow to slots behind the reads: wait for it (bounded).
  for (int i = 0; i < 500 && node_->cached_blocks() <= 256; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GT(node_->cached_blocks(), 256u) << "the RAM tier holds blocks the SSD does not";

  // Two writers write, read back and verify 500 blocks (more than slots + RAM) four times over.
  constexpr int kThreads = 2, kBlocksPerThread = 250, kRounds = 4;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Every fifth block, a read of the first part's blocks too.
      WriteVerify(t, kThreads, kBlocksPerThread, kRounds, &errors, [&](int i, uint64_t b) {
        return i % 5 != 0 || Read((1000 + b % 330) * kBs, kBs) == zeros;
      });
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  for (uint64_t b = 0; b < kThreads * kBlocksPerThread; ++b) {
    ASSERT_EQ(Read(b * kBs, kBs), Pattern(b * 10 + kRounds - 1, kBs)) << b;
  }
  // The slots ran out before the membership did, and slot pressure shed members.
  const std::string text = registry_.Render();
  const std::string metric = "ringcache_cachenode_slot_pressure_evictions_total{node=\"1\"} ";
  const size_t at = text.find(metric);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(at + metric.size())), 0.0);
  // Dirty blocks that were in RAM survive a restart (their slots held them all along).
  const std::string a = Pattern(6, 3 * kBs);
  ASSERT_TRUE(Write(600 * kBs, a).ok());
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(Read(600 * kBs, a.size()), a);
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  for (uint64_t b = 0; b < kThreads * kBlocksPerThread; b += 7) {
    ASSERT_EQ(HomeBlock(b), Pattern(b * 10 + kRounds - 1, kBs)) << b;
  }
  EXPECT_EQ(HomeBlock(601), a.substr(kBs, kBs));
}

TEST_F(CacheNodeTest, RestartedNodeKnowsItsVdisBeforeAnyGateway) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(node_->SetMode(1, CacheMode::kWriteBack).ok());
  const std::string a = Pattern(77, 4 * kBs);
  ASSERT_TRUE(Write(3 * kBs, a).ok());
  node_.reset();
  // Restart without RegisterVdi: the recovered dirty blocks can still be destaged (a full SSD
  // of blocks of unknown VDIs could free no slot until some gateway re-registered them).
  auto n = CacheNode::Create(config_, pool_.get(), Clock::Real(), &registry_);
  ASSERT_TRUE(n.ok()) << n.status();
  node_ = std::move(*n);
  EXPECT_EQ(node_->GetMode(1).value_or(CacheMode::kPassThrough), CacheMode::kWriteBack);
  ASSERT_TRUE(node_->Flush(0).ok());
  EXPECT_EQ(node_->dirty_blocks(), 0u);
  EXPECT_EQ(HomeBlock(4), a.substr(kBs, kBs));
  EXPECT_EQ(Read(3 * kBs, a.size()), a);
}

TEST_F(CacheNodeTest, WriteThatCannotStartBeforeItsDeadlineChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const std::string a = Pattern(78, kBs);
  ASSERT_TRUE(Write(0, a).ok());
  const std::string b = Pattern(79, kBs);
  EXPECT_EQ(node_->Write(1, 0, 0, kBs, b.data(), absl::Now() - absl::Seconds(1)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Read(0, kBs), a);
}

// An SSD write budget of a block every 100 s with a 6,400 s bucket (64 blocks; tight below 32;
// the rate refills next to nothing while the test runs, however slowly): a
// run of writes of new blocks fills the SSD until the budget tightens, then goes write-around
// (home, durable, not cached); everything reads back; a write to a cached block still writes
// the SSD; status, metrics and the wear count (kept across a restart) show it.
TEST_F(CacheNodeTest, AnSsdWriteBudgetSendsMissesAroundOnceSpentAndKeepsTheWearCount) {
  config_.policy = "vbq+lru";  // every miss is admitted unless the budget says otherwise
  config_.ssd_budget_bytes_per_day = 864.0 * kBs;
  config_.ssd_budget_burst_s = 6400;
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(node_->wear().state, "open");
  for (uint64_t b = 0; b < 200; ++b) ASSERT_TRUE(Write(b * kBs, Pattern(100 + b, kBs)).ok());
  CacheNode::Wear w = node_->wear();
  EXPECT_NE(w.state, "open");
  EXPECT_LT(w.fill, 0.5);
  // Up to the half-full mark, plus the few a doorkeeper lets in (each block is written once:
  // none), plus what the rate refilled meanwhile (a block per 100 s).
  EXPECT_GE(w.written_bytes, 32 * kBs);
  EXPECT_LE(w.written_bytes, 40 * kBs);
  EXPECT_GE(w.around, 160u);
  EXPECT_LE(node_->cached_blocks(), 40u);
  for (uint64_t b = 0; b < 200; ++b) {
    ASSERT_EQ(Read(b * kBs, kBs), Pattern(100 + b, kBs)) << b;
    if (b >= 40) {
      ASSERT_EQ(HomeBlock(b), Pattern(100 + b, kBs)) << b;  // went home, not cached
    }
  }
  // Block 0 is cached: a write to it is a hit, never sent around, and writes the SSD.
  const uint64_t before = node_->wear().written_bytes;
  ASSERT_TRUE(Write(0, Pattern(7, kBs)).ok());
  EXPECT_EQ(node_->wear().written_bytes, before + kBs);
  EXPECT_EQ(Read(0, kBs), Pattern(7, kBs));

  const std::string text = registry_.Render();
  for (const char* m :
       {"ringcache_cachenode_ssd_written_bytes_total", "ringcache_cachenode_ssd_budget_fill",
        "ringcache_cachenode_ssd_budget_state", "ringcache_cachenode_ssd_budget_around_total",
        "ringcache_cachenode_ssd_life_days_left", "ringcache_cachenode_ssd_budget_bytes_per_day"}) {
    EXPECT_NE(text.find(m), std::string::npos) << m;
  }
  const v1::SsdWear p = node_->WearProto();
  EXPECT_EQ(p.written_bytes(), before + kBs);
  EXPECT_EQ(p.budget_bytes_per_day(), 864.0 * kBs);
  EXPECT_EQ(p.budget_state(), node_->wear().state);

  // The count outlives the process (<state>.wear); the bucket starts full again.
  const uint64_t written = node_->wear().written_bytes;
  node_.reset();
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(node_->wear().written_bytes, written);
  EXPECT_EQ(node_->wear().state, "open");
}

// A VDI's share of the SSD (its geometry's ssd_max_permille, from `vdi set-qos --ssd-max`): at
// 10% of the ~230 slots its writes keep at most ~23 blocks cached (the others are destaged and
// dropped as it writes on), across a restart (kept in the VDI table); a share the node cannot
// give is refused and changes nothing.
TEST_F(CacheNodeTest, AVdiShareOfTheSsdHoldsAcrossARestart) {
  config_.policy = "vbq+lru";
  geometry_.set_ssd_max_permille(100);
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t cap = static_cast<size_t>(0.1 * 230) + 2;
  // The VDI's queue in the policy (its members; blocks still being destaged on their way out
  // are not counted, so the bound does not depend on the reclaimer's speed).
  auto held = [&] {
    std::vector<v1::VdiCacheStats> stats;
    node_->Stats(1, &stats);
    return stats.empty() ? uint64_t{0} : stats[0].queue_length();
  };
  for (uint64_t b = 0; b < 100; ++b) {
    ASSERT_TRUE(Write(b * kBs, Pattern(b, kBs)).ok());
    ASSERT_LE(held(), cap) << b;
  }
  for (uint64_t b = 0; b < 100; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(b, kBs)) << b;
  node_.reset();
  auto n = CacheNode::Create(config_, pool_.get(), Clock::Real(), &registry_);
  ASSERT_TRUE(n.ok()) << n.status();
  node_ = std::move(*n);  // no RegisterVdi: the share comes from the node's VDI table
  for (uint64_t b = 100; b < 200; ++b) {
    ASSERT_TRUE(Write(b * kBs, Pattern(b, kBs)).ok());
    ASSERT_LE(held(), cap) << b;
  }
  v1::VdiGeometry bad = geometry_;
  bad.set_ssd_min_permille(950);  // more than the reclaim rounds keep
  bad.set_ssd_max_permille(0);
  absl::Status s = node_->RegisterVdi(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("cache node"), std::string::npos) << s;
  for (uint64_t b = 200; b < 230; ++b) ASSERT_TRUE(Write(b * kBs, Pattern(b, kBs)).ok());
  EXPECT_LE(held(), cap);  // the old share holds
  // A minimum share goes with its VDI: another VDI may take that much once it is dropped.
  v1::VdiGeometry big = geometry_;
  big.set_ssd_min_permille(600);
  big.set_ssd_max_permille(0);
  ASSERT_TRUE(node_->RegisterVdi(big).ok());
  v1::VdiGeometry other = geometry_;
  other.set_vdi_id(2);
  other.set_name("w");
  other.set_ssd_min_permille(600);
  other.set_ssd_max_permille(0);
  EXPECT_EQ(node_->RegisterVdi(other).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(node_->DropVdi(1).ok());
  EXPECT_TRUE(node_->RegisterVdi(other).ok());
}

TEST_F(CacheNodeTest, WithoutABudgetNothingGoesAroundAndWearIsStillCounted) {
  config_.policy = "vbq+lru";
  ASSERT_NO_FATAL_FAILURE(Start());
  for (uint64_t b = 0; b < 100; ++b) ASSERT_TRUE(Write(b * kBs, Pattern(b, kBs)).ok());
  const CacheNode::Wear w = node_->wear();
  EXPECT_EQ(w.state, "");
  EXPECT_EQ(w.budget_bytes_per_day, 0);
  EXPECT_EQ(w.around, 0u);
  EXPECT_EQ(w.written_bytes, 100 * kBs);
  EXPECT_EQ(node_->cached_blocks(), 100u);
  EXPECT_EQ(registry_.Render().find("ssd_budget_fill"), std::string::npos);
}

// Online resize (docs/cache-node.md, "Resizing the tiers"): a growth is usable at once and
// keeps the blocks; a shrink moves every block out of the released slots (dirty ones home
// first), cuts the file, and the store keeps its new size across a restart whatever the
// configuration says. Every block reads back what was written throughout.
TEST_F(CacheNodeTest, TheSsdTierGrowsAndShrinksOnlineAndNoWriteIsLost) {
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(WriteDistinctBlocks(2, 100, 1000), 0);
  ASSERT_TRUE(node_->Resize(1024 * kBs, 0).ok());
  EXPECT_EQ(node_->resize_state().ssd_bytes(), 1024u * kBs);
  EXPECT_EQ(node_->resize_state().target_bytes(), 0u);
  EXPECT_EQ(node_->cached_blocks(), 200u) << "the blocks stay through the policy's rebuild";
  // More than the old tier held, all cached now (dirty, no destage needed to make room).
  EXPECT_EQ(WriteDistinctBlocks(4, 150, 5000), 0);
  EXPECT_GT(node_->cached_blocks(), 256u);
  const uint64_t grown = std::filesystem::file_size(config_.ssd_path);
  for (uint64_t b = 0; b < 600; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(5000 + b, kBs)) << b;

  ASSERT_TRUE(node_->Resize(128 * kBs, 0).ok());
  EXPECT_EQ(node_->resize_state().ssd_bytes(), 128u * kBs);
  for (int i = 0; i < 600 && node_->resize_state().target_bytes() != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  const v1::ResizeTiersResponse st = node_->resize_state();
  ASSERT_EQ(st.target_bytes(), 0u)
      << st.blocks_to_move() << " blocks never left the released slots";
  EXPECT_EQ(st.file_bytes(), 128u * kBs);
  EXPECT_LT(std::filesystem::file_size(config_.ssd_path), grown);
  EXPECT_LE(node_->cached_blocks(), 128u);
  for (uint64_t b = 0; b < 600; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(5000 + b, kBs)) << b;
  EXPECT_EQ(WriteDistinctBlocks(2, 100, 9000), 0) << "writes go on in the smaller tier";

  node_.reset();
  ASSERT_NO_FATAL_FAILURE(Start());  // configured 256 blocks: the store's 128 hold
  EXPECT_EQ(node_->resize_state().ssd_bytes(), 128u * kBs);
  for (uint64_t b = 0; b < 200; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(9000 + b, kBs)) << b;
  for (uint64_t b = 200; b < 600; ++b) {
    ASSERT_EQ(Read(b * kBs, kBs), Pattern(5000 + b, kBs)) << b;
  }
  // Too small for the slot reserve: refused, nothing changed.
  EXPECT_TRUE(absl::IsInvalidArgument(node_->Resize(20 * kBs, 0)));
  EXPECT_EQ(node_->resize_state().ssd_bytes(), 128u * kBs);
}

// A shrink whose dirty blocks cannot go home (every data node down) waits for them, never
// drops one; a restart in the middle resumes it, and it completes once the homes are back.
TEST_F(CacheNodeTest, AShrinkWaitsForItsDirtyBlocksAndARestartResumesIt) {
  // The 200 blocks written fill 78% of the 256 slots: above the default high watermark (60%) the
  // destager forces them home, and on a loaded machine it did so before the data nodes stopped.
  config_.dirty_high_watermark = 0.95;
  config_.dirty_low_watermark = 0.9;
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(WriteDistinctBlocks(2, 100, 2000), 0);
  for (int i = 0; i < 3; ++i) dns_->StopForTest(i);
  ASSERT_TRUE(node_->Resize(64 * kBs, 0).ok());
  absl::SleepFor(absl::Seconds(1));
  v1::ResizeTiersResponse st = node_->resize_state();
  EXPECT_EQ(st.target_bytes(), 64u * kBs);
  EXPECT_GT(st.blocks_to_move(), 0u) << "dirty blocks leave only once they are home";
  node_.reset();
  for (int i = 0; i < 3; ++i) dns_->RestartForTest(i);
  ASSERT_NO_FATAL_FAILURE(Start());
  for (int i = 0; i < 600 && node_->resize_state().target_bytes() != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  st = node_->resize_state();
  ASSERT_EQ(st.target_bytes(), 0u)
      << st.blocks_to_move() << " blocks never left the released slots";
  EXPECT_EQ(st.ssd_bytes(), 64u * kBs);
  EXPECT_EQ(st.file_bytes(), 64u * kBs);
  for (uint64_t b = 0; b < 200; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(2000 + b, kBs)) << b;
}

// The RAM tier resized online (docs/cache-node.md, "Resizing the tiers"): a larger tier takes
// the blocks read next, a smaller one demotes its coldest to their SSD slots, every block reads
// back what was written, and a restart keeps the new size unless the configuration was edited.
TEST_F(CacheNodeTest, TheRamTierGrowsAndShrinksOnlineAndARestartKeepsItsSize) {
  config_.policy = "vbq+lru";
  config_.ram_bytes = 16 * kBs;
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(WriteDistinctBlocks(2, 50, 300), 0);
  EXPECT_EQ(node_->resize_state().ram_bytes(), 16u * kBs);
  ASSERT_TRUE(node_->Resize(0, 64 * kBs).ok());
  EXPECT_EQ(node_->resize_state().ram_bytes(), 64u * kBs);
  EXPECT_EQ(node_->resize_state().ssd_bytes(), 256u * kBs) << "the SSD tier is as it was";
  for (uint64_t b = 0; b < 64; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(300 + b, kBs)) << b;
  EXPECT_GT(node_->resize_state().ram_used_bytes(), 16u * kBs) << "the larger tier fills";
  ASSERT_TRUE(node_->Resize(0, 8 * kBs).ok());
  for (int i = 0; i < 500 && node_->resize_state().ram_used_bytes() > 8 * kBs; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(node_->resize_state().ram_used_bytes(), 8u * kBs);
  for (uint64_t b = 0; b < 100; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(300 + b, kBs)) << b;
  // Sizes that hold no block, and a size for a node without a RAM tier, are refused.
  EXPECT_TRUE(absl::IsInvalidArgument(node_->Resize(0, kBs / 2)));
  EXPECT_EQ(node_->resize_state().ram_bytes(), 8u * kBs);

  node_.reset();
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(node_->resize_state().ram_bytes(), 8u * kBs) << "the online size outlives a restart";
  for (uint64_t b = 0; b < 100; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(300 + b, kBs)) << b;
  config_.ram_bytes = 32 * kBs;  // the operator edits the configuration: it wins
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(node_->resize_state().ram_bytes(), 32u * kBs);
  config_.ram_bytes = 0;
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(node_->resize_state().ram_bytes(), 0u);
  EXPECT_TRUE(absl::IsFailedPrecondition(node_->Resize(0, 16 * kBs)));
}

// An exclusive RAM tier adds to the policy's capacity, so resizing it rebuilds the policy: a
// smaller tier evicts what no longer fits in slots + RAM and demotes the rest of its overflow
// to the SSD; a larger one holds more again. Nothing written is lost.
TEST_F(CacheNodeTest, AnExclusiveRamTierResizedOnlineMovesTheCapacityAndLosesNothing) {
  config_.policy = "vbq+lru";  // every read miss is admitted (into RAM)
  config_.placement = "uarc(exclusive)";
  config_.ram_bytes = 128 * kBs;  // 256 slots (230 after the reserve) + 128 RAM blocks
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(WriteDistinctBlocks(2, 50, 800), 0);
  const std::string zeros(kBs, '\0');
  auto read_all = [&] {
    for (uint64_t b = 0; b < 100; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(800 + b, kBs)) << b;
    for (uint64_t b = 1000; b < 1250; ++b) ASSERT_EQ(Read(b * kBs, kBs), zeros) << b;
  };
  for (int pass = 0; pass < 2; ++pass) ASSERT_NO_FATAL_FAILURE(read_all());
  for (int i = 0; i < 500 && node_->cached_blocks() <= 256; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GT(node_->cached_blocks(), 256u) << "the RAM tier holds blocks the SSD does not";

  ASSERT_TRUE(node_->Resize(0, 16 * kBs).ok());
  constexpr uint64_t kHolds = 256 - 16 + 16;  // the slots after their reserve (16), + RAM
  for (int i = 0; i < 500 && (node_->resize_state().ram_used_bytes() > 16 * kBs ||
                              node_->cached_blocks() > kHolds);
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(node_->resize_state().ram_used_bytes(), 16u * kBs);
  EXPECT_LE(node_->cached_blocks(), kHolds);
  ASSERT_NO_FATAL_FAILURE(read_all());
  EXPECT_EQ(WriteDistinctBlocks(2, 50, 900), 0) << "writes go on with the smaller tier";

  ASSERT_TRUE(node_->Resize(0, 256 * kBs).ok());
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t b = 1000; b < 1400; ++b) ASSERT_EQ(Read(b * kBs, kBs), zeros) << b;
  }
  for (int i = 0; i < 500 && node_->cached_blocks() <= 300; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GT(node_->cached_blocks(), 300u) << "the larger tier adds capacity again";
  for (uint64_t b = 0; b < 100; ++b) ASSERT_EQ(Read(b * kBs, kBs), Pattern(900 + b, kBs)) << b;
}

}  // namespace
}  // namespace ringcache::cachenode
