// DataNodePool: a cache node's view of the data nodes — gRPC channels, the data ring that picks an
// object's N home replicas, and each node's live load (in-flight requests × smoothed latency),
// which feeds read replica choice and LCR victim choice (paper 004 Alg. 1 takes device load as an
// input; here a "device" is a home data node).
//
// The data ring can change while requests run (rebalancing after a data node joined, see
// coordinator/data_rebalancer.h): a DataRing names the `members` whose ring places reads, log
// copies and — when no rebalance runs — writes; while a rebalance moves replicas it also names the
// `target` members, and writes and trims go to the homes on both rings, so that the new homes
// miss no write made after the copy of a block started. Every request works on one snapshot of
// the ring (a View); SetRing returns only once no request uses an older snapshot.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_DATANODE_CLIENT_DATANODE_POOL_H_
#define RINGCACHE_DATANODE_CLIENT_DATANODE_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "common/monotonic.h"
#include "datanode/client/log_link.h"
#include "ring/ring.h"
#include "ringcache/v1/cachenode.pb.h"
#include "ringcache/v1/datanode.grpc.pb.h"

namespace ringcache::datanode {

struct DataNodeEndpoint {
  uint32_t id = 0;
  std::string address;  // host:port of its gRPC service
  double weight = 1.0;
  std::string zone;
};

// The data nodes and data ring(s) a pool uses (see the file comment).
struct DataRing {
  uint64_t epoch = 0;                   // grows with every change
  std::vector<DataNodeEndpoint> nodes;  // every node of members and target, by id
  std::vector<uint32_t> members;        // the ring reads use
  std::vector<uint32_t> target;         // empty unless a rebalance moves replicas there
  // Taken out of the ring (down past the grace period, `datanode out`, decommissioned): no
  // read, write or log record goes there; a member that is out still places objects (its
  // replicas are being made again on the target). Kept after it leaves, so it does not rejoin
  // until put back in.
  std::vector<uint32_t> out;

  bool IsOut(uint32_t id) const;

