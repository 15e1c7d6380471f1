// The data node store's write-back log: appends, scans and reclaims of the cache nodes' log
// records, and each writer's sequence mark and incarnation (datanode/store.h).
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

absl::StatusOr<std::vector<bool>> BlockStore::HeldLogKeys(const std::vector<std::string>& keys,
                                                           std::vector<uint64_t>* value_sizes) const {
  std::vector<bool> held(keys.size(), false);
  if (value_sizes != nullptr) value_sizes->assign(keys.size(), 0);
  if (keys.empty()) return held;
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<rocksdb::PinnableSlice> values(keys.size());  // pinned: no copy of the blocks
  std::vector<rocksdb::Status> statuses(keys.size());
  db_->MultiGet(rocksdb::ReadOptions(), log_cf_, keys.size(), slices.data(), values.data(),
                statuses.data());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    RC_RETURN_IF_ERROR(FromRocks(statuses[i], "look up log records"));
    held[i] = true;
    if (value_sizes != nullptr) (*value_sizes)[i] = values[i].size();
  }
  return held;
}

absl::StatusOr<uint64_t> BlockStore::LogAppend(const std::vector<LogEntry>& records) {
  if (records.empty()) return log_bytes_.load();
  {
    absl::flat_hash_map<uint32_t, uint64_t> top;
    for (const LogEntry& r : records) {
      top[r.cache_node_id] = std::max(top[r.cache_node_id], r.sequence);
    }
    for (const auto& [writer, seq] : top) RC_RETURN_IF_ERROR(NoteSequence(writer, seq));
  }
  absl::ReaderMutexLock seal(&seal_mu_);  // from the seal check to the commit
  RC_RETURN_IF_ERROR(CheckSeals(records));
  rocksdb::WriteBatch batch;
  std::vector<std::string> keys;
  keys.reserve(records.size());
  std::vector<uint64_t> sizes;  // of each record's key and value
  sizes.reserve(records.size());
  std::string value;
  const uint32_t version = log_record_version_;
  for (const LogEntry& r : records) {
    RC_ASSIGN_OR_RETURN(v1::VdiGeometry vdi, GetVdi(r.vdi_id));
    RC_RETURN_IF_ERROR(CheckRange(vdi, r.object_index, r.block_index, 1));
    if (r.data.size() != vdi.block_size()) {
      return absl::InvalidArgumentError(absl::StrCat("log record ", r.sequence, " holds ",
                                                     r.data.size(), " bytes, expected one ",
                                                     vdi.block_size(), "-byte block"));
    }
    if (BlockChecksum(r.data) != r.checksum) {
      return absl::InvalidArgumentError(
          absl::StrCat("log record ", r.sequence, ": checksum does not match its data"));
    }
    keys.push_back(LogKey(r.cache_node_id, r.sequence));
    EncodeLogRecord(r, version, &value);
    sizes.push_back(keys.back().size() + value.size());
    batch.Put(log_cf_, keys.back(), value);
  }
  // A record sent again (a retried append) is already counted. A writer's sequences only grow,
  // so a record above the highest sequence the store took from it cannot be here; only the
  // others (retries, records out of order) are looked up, in one batched lookup. Looking up
  // every key cost the data node an eighth of its CPU under writes (perf, 2026-11-29).
  std::vector<std::string> maybe_held;
  std::vector<uint64_t> maybe_sizes;
  uint64_t added_records = 0, added_bytes = 0;
  {
    absl::MutexLock l(&log_top_mu_);
    for (size_t i = 0; i < records.size(); ++i) {
      uint64_t& top = log_top_[records[i].cache_node_id];
      if (records[i].sequence > top) {
        top = records[i].sequence;  // (raised before the commit: a retry racing it is looked up)
        ++added_records;
        added_bytes += sizes[i];
      } else {
        maybe_held.push_back(std::move(keys[i]));
        maybe_sizes.push_back(sizes[i]);
      }
    }
  }
  RC_ASSIGN_OR_RETURN(std::vector<bool> held, HeldLogKeys(maybe_held, nullptr));
  for (size_t i = 0; i < maybe_held.size(); ++i) {
    if (held[i]) continue;
    ++added_records;
    added_bytes += maybe_sizes[i];
  }
  RC_RETURN_IF_ERROR(Commit(&batch, "append log records"));
  log_records_ += added_records;
  return log_bytes_ += added_bytes;
}

