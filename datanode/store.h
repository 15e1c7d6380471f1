// BlockStore: the data node's durable state in one RocksDB instance.
//
// Column families and key layout (all integers big-endian so keys sort numerically):
//   default : "vdi/" vdi_id(4)                       -> VdiGeometry (protobuf)
//   blocks  : vdi_id(4) object(8) block(4)            -> checksum(8) | block bytes
//                                                        [| writer(4) seq(8) [epoch(8)]]
//                                                      or 'T' writer(4) seq(8) [epoch(8)]
//                                                        (trimmed)
//   log     : cache_node(4) sequence(8)               -> vdi(4) object(8) block(4) checksum(8)
//                                                        [epoch(8)] | data
//   default : "seqhw/" cache_node(4)                  -> sequence(8): the writer's high-water mark
//   default : "incomplete/" vdi_id(4)                 -> "" : the store missed writes of the VDI
//   default : "store/incarnation"                     -> 32 hex digits, made at creation
//   default : "ring/data"                             -> epoch(8) | serialized DataRing
// (The bracketed epoch is absent in stores written before fencing tokens: it reads as 0.)
//
// Fencing tokens (docs/durability.md): every block and tombstone carries a BlockVersion, and
// every write or trim is refused (kOlderVersion, nothing written) when a block it covers holds a
// newer version than the write carries. Replays skip such blocks; rebalancing copies never
// replace anything. Writes of one object are serialised by a striped lock so the compare and
// the write are one step; different objects still share RocksDB's group commit.
//
// Sticky storage errors: once a write to RocksDB fails, the store refuses every later write
// (kDeviceFailed) until it is reopened — a later success must not hide that an earlier
// acknowledged-looking write was lost.
// Every mutation is one WriteBatch written with sync=true, so it is on disk before the call
// returns (RocksDB groups concurrent synced writes into one fsync: group commit).
//
// Integrity: each block and log record carries an XXH3-64 checksum (common/checksum.h) that is
// verified on every read; a mismatch, or RocksDB reporting corruption, yields kDataLoss — a bad
// block is never returned as good data.
//
// Thread-safety: all methods are thread-safe.
#ifndef RINGCACHE_DATANODE_STORE_H_
#define RINGCACHE_DATANODE_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <rocksdb/db.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/formats.h"
#include "absl/synchronization/mutex.h"
#include "ringcache/v1/common.pb.h"

