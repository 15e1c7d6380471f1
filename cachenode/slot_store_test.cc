#include "cachenode/slot_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <cstring>

#include "common/checksum.h"
#include "common/formats.h"
#include "gtest/gtest.h"

namespace ringcache::cachenode {
namespace {

class SlotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/slots_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove(path_);
  }
  std::unique_ptr<SlotStore> Open(uint64_t capacity = 64 * 4096, uint32_t bs = 4096) {
    recovered_.clear();
    stats_ = {};
    auto s = SlotStore::Open({path_, capacity, bs}, &recovered_, &stats_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void Corrupt(uint64_t offset) {
    int fd = ::open(path_.c_str(), O_RDWR);
    char c;
    ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(offset)), 1);
    c ^= 0x40;
    ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(offset)), 1);
    ::close(fd);
  }
  std::string path_;
  std::vector<RecoveredSlot> recovered_;
  RecoveryStats stats_;
};

std::string Block(char c) { return std::string(4096, c); }

TEST_F(SlotStoreTest, RecoversCleanAndDirtyAfterReopen) {
  auto s = Open();
  ASSERT_EQ(s->num_slots(), 64u);
  uint32_t a = *s->Allocate(), b = *s->Allocate();
  ASSERT_TRUE(s->WriteSlot(a, {1, 10}, true, Block('a').data()).ok());
  ASSERT_TRUE(s->WriteSlot(b, {1, 11}, false, Block('b').data()).ok());
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  ASSERT_EQ(recovered_.size(), 2u);
  EXPECT_EQ(stats_.slots_dirty, 1u);
  EXPECT_EQ(s->free_slots(), 62u);
  for (const auto& r : recovered_) {
    std::string data(4096, '\0');
    ASSERT_TRUE(s->ReadSlot(r.slot, data.data()).ok());
    EXPECT_EQ(data, r.key.block == 10 ? Block('a') : Block('b'));
    EXPECT_EQ(r.dirty, r.key.block == 10);
  }
}

TEST_F(SlotStoreTest, NewestValidVersionWinsAndTornNewestFallsBack) {
  auto s = Open();
  uint32_t v1 = *s->Allocate(), v2 = *s->Allocate(), v3 = *s->Allocate();
  ASSERT_TRUE(s->WriteSlot(v1, {2, 5}, true, Block('1').data()).ok());
  ASSERT_TRUE(s->WriteSlot(v2, {2, 5}, true, Block('2').data()).ok());
  ASSERT_TRUE(s->WriteSlot(v3, {2, 5}, true, Block('3').data()).ok());
  ASSERT_TRUE(s->Sync().ok());
  const uint64_t v3_off = s->DataOffsetForTest(v3);
  s.reset();
  Corrupt(v3_off + 17);  // version 3's data is torn: recovery must fall back to version 2
  s = Open();
  ASSERT_EQ(recovered_.size(), 1u);
  EXPECT_EQ(recovered_[0].slot, v2);
  EXPECT_EQ(stats_.torn_or_corrupt, 1u);
  EXPECT_EQ(stats_.stale_versions, 1u);
  std::string data(4096, '\0');
  ASSERT_TRUE(s->ReadSlot(v2, data.data()).ok());
  EXPECT_EQ(data, Block('2'));
  EXPECT_EQ(s->free_slots(), 63u);
  // The next write gets a higher sequence than anything recovered.
  uint32_t v4 = *s->Allocate();
  ASSERT_TRUE(s->WriteSlot(v4, {2, 5}, false, Block('4').data()).ok());
  ASSERT_TRUE(s->Release(v2).ok());
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  ASSERT_EQ(recovered_.size(), 1u);
  EXPECT_EQ(recovered_[0].slot, v4);
  EXPECT_FALSE(recovered_[0].dirty);
}

TEST_F(SlotStoreTest, CorruptDataIsDataLossOnRead) {
  auto s = Open();
  uint32_t a = *s->Allocate();
  ASSERT_TRUE(s->WriteSlot(a, {1, 1}, false, Block('x').data()).ok());
  ASSERT_TRUE(s->Sync().ok());
  Corrupt(s->DataOffsetForTest(a) + 5);
  std::string data(4096, '\0');
  EXPECT_EQ(s->ReadSlot(a, data.data()).code(), absl::StatusCode::kDataLoss);
}