  // Returns OK, or kInvalidArgument naming the problem (no members, unknown or duplicate id).
  absl::Status Validate() const;
  // The endpoints of `ids`, in the order of `ids`.
  std::vector<DataNodeEndpoint> Endpoints(const std::vector<uint32_t>& ids) const;
  v1::DataRing ToProto() const;
  static DataRing FromProto(const v1::DataRing& p);
};

// Keeps a data ring in a small state file (protobuf text, replaced atomically): cache nodes in
// <ssd_path>.datanodes, the gateway in <dir>/data_ring. A ring that changed at run time wins over
// the cluster file at the next start. Load returns nullopt when the file does not exist.
absl::Status SaveDataRing(const std::string& path, const DataRing& ring);
// The text both use (also the value of the data ring's key in etcd); Decode validates.
std::string EncodeDataRing(const DataRing& ring);
absl::StatusOr<DataRing> DecodeDataRing(const std::string& text);
// The ring as this process writes it to etcd (P/rings/data): the text above (etcd-value 1) or,
// once the cluster's feature level allows it, an EtcdValue (membership/etcd_value.h); and back,
// either version.
std::string EncodeDataRingValue(const DataRing& ring);
absl::StatusOr<DataRing> DecodeDataRingValue(const std::string& value);
absl::StatusOr<std::optional<DataRing>> LoadDataRing(const std::string& path);

// Builds the data ring over `nodes` exactly as DataNodePool places homes (same options).
absl::StatusOr<ring::Ring> BuildDataRing(const std::vector<DataNodeEndpoint>& nodes);

// One page of DataNodePool::ScanBlocks.
struct BlockScanPage {
  std::vector<v1::ScannedBlock> blocks;
  bool done = true;
  ring::ObjectKey next_object;  // where the next page starts (valid unless done)
  uint32_t next_block = 0;
};

struct BlockRun {
  std::string data;           // count × block_size bytes (zeros where absent)
  std::vector<bool> present;  // per block
};

// Version stamp of a write sent home (see datanode/store.h WriteStamp): the cache node's id and
// one sequence per block from the counter of its log records.
// `epochs` holds one ownership epoch per block (empty: 0): the data nodes order versions by
// (epoch, seq, writer) and refuse a write older than what they hold (fencing tokens,
// docs/durability.md) with kOlderVersion.
struct HomeStamp {
  uint32_t writer = 0;
  std::vector<uint64_t> seqs;
  bool only_if_newer = false;  // log replay: never overwrite a copy at least as new
  std::vector<uint64_t> epochs;
};

// Blocks first.. of one object, written to its n homes (DataNodePool::WriteAllBatch).
struct RunWrite {
  uint32_t vdi = 0;
  uint64_t object = 0;
  uint32_t first = 0;
  const std::string* data = nullptr;  // whole blocks; not owned, alive during the call
  int n = 0;
  HomeStamp stamp;
};

// Blocks first.. of one object, copied to data node `node` (DataNodePool::CopyBlocksAll).
struct BlockCopy {
  uint32_t node = 0;
  uint32_t vdi = 0;
  uint64_t object = 0;
  uint32_t first = 0;
  const std::string* data = nullptr;  // whole blocks; not owned, alive during the call
  HomeStamp stamp;
};

// Blocks first..first+count-1 of one object (DataNodePool::PurgeBlocksAll).
struct BlockSpan {
  uint32_t vdi = 0;
  uint64_t object = 0;
  uint32_t first = 0;
  uint32_t count = 0;
};

// The VDIs one data node knows (DataNodePool::VdisOn).
struct NodeVdis {
  absl::flat_hash_set<uint32_t> known;
  absl::flat_hash_set<uint32_t> incomplete;  // of `known`: the node missed writes of these
};

// What the data nodes know of one cache node (DataNodePool::QueryWriter).
struct WriterState {
  uint64_t high_water = 0;  // the largest of the nodes' sequence high-water marks of the writer
  absl::flat_hash_map<uint32_t, uint32_t> replication;  // VDI id -> N, every VDI the nodes know
};

// Result of appending log records.
struct LogAppendResult {
  std::vector<uint32_t> nodes;  // data nodes that hold the records durably
  uint32_t overlapping = 0;     // of which also home replicas of the object (cluster too small)
  bool over_limit = false;      // some log area is over its limit: destage to relieve it
};

class DataNodePool {
 public:
  // Builds the data ring over `nodes` (epoch 0, all members). `registry` (not owned, may be
  // null) receives per-node latency metrics, named after the daemon that owns the pool
  // (`role`: ringcache_<role>_datanode_op_duration_seconds, ...).
  static absl::StatusOr<std::unique_ptr<DataNodePool>> Create(
      const std::vector<DataNodeEndpoint>& nodes, metrics::Registry* registry,
      int rpc_timeout_ms = 30000, const std::string& role = "cachenode");
  static absl::StatusOr<std::unique_ptr<DataNodePool>> Create(
      const DataRing& ring, metrics::Registry* registry, int rpc_timeout_ms = 30000,
      const std::string& role = "cachenode");

  // Switches to `ring`, then waits until no request still uses the previous one. An epoch
  // below the current one is refused (kFailedPrecondition); the current epoch again changes
  // nothing.
  absl::Status SetRing(const DataRing& ring);
  DataRing ring() const;

