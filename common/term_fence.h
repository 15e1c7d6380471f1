// The coordinator-term check every node makes on a mutating control step (docs/design.md,
// "Control steps are fenced"): a step of an older term than the newest one the node has seen is
// refused with kStaleTerm; a newer one is kept durably before it is taken. Cache nodes keep the
// term in their ownership file, data nodes in their store.
//
// Thread-safety: thread-safe when every raise of `held` goes through ObserveTerm with the same
// `mu`.
#ifndef RINGCACHE_COMMON_TERM_FENCE_H_
#define RINGCACHE_COMMON_TERM_FENCE_H_

#include <atomic>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/errors.h"

namespace ringcache {

// Checks `term` against `held` (the newest term seen; `node` names the node kind in the error).
// Term 0 (no coordinator: static mode, a node's own steps) always passes. A newer term is handed
// to `keep` with `mu` held and becomes `held` only if keep succeeds.
inline absl::Status ObserveTerm(uint64_t term, const char* node, absl::Mutex* mu,
                                std::atomic<uint64_t>* held,
                                const std::function<absl::Status(uint64_t term)>& keep) {
  if (term == 0 || term == held->load()) return absl::OkStatus();
  absl::MutexLock l(mu);
  const uint64_t seen = held->load();
  if (term < seen) {
    return TypedError(ErrorKind::kStaleTerm,
                      absl::StrCat("stale coordinator term ", term, ": this ", node,
                                   " has seen term ", seen, " (a newer coordinator took over)"));
  }
  if (term == seen) return absl::OkStatus();
  if (absl::Status s = keep(term); !s.ok()) return s;
  held->store(term);
  return absl::OkStatus();
}

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_TERM_FENCE_H_
