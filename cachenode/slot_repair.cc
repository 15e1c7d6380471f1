#include "cachenode/slot_repair.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

SlotRepair::SlotRepair(uint32_t node_id, uint32_t block_size, SlotStore* slots, BlockMap* map,
                       datanode::DataNodePool* pool, Clock* clock, metrics::Registry* registry)
    : node_id_(node_id),
      block_size_(block_size),
      slots_(slots),
      map_(map),
      pool_(pool),
      clock_(clock) {
  const metrics::Labels node{{"node", absl::StrCat(node_id)}};
  checksum_failures_ = registry->GetCounter("ringcache_cachenode_ssd_checksum_failures_total",
                                            "SSD slots that failed their checksum on read.", node);
  repairs_ = registry->GetCounter(
      "ringcache_cachenode_ssd_repairs_total",
      "Dirty blocks whose damaged SSD slot was served and rewritten from their log record.",
      node);
}

absl::Status SlotRepair::ReadBlock(const BlockKey& key, uint64_t object, uint32_t block_in_object,
                                   uint32_t slot, bool dirty, char* dst) {
  absl::Status s = slots_->ReadSlot(slot, dst);
  if (s.ok()) return s;
  checksum_failures_->Increment();
  // The only other copy of a dirty block is its log record (cache_node.h invariant 4).
  if (dirty) return RepairDirtyBlock(key, object, block_in_object, dst);
  return s;
}

void SlotRepair::ReadBlocks(std::vector<BlockRead>* blocks) {
  std::vector<SlotStore::SlotRead> reads(blocks->size());
  for (size_t i = 0; i < blocks->size(); ++i) {
    reads[i].slot = (*blocks)[i].slot;
    reads[i].data = (*blocks)[i].dst;
  }
  slots_->ReadSlots(&reads);
  for (size_t i = 0; i < blocks->size(); ++i) {
    BlockRead& b = (*blocks)[i];
    b.status = std::move(reads[i].status);
    if (b.status.ok()) continue;
    checksum_failures_->Increment();
    if (b.dirty) b.status = RepairDirtyBlock(b.key, b.object, b.block_in_object, b.dst);
  }
}

absl::Status SlotRepair::RepairDirtyBlock(const BlockKey& key, uint64_t object,
                                          uint32_t block_in_object, char* dst) {
  const std::optional<DirtyCopy> copy = map_->DirtyBlock(key);
  const uint64_t log_seq = copy ? copy->log_seq : 0;
  const std::string what =
      absl::StrCat("dirty block ", key.block, " of VDI ", key.vdi, " failed its SSD checksum");
  if (log_seq == 0) return absl::DataLossError(absl::StrCat(what, " and has no log record"));
  auto rec = pool_->FetchLogRecord(node_id_, log_seq);
  if (!rec.ok()) {
    return absl::DataLossError(absl::StrCat(what, "; its log record ", log_seq,
                                            " is unreadable: ", rec.status().message()));
  }
  if (rec->vdi_id() != key.vdi || rec->object_index() != object ||
      rec->block_index() != block_in_object || rec->data().size() != block_size_) {
    return absl::DataLossError(absl::StrCat(what, "; log record ", log_seq,
                                            " belongs to another block"));
  }
  std::memcpy(dst, rec->data().data(), block_size_);
  repairs_->Increment();
  // Rewrite the block into a fresh slot; without a free one the record keeps serving it.
  auto slot = slots_->Allocate();
  if (!slot.ok()) return absl::OkStatus();
  absl::Status st = slots_->WriteSlot(*slot, key, true, dst, log_seq, rec->epoch());
  if (st.ok()) st = slots_->Sync();
  const int64_t release = st.ok() ? map_->SwapRepairedSlot(key, log_seq, *slot) : *slot;
  if (release >= 0) slots_->Release(static_cast<uint32_t>(release)).IgnoreError();
  spdlog::warn("cache node {}: {}; served and rewritten from log record {}", node_id_, what,
               log_seq);
  return absl::OkStatus();
}

absl::Status SlotRepair::RepairRecoveredSlot(const RecoveredSlot& r) {
  // Data nodes may still be starting: retry for a while before giving up on the record (then
  // the older version, if any, is what survives, and the loss is logged loudly).
  absl::Status last;
  for (int attempt = 0; attempt < 60; ++attempt) {
    auto rec = pool_->FetchLogRecord(node_id_, r.log_seq);
    if (rec.ok()) {
      if (rec->vdi_id() != r.key.vdi || rec->data().size() != block_size_) {
        last = absl::DataLossError("log record belongs to another block");
        break;
      }
      RC_RETURN_IF_ERROR(
          slots_->WriteSlot(r.slot, r.key, true, rec->data().data(), r.log_seq, rec->epoch()));
      RC_RETURN_IF_ERROR(slots_->Sync());
      repairs_->Increment();
      spdlog::warn("cache node {}: dirty block {}/{} was damaged on SSD; restored from log "
                   "record {}", node_id_, r.key.vdi, r.key.block, r.log_seq);
      return absl::OkStatus();
    }
    last = rec.status();
    if (absl::IsNotFound(last)) break;
    clock_->SleepFor(absl::Milliseconds(500));
  }
  spdlog::error("cache node {}: dirty block {}/{} is damaged on SSD and its log record {} is "
                "unavailable ({}); an older version is kept if there is one",
                node_id_, r.key.vdi, r.key.block, r.log_seq, last.ToString());
  return last;
}

}  // namespace ringcache::cachenode