namespace ringcache::datanode {

struct StoreOptions {
  std::string dir;                       // RocksDB directory; created if missing
  uint64_t block_cache_bytes = 64 << 20;  // RocksDB block cache
  // The file system RocksDB writes through (null: the default). Fault tests pass a
  // SyncFaultFileSystem (datanode/fault_fs.h).
  std::shared_ptr<rocksdb::FileSystem> file_system{};
  // The cluster the node serves (ClusterFile::cluster_id; empty: unchecked). A store keeps the
  // id it was created or first opened with and refuses to open for another cluster.
  std::string cluster_id{};
  // Each column family's memtable (RocksDB's write_buffer_size). A restart replays about the
  // blocks' and the log's memtables of WAL (BlockStore::Open); tests set it small.
  uint64_t memtable_bytes = 64ull << 20;
  absl::Status Validate() const;
};

// Who last wrote a block and at which of its sequence numbers. Cache nodes stamp every write
// they send home (destage, write-through, write-around, trim) with their id and a sequence taken
// from the same counter as their log records, so log replay can tell a record that is older than
// the home copy from one that is newer (docs/design.md §7; docs/durability.md).
//
// Versions are ordered by (epoch, seq, writer): the ownership epoch (cache ring epoch) at which
// the owning cache node accepted the write comes first, so a node that lost an object can never
// overwrite what its next owner wrote, whatever their sequences (docs/design.md §11, fencing
// tokens).
struct BlockVersion {
  uint32_t writer = 0;   // cache node id; 0 = unversioned (written before versions, or by tools)
  uint64_t seq = 0;
  uint64_t epoch = 0;
};
// <0, 0, >0 as a is older than, the same as, or newer than b.
int CompareVersions(const BlockVersion& a, const BlockVersion& b);

// How a write is stamped. `seqs` is empty (unversioned) or holds one sequence per block.
struct WriteStamp {
  uint32_t writer = 0;
  std::vector<uint64_t> seqs;
  // Replay: store a block only if the stored one is older (CompareVersions); other blocks are
  // skipped without error.
  bool only_if_newer = false;
  // Rebalancing copy: store a block only if there is no stored copy at all (neither data nor a
  // tombstone), so the copy never replaces a write or trim that reached this node first.
  bool only_if_absent = false;
  std::vector<uint64_t> epochs{};  // ownership epochs: empty (all 0) or one per block
  // InvalidArgument unless the stamp fits a write of `n` blocks.
  absl::Status Check(uint64_t n) const;
  // The version of block i of the write.
  BlockVersion VersionOf(size_t i) const {
    return {writer, seqs.empty() ? 0 : seqs[i], epochs.empty() ? 0 : epochs[i]};
  }
};

// One write of WriteBlocksBatch: WriteBlocks' arguments (`data` not owned).
struct BlockWrite {
  uint32_t vdi_id = 0;
  uint64_t object_index = 0;
  uint32_t first_block = 0;
  absl::string_view data;
  std::vector<uint64_t> checksums;
  WriteStamp stamp;
};

// One entry of ScanBlocks.
struct ScannedBlock {
  uint32_t vdi_id = 0;
  uint64_t object_index = 0;
  uint32_t block_index = 0;
  bool trimmed = false;  // a tombstone
  std::string data;      // with include_data, one verified block
  BlockVersion version;
};

// Where a scrub pass is (BlockStore::Scrub): blocks first, then log records.
struct ScrubCursor {
  bool in_log = false;
  std::string key;  // the next key to check
  bool done = false;
  uint64_t blocks_checked = 0;
  uint64_t log_records_checked = 0;
};

// A damaged copy a scrub found: a stored block (vdi, object, block) or a log record
// (cache node, sequence).
struct ScrubFinding {
  bool log = false;
  uint32_t vdi_id = 0;
  uint64_t object_index = 0;
  uint32_t block_index = 0;
  uint32_t cache_node_id = 0;
  uint64_t sequence = 0;
  bool operator==(const ScrubFinding&) const = default;
};

struct ReadResult {
  std::string data;                 // block_count * block_size bytes, zeros where absent
  std::vector<bool> present;
  std::vector<uint64_t> checksums;  // 0 where absent
  std::vector<BlockVersion> versions;  // per block ({0,0} where absent and never trimmed)
  bool complete = true;  // false: an absent block may exist elsewhere (VdiComplete)
};

struct LogEntry {
  uint32_t cache_node_id = 0;
  uint64_t sequence = 0;
  uint32_t vdi_id = 0;
  uint64_t object_index = 0;
  uint32_t block_index = 0;
  uint64_t checksum = 0;
  std::string data;
  uint64_t epoch = 0;  // ownership epoch the write was accepted at
};

struct StoreStats {
  uint64_t blocks = 0;  // RocksDB's estimate
  uint64_t log_records = 0;
  uint64_t log_bytes = 0;
  uint64_t vdis = 0;
  uint64_t older_version_refusals = 0;  // writes and trims refused by a fencing token
  std::string device_error;             // non-empty: a write failed; writes refused (sticky)
};

class MetaFlusher;  // meta_flusher.h

class BlockStore {
 public:
  // Opens (creating if needed) the store in options.dir and loads the VDI catalog and log size.
  static absl::StatusOr<std::unique_ptr<BlockStore>> Open(const StoreOptions& options);
  ~BlockStore();

