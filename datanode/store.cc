// RocksDB-backed block and log store of the data node.
#include "datanode/store.h"

#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/config.h"
#include "common/errors.h"
#include "common/formats.h"
#include "common/status_macros.h"
#include "datanode/meta_flusher.h"
#include "datanode/store_keys.h"

namespace ringcache::datanode {

using namespace store_keys;  // NOLINT: the store's own encodings

int CompareVersions(const BlockVersion& a, const BlockVersion& b) {
  if (a.epoch != b.epoch) return a.epoch < b.epoch ? -1 : 1;
  if (a.seq != b.seq) return a.seq < b.seq ? -1 : 1;
  if (a.writer != b.writer) return a.writer < b.writer ? -1 : 1;
  return 0;
}

absl::Mutex& BlockStore::Stripe(uint32_t vdi, uint64_t object) {
  return stripes_[(vdi * 0x9E3779B97F4A7C15ull ^ object * 0xC2B2AE3D27D4EB4Full) % kStripes];
}

absl::Status BlockStore::RefuseOlder(const char* what, uint32_t vdi, uint64_t object,
                                     uint64_t block, const BlockVersion& have,
                                     const BlockVersion& incoming) {
  ++older_refusals_;
  return TypedError(ErrorKind::kOlderVersion,
                    absl::StrCat("older version: block ", block, " of object ", object, " of VDI ",
                                 vdi, " holds ", VersionText(have), ", the ", what, " carries ",
                                 VersionText(incoming), "; nothing of it was applied"));
}

absl::Status BlockStore::CheckWritable() const {
  absl::MutexLock l(&err_mu_);
  if (device_error_.ok()) return absl::OkStatus();
  return TypedError(ErrorKind::kDeviceFailed,
                    absl::StrCat("data node store failed a write earlier and refuses writes "
                                 "until restarted: ",
                                 device_error_.message()));
}

absl::Status BlockStore::Commit(rocksdb::WriteBatch* batch, const std::string& what) {
  RC_RETURN_IF_ERROR(CheckWritable());
  rocksdb::WriteOptions wo;
  wo.sync = true;
  absl::Status s = FromRocks(db_->Write(wo, batch), what);
  if (!s.ok() && !absl::IsInvalidArgument(s)) {
    // A failed synced write may have left the WAL in an unknown state (a failed fsync loses the
    // pages it covered): never let a later write succeed as if nothing happened.
    absl::MutexLock l(&err_mu_);
    if (device_error_.ok()) device_error_ = s;
  }
  return s;
}

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", s.ToString());
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsIOError() || s.IsBusy() || s.IsTryAgain() || s.IsShutdownInProgress()) {
    return absl::UnavailableError(msg);
  }
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  return absl::InternalError(msg);
}

