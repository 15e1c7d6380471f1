// SSD slot file with a persistent per-slot index and group-committed fdatasync.
#include "cachenode/slot_store.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/checksum.h"
#include "common/formats.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {
namespace {

constexpr char kMagic[8] = {'R', 'C', 'S', 'L', 'O', 'T', 'S', '1'};
// A store that was never resized is written as version 2 (which 0.1.0 reads); the first
// online resize makes it version 3 (its extent table).
constexpr uint32_t kVersion = 2;
constexpr uint32_t kResizedVersion = kSlotFileFormat.writes;
static_assert(kSlotFileFormat.reads_from == 1 && kResizedVersion == 3,
              "Open reads versions 1-3");
constexpr uint32_t kEntryMagic = 0x58494352;  // "RCIX"
constexpr uint64_t kSuperSize = 4096;
constexpr uint64_t kEntrySize = 64;

// On-disk index entry. Plain bytes; the struct is only an encoding aid.
struct DiskEntry {
  uint32_t magic;
  uint8_t flags;    // bit0 used, bit1 dirty
  uint8_t version;  // kSlotEntryFormat; 0 in entries written before it was kept (version 1)
  uint8_t pad0[2];
  uint32_t vdi;
  uint32_t pad1;
  uint64_t block;
  uint64_t seq;
  uint64_t data_checksum;
  uint64_t log_seq;  // write-back log record of a dirty block (cachenode/write_log.h), 0 = none
  uint64_t epoch;    // dirty: ownership epoch the write was accepted at (0 in older files)
  uint64_t entry_checksum;  // XXH3 of the 56 bytes above
};
static_assert(sizeof(DiskEntry) == kEntrySize);

// Superblock. Version 1 ended with its checksum at byte 32 (pad where node_id is); version 2
// adds the store's identity: the cache node it belongs to and its incarnation, a random 128-bit
// id made when the store is created (docs/durability.md, "Incarnations").
struct DiskSuper {
  char magic[8];
  uint32_t version;
  uint32_t block_size;
  uint32_t num_slots;
  uint32_t node_id;  // 0: not bound to a node (version 1, or a store opened without an id)
  uint64_t data_offset;
  uint64_t incarnation[2];
  uint32_t created_unix;
  uint32_t flags;     // kAdoptPending
  uint64_t checksum;  // of the 56 bytes above
};
// Set when the store is created, cleared by MarkAdopted once the node took over from its old
// incarnation (replayed its log): a start that died in between does it again.
constexpr uint32_t kAdoptPending = 1;
static_assert(sizeof(DiskSuper) == 64);
constexpr size_t kV1ChecksumOffset = 32;

// The cluster record, at byte 64 of the superblock page (a version 2 file has zeros there, and
// readers that predate it ignore it): the id of the cluster the store was created or first
// opened in (docs/durability.md, "Incarnations").
struct DiskCluster {
  char magic[8];
  char id[48];        // NUL-padded
  uint64_t checksum;  // of the 56 bytes above
};
static_assert(sizeof(DiskCluster) == 64);
constexpr char kClusterMagic[8] = {'R', 'C', 'C', 'L', 'U', 'S', 'T', 'R'};
constexpr uint64_t kClusterOffset = 64;

// Version 3's extent table, at byte 512 of the superblock page (its own sectors: a torn write
// of it cannot touch the superblock). It is the truth about the geometry: written before the
// superblock, so a crash between them leaves the new table under a superblock that either
// still says version 2 (the first resize: the old geometry holds, the file's new tail unused)
// or says 3 (the table holds).
struct DiskExtent {
  uint64_t index_offset;
  uint64_t data_offset;
  uint32_t first;
  uint32_t slots;
  uint32_t index_slots;
  uint32_t pad;
};
static_assert(sizeof(DiskExtent) == 32);
// The table of N extents. The first tables had 16 ("RCEXTENT": 15 growths); a store writes 64
// ("RCEXTNT2") and reads both.
template <uint32_t N>
struct DiskLayoutOf {
  char magic[8];
  uint32_t count;
  uint32_t shrink_to;  // a pending shrink's target in slots (0: none)
  DiskExtent extents[N];
  uint64_t checksum;  // of the bytes above
};
constexpr uint32_t kDiskExtents = 64;
using DiskLayout = DiskLayoutOf<kDiskExtents>;
using DiskLayout16 = DiskLayoutOf<16>;
static_assert(sizeof(DiskLayout16) == 536);
static_assert(sizeof(DiskLayout) == 2072);
constexpr char kLayoutMagic[8] = {'R', 'C', 'E', 'X', 'T', 'N', 'T', '2'};
constexpr char kLayout16Magic[8] = {'R', 'C', 'E', 'X', 'T', 'E', 'N', 'T'};
constexpr uint64_t kLayoutOffset = 512;
static_assert(kLayoutOffset + sizeof(DiskLayout) <= 4096, "the table fits the superblock page");
constexpr uint64_t kRegionAlign = 1 << 20;

std::string IncarnationText(const uint64_t (&v)[2]) {
  return absl::StrFormat("%016x%016x", v[0], v[1]);
}

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

absl::Status SlotStoreOptions::Validate() const {
  if (path.empty()) return absl::InvalidArgumentError("ssd path must be set");
  if (block_size < 4096 || block_size > 65536 || (block_size & (block_size - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size ", block_size, " must be a power of two in [4KiB, 64KiB]"));
  }
  if (capacity_bytes / block_size < 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("ssd capacity ", capacity_bytes, " holds fewer than 16 blocks"));
  }
  if (capacity_bytes / block_size > UINT32_MAX - 1) {
    return absl::InvalidArgumentError("ssd capacity holds more than 2^32-2 blocks");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SlotStore>> SlotStore::Open(const SlotStoreOptions& options,
                                                           std::vector<RecoveredSlot>* recovered,
                                                           RecoveryStats* stats,
                                                           std::unique_ptr<File> file) {
  RC_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<SlotStore> s(new SlotStore());
  s->path_ = options.path;
  s->block_size_ = options.block_size;
  static_assert(kMaxExtents == kDiskExtents);
  const uint32_t configured = static_cast<uint32_t>(options.capacity_bytes / options.block_size);
  s->num_slots_.store(configured);
  s->extents_[0] = Extent{kSuperSize,
                          RoundUp(kSuperSize + uint64_t{configured} * kEntrySize, kRegionAlign), 0,
                          configured};
  s->extent_count_.store(1);
  const uint64_t data_offset = s->extents_[0].data_offset;
  const uint64_t total = data_offset + uint64_t{configured} * s->block_size_;
  uint32_t shrink_to = 0;

  if (file == nullptr) {
    RC_ASSIGN_OR_RETURN(file, OpenPosixFile(options.path, /*create=*/true));
  }
  s->file_ = std::move(file);
  RC_ASSIGN_OR_RETURN(const uint64_t have, s->file_->Size());

  DiskSuper sup{};
  bool fresh = have < kSuperSize;
  if (!fresh) {
    RC_RETURN_IF_ERROR(s->file_->PRead(&sup, sizeof(sup), 0));
    fresh = std::all_of(reinterpret_cast<char*>(&sup), reinterpret_cast<char*>(&sup) + sizeof(sup),
                        [](char c) { return c == 0; });
  }
  bool write_super = false;
  if (fresh) {
    if (s->file_->IsBlockDevice()) {
      if (have < total) {
        return absl::InvalidArgumentError(absl::StrCat("block device ", options.path, " has ",
                                                       have, " bytes, need ", total));
      }
      // Zero the index area of a device (a file gets zeros from ftruncate).
      std::string zeros(1 << 20, '\0');
      for (uint64_t off = kSuperSize; off < data_offset; off += zeros.size()) {
        RC_RETURN_IF_ERROR(s->file_->PWrite(
            zeros.data(), std::min<uint64_t>(zeros.size(), data_offset - off), off));
      }
    } else {
      RC_RETURN_IF_ERROR(s->file_->Preallocate(total));
    }
    sup = DiskSuper{};
    std::memcpy(sup.magic, kMagic, sizeof(kMagic));
    sup.block_size = s->block_size_;
    sup.num_slots = configured;
    sup.data_offset = data_offset;
    sup.flags = kAdoptPending;
    write_super = true;
  } else {
    // A slot file of another format version (a newer release's, after a downgrade) is refused
    // naming the versions, before its checksum is looked at: its layout may differ.
    if (std::memcmp(sup.magic, kMagic, sizeof(kMagic)) == 0) {
      RC_RETURN_IF_ERROR(CheckFormat(kSlotFileFormat, sup.version, options.path));
    }
    const bool v1 = std::memcmp(sup.magic, kMagic, sizeof(kMagic)) == 0 && sup.version == 1;
    const size_t sum_at = v1 ? kV1ChecksumOffset : offsetof(DiskSuper, checksum);
    uint64_t sum = 0;
    std::memcpy(&sum, reinterpret_cast<const char*>(&sup) + sum_at, sizeof(sum));
    if (std::memcmp(sup.magic, kMagic, sizeof(kMagic)) != 0 ||
        sum != BlockChecksum(&sup, sum_at)) {
      return absl::FailedPreconditionError(absl::StrCat(
          options.path, " is not a ringcache slot file (bad superblock); refusing to overwrite"));
    }
    const bool v3 = sup.version == kResizedVersion;
    if (v3 && sup.block_size == s->block_size_) {
      // Resized online: its extent table says its size, whatever the configuration says (the
      // cache node warns when they differ).
      uint32_t n = 0;
      RC_RETURN_IF_ERROR(s->ReadLayout(&n, &shrink_to));
      s->num_slots_.store(n);
    } else if ((sup.version != kVersion && !v1) || sup.block_size != s->block_size_ ||
               sup.num_slots != configured || sup.data_offset != data_offset) {
      return absl::FailedPreconditionError(absl::StrCat(
          options.path, " was created with block_size ", sup.block_size, " and ", sup.num_slots,
          " slots; configured ", s->block_size_, " and ", configured,
          ". To change its size, start the node with the size it has and resize it online "
          "(`ringcachectl node resize`); to change the block size, destage and remove the "
          "file"));
    }
    if (v1) {
      // A version 1 store: same blocks, same incarnation from now on (it gets its id here).
      const uint64_t kept[4] = {0, 0, 0, 0};
      std::memcpy(reinterpret_cast<char*>(&sup) + kV1ChecksumOffset, kept, sizeof(kept));
      sup.node_id = 0;
      write_super = true;
    } else if (options.node_id != 0 && sup.node_id != 0 && sup.node_id != options.node_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          options.path, " is the SSD of cache node ", sup.node_id, ", not of node ",
          options.node_id,
          ": refusing to serve another node's blocks (wipe the device to reuse it)"));
    }
  }
  if (sup.incarnation[0] == 0 && sup.incarnation[1] == 0) {
    std::random_device rd;
    for (uint64_t& w : sup.incarnation) {
      while (w == 0) w = (uint64_t{rd()} << 32) ^ rd();
    }
    sup.created_unix = static_cast<uint32_t>(absl::ToUnixSeconds(absl::Now()));
    write_super = true;
  }
  if (sup.node_id == 0 && options.node_id != 0) {
    sup.node_id = options.node_id;
    write_super = true;
  }
  if (write_super) {
    sup.version = sup.version == kResizedVersion ? kResizedVersion : kVersion;
    sup.checksum = BlockChecksum(&sup, offsetof(DiskSuper, checksum));
    RC_RETURN_IF_ERROR(s->file_->PWrite(&sup, sizeof(sup), 0));
    RC_RETURN_IF_ERROR(s->file_->Sync());
  }
  if (!options.cluster_id.empty()) {
    if (options.cluster_id.size() > sizeof(DiskCluster::id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster id '", options.cluster_id, "' is longer than 48 characters"));
    }
    DiskCluster rec{};
    RC_RETURN_IF_ERROR(s->file_->PRead(&rec, sizeof(rec), kClusterOffset));
    const bool held = std::memcmp(rec.magic, kClusterMagic, sizeof(kClusterMagic)) == 0 &&
                      rec.checksum == BlockChecksum(&rec, offsetof(DiskCluster, checksum));
    if (held) {
      const std::string id(rec.id, strnlen(rec.id, sizeof(rec.id)));
      if (id != options.cluster_id) {
        return absl::FailedPreconditionError(absl::StrCat(
            options.path, " is an SSD of cluster '", id, "', and this node serves cluster '",
            options.cluster_id,
            "': refusing to serve another cluster's blocks (wipe the device to reuse it)"));
      }
    } else {
      rec = DiskCluster{};
      std::memcpy(rec.magic, kClusterMagic, sizeof(kClusterMagic));
      std::memcpy(rec.id, options.cluster_id.data(), options.cluster_id.size());
      rec.checksum = BlockChecksum(&rec, offsetof(DiskCluster, checksum));
      RC_RETURN_IF_ERROR(s->file_->PWrite(&rec, sizeof(rec), kClusterOffset));
      RC_RETURN_IF_ERROR(s->file_->Sync());
    }
  }
  s->incarnation_ = IncarnationText(sup.incarnation);
  s->created_ = (sup.flags & kAdoptPending) != 0;
  {
    absl::MutexLock l(&s->mu_);
    s->meta_.assign(s->num_slots(), Meta{});
    s->limit_ = shrink_to != 0 ? shrink_to : s->num_slots();
  }
  RecoveryStats local;
  RC_RETURN_IF_ERROR(s->Recover(recovered, stats ? stats : &local));
  return s;
}

absl::Status SlotStore::MarkAdopted() {
  absl::MutexLock l(&super_mu_);
  if (!created_) return absl::OkStatus();
  DiskSuper sup{};
  RC_RETURN_IF_ERROR(file_->PRead(&sup, sizeof(sup), 0));
  sup.flags &= ~kAdoptPending;
  sup.checksum = BlockChecksum(&sup, offsetof(DiskSuper, checksum));
  RC_RETURN_IF_ERROR(file_->PWrite(&sup, sizeof(sup), 0));
  RC_RETURN_IF_ERROR(file_->Sync());
  created_ = false;
  return absl::OkStatus();
}

SlotStore::~SlotStore() {
  if (file_ != nullptr && failed().ok()) file_->Sync().IgnoreError();
}

absl::Status SlotStore::Recover(std::vector<RecoveredSlot>* recovered, RecoveryStats* stats) {
  recovered->clear();
  struct Candidate {
    uint32_t slot;
    DiskEntry e;
  };
  absl::flat_hash_map<SlotKey, std::vector<Candidate>> by_key;
  std::vector<uint32_t> to_clear;
  // Each extent's index is read 1 MiB at a time, or in one read when it is smaller: a zeroed
  // 1 MiB buffer for a small store's few KiB was most of what opening it cost
  // (Fuzz.slot_store_fuzz opens a 16-slot store per input: 209 page faults each under ASan).
  std::vector<char> buf;
  const uint32_t extents = extent_count_.load(std::memory_order_acquire);
  for (uint32_t x = 0; x < extents; ++x) {
    const Extent& ext = extents_[x];
    const uint32_t end = x + 1 < extents ? extents_[x + 1].first : num_slots();
    const uint64_t index_bytes = uint64_t{end - ext.first} * kEntrySize;
    buf.resize(static_cast<size_t>(std::min<uint64_t>(index_bytes, 1 << 20)));
    for (uint64_t off = 0; off < index_bytes; off += buf.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), index_bytes - off));
      RC_RETURN_IF_ERROR(file_->PRead(buf.data(), n, ext.index_offset + off));
      for (size_t i = 0; i < n; i += kEntrySize) {
        DiskEntry e;
        std::memcpy(&e, buf.data() + i, sizeof(e));
        const uint32_t slot = ext.first + static_cast<uint32_t>((off + i) / kEntrySize);
        if (e.magic == 0 && e.flags == 0) continue;  // never used / released
        if (e.magic != kEntryMagic || !(e.flags & 1) ||
            e.entry_checksum != BlockChecksum(&e, offsetof(DiskEntry, entry_checksum))) {
          ++stats->torn_or_corrupt;
          to_clear.push_back(slot);
          continue;
        }
        // An entry of a newer layout (a newer release wrote it into a file whose superblock
        // this release reads) is refused before anything is freed or rewritten.
        if (const uint32_t v = e.version == 0 ? 1 : e.version; v > kSlotEntryFormat.writes) {
          return CheckFormat(kSlotEntryFormat, v, absl::StrCat(path_, " (slot ", slot, ")"));
        }
        by_key[SlotKey{e.vdi, e.block}].push_back({slot, e});
      }
    }
  }
  std::vector<char> data(block_size_);
  uint64_t max_seq = 0;
  absl::MutexLock l(&mu_);
  for (auto& [key, cands] : by_key) {
    std::sort(cands.begin(), cands.end(),
              [](const Candidate& a, const Candidate& b) { return a.e.seq > b.e.seq; });
    bool kept = false, damaged = false;
    for (const Candidate& c : cands) {
      max_seq = std::max(max_seq, c.e.seq);
      if (kept) {
        ++stats->stale_versions;
        to_clear.push_back(c.slot);
        continue;
      }
      RC_RETURN_IF_ERROR(file_->PRead(data.data(), block_size_, DataOffset(c.slot)));
      if (BlockChecksum(data.data(), block_size_) != c.e.data_checksum) {
        ++stats->torn_or_corrupt;
        if ((c.e.flags & 2) != 0 && c.e.log_seq != 0 && !damaged) {
          // The newest version of a dirty block is damaged, but its write-back log record can
          // restore it: keep the slot for the cache node to repair, and an older good version
          // (if any) as a fallback.
          damaged = true;
          meta_[c.slot] =
              Meta{key, c.e.seq, c.e.data_checksum, true, true, c.e.log_seq, c.e.epoch};
          recovered->push_back({c.slot, key, true, c.e.seq, c.e.log_seq, true, c.e.epoch});
          continue;
        }
        to_clear.push_back(c.slot);
        continue;
      }
      kept = true;
      const bool dirty = (c.e.flags & 2) != 0;
      meta_[c.slot] = Meta{key, c.e.seq, c.e.data_checksum, dirty, true, c.e.log_seq, c.e.epoch};
      recovered->push_back(
          {c.slot, key, dirty, c.e.seq, dirty ? c.e.log_seq : 0, false, dirty ? c.e.epoch : 0});
      ++stats->slots_valid;
      if (dirty) ++stats->slots_dirty;
    }
  }
  next_seq_ = max_seq + 1;
  const DiskEntry zero{};
  for (uint32_t slot : to_clear) {
    RC_RETURN_IF_ERROR(file_->PWrite(&zero, sizeof(zero), IndexOffset(slot)));
  }
  if (!to_clear.empty()) RC_RETURN_IF_ERROR(file_->Sync());
  free_.clear();
  for (uint32_t i = limit_; i-- > 0;) {
    if (!meta_[i].used) free_.push_back(i);
  }
  CountUsedPastLimitLocked();
  std::sort(recovered->begin(), recovered->end(),
            [](const RecoveredSlot& a, const RecoveredSlot& b) { return a.seq < b.seq; });
  return absl::OkStatus();
}

