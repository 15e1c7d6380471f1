// DataChannel: the gateway's end of the block data protocol (common/block_wire.h) to one cache
// node — a pool of TCP connections, each carrying one request at a time, used by the calling
// thread itself (it writes the request and reads the answer: no thread hand-off). A request is
// sent on an idle connection, or a new one (the pool grows with the callers in flight).
//
// A connection that fails on a reused socket before any answer (the node restarted and closed
// it) is retried once on a fresh one. Calls whose request never left report sent = false, so the
// caller can take another path (gRPC, which waits for a restarting node).
//
// Reads may also be pipelined: ReadAsync sends a read on the channel's one pipelined connection
// and returns at once; the connection's reader thread takes the answers as they come (matched by
// tag: a read the node must fetch from the data nodes may answer after later ones) and runs each
// caller's completion. Many reads in flight then share the node's receives and sends, and no
// caller thread waits for its answer.
//
// With `tls` every connection runs TLS, checked to reach a cache node of this cluster
// (common/tls.h), the pipelined one too; ProcessTls() is the context of the process's --tls-dir
// identity.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_GATEWAY_DATA_CHANNEL_H_
#define RINGCACHE_GATEWAY_DATA_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/block_wire.h"
#include "common/tls.h"

namespace ringcache::gateway {

class DataChannel {
 public:
  DataChannel(std::string host, int port, int timeout_ms,
              std::shared_ptr<const tls::ClientContext> tls = nullptr);
  // The client context of the process's TLS identity (common/grpc_tls.h), or null without one.
  static std::shared_ptr<const tls::ClientContext> ProcessTls();
  ~DataChannel();  // closes every connection (REQUIRES: no call in flight)

  // Sends `r` (with `payload`: r.length bytes, for writes) and waits for the answer (reads:
  // r.length bytes into `out`). *sent: whether the request may have reached the node.
  absl::Status Call(const wire::Request& r, const char* payload, char* out, bool* sent);
  // Sends read `r` (r.length bytes into `out`) on the pipelined connection and returns true at
  // once; `done` then runs exactly once, on the connection's reader thread, with the node's
  // answer or the connection's failure. Returns false without calling `done` when no pipelined
  // connection is up (not opened yet, or broken): use Call, whose reads open one.
  bool ReadAsync(const wire::Request& r, char* out, absl::AnyInvocable<void(absl::Status)> done);
  // Breaks the connections of the calls in flight (they return kCancelled).
  void CancelInFlight();
  std::string address() const;

 private:
  // An idle connection (reused = true) or a new one; `fresh`: a new one, and the idle ones are
  // closed.
  absl::StatusOr<int> Acquire(bool fresh, bool* reused);
  // A new connection to the node, with its TLS session in *session under TLS (both pooled and
  // pipelined connections open this way).
  absl::StatusOr<int> Dial(std::unique_ptr<tls::Session>* session) const;
  void Release(int fd, bool keep) ABSL_LOCKS_EXCLUDED(mu_);
  void CloseLocked(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One request on `fd`. Returns the transport's status (not OK: the connection is unusable;
  // *answered: whether any byte of an answer came back); when OK, *result is the node's answer.
  absl::Status Exchange(int fd, const wire::Request& r, const char* payload, char* out,
                        bool* answered, absl::Status* result);

  class Pipe;
  // Opens the pipelined connection if none is up (at most one attempt a second).
  void MaybeOpenPipe() ABSL_LOCKS_EXCLUDED(mu_);

  const std::string host_;
  const int port_;
  const int timeout_ms_;
  const std::shared_ptr<const tls::ClientContext> tls_;
  absl::Mutex mu_;
  // The TLS session of each connection (with tls_); a busy connection's entry is used by its
  // caller outside mu_ and only erased by that caller.
  absl::flat_hash_map<int, std::unique_ptr<tls::Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::vector<int> idle_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int> busy_ ABSL_GUARDED_BY(mu_);
  uint64_t cancels_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<Pipe> pipe_ ABSL_GUARDED_BY(mu_);
  bool opening_pipe_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_pipe_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_DATA_CHANNEL_H_
