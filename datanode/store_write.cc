// BlockStore's block writes: WriteBlocks and WriteBlocksBatch (one commit for the writes of
// several objects, a destage batch). Every write reads the stored versions of its range under
// its object's stripe and compares them with its own before anything is put (fencing tokens,
// docs/durability.md); a batch holds the stripes of all its objects, taken in index order.
#include <rocksdb/write_batch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "datanode/store.h"
#include "datanode/store_keys.h"

namespace ringcache::datanode {

using namespace store_keys;  // NOLINT: the store's own encodings
absl::StatusOr<uint32_t> BlockStore::WriteBlocks(uint32_t vdi_id, uint64_t object_index,
                                                 uint32_t first_block, const std::string& data,
                                                 const std::vector<uint64_t>& checksums,
                                                 const WriteStamp& stamp) {
  std::vector<absl::StatusOr<uint32_t>> r =
      WriteBlocksBatch({BlockWrite{vdi_id, object_index, first_block, data, checksums, stamp}});
  return std::move(r[0]);
}

absl::Status BlockStore::CheckWrite(const BlockWrite& w, const v1::VdiGeometry& vdi) {
  const uint32_t bs = vdi.block_size();
  if (w.data.empty() || w.data.size() % bs != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "payload of ", w.data.size(), " bytes is not a whole number of ", bs, "-byte blocks"));
  }
  const uint64_t n = w.data.size() / bs;
  RC_RETURN_IF_ERROR(CheckRange(vdi, w.object_index, w.first_block, n));
  if (!w.checksums.empty() && w.checksums.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(w.checksums.size(), " checksums for ", n, " blocks"));
  }
  RC_RETURN_IF_ERROR(w.stamp.Check(n));
  RC_RETURN_IF_ERROR(CheckWritable());
  if (!w.stamp.seqs.empty()) {
    RC_RETURN_IF_ERROR(NoteSequence(
        w.stamp.writer, *std::max_element(w.stamp.seqs.begin(), w.stamp.seqs.end())));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> BlockStore::StageWrite(
    const BlockWrite& w, const v1::VdiGeometry& vdi, rocksdb::WriteBatch* batch,
    absl::flat_hash_map<std::string, BlockVersion>* staged) {
  const uint32_t bs = vdi.block_size();
  const uint64_t n = w.data.size() / bs;
  // The stored versions of the range, read under the stripe: compare and write are one step.
  RC_ASSIGN_OR_RETURN(std::vector<std::optional<BlockVersion>> have,
                      StoredVersions(vdi, w.object_index, w.first_block, n));
  std::vector<std::string> keys(n);
  std::vector<uint64_t> sums(n);
  std::vector<bool> put(n, false);
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t block = static_cast<uint32_t>(w.first_block + i);
    sums[i] = BlockChecksum(w.data.data() + i * bs, bs);
    if (!w.checksums.empty() && w.checksums[i] != sums[i]) {
      return absl::InvalidArgumentError(absl::StrCat("checksum mismatch on block ", block,
                                                     " of object ", w.object_index,
                                                     ": the payload was damaged in transit"));
    }
    keys[i] = BlockKey(w.vdi_id, w.object_index, block);
    if (auto it = staged->find(keys[i]); it != staged->end()) have[i] = it->second;
    const BlockVersion incoming = w.stamp.VersionOf(i);
    if (have[i].has_value()) {
      if (w.stamp.only_if_absent) continue;  // any copy or tombstone is newer than the copy
      const int cmp = CompareVersions(*have[i], incoming);
      if (w.stamp.only_if_newer && cmp >= 0) continue;
      if (cmp > 0) {
        return RefuseOlder("write", w.vdi_id, w.object_index, block, *have[i], incoming);
      }
    }
    put[i] = true;
  }
  uint32_t stored = 0;
  std::string value;
  for (uint64_t i = 0; i < n; ++i) {
    if (!put[i]) continue;
    const BlockVersion incoming = w.stamp.VersionOf(i);
    value.clear();
    PutBe64(&value, sums[i]);
    value.append(w.data.data() + i * bs, bs);
    if (incoming.writer != 0) PutVersion(&value, incoming);
    batch->Put(blocks_cf_, keys[i], value);
    (*staged)[keys[i]] = incoming;
    ++stored;
  }
  return stored;
}

std::vector<absl::StatusOr<uint32_t>> BlockStore::WriteBlocksBatch(
    const std::vector<BlockWrite>& writes) {
  std::vector<absl::StatusOr<uint32_t>> out(writes.size(), 0u);
  std::vector<std::optional<v1::VdiGeometry>> vdis(writes.size());
  std::vector<size_t> stripes;
  for (size_t i = 0; i < writes.size(); ++i) {
    const BlockWrite& w = writes[i];
    absl::StatusOr<v1::VdiGeometry> vdi = GetVdi(w.vdi_id);
    absl::Status checked = vdi.ok() ? CheckWrite(w, *vdi) : vdi.status();
    if (!checked.ok()) {
      out[i] = checked;
      continue;
    }
    vdis[i] = *std::move(vdi);
    stripes.push_back(static_cast<size_t>(&Stripe(w.vdi_id, w.object_index) - stripes_));
  }
  // The stripes in index order (every holder of more than one takes them so), each once.
  std::sort(stripes.begin(), stripes.end());
  stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
  for (size_t s : stripes) stripes_[s].Lock();
  rocksdb::WriteBatch batch;
  absl::flat_hash_map<std::string, BlockVersion> staged;
  std::vector<size_t> carried;  // the writes with blocks in the batch
  for (size_t i = 0; i < writes.size(); ++i) {
    if (!vdis[i].has_value()) continue;
    out[i] = StageWrite(writes[i], *vdis[i], &batch, &staged);
    if (out[i].ok() && *out[i] > 0) carried.push_back(i);
  }
  if (!carried.empty()) {
    const absl::Status committed = Commit(&batch, "write blocks");
    if (!committed.ok()) {
      for (size_t i : carried) out[i] = committed;
    }
  }
  for (auto s = stripes.rbegin(); s != stripes.rend(); ++s) stripes_[*s].Unlock();
  return out;
}

}  // namespace ringcache::datanode