const SlotStore::Extent& SlotStore::ExtentOf(uint32_t slot) const {
  uint32_t x = extent_count_.load(std::memory_order_acquire);
  while (x > 1 && extents_[x - 1].first > slot) --x;
  return extents_[x - 1];
}

uint64_t SlotStore::IndexOffset(uint32_t slot) const {
  const Extent& e = ExtentOf(slot);
  return e.index_offset + uint64_t{slot - e.first} * kEntrySize;
}

uint64_t SlotStore::DataOffset(uint32_t slot) const {
  const Extent& e = ExtentOf(slot);
  return e.data_offset + uint64_t{slot - e.first} * block_size_;
}

absl::Status SlotStore::ReadLayout(uint32_t* num_slots, uint32_t* shrink_to) {
  DiskLayout d{};
  RC_RETURN_IF_ERROR(file_->PRead(&d, sizeof(d), kLayoutOffset));
  bool valid = std::memcmp(d.magic, kLayoutMagic, sizeof(kLayoutMagic)) == 0 &&
               d.checksum == BlockChecksum(&d, offsetof(DiskLayout, checksum));
  if (!valid && std::memcmp(d.magic, kLayout16Magic, sizeof(kLayout16Magic)) == 0) {
    // A table of 16 (an earlier build): its checksum follows its 16th extent.
    DiskLayout16 old{};
    std::memcpy(&old, &d, sizeof(old));
    valid = old.checksum == BlockChecksum(&old, offsetof(DiskLayout16, checksum)) &&
            old.count <= 16;
    std::memset(&d.extents[16], 0, sizeof(d.extents) - 16 * sizeof(DiskExtent));
  }
  if (!valid || d.count == 0 || d.count > kDiskExtents) {
    return absl::DataLossError(
        absl::StrCat(path_, ": the extent table of a resized slot file is damaged"));
  }
  uint64_t n = 0;
  for (uint32_t x = 0; x < d.count; ++x) {
    const DiskExtent& e = d.extents[x];
    if (e.first != n || e.slots > e.index_slots || e.slots == 0) {
      return absl::DataLossError(
          absl::StrCat(path_, ": extent ", x, " of the slot file does not follow the one before"));
    }
    extents_[x] = Extent{e.index_offset, e.data_offset, e.first, e.index_slots};
    n += e.slots;
  }
  if (n > UINT32_MAX - 1 || (d.shrink_to != 0 && d.shrink_to >= n)) {
    return absl::DataLossError(absl::StrCat(path_, ": the extent table's sizes do not add up"));
  }
  extent_count_.store(d.count, std::memory_order_release);
  *num_slots = static_cast<uint32_t>(n);
  *shrink_to = d.shrink_to;
  return absl::OkStatus();
}

