// RingChange: the pure transition core of one cache ring change — a cache node's removal or its
// join — as a state machine with no I/O and no clock (docs/design.md §7, "The control plane").
//
// The coordinator's router is its executor: it asks next() for the step to take, carries it out
// (publishing a state in etcd, waiting for requests, settling a node, handing objects over),
// and reports the result. The core decides everything else: whether the change may start, the
// states to publish and their epochs, when to retry and when to stop (a node refused a step of
// an ended term, or the term itself ended), and the ring the change leaves behind. The
// simulator (coordinator/sim) drives the same core against a simulated cluster with crashes,
// pauses, partitions and coordinator changes at every step.
//
// Steps, in order:
//   removal: kPublish(start) -> kDrain -> kSettle [-> kPause -> kSettle]... -> kPublishOutcome
//   join:    kPublish(start) -> kDrain -> kHandoff [-> kPause -> kHandoff]... -> kPublishOutcome
//   reweight: as a join
// then kDone. The start state holds the node in `removing` (its requests wait), `joining`
// (requests for the objects that move to it wait) or `reweighting` (requests for the objects
// that move to or from it wait) at a new epoch; the outcome takes the node out (settled), in
// (handed over) or to its new weight (handed over), or back to where it was (attempts ran out),
// at another new epoch. A failed start publish ends the change at once with nothing changed; an outcome that
// cannot be published (the term ended) ends it with kFailedPrecondition: the next coordinator
// decides the change again from the published state.
//
// Thread-safety: a value type; not thread-safe.
#ifndef RINGCACHE_COORDINATOR_RING_CHANGE_H_
#define RINGCACHE_COORDINATOR_RING_CHANGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "membership/cache_ring_state.h"

namespace ringcache::coordinator {

using membership::CacheRingState;

struct Step {
  enum Kind {
    kPublish,         // publish `state` (the change begins); an error ends the change
    kDrain,           // wait until the requests the start state holds have finished
    kSettle,          // removal: leave none of the node's dirty data behind (destage if it
                      // answers; else seal its log and replay it, at `state.epoch`)
    kHandoff,         // join, reweight: members destage and drop what moves; a joiner drops
                      // all and is registered; the result is one status for the whole attempt
    kPause,           // wait `wait` before the next attempt
    kPublishOutcome,  // publish `state` (the change ends); report false if the term ended
    kDone,
  };
  Kind kind = kDone;
  CacheRingState state;  // kPublish, kSettle (the epoch to seal at), kPublishOutcome
  absl::Duration wait;   // kPause
  int attempt = 0;       // kSettle, kHandoff: 1, 2, ...
};

const char* StepName(Step::Kind kind);

class RingChange {
 public:
  enum class Kind { kRemoval, kJoin, kReweight };

  // Starts the change of `node` from the router's `current` state, whose ring has `members`
  // (every cache node it knows, removed or not). Fails with nothing started when the change
  // cannot begin: kNotFound (removal or reweight of a node not in the ring), kAlreadyExists
  // (join of a node in it), kInvalidArgument (a reweight's weight is not positive and finite),
  // kFailedPrecondition (another change is under way, or the last node would leave).
  // `attempts` bounds the settle or handoff attempts, `retry_pause` separates them. `weight`:
  // a reweight's new weight and the capacity it stands for (its id is ignored).
  static absl::StatusOr<RingChange> Begin(Kind kind, const CacheRingState& current,
                                          const std::vector<uint32_t>& members, uint32_t node,
                                          int attempts, absl::Duration retry_pause,
                                          CacheRingState::Weight weight = {});

  Kind kind() const { return kind_; }
  uint32_t node() const { return node_; }
  const CacheRingState& start() const { return start_; }
  // The step to take now.
  Step next() const;
  // Reports how the step next() returned went. For kPublishOutcome, `result` is OK when the
  // outcome was published (or there is no publisher: static mode) and an error when the term
  // ended first. `term_ended`: this router lost its term as coordinator meanwhile.
  void Report(const absl::Status& result, bool term_ended = false);
  // The state the outcome publishes, built from the router's state at that moment (`now`: its
  // epoch may have grown meanwhile): the node out, in or at its new weight if the change
  // succeeded, neither removing, joining nor reweighting, at a new epoch.
  CacheRingState Outcome(const CacheRingState& now) const;
  bool done() const { return phase_ == Phase::kDone; }
  // Once done: OK if the node left, joined or took its weight; the error otherwise.
  const absl::Status& status() const { return status_; }
  // True once the settle or handoff succeeded (the outcome takes the change's effect).
  bool succeeded() const { return succeeded_; }

  // True when a failed step must not be retried: the term ended (the next coordinator decides
  // the change again), or a node refused it as a step of an ended term (kStaleTerm).
  static bool Refused(const absl::Status& s, bool term_ended);

 private:
  enum class Phase { kStart, kDrain, kWork, kPause, kOutcome, kDone };
  RingChange() = default;

  Kind kind_ = Kind::kRemoval;
  uint32_t node_ = 0;
  int attempts_ = 1;
  absl::Duration retry_pause_;
  CacheRingState start_;
  Phase phase_ = Phase::kStart;
  int attempt_ = 0;
  bool succeeded_ = false;
  bool outcome_published_ = false;
  absl::Status work_status_;  // the last settle or handoff result
  absl::Status status_;
};

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_COORDINATOR_RING_CHANGE_H_