  // Registers the VDI's geometry on every data node.
  // Registers the VDI on every node. `complete(node)` (null: none) names the nodes the caller
  // vouches hold every write of the VDI (a VDI being created; rebalancing targets copied before
  // reads reach them); a node that learns of the VDI otherwise is incomplete for it
  // (docs/durability.md, "Absent is not zero").
  absl::Status PutVdi(const v1::VdiGeometry& vdi,
                      const std::function<bool(uint32_t node)>& complete = nullptr);
  // Registers the VDI on data node `node` only; `complete` vouches that it holds every write
  // of the VDI (also for a VDI it knows: a finished refill).
  absl::Status PutVdiOn(uint32_t node, const v1::VdiGeometry& vdi, bool complete);
  // Gives every live node of the ring a copy of `ring` (DataNode.PutRing); returns the ids of
  // the nodes that did not take it (best effort: a cache node takes the newest copy it finds).
  std::vector<uint32_t> KeepRingOnNodes(const DataRing& ring);
  // Asks the live nodes of the current ring for the newest copy of the data ring they keep and
  // switches to it (SetRing) when it is newer, repeating with the nodes of the ring found, so
  // that a cache node that lost its own copy of the ring does not work with a stale one. Returns
  // whether the ring changed.
  absl::StatusOr<bool> AdoptNewestKeptRing();
  // Data node `node`'s scrub report (DataNode.Scrub); `start` begins a pass now.
  absl::StatusOr<v1::DataNodeScrubReport> Scrub(uint32_t node, bool start);
  // Rewrites block `block` of the object on data node `node` (its copy is damaged) from a good
  // copy on another of the object's n homes, keeping that copy's version. Returns false when no
  // other home holds a good copy (the block has none left). A node that is not a home of the
  // object (a leftover) just drops its copy.
  absl::StatusOr<bool> RepairBlockOn(uint32_t node, uint32_t vdi, uint64_t object, uint32_t block,
                                     int n, uint32_t block_size);
  // Clears data node `node`'s store (DataNode.ClearStore; the node need not be in the ring): a
  // node joining the ring again after it was taken out holds only stale copies.
  absl::Status ClearStore(const DataNodeEndpoint& node, const std::string& reason);
  // The VDIs data node `node` knows, and which of them it is incomplete for.
  absl::StatusOr<NodeVdis> VdisOn(uint32_t node);
  // Vouches for every node (a VDI being created: nothing is written yet).
  static bool AllComplete(uint32_t) { return true; }
  absl::Status DeleteVdi(uint32_t vdi_id);

  // Returns the object's `n` home replicas (distinct nodes, distinct zones when given).
  absl::StatusOr<std::vector<uint32_t>> Homes(uint32_t vdi, uint64_t object, int n) const;
  // Returns the current load of node `id` (lower is better; 0 when idle).
  double Load(uint32_t id) const;
  // Returns the greatest load among the object's n homes: what destaging one of its blocks waits
  // for, since a destage writes every home and finishes when the last one does (LCR's L_chip).
  double HomeLoad(uint32_t vdi, uint64_t object, int n) const;

  // Reads from the least-loaded home replica; on failure (unavailable, or DATA_LOSS from a bad
  // copy) tries the others, and rewrites a copy that failed its checksum from the good one.
  // A replica that is incomplete for the VDI (a new or wiped store) does not settle a block it
  // lacks: the next replicas are asked, the newest copy wins, and the incomplete replica gets
  // it (repair). A block only incomplete replicas answered for, none holding it, is kDataLoss,
  // never zeros (docs/durability.md, "Absent is not zero").
  absl::StatusOr<BlockRun> Read(uint32_t vdi, uint64_t object, uint32_t first, uint32_t count,
                                int n, uint32_t block_size);
  // Returns which blocks of the run were ever written, from the least-loaded reachable home.
  absl::StatusOr<std::vector<bool>> Presence(uint32_t vdi, uint64_t object, uint32_t first,
                                             uint32_t count, int n);
  // Writes the run to all n homes in parallel; succeeds only when every home acknowledged.
  // `stamp` (may be null) versions the blocks; with stamp->only_if_newer, *stored (may be null)
  // receives the most blocks any one home stored. A stamped write is idempotent: homes that
  // answered UNAVAILABLE are asked twice more (after 20 and 200 ms) before it fails.
  absl::Status WriteAll(uint32_t vdi, uint64_t object, uint32_t first, const std::string& data,
                        int n, const HomeStamp* stamp = nullptr, uint32_t* stored = nullptr);
  // WriteAll of several stamped runs (a destage batch: any VDIs and objects), the runs bound
  // for one data node in one request and one commit of its store where the node speaks node-api
  // 3 and its store link is free (kStoreBlocksBatch, sent and awaited on the calling thread);
  // else each run to that node over gRPC, all at once. Returns one status per run, WriteAll's
  // for it: OK only when every home stored it; a home's refusal of one run (kOlderVersion)
  // fails that run alone. Homes that answered UNAVAILABLE are asked twice more, as WriteAll
  // does. *stored (may be null) receives per run the most blocks any one home stored (WriteAll's
  // `stored`, for conditional writes).
  std::vector<absl::Status> WriteAllBatch(const std::vector<RunWrite>& runs,
                                          std::vector<uint32_t>* stored = nullptr);
  // Trims the run on all n homes.
  absl::Status TrimAll(uint32_t vdi, uint64_t object, uint32_t first, uint32_t count, int n,
                       const HomeStamp* stamp = nullptr);

