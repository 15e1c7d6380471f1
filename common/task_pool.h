// TaskPool: threads that run submitted tasks, oldest first. For work that may block (a device
// call, a fetch from the data nodes) and must not hold up the thread that received it.
//
// Lanes keep one kind of work from taking every thread: a task submitted to a lane runs only
// while fewer than `lane_limit` tasks of that lane run; the others wait in the lane, not in the
// pool's queue. With `max_threads` above `threads` the pool starts another thread when a task
// is ready and no thread is idle (up to max_threads), and a thread beyond `threads` that stays
// idle for `idle_exit` ends. Together: tasks stuck on one thing (a hung cache node behind one
// VDI) hold at most lane_limit threads of their lane, and the other lanes still get threads.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_COMMON_TASK_POOL_H_
#define RINGCACHE_COMMON_TASK_POOL_H_

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringcache {

class TaskPool {
 public:
  struct Options {
    int threads = 32;      // started at once and kept
    int max_threads = 0;   // more started on demand up to this (0: `threads`, a fixed pool)
    int lane_limit = 0;    // tasks of one lane running at once (0: no limit)
    absl::Duration idle_exit = absl::Seconds(30);  // for threads beyond `threads`
  };
  explicit TaskPool(int threads) : TaskPool(Options{threads, 0, 0, absl::Seconds(30)}) {}
  explicit TaskPool(Options options);
  ~TaskPool() { Shutdown(); }
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // A task of no lane: queued for the next free thread.
  void Submit(absl::AnyInvocable<void()> task);
  // A task of `lane`: queued once fewer than lane_limit tasks of the lane run.
  void Submit(const std::string& lane, absl::AnyInvocable<void()> task);

  // Runs what is queued (lanes included), then joins the threads. Idempotent; call from outside
  // the pool.
  void Shutdown();

  int threads() const;       // threads alive now
  int lane_waiting() const;  // tasks waiting in lanes for their turn

 private:
  struct Ready {
    const std::string* lane = nullptr;  // key of lanes_ (stable: node-based), or null
    absl::AnyInvocable<void()> task;
  };
  struct Lane {
    int running = 0;  // tasks of the lane queued or running
    std::deque<absl::AnyInvocable<void()>> waiting;
  };
  void Loop();
  // Starts a thread when a task is ready, none is idle and the pool may grow; joins ended ones.
  void MaybeGrowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a task of `lane` ran: its next waiting task becomes ready, or the lane frees a place.
  void FinishLocked(const std::string* lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<Ready> queue_ ABSL_GUARDED_BY(mu_);
  // Lanes with tasks queued, running or waiting (node-based: Ready::lane points at a key).
  absl::node_hash_map<std::string, Lane> lanes_ ABSL_GUARDED_BY(mu_);
  int lane_waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int alive_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::thread::id, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> ended_ ABSL_GUARDED_BY(mu_);  // to join
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_TASK_POOL_H_
