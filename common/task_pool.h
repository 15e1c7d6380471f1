// TaskPool: a fixed set of threads that run submitted tasks, oldest first. For work that may
// block (a device call, a fetch from the data nodes) and must not hold up the thread that
// received it.
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_COMMON_TASK_POOL_H_
#define RINGCACHE_COMMON_TASK_POOL_H_

#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace ringcache {

class TaskPool {
 public:
  explicit TaskPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~TaskPool() { Shutdown(); }
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  void Submit(absl::AnyInvocable<void()> task) {
    absl::MutexLock l(&mu_);
    queue_.push_back(std::move(task));
  }

  // Runs what is queued, then joins the threads. Idempotent; call from outside the pool.
  void Shutdown() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Loop() {
    while (true) {
      absl::AnyInvocable<void()> task;
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]()
                         ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stop_; };
        mu_.Await(absl::Condition(&ready));
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_TASK_POOL_H_
