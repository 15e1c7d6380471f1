#include "gateway/piece_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace ringcache::gateway {
namespace {

// One Run: the pieces are handed out by index to whoever asks (pool threads and the caller).
struct Batch {
  Batch(size_t n, const std::function<absl::Status(size_t)>& f) : fn(f), results(n) {}
  const std::function<absl::Status(size_t)>& fn;  // outlives the batch's pieces (Run waits)
  std::vector<absl::Status> results;
  std::atomic<size_t> next{0};
  absl::Mutex mu;
  size_t done ABSL_GUARDED_BY(mu) = 0;

  // Runs pieces until none is left to take.
  void Work() {
    for (size_t i; (i = next.fetch_add(1)) < results.size();) {
      results[i] = fn(i);
      absl::MutexLock l(&mu);
      ++done;
    }
  }
};

}  // namespace

PiecePool::PiecePool(size_t threads) {
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    workers_.emplace_back([this] { Loop(); });
  }
}

PiecePool::~PiecePool() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  for (auto& t : workers_) t.join();
}

void PiecePool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

absl::Status PiecePool::Run(size_t n, const std::function<absl::Status(size_t)>& fn) {
  if (n == 0) return absl::OkStatus();
  if (n == 1) return fn(0);
  auto batch = std::make_shared<Batch>(n, fn);
  {
    // One helper task per piece beyond the caller's, at most one per pool thread: a helper that
    // starts after every piece was taken returns at once.
    absl::MutexLock l(&mu_);
    const size_t helpers = std::min(n - 1, workers_.size());
    for (size_t i = 0; i < helpers; ++i) queue_.push_back([batch] { batch->Work(); });
  }
  batch->Work();
  {
    absl::MutexLock l(&batch->mu);
    auto all_done = [&b = *batch]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu) {
      return b.done == b.results.size();
    };
    batch->mu.Await(absl::Condition(&all_done));
  }
  for (const absl::Status& s : batch->results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

PiecePool& PiecePool::Shared() {
  static PiecePool* pool = new PiecePool(16);  // never destroyed: used until exit
  return *pool;
}

}  // namespace ringcache::gateway
