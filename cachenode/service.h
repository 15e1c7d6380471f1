// The CacheNode gRPC service: the network face of a CacheNode for ringcache-cachenode. Converts
// between protobuf and CacheNode calls; absl::Status becomes grpc::Status here, at the edge.
//
// Block I/O (Read, Write, Trim, Prefetch, Allocation) is served only while CacheNode::CheckOwner
// says the node may act as owner: its SSD has not failed, it is not quarantined (persisted,
// cachenode/ownership.h), and in cluster mode its etcd lease is certainly valid (the Fence, set
// as the node's gate). Otherwise it is refused with UNAVAILABLE and the kFenced error kind, so a
// node cut off from etcd stops serving before its lease can expire at the server and its
// objects be given to another node. Administration (Flush, Stats, RegisterVdi, DropBlocks, ...)
// stays open: the gateway settles a fenced node's dirty data through it.
//
// Thread-safety: thread-safe (CacheNode is; the fence is read under its own lock).
#ifndef RINGCACHE_CACHENODE_SERVICE_H_
#define RINGCACHE_CACHENODE_SERVICE_H_

#include <atomic>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cachenode/cache_node.h"
#include "common/metrics.h"
#include "ringcache/v1/cachenode.grpc.pb.h"

namespace ringcache::cachenode {

// Whether a cluster-mode cache node's etcd lease is certainly valid now (the node's gate). A lost
// lease quarantines the node (Ownership::Quarantine, persisted) until the gateway re-admits it
// with DropBlocks(all): its objects went to other nodes, so its cached blocks may be stale and
// its dirty ones were settled.
//
// Thread-safety: thread-safe.
class Fence {
 public:
  // `lease_valid` reports whether the registration's lease is certainly valid now.
  explicit Fence(std::function<bool()> lease_valid) : lease_valid_(std::move(lease_valid)) {}
  bool Open() const { return !lease_valid_ || lease_valid_(); }

 private:
  const std::function<bool()> lease_valid_;
};

// Ring epochs on the data path (docs/design.md §7). Every block request carries the epoch of the
// cache ring its sender routed it with (0: unknown, e.g. a tool; not checked). The node remembers
// the highest epoch it has seen and refuses requests routed with an older one (FAILED_PRECONDITION,
// "stale ring epoch"): their sender has not yet seen an ownership change that another sender
// already acted on, so the object may not be this node's any more. The sender re-routes and retries
// (gateway/router.h).
class RingEpochGuard {
 public:
  // Returns OK and raises the highest epoch seen, or kFailedPrecondition for an older epoch.
  absl::Status Admit(uint64_t epoch);
  uint64_t highest() const { return highest_.load(); }

 private:
  std::atomic<uint64_t> highest_{0};
};

// The checks every block request passes before it reaches the node, on either transport (gRPC
// here, the block data protocol of cachenode/data_server.h): the node's ownership
// (CacheNode::CheckOwner), then the request's ring epoch (raising the node's epoch). Refusals
// are counted in /metrics.
class RequestGate {
 public:
  // `node` and `registry` (may be null) are not owned.
  RequestGate(CacheNode* node, metrics::Registry* registry);
  absl::Status Admit(uint64_t epoch);
  // The deadline a write runs under when its sender gives up at `sender_gives_up`: a second
  // earlier, so that a write the client abandoned never lands later, over a newer one it sent
  // instead. InfiniteFuture stays infinite.
  static absl::Time WriteDeadline(absl::Time sender_gives_up) {
    return sender_gives_up == absl::InfiniteFuture() ? sender_gives_up
                                                      : sender_gives_up - absl::Seconds(1);
  }

 private:
  CacheNode* const node_;
  RingEpochGuard epochs_;
  metrics::Counter* fenced_requests_ = nullptr;
  metrics::Counter* stale_epoch_requests_ = nullptr;
};

class CacheNodeService final : public v1::CacheNode::Service {
 public:
  // `node` and `registry` are not owned.
  explicit CacheNodeService(CacheNode* node, metrics::Registry* registry = nullptr);
  // The gate block requests pass (shared with the block data server).
  RequestGate* gate() { return &gate_; }
  // The block data protocol's port, announced in Stats (0: not served).
  void set_data_port(int port) { data_port_.store(port); }

  grpc::Status Read(grpc::ServerContext*, const v1::CacheReadRequest*,
                    v1::CacheReadResponse*) override;
  grpc::Status Write(grpc::ServerContext*, const v1::CacheWriteRequest*,
                     v1::CacheWriteResponse*) override;
  grpc::Status Trim(grpc::ServerContext*, const v1::CacheTrimRequest*,
                    v1::CacheTrimResponse*) override;
  grpc::Status SetMode(grpc::ServerContext*, const v1::SetModeRequest*,
                       v1::SetModeResponse*) override;
  grpc::Status Flush(grpc::ServerContext*, const v1::CacheFlushRequest*,
                     v1::CacheFlushResponse*) override;
  grpc::Status Stats(grpc::ServerContext*, const v1::CacheStatsRequest*,
                     v1::CacheStatsResponse*) override;
  grpc::Status RegisterVdi(grpc::ServerContext*, const v1::RegisterVdiRequest*,
                           v1::RegisterVdiResponse*) override;
  grpc::Status DropVdi(grpc::ServerContext*, const v1::DropVdiRequest*,
                       v1::DropVdiResponse*) override;
  grpc::Status Prefetch(grpc::ServerContext*, const v1::CacheReadRequest*,
                        v1::PrefetchResponse*) override;
  grpc::Status Allocation(grpc::ServerContext*, const v1::CacheReadRequest*,
                          v1::AllocationResponse*) override;
  grpc::Status DropBlocks(grpc::ServerContext*, const v1::DropBlocksRequest*,
                          v1::DropBlocksResponse*) override;
  grpc::Status SetDataRing(grpc::ServerContext*, const v1::DataRing*,
                           v1::SetDataRingResponse*) override;

 private:
  // The gate's verdict as a gRPC status.
  grpc::Status Admit(uint64_t epoch);
  RequestGate gate_;
  CacheNode* const node_;
  std::atomic<int> data_port_{0};
};

// Converts between the wire enum and CacheMode.
CacheMode FromProto(v1::CacheMode m);
v1::CacheMode ToProto(CacheMode m);

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_SERVICE_H_