  // Appends the records of `req` (all of one object) durably on `copies` data nodes among the
  // object's log candidates, in parallel, moving on to the next candidate when one fails. Fails
  // (kUnavailable) only when fewer than `copies` candidates accepted them. `overlap` (may be empty)
  // runs on the calling thread while the first round of appends is in flight.
  absl::StatusOr<LogAppendResult> LogAppend(uint32_t vdi, uint64_t object, int n, int copies,
                                            const v1::LogAppendRequest& req,
                                            const std::function<void()>& overlap = nullptr);
  // Drops the listed log records of `cache_node` on every data node. Returns the ids of the data
  // nodes that could not be reached (they still hold the records).
  std::vector<uint32_t> LogReclaim(uint32_t cache_node, const std::vector<uint64_t>& seqs,
                                   uint64_t below = 0);
  // Seals `cache_node`'s log below ring epoch `below_epoch` on every data node (the SealLog
  // RPC): afterwards no append of its records of an older epoch lands anywhere. Fails unless
  // every live data node took the seal (a replay must not scan before).
  absl::Status SealLog(uint32_t cache_node, uint64_t below_epoch);
  // Raises the seal of `cache_node`'s log on data node `node` alone to `below_epoch` (0: only
  // reads it) and returns the seal the node holds afterwards.
  absl::StatusOr<uint64_t> SealLogOn(uint32_t node, uint32_t cache_node, uint64_t below_epoch);
  // The coordinator's term, carried by its control steps (LogReclaim, SealLog) in a
  // ControlFence; data nodes refuse an older one (kStaleTerm). 0 (default): none — a cache
  // node's own pool, static mode. Only grows.
  void SetControlTerm(uint64_t term) { RaiseTo(&control_term_, term); }
  uint64_t control_term() const { return control_term_.load(); }
  // Calls fn(record) for every log record of `cache_node` held by data node `node` with sequence
  // >= from, in order, a page at a time. Records the node found damaged are skipped and their
  // sequences appended to *corrupt (may be null).
  absl::Status LogScan(uint32_t node, uint32_t cache_node, uint64_t from, bool include_data,
                       const std::function<void(v1::LogRecord&)>& fn,
                       std::vector<uint64_t>* corrupt = nullptr);
  // Fetches log record `seq` of `cache_node` from any data node that holds a good copy.
  absl::StatusOr<v1::LogRecord> FetchLogRecord(uint32_t cache_node, uint64_t seq);
  // Every data node of the current ring(s).
  std::vector<uint32_t> node_ids() const;