absl::Status SlotStore::WriteLayout(uint32_t extents, uint32_t num_slots, uint32_t shrink_to) {
  DiskLayout d{};
  std::memcpy(d.magic, kLayoutMagic, sizeof(kLayoutMagic));
  d.count = extents;
  d.shrink_to = shrink_to;
  for (uint32_t x = 0; x < extents; ++x) {
    const Extent& e = extents_[x];
    const uint32_t end = x + 1 < extents ? extents_[x + 1].first : num_slots;
    d.extents[x] = DiskExtent{e.index_offset, e.data_offset, e.first, end - e.first,
                              e.index_slots, 0};
  }
  d.checksum = BlockChecksum(&d, offsetof(DiskLayout, checksum));
  RC_RETURN_IF_ERROR(Checked(file_->PWrite(&d, sizeof(d), kLayoutOffset)));
  RC_RETURN_IF_ERROR(Checked(file_->Sync()));
  DiskSuper sup{};
  RC_RETURN_IF_ERROR(file_->PRead(&sup, sizeof(sup), 0));
  sup.version = kResizedVersion;
  sup.num_slots = num_slots;
  sup.checksum = BlockChecksum(&sup, offsetof(DiskSuper, checksum));
  RC_RETURN_IF_ERROR(Checked(file_->PWrite(&sup, sizeof(sup), 0)));
  return Checked(file_->Sync());
}

