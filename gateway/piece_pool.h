// PiecePool: runs the per-object pieces of one NBD request (a read, write, trim or write-zeroes
// split at object boundaries) in parallel on a fixed set of threads shared by every connection,
// so the work a request creates is bounded whatever its length: a 4 GiB discard (1,024 pieces
// of 4 MiB objects) uses the same threads as a 4 KiB one, never a thread per piece.
//
// The calling thread takes pieces too (caller-runs), so a request always makes progress even
// while every pool thread is busy with other requests' pieces (each may wait up to a minute on
// a fenced owner: gateway/router.h OnOwner).
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_GATEWAY_PIECE_POOL_H_
#define RINGCACHE_GATEWAY_PIECE_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ringcache::gateway {

class PiecePool {
 public:
  // Starts `threads` worker threads (>= 1).
  explicit PiecePool(size_t threads);
  ~PiecePool();  // finishes queued work, then joins
  PiecePool(const PiecePool&) = delete;
  PiecePool& operator=(const PiecePool&) = delete;

  // Runs fn(0) .. fn(n - 1), at most threads() + 1 at a time, and returns the first error (by
  // index) once all have finished.
  absl::Status Run(size_t n, const std::function<absl::Status(size_t)>& fn);
  size_t threads() const { return workers_.size(); }

  // The pool every VDI device shares (16 threads, started on first use).
  static PiecePool& Shared();

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_PIECE_POOL_H_