  // Stores the VDI's geometry. A VDI the store does not know yet is complete (its "absent"
  // answers are authoritative) only when the caller vouches for it (`complete`: a VDI being
  // created, a rebalancing target); otherwise the store missed its earlier writes (a new or
  // wiped store learning of an existing VDI) and stays incomplete for it (persisted). A known
  // VDI keeps its state unless the caller vouches (a refill from the other replicas finished).
  absl::Status PutVdi(const v1::VdiGeometry& vdi, bool complete = false);
  // False while the store may lack blocks of the VDI that other replicas hold.
  bool VdiComplete(uint32_t vdi_id) const;
  // Deletes the VDI's geometry and blocks; returns how many blocks were removed.
  absl::StatusOr<uint64_t> DeleteVdi(uint32_t vdi_id);
  // The copy of the data ring this node keeps (see DataNode.PutRing): replaced only by a newer
  // epoch; returns the epoch held afterwards.
  absl::StatusOr<uint64_t> PutRing(uint64_t epoch, const std::string& ring);
  // The kept ring's epoch and bytes (0 and "" when none).
  std::pair<uint64_t, std::string> Ring() const;
  // Drops every block, tombstone, log record and VDI registration; keeps the writers'
  // sequence high-water marks (sequences never repeat) and the incarnation. A node taken out of
  // the data ring holds only stale copies: it is cleared before it joins again.
  absl::Status Clear();
  absl::StatusOr<v1::VdiGeometry> GetVdi(uint32_t vdi_id) const;
  std::vector<v1::VdiGeometry> Vdis() const;

  // Writes data (a whole number of blocks) starting at `first_block` of the object. When
  // `checksums` is non-empty it must hold one checksum per block, each verified first.
  // `stamp` versions the blocks (see WriteStamp); returns how many blocks were stored (fewer
  // than given only with a conditional stamp). A plain write that covers a block holding a
  // newer version is refused whole with kOlderVersion (common/errors.h).
  absl::StatusOr<uint32_t> WriteBlocks(uint32_t vdi_id, uint64_t object_index,
                                       uint32_t first_block, const std::string& data,
                                       const std::vector<uint64_t>& checksums,
                                       const WriteStamp& stamp = {});
  // The writes of several ranges (a destage batch: any VDIs and objects) in one commit. Each is
  // checked and refused alone, as WriteBlocks would (the others are stored); a failed commit
  // fails every write it carried. Returns one result per write, in order: WriteBlocks' answer.
  // Two writes of one block: the later one is compared with the earlier one, as if written
  // after it.
  std::vector<absl::StatusOr<uint32_t>> WriteBlocksBatch(const std::vector<BlockWrite>& writes);
  absl::StatusOr<ReadResult> ReadBlocks(uint32_t vdi_id, uint64_t object_index,
                                        uint32_t first_block, uint32_t block_count) const;
  // Drops the blocks, leaving a small tombstone carrying the stamp's version (none when
  // unstamped): a log record older than the trim is never replayed over it, and a rebalancing
  // copy (only_if_absent) never brings the data back. With `purge` the keys are removed
  // entirely (rebalancing: this node is no longer a home of the blocks). A stamped trim that
  // covers a block holding a newer version is refused whole with kOlderVersion.
  absl::Status TrimBlocks(uint32_t vdi_id, uint64_t object_index, uint32_t first_block,
                          uint32_t block_count, const WriteStamp& stamp = {},
                          bool purge = false);
  // Returns up to `limit` stored blocks and tombstones with key >= (vdi, object, block), in key
  // order; *next receives the key after the last one and *done is set when none remain.
  // With include_data a block that fails its checksum fails the page with kDataLoss; without,
  // checksums are not checked (the scrub does that).
  absl::StatusOr<std::vector<ScannedBlock>> ScanBlocks(uint32_t vdi_id, uint64_t object_index,
                                                       uint32_t block_index, uint32_t limit,
                                                       bool include_data, ScannedBlock* next,
                                                       bool* done) const;

  // Appends records atomically; each record's data must be one block of its (known) VDI and
  // match its checksum. Returns the log area's size in bytes afterwards.
  absl::StatusOr<uint64_t> LogAppend(const std::vector<LogEntry>& records);
  // The log record version LogAppend writes (kLogRecordFormat, datanode/store_keys.h): version 2
  // only once the cluster's feature level is 2 (the data node sets 1 below it; docs/upgrades.md).
  // Records of either version are read whatever this says.
  void SetLogRecordVersion(uint32_t version) { log_record_version_ = version; }
  uint32_t log_record_version() const { return log_record_version_; }
  // Returns the records of `cache_node_id` with sequence >= from, in order, looking at up to
  // `limit` of them. *next is set to the sequence after the last one looked at; *done when
  // none remain. A record that fails its checksum (or is malformed) is not returned: its
  // sequence goes to *corrupt (may be null), and the scan goes on.
  absl::StatusOr<std::vector<LogEntry>> LogScan(uint32_t cache_node_id, uint64_t from,
                                                uint32_t limit, bool include_data, uint64_t* next,
                                                bool* done,
                                                std::vector<uint64_t>* corrupt = nullptr) const;
  // Removes the listed sequences and every sequence below `below` (0 = none). Returns how many
  // records existed and were removed.
  absl::StatusOr<uint64_t> LogReclaim(uint32_t cache_node_id,
                                      const std::vector<uint64_t>& sequences, uint64_t below);