// A batch read over adjacent slots (in any order) returns every block, and a damaged or unused
// slot fails alone: its neighbours in the same range still verify.
TEST_F(SlotStoreTest, BatchReadVerifiesEverySlotOnItsOwn) {
  auto s = Open();
  std::vector<uint32_t> slots;
  ASSERT_TRUE(s->AllocateMany(5, &slots).ok());
  for (uint32_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(s->WriteSlot(slots[i], {1, i}, false, Block(static_cast<char>('a' + i)).data()).ok());
  }
  ASSERT_TRUE(s->Sync().ok());
  std::vector<std::string> out(6, std::string(4096, '\0'));
  auto batch = [&] {
    std::vector<SlotStore::SlotRead> reads;
    for (uint32_t i = 0; i < 5; ++i) reads.push_back({slots[i], out[i].data(), {}});
    reads.push_back({63, out[5].data(), {}});  // never allocated: slots are taken from 0 up
    s->ReadSlots(&reads);
    return reads;
  };
  auto reads = batch();
  EXPECT_EQ(reads[5].status.code(), absl::StatusCode::kFailedPrecondition);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(reads[i].status.ok()) << i << ": " << reads[i].status;
    EXPECT_EQ(out[i], Block(static_cast<char>('a' + i))) << i;
  }
  Corrupt(s->DataOffsetForTest(slots[2]) + 7);
  reads = batch();
  for (uint32_t i = 0; i < 5; ++i) {
    if (i == 2) {
      EXPECT_EQ(reads[i].status.code(), absl::StatusCode::kDataLoss);
    } else {
      EXPECT_TRUE(reads[i].status.ok()) << i << ": " << reads[i].status;
      EXPECT_EQ(out[i], Block(static_cast<char>('a' + i))) << i;
    }
  }
}

TEST_F(SlotStoreTest, SetDirtyPersists) {
  auto s = Open();
  uint32_t a = *s->Allocate();
  ASSERT_TRUE(s->WriteSlot(a, {1, 1}, true, Block('x').data()).ok());
  ASSERT_TRUE(s->SetDirty(a, false).ok());
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  ASSERT_EQ(recovered_.size(), 1u);
  EXPECT_FALSE(recovered_[0].dirty);
}

TEST_F(SlotStoreTest, GeometryMismatchAndForeignFileRefused) {
  { auto s = Open(); }
  auto bad = SlotStore::Open({path_, 128 * 4096, 4096}, &recovered_, &stats_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string foreign = path_ + ".foreign";
  {
    int fd = ::open(foreign.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    std::string junk(8192, 'j');
    ASSERT_EQ(::write(fd, junk.data(), junk.size()), 8192);
    ::close(fd);
  }
  auto f = SlotStore::Open({foreign, 64 * 4096, 4096}, &recovered_, &stats_);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((SlotStoreOptions{"", 4096 * 64, 4096}).Validate().ok());
  EXPECT_FALSE((SlotStoreOptions{path_, 4096 * 64, 3000}).Validate().ok());
}

// Incarnations (docs/durability.md): a store gets its identity when it is created and keeps
// it; a wiped file is a new incarnation; another node's SSD is refused.
TEST_F(SlotStoreTest, IncarnationIsMadeAtCreationAndKept) {
  std::string first;
  {
    auto s = SlotStore::Open({path_, 64 * 4096, 4096, 3}, &recovered_, &stats_);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE((*s)->created());
    first = (*s)->incarnation();
    EXPECT_EQ(first.size(), 32u);
    const uint32_t slot = *(*s)->Allocate();
    ASSERT_TRUE((*s)->WriteSlot(slot, SlotKey{1, 9}, false, std::string(4096, 'q').data()).ok());
    ASSERT_TRUE((*s)->Sync().ok());
  }
  {  // The node never finished taking over (it died before MarkAdopted): still a new one.
    auto s = SlotStore::Open({path_, 64 * 4096, 4096, 3}, &recovered_, &stats_);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE((*s)->created());
    EXPECT_EQ((*s)->incarnation(), first);
    ASSERT_TRUE((*s)->MarkAdopted().ok());
    EXPECT_FALSE((*s)->created());
  }
  {
    auto s = SlotStore::Open({path_, 64 * 4096, 4096, 3}, &recovered_, &stats_);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_FALSE((*s)->created());
    EXPECT_EQ((*s)->incarnation(), first);
    EXPECT_EQ(recovered_.size(), 1u);
  }
  auto other = SlotStore::Open({path_, 64 * 4096, 4096, 4}, &recovered_, &stats_);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("cache node 3"), std::string::npos) << other.status();
  std::filesystem::remove(path_);  // a new disk
  auto fresh = SlotStore::Open({path_, 64 * 4096, 4096, 3}, &recovered_, &stats_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE((*fresh)->created());
  EXPECT_NE((*fresh)->incarnation(), first);
  EXPECT_TRUE(recovered_.empty());
}

// A disk moved from another cluster is refused; a store that predates cluster ids takes the
// first one it is opened with, blocks kept.
TEST_F(SlotStoreTest, StoreOfAnotherClusterIsRefused) {
  std::string first;
  {
    auto s = SlotStore::Open({path_, 64 * 4096, 4096, 3}, &recovered_, &stats_);
    ASSERT_TRUE(s.ok()) << s.status();
    first = (*s)->incarnation();
    const uint32_t slot = *(*s)->Allocate();
    ASSERT_TRUE((*s)->WriteSlot(slot, SlotKey{1, 9}, false, std::string(4096, 'q').data()).ok());
    ASSERT_TRUE((*s)->Sync().ok());
  }
  {
    auto s = SlotStore::Open({path_, 64 * 4096, 4096, 3, "alpha"}, &recovered_, &stats_);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->incarnation(), first);
    EXPECT_EQ(recovered_.size(), 1u);
  }
  auto other = SlotStore::Open({path_, 64 * 4096, 4096, 3, "beta"}, &recovered_, &stats_);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("'alpha'"), std::string::npos) << other.status();
  // Unchecked without an id; the same cluster opens it with its blocks.
  ASSERT_TRUE(SlotStore::Open({path_, 64 * 4096, 4096, 3}, &recovered_, &stats_).ok());
  auto same = SlotStore::Open({path_, 64 * 4096, 4096, 3, "alpha"}, &recovered_, &stats_);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ((*same)->incarnation(), first);
  EXPECT_EQ(recovered_.size(), 1u);
}