uint32_t SlotStore::usable_slots() const {
  absl::MutexLock l(&mu_);
  return limit_;
}

uint32_t SlotStore::shrink_target() const {
  absl::MutexLock l(&mu_);
  return limit_ < meta_.size() ? limit_ : 0;
}

uint32_t SlotStore::used_past_target() const {
  absl::MutexLock l(&mu_);
  return used_past_limit_;
}

void SlotStore::CountUsedPastLimitLocked() {
  used_past_limit_ = 0;
  for (size_t i = limit_; i < meta_.size(); ++i) used_past_limit_ += meta_[i].used ? 1 : 0;
}

absl::Status SlotStore::Resize(uint32_t slots) {
  if (slots < 16 || slots > UINT32_MAX - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("an SSD tier of ", slots, " slots: want 16 to 2^32-2"));
  }
  absl::MutexLock rl(&super_mu_);
  RC_RETURN_IF_ERROR(failed());
  const uint32_t have = num_slots();
  uint32_t extents = extent_count_.load(std::memory_order_acquire);
  if (slots < have) {
    // A shrink: persisted first, so that a restart resumes it.
    RC_RETURN_IF_ERROR(WriteLayout(extents, have, slots));
  } else if (slots > have) {
    // The last extent lengthens while its index has room (its data ends the file); the rest
    // is a new extent after it.
    const Extent& last = extents_[extents - 1];
    const uint32_t in_place =
        std::min<uint32_t>(slots - have, last.first + last.index_slots - have);
    uint64_t end = last.data_offset + uint64_t{have + in_place - last.first} * block_size_;
    uint32_t count = extents;
    if (have + in_place < slots) {
      if (extents == kMaxExtents) {
        return absl::FailedPreconditionError(absl::StrCat(
            path_, " was grown ", kMaxExtents - 1, " times and has no room for another "
            "extent: destage and remove the file to lay it out again at its new size"));
      }
      Extent e;
      e.first = have + in_place;
      e.index_slots = slots - e.first;
      e.index_offset = RoundUp(end, kRegionAlign);
      e.data_offset = RoundUp(e.index_offset + uint64_t{e.index_slots} * kEntrySize, kRegionAlign);
      end = e.data_offset + uint64_t{e.index_slots} * block_size_;
      extents_[count++] = e;  // not published until the layout is on disk
    }
    RC_ASSIGN_OR_RETURN(const uint64_t size, file_->Size());
    if (file_->IsBlockDevice() && size < end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "block device ", path_, " has ", size, " bytes; ", slots, " slots need ", end));
    }
    if (!file_->IsBlockDevice() && size < end) RC_RETURN_IF_ERROR(file_->Preallocate(end));
    // The new slots' index entries start empty (a device, or a file cut by an earlier shrink
    // in the middle of an index region, may hold old bytes there).
    const std::string zeros(kEntrySize * 1024, '\0');
    for (uint32_t x = extents - 1; x < count; ++x) {
      const Extent& e = extents_[x];
      const uint32_t from = std::max(e.first, have);
      const uint32_t to = x + 1 < count ? extents_[x + 1].first : slots;
      for (uint32_t i = from; i < to;) {
        const uint32_t n = std::min<uint32_t>(to - i, 1024);
        RC_RETURN_IF_ERROR(Checked(file_->PWrite(
            zeros.data(), uint64_t{n} * kEntrySize,
            e.index_offset + uint64_t{i - e.first} * kEntrySize)));
        i += n;
      }
    }
    RC_RETURN_IF_ERROR(WriteLayout(count, slots, 0));
    extents = count;
    extent_count_.store(count, std::memory_order_release);
  } else if (shrink_target() != 0) {
    RC_RETURN_IF_ERROR(WriteLayout(extents, have, 0));  // back to its full size
  }
  absl::MutexLock l(&mu_);
  if (meta_.size() < slots) meta_.resize(slots);
  limit_ = slots;
  free_.clear();
  for (uint32_t i = limit_; i-- > 0;) {
    if (!meta_[i].used) free_.push_back(i);
  }
  CountUsedPastLimitLocked();
  if (slots > have) num_slots_.store(slots, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status SlotStore::FinishShrink() {
  absl::MutexLock rl(&super_mu_);
  const uint32_t target = shrink_target();
  if (target == 0) return absl::OkStatus();
  if (const uint32_t used = used_past_target(); used > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        used, " SSD slots past the shrink's target (", target, " slots) still hold blocks"));
  }
  RC_RETURN_IF_ERROR(Sync());  // the released entries first
  uint32_t count = extent_count_.load(std::memory_order_acquire);
  while (count > 1 && extents_[count - 1].first >= target) --count;
  RC_RETURN_IF_ERROR(WriteLayout(count, target, 0));
  // The file is cut before the shrink shows as done (shrink_target() 0 once meta_ is resized):
  // whoever sees it done sees the smaller file. No block lives past the target, and nothing is
  // allocated there, so nothing reads or writes the part cut.
  if (!file_->IsBlockDevice()) {
    const Extent& last = extents_[count - 1];
    RC_RETURN_IF_ERROR(
        file_->Preallocate(last.data_offset + uint64_t{target - last.first} * block_size_));
  }
  {
    absl::MutexLock l(&mu_);
    meta_.resize(target);
    num_slots_.store(target, std::memory_order_release);
  }
  extent_count_.store(count, std::memory_order_release);
  return absl::OkStatus();
}

