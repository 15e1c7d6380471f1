// The data node store's scrub: a paced pass over every stored block and log record that lists
// the copies whose checksum fails (datanode/store.h, datanode/scrubber.h), and the test seams
// that damage one.
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "datanode/store.h"
#include "datanode/store_keys.h"

namespace ringcache::datanode {

using namespace store_keys;  // NOLINT: the store's own encodings

namespace {

// Counts the entry `it` is at against the pass's byte `budget`. Returns false, with the cursor
// left at that entry for the next pass, once the budget is spent.
bool WithinBudget(const rocksdb::Iterator& it, uint64_t budget, uint64_t* read,
                  ScrubCursor* cursor) {
  if (*read >= budget) {
    cursor->key = it.key().ToString();
    return false;
  }
  *read += it.key().size() + it.value().size();
  return true;
}

}  // namespace

absl::StatusOr<uint64_t> BlockStore::Scrub(ScrubCursor* cursor, uint64_t budget,
                                           std::vector<ScrubFinding>* bad) const {
  uint64_t read = 0;
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;  // a pass over everything must not push the hot blocks out
  if (!cursor->in_log) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, blocks_cf_));
    uint32_t geometry_of = UINT32_MAX;
    uint32_t bs = 0;
    for (it->Seek(cursor->key); it->Valid(); it->Next()) {
      if (!WithinBudget(*it, budget, &read, cursor)) return read;
      const rocksdb::Slice k = it->key();
      ++cursor->blocks_checked;
      if (k.size() != 16) continue;  // not a block key: nothing to compare with another copy
      ScrubFinding f;
      f.vdi_id = static_cast<uint32_t>(GetBe(k.data(), 4));
      f.object_index = GetBe(k.data() + 4, 8);
      f.block_index = static_cast<uint32_t>(GetBe(k.data() + 12, 4));
      if (f.vdi_id != geometry_of) {
        auto g = GetVdi(f.vdi_id);
        bs = g.ok() ? g->block_size() : 0;  // a deleted VDI's blocks: about to be removed
        geometry_of = f.vdi_id;
      }
      if (bs == 0) continue;
      if (!DecodeBlock(it->value().ToString(), bs, "scrub").ok()) bad->push_back(f);
    }
    if (!it->status().ok()) {
      // RocksDB's own checksums failed (a damaged SST block): report, and go on from the next
      // key range a later pass can reach.
      RC_RETURN_IF_ERROR(FromRocks(it->status(), "scrub blocks"));
    }
    cursor->in_log = true;
    cursor->key.clear();
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, log_cf_));
  for (it->Seek(cursor->key); it->Valid(); it->Next()) {
    if (!WithinBudget(*it, budget, &read, cursor)) return read;
    const rocksdb::Slice k = it->key();
    ++cursor->log_records_checked;
    if (k.size() != 12) continue;
    LogEntry e;
    if (ParseLogRecord(k, it->value(), false, &e) == LogRead::kDamaged) {
      ScrubFinding f;
      f.log = true;
      f.cache_node_id = e.cache_node_id;
      f.sequence = e.sequence;
      bad->push_back(f);
    }
  }
  RC_RETURN_IF_ERROR(FromRocks(it->status(), "scrub log"));
  cursor->done = true;
  return read;
}

bool BlockStore::StillDamaged(const ScrubFinding& f) const {
  std::string value;
  if (f.log) {
    const std::string key = LogKey(f.cache_node_id, f.sequence);
    if (!db_->Get(rocksdb::ReadOptions(), log_cf_, key, &value).ok()) return false;  // gone
    LogEntry e;
    return ParseLogRecord(key, value, false, &e) == LogRead::kDamaged;
  }
  auto g = GetVdi(f.vdi_id);
  if (!g.ok()) return false;  // the VDI was deleted
  if (!db_->Get(rocksdb::ReadOptions(), blocks_cf_,
                BlockKey(f.vdi_id, f.object_index, f.block_index), &value)
           .ok()) {
    return false;  // purged or never there
  }
  return !DecodeBlock(value, g->block_size(), "scrub").ok();
}

absl::Status BlockStore::DamageLogRecordForTest(uint32_t cache_node, uint64_t seq) {
  const std::string key = LogKey(cache_node, seq);
  std::string value;
  RC_RETURN_IF_ERROR(FromRocks(db_->Get(rocksdb::ReadOptions(), log_cf_, key, &value),
                               "read the log record to damage"));
  value.back() ^= 0x20;  // the last data byte
  rocksdb::WriteBatch batch;
  batch.Put(log_cf_, key, value);
  return Commit(&batch, "damage a log record (test)");
}

absl::Status BlockStore::DamageBlockForTest(uint32_t vdi, uint64_t object, uint32_t block) {
  const std::string key = BlockKey(vdi, object, block);
  std::string value;
  RC_RETURN_IF_ERROR(FromRocks(db_->Get(rocksdb::ReadOptions(), blocks_cf_, key, &value),
                               "read the block to damage"));
  // (A stored block starts with its checksum, whose first byte may be 'T' too.)
  if (value.size() < 9 || IsTombstone(value)) {
    return absl::FailedPreconditionError("no block data to damage (a tombstone)");
  }
  value[8] ^= 0x20;  // the first data byte, after the checksum
  rocksdb::WriteBatch batch;
  batch.Put(blocks_cf_, key, value);
  return Commit(&batch, "damage a block (test)");
}

}  // namespace ringcache::datanode
