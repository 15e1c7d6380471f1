#include "datanode/store.h"

#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>

#include "common/checksum.h"
#include "common/errors.h"
#include "datanode/fault_fs.h"
#include "datanode/store_keys.h"
#include "gtest/gtest.h"

namespace ringcache::datanode {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/store_test_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    Reopen();
    ASSERT_TRUE(store_->PutVdi(Geometry(7, "disk"), /*complete=*/true).ok());  // created: empty
  }
  // A VDI of 64 MiB: 64 objects of 1 MiB, 4 KiB blocks, replication 3.
  static v1::VdiGeometry Geometry(uint32_t id, const std::string& name) {
    v1::VdiGeometry g;
    g.set_vdi_id(id);
    g.set_name(name);
    g.set_size_bytes(64 << 20);
    g.set_object_size(1 << 20);
    g.set_block_size(4096);
    g.set_replication(3);
    return g;
  }
  void Reopen() {
    store_.reset();
    auto s = BlockStore::Open({dir_, 8 << 20});
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  std::string dir_;
  std::unique_ptr<BlockStore> store_;
};

std::string Pattern(char c, size_t n = 4096) { return std::string(n, c); }

TEST_F(StoreTest, WriteReadRoundTripAndHoles) {
  ASSERT_TRUE(store_->WriteBlocks(7, 3, 2, Pattern('a') + Pattern('b'), {}).ok());
  auto r = store_->ReadBlocks(7, 3, 1, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, Pattern('\0') + Pattern('a') + Pattern('b') + Pattern('\0'));
  EXPECT_EQ(r->present, (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(r->checksums[1], BlockChecksum(Pattern('a')));
}

TEST_F(StoreTest, VersionedWritesAndTombstonesGuardReplay) {
  // A destage stamps blocks with (writer 4, seq 10, 11).
  ASSERT_TRUE(
      store_->WriteBlocks(7, 1, 0, Pattern('n') + Pattern('m'), {}, WriteStamp{4, {10, 11}, false})
          .ok());
  auto r = store_->ReadBlocks(7, 1, 0, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->versions[0].writer, 4u);
  EXPECT_EQ(r->versions[1].seq, 11u);
  // Replaying older records of the same writer changes nothing; a newer one lands.
  auto stored =
      store_->WriteBlocks(7, 1, 0, Pattern('o') + Pattern('p'), {}, WriteStamp{4, {9, 12}, true});
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, 1u);
  r = store_->ReadBlocks(7, 1, 0, 2);
  EXPECT_EQ(r->data, Pattern('n') + Pattern('p'));
  // Another writer's (or an unversioned) copy is replaced by a replay.
  ASSERT_TRUE(store_->WriteBlocks(7, 1, 2, Pattern('x'), {}).ok());
  stored = store_->WriteBlocks(7, 1, 2, Pattern('y'), {}, WriteStamp{4, {1}, true});
  EXPECT_EQ(*stored, 1u);
  // A stamped trim leaves a tombstone: absent to readers, but newer than an old record.
  ASSERT_TRUE(store_->TrimBlocks(7, 1, 0, 1, WriteStamp{4, {20}, false}).ok());
  r = store_->ReadBlocks(7, 1, 0, 1);
  EXPECT_FALSE(r->present[0]);
  EXPECT_EQ(r->data, Pattern('\0'));
  EXPECT_EQ(r->versions[0].seq, 20u);
  stored = store_->WriteBlocks(7, 1, 0, Pattern('s'), {}, WriteStamp{4, {15}, true});
  EXPECT_EQ(*stored, 0u);
  stored = store_->WriteBlocks(7, 1, 0, Pattern('t'), {}, WriteStamp{4, {21}, true});
  EXPECT_EQ(*stored, 1u);
  Reopen();
  r = store_->ReadBlocks(7, 1, 0, 1);
  EXPECT_EQ(r->data, Pattern('t'));
  // Malformed stamps are refused.
  EXPECT_EQ(
      store_->WriteBlocks(7, 1, 0, Pattern('a'), {}, WriteStamp{4, {1, 2}, false}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store_->WriteBlocks(7, 1, 0, Pattern('a'), {}, WriteStamp{0, {1}, false}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// A batch stores the writes of several objects together, each checked and refused alone: a
// range beyond its object, an unknown VDI, a version older than the stored one or than an
// earlier write of the same batch fail those writes; the others are stored (and durable).
TEST_F(StoreTest, ABatchRefusesWritesAloneAndStoresTheOthers) {
  ASSERT_TRUE(store_->WriteBlocks(7, 3, 0, Pattern('h'), {}, WriteStamp{4, {50}, false}).ok());
  const std::string a = Pattern('a') + Pattern('b'), c = Pattern('c'), d = Pattern('d');
  const std::vector<BlockWrite> writes = {
      {7, 1, 4, a, {}, WriteStamp{4, {10, 11}, false}},
      {7, 2, 255, a, {}, WriteStamp{4, {12, 13}, false}},  // block 256 is beyond the object
      {9, 0, 0, c, {}, WriteStamp{4, {14}, false}},         // no such VDI
      {7, 3, 0, c, {}, WriteStamp{4, {15}, false}},         // older than the stored 50
      {7, 1, 5, d, {}, WriteStamp{4, {9}, false}},          // older than this batch's 11
      {7, 4, 0, d, {}, WriteStamp{4, {16}, false}},
  };
  const std::vector<absl::StatusOr<uint32_t>> got = store_->WriteBlocksBatch(writes);
  ASSERT_EQ(got.size(), writes.size());
  ASSERT_TRUE(got[0].ok()) << got[0].status();
  EXPECT_EQ(*got[0], 2u);
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kInvalidArgument) << got[1].status();
  EXPECT_FALSE(got[2].ok());
  EXPECT_TRUE(IsKind(got[3].status(), ErrorKind::kOlderVersion)) << got[3].status();
  EXPECT_TRUE(IsKind(got[4].status(), ErrorKind::kOlderVersion)) << got[4].status();
  ASSERT_TRUE(got[5].ok()) << got[5].status();
  Reopen();
  auto r = store_->ReadBlocks(7, 1, 4, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data, a);
  EXPECT_EQ(r->versions[1].seq, 11u);
  EXPECT_EQ(store_->ReadBlocks(7, 4, 0, 1)->data, d);
  EXPECT_EQ(store_->ReadBlocks(7, 3, 0, 1)->data, Pattern('h'));
  EXPECT_FALSE(store_->ReadBlocks(7, 2, 255, 1)->present[0]);
}

TEST_F(StoreTest, SurvivesReopen) {
  ASSERT_TRUE(store_->WriteBlocks(7, 0, 0, Pattern('z'), {}).ok());
  Reopen();
  auto r = store_->ReadBlocks(7, 0, 0, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, Pattern('z'));
  EXPECT_TRUE(store_->GetVdi(7).ok());
}

TEST_F(StoreTest, RejectsBadRequests) {
  EXPECT_EQ(store_->WriteBlocks(8, 0, 0, Pattern('a'), {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // unknown VDI
  EXPECT_EQ(store_->WriteBlocks(7, 0, 256, Pattern('a'), {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // block beyond the object (256 per object)
  EXPECT_EQ(store_->WriteBlocks(7, 0, 255, Pattern('a', 8192), {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // run crosses the object end
  EXPECT_EQ(store_->WriteBlocks(7, 0, 0, Pattern('a', 100), {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // payload not a whole block
  EXPECT_EQ(store_->WriteBlocks(7, 64, 0, Pattern('a'), {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // object beyond the VDI
  EXPECT_EQ(store_->WriteBlocks(7, 0, 0, Pattern('a'), {12345}).status().code(),
            absl::StatusCode::kInvalidArgument);  // checksum mismatch
  EXPECT_TRUE(store_->WriteBlocks(7, 0, 0, Pattern('a'), {BlockChecksum(Pattern('a'))}).ok());
  EXPECT_EQ(store_->ReadBlocks(7, 0, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ReadBlocks(7, 0, 200, 100).status().code(), absl::StatusCode::kInvalidArgument);
  v1::VdiGeometry bad;
  bad.set_vdi_id(9);
  bad.set_block_size(3000);
  bad.set_object_size(1 << 20);
  EXPECT_EQ(store_->PutVdi(bad).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, TrimAndDeleteVdi) {
  ASSERT_TRUE(store_->WriteBlocks(7, 1, 0, Pattern('a') + Pattern('b'), {}).ok());
  ASSERT_TRUE(store_->TrimBlocks(7, 1, 0, 1).ok());
  auto r = store_->ReadBlocks(7, 1, 0, 2);
  EXPECT_EQ(r->present, (std::vector<bool>{false, true}));
  auto n = store_->DeleteVdi(7);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(store_->ReadBlocks(7, 1, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, RebalancingCopyNeverReplacesAWriteOrTrim) {
  // A copy lands where the node holds nothing ...
  auto n = store_->WriteBlocks(7, 2, 0, Pattern('c'), {}, WriteStamp{3, {5}, false, true});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1u);
  // ... but never over a block that a cache node wrote first ...
  ASSERT_TRUE(store_->WriteBlocks(7, 2, 1, Pattern('w'), {}, WriteStamp{4, {9}}).ok());
  n = store_->WriteBlocks(7, 2, 1, Pattern('o'), {}, WriteStamp{3, {50}, false, true});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  // ... nor over a trim, stamped or not: every trim leaves a tombstone.
  ASSERT_TRUE(store_->TrimBlocks(7, 2, 2, 1).ok());
  n = store_->WriteBlocks(7, 2, 2, Pattern('o'), {}, WriteStamp{3, {50}, false, true});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  auto r = store_->ReadBlocks(7, 2, 0, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, Pattern('c') + Pattern('w') + Pattern('\0'));
  EXPECT_EQ(r->present, (std::vector<bool>{true, true, false}));
  // A purge removes block and tombstone alike: a later copy lands again.
  ASSERT_TRUE(store_->TrimBlocks(7, 2, 0, 3, {}, /*purge=*/true).ok());
  n = store_->WriteBlocks(7, 2, 2, Pattern('p'), {}, WriteStamp{3, {51}, false, true});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1u);
  EXPECT_EQ(store_->WriteBlocks(7, 2, 0, Pattern('x'), {}, WriteStamp{3, {1}, true, true})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ScanBlocksPagesInKeyOrder) {
  ASSERT_TRUE(
      store_->WriteBlocks(7, 9, 3, Pattern('a') + Pattern('b'), {}, WriteStamp{2, {7, 8}}).ok());
  ASSERT_TRUE(store_->WriteBlocks(7, 1, 0, Pattern('z'), {}).ok());
  ASSERT_TRUE(store_->TrimBlocks(7, 4, 6, 1, WriteStamp{2, {9}}).ok());
  std::vector<ScannedBlock> all;
  ScannedBlock from;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 10);
    ScannedBlock next;
    bool done = false;
    auto page =
        store_->ScanBlocks(from.vdi_id, from.object_index, from.block_index, 2, true, &next, &done);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->size(), 2u);
    for (auto& b : *page) all.push_back(std::move(b));
    if (done) break;
    from = next;
  }
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].object_index, 1u);
  EXPECT_EQ(all[0].data, Pattern('z'));
  EXPECT_EQ(all[1].object_index, 4u);
  EXPECT_TRUE(all[1].trimmed);
  EXPECT_EQ(all[1].version.seq, 9u);
  EXPECT_EQ(all[2].object_index, 9u);
  EXPECT_EQ(all[2].block_index, 3u);
  EXPECT_EQ(all[3].data, Pattern('b'));
  EXPECT_EQ(all[3].version.writer, 2u);
  EXPECT_EQ(all[3].version.seq, 8u);
}

LogEntry Rec(uint32_t node, uint64_t seq, char c) {
  LogEntry e{node, seq, 7, 2, 5, 0, Pattern(c)};
  e.checksum = BlockChecksum(e.data);
  return e;
}

// The meta family takes a few small writes and never fills a memtable; it kept every WAL file
// since its last flush alive, and a restart replayed all of them (seconds after minutes of
// writes). Flushed after the others, it keeps the live WAL near their memtables' size.
TEST_F(StoreTest, IdleMetaFamilyKeepsNoWalFileAlive) {
  store_.reset();
  StoreOptions opts{dir_, 8 << 20};
  opts.memtable_bytes = 512 << 10;
  auto opened = BlockStore::Open(opts);
  ASSERT_TRUE(opened.ok()) << opened.status();
  store_ = std::move(*opened);
  // One write to the meta family, at the start of the WAL.
  ASSERT_TRUE(store_->PutVdi(Geometry(8, "other"), /*complete=*/true).ok());
  auto live_wal = [&] {
    uint64_t bytes = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      if (e.path().extension() != ".log") continue;
      // A WAL file listed here may be deleted by a flush before its size is read: it is gone.
      std::error_code ec;
      const uintmax_t size = std::filesystem::file_size(e.path(), ec);
      if (!ec) bytes += size;
    }
    return bytes;
  };
  constexpr int kObjects = 8;  // 8 MiB of blocks: 16 memtables
  for (int obj = 0; obj < kObjects; ++obj) {
    for (int b = 0; b < 256; b += 16) {
      ASSERT_TRUE(store_->WriteBlocks(7, obj, b, Pattern(static_cast<char>('a' + obj), 16 * 4096),
                                      {}).ok());
    }
  }
  // Flushes run in the background: wait for the WAL files they free to go.
  for (int i = 0; i < 500 && live_wal() > (2u << 20); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LE(live_wal(), 2u << 20) << "WAL files stayed alive after every family had flushed them";
  Reopen();
  for (int obj = 0; obj < kObjects; ++obj) {
    auto r = store_->ReadBlocks(7, obj, 240, 16);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->data, Pattern(static_cast<char>('a' + obj), 16 * 4096));
  }
  EXPECT_TRUE(store_->GetVdi(8).ok());
  StoreOptions tiny{dir_ + "-tiny", 8 << 20};
  tiny.memtable_bytes = 4096;
  EXPECT_EQ(BlockStore::Open(tiny).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, LogAppendScanReclaim) {
  ASSERT_TRUE(store_->LogAppend({Rec(1, 10, 'a'), Rec(1, 11, 'b'), Rec(2, 1, 'c')}).ok());
  ASSERT_TRUE(store_->LogAppend({Rec(1, 12, 'd')}).ok());
  uint64_t next = 0;
  bool done = false;
  auto page = store_->LogScan(1, 0, 2, true, &next, &done);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].sequence, 10u);
  EXPECT_EQ((*page)[1].data, Pattern('b'));
  EXPECT_FALSE(done);
  page = store_->LogScan(1, next, 2, false, &next, &done);
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].sequence, 12u);
  EXPECT_TRUE((*page)[0].data.empty());
  EXPECT_TRUE(done);
  EXPECT_EQ(store_->Stats().log_records, 4u);

  EXPECT_EQ(*store_->LogReclaim(1, {12, 99}, 11), 2u);  // 10 by range, 12 by list
  page = store_->LogScan(1, 0, 10, false, &next, &done);
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].sequence, 11u);
  EXPECT_EQ(store_->Stats().log_records, 2u);
  Reopen();
  EXPECT_EQ(store_->Stats().log_records, 2u);  // recounted on open
  LogEntry bad = Rec(1, 20, 'x');
  bad.checksum ^= 1;
  EXPECT_EQ(store_->LogAppend({bad}).status().code(), absl::StatusCode::kInvalidArgument);
  LogEntry short_rec = Rec(1, 21, 'x');
  short_rec.data.resize(10);
  EXPECT_EQ(store_->LogAppend({short_rec}).status().code(), absl::StatusCode::kInvalidArgument);
}

// Log records say their version (kLogRecordFormat 2) unless the data node is told to write
// version 1 (a cluster below feature level 2); both read back, side by side. A record of a
// version newer than this release reads stops the scan with a message naming the versions, and
// the scrub does not take it for damage.
TEST_F(StoreTest, LogRecordsSayTheirVersionAndANewerOneIsRefusedNotDamaged) {
  EXPECT_EQ(store_->log_record_version(), 2u);
  ASSERT_TRUE(store_->LogAppend({Rec(1, 10, 'a')}).ok());
  store_->SetLogRecordVersion(1);
  ASSERT_TRUE(store_->LogAppend({Rec(1, 11, 'b')}).ok());
  store_->SetLogRecordVersion(2);
  ASSERT_TRUE(store_->LogAppend({Rec(1, 12, 'c')}).ok());
  store_.reset();
  // The raw values, and one record rewritten as a newer release would write it.
  {
    std::vector<std::string> families;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir_, &families).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descs;
    for (const std::string& f : families) descs.emplace_back(f, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir_, descs, &handles, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    rocksdb::ColumnFamilyHandle* log = nullptr;
    for (size_t i = 0; i < families.size(); ++i) {
      if (families[i] == "log") log = handles[i];
    }
    ASSERT_NE(log, nullptr);
    auto value = [&](uint64_t seq) {
      std::string v;
      EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), log, store_keys::LogKey(1, seq), &v).ok());
      return v;
    };
    const std::string v10 = value(10), v11 = value(11);
    EXPECT_EQ(v10.size(), store_keys::kLogHeaderV2 + 4096);
    EXPECT_EQ(static_cast<uint8_t>(v10[0]), store_keys::kLogVersionMark);
    EXPECT_EQ(v10[1], 2);
    EXPECT_EQ(v11.size(), store_keys::kLogHeader + 8 + 4096) << "version 1: no version said";
    EXPECT_EQ(v11[0], 0) << "the top byte of VDI 7's id";
    std::string v12 = value(12);
    v12[1] = 3;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), log, store_keys::LogKey(1, 12), v12).ok());
    for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  Reopen();
  uint64_t next = 0;
  bool done = false;
  std::vector<uint64_t> corrupt;
  auto page = store_->LogScan(1, 0, 2, true, &next, &done, &corrupt);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].data, Pattern('a'));
  EXPECT_EQ((*page)[1].data, Pattern('b'));
  EXPECT_EQ((*page)[0].epoch, (*page)[1].epoch);
  EXPECT_TRUE(corrupt.empty());
  page = store_->LogScan(1, next, 2, true, &next, &done, &corrupt);
  ASSERT_FALSE(page.ok());
  EXPECT_EQ(page.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(page.status().message().find("log record 12 of cache node 1: write-back log record "
                                         "format version 3; this release reads log-record "
                                         "versions 1-2"),
            absl::string_view::npos)
      << page.status();
  ScrubCursor cursor;
  std::vector<ScrubFinding> bad;
  while (!cursor.done) ASSERT_TRUE(store_->Scrub(&cursor, 1 << 20, &bad).ok());
  EXPECT_TRUE(bad.empty()) << "a newer record is not damage";
}

// An append sent again (a retry after a lost answer) and a reclaim of records this node does not
// hold leave the log's size as it was; each record counts its key and value once.
TEST_F(StoreTest, LogSizeCountsEachRecordOnce) {
  ASSERT_TRUE(store_->LogAppend({Rec(1, 10, 'a'), Rec(1, 11, 'b')}).ok());
  const uint64_t two = store_->Stats().log_bytes;
  EXPECT_GT(two, 2 * Pattern('a').size());
  ASSERT_TRUE(store_->LogAppend({Rec(1, 11, 'b'), Rec(1, 10, 'a')}).ok());  // both again
  EXPECT_EQ(store_->Stats().log_records, 2u);
  EXPECT_EQ(store_->Stats().log_bytes, two);
  ASSERT_TRUE(store_->LogAppend({Rec(1, 11, 'b'), Rec(1, 12, 'c')}).ok());  // one new
  EXPECT_EQ(store_->Stats().log_records, 3u);
  EXPECT_EQ(store_->Stats().log_bytes, two + two / 2);
  Reopen();  // the highest sequence held is found again: 12 sent once more is no new record
  ASSERT_TRUE(store_->LogAppend({Rec(1, 12, 'c'), Rec(1, 9, 'z')}).ok());  // 9: below, new
  EXPECT_EQ(store_->Stats().log_records, 4u);
  EXPECT_EQ(*store_->LogReclaim(1, {9}, 0), 1u);
  EXPECT_EQ(store_->Stats().log_bytes, two + two / 2);
  EXPECT_EQ(*store_->LogReclaim(1, {7, 8, 99, 12}, 0), 1u);  // only 12 is here
  EXPECT_EQ(store_->Stats().log_bytes, two);
  EXPECT_EQ(*store_->LogReclaim(2, {10, 11}, 0), 0u);  // another writer's sequences
  EXPECT_EQ(*store_->LogReclaim(1, {10, 11}, 0), 2u);
  EXPECT_EQ(store_->Stats().log_records, 0u);
  EXPECT_EQ(store_->Stats().log_bytes, 0u);
}

// Incarnations (docs/durability.md): every sequence a writer's block versions, trims and log
// records carried stays below its high-water mark, also after a reopen, so a cache node that
// lost its own mark (a new SSD) can start above everything it wrote before.
// A disk moved from another cluster is refused rather than served (docs/durability.md,
// "Incarnations"): the store keeps the cluster id it was first opened with.
TEST_F(StoreTest, StoreOfAnotherClusterIsRefused) {
  store_.reset();
  StoreOptions o{dir_, 8 << 20};
  o.cluster_id = "alpha";
  auto first = BlockStore::Open(o);  // an existing store without an id takes this one
  ASSERT_TRUE(first.ok()) << first.status();
  first->reset();
  o.cluster_id = "beta";
  auto other = BlockStore::Open(o);
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(other.status())) << other.status();
  EXPECT_NE(other.status().message().find("'alpha'"), absl::string_view::npos) << other.status();
  o.cluster_id = "";  // unchecked
  ASSERT_TRUE(BlockStore::Open(o).ok());
  o.cluster_id = "alpha";
  ASSERT_TRUE(BlockStore::Open(o).ok());
  Reopen();
}

// Sets (or with an empty `value` deletes) the store's format key behind the store's back.
void SetFormatKey(const std::string& dir, const std::string& value) {
  rocksdb::Options opts;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, {}}, {"blocks", {}}, {"log", {}}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(opts, dir, cfs, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  if (value.empty()) {
    ASSERT_TRUE(db->Delete({}, handles[0], "store/format").ok());
  } else {
    ASSERT_TRUE(db->Put({}, handles[0], "store/format", value).ok());
  }
  for (auto* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
}

TEST_F(StoreTest, StoreOfAFormatThisReleaseCannotReadIsRefusedNamingTheVersions) {
  store_.reset();  // it holds VDI 7 (SetUp)
  // A newer release's store (after a downgrade): refused, nothing read or changed.
  SetFormatKey(dir_, "7");
  auto newer = BlockStore::Open({dir_, 8 << 20});
  ASSERT_FALSE(newer.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(newer.status())) << newer.status();
  EXPECT_NE(newer.status().message().find("format version 7; this release reads datanode-store "
                                          "versions 1"),
            absl::string_view::npos)
      << newer.status();
  EXPECT_NE(newer.status().message().find("newer release"), absl::string_view::npos);
  // A store of v0.1.0 has no format key: it is version 1, and gets the key.
  SetFormatKey(dir_, "");
  Reopen();
  EXPECT_TRUE(store_->GetVdi(7).ok());
  store_.reset();
  SetFormatKey(dir_, "0");
  EXPECT_TRUE(absl::IsFailedPrecondition(BlockStore::Open({dir_, 8 << 20}).status()));
  SetFormatKey(dir_, "1");
  Reopen();
}

TEST_F(StoreTest, WriterIncarnationIsReplacedByATakeoverAndSurvivesReopenAndClear) {
  EXPECT_EQ(store_->WriterIncarnation(4), "");
  // A plain start records its store where none is recorded, and never replaces one.
  EXPECT_EQ(*store_->PutWriterIncarnation(4, "aaaa", true), "aaaa");
  EXPECT_EQ(*store_->PutWriterIncarnation(4, "bbbb", true), "aaaa");
  // A takeover (a new SSD that sent the old one's log home) replaces it.
  EXPECT_EQ(*store_->PutWriterIncarnation(4, "cccc", false), "cccc");
  EXPECT_EQ(store_->WriterIncarnation(9), "");  // per writer
  EXPECT_FALSE(store_->PutWriterIncarnation(0, "dddd", false).ok());
  EXPECT_FALSE(store_->PutWriterIncarnation(4, "", false).ok());
  Reopen();
  EXPECT_EQ(store_->WriterIncarnation(4), "cccc");
  ASSERT_TRUE(store_->Clear().ok());
  EXPECT_EQ(store_->WriterIncarnation(4), "cccc");
}

// Control fencing (docs/design.md, "Control steps are fenced"): a sealed writer's records of an
// older ownership epoch are refused, newer ones and other writers' are taken; the seal only
// rises and outlives a reopen and a Clear.
TEST_F(StoreTest, SealedLogRefusesOlderRecordsAcrossReopenAndClear) {
  auto at = [](uint32_t node, uint64_t seq, uint64_t epoch) {
    LogEntry e = Rec(node, seq, 'e');
    e.epoch = epoch;
    return e;
  };
  ASSERT_TRUE(store_->LogAppend({at(3, 1, 4)}).ok());
  EXPECT_EQ(*store_->SealLog(3, 6), 6u);
  EXPECT_EQ(*store_->SealLog(3, 5), 6u) << "a seal never goes down";
  absl::Status refused = store_->LogAppend({at(3, 2, 5)}).status();
  EXPECT_TRUE(IsKind(refused, ErrorKind::kLogSealed)) << refused;
  // A batch holding one refused record is refused whole.
  EXPECT_FALSE(store_->LogAppend({at(4, 1, 1), at(3, 3, 5)}).ok());
  EXPECT_TRUE(store_->LogAppend({at(3, 4, 6)}).ok()) << "re-admitted at the seal's epoch";
  EXPECT_TRUE(store_->LogAppend({at(4, 2, 1)}).ok()) << "another writer is not sealed";
  uint64_t next = 0;
  bool done = false;
  auto recs = store_->LogScan(3, 0, 100, false, &next, &done);
  ASSERT_TRUE(recs.ok());
  ASSERT_EQ(recs->size(), 2u);
  EXPECT_EQ((*recs)[0].sequence, 1u);
  EXPECT_EQ((*recs)[1].sequence, 4u);
  Reopen();
  EXPECT_EQ(store_->LogSeal(3), 6u);
  ASSERT_TRUE(store_->Clear().ok());
  EXPECT_EQ(store_->LogSeal(3), 6u);
  EXPECT_EQ(store_->LogSeal(4), 0u);
  EXPECT_FALSE(store_->SealLog(0, 1).ok());
}

TEST_F(StoreTest, ControlTermOnlyRisesAndSurvivesReopen) {
  EXPECT_TRUE(store_->ObserveControlTerm(0).ok());
  EXPECT_TRUE(store_->ObserveControlTerm(41).ok());
  EXPECT_TRUE(store_->ObserveControlTerm(41).ok());
  absl::Status stale = store_->ObserveControlTerm(40);
  EXPECT_TRUE(IsKind(stale, ErrorKind::kStaleTerm)) << stale;
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(store_->ObserveControlTerm(0).ok()) << "term 0 is not a coordinator's step";
  Reopen();
  EXPECT_EQ(store_->control_term(), 41u);
  EXPECT_TRUE(IsKind(store_->ObserveControlTerm(40), ErrorKind::kStaleTerm));
  EXPECT_TRUE(store_->ObserveControlTerm(57).ok());
  EXPECT_EQ(store_->control_term(), 57u);
}

TEST_F(StoreTest, WriterHighWaterCoversEverySequenceAndSurvivesReopen) {
  EXPECT_EQ(store_->WriterHighWater(4), 0u);
  ASSERT_TRUE(
      store_->WriteBlocks(7, 1, 0, Pattern('n') + Pattern('m'), {}, WriteStamp{4, {10, 11}, false})
          .ok());
  EXPECT_GT(store_->WriterHighWater(4), 11u);
  const uint64_t big = uint64_t{5} << 30;
  ASSERT_TRUE(store_->TrimBlocks(7, 2, 0, 1, WriteStamp{4, {big}, false}).ok());
  EXPECT_GT(store_->WriterHighWater(4), big);
  ASSERT_TRUE(store_->LogAppend({Rec(4, big + 7, 'a'), Rec(9, 3, 'b')}).ok());
  const uint64_t mark4 = store_->WriterHighWater(4);
  EXPECT_GT(mark4, big + 7);
  EXPECT_GT(store_->WriterHighWater(9), 3u);
  EXPECT_EQ(store_->WriterHighWater(5), 0u);  // another writer is not touched
  // An unversioned write changes nothing; marks survive a restart.
  ASSERT_TRUE(store_->WriteBlocks(7, 3, 0, Pattern('u'), {}).ok());
  Reopen();
  EXPECT_EQ(store_->WriterHighWater(4), mark4);
  EXPECT_GT(store_->WriterHighWater(9), 3u);
  ASSERT_EQ(store_->Vdis().size(), 1u);
  EXPECT_EQ(store_->Vdis()[0].replication(), 3u);
}

// A rotten log record is skipped and reported by a scan, never the end of it (docs/durability.md).
TEST_F(StoreTest, DamagedLogRecordIsSkippedAndReported) {
  ASSERT_TRUE(store_->LogAppend({Rec(1, 10, 'a'), Rec(1, 11, 'b'), Rec(1, 12, 'c')}).ok());
  ASSERT_TRUE(store_->DamageLogRecordForTest(1, 11).ok());
  uint64_t next = 0;
  bool done = false;
  std::vector<uint64_t> corrupt;
  auto page = store_->LogScan(1, 0, 10, true, &next, &done, &corrupt);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].sequence, 10u);
  EXPECT_EQ((*page)[1].sequence, 12u);
  EXPECT_EQ(corrupt, std::vector<uint64_t>{11});
  EXPECT_TRUE(done);
  // A page that ends on the damaged record still moves on.
  corrupt.clear();
  page = store_->LogScan(1, 11, 1, true, &next, &done, &corrupt);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->empty());
  EXPECT_EQ(next, 12u);
  EXPECT_FALSE(done);
  // A damaged block reads as DATA_LOSS, never as its bytes.
  ASSERT_TRUE(store_->WriteBlocks(7, 0, 3, Pattern('z'), {}).ok());
  ASSERT_TRUE(store_->DamageBlockForTest(7, 0, 3).ok());
  EXPECT_EQ(store_->ReadBlocks(7, 0, 3, 1).status().code(), absl::StatusCode::kDataLoss);
}

// A block whose checksum (the first stored bytes) starts with 'T', the tombstone tag, is data:
// the rot tool of the fault checker damaged it (a run failed on one).
TEST_F(StoreTest, BlockWhoseChecksumStartsLikeATombstoneIsDamagedAsData) {
  std::string data;
  for (uint32_t i = 0;; ++i) {
    data = Pattern('a' + i % 26);
    std::memcpy(data.data(), &i, sizeof(i));
    if ((BlockChecksum(data) >> 56) == 'T') break;
  }
  ASSERT_TRUE(store_->WriteBlocks(7, 0, 1, data, {}).ok());
  ASSERT_TRUE(store_->DamageBlockForTest(7, 0, 1).ok());
  EXPECT_EQ(store_->ReadBlocks(7, 0, 1, 1).status().code(), absl::StatusCode::kDataLoss);
}

// The scrub finds every damaged copy, blocks and log records alike, a small step at a time,
// and a copy rewritten (or reclaimed) is damaged no more.
TEST_F(StoreTest, ScrubFindsDamagedBlocksAndLogRecordsUntilTheyAreRepaired) {
  for (uint32_t b = 0; b < 40; ++b) {
    ASSERT_TRUE(store_
                    ->WriteBlocks(7, b % 5, b / 5, Pattern('a' + b % 20), {},
                                  WriteStamp{4, {100 + b}, false})
                    .ok());
  }
  ASSERT_TRUE(store_->TrimBlocks(7, 6, 0, 1, WriteStamp{4, {200}, false}).ok());
  ASSERT_TRUE(store_->LogAppend({Rec(1, 10, 'a'), Rec(1, 11, 'b'), Rec(2, 3, 'c')}).ok());
  ASSERT_TRUE(store_->DamageBlockForTest(7, 3, 2).ok());
  ASSERT_TRUE(store_->DamageLogRecordForTest(1, 11).ok());

  ScrubCursor cursor;
  std::vector<ScrubFinding> bad;
  int steps = 0;
  while (!cursor.done) {
    auto read = store_->Scrub(&cursor, 3 * 4096, &bad);  // about three blocks per step
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_LT(++steps, 100);
  }
  EXPECT_GT(steps, 5) << "the budget splits the pass";
  EXPECT_EQ(cursor.blocks_checked, 41u) << "40 blocks and a tombstone";
  EXPECT_EQ(cursor.log_records_checked, 3u);
  ScrubFinding block;
  block.vdi_id = 7;
  block.object_index = 3;
  block.block_index = 2;
  ScrubFinding record;
  record.log = true;
  record.cache_node_id = 1;
  record.sequence = 11;
  EXPECT_EQ(bad, (std::vector<ScrubFinding>{block, record}));
  EXPECT_TRUE(store_->StillDamaged(block));
  EXPECT_TRUE(store_->StillDamaged(record));

  // The block rewritten from a good replica (its version kept), the record reclaimed.
  ASSERT_TRUE(store_->WriteBlocks(7, 3, 2, Pattern('r'), {}, WriteStamp{4, {117}, false}).ok());
  ASSERT_TRUE(store_->LogReclaim(1, {11}, 0).ok());
  EXPECT_FALSE(store_->StillDamaged(block));
  EXPECT_FALSE(store_->StillDamaged(record));
}

// Many objects, a 1 MiB step: every damaged block is found, wherever the steps split the pass.
TEST_F(StoreTest, ScrubFindsEveryDamagedBlockAcrossManySteps) {
  std::vector<ScrubFinding> rotten;
  for (uint64_t object = 0; object < 40; ++object) {
    std::string data;
    for (int b = 0; b < 100; ++b) data += Pattern('a' + (object + b) % 26);
    ASSERT_TRUE(store_->WriteBlocks(7, object, 0, data, {}).ok());
  }
  std::mt19937_64 rng(5);
  while (rotten.size() < 30) {
    ScrubFinding f;
    f.vdi_id = 7;
    f.object_index = rng() % 40;
    f.block_index = static_cast<uint32_t>(rng() % 100);
    if (std::find(rotten.begin(), rotten.end(), f) != rotten.end()) continue;
    ASSERT_TRUE(store_->DamageBlockForTest(7, f.object_index, f.block_index).ok());
    rotten.push_back(f);
  }
  ScrubCursor cursor;
  std::vector<ScrubFinding> bad;
  while (!cursor.done) ASSERT_TRUE(store_->Scrub(&cursor, 1 << 20, &bad).ok());
  EXPECT_EQ(cursor.blocks_checked, 4000u);
  std::sort(bad.begin(), bad.end(), [](const auto& a, const auto& b) {
    return std::tie(a.object_index, a.block_index) < std::tie(b.object_index, b.block_index);
  });
  std::sort(rotten.begin(), rotten.end(), [](const auto& a, const auto& b) {
    return std::tie(a.object_index, a.block_index) < std::tie(b.object_index, b.block_index);
  });
  EXPECT_EQ(bad, rotten);
}

// A store's identity is made once and kept; a new store (a wiped directory) has another.
TEST_F(StoreTest, IncarnationIsKeptAcrossReopenAndNewForANewStore) {
  const std::string id = store_->incarnation();
  EXPECT_EQ(id.size(), 32u);
  Reopen();
  EXPECT_EQ(store_->incarnation(), id);
  store_.reset();
  std::filesystem::remove_all(dir_);
  Reopen();
  EXPECT_NE(store_->incarnation(), id);
}

// A data node put back in after it was out is cleared before it joins: nothing of its stale
// state is left, except what keeps sequences from repeating and its identity.
TEST_F(StoreTest, ClearDropsBlocksLogsAndVdisButKeepsMarksAndIncarnation) {
  ASSERT_TRUE(store_->WriteBlocks(7, 1, 0, Pattern('n'), {}, WriteStamp{4, {10}, false}).ok());
  ASSERT_TRUE(store_->TrimBlocks(7, 2, 0, 1, WriteStamp{4, {11}, false}).ok());
  ASSERT_TRUE(store_->LogAppend({Rec(4, 12, 'a')}).ok());
  const std::string id = store_->incarnation();
  const uint64_t mark = store_->WriterHighWater(4);
  ASSERT_GE(mark, 12u);
  ASSERT_TRUE(store_->Clear().ok());
  for (int pass = 0; pass < 2; ++pass) {  // in memory, then as reopened from disk
    EXPECT_TRUE(store_->Vdis().empty());
    EXPECT_EQ(store_->Stats().log_records, 0u);
    ScannedBlock next;
    bool done = false;
    auto all = store_->ScanBlocks(0, 0, 0, 100, false, &next, &done);
    ASSERT_TRUE(all.ok());
    EXPECT_TRUE(all->empty()) << "blocks and tombstones are gone";
    uint64_t after = 0;
    auto log = store_->LogScan(4, 0, 100, false, &after, &done);
    ASSERT_TRUE(log.ok());
    EXPECT_TRUE(log->empty());
    EXPECT_EQ(store_->WriterHighWater(4), mark);
    EXPECT_EQ(store_->incarnation(), id);
    Reopen();
  }
}

// "Absent is not zero" (docs/durability.md): a store that learns of a VDI without a voucher
// missed its writes and says so with every read, until someone vouches (a finished refill).
TEST_F(StoreTest, VdiLearntWithoutAVoucherIsIncompleteUntilVouched) {
  EXPECT_TRUE(store_->VdiComplete(7));  // learnt at its creation (SetUp)
  v1::VdiGeometry g = *store_->GetVdi(7);
  g.set_vdi_id(8);
  ASSERT_TRUE(store_->PutVdi(g).ok());  // unvouched: incomplete
  EXPECT_FALSE(store_->VdiComplete(8));
  auto r = store_->ReadBlocks(8, 0, 0, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->complete);
  g.set_size_bytes(g.size_bytes() * 2);
  ASSERT_TRUE(store_->PutVdi(g).ok());  // a resize keeps the state
  EXPECT_FALSE(store_->VdiComplete(8));
  Reopen();
  EXPECT_FALSE(store_->VdiComplete(8));
  EXPECT_TRUE(store_->ReadBlocks(7, 0, 0, 1)->complete);
  ASSERT_TRUE(store_->PutVdi(g, /*complete=*/true).ok());
  EXPECT_TRUE(store_->VdiComplete(8));
  Reopen();
  EXPECT_TRUE(store_->VdiComplete(8));
  g.set_vdi_id(9);
  ASSERT_TRUE(store_->PutVdi(g, /*complete=*/true).ok());  // a new VDI, vouched
  EXPECT_TRUE(store_->VdiComplete(9));
  ASSERT_TRUE(store_->PutVdi(*store_->GetVdi(7)).ok());  // known: an unvouched call changes nothing
  EXPECT_TRUE(store_->VdiComplete(7));
  ASSERT_TRUE(store_->DeleteVdi(8).ok());
  ASSERT_TRUE(store_
                  ->PutVdi([&] {
                    auto x = g;
                    x.set_vdi_id(8);
                    return x;
                  }())
                  .ok());
  EXPECT_FALSE(store_->VdiComplete(8));  // deleted, then learnt again without a voucher
}

// Fencing tokens (docs/durability.md): versions order by (epoch, seq, writer) across writers.
// A node that lost an object (epoch 1) cannot overwrite what its next owner wrote at epoch 2,
// whatever their sequences, for any kind of write; the refusal is typed and counted.
TEST_F(StoreTest, RefusesOlderVersionFromAnotherWriter) {
  WriteStamp newer{2, {5}};
  newer.epochs = {2};
  ASSERT_TRUE(store_->WriteBlocks(7, 4, 0, Pattern('N'), {}, newer).ok());
  // Writer 1 at epoch 1 with a far higher sequence: a plain write (destage) is refused.
  WriteStamp older{1, {1000}};
  older.epochs = {1};
  auto w = store_->WriteBlocks(7, 4, 0, Pattern('O'), {}, older);
  EXPECT_TRUE(IsKind(w.status(), ErrorKind::kOlderVersion)) << w.status();
  // A run whose other block is new is refused whole: nothing of it lands.
  WriteStamp run{1, {1000, 1001}};
  run.epochs = {1, 1};
  EXPECT_TRUE(IsKind(store_->WriteBlocks(7, 4, 0, Pattern('O') + Pattern('P'), {}, run).status(),
                     ErrorKind::kOlderVersion));
  // A trim (or write-zeroes) is refused the same way.
  EXPECT_TRUE(IsKind(store_->TrimBlocks(7, 4, 0, 1, older), ErrorKind::kOlderVersion));
  // A replay record of the old owner is skipped (not an error: replays are conditional).
  WriteStamp replay{1, {1000}, /*only_if_newer=*/true};
  replay.epochs = {1};
  auto rs = store_->WriteBlocks(7, 4, 0, Pattern('R'), {}, replay);
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_EQ(*rs, 0u);
  // An unversioned write (a tool) is older than anything versioned.
  EXPECT_TRUE(
      IsKind(store_->WriteBlocks(7, 4, 0, Pattern('U'), {}).status(), ErrorKind::kOlderVersion));
  auto r = store_->ReadBlocks(7, 4, 0, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data.substr(0, 4096), Pattern('N'));
  EXPECT_FALSE(r->present[1]) << "the refused run wrote nothing";
  EXPECT_EQ(r->versions[0].epoch, 2u);
  EXPECT_EQ(store_->Stats().older_version_refusals, 4u);
  // The same version again (a retried destage) and a newer one are accepted.
  EXPECT_TRUE(store_->WriteBlocks(7, 4, 0, Pattern('N'), {}, newer).ok());
  WriteStamp next{2, {6}};
  next.epochs = {2};
  EXPECT_TRUE(store_->TrimBlocks(7, 4, 0, 1, next).ok());
  // Versions survive a restart (tombstone included).
  Reopen();
  EXPECT_TRUE(IsKind(store_->WriteBlocks(7, 4, 0, Pattern('O'), {}, older).status(),
                     ErrorKind::kOlderVersion));
}

TEST_F(StoreTest, EpochOutranksSequenceAcrossWriters) {
  WriteStamp a{1, {900}};
  a.epochs = {3};
  ASSERT_TRUE(store_->WriteBlocks(7, 5, 0, Pattern('a'), {}, a).ok());
  WriteStamp b{2, {10}};  // lower sequence, newer epoch: the next owner
  b.epochs = {4};
  ASSERT_TRUE(store_->WriteBlocks(7, 5, 0, Pattern('b'), {}, b).ok());
  EXPECT_EQ(CompareVersions({1, 900, 3}, {2, 10, 4}), -1);
  EXPECT_EQ(CompareVersions({1, 5, 4}, {1, 5, 4}), 0);
}

TEST_F(StoreTest, LogRecordsKeepTheirEpoch) {
  LogEntry e{3, 17, 7, 2, 1, BlockChecksum(Pattern('L')), Pattern('L'), 42};
  ASSERT_TRUE(store_->LogAppend({e}).ok());
  uint64_t next = 0;
  bool done = false;
  auto recs = store_->LogScan(3, 0, 10, true, &next, &done);
  ASSERT_TRUE(recs.ok()) << recs.status();
  ASSERT_EQ(recs->size(), 1u);
  EXPECT_EQ((*recs)[0].epoch, 42u);
  EXPECT_EQ((*recs)[0].data, Pattern('L'));
}

// Sticky storage errors: after a failed synced write, no later write is acknowledged.
TEST_F(StoreTest, FailedWriteIsSticky) {
  ASSERT_TRUE(store_->WriteBlocks(7, 6, 1, Pattern('k'), {}).ok());  // acknowledged before
  store_.reset();
  auto fs = std::make_shared<SyncFaultFileSystem>(rocksdb::FileSystem::Default());
  auto opened = BlockStore::Open({dir_, 8 << 20, fs});
  ASSERT_TRUE(opened.ok()) << opened.status();
  store_ = *std::move(opened);
  fs->FailNextSyncs(1);  // the WAL's fdatasync of the next write fails
  EXPECT_FALSE(store_->WriteBlocks(7, 6, 0, Pattern('x'), {}).ok());
  auto again = store_->WriteBlocks(7, 6, 0, Pattern('y'), {});
  EXPECT_TRUE(IsKind(again.status(), ErrorKind::kDeviceFailed)) << again.status();
  EXPECT_FALSE(store_->Stats().device_error.empty());
  EXPECT_FALSE(
      store_->LogAppend({LogEntry{3, 1, 7, 6, 0, BlockChecksum(Pattern('z')), Pattern('z')}}).ok());
  Reopen();  // a restart (after the operator checked the device) clears it
  EXPECT_TRUE(store_->WriteBlocks(7, 6, 0, Pattern('y'), {}).ok());
  auto r = store_->ReadBlocks(7, 6, 1, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, Pattern('k')) << "an acknowledged write was lost";
}

}  // namespace
}  // namespace ringcache::datanode