uint32_t SlotStore::free_slots() const {
  absl::MutexLock l(&mu_);
  return static_cast<uint32_t>(free_.size());
}

absl::StatusOr<uint32_t> SlotStore::Allocate() {
  absl::MutexLock l(&mu_);
  if (free_.empty()) return absl::ResourceExhaustedError("no free SSD slot");
  const uint32_t slot = free_.back();
  free_.pop_back();
  meta_[slot] = Meta{};
  meta_[slot].used = true;
  return slot;
}

absl::Status SlotStore::AllocateMany(uint32_t n, std::vector<uint32_t>* out) {
  absl::MutexLock l(&mu_);
  if (free_.size() < n) {
    return absl::ResourceExhaustedError(absl::StrCat("fewer than ", n, " free SSD slots"));
  }
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t slot = free_.back();
    free_.pop_back();
    meta_[slot] = Meta{};
    meta_[slot].used = true;
    out->push_back(slot);
  }
  return absl::OkStatus();
}

absl::Status SlotStore::WriteEntry(uint32_t slot, const Meta& m) {
  DiskEntry e{};
  e.magic = kEntryMagic;
  e.flags = static_cast<uint8_t>(1 | (m.dirty ? 2 : 0));
  e.version = static_cast<uint8_t>(kSlotEntryFormat.writes);
  e.vdi = m.key.vdi;
  e.block = m.key.block;
  e.seq = m.seq;
  e.data_checksum = m.checksum;
  e.log_seq = m.log_seq;
  e.epoch = m.epoch;
  e.entry_checksum = BlockChecksum(&e, offsetof(DiskEntry, entry_checksum));
  return Checked(file_->PWrite(&e, sizeof(e), IndexOffset(slot)));
}

