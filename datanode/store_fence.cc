// Control fencing of the data node's store: the highest coordinator term seen, and the log
// seals that keep a cache node which lost its objects from adding records after its replay
// (docs/design.md, "Control steps are fenced").
#include <rocksdb/write_batch.h>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "common/term_fence.h"
#include "datanode/store.h"
#include "datanode/store_keys.h"

namespace ringcache::datanode {
namespace {

using store_keys::GetBe;
using store_keys::PutBe64;

constexpr char kControlTermKey[] = "cterm";
constexpr char kSealPrefix[] = "lseal/";

std::string SealKey(uint32_t writer) { return store_keys::IdKey(kSealPrefix, writer); }

std::string Be64(uint64_t v) {
  std::string s;
  PutBe64(&s, v);
  return s;
}

}  // namespace

absl::Status BlockStore::LoadFences() {
  std::string value;
  rocksdb::Status got = db_->Get(rocksdb::ReadOptions(), meta_cf_, kControlTermKey, &value);
  if (got.ok()) {
    if (value.size() != 8) return absl::DataLossError("the control term record is unreadable");
    control_term_ = GetBe(value.data(), 8);
  } else if (!got.IsNotFound()) {
    return absl::DataLossError(absl::StrCat("read the control term: ", got.ToString()));
  }
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), meta_cf_));
  absl::MutexLock l(&seal_mu_);
  for (it->Seek(kSealPrefix); it->Valid() && it->key().starts_with(kSealPrefix); it->Next()) {
    const rocksdb::Slice k = it->key(), v = it->value();
    if (k.size() != sizeof(kSealPrefix) - 1 + 4 || v.size() != 8) {
      return absl::DataLossError("a log seal record is unreadable");
    }
    seals_[static_cast<uint32_t>(GetBe(k.data() + k.size() - 4, 4))] = GetBe(v.data(), 8);
  }
  if (!it->status().ok()) {
    return absl::DataLossError(absl::StrCat("scan the log seals: ", it->status().ToString()));
  }
  return absl::OkStatus();
}

absl::Status BlockStore::ObserveControlTerm(uint64_t term) {
  return ObserveTerm(term, "data node", &term_mu_, &control_term_, [this](uint64_t t) {
    rocksdb::WriteBatch batch;
    batch.Put(meta_cf_, kControlTermKey, Be64(t));
    return Commit(&batch, "record the coordinator term");
  });
}

absl::StatusOr<uint64_t> BlockStore::SealLog(uint32_t writer, uint64_t below_epoch) {
  if (writer == 0) return absl::InvalidArgumentError("a log seal needs a cache node id");
  absl::MutexLock l(&seal_mu_);  // waits for the appends that passed the check to commit
  uint64_t& held = seals_[writer];
  if (below_epoch <= held) return held;
  rocksdb::WriteBatch batch;
  batch.Put(meta_cf_, SealKey(writer), Be64(below_epoch));
  RC_RETURN_IF_ERROR(Commit(&batch, "seal a cache node's log"));
  held = below_epoch;
  return held;
}

uint64_t BlockStore::LogSeal(uint32_t writer) const {
  absl::ReaderMutexLock l(&seal_mu_);
  auto it = seals_.find(writer);
  return it == seals_.end() ? 0 : it->second;
}

absl::Status BlockStore::CheckSeals(const std::vector<LogEntry>& records) const {
  if (seals_.empty()) return absl::OkStatus();
  for (const LogEntry& r : records) {
    auto it = seals_.find(r.cache_node_id);
    if (it == seals_.end() || r.epoch >= it->second) continue;
    return TypedError(
        ErrorKind::kLogSealed,
        absl::StrCat("the log of cache node ", r.cache_node_id, " is sealed below ring epoch ",
                     it->second, " (record ", r.sequence, " is of epoch ", r.epoch,
                     "): the node lost its objects and its log was replayed"));
  }
  return absl::OkStatus();
}

}  // namespace ringcache::datanode