  StoreStats Stats() const;
  // Scrub: checks the checksum of every stored block, then of every log record, from the
  // cursor on, reading about `budget` bytes; appends the damaged ones to *bad and returns the
  // bytes read (cursor->done once everything was checked). Read-only: repairs come from other
  // copies (datanode/scrubber.h).
  absl::StatusOr<uint64_t> Scrub(ScrubCursor* cursor, uint64_t budget,
                                 std::vector<ScrubFinding>* bad) const;
  // False once a damaged copy was repaired, replaced or removed.
  bool StillDamaged(const ScrubFinding& f) const;
  // Test seam (fault tests, tools/fault: a rotten byte): flips one byte of the data of log
  // record `seq` of `cache_node`, or of a stored block, as a disk could; the checksums stay.
  absl::Status DamageLogRecordForTest(uint32_t cache_node, uint64_t seq);
  absl::Status DamageBlockForTest(uint32_t vdi, uint64_t object, uint32_t block);
  // The high-water mark of cache node `writer`'s sequences: at least every sequence of a block
  // version or log record this store ever took from it (0: none; persisted). A cache node that
  // lost its own mark (a new SSD, a wiped state directory: a new incarnation) starts above the
  // largest one the data nodes report, so its sequences never repeat and its new writes order
  // after everything its old incarnation wrote (docs/durability.md, "Incarnations").
  uint64_t WriterHighWater(uint32_t writer) const;
  // The SSD store (incarnation) recorded as cache node `writer`'s current one ("": none): the
  // store that took over the node's log. Kept across Clear, like the sequence marks. Put
  // replaces the record (a takeover), or with `only_if_none` keeps one already held (a plain
  // start); it returns the record held afterwards.
  std::string WriterIncarnation(uint32_t writer) const;
  absl::StatusOr<std::string> PutWriterIncarnation(uint32_t writer,
                                                   const std::string& incarnation,
                                                   bool only_if_none);
  // Control fencing (store_fence.cc; docs/design.md, "Control steps are fenced").
  // The highest coordinator term a control step carried (persisted): raises it and returns OK,
  // or returns kStaleTerm for an older `term`. Term 0 (not a coordinator's step) always passes.
  absl::Status ObserveControlTerm(uint64_t term);
  uint64_t control_term() const { return control_term_.load(); }
  // Seals cache node `writer`'s log below `below_epoch` (persisted; only raises; kept across
  // Clear): LogAppend refuses its records of an older ownership epoch with kLogSealed from now
  // on. Returns once no append that passed the check is still committing, with the seal held.
  absl::StatusOr<uint64_t> SealLog(uint32_t writer, uint64_t below_epoch);
  uint64_t LogSeal(uint32_t writer) const;
  // The store's incarnation (32 hex digits): made when the store is created (or first opened
  // by a version that knows incarnations) and kept. A node on a new or wiped disk has another.
  const std::string& incarnation() const { return incarnation_; }
  // Flushes memtables to SST files (used at clean shutdown so the WAL is short on restart).
  absl::Status FlushAll();

 private:
  BlockStore() = default;
  // The stored version of each block of the range (nullopt: nothing stored).
  absl::StatusOr<std::vector<std::optional<BlockVersion>>> StoredVersions(
      const v1::VdiGeometry& vdi, uint64_t object_index, uint32_t first_block, uint64_t n) const;
  absl::Status CheckRange(const v1::VdiGeometry& vdi, uint64_t object_index, uint32_t first_block,
                          uint64_t block_count) const;
  // WriteBlocksBatch's checks of one write that need no lock: payload, range, checksums,
  // stamp; then its writer's sequence mark.
  absl::Status CheckWrite(const BlockWrite& w, const v1::VdiGeometry& vdi);
  // Puts the blocks of `w` into `batch` after comparing them with the stored versions and with
  // those of the batch's earlier writes (`staged`, updated); nothing on a refusal. Returns the
  // blocks put. REQUIRES: the object's stripe held.
  absl::StatusOr<uint32_t> StageWrite(
      const BlockWrite& w, const v1::VdiGeometry& vdi, rocksdb::WriteBatch* batch,
      absl::flat_hash_map<std::string, BlockVersion>* staged);