absl::Status SlotStore::Checked(absl::Status s) {
  if (s.ok()) return s;
  absl::MutexLock l(&sync_mu_);
  if (sync_error_.ok()) sync_error_ = s;
  return DeviceFailedLocked();
}

absl::Status SlotStore::DeviceFailedLocked() const {
  return TypedError(ErrorKind::kDeviceFailed,
                    absl::StrCat("SSD file ", path_, " failed (", sync_error_.message(),
                                 "); no write is acknowledged until the node restarts"));
}

absl::Status SlotStore::failed() const {
  absl::MutexLock l(&sync_mu_);
  if (sync_error_.ok()) return absl::OkStatus();
  return DeviceFailedLocked();
}

void SlotStore::NoteWrite() {
  absl::MutexLock l(&sync_mu_);
  ++write_gen_;
}

absl::Status SlotStore::WriteSlot(uint32_t slot, const SlotKey& key, bool dirty,
                                  const char* data, uint64_t log_seq, uint64_t epoch) {
  if (slot >= num_slots()) return absl::InvalidArgumentError("slot out of range");
  RC_RETURN_IF_ERROR(failed());
  Meta m{key, 0, BlockChecksum(data, block_size_), dirty, true, log_seq, epoch};
  {
    absl::MutexLock l(&mu_);
    m.seq = next_seq_++;
  }
  // Data first, then the entry that vouches for it (its checksum covers the data).
  RC_RETURN_IF_ERROR(Checked(file_->PWrite(data, block_size_, DataOffset(slot))));
  RC_RETURN_IF_ERROR(WriteEntry(slot, m));
  {
    absl::MutexLock l(&mu_);
    meta_[slot] = m;
  }
  blocks_written_.fetch_add(1, std::memory_order_relaxed);
  NoteWrite();
  return absl::OkStatus();
}