absl::StatusOr<std::vector<LogEntry>> BlockStore::LogScan(uint32_t cache_node_id, uint64_t from,
                                                          uint32_t limit, bool include_data,
                                                          uint64_t* next, bool* done,
                                                          std::vector<uint64_t>* corrupt) const {
  if (limit == 0) limit = 256;
  std::vector<LogEntry> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), log_cf_));
  std::string prefix;
  PutBe32(&prefix, cache_node_id);
  *next = from;
  *done = true;
  uint32_t seen = 0;
  for (it->Seek(LogKey(cache_node_id, from)); it->Valid() && it->key().starts_with(prefix);
       it->Next()) {
    if (seen == limit) {
      *done = false;
      break;
    }
    ++seen;
    const rocksdb::Slice k = it->key(), v = it->value();
    if (k.size() != 12) {
      return absl::DataLossError(absl::StrCat("malformed log key of cache node ", cache_node_id,
                                              " (", k.size(), " bytes)"));
    }
    // A damaged record is skipped and reported: the caller takes another copy (replay), and
    // one bad record never stops a scan (docs/durability.md).
    auto damaged = [&](uint64_t seq) {
      if (corrupt != nullptr) corrupt->push_back(seq);
      *next = seq + 1;
    };
    LogEntry e;
    uint32_t version = 0;
    const LogRead read = ParseLogRecord(k, v, include_data, &e, &version);
    if (read == LogRead::kNewer) {
      // A newer release wrote it (a downgrade after finalize): refused, not taken for damage.
      return CheckFormat(kLogRecordFormat, version,
                         absl::StrCat("log record ", e.sequence, " of cache node ",
                                      cache_node_id));
    }
    if (read == LogRead::kDamaged) {
      damaged(e.sequence);
      continue;
    }
    *next = e.sequence + 1;
    out.push_back(std::move(e));
  }
  RC_RETURN_IF_ERROR(FromRocks(it->status(), "scan log"));
  return out;
}

absl::StatusOr<uint64_t> BlockStore::LogReclaim(uint32_t cache_node_id,
                                                const std::vector<uint64_t>& sequences,
                                                uint64_t below) {
  rocksdb::WriteBatch batch;
  uint64_t removed = 0, bytes = 0;
  auto drop = [&](const std::string& key, size_t value_size) {
    batch.Delete(log_cf_, key);
    ++removed;
    bytes += key.size() + value_size;
  };
  uint64_t scanned_below = 0;
  if (below > 0) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), log_cf_));
    const std::string end = LogKey(cache_node_id, below);
    for (it->Seek(LogKey(cache_node_id, 0)); it->Valid() && it->key().compare(end) < 0;
         it->Next()) {
      drop(it->key().ToString(), it->value().size());
    }
    RC_RETURN_IF_ERROR(FromRocks(it->status(), "scan log for reclaim"));
    scanned_below = below;
  }
  std::vector<std::string> keys;
  keys.reserve(sequences.size());
  for (uint64_t seq : sequences) {
    if (seq >= scanned_below) keys.push_back(LogKey(cache_node_id, seq));  // (else in the range)
  }
  // Most of a batch is not here (every data node gets the whole batch; a record is on N-1 of
  // them): one batched lookup finds the ones that are.
  std::vector<uint64_t> value_sizes;
  RC_ASSIGN_OR_RETURN(std::vector<bool> held, HeldLogKeys(keys, &value_sizes));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (held[i]) drop(keys[i], value_sizes[i]);
  }
  if (removed == 0) return 0;
  RC_RETURN_IF_ERROR(Commit(&batch, "reclaim log records"));
  log_records_ -= std::min<uint64_t>(removed, log_records_.load());
  log_bytes_ -= std::min<uint64_t>(bytes, log_bytes_.load());
  return removed;
}

uint64_t BlockStore::WriterHighWater(uint32_t writer) const {
  absl::MutexLock l(&hw_mu_);
  auto it = high_water_.find(writer);
  return it == high_water_.end() ? 0 : it->second;
}

absl::Status BlockStore::NoteSequence(uint32_t writer, uint64_t seq) {
  if (writer == 0 || seq == 0) return absl::OkStatus();
  absl::MutexLock l(&hw_mu_);
  auto it = high_water_.find(writer);
  if (it != high_water_.end() && seq < it->second) return absl::OkStatus();
  const uint64_t mark = seq + kHighWaterStep;
  std::string value;
  PutBe64(&value, mark);
  rocksdb::WriteBatch batch;
  batch.Put(meta_cf_, HighWaterKey(writer), value);
  RC_RETURN_IF_ERROR(Commit(&batch, "record a writer's sequence mark"));
  high_water_[writer] = mark;
  return absl::OkStatus();
}

std::string BlockStore::WriterIncarnation(uint32_t writer) const {
  std::string value;
  if (!db_->Get(rocksdb::ReadOptions(), meta_cf_, WriterIncarnationKey(writer), &value).ok()) {
    return "";
  }
  return value;
}

absl::StatusOr<std::string> BlockStore::PutWriterIncarnation(uint32_t writer,
                                                             const std::string& incarnation,
                                                             bool only_if_none) {
  if (writer == 0 || incarnation.empty() || incarnation.size() > 64) {
    return absl::InvalidArgumentError(
        "a writer incarnation needs a cache node id and an id of "
        "1 to 64 characters");
  }
  absl::MutexLock l(&hw_mu_);
  std::string held = WriterIncarnation(writer);
  if (held == incarnation || (only_if_none && !held.empty())) return held;
  rocksdb::WriteBatch batch;
  batch.Put(meta_cf_, WriterIncarnationKey(writer), incarnation);
  RC_RETURN_IF_ERROR(Commit(&batch, "record a cache node's store incarnation"));
  return incarnation;
}

}  // namespace ringcache::datanode