absl::Status StoreOptions::Validate() const {
  if (dir.empty()) return absl::InvalidArgumentError("data_dir must be set");
  if (memtable_bytes < (64 << 10)) {
    return absl::InvalidArgumentError("the store's memtables must be at least 64KiB");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BlockStore>> BlockStore::Open(const StoreOptions& options) {
  RC_RETURN_IF_ERROR(options.Validate());
  RC_RETURN_IF_ERROR(EnsureWritableDir(options.dir));
  rocksdb::Options db_opts;
  db_opts.create_if_missing = true;
  db_opts.create_missing_column_families = true;
  db_opts.paranoid_checks = true;
  db_opts.IncreaseParallelism(2);
  // Every write is synced to the WAL (Commit), so closing needs no flush: see Daemon::Stop.
  db_opts.avoid_flush_during_shutdown = true;
  // A restart replays every WAL file still alive, and a file lives until each column family
  // with records in it has flushed them. The meta family takes a few small writes (VDIs, seals,
  // terms) and never fills a memtable: it kept every WAL file since its last flush alive, and
  // after minutes of writes a data node took 2-9 s to open (hundreds of MiB replayed; the fault
  // checker's kill-data). It is flushed after each flush of the others, which bounds a
  // restart's replay to about the blocks' and the log's memtables. (A bound on the total WAL,
  // max_total_wal_size, would flush the log family too: its records, most of them reclaimed
  // while still in the memtable, then went to SST files and compactions, and the fault
  // checker's writes per second fell by a third.)
  auto meta_flusher = std::make_shared<MetaFlusher>();
  db_opts.listeners.push_back(meta_flusher);
  std::unique_ptr<rocksdb::Env> env;
  if (options.file_system != nullptr) {
    env = rocksdb::NewCompositeEnv(options.file_system);
    db_opts.env = env.get();
  }
  // Compactions (the LOW pool) and memtable flushes (HIGH) are background work: a burst of them
  // (after a rebalance or refill wrote hundreds of MiB) must not take the CPU from the reads and
  // writes the clients wait for (docs/rebalancing.md, "What a recovery costs the clients").
  for (rocksdb::Env::Priority pool : {rocksdb::Env::LOW, rocksdb::Env::HIGH}) {
    db_opts.env->LowerThreadPoolCPUPriority(pool, rocksdb::CpuPriority::kLow)
        .PermitUncheckedError();
  }

  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // The SST blocks' checksum: XXH3 instead of CRC32C. Debian's librocksdb is a portable build
  // whose CRC32C is the table-driven one (about 3 us per 4 KiB here, 10x XXH3), and every
  // flush, compaction and read of a 4 KiB block paid it. Each file names its checksum type, so
  // the files written before stay readable, and so do these by releases that predate it (the
  // same library). The WAL keeps CRC32C: RocksDB has no other.
  table.checksum = rocksdb::kXXH3;
  rocksdb::ColumnFamilyOptions cf_opts(db_opts);
  cf_opts.write_buffer_size = options.memtable_bytes;
  cf_opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  // Block data and log records are a VM's disk blocks: mostly incompressible (zeros are trims,
  // never stored), each with its own checksum. Compressing them spent CPU on every read, write,
  // flush and compaction for nothing.
  rocksdb::ColumnFamilyOptions data_opts = cf_opts;
  data_opts.compression = rocksdb::kNoCompression;
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {rocksdb::kDefaultColumnFamilyName, cf_opts}, {kBlocksCf, data_opts}, {kLogCf, data_opts}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_opts, options.dir, cfs, &handles, &raw);
  RC_RETURN_IF_ERROR(FromRocks(s, absl::StrCat("open RocksDB in ", options.dir)));

  std::unique_ptr<BlockStore> store(new BlockStore());
  store->env_ = std::move(env);
  store->db_.reset(raw);
  store->meta_cf_ = handles[0];
  store->blocks_cf_ = handles[1];
  store->log_cf_ = handles[2];
  meta_flusher->Start(raw);
  store->meta_flusher_ = std::move(meta_flusher);

  // The format: refused before anything else is read if this release cannot read it.
  {
    std::string held;
    rocksdb::Status g = store->db_->Get(rocksdb::ReadOptions(), store->meta_cf_, kFormatKey, &held);
    uint32_t version = 1;  // no key: a new store, or one of v0.1.0 (version 1)
    if (!g.IsNotFound()) {
      RC_RETURN_IF_ERROR(FromRocks(g, "read the store's format"));
      if (!absl::SimpleAtoi(held, &version)) {
        return absl::DataLossError(
            absl::StrCat("the store in ", options.dir, " has an unreadable format '", held, "'"));
      }
    }
    RC_RETURN_IF_ERROR(CheckFormat(kDataStoreFormat, version, options.dir));
    // Recorded once; a later release changes it only after the cluster's feature level allows
    // (docs/upgrades.md), so a store it opened stays readable by this one until then.
    if (g.IsNotFound()) {
      rocksdb::WriteBatch batch;
      batch.Put(store->meta_cf_, kFormatKey, absl::StrCat(kDataStoreFormat.writes));
      RC_RETURN_IF_ERROR(store->Commit(&batch, "record the store's format"));
    }
  }
  // Load the VDI catalog.
  {
    std::unique_ptr<rocksdb::Iterator> it(
        store->db_->NewIterator(rocksdb::ReadOptions(), store->meta_cf_));
    absl::MutexLock l(&store->mu_);
    for (it->Seek("vdi/"); it->Valid() && it->key().starts_with("vdi/"); it->Next()) {
      v1::VdiGeometry g;
      if (!g.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
        return absl::DataLossError(absl::StrCat("VDI catalog entry unreadable in ", options.dir));
      }
      store->vdis_[g.vdi_id()] = g;
    }
    RC_RETURN_IF_ERROR(FromRocks(it->status(), "scan VDI catalog"));
  }
  // The store's identity.
  {
    std::string id;
    rocksdb::Status g =
        store->db_->Get(rocksdb::ReadOptions(), store->meta_cf_, kIncarnationKey, &id);
    if (g.IsNotFound()) {
      std::random_device rd;
      uint64_t w[2] = {0, 0};
      for (uint64_t& x : w) {
        while (x == 0) x = (uint64_t{rd()} << 32) ^ rd();
      }
      id = absl::StrFormat("%016x%016x", w[0], w[1]);
      rocksdb::WriteBatch batch;
      batch.Put(store->meta_cf_, kIncarnationKey, id);
      RC_RETURN_IF_ERROR(store->Commit(&batch, "record the store's incarnation"));
    } else {
      RC_RETURN_IF_ERROR(FromRocks(g, "read the store's incarnation"));
    }
    store->incarnation_ = id;
  }
  // The cluster it belongs to: recorded once, then a store of another cluster is refused.
  if (!options.cluster_id.empty()) {
    std::string held;
    rocksdb::Status g =
        store->db_->Get(rocksdb::ReadOptions(), store->meta_cf_, kClusterKey, &held);
    if (g.IsNotFound()) {
      rocksdb::WriteBatch batch;
      batch.Put(store->meta_cf_, kClusterKey, options.cluster_id);
      RC_RETURN_IF_ERROR(store->Commit(&batch, "record the store's cluster"));
    } else {
      RC_RETURN_IF_ERROR(FromRocks(g, "read the store's cluster"));
      if (held != options.cluster_id) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the store in ", options.dir, " belongs to cluster '", held,
            "', and this node serves cluster '", options.cluster_id,
            "': refusing to serve another cluster's blocks (wipe the directory to reuse the "
            "disk)"));
      }
    }
  }
  // The VDIs the store missed writes of.
  {
    std::unique_ptr<rocksdb::Iterator> it(
        store->db_->NewIterator(rocksdb::ReadOptions(), store->meta_cf_));
    absl::MutexLock l(&store->mu_);
    for (it->Seek(kIncompletePrefix); it->Valid() && it->key().starts_with(kIncompletePrefix);
         it->Next()) {
      const rocksdb::Slice k = it->key();
      if (k.size() != sizeof(kIncompletePrefix) - 1 + 4) {
        return absl::DataLossError(absl::StrCat("VDI state unreadable in ", options.dir));
      }
      store->incomplete_.insert(static_cast<uint32_t>(GetBe(k.data() + k.size() - 4, 4)));
    }
    RC_RETURN_IF_ERROR(FromRocks(it->status(), "scan VDI states"));
  }
  // The writers' sequence marks.
  {
    std::unique_ptr<rocksdb::Iterator> it(
        store->db_->NewIterator(rocksdb::ReadOptions(), store->meta_cf_));
    absl::MutexLock l(&store->hw_mu_);
    for (it->Seek(kHighWaterPrefix); it->Valid() && it->key().starts_with(kHighWaterPrefix);
         it->Next()) {
      const rocksdb::Slice k = it->key(), v = it->value();
      if (k.size() != sizeof(kHighWaterPrefix) - 1 + 4 || v.size() != 8) {
        return absl::DataLossError(absl::StrCat("sequence mark unreadable in ", options.dir));
      }
      store->high_water_[static_cast<uint32_t>(GetBe(k.data() + k.size() - 4, 4))] =
          GetBe(v.data(), 8);
    }
    RC_RETURN_IF_ERROR(FromRocks(it->status(), "scan sequence marks"));
  }
  RC_RETURN_IF_ERROR(store->LoadFences());
  // Recount the log area.
  {
    std::unique_ptr<rocksdb::Iterator> it(
        store->db_->NewIterator(rocksdb::ReadOptions(), store->log_cf_));
    uint64_t n = 0, bytes = 0;
    absl::MutexLock l(&store->log_top_mu_);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ++n;
      bytes += it->key().size() + it->value().size();
      if (it->key().size() == 12) {  // cache_node(4) sequence(8); in key order: the last is the top
        store->log_top_[GetBe(it->key().data(), 4)] = GetBe(it->key().data() + 4, 8);
      }
    }
    RC_RETURN_IF_ERROR(FromRocks(it->status(), "scan log area"));
    store->log_records_ = n;
    store->log_bytes_ = bytes;
  }
  return store;
}