// A slot file of a newer release (after a downgrade) is refused naming the versions, and left
// as it is: the newer release opens it again.
TEST_F(SlotStoreTest, SlotFileOfANewerFormatIsRefusedNamingTheVersions) {
  { auto s = Open(); }
  char before[64];
  {
    int fd = ::open(path_.c_str(), O_RDWR);
    ASSERT_EQ(::pread(fd, before, sizeof(before), 0), 64);
    const uint32_t v4 = 4;
    ASSERT_EQ(::pwrite(fd, &v4, 4, 8), 4);
    ::close(fd);
  }
  auto s = SlotStore::Open({path_, 64 * 4096, 4096}, &recovered_, &stats_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find(
                "format version 4; this release reads slot-file versions 1-3. It was written by "
                "a newer release"),
            absl::string_view::npos)
      << s.status();
  char after[64];
  int fd = ::open(path_.c_str(), O_RDONLY);
  ASSERT_EQ(::pread(fd, after, sizeof(after), 0), 64);
  ::close(fd);
  EXPECT_EQ(std::memcmp(before + 12, after + 12, 52), 0) << "the superblock was not rewritten";
}

// A version 1 superblock (no identity) is upgraded in place: same blocks, an incarnation made
// once and kept from then on.
TEST_F(SlotStoreTest, VersionOneStoreGetsAnIdentityAndKeepsItsBlocks) {
  {
    auto s = Open();
    const uint32_t slot = *s->Allocate();
    ASSERT_TRUE(s->WriteSlot(slot, SlotKey{1, 5}, true, std::string(4096, 'v').data()).ok());
    ASSERT_TRUE(s->Sync().ok());
  }
  {  // Rewrite the superblock the way version 1 laid it out: checksum at byte 32.
    int fd = ::open(path_.c_str(), O_RDWR);
    char sup[64];
    ASSERT_EQ(::pread(fd, sup, sizeof(sup), 0), 64);
    const uint32_t v1 = 1, pad = 0;
    std::memcpy(sup + 8, &v1, 4);
    std::memcpy(sup + 20, &pad, 4);
    const uint64_t sum = BlockChecksum(sup, 32);
    std::memcpy(sup + 32, &sum, 8);
    std::memset(sup + 40, 0, 24);
    ASSERT_EQ(::pwrite(fd, sup, sizeof(sup), 0), 64);
    ::close(fd);
  }
  std::string id;
  {
    auto s = Open();
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(s->created());
    id = s->incarnation();
    ASSERT_EQ(recovered_.size(), 1u);
    EXPECT_TRUE(recovered_[0].dirty);
  }
  auto s = Open();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->incarnation(), id);
}

