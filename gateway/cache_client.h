// CacheClient: how the gateway's router talks to one cache node — in-process (ringcache-local) or
// over gRPC (ringcache-gateway). Byte ranges are inside one object.
//
// Thread-safety: implementations are thread-safe.
#ifndef RINGCACHE_GATEWAY_CACHE_CLIENT_H_
#define RINGCACHE_GATEWAY_CACHE_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "common/monotonic.h"
#include "datanode/client/datanode_pool.h"
#include "ring/ring.h"
#include "ringcache/v1/cachenode.grpc.pb.h"

namespace ringcache::gateway {

class CacheClient {
 public:
  virtual ~CacheClient() = default;
  // The cache ring epoch the sender routes with; the gRPC client stamps it on every block
  // request (cachenode/service.h RingEpochGuard). 0: not stamped. Only grows: a request that
  // read the epoch before a ring change and stores it after must not lower it.
  void SetRingEpoch(uint64_t epoch) { RaiseTo(&ring_epoch_, epoch, std::memory_order_relaxed); }
  uint64_t ring_epoch() const { return ring_epoch_.load(std::memory_order_relaxed); }
  // The coordinator's term its control steps carry (DropBlocks, FlushMoving, RelogRecords), with
  // the ring epoch, in a ControlFence: the node refuses a term older than one it has seen
  // (kStaleTerm). 0: none (static mode). Only grows.
  void SetControlTerm(uint64_t term) {
    RaiseTo(&control_term_, term, std::memory_order_relaxed);
  }
  uint64_t control_term() const { return control_term_.load(std::memory_order_relaxed); }
  v1::ControlFence fence() const {
    v1::ControlFence f;
    f.set_term(control_term());
    f.set_epoch(ring_epoch());
    return f;
  }
  virtual absl::Status Read(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                            char* out) = 0;
  // Starts a read that completes on another thread: returns true and runs `done` exactly once
  // later (with the data in `out`), or returns false without calling it when this client has
  // no asynchronous path up (then use Read). Only the gRPC client's block data pipe has one.
  virtual bool ReadAsync(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len, char* out,
                         absl::AnyInvocable<void(absl::Status)> done) {
    (void)vdi, (void)object, (void)offset, (void)len, (void)out, (void)done;
    return false;
  }
  virtual absl::Status Write(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                             const char* data) = 0;
  virtual absl::Status Trim(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                            bool zero) = 0;
  virtual absl::Status Prefetch(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len) = 0;
  virtual absl::Status Allocation(uint32_t vdi, uint64_t object, uint32_t offset, uint32_t len,
                                  std::vector<bool>* allocated) = 0;
  // `policy`: the VDI's own policy spec ("" = the node's).
  virtual absl::Status RegisterVdi(const v1::VdiGeometry& vdi, v1::CacheMode mode,
                                   const std::string& policy) = 0;
  virtual absl::Status DropVdi(uint32_t vdi) = 0;
  // Drops the VDI's clean cached blocks (the InvalidateVdi RPC); dirty ones stay.
  struct Invalidated {
    uint64_t dropped = 0;     // clean blocks dropped
    uint64_t dirty_kept = 0;  // dirty blocks kept
  };
  virtual absl::StatusOr<Invalidated> InvalidateVdi(uint32_t vdi) = 0;
  virtual absl::Status SetMode(uint32_t vdi, v1::CacheMode mode) = 0;
  // Switches the VDI's cache policy on this node ("" = the node's).
  virtual absl::Status SetPolicy(uint32_t vdi, const std::string& policy) = 0;
  // Destages (vdi, or all when 0); returns dirty bytes left on this node.
  virtual absl::StatusOr<uint64_t> Flush(uint32_t vdi) = 0;
  // Destages only the objects that the cache ring of `next` does not give to this node (the
  // FlushMoving of cachenode/cache_node.h).
  virtual absl::Status FlushMoving(const std::vector<ring::Member>& next) = 0;
  virtual absl::Status Stats(uint32_t vdi, std::vector<v1::VdiCacheStats>* out) = 0;
  // Returns OK if the node answers within `timeout_ms` (no waiting for it to come up).
  virtual absl::Status Probe(int timeout_ms) = 0;
  // For a node expected back (it registered again): connects to it at once, instead of after
  // the reconnect backoff of its earlier failures, waiting at most `timeout_ms` for the
  // connection. Default: nothing (no connection to keep).
  virtual void Reconnect(int timeout_ms) { (void)timeout_ms; }
  // What a node says of its own state (cachenode/ownership.h, docs/durability.md).
  struct NodeHealth {
    bool quarantined = false;    // lost ownership; waits to be re-admitted
    bool device_failed = false;  // its SSD failed a write or fdatasync (sticky)
    std::string device_error;
    uint64_t epoch = 0;  // highest cache ring epoch it has seen
    // The node as a whole (CacheStatsResponse): SSD capacity and use, dirty bytes, hits and
    // misses since it started.
    uint64_t ssd_bytes = 0;
    uint64_t ssd_used_bytes = 0;
    uint64_t dirty_bytes = 0;
    uint64_t hits = 0;
    uint64_t misses = 0;
    v1::SsdWear wear;  // its SSD's wear and write budget
  };
  // Asks the node for its state, waiting at most `timeout_ms`.
  virtual absl::StatusOr<NodeHealth> Health(int timeout_ms) = 0;
  // Drops cached blocks without destaging (the DropBlocks RPC): every block when `all` (and
  // re-admits a quarantined node), else the clean blocks of objects that the cache ring of
  // `ring` does not give to this node. Returns the dirty blocks kept.
  virtual absl::StatusOr<uint64_t> DropBlocks(bool all, const std::vector<ring::Member>& ring) = 0;
  // Makes the node use `ring` for its data nodes (the SetDataRing RPC); returns once it does
  // and no request of the node still uses the previous ring.
  virtual absl::Status SetDataRing(const datanode::DataRing& ring) = 0;
  // Has the node log again the dirty blocks of its log records `seqs` (a scrub found a copy
  // damaged); returns how many it logged again (the others are no longer dirty under them).
  virtual absl::StatusOr<uint32_t> RelogRecords(const std::vector<uint64_t>& /*seqs*/) {
    return absl::UnimplementedError("RelogRecords");
  }
  // Resizes the node's SSD and RAM tiers to `ssd_bytes` and `ram_bytes` (0: no change) and
  // says where the resize stands (the ResizeTiers RPC; cachenode/cache_node.h Resize).
  virtual absl::StatusOr<v1::ResizeTiersResponse> ResizeTiers(uint64_t /*ssd_bytes*/,
                                                              uint64_t /*ram_bytes*/) {
    return absl::UnimplementedError("ResizeTiers");
  }
  // Cancels the calls in flight (they return CANCELLED). For a node that stopped answering,
  // whose requests the router re-sends to the next owner. In-process clients have none.
  virtual void CancelInFlight() {}

 private:
  std::atomic<uint64_t> ring_epoch_{0};
  std::atomic<uint64_t> control_term_{0};
};

// gRPC client to a ringcache-cachenode at `address`.
std::unique_ptr<CacheClient> MakeGrpcCacheClient(const std::string& address,
                                                 int timeout_ms = 60000);

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_CACHE_CLIENT_H_