absl::Status SlotStore::SetDirty(uint32_t slot, bool dirty) {
  Meta m;
  {
    absl::MutexLock l(&mu_);
    if (slot >= meta_.size() || !meta_[slot].used) {
      return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not in use"));
    }
    meta_[slot].dirty = dirty;
    if (!dirty) meta_[slot].log_seq = 0;
    m = meta_[slot];
  }
  RC_RETURN_IF_ERROR(WriteEntry(slot, m));
  NoteWrite();
  return absl::OkStatus();
}

absl::Status SlotStore::SetLogSeq(uint32_t slot, uint64_t log_seq) {
  Meta m;
  {
    absl::MutexLock l(&mu_);
    if (slot >= meta_.size() || !meta_[slot].used) {
      return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not in use"));
    }
    meta_[slot].log_seq = log_seq;
    m = meta_[slot];
  }
  RC_RETURN_IF_ERROR(WriteEntry(slot, m));
  NoteWrite();
  return absl::OkStatus();
}

absl::Status SlotStore::ReadSlot(uint32_t slot, char* data) const {
  uint64_t want;
  {
    absl::MutexLock l(&mu_);
    if (slot >= meta_.size() || !meta_[slot].used) {
      return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not in use"));
    }
    want = meta_[slot].checksum;
  }
  RC_RETURN_IF_ERROR(file_->PRead(data, block_size_, DataOffset(slot)));
  if (BlockChecksum(data, block_size_) != want) {
    return absl::DataLossError(absl::StrCat("SSD slot ", slot, " failed its checksum"));
  }
  return absl::OkStatus();
}