// Each index entry says its layout version (byte 5); an entry of an older release (0 there) is
// read as version 1, and one of a newer version is refused naming the versions.
TEST_F(SlotStoreTest, IndexEntriesSayTheirVersionAndANewerOneIsRefused) {
  {
    auto s = Open();
    const uint32_t slot = *s->Allocate();
    ASSERT_TRUE(s->WriteSlot(slot, SlotKey{1, 9}, true, Block('e').data(), 7, 3).ok());
    ASSERT_TRUE(s->Sync().ok());
  }
  // Finds the one used entry and rewrites its version byte (with the entry's checksum).
  auto set_version = [&](uint8_t v) -> uint8_t {
    int fd = ::open(path_.c_str(), O_RDWR);
    char e[64];
    off_t at = 4096;
    for (;; at += 64) {
      EXPECT_EQ(::pread(fd, e, sizeof(e), at), 64);
      if (e[4] != 0) break;  // flags: used
    }
    const uint8_t was = static_cast<uint8_t>(e[5]);
    e[5] = static_cast<char>(v);
    const uint64_t sum = BlockChecksum(e, 56);
    std::memcpy(e + 56, &sum, 8);
    EXPECT_EQ(::pwrite(fd, e, sizeof(e), at), 64);
    ::close(fd);
    return was;
  };
  EXPECT_EQ(set_version(0), kSlotEntryFormat.writes);
  {
    auto s = Open();  // as an older release left it
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(recovered_.size(), 1u);
    EXPECT_EQ(recovered_[0].key, (SlotKey{1, 9}));
    EXPECT_TRUE(recovered_[0].dirty);
    EXPECT_EQ(recovered_[0].log_seq, 7u);
  }
  set_version(static_cast<uint8_t>(kSlotEntryFormat.writes + 1));
  auto s = SlotStore::Open({path_, 64 * 4096, 4096}, &recovered_, &stats_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("slot index entry format version 3; this release reads "
                                      "slot-entry versions 1-2"),
            absl::string_view::npos)
      << s.status();
  EXPECT_EQ(set_version(2), 3) << "the refused entry was left as it was";
}