  std::unique_ptr<rocksdb::Env> env_;  // with options.file_system; outlives db_
  std::shared_ptr<MetaFlusher> meta_flusher_;  // stopped before db_ closes
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* meta_cf_ = nullptr;  // owned by db_ (default CF)
  rocksdb::ColumnFamilyHandle* blocks_cf_ = nullptr;
  rocksdb::ColumnFamilyHandle* log_cf_ = nullptr;

  // Every block write or trim holds its object's stripe across its read-compare-write.
  static constexpr size_t kStripes = 256;
  absl::Mutex& Stripe(uint32_t vdi, uint64_t object);
  // Refuses writes once one failed (sticky); records the first failure.
  absl::Status CheckWritable() const;
  // Counts and returns the kOlderVersion refusal of a `what` ("write", "trim").
  absl::Status RefuseOlder(const char* what, uint32_t vdi, uint64_t object, uint64_t block,
                           const BlockVersion& have, const BlockVersion& incoming);
  StoreStats StatsWithoutErrors() const;
  // Raises `writer`'s persisted high-water mark above `seq` (in steps, so that a write rarely
  // pays for it) before a write carrying `seq` commits.
  absl::Status NoteSequence(uint32_t writer, uint64_t seq);
  absl::Status Commit(rocksdb::WriteBatch* batch, const std::string& what);
  // Loads the control term and the log seals (Open).
  absl::Status LoadFences();
  // kLogSealed if a record is of a sealed writer's older epoch. REQUIRES: seal_mu_ held (shared).
  absl::Status CheckSeals(const std::vector<LogEntry>& records) const
      ABSL_SHARED_LOCKS_REQUIRED(seal_mu_);
  // Which of the log keys `keys` the store holds (one batched lookup), and with `value_sizes`
  // the size of each held value.
  absl::StatusOr<std::vector<bool>> HeldLogKeys(const std::vector<std::string>& keys,
                                                std::vector<uint64_t>* value_sizes) const;
  absl::Mutex stripes_[kStripes];
  // Appends hold seal_mu_ shared from the seal check to their commit; SealLog holds it
  // exclusively, so a seal returns only once no append that passed the check is uncommitted.
  mutable absl::Mutex seal_mu_;
  absl::flat_hash_map<uint32_t, uint64_t> seals_ ABSL_GUARDED_BY(seal_mu_);
  absl::Mutex term_mu_;  // raising the term is one read-compare-write
  std::atomic<uint64_t> control_term_{0};
  mutable absl::Mutex err_mu_;
  absl::Status device_error_ ABSL_GUARDED_BY(err_mu_);
  std::atomic<uint64_t> older_refusals_{0};
  std::string incarnation_;
  mutable absl::Mutex hw_mu_;
  absl::flat_hash_map<uint32_t, uint64_t> high_water_ ABSL_GUARDED_BY(hw_mu_);
  absl::Mutex put_vdi_mu_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, v1::VdiGeometry> vdis_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> incomplete_ ABSL_GUARDED_BY(mu_);
  // Log size, recounted at Open and kept by atomics; a concurrent duplicate append of the same
  // (node, sequence) — only a retry does that — may be counted twice until the next Open.
  std::atomic<uint64_t> log_records_{0};
  std::atomic<uint64_t> log_bytes_{0};
  std::atomic<uint32_t> log_record_version_{kLogRecordFormat.writes};
  // Per writer, the highest log sequence appended (or being appended) since the store opened,
  // or found in the log then: a record above it cannot be held already (LogAppend).
  absl::Mutex log_top_mu_;
  absl::flat_hash_map<uint32_t, uint64_t> log_top_ ABSL_GUARDED_BY(log_top_mu_);
};

// Maps a RocksDB status to an absl::Status (Corruption -> kDataLoss, IO -> kUnavailable...).
absl::Status FromRocks(const rocksdb::Status& s, const std::string& what);

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_STORE_H_