  // Rebalancing (coordinator/data_rebalancer.h), one node at a time. Lists up to `limit` stored
  // blocks and tombstones of data node `node` from (from, from_block) on, in key order.
  absl::StatusOr<BlockScanPage> ScanBlocks(uint32_t node, ring::ObjectKey from, uint32_t from_block,
                                           uint32_t limit, bool include_data);
  // Copies blocks to data node `node` unless it holds any copy of them already (a write or trim
  // that reached it first); returns how many it stored. The stamp keeps the source's versions.
  absl::StatusOr<uint32_t> CopyBlocks(uint32_t node, uint32_t vdi, uint64_t object, uint32_t first,
                                      const std::string& data, const HomeStamp& stamp);
  // CopyBlocks of each copy, kCopyWindow calls in flight at a time: a rebalancer's page of
  // scattered runs costs a round trip or two, not one per run, and the data nodes commit the
  // concurrent writes together. Returns the blocks stored in all, or (once every call ended)
  // the first failure.
  absl::StatusOr<uint64_t> CopyBlocksAll(const std::vector<BlockCopy>& copies);
  // Removes blocks (and tombstones) entirely from data node `node`, no longer one of their homes.
  absl::Status PurgeBlocks(uint32_t node, uint32_t vdi, uint64_t object, uint32_t first,
                           uint32_t count);
  // PurgeBlocks of each span on `node`, kCopyWindow calls in flight at a time.
  absl::Status PurgeBlocksAll(uint32_t node, const std::vector<BlockSpan>& spans);
  // Calls of CopyBlocksAll and PurgeBlocksAll in flight at once.
  static constexpr size_t kCopyWindow = 32;
  // Returns data node `node`'s stored block count (RocksDB's estimate).
  absl::StatusOr<uint64_t> BlockCount(uint32_t node);
  // Asks every data node of the ring what it knows of cache node `writer` (its sequence
  // high-water mark) and of the VDIs. Fails, naming the node, when one does not answer: a
  // mark that misses a node could let sequences repeat.
  absl::StatusOr<WriterState> QueryWriter(uint32_t writer);
  // The store incarnation each answering live node records as cache node `writer`'s current one
  // (DataNode.PutWriterIncarnation; "" where none). Best effort: a node that does not answer
  // within a few seconds is left out.
  absl::flat_hash_map<uint32_t, std::string> WriterIncarnations(uint32_t writer);
  // The client requests the live nodes served since they started, summed
  // (StatsResponse.client_ops); nullopt when one of them does not answer within a second.
  std::optional<uint64_t> ClientOps();
  // Records `incarnation` as cache node `writer`'s current store on every live node. With
  // `only_if_none` a record a node holds already stays, and a node that does not answer is
  // skipped; otherwise (a takeover) every node must take it.
  absl::Status PutWriterIncarnation(uint32_t writer, const std::string& incarnation,
                                    bool only_if_none);
  // Asks every data node for its health (in parallel, `timeout_ms` each) to keep the up/down
  // view current even for nodes no request went to lately.
  void ProbeAll(int timeout_ms);
  // How many times data node `id` came back with another store incarnation than it had (a new
  // or wiped disk), as seen by ProbeAll since the pool started. A caller that remembers the
  // count notices each change once.
  uint64_t StoreChanges(uint32_t id) const;
  // Returns the data nodes unreachable for at least `ms` milliseconds.
  std::vector<uint32_t> DownFor(int64_t ms) const;

  // Number of ring members (the nodes reads use).
  size_t size() const { return view()->ring_members.size(); }
  uint64_t repairs() const { return repairs_.load(); }
  // Test seam: reorders the homes a read or block status asks (after the load order).
  void set_read_order_for_test(std::function<void(std::vector<uint32_t>*)> f) {
    read_order_for_test_ = std::move(f);
  }
  // Test seam: runs before each LogAppend call to a data node; a status other than OK fails
  // the call with it instead of sending it (a reset connection, a node restarting).
  void set_log_fault_for_test(std::function<grpc::Status(uint32_t node)> f) {
    log_fault_for_test_ = std::move(f);
  }
  // Test seam: runs before each WriteBlocks call of WriteAll to a data node, like the one above.
  void set_write_fault_for_test(std::function<grpc::Status(uint32_t node)> f) {
    write_fault_for_test_ = std::move(f);
  }
  // Reads that failed because only incomplete replicas answered for a block none of them held.
  uint64_t unconfirmed_reads() const { return unconfirmed_reads_.load(); }

