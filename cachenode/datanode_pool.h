// DataNodePool: a cache node's view of the data nodes — gRPC channels, the data ring that picks an
// object's N home replicas, and each node's live load (in-flight requests × smoothed latency),
// which feeds read replica choice and LCR victim choice (paper 004 Alg. 1 takes device load as an
// input; here a "device" is a home data node).
//
// Thread-safety: thread-safe. Membership is fixed at construction (static ring); cluster mode
// replaces the whole pool.
#ifndef RINGCACHE_CACHENODE_DATANODE_POOL_H_
#define RINGCACHE_CACHENODE_DATANODE_POOL_H_

#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/metrics.h"
#include "ring/ring.h"
#include "ringcache/v1/datanode.grpc.pb.h"

namespace ringcache::cachenode {

struct DataNodeEndpoint {
  uint32_t id = 0;
  std::string address;  // host:port of its gRPC service
  double weight = 1.0;
  std::string zone;
};

struct BlockRun {
  std::string data;                 // count × block_size bytes (zeros where absent)
  std::vector<bool> present;        // per block
};

// Version stamp of a write sent home (see datanode/store.h WriteStamp): the cache node's id and
// one sequence per block from the counter of its log records.
struct HomeStamp {
  uint32_t writer = 0;
  std::vector<uint64_t> seqs;
  bool only_if_newer = false;  // log replay: never overwrite a copy at least as new
};

// Result of appending log records.
struct LogAppendResult {
  std::vector<uint32_t> nodes;  // data nodes that hold the records durably
  uint32_t overlapping = 0;     // of which also home replicas of the object (cluster too small)
  bool over_limit = false;      // some log area is over its limit: destage to relieve it
};

class DataNodePool {
 public:
  // Builds the data ring over `nodes`. `registry` (not owned, may be null) receives per-node
  // latency metrics.
  static absl::StatusOr<std::unique_ptr<DataNodePool>> Create(
      const std::vector<DataNodeEndpoint>& nodes, metrics::Registry* registry,
      int rpc_timeout_ms = 30000);

  // Registers the VDI's geometry on every data node.
  absl::Status PutVdi(const v1::VdiGeometry& vdi);
  absl::Status DeleteVdi(uint32_t vdi_id);

  // Returns the object's `n` home replicas (distinct nodes, distinct zones when given).
  absl::StatusOr<std::vector<uint32_t>> Homes(uint32_t vdi, uint64_t object, int n) const;
  // Returns the current load of node `id` (lower is better; 0 when idle).
  double Load(uint32_t id) const;
  // Returns the least load among the object's n homes.
  double HomeLoad(uint32_t vdi, uint64_t object, int n) const;

  // Reads from the least-loaded home replica; on failure (unavailable, or DATA_LOSS from a bad
  // copy) tries the others, and rewrites a copy that failed its checksum from the good one.
  absl::StatusOr<BlockRun> Read(uint32_t vdi, uint64_t object, uint32_t first, uint32_t count,
                                int n, uint32_t block_size);
  // Returns which blocks of the run were ever written, from the least-loaded reachable home.
  absl::StatusOr<std::vector<bool>> Presence(uint32_t vdi, uint64_t object, uint32_t first,
                                             uint32_t count, int n);
  // Writes the run to all n homes in parallel; succeeds only when every home acknowledged.
  // `stamp` (may be null) versions the blocks; with stamp->only_if_newer, *stored (may be null)
  // receives the most blocks any one home stored.
  absl::Status WriteAll(uint32_t vdi, uint64_t object, uint32_t first, const std::string& data,
                        int n, const HomeStamp* stamp = nullptr, uint32_t* stored = nullptr);
  // Trims the run on all n homes.
  absl::Status TrimAll(uint32_t vdi, uint64_t object, uint32_t first, uint32_t count, int n,
                       const HomeStamp* stamp = nullptr);

  // Returns where the log records of an object with n homes go, in preference order: the nodes
  // after its homes on the data ring, then (cluster too small) its homes from the last one.
  std::vector<uint32_t> LogCandidates(uint32_t vdi, uint64_t object, int n) const;
  // Appends the records of `req` (all of one object) durably on `copies` data nodes among the object's log
  // candidates, in parallel, moving on to the next candidate when one fails. Fails (kUnavailable)
  // only when fewer than `copies` candidates accepted them. `overlap` (may be empty) runs on the
  // calling thread while the first round of appends is in flight.
  absl::StatusOr<LogAppendResult> LogAppend(uint32_t vdi, uint64_t object, int n, int copies,
                                            const v1::LogAppendRequest& req,
                                            const std::function<void()>& overlap = nullptr);
  // Drops the listed log records of `cache_node` on every data node. Returns the ids of the data
  // nodes that could not be reached (they still hold the records).
  std::vector<uint32_t> LogReclaim(uint32_t cache_node, const std::vector<uint64_t>& seqs,
                                   uint64_t below = 0);
  // Calls fn(record) for every log record of `cache_node` held by data node `node` with sequence
  // >= from, in order, a page at a time.
  absl::Status LogScan(uint32_t node, uint32_t cache_node, uint64_t from, bool include_data,
                       const std::function<void(v1::LogRecord&)>& fn);
  // Fetches log record `seq` of `cache_node` from any data node that holds a good copy.
  absl::StatusOr<v1::LogRecord> FetchLogRecord(uint32_t cache_node, uint64_t seq);
  std::vector<uint32_t> node_ids() const;
  // Asks every data node for its health (in parallel, `timeout_ms` each) to keep the up/down
  // view current even for nodes no request went to lately.
  void ProbeAll(int timeout_ms);
  // Returns the data nodes unreachable for at least `ms` milliseconds.
  std::vector<uint32_t> DownFor(int64_t ms) const;

  size_t size() const { return nodes_.size(); }
  uint64_t repairs() const { return repairs_.load(); }

 private:
  struct Node {
    DataNodeEndpoint endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::DataNode::Stub> stub;
    std::atomic<int> inflight{0};
    std::atomic<double> ewma_latency_s{0.0};
    std::atomic<int64_t> failed_at_ms{0};  // last RPC failure (steady clock), 0 = none
    std::atomic<int64_t> down_since_ms{0}; // unreachable since (steady clock), 0 = reachable
    metrics::Histogram* latency = nullptr;
  };
  DataNodePool() = default;
  Node* Find(uint32_t id) const;
  // Orders node ids by their load at the time of the call, least loaded first.
  void SortByLoad(std::vector<uint32_t>* ids) const;
  void Observe(Node* n, double seconds);
  // Records an RPC's outcome for the up/down view.
  void Note(Node* n, const grpc::Status& s);
  std::unique_ptr<grpc::ClientContext> Context() const;

  std::vector<std::unique_ptr<Node>> nodes_;
  absl::flat_hash_map<uint32_t, Node*> by_id_;
  std::unique_ptr<ring::Ring> ring_;
  int rpc_timeout_ms_ = 30000;
  std::atomic<uint64_t> repairs_{0};
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_DATANODE_POOL_H_
