// LogLink: a cache node's end of one data node's log port (datanode/log_port.h) — one TCP
// connection (TLS when the process has an identity), and one thread that sends requests on it,
// one at a time, and waits for each answer. A pool keeps two per data node: one for the node's
// group-committed log appends (DataNodePool::SendLogBatch hands a batch here when the data node
// announced a port, Health's `log_port`, and the link is usable, else it calls gRPC), one for
// block writes (WriteAll: the destager's writes, when the node speaks node-api 2 and the link
// is idle, sent and awaited on the writer's own thread, TryBeginStore, or a destage batch's runs
// in one request, TryBeginStoreBatch, node-api 3; a write that finds it busy goes over gRPC, so
// concurrent writers are not queued behind each other on one connection). A third carries reads of blocks, on the reader's own
// thread when the link is free (TryCallLoad), over gRPC when it is not.
//
// A transport failure (refused, reset, no answer within the timeout) fails the batch UNAVAILABLE
// (the pool retries it, an append being idempotent) and parks the link: the batches after go
// over gRPC until the pool sees the node's port again in a Health answer (SetPort), which also
// follows a restarted node to its new port. A refusal by the node (sealed log, draining) is its
// answer, typed as over gRPC, and leaves the link usable.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_DATANODE_CLIENT_LOG_LINK_H_
#define RINGCACHE_DATANODE_CLIENT_LOG_LINK_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/block_wire.h"
#include "common/task_pool.h"
#include "common/tls.h"
#include "ringcache/v1/datanode.pb.h"

namespace ringcache::datanode {

class LogLink {
 public:
  // To data node `node_id` on `host`; each answer is awaited at most `timeout_ms`.
  LogLink(uint32_t node_id, std::string host, int timeout_ms);
  ~LogLink();  // waits for the batch in flight; then closes the connection

  // The port the node announced (0: none, which parks the link), its store's incarnation (sent
  // with every request: a node with another store refuses it) and the node-api version it said
  // (Health's api_version). Called with every Health answer: it makes a parked link usable again.
  void SetPort(int port, const std::string& store_incarnation = "", uint32_t api_version = 0);
  // Whether batches may be sent here (a port is known and the last transport did not fail).
  bool usable() const;
  // Whether block writes and reads may be sent here: usable(), and the node takes kStoreBlocks
  // and kLoadBlocks (node-api 2 or later).
  bool stores_blocks() const;
  // Sends `req` (alive until `done` ran) on the link's thread; `done` runs there, once, with the
  // node's answer in *resp or the failure.
  void Send(const v1::LogAppendRequest* req, v1::LogAppendResponse* resp,
            absl::AnyInvocable<void(absl::Status)> done);

  // Sends `req` and waits for the answer on the calling thread (the link's thread, or a test).
  absl::Status Call(const v1::LogAppendRequest& req, v1::LogAppendResponse* resp);

  // An append on the calling thread, in two halves, for a link its pool found idle (nothing
  // queued or in flight): BeginCall sends `req` and keeps the connection for its answer;
  // FinishCall waits for the answer and frees the link. The caller works in between (a cache
  // node's write puts its block on the SSD while the log copies travel), and no thread hand-off
  // is paid. Not OK from BeginCall: the call is over (the link parked as by Call; FinishCall
  // must not follow). After an OK BeginCall, FinishCall must follow; it retries a kept
  // connection that turned out closed, as Call does. No lock is held in between (a writer
  // begins appends on several links in any order): until FinishCall, another BeginCall, Call or
  // Send's call on this link fails UNAVAILABLE (the pool sends one batch at a time per link, so
  // it never meets this).
  absl::Status BeginCall(const v1::LogAppendRequest& req);
  absl::Status FinishCall(v1::LogAppendResponse* resp);

  // A block write on the calling thread, in two halves as BeginCall and FinishCall, unless a
  // write is queued, in flight or begun here already (returns false, nothing sent: the caller
  // sends it another way). Returns true when it took the link; then *status says whether the
  // request went out: OK, and FinishStore must follow (it waits for the answer and frees the
  // link); not OK, and the call is over (a transport failure parks the link as Call does).
  // A writer begins its write on each home's link, then finishes each: no thread hand-off.
  bool TryBeginStore(const v1::WriteBlocksRequest& req, absl::Status* status);
  absl::Status FinishStore(v1::WriteBlocksResponse* resp);
  // Whether batches of block writes may be sent here: stores_blocks(), and the node takes
  // kStoreBlocksBatch (node-api 3 or later).
  bool stores_batches() const;
  // The writes of several objects in one request (kStoreBlocksBatch), in halves as
  // TryBeginStore and FinishStore; *resp has one result per write.
  bool TryBeginStoreBatch(const v1::WriteBlocksBatchRequest& req, absl::Status* status);
  absl::Status FinishStoreBatch(v1::WriteBlocksBatchResponse* resp);