 private:
  // One caller's records waiting for a LogAppend call to node; `done` runs once with the
  // call's outcome.
  struct LogWaiter {
    const v1::LogAppendRequest* req = nullptr;
    std::function<void(const grpc::Status&, bool over_limit)> done;
  };
  struct Node {
    DataNodeEndpoint endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::DataNode::Stub> stub;
    std::atomic<int> inflight{0};
    std::atomic<double> ewma_latency_s{0.0};
    std::atomic<int64_t> failed_at_ms{0};   // last RPC failure (steady clock), 0 = none
    std::atomic<int64_t> down_since_ms{0};  // unreachable since (steady clock), 0 = reachable
    // The store incarnation the node last reported (Health), and how often it changed: a node
    // back on a new or wiped disk lost every log copy it held.
    absl::Mutex store_mu;
    std::string store_incarnation ABSL_GUARDED_BY(store_mu);
    std::atomic<uint64_t> store_changes{0};
    metrics::Histogram* latency = nullptr;
    metrics::Counter* log_calls = nullptr;
    // Group commit of log appends (SendLog): appends that arrive while one is in flight to this
    // node wait here and go together as the next LogAppend call.
    absl::Mutex log_mu;
    std::vector<LogWaiter*> log_queue ABSL_GUARDED_BY(log_mu);
    bool log_sending ABSL_GUARDED_BY(log_mu) = false;
    // The node's log port (Health's log_port), which carries the appends while usable; null
    // when the address has no host part to dial. store_link and load_link: a second and a
    // third connection to it, for block writes (WriteAll) and reads (Read), each used when idle.
    std::unique_ptr<LogLink> log_link;
    std::unique_ptr<LogLink> store_link;
    std::unique_ptr<LogLink> load_link;
  };
  // One snapshot of the ring(s) and nodes; requests hold it while they run.
  struct View {
    DataRing spec;
    std::vector<Node*> nodes;  // of spec.nodes, same order
    std::vector<Node*> live;   // of nodes, those not out (spec.out)
    absl::flat_hash_map<uint32_t, Node*> by_id;
    std::vector<uint32_t> ring_members;
    std::unique_ptr<ring::Ring> ring;    // spec.members
    std::unique_ptr<ring::Ring> target;  // spec.target; null when empty
    Node* Find(uint32_t id) const {
      auto it = by_id.find(id);
      return it == by_id.end() ? nullptr : it->second;
    }
  };
  DataNodePool() = default;
  std::shared_ptr<const View> view() const;
  // Builds a view of `spec`, creating channels for nodes not seen before.
  absl::StatusOr<std::shared_ptr<const View>> MakeView(const DataRing& spec);
  // Read homes (ring of the members) and write homes (both rings while rebalancing).
  static absl::StatusOr<std::vector<uint32_t>> HomesIn(const View& v, uint32_t vdi, uint64_t object,
                                                       int n);
  static absl::StatusOr<std::vector<uint32_t>> WriteHomesIn(const View& v, uint32_t vdi,
                                                            uint64_t object, int n);
  // Where the log records of an object with n homes go, in preference order: the nodes after
  // its homes on the data ring, then (cluster too small) its homes from the last one.
  static std::vector<uint32_t> LogCandidatesIn(const View& v, uint32_t vdi, uint64_t object, int n);
  Node* Find(uint32_t id) const;
  // Writes block i of `good` (a read answer of blocks first..) to data node `target` with the
  // good copy's version: a repair of a bad copy, or (`only_if_absent`) of a missing one.
  // Returns whether the write succeeded.
  bool RepairFrom(const View& v, uint32_t target, uint32_t vdi, uint64_t object, uint32_t first,
                  uint32_t i, uint32_t block_size, const v1::ReadBlocksResponse& good,
                  bool only_if_absent);
  // Asks the live nodes of `v`, one after another, for their Stats (`req`, a deadline of
  // `seconds` each) and notes each outcome; `each(node id, status, response)` returns false to
  // stop.
  void StatsOfLive(
      const View& v, const v1::StatsRequest& req, int seconds,
      const std::function<bool(uint32_t, const grpc::Status&, const v1::StatsResponse&)>& each);
  // Runs one RPC `call(stub, ctx)` on data node `node` of the current view and notes its
  // outcome; errors name `what` and the node ("copy to data node 4: ...").
  template <typename Call>
  absl::Status OnNode(uint32_t node, const char* what, Call&& call);
  // Orders node ids by their load at the time of the call, least loaded first.
  static void SortByLoad(const View& v, std::vector<uint32_t>* ids);
  static double LoadOf(const Node* n);
  void Observe(Node* n, double seconds);
  // Records an RPC's outcome for the up/down view.
  void Note(Node* n, const grpc::Status& s);
  // Starts one call on each of `nodes` at once (`start(i, nodes[i], context, done)` issues call i
  // with the context given and calls `done` once it finished; a node may be listed more than
  // once), waits for all, notes each node's health, and returns their statuses in the order of
  // `nodes`.
  using Done = std::function<void(grpc::Status)>;
  std::vector<grpc::Status> CallEach(
      const std::vector<Node*>& nodes,
      const std::function<void(size_t, Node*, grpc::ClientContext*, Done)>& start);
  std::unique_ptr<grpc::ClientContext> Context() const;
  // Appends `w`'s records on `node`: at once when no append is in flight there, else together
  // with every other waiting append in the next call (one RPC, one RocksDB write and WAL sync
  // for all of them). `w` must stay alive until its `done` ran.
  void SendLog(Node* node, LogWaiter* w);
  // Sends the waiting appends of `node` as one call (at most kLogBatchBytes of data, at least
  // one append). REQUIRES: this thread set node->log_sending.
  void SendLogBatch(Node* node);
  // `w` alone on `node`'s log link, sent on the calling thread, when nothing is queued or in
  // flight there (LogLink::BeginCall): kSent when FinishLogInline must follow on this thread,
  // kDone when the send failed and `w`'s `done` ran, kNotTaken when the link is busy or not
  // usable (the caller uses SendLog).
  enum class Inline { kNotTaken, kSent, kDone };
  Inline StartLogInline(Node* node, LogWaiter* w);
  void FinishLogInline(Node* node, LogWaiter* w);
  // A call's end: notes the node's health, hands the appends that queued meanwhile to the next
  // call and runs the waiters' `done`. REQUIRES: this thread set node->log_sending.
  void EndLogCall(Node* node, const std::vector<LogWaiter*>& waiters, const grpc::Status& s,
                  bool over_limit);

  metrics::Registry* registry_ = nullptr;
  std::string role_ = "cachenode";  // names the metrics
  int rpc_timeout_ms_ = 30000;
  std::atomic<uint64_t> control_term_{0};
  mutable absl::Mutex mu_;
  std::shared_ptr<const View> view_ ABSL_GUARDED_BY(mu_);
  // Every node ever used (views point into it; a node whose address changed keeps its old entry).
  std::vector<std::unique_ptr<Node>> all_nodes_ ABSL_GUARDED_BY(mu_);
  absl::Mutex set_mu_;  // serialises SetRing
  std::atomic<uint64_t> repairs_{0};
  std::atomic<uint64_t> unconfirmed_reads_{0};
  std::function<void(std::vector<uint32_t>*)> read_order_for_test_;
  std::function<grpc::Status(uint32_t)> log_fault_for_test_;
  metrics::Counter* log_retries_ = nullptr;
  metrics::Counter* log_inline_ = nullptr;
  metrics::Counter* write_retries_ = nullptr;
  std::function<grpc::Status(uint32_t)> write_fault_for_test_;
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_CLIENT_DATANODE_POOL_H_
