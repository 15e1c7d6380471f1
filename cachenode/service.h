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
#include <map>
#include <utility>

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
//
// The gate also counts the requests it let in, by epoch, until they finish (Pass), so that an
// ownership change can wait for them: Advance(e) raises the node's epoch to e and returns once
// no request admitted under an older epoch is still running. The coordinator calls it (through
// Flush with an epoch) before it settles a node's objects, so a request that another gateway sent
// on the old ring can never land after the settle read the node's dirty blocks.
class RequestGate {
 public:
  // Held by an admitted request until it finishes (see Advance). Move-only.
  class Pass {
   public:
    Pass() = default;
    Pass(Pass&& o) noexcept : gate_(std::exchange(o.gate_, nullptr)), epoch_(o.epoch_) {}
    Pass& operator=(Pass&& o) noexcept {
      Release();
      gate_ = std::exchange(o.gate_, nullptr);
      epoch_ = o.epoch_;
      return *this;
    }
    ~Pass() { Release(); }
    void Release();

   private:
    friend class RequestGate;
    RequestGate* gate_ = nullptr;
    uint64_t epoch_ = 0;
  };

  // `node` and `registry` (may be null) are not owned.
  RequestGate(CacheNode* node, metrics::Registry* registry);
  // Admits a request routed with `epoch`; on OK, *pass (may be null: not counted) holds it as
  // running until the pass is released or destroyed.
  absl::Status Admit(uint64_t epoch, Pass* pass = nullptr);
  // Raises the node's ring epoch to `epoch` (requests routed with an older one are refused from
  // now on) and waits until none admitted under an older epoch is running. kDeadlineExceeded if
  // some still run after `timeout`.
  absl::Status Advance(uint64_t epoch, absl::Duration timeout);
  // Raises the node's ring epoch to `epoch` without waiting (the cache ring followed from etcd,
  // cachenode/ring_follower.h); an older `epoch` changes nothing.
  void Raise(uint64_t epoch);
  // The node's ring epoch: the highest seen on a request, a flush or in etcd.
  uint64_t epoch() const { return epochs_.highest(); }
  // Requests admitted and not finished yet.
  int running() const;
  // The deadline a write runs under when its sender gives up at `sender_gives_up`: a second
  // earlier, so that a write the client abandoned never lands later, over a newer one it sent
  // instead. InfiniteFuture stays infinite.
  static absl::Time WriteDeadline(absl::Time sender_gives_up) {
    return sender_gives_up == absl::InfiniteFuture() ? sender_gives_up
                                                      : sender_gives_up - absl::Seconds(1);
  }

 private:
  CacheNode* const node_;
  mutable absl::Mutex mu_;
  RingEpochGuard epochs_;  // Admit under mu_, so that Advance sees every request it let in
  std::map<uint64_t, int> running_ ABSL_GUARDED_BY(mu_);  // requests running, by their epoch
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
  grpc::Status SetPolicy(grpc::ServerContext*, const v1::SetPolicyRequest*,
                         v1::SetPolicyResponse*) override;
  grpc::Status Flush(grpc::ServerContext*, const v1::CacheFlushRequest*,
                     v1::CacheFlushResponse*) override;
  grpc::Status Stats(grpc::ServerContext*, const v1::CacheStatsRequest*,
                     v1::CacheStatsResponse*) override;
  grpc::Status RegisterVdi(grpc::ServerContext*, const v1::RegisterVdiRequest*,
                           v1::RegisterVdiResponse*) override;
  grpc::Status DropVdi(grpc::ServerContext*, const v1::DropVdiRequest*,
                       v1::DropVdiResponse*) override;
  grpc::Status InvalidateVdi(grpc::ServerContext*, const v1::InvalidateVdiRequest*,
                             v1::InvalidateVdiResponse*) override;
  grpc::Status ResizeTiers(grpc::ServerContext*, const v1::ResizeTiersRequest*,
                         v1::ResizeTiersResponse*) override;
  grpc::Status Prefetch(grpc::ServerContext*, const v1::CacheReadRequest*,
                        v1::PrefetchResponse*) override;
  grpc::Status Allocation(grpc::ServerContext*, const v1::CacheReadRequest*,
                          v1::AllocationResponse*) override;
  grpc::Status DropBlocks(grpc::ServerContext*, const v1::DropBlocksRequest*,
                          v1::DropBlocksResponse*) override;
  grpc::Status SetDataRing(grpc::ServerContext*, const v1::DataRing*,
                           v1::SetDataRingResponse*) override;
  grpc::Status RelogRecords(grpc::ServerContext*, const v1::RelogRecordsRequest*,
                            v1::RelogRecordsResponse*) override;

 private:
  // The gate's verdict as a gRPC status; *pass holds an admitted request (RequestGate::Advance).
  grpc::Status Admit(uint64_t epoch, RequestGate::Pass* pass);
  // A control step's fence (proto ControlFence): OK, or kStaleTerm (counted, logged) when it
  // carries an older coordinator term than this node has seen.
  absl::Status CheckFence(const v1::ControlFence& fence, const char* step);
  RequestGate gate_;
  metrics::Counter* stale_term_refused_ = nullptr;
  CacheNode* const node_;
  std::atomic<int> data_port_{0};
};

// Converts between the wire enum and CacheMode.
CacheMode FromProto(v1::CacheMode m);
v1::CacheMode ToProto(CacheMode m);

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_SERVICE_H_
