// The DataNode gRPC service: validates requests, applies HDD emulation, calls the BlockStore and
// records metrics. Status conversion from absl to gRPC happens here, at the edge.
//
// Thread-safety: thread-safe; gRPC calls the handlers from its thread pool.
#ifndef RINGCACHE_DATANODE_SERVICE_H_
#define RINGCACHE_DATANODE_SERVICE_H_

#include <atomic>
#include <string>
#include <utility>

#include "common/grpc_status.h"
#include "common/metrics.h"
#include "datanode/hdd_emulator.h"
#include "datanode/scrubber.h"
#include "datanode/store.h"
#include "ringcache/v1/datanode.grpc.pb.h"

namespace ringcache::datanode {

class DataNodeService final : public v1::DataNode::Service {
 public:
  // `store`, `hdd` and `registry` are not owned and must outlive the service.
  DataNodeService(uint32_t node_id, BlockStore* store, HddEmulator* hdd,
                  metrics::Registry* registry);

  grpc::Status PutVdi(grpc::ServerContext*, const v1::PutVdiRequest*,
                      v1::PutVdiResponse*) override;
  grpc::Status DeleteVdi(grpc::ServerContext*, const v1::DeleteVdiRequest*,
                         v1::DeleteVdiResponse*) override;
  grpc::Status WriteBlocks(grpc::ServerContext*, const v1::WriteBlocksRequest*,
                           v1::WriteBlocksResponse*) override;
  // The write behind WriteBlocks, for the log port's kStoreBlocks frames: the same checks,
  // metrics and typed errors without gRPC.
  absl::Status StoreBlocks(const v1::WriteBlocksRequest& req, v1::WriteBlocksResponse* resp);
  // The log port's kStoreBlocksBatch (node-api 3): the writes of several objects, each checked
  // as StoreBlocks checks it and answered alone (resp: one result per write), stored in one
  // commit. Not OK only when the node serves nothing (draining).
  absl::Status StoreBlocksBatch(const v1::WriteBlocksBatchRequest& req,
                                v1::WriteBlocksBatchResponse* resp);
  grpc::Status ReadBlocks(grpc::ServerContext*, const v1::ReadBlocksRequest*,
                          v1::ReadBlocksResponse*) override;
  // The read behind ReadBlocks, for the log port's kLoadBlocks frames.
  absl::Status LoadBlocks(const v1::ReadBlocksRequest& req, v1::ReadBlocksResponse* resp);
  grpc::Status TrimBlocks(grpc::ServerContext*, const v1::TrimBlocksRequest*,
                          v1::TrimBlocksResponse*) override;
  grpc::Status ScanBlocks(grpc::ServerContext*, const v1::ScanBlocksRequest*,
                          v1::ScanBlocksResponse*) override;
  grpc::Status LogAppend(grpc::ServerContext*, const v1::LogAppendRequest*,
                         v1::LogAppendResponse*) override;
  // The append behind LogAppend, for the log port (datanode/log_port.h): the same checks,
  // metrics and typed errors (kLogSealed) without gRPC.
  absl::Status AppendLog(const v1::LogAppendRequest& req, v1::LogAppendResponse* resp);
  grpc::Status LogScan(grpc::ServerContext*, const v1::LogScanRequest*,
                       v1::LogScanResponse*) override;
  grpc::Status LogReclaim(grpc::ServerContext*, const v1::LogReclaimRequest*,
                          v1::LogReclaimResponse*) override;
  grpc::Status SealLog(grpc::ServerContext*, const v1::SealLogRequest*,
                       v1::SealLogResponse*) override;
  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*,
                      v1::HealthResponse*) override;
  grpc::Status Stats(grpc::ServerContext*, const v1::StatsRequest*,
                     v1::StatsResponse*) override;
  grpc::Status ClearStore(grpc::ServerContext*, const v1::ClearStoreRequest*,
                          v1::ClearStoreResponse*) override;
  grpc::Status Scrub(grpc::ServerContext*, const v1::DataNodeScrubRequest*,
                     v1::DataNodeScrubReport*) override;
  grpc::Status PutRing(grpc::ServerContext*, const v1::PutRingRequest*,
                       v1::PutRingResponse*) override;
  // kStaleTerm (counted) for a control step of an older coordinator term.
  absl::Status CheckFence(const v1::ControlFence& fence, const char* step);
  grpc::Status PutWriterIncarnation(grpc::ServerContext*, const v1::PutWriterIncarnationRequest*,
                                    v1::PutWriterIncarnationResponse*) override;
  // The background scrub the Scrub RPC reports on (not owned; without one, Scrub fails).
  void SetScrubber(Scrubber* scrubber) { scrubber_ = scrubber; }

  // Sets the log area size above which appends answer over_limit (0 = no limit).
  void SetLogLimit(uint64_t bytes) { log_limit_bytes_ = bytes; }
  // Makes every later call fail with UNAVAILABLE (used while shutting down).
  void SetDraining() { draining_ = true; }
  // The identity of the store (BlockStore::incarnation), as Health answers it.
  const std::string& store_incarnation() const { return store_->incarnation(); }
  // The log port Health announces (0: none; set before serving).
  void set_log_port(int port) { log_port_ = port; }

 private:
  Scrubber* scrubber_ = nullptr;  // set before serving
  struct OpMetrics {
    metrics::Histogram* latency;
    metrics::Counter* ok;
    metrics::Counter* failed;
  };
  OpMetrics MakeOp(const char* name);
  // Runs `fn`, timing it and counting its outcome under op `name`; UNAVAILABLE while draining.
  template <typename Fn>
  absl::Status Run(OpMetrics* op, Fn&& fn);
  // Run, answered as a gRPC status.
  template <typename Fn>
  grpc::Status Timed(OpMetrics* op, Fn&& fn) {
    return ToGrpc(Run(op, std::forward<Fn>(fn)));
  }

  const uint32_t node_id_;
  BlockStore* const store_;
  HddEmulator* const hdd_;
  metrics::Registry* const registry_;
  std::atomic<bool> draining_{false};
  std::atomic<int> log_port_{0};
  OpMetrics put_vdi_, delete_vdi_, write_, read_, trim_, scan_, log_append_, log_scan_, log_reclaim_;
  std::atomic<uint64_t> client_ops_{0};  // StatsResponse.client_ops
  metrics::Counter* bytes_written_;
  metrics::Counter* bytes_read_;
  metrics::Counter* data_loss_;
  metrics::Counter* log_records_appended_;
  metrics::Counter* log_records_reclaimed_;
  metrics::Counter* stale_term_refused_;   // control steps of an older coordinator term
  metrics::Counter* sealed_appends_refused_;  // appends of a cache node whose log is sealed
  metrics::Counter* corrupt_log_records_;
  metrics::Counter* log_over_limit_;
  std::atomic<uint64_t> log_limit_bytes_{0};
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_SERVICE_H_