TEST_F(SlotStoreTest, ExhaustionAndRelease) {
  auto s = Open(16 * 4096);
  std::vector<uint32_t> slots;
  for (int i = 0; i < 16; ++i) slots.push_back(*s->Allocate());
  EXPECT_EQ(s->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(s->Release(slots[3]).ok());
  EXPECT_EQ(*s->Allocate(), slots[3]);
}

TEST_F(SlotStoreTest, ConcurrentWritersShareSyncs) {
  auto s = Open(256 * 4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 32; ++i) {
        uint32_t slot = *s->Allocate();
        ASSERT_TRUE(s->WriteSlot(slot, {static_cast<uint32_t>(t + 1), static_cast<uint64_t>(i)},
                                 true, Block(static_cast<char>('a' + t)).data())
                        .ok());
        ASSERT_TRUE(s->Sync().ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  s.reset();
  s = Open(256 * 4096);
  EXPECT_EQ(recovered_.size(), 128u);
}

// Online resize (docs/cache-node.md, "Resizing the tiers"): a growth adds slots at once and
// keeps every block where it was; a shrink stops handing out the slots past its target, waits
// until they are empty, then cuts the file; each step survives a reopen, and the configured size
// no longer matters once the store was resized.
TEST_F(SlotStoreTest, GrowsOnlineAndKeepsItsBlocksAcrossReopens) {
  auto s = Open();  // 64 slots
  std::vector<uint32_t> first;
  ASSERT_TRUE(s->AllocateMany(64, &first).ok());
  for (uint32_t i = 0; i < 64; ++i) {
    ASSERT_TRUE(s->WriteSlot(first[i], {1, i}, i % 2 == 0, Block('a' + i % 20).data()).ok());
  }
  EXPECT_FALSE(s->Allocate().ok());
  const uint64_t size_before = std::filesystem::file_size(path_);
  ASSERT_TRUE(s->Resize(100).ok());
  EXPECT_EQ(s->num_slots(), 100u);
  EXPECT_EQ(s->free_slots(), 36u);
  EXPECT_GT(std::filesystem::file_size(path_), size_before);
  std::vector<uint32_t> more;
  ASSERT_TRUE(s->AllocateMany(36, &more).ok());
  for (uint32_t i = 0; i < 36; ++i) {
    EXPECT_GE(more[i], 64u);
    ASSERT_TRUE(s->WriteSlot(more[i], {2, i}, true, Block('A' + i % 20).data()).ok());
  }
  // Reads across the two extents: adjacent slot numbers, not adjacent on the device.
  std::vector<std::string> bufs(4, std::string(4096, '\0'));
  std::vector<SlotStore::SlotRead> reads = {{62, bufs[0].data(), {}}, {63, bufs[1].data(), {}},
                                            {64, bufs[2].data(), {}}, {65, bufs[3].data(), {}}};
  s->ReadSlots(&reads);
  for (const auto& r : reads) EXPECT_TRUE(r.status.ok()) << r.slot << ": " << r.status;
  ASSERT_TRUE(s->Resize(200).ok());  // a third extent
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();  // configured 64: the store's own size holds
  EXPECT_EQ(s->num_slots(), 200u);
  EXPECT_EQ(recovered_.size(), 100u);
  EXPECT_EQ(s->free_slots(), 100u);
  for (const auto& r : recovered_) {
    std::string data(4096, '\0');
    ASSERT_TRUE(s->ReadSlot(r.slot, data.data()).ok()) << r.slot;
    const uint32_t i = static_cast<uint32_t>(r.key.block);
    EXPECT_EQ(data, r.key.vdi == 1 ? Block('a' + i % 20) : Block('A' + i % 20)) << r.slot;
    EXPECT_EQ(r.dirty, r.key.vdi == 2 || i % 2 == 0);
  }
}

TEST_F(SlotStoreTest, ShrinksOnceThePastSlotsAreEmptyAndAReopenResumesIt) {
  auto s = Open(256 * 4096);
  ASSERT_TRUE(s->Resize(400).ok());  // two extents
  std::vector<uint32_t> slots;
  ASSERT_TRUE(s->AllocateMany(400, &slots).ok());
  for (uint32_t slot : slots) {
    ASSERT_TRUE(s->WriteSlot(slot, {3, slot}, slot % 3 == 0, Block('a' + slot % 20).data()).ok());
  }
  ASSERT_TRUE(s->Sync().ok());
  const uint64_t size_before = std::filesystem::file_size(path_);
  ASSERT_TRUE(s->Resize(100).ok());
  EXPECT_EQ(s->shrink_target(), 100u);
  EXPECT_EQ(s->num_slots(), 400u);
  EXPECT_EQ(s->used_past_target(), 300u);
  EXPECT_FALSE(s->FinishShrink().ok()) << "blocks past the target";
  // Released slots past the target are not handed out again.
  for (uint32_t slot = 100; slot < 150; ++slot) ASSERT_TRUE(s->Release(slot).ok());
  ASSERT_TRUE(s->Release(10).ok());
  EXPECT_EQ(s->free_slots(), 1u);
  EXPECT_EQ(*s->Allocate(), 10u);
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open(256 * 4096);  // the target is kept
  EXPECT_EQ(s->num_slots(), 400u);
  EXPECT_EQ(s->shrink_target(), 100u);
  EXPECT_EQ(s->used_past_target(), 250u);
  EXPECT_EQ(s->free_slots(), 1u);  // slot 10: taken, never written
  for (const auto& r : recovered_) {
    if (r.slot >= 100) {
      ASSERT_TRUE(s->Release(r.slot).ok());
    }
  }
  EXPECT_EQ(s->used_past_target(), 0u);
  ASSERT_TRUE(s->FinishShrink().ok());
  EXPECT_EQ(s->num_slots(), 100u);
  EXPECT_EQ(s->shrink_target(), 0u);
  EXPECT_LT(std::filesystem::file_size(path_), size_before);
  s.reset();
  s = Open(256 * 4096);
  EXPECT_EQ(s->num_slots(), 100u);
  EXPECT_EQ(recovered_.size(), 99u);  // slot 10 was released and taken but never written
  for (const auto& r : recovered_) {
    std::string data(4096, '\0');
    ASSERT_TRUE(s->ReadSlot(r.slot, data.data()).ok()) << r.slot;
    EXPECT_EQ(data, Block('a' + r.slot % 20));
  }
  // Grown again inside the first extent's index room: the cut slots come back empty.
  ASSERT_TRUE(s->Resize(300).ok());
  EXPECT_EQ(s->free_slots(), 201u);
  s.reset();
  s = Open(256 * 4096);
  EXPECT_EQ(s->num_slots(), 300u);
  EXPECT_EQ(recovered_.size(), 99u);
}

TEST_F(SlotStoreTest, AGrowthEndsAPendingShrinkAndBadSizesAreRefused) {
  auto s = Open();
  EXPECT_FALSE(s->Resize(8).ok());
  ASSERT_TRUE(s->Resize(32).ok());
  EXPECT_EQ(s->free_slots(), 32u);
  ASSERT_TRUE(s->Resize(64).ok());  // back to its size: the shrink is off
  EXPECT_EQ(s->shrink_target(), 0u);
  EXPECT_EQ(s->free_slots(), 64u);
  ASSERT_TRUE(s->Resize(48).ok());
  ASSERT_TRUE(s->Resize(80).ok());
  EXPECT_EQ(s->shrink_target(), 0u);
  EXPECT_EQ(s->free_slots(), 80u);
  s.reset();
  s = Open();
  EXPECT_EQ(s->num_slots(), 80u);
  EXPECT_EQ(s->shrink_target(), 0u);
  // Another block size is still refused.
  s.reset();
  recovered_.clear();
  EXPECT_FALSE(SlotStore::Open({path_, 64 * 8192, 8192}, &recovered_, &stats_).ok());
}

TEST_F(SlotStoreTest, AResizedStoreSaysVersion3AndADamagedExtentTableStopsTheStart) {
  {
    auto s = Open();
    s.reset();
    char version = 0;
    int fd = ::open(path_.c_str(), O_RDONLY);
    ASSERT_EQ(::pread(fd, &version, 1, 8), 1);
    ::close(fd);
    EXPECT_EQ(version, 2) << "a store never resized stays version 2 (0.1.0 reads it)";
  }
  auto s = Open();
  ASSERT_TRUE(s->Resize(100).ok());
  s.reset();
  char version = 0;
  int fd = ::open(path_.c_str(), O_RDONLY);
  ASSERT_EQ(::pread(fd, &version, 1, 8), 1);
  ::close(fd);
  EXPECT_EQ(version, 3);
  Corrupt(512 + 20);
  auto bad = SlotStore::Open({path_, 64 * 4096, 4096}, &recovered_, &stats_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("extent table"), std::string::npos) << bad.status();
}

TEST_F(SlotStoreTest, GrowsSixtyThreeTimesThenSaysWhy) {
  auto s = Open();  // 64 slots
  uint32_t slots = 64;
  // Each growth past what the last extent's index holds is a new extent.
  for (int i = 0; i < 63; ++i) {
    slots += 16;
    ASSERT_TRUE(s->Resize(slots).ok()) << i;
  }
  const absl::Status full = s->Resize(slots + 16);
  EXPECT_EQ(full.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(full.message().find("grown 63 times"), std::string::npos) << full;
  // A block in the last extent reads back after a restart.
  std::vector<uint32_t> got;
  ASSERT_TRUE(s->AllocateMany(slots, &got).ok());
  const uint32_t last = slots - 1;
  ASSERT_TRUE(s->WriteSlot(last, {7, 7}, true, Block('z').data()).ok());
  ASSERT_TRUE(s->Sync().ok());
  s.reset();
  s = Open();
  EXPECT_EQ(s->num_slots(), slots);
  std::string data(4096, '\0');
  ASSERT_TRUE(s->ReadSlot(last, data.data()).ok());
  EXPECT_EQ(data, Block('z'));
}

// A table of 16 extents ("RCEXTENT", what the first resized stores wrote) still reads.
TEST_F(SlotStoreTest, AnExtentTableOfSixteenStillReads) {
  {
    auto s = Open();
    ASSERT_TRUE(s->Resize(100).ok());
    ASSERT_TRUE(s->Resize(200).ok());
  }
  // Rewrite the table as the 16-extent layout: the same header and extents, the checksum
  // after the 16th.
  int fd = ::open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::string table(16 + 16 * 32 + 8, '\0');
  ASSERT_EQ(::pread(fd, table.data(), 16 + 16 * 32, 512), 16 + 16 * 32);
  std::memcpy(table.data(), "RCEXTENT", 8);
  const uint64_t sum = BlockChecksum(table.data(), 16 + 16 * 32);
  std::memcpy(table.data() + 16 + 16 * 32, &sum, 8);
  ASSERT_EQ(::pwrite(fd, table.data(), table.size(), 512), static_cast<ssize_t>(table.size()));
  ::close(fd);
  auto s = Open();
  EXPECT_EQ(s->num_slots(), 200u);
  ASSERT_TRUE(s->Resize(300).ok());  // and a growth writes the table of 64
  s.reset();
  s = Open();
  EXPECT_EQ(s->num_slots(), 300u);
}

}  // namespace
}  // namespace ringcache::cachenode
