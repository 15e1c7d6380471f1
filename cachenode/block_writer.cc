#include "cachenode/block_writer.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"

namespace ringcache::cachenode {

absl::Status GiveBack(const Leftovers& left, SlotStore* slots, WriteLog* log) {
  if (!left.log_seqs.empty()) log->Retire(left.log_seqs);
  absl::Status first;
  for (uint32_t s : left.slots) first.Update(slots->Release(s));
  return first;
}

BlockWriter::BlockWriter(uint32_t node_id, uint32_t block_size, BlockMap* map, SlotStore* slots,
                         WriteLog* log, datanode::DataNodePool* pool, Ownership* owner)
    : node_id_(node_id),
      block_size_(block_size),
      map_(map),
      slots_(slots),
      log_(log),
      pool_(pool),
      owner_(owner) {}

absl::Status BlockWriter::Invalidate(const BlockKey& key) {
  Leftovers left;
  map_->Invalidate(key, &left);
  return GiveBack(left, slots_, log_);
}

absl::StatusOr<datanode::HomeStamp> BlockWriter::FreshStamps(uint32_t n, uint64_t* first_seq) {
  RC_ASSIGN_OR_RETURN(*first_seq, log_->Reserve(n));
  datanode::HomeStamp stamp{node_id_, {}, false, {}};
  const uint64_t epoch = owner_->epoch();
  for (uint32_t i = 0; i < n; ++i) {
    stamp.seqs.push_back(*first_seq + i);
    stamp.epochs.push_back(epoch);
  }
  return stamp;
}

absl::Status BlockWriter::WriteHome(const VdiInfo& v, uint64_t object, uint32_t first,
                                    uint32_t count, const char* data) {
  uint64_t seq = 0;
  RC_ASSIGN_OR_RETURN(datanode::HomeStamp stamp, FreshStamps(count, &seq));
  absl::Status s = pool_->WriteAll(v.id(), object, first,
                                   std::string(data, uint64_t{count} * block_size_),
                                   v.geometry.replication(), &stamp);
  log_->Done(seq);
  return s;
}

absl::Status BlockWriter::WriteAround(const VdiInfo& v, uint64_t object, uint32_t first,
                                      uint32_t count, const char* data) {
  // Make earlier slot releases durable first, so no released (older) copy of these blocks can
  // reappear after a crash and shadow what the data nodes now hold.
  RC_RETURN_IF_ERROR(slots_->Sync());
  RC_RETURN_IF_ERROR(WriteHome(v, object, first, count, data));
  for (uint32_t i = 0; i < count; ++i) {
    RC_RETURN_IF_ERROR(Invalidate(v.KeyOf(object, first + i)));
  }
  return slots_->Sync();
}

absl::Status BlockWriter::WriteRun(const VdiInfo& v, uint64_t object, uint32_t first,
                                   uint32_t count, const char* data,
                                   std::vector<uint32_t>* free_slots) {
  VdiCounters& ctr = *v.counters;
  if (v.mode == CacheMode::kWriteAround || v.mode == CacheMode::kPassThrough) {
    ctr.bypassed += count;
    return WriteAround(v, object, first, count, data);
  }
  const bool through = v.mode == CacheMode::kWriteThrough;
  if (map_->AccessForWrite(v, object, first, count)) {
    // CMF, the sequential cutoff or an admission that judges writes: write around this request.
    ctr.bypassed += count;
    absl::Status s = WriteAround(v, object, first, count, data);
    // Write-back never fails a write that the cache can hold: with a home replica down, cache
    // (and log) it instead; the reclaimer destages it once the homes are back.
    if (s.ok() || through || !absl::IsUnavailable(s)) return s;
  }
  if (through) RC_RETURN_IF_ERROR(WriteHome(v, object, first, count, data));
  // Every block gets a fresh slot (SlotStore invariant 1), then one group-committed sync.
  if (free_slots->size() < count) {
    return absl::InternalError("WriteRun called without enough preallocated slots");
  }
  std::vector<uint32_t> slots(free_slots->end() - count, free_slots->end());
  free_slots->resize(free_slots->size() - count);
  return StoreRun(v, object, first, count, data, through, std::move(slots));
}

absl::Status BlockWriter::StoreRun(const VdiInfo& v, uint64_t object, uint32_t first,
                                   uint32_t count, const char* data, bool through,
                                   std::vector<uint32_t> slots) {
  // Write-back: the cache copy and the N-1 log copies are written in parallel; the write is done
  // when both are durable. Write-through blocks are clean and need no log record.
  uint64_t seq = 0;
  // The fencing token of these blocks: the ring epoch at which this node accepted the write.
  const uint64_t epoch = owner_->epoch();
  if (!through) {
    auto reserved = log_->Reserve(count);
    if (!reserved.ok()) {
      for (uint32_t s : slots) slots_->Release(s).IgnoreError();
      return reserved.status();
    }
    seq = *reserved;
  }
  absl::Status st;
  auto write_cache = [&] {
    for (uint32_t i = 0; i < count && st.ok(); ++i) {
      st = slots_->WriteSlot(slots[i], v.KeyOf(object, first + i), !through,
                             data + uint64_t{i} * block_size_, through ? 0 : seq + i,
                             through ? 0 : epoch);
    }
    if (st.ok() && !through) st = slots_->Sync();
    if (st.ok()) v.counters->ssd_writes += count;
  };
  absl::Status logged;
  std::vector<uint32_t> landed;
  if (through) {
    write_cache();
  } else {
    logged = log_->Append(v.id(), object, first, block_size_, data, count,
                          static_cast<int>(v.geometry.replication()), seq, epoch, write_cache,
                          &landed);
  }
  if (IsKind(logged, ErrorKind::kLogSealed)) {
    // The coordinator took this node's objects and sealed its log for their replay: the write
    // is not this node's to acknowledge any more; the gateway retries it on the owner it finds.
    logged = TypedError(ErrorKind::kFenced, absl::StrCat("fenced: ", logged.message()));
  }
  if (st.ok()) st = logged;
  // Ownership is checked again once the log copies are durable: a node that lost its objects
  // while they were on their way (its lease ran out) does not acknowledge the write.
  if (st.ok() && !through) st = owner_->Check();
  if (!st.ok()) {
    // Not acknowledged: its log records (if any landed) are found by the collector.
    if (!through) log_->Done(seq);
    for (uint32_t s : slots) slots_->Release(s).IgnoreError();
    return st;
  }
  Leftovers left;
  map_->CommitWrite({&v, object, first, count, slots.data(), through, seq, epoch, &landed, data},
                    &left);
  if (!through) log_->Done(seq);
  GiveBack(left, slots_, log_).IgnoreError();
  return absl::OkStatus();
}

absl::Status BlockWriter::TrimRun(const VdiInfo& v, uint64_t object, uint32_t first,
                                  uint32_t end) {
  RC_RETURN_IF_ERROR(slots_->Sync());
  // Stamped: the tombstones outrank any older log record of these blocks.
  const uint32_t n = end - first;
  uint64_t seq = 0;
  RC_ASSIGN_OR_RETURN(datanode::HomeStamp stamp, FreshStamps(n, &seq));
  absl::Status trimmed =
      pool_->TrimAll(v.id(), object, first, n, v.geometry.replication(), &stamp);
  log_->Done(seq);
  RC_RETURN_IF_ERROR(trimmed);
  for (uint32_t b = first; b < end; ++b) RC_RETURN_IF_ERROR(Invalidate(v.KeyOf(object, b)));
  return slots_->Sync();
}

}  // namespace ringcache::cachenode
