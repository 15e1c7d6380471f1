// Internal to datanode/client: helpers the pool's files share (datanode_pool.cc,
// datanode_pool_log.cc, datanode_pool_admin.cc).
//
// Thread-safety: stateless helpers; OnNode as the pool.
#ifndef RINGCACHE_DATANODE_CLIENT_POOL_INTERNAL_H_
#define RINGCACHE_DATANODE_CLIENT_POOL_INTERNAL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "datanode/client/datanode_pool.h"

namespace ringcache::datanode::pool_internal {

// RINGCACHE_LOG_TRANSPORT=grpc in the environment keeps every append and block write on the
// RPCs, off the data nodes' log ports; =appends keeps the block writes and reads on the
// WriteBlocks and ReadBlocks RPCs; =handoff hands every append and block write to its link's
// sender thread, never sending one on the writer's thread (for comparisons and debugging).
bool LogPortsAllowed();
bool BlocksOnLogPortsAllowed();
bool InlineCallsAllowed();

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

inline int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The node did not answer (as opposed to answering with an error).
inline bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}


// A block an incomplete replica (a new or wiped store) says is absent, without a tombstone: it
// may exist on another replica.
inline bool Unconfirmed(const v1::ReadBlocksResponse& r, uint32_t i) {
  return r.incomplete() && !r.present(i) && (r.writers_size() <= static_cast<int>(i) ||
                                             r.writers(i) == 0);
}

// A stored copy's version as (epoch, sequence, writer): the order of datanode/store.h's
// CompareVersions.
struct CopyVersion {
  uint64_t epoch = 0, seq = 0;
  uint32_t writer = 0;
  auto Key() const { return std::make_tuple(epoch, seq, writer); }
};

inline CopyVersion VersionIn(const v1::ReadBlocksResponse& r, uint32_t i) {
  CopyVersion v;
  if (r.writers_size() > static_cast<int>(i)) v.writer = r.writers(i);
  if (r.versions_size() > static_cast<int>(i)) v.seq = r.versions(i);
  if (r.epochs_size() > static_cast<int>(i)) v.epoch = r.epochs(i);
  return v;
}

// The WriteBlocks request of blocks first.. of one object, stamped when `stamp` is set.
inline v1::WriteBlocksRequest BlockWriteRequest(uint32_t vdi, uint64_t object, uint32_t first,
                                                const std::string& data,
                                                const HomeStamp* stamp) {
  v1::WriteBlocksRequest req;
  req.mutable_range()->set_vdi_id(vdi);
  req.mutable_range()->set_object_index(object);
  req.mutable_range()->set_first_block(first);
  req.set_data(data);
  if (stamp != nullptr) {
    req.set_writer_node(stamp->writer);
    for (uint64_t s : stamp->seqs) req.add_versions(s);
    for (uint64_t e : stamp->epochs) req.add_epochs(e);
    req.set_only_if_newer(stamp->only_if_newer);
  }
  return req;
}

}  // namespace ringcache::datanode::pool_internal

namespace ringcache::datanode {

template <typename Call>
absl::Status DataNodePool::OnNode(uint32_t node, const char* what, Call&& call) {
  const auto v = view();
  Node* n = v->Find(node);
  if (n == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown data node ", node));
  auto ctx = Context();
  grpc::Status s = call(*n->stub, ctx.get());
  Note(n, s);
  return FromGrpc(s, absl::StrCat(what, " data node ", node));
}

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_CLIENT_POOL_INTERNAL_H_
