#include "common/task_pool.h"

#include <algorithm>
#include <utility>

namespace ringcache {

TaskPool::TaskPool(Options options) : options_(std::move(options)) {
  absl::MutexLock l(&mu_);
  for (int i = 0; i < options_.threads; ++i) {
    std::thread t([this] { Loop(); });
    threads_.emplace(t.get_id(), std::move(t));
    ++alive_;
  }
}

void TaskPool::Submit(absl::AnyInvocable<void()> task) {
  absl::MutexLock l(&mu_);
  queue_.push_back({nullptr, std::move(task)});
  MaybeGrowLocked();
}

void TaskPool::Submit(const std::string& lane, absl::AnyInvocable<void()> task) {
  absl::MutexLock l(&mu_);
  auto it = lanes_.try_emplace(lane).first;
  Lane& ln = it->second;
  if (options_.lane_limit > 0 && ln.running >= options_.lane_limit) {
    ln.waiting.push_back(std::move(task));
    ++lane_waiting_;
    return;
  }
  ++ln.running;
  queue_.push_back({&it->first, std::move(task)});
  MaybeGrowLocked();
}

void TaskPool::MaybeGrowLocked() {
  for (std::thread::id id : ended_) {
    auto it = threads_.find(id);
    if (it != threads_.end()) {
      it->second.join();  // it has left Loop: returns at once
      threads_.erase(it);
    }
  }
  ended_.clear();
  const int max = std::max(options_.max_threads, options_.threads);
  if (stop_ || idle_ >= static_cast<int>(queue_.size()) || alive_ >= max) return;
  std::thread t([this] { Loop(); });
  threads_.emplace(t.get_id(), std::move(t));
  ++alive_;
}

void TaskPool::FinishLocked(const std::string* lane) {
  if (lane == nullptr) return;
  auto it = lanes_.find(*lane);
  Lane& ln = it->second;
  if (!ln.waiting.empty()) {  // its place goes to the lane's next task
    queue_.push_back({&it->first, std::move(ln.waiting.front())});
    ln.waiting.pop_front();
    --lane_waiting_;
    return;
  }
  if (--ln.running == 0) lanes_.erase(it);
}

void TaskPool::Loop() {
  mu_.Lock();
  while (true) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stop_; };
    ++idle_;
    const bool woke = mu_.AwaitWithTimeout(absl::Condition(&ready), options_.idle_exit);
    --idle_;
    if (queue_.empty()) {
      // Stopping with nothing queued (a lane's next task is queued by the thread that ran the
      // one before, which then takes it), or idle too long beyond the kept threads.
      if (stop_ || (!woke && alive_ > options_.threads)) break;
      continue;
    }
    Ready r = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    r.task();
    r.task = nullptr;  // what it holds goes before the lane moves on
    mu_.Lock();
    FinishLocked(r.lane);
  }
  --alive_;
  if (!stop_) ended_.push_back(std::this_thread::get_id());  // Shutdown joins the others
  mu_.Unlock();
}

void TaskPool::Shutdown() {
  absl::flat_hash_map<std::thread::id, std::thread> threads;
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  // Threads end once the queue is empty; a thread still running a task may queue its lane's
  // next one and run it, so join until none is left.
  while (true) {
    {
      absl::MutexLock l(&mu_);
      threads.swap(threads_);
      ended_.clear();
    }
    if (threads.empty()) return;
    for (auto& [id, t] : threads) t.join();
    threads.clear();
  }
}

int TaskPool::threads() const {
  absl::MutexLock l(&mu_);
  return alive_;
}

int TaskPool::lane_waiting() const {
  absl::MutexLock l(&mu_);
  return lane_waiting_;
}

}  // namespace ringcache