  // A block write: sends `req` (alive until `done` ran) on the link's thread and returns true,
  // unless a request is queued or in flight here already (returns false, `done` is not run:
  // the caller sends it another way). `done` runs on the link's thread, once.
  bool TrySendStore(const v1::WriteBlocksRequest* req, v1::WriteBlocksResponse* resp,
                    absl::AnyInvocable<void(absl::Status)> done);
  // Sends `req` and waits for the answer on the calling thread.
  absl::Status CallStore(const v1::WriteBlocksRequest& req, v1::WriteBlocksResponse* resp);
  // A block read on the calling thread, unless another request is on the link (returns false,
  // nothing sent: the caller reads another way). Else *status is the node's answer (or the
  // transport's failure) and *resp its data.
  bool TryCallLoad(const v1::ReadBlocksRequest& req, v1::ReadBlocksResponse* resp,
                   absl::Status* status);

 private:
  // Connects (and runs the TLS handshake) to the current port.
  absl::Status Connect(int port) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  void Close() ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // One request on the open connection. Returns the transport's status (not OK: the connection
  // is unusable; *answered: whether an answer began to arrive); when OK, *result is the node's
  // answer (and *resp its data).
  absl::Status Exchange(wire::Op op, const std::string& payload, std::string* data,
                        bool* answered, absl::Status* result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // The halves of a request on the calling thread (BeginCall, TryBeginStore): BeginOp sends
  // payload_ as `op` to `port` (again on a fresh connection when a kept one turned out closed;
  // parks the link on a transport failure) and keeps the connection for its answer; FinishOp
  // reads the answer into data_ and returns the node's answer or the failure.
  absl::Status BeginOp(wire::Op op, int port) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  absl::Status FinishOp(wire::Op op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // TryBeginStore and FinishStore for a request of `op` (kStoreBlocks, kStoreBlocksBatch).
  bool TryBeginBlocks(wire::Op op, const google::protobuf::MessageLite& req,
                      absl::Status* status);
  absl::Status FinishBlocks(wire::Op op, google::protobuf::MessageLite* resp);
  // Exchange's halves: the request (its tag in *tag), then the answer to `tag`.
  absl::Status SendRequest(wire::Op op, const std::string& payload, uint64_t* tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  absl::Status ReadAnswer(wire::Op op, uint64_t tag, std::string* data, bool* answered,
                          absl::Status* result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // payload_ as a log append (the caller's request and the store incarnation meant).
  void EncodeAppend(const v1::LogAppendRequest& req, const std::string& incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // After a transport failure on `port`: parks the link (once) and returns the UNAVAILABLE
  // error the request fails with.
  absl::Status Park(int port, const absl::Status& transport);
  bool begun() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_) { return begun_port_ != 0; }
  // payload_ as one request of `op` to `port`, with a second attempt on a fresh connection when
  // a kept one turned out closed; parks the link on a transport failure. The node's answer is
  // returned, its data in *data.
  absl::Status RoundTrip(wire::Op op, int port, std::string* data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // The port to use (0: none known) and the store meant; *closing: the destructor runs.
  int Target(std::string* store_incarnation, bool* closing = nullptr) const;
  // The sender thread, started on first use; null when the link is closing.
  TaskPool* Sender();

  const uint32_t node_id_;
  const std::string host_;
  const int timeout_ms_;
  mutable absl::Mutex mu_;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  std::string incarnation_ ABSL_GUARDED_BY(mu_);
  uint32_t api_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool parked_ ABSL_GUARDED_BY(mu_) = false;
  // Block writes taken by TrySendStore or TryBeginStore, not yet done.
  int queued_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex io_mu_;  // one exchange at a time
  int fd_ ABSL_GUARDED_BY(io_mu_) = -1;
  int fd_port_ ABSL_GUARDED_BY(io_mu_) = 0;  // the port fd_ is connected to
  std::unique_ptr<tls::Session> session_ ABSL_GUARDED_BY(io_mu_);
  uint64_t tag_ ABSL_GUARDED_BY(io_mu_) = 0;
  std::string payload_ ABSL_GUARDED_BY(io_mu_);
  std::string data_ ABSL_GUARDED_BY(io_mu_);
  // The request between BeginCall and FinishCall (or TryBeginStore and FinishStore): its port
  // (0: none begun), tag and whether it went on a kept connection.
  int begun_port_ ABSL_GUARDED_BY(io_mu_) = 0;
  uint64_t begun_tag_ ABSL_GUARDED_BY(io_mu_) = 0;
  bool begun_reused_ ABSL_GUARDED_BY(io_mu_) = false;
  // The sender thread, started by the first Send (a pool that never appends starts none).
  std::unique_ptr<TaskPool> sender_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;  // the destructor runs: Send cancels at once
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_CLIENT_LOG_LINK_H_