BlockStore::~BlockStore() {
  if (meta_flusher_) meta_flusher_->Stop();
  if (db_) {
    for (auto* h : {blocks_cf_, log_cf_}) db_->DestroyColumnFamilyHandle(h);
    db_->DestroyColumnFamilyHandle(meta_cf_);
    db_->Close().PermitUncheckedError();
  }
}

absl::Status BlockStore::PutVdi(const v1::VdiGeometry& vdi, bool complete) {
  const uint32_t bs = vdi.block_size();
  if (vdi.vdi_id() == 0) return absl::InvalidArgumentError("vdi_id must be non-zero");
  if (bs < 512 || bs > (1u << 20) || (bs & (bs - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size ", bs, " must be a power of two in [512, 1 MiB]"));
  }
  if (vdi.object_size() < bs || vdi.object_size() % bs != 0 || vdi.object_size() > (256u << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("object_size ", vdi.object_size(),
                                                   " must be a multiple of block_size ", bs,
                                                   " and at most 256 MiB"));
  }
  if (vdi.size_bytes() % 4096 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size_bytes ", vdi.size_bytes(), " is not a multiple of 4096"));
  }
  std::string value;
  vdi.SerializeToString(&value);
  absl::MutexLock put(&put_vdi_mu_);  // the known-or-not check and the write are one step
  bool known;
  {
    absl::MutexLock l(&mu_);
    known = vdis_.contains(vdi.vdi_id());
  }
  rocksdb::WriteBatch batch;
  batch.Put(meta_cf_, VdiKey(vdi.vdi_id()), value);
  const bool mark_incomplete = !known && !complete;
  if (mark_incomplete) batch.Put(meta_cf_, IncompleteKey(vdi.vdi_id()), "");
  if (complete) batch.Delete(meta_cf_, IncompleteKey(vdi.vdi_id()));
  RC_RETURN_IF_ERROR(Commit(&batch, "store VDI geometry"));
  absl::MutexLock l(&mu_);
  vdis_[vdi.vdi_id()] = vdi;
  if (mark_incomplete) incomplete_.insert(vdi.vdi_id());
  if (complete) incomplete_.erase(vdi.vdi_id());
  return absl::OkStatus();
}

bool BlockStore::VdiComplete(uint32_t vdi_id) const {
  absl::MutexLock l(&mu_);
  return !incomplete_.contains(vdi_id);
}

absl::StatusOr<v1::VdiGeometry> BlockStore::GetVdi(uint32_t vdi_id) const {
  absl::MutexLock l(&mu_);
  auto it = vdis_.find(vdi_id);
  if (it == vdis_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown VDI ", vdi_id));
  }
  return it->second;
}

absl::StatusOr<uint64_t> BlockStore::DeleteVdi(uint32_t vdi_id) {
  absl::MutexLock put(&put_vdi_mu_);  // a registration racing the delete comes before or after
  RC_RETURN_IF_ERROR(GetVdi(vdi_id).status());
  std::string begin, end;
  PutBe32(&begin, vdi_id);
  PutBe32(&end, vdi_id + 1);
  uint64_t count = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), blocks_cf_));
    for (it->Seek(begin); it->Valid() && it->key().compare(end) < 0; it->Next()) {
      if (!IsTombstone(it->value().ToString())) ++count;  // blocks, not trim tombstones
    }
  }
  rocksdb::WriteBatch batch;
  batch.DeleteRange(blocks_cf_, begin, vdi_id == UINT32_MAX ? std::string(5, '\xff') : end);
  batch.Delete(meta_cf_, VdiKey(vdi_id));
  batch.Delete(meta_cf_, IncompleteKey(vdi_id));
  RC_RETURN_IF_ERROR(Commit(&batch, "delete VDI"));
  absl::MutexLock l(&mu_);
  vdis_.erase(vdi_id);
  incomplete_.erase(vdi_id);
  return count;
}