void SlotStore::ReadSlots(std::vector<SlotRead>* reads) const {
  std::vector<uint64_t> want(reads->size());
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < reads->size(); ++i) {
      SlotRead& r = (*reads)[i];
      if (r.slot >= meta_.size() || !meta_[r.slot].used) {
        r.status = absl::FailedPreconditionError(absl::StrCat("slot ", r.slot, " is not in use"));
      } else {
        r.status = absl::OkStatus();
        want[i] = meta_[r.slot].checksum;
      }
    }
  }
  // Indexes of the readable entries in slot order; runs of consecutive slots become one read.
  std::vector<size_t> order;
  order.reserve(reads->size());
  for (size_t i = 0; i < reads->size(); ++i) {
    if ((*reads)[i].status.ok()) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return (*reads)[a].slot < (*reads)[b].slot; });
  std::vector<struct iovec> iov;
  for (size_t lo = 0; lo < order.size();) {
    size_t hi = lo + 1;
    // Adjacent slots of one extent are adjacent on the device.
    const Extent* ext = &ExtentOf((*reads)[order[lo]].slot);
    while (hi < order.size() && (*reads)[order[hi]].slot == (*reads)[order[hi - 1]].slot + 1 &&
           &ExtentOf((*reads)[order[hi]].slot) == ext) {
      ++hi;
    }
    iov.clear();
    for (size_t k = lo; k < hi; ++k) iov.push_back({(*reads)[order[k]].data, block_size_});
    const uint32_t first = (*reads)[order[lo]].slot;
    absl::Status s = file_->PReadV(iov.data(), static_cast<int>(iov.size()), DataOffset(first));
    for (size_t k = lo; k < hi; ++k) {
      SlotRead& r = (*reads)[order[k]];
      if (!s.ok()) {
        r.status = ReadSlot(r.slot, r.data);  // each slot's own outcome
      } else if (BlockChecksum(r.data, block_size_) != want[order[k]]) {
        r.status = absl::DataLossError(absl::StrCat("SSD slot ", r.slot, " failed its checksum"));
      }
    }
    lo = hi;
  }
}

absl::Status SlotStore::Release(uint32_t slot) {
  {
    absl::MutexLock l(&mu_);
    if (slot >= meta_.size() || !meta_[slot].used) {
      return absl::FailedPreconditionError(absl::StrCat("slot ", slot, " is not in use"));
    }
  }
  const DiskEntry zero{};
  absl::Status s = Checked(file_->PWrite(&zero, sizeof(zero), IndexOffset(slot)));
  absl::MutexLock l(&mu_);
  meta_[slot] = Meta{};
  if (slot < limit_) {
    free_.push_back(slot);
  } else {
    --used_past_limit_;  // past a pending shrink's target: left empty
  }
  if (s.ok()) {
    absl::MutexLock sl(&sync_mu_);
    ++write_gen_;
  }
  return s;
}

absl::Status SlotStore::Sync() {
  absl::MutexLock l(&sync_mu_);
  const uint64_t mine = write_gen_;
  // Sticky: after a failed fdatasync the kernel may have dropped the pages it covered, and a
  // retried fdatasync would succeed without them. No later sync may vouch for those writes.
  while (synced_gen_ < mine) {
    if (!sync_error_.ok()) return DeviceFailedLocked();
    if (sync_running_) {
      auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_) { return !sync_running_; };
      sync_mu_.Await(absl::Condition(&done));
      continue;
    }
    sync_running_ = true;
    const uint64_t target = write_gen_;
    sync_mu_.Unlock();
    absl::Status rc = file_->Sync();
    sync_mu_.Lock();
    sync_running_ = false;
    if (!rc.ok()) {
      if (sync_error_.ok()) sync_error_ = rc;
      return DeviceFailedLocked();
    }
    if (!sync_error_.ok()) return DeviceFailedLocked();  // another sync failed meanwhile
    synced_gen_ = std::max(synced_gen_, target);
  }
  return absl::OkStatus();
}

}  // namespace ringcache::cachenode
