// Ownership: whether this cache node may act as the owner of its objects, kept in a small state
// state file (<state base>.owner: beside the SSD file, or in the node's state directory,
// CacheNodeConfig::StateBase) so it survives a restart, even after kill -9.
//
// A node that lost its objects (its lease ran out, it was removed while dead, or a data node
// refused one of its writes as older than what another owner wrote) is *quarantined*: it serves
// no block I/O, destages, reclaims, relogs and repairs nothing, until the gateway re-admits it at
// the current cache ring epoch — after its dirty blocks were settled (destaged, or its log
// replayed) and with every cached block dropped (DropBlocks(all)). Cluster mode also starts
// quarantined when the previous run of this node held an etcd lease: that lease is gone, so its
// objects may have been given away while it was down (docs/durability.md, fencing protocol).
//
// The file also keeps the highest cache ring epoch the node has seen, so a restarted node never
// stamps a write with an epoch older than one it already used (fencing tokens are ordered by
// epoch first).
//
// It keeps the highest coordinator term a control step carried too (proto ControlFence), so a
// coordinator that lost its election cannot drop or hand over this node's blocks after its
// successor spoke to the node, even across a restart of the node.
//
// File format (text, replaced atomically): "RCOWNER1\n" then "quarantined <0|1>\n",
// "epoch <n>\n", "lease <n>\n", "reason <text>\n", and "term <n>\n" once a term was seen.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_CACHENODE_OWNERSHIP_H_
#define RINGCACHE_CACHENODE_OWNERSHIP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ringcache::cachenode {

class Ownership {
 public:
  // Loads the state of the node whose state files are named after `ssd_path` (its StateBase; a
  // missing file: admitted, epoch 0).
  // An unreadable file is an error naming it: guessing could let a node that lost its objects
  // write over their new owner's data.
  static absl::StatusOr<std::unique_ptr<Ownership>> Load(const std::string& ssd_path);
  static std::string PathFor(const std::string& ssd_path) { return ssd_path + ".owner"; }

  bool quarantined() const { return quarantined_.load(); }
  // OK, or kFenced naming why the node must not act as owner.
  absl::Status Check() const;
  std::string reason() const;
  uint64_t epoch() const { return epoch_.load(); }

  // Marks the node quarantined (persisted before it returns; logged once per quarantine).
  absl::Status Quarantine(const std::string& reason);
  // Lifts the quarantine at `epoch` (0: keep the epoch seen so far).
  absl::Status Readmit(uint64_t epoch);
  // Raises the highest epoch seen; persisted when it grows.
  absl::Status ObserveEpoch(uint64_t epoch);
  // Control steps (DropBlocks, a handoff flush, RelogRecords): raises the highest coordinator
  // term seen (persisted) and returns OK, or kStaleTerm for an older `term`. Term 0 (not a
  // coordinator's step) always passes.
  absl::Status ObserveTerm(uint64_t term);
  uint64_t term() const { return term_.load(); }
  // Cluster mode: the etcd lease this run registered under (0 at a clean shutdown), and the one
  // the previous run left behind.
  absl::Status NoteLease(int64_t lease);
  int64_t lease() const;

 private:
  explicit Ownership(std::string path) : path_(std::move(path)) {}
  absl::Status SaveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  std::atomic<bool> quarantined_{false};
  std::atomic<uint64_t> epoch_{0};
  std::atomic<uint64_t> term_{0};
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringcache::cachenode

#endif  // RINGCACHE_CACHENODE_OWNERSHIP_H_
