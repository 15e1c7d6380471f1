// The CacheNode gRPC service: the network face of a CacheNode for ringcache-cachenode. Converts
// between protobuf and CacheNode calls; absl::Status becomes grpc::Status here, at the edge.
//
// Thread-safety: thread-safe (CacheNode is).
#ifndef RINGCACHE_CACHENODE_SERVICE_H_
#define RINGCACHE_CACHENODE_SERVICE_H_

#include "cachenode/cache_node.h"
#include "ringcache/v1/cachenode.grpc.pb.h"

namespace ringcache::cachenode {

class CacheNodeService final : public v1::CacheNode::Service {
 public:
  explicit CacheNodeService(CacheNode* node) : node_(node) {}  // not owned

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

 private:
  CacheNode* const node_;
};

// Converts between the wire enum and CacheMode.
CacheMode FromProto(v1::CacheMode m);
v1::CacheMode ToProto(CacheMode m);

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_SERVICE_H_
