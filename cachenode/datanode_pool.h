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
  absl::Status WriteAll(uint32_t vdi, uint64_t object, uint32_t first, const std::string& data,
                        int n);
  // Trims the run on all n homes.
  absl::Status TrimAll(uint32_t vdi, uint64_t object, uint32_t first, uint32_t count, int n);

  size_t size() const { return nodes_.size(); }
  uint64_t repairs() const { return repairs_.load(); }

 private:
  struct Node {
    DataNodeEndpoint endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<v1::DataNode::Stub> stub;
    std::atomic<int> inflight{0};
    std::atomic<double> ewma_latency_s{0.0};
    metrics::Histogram* latency = nullptr;
  };
  DataNodePool() = default;
  Node* Find(uint32_t id) const;
  // Orders node ids by their load at the time of the call, least loaded first.
  void SortByLoad(std::vector<uint32_t>* ids) const;
  void Observe(Node* n, double seconds);
  std::unique_ptr<grpc::ClientContext> Context() const;

  std::vector<std::unique_ptr<Node>> nodes_;
  absl::flat_hash_map<uint32_t, Node*> by_id_;
  std::unique_ptr<ring::Ring> ring_;
  int rpc_timeout_ms_ = 30000;
  std::atomic<uint64_t> repairs_{0};
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_DATANODE_POOL_H_
