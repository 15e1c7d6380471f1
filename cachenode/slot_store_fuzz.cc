// Fuzz target for a cache node's SSD metadata (cachenode/slot_store.h): the superblock, the
// cluster record and the slot index a restart reads back. Whatever the bytes, SlotStore::Open
// either refuses the device with a clear error or recovers slots that are each in range, one per
// block, and never reads past the device.
//
// The device is in memory: 16 slots of 4 KiB behind a 1 MiB metadata area. Input: byte 0 says
// which checksums to make right after the bytes are placed (bit 0: the superblock's, bit 1:
// every index entry's, bit 2: the cluster record's, bit 3: every entry's data checksum, bit 4:
// open as a node of cluster "fuzz"), so that the fields behind the checksums are reached too;
// then 128 bytes of the superblock page, 1,024 bytes of index (16 entries of 64), and bytes the
// data blocks are filled from. Run by Fuzz.slot_store_fuzz (common/testing/fuzz_main.cc) and by
// tests/fuzz/fuzz.sh.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cachenode/slot_store.h"
#include "common/checksum.h"
#include "common/file.h"
#include "common/testing/fuzz_check.h"

namespace {

constexpr uint32_t kBlock = 4096;
constexpr uint32_t kSlots = 16;
constexpr uint64_t kDataOffset = 1 << 20;
constexpr uint64_t kIndexOffset = 4096;
constexpr uint64_t kDeviceBytes = kDataOffset + uint64_t{kSlots} * kBlock;

// A device in memory: reads and writes past its end fail as a short device would. The bytes
// live in one buffer kept across iterations (a fresh 1 MiB device per input was most of this
// target's time, and under ASan far more): every range the store wrote is noted, and Reset()
// puts the buffer back to zeros there and where the input was placed.
class MemFile : public ringcache::File {
 public:
  explicit MemFile(std::string* bytes) : bytes_(bytes) {}
  absl::Status PRead(void* buf, size_t len, uint64_t off) const override {
    if (off > bytes_->size() || len > bytes_->size() - off) {
      return absl::OutOfRangeError("read past the device");
    }
    std::memcpy(buf, bytes_->data() + off, len);
    return absl::OkStatus();
  }
  absl::Status PWrite(const void* buf, size_t len, uint64_t off) override {
    if (off > bytes_->size() || len > bytes_->size() - off) {
      return absl::OutOfRangeError("write past the device");
    }
    std::memcpy(bytes_->data() + off, buf, len);
    Written().push_back({off, len});
    return absl::OkStatus();
  }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> Size() const override { return bytes_->size(); }
  absl::Status Preallocate(uint64_t size) override {
    if (size > bytes_->size()) bytes_->resize(size);
    return absl::OkStatus();
  }
  bool IsBlockDevice() const override { return false; }

  // The ranges written since the last Reset (the store may outlive its MemFile's scope: kept
  // outside it).
  static std::vector<std::pair<uint64_t, size_t>>& Written() {
    static auto* w = new std::vector<std::pair<uint64_t, size_t>>();
    return *w;
  }
  // Zeros where the input went and where the store wrote; the device's size again.
  static void Reset(std::string* dev) {
    dev->resize(kDeviceBytes);
    std::memset(dev->data(), 0, kIndexOffset + uint64_t{kSlots} * 64);
    std::memset(dev->data() + kDataOffset, 0, uint64_t{kSlots} * kBlock);
    for (const auto& [off, len] : Written()) {
      if (off < dev->size()) {
        std::memset(dev->data() + off, 0, std::min<uint64_t>(len, dev->size() - off));
      }
    }
    Written().clear();
  }

 private:
  std::string* bytes_;
};

void PutU64(std::string* s, size_t at, uint64_t v) { std::memcpy(s->data() + at, &v, 8); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t fix = data[0];
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  static std::string* device = new std::string(kDeviceBytes, '\0');  // zeros between inputs
  std::string& dev = *device;
  std::memcpy(dev.data(), in.data(), std::min<size_t>(in.size(), 128));
  if (in.size() > 128) {
    std::memcpy(dev.data() + kIndexOffset, in.data() + 128,
                std::min<size_t>(in.size() - 128, kSlots * 64));
  }
  const std::string fill = in.size() > 128 + kSlots * 64 ? in.substr(128 + kSlots * 64) : "";
  if (!fill.empty()) {
    // Slot s's block: the fill bytes repeated, each XOR s.
    std::string row(kBlock, '\0');
    for (uint32_t i = 0; i < kBlock; i += static_cast<uint32_t>(fill.size())) {
      std::memcpy(row.data() + i, fill.data(), std::min<size_t>(fill.size(), kBlock - i));
    }
    for (uint32_t slot = 0; slot < kSlots; ++slot) {
      uint64_t mask;
      std::memset(&mask, static_cast<int>(slot), sizeof(mask));
      char* out = dev.data() + kDataOffset + uint64_t{slot} * kBlock;
      for (uint32_t i = 0; i < kBlock; i += 8) {
        uint64_t w;
        std::memcpy(&w, row.data() + i, 8);
        w ^= mask;
        std::memcpy(out + i, &w, 8);
      }
    }
  }
  if (fix & 1) PutU64(&dev, 56, ringcache::BlockChecksum(dev.data(), 56));
  if (fix & 4) PutU64(&dev, 64 + 56, ringcache::BlockChecksum(dev.data() + 64, 56));
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    const size_t at = kIndexOffset + slot * 64;
    if (fix & 8) {
      PutU64(&dev, at + 32,
             ringcache::BlockChecksum(dev.data() + kDataOffset + uint64_t{slot} * kBlock, kBlock));
    }
    if (fix & 2) PutU64(&dev, at + 56, ringcache::BlockChecksum(dev.data() + at, 56));
  }
  ringcache::cachenode::SlotStoreOptions o;
  o.path = "fuzz-ssd";
  o.capacity_bytes = uint64_t{kSlots} * kBlock;
  o.block_size = kBlock;
  o.node_id = 1;
  if (fix & 16) o.cluster_id = "fuzz";
  std::vector<ringcache::cachenode::RecoveredSlot> recovered;
  ringcache::cachenode::RecoveryStats stats;
  auto store = ringcache::cachenode::SlotStore::Open(o, &recovered, &stats,
                                                     std::make_unique<MemFile>(&dev));
  struct ResetAtEnd {
    std::string* dev;
    absl::StatusOr<std::unique_ptr<ringcache::cachenode::SlotStore>>* store;
    ~ResetAtEnd() {
      if (store->ok()) store->value().reset();  // closed (it may write) before the zeroing
      MemFile::Reset(dev);
    }
  } reset_at_end{&dev, &store};
  if (!store.ok()) {
    FUZZ_CHECK(!store.status().message().empty());
    return 0;
  }
  FUZZ_CHECK((*store)->num_slots() == kSlots);
  FUZZ_CHECK(recovered.size() <= kSlots);
  std::set<uint32_t> slots;
  for (const auto& r : recovered) {
    FUZZ_CHECK(r.slot < kSlots);
    FUZZ_CHECK(slots.insert(r.slot).second);
    FUZZ_CHECK(!r.damaged || (r.dirty && r.log_seq != 0));
  }
  FUZZ_CHECK(stats.slots_valid <= kSlots);
  return 0;
}