absl::StatusOr<uint64_t> BlockStore::PutRing(uint64_t epoch, const std::string& ring) {
  absl::MutexLock put(&put_vdi_mu_);
  const auto [held, bytes] = Ring();
  if (epoch <= held) return held;
  std::string value;
  PutBe64(&value, epoch);
  value += ring;
  rocksdb::WriteBatch batch;
  batch.Put(meta_cf_, kRingKey, value);
  RC_RETURN_IF_ERROR(Commit(&batch, "keep the data ring"));
  return epoch;
}

std::pair<uint64_t, std::string> BlockStore::Ring() const {
  std::string value;
  if (!db_->Get(rocksdb::ReadOptions(), meta_cf_, kRingKey, &value).ok() || value.size() < 8) {
    return {0, ""};
  }
  return {GetBe(value.data(), 8), value.substr(8)};
}

absl::Status BlockStore::Clear() {
  absl::MutexLock put(&put_vdi_mu_);
  rocksdb::WriteBatch batch;
  // Keys are at most 16 bytes (blocks) and 12 bytes (log): 17 0xff bytes bound both.
  const std::string end(17, '\xff');
  batch.DeleteRange(blocks_cf_, "", end);
  batch.DeleteRange(log_cf_, "", end);
  for (const char* prefix : {"vdi/", kIncompletePrefix}) {
    std::string last = prefix;
    last.back() = static_cast<char>(last.back() + 1);  // "vdi0": just past every "vdi/..." key
    batch.DeleteRange(meta_cf_, prefix, last);
  }
  RC_RETURN_IF_ERROR(Commit(&batch, "clear the store"));
  absl::MutexLock l(&mu_);
  vdis_.clear();
  incomplete_.clear();
  log_records_ = 0;
  log_bytes_ = 0;
  return absl::OkStatus();
}

absl::Status BlockStore::CheckRange(const v1::VdiGeometry& vdi, uint64_t object_index,
                                    uint32_t first_block, uint64_t block_count) const {
  const uint64_t objects = (vdi.size_bytes() + vdi.object_size() - 1) / vdi.object_size();
  if (object_index >= objects) {
    return absl::InvalidArgumentError(absl::StrCat("object ", object_index, " is beyond VDI ",
                                                   vdi.vdi_id(), " (", objects, " objects)"));
  }
  if (block_count == 0) return absl::InvalidArgumentError("empty block range");
  if (first_block + block_count > BlocksPerObject(vdi)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blocks [", first_block, ", ", first_block + block_count, ") are beyond the object (",
        BlocksPerObject(vdi), " blocks of ", vdi.block_size(), " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status WriteStamp::Check(uint64_t n) const {
  if (!seqs.empty() && seqs.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(seqs.size(), " versions for ", n, " blocks"));
  }
  if (!epochs.empty() && epochs.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(epochs.size(), " epochs for ", n, " blocks"));
  }
  if (!seqs.empty() && writer == 0) {
    return absl::InvalidArgumentError("versions given without a writer node id");
  }
  if (only_if_newer && seqs.empty()) {
    return absl::InvalidArgumentError("a conditional (replay) write needs versions");
  }
  if (only_if_newer && only_if_absent) {
    return absl::InvalidArgumentError("only_if_newer and only_if_absent exclude each other");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<BlockVersion>>> BlockStore::StoredVersions(
    const v1::VdiGeometry& vdi, uint64_t object_index, uint32_t first_block, uint64_t n) const {
  std::vector<std::string> keys(n);
  std::vector<rocksdb::Slice> slices(n);
  std::vector<rocksdb::ColumnFamilyHandle*> cfs(n, blocks_cf_);
  for (uint64_t i = 0; i < n; ++i) {
    keys[i] = BlockKey(vdi.vdi_id(), object_index, static_cast<uint32_t>(first_block + i));
    slices[i] = keys[i];
  }
  std::vector<std::string> values;
  std::vector<rocksdb::Status> st = db_->MultiGet(rocksdb::ReadOptions(), cfs, slices, &values);
  std::vector<std::optional<BlockVersion>> out(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (st[i].IsNotFound()) continue;
    if (st[i].IsCorruption()) {  // damaged on disk: present, and anything replaces it
      out[i] = BlockVersion{};
      continue;
    }
    RC_RETURN_IF_ERROR(FromRocks(st[i], "read block before writing it"));
    // A damaged stored copy reads as present with the oldest version: anything replaces it.
    auto b = DecodeBlock(values[i], vdi.block_size(), "stored block");
    out[i] = b.ok() ? b->version : BlockVersion{};
  }
  return out;
}

absl::StatusOr<ReadResult> BlockStore::ReadBlocks(uint32_t vdi_id, uint64_t object_index,
                                                  uint32_t first_block,
                                                  uint32_t block_count) const {
  RC_ASSIGN_OR_RETURN(v1::VdiGeometry vdi, GetVdi(vdi_id));
  RC_RETURN_IF_ERROR(CheckRange(vdi, object_index, first_block, block_count));
  const uint32_t bs = vdi.block_size();
  std::vector<std::string> keys(block_count);
  std::vector<rocksdb::Slice> slices(block_count);
  std::vector<rocksdb::ColumnFamilyHandle*> cfs(block_count, blocks_cf_);
  for (uint32_t i = 0; i < block_count; ++i) {
    keys[i] = BlockKey(vdi_id, object_index, first_block + i);
    slices[i] = keys[i];
  }
  std::vector<std::string> values;
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  // Completeness first: a refill that vouches after the blocks were read must not make this
  // answer's absent blocks authoritative.
  const bool complete = VdiComplete(vdi_id);
  std::vector<rocksdb::Status> st = db_->MultiGet(ro, cfs, slices, &values);
  ReadResult r;
  r.data.assign(static_cast<size_t>(block_count) * bs, '\0');
  r.present.assign(block_count, false);
  r.checksums.assign(block_count, 0);
  r.versions.assign(block_count, BlockVersion{});
  for (uint32_t i = 0; i < block_count; ++i) {
    if (st[i].IsNotFound()) continue;
    RC_RETURN_IF_ERROR(FromRocks(
        st[i], absl::StrCat("read block ", first_block + i, " of object ", object_index)));
    RC_ASSIGN_OR_RETURN(StoredBlock b,
                        DecodeBlock(values[i], bs,
                                    absl::StrCat("block ", first_block + i, " of object ",
                                                 object_index, " of VDI ", vdi_id)));
    r.versions[i] = b.version;
    if (!b.present) continue;  // trimmed
    std::memcpy(r.data.data() + static_cast<size_t>(i) * bs, b.data, bs);
    r.present[i] = true;
    r.checksums[i] = b.checksum;
  }
  r.complete = complete;
  return r;
}

absl::Status BlockStore::TrimBlocks(uint32_t vdi_id, uint64_t object_index, uint32_t first_block,
                                    uint32_t block_count, const WriteStamp& stamp, bool purge) {
  RC_ASSIGN_OR_RETURN(v1::VdiGeometry vdi, GetVdi(vdi_id));
  RC_RETURN_IF_ERROR(CheckRange(vdi, object_index, first_block, block_count));
  RC_RETURN_IF_ERROR(stamp.Check(block_count));
  if (stamp.only_if_newer || stamp.only_if_absent) {
    return absl::InvalidArgumentError("trims are never conditional");
  }
  if (purge && !stamp.seqs.empty()) {
    return absl::InvalidArgumentError("a purge removes blocks entirely: it takes no versions");
  }
  RC_RETURN_IF_ERROR(CheckWritable());
  if (!stamp.seqs.empty()) {
    RC_RETURN_IF_ERROR(
        NoteSequence(stamp.writer, *std::max_element(stamp.seqs.begin(), stamp.seqs.end())));
  }
  absl::MutexLock stripe(&Stripe(vdi_id, object_index));
  std::vector<std::optional<BlockVersion>> have(block_count);
  if (!purge) {
    RC_ASSIGN_OR_RETURN(have, StoredVersions(vdi, object_index, first_block, block_count));
  }
  rocksdb::WriteBatch batch;
  std::string tomb;
  for (uint32_t i = 0; i < block_count; ++i) {
    const std::string key = BlockKey(vdi_id, object_index, first_block + i);
    if (purge) {
      batch.Delete(blocks_cf_, key);
      continue;
    }
    const BlockVersion incoming = stamp.VersionOf(i);
    if (have[i].has_value() && CompareVersions(*have[i], incoming) > 0) {
      return RefuseOlder("trim", vdi_id, object_index, first_block + i, *have[i], incoming);
    }
    tomb.assign(1, 'T');
    PutVersion(&tomb, incoming);
    batch.Put(blocks_cf_, key, tomb);
  }
  return Commit(&batch, "trim blocks");
}

absl::StatusOr<std::vector<ScannedBlock>> BlockStore::ScanBlocks(
    uint32_t vdi_id, uint64_t object_index, uint32_t block_index, uint32_t limit, bool include_data,
    ScannedBlock* next, bool* done) const {
  if (limit == 0) limit = 1024;
  std::vector<ScannedBlock> out;
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, blocks_cf_));
  *done = true;
  uint32_t geometry_of = 0;
  uint32_t bs = 0;
  for (it->Seek(BlockKey(vdi_id, object_index, block_index)); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key();
    if (k.size() != 16) {
      return absl::DataLossError(absl::StrCat("block key of ", k.size(), " bytes"));
    }
    ScannedBlock b;
    b.vdi_id = static_cast<uint32_t>(GetBe(k.data(), 4));
    b.object_index = GetBe(k.data() + 4, 8);
    b.block_index = static_cast<uint32_t>(GetBe(k.data() + 12, 4));
    if (out.size() == limit) {
      *next = b;
      *done = false;
      break;
    }
    if (b.vdi_id != geometry_of) {
      auto g = GetVdi(b.vdi_id);
      bs = g.ok() ? g->block_size() : 0;  // blocks of a deleted VDI: about to be removed
      geometry_of = b.vdi_id;
    }
    if (bs == 0) continue;
    const std::string value = it->value().ToString();
    // Without data only the version is needed: a damaged copy is listed (a purge must still
    // remove it), its data never returned.
    RC_ASSIGN_OR_RETURN(StoredBlock sb,
                        DecodeBlock(value, bs,
                                    absl::StrCat("block ", b.block_index, " of object ",
                                                 b.object_index, " of VDI ", b.vdi_id),
                                    /*verify=*/include_data));
    b.trimmed = !sb.present;
    b.version = sb.version;
    if (include_data && sb.present) b.data.assign(sb.data, bs);
    out.push_back(std::move(b));
  }
  RC_RETURN_IF_ERROR(FromRocks(it->status(), "scan blocks"));
  return out;
}

StoreStats BlockStore::Stats() const {
  StoreStats st = StatsWithoutErrors();
  st.older_version_refusals = older_refusals_.load();
  absl::MutexLock l(&err_mu_);
  if (!device_error_.ok()) st.device_error = std::string(device_error_.message());
  return st;
}

std::vector<v1::VdiGeometry> BlockStore::Vdis() const {
  absl::MutexLock l(&mu_);
  std::vector<v1::VdiGeometry> out;
  out.reserve(vdis_.size());
  for (const auto& [id, g] : vdis_) out.push_back(g);
  return out;
}

StoreStats BlockStore::StatsWithoutErrors() const {
  StoreStats s;
  db_->GetIntProperty(blocks_cf_, "rocksdb.estimate-num-keys", &s.blocks);
  s.log_records = log_records_.load();
  s.log_bytes = log_bytes_.load();
  absl::MutexLock l(&mu_);
  s.vdis = vdis_.size();
  return s;
}

absl::Status BlockStore::FlushAll() {
  rocksdb::FlushOptions fo;
  fo.wait = true;
  return FromRocks(db_->Flush(fo, {meta_cf_, blocks_cf_, log_cf_}), "flush memtables");
}

}  // namespace ringcache::datanode
