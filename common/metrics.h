// A small Prometheus metrics registry: counters, gauges, histograms and callback gauges, with
// labels, rendered in the Prometheus text exposition format (version 0.0.4). prometheus-cpp is not
// packaged by Debian, so ringcache carries this one.
//
// Thread-safety: Registry is thread-safe. Metric handles (Counter*, Gauge*, Histogram*) are owned by
// the registry, live as long as it, and are updated lock-free with atomics from any thread.
#ifndef RINGCACHE_COMMON_METRICS_H_
#define RINGCACHE_COMMON_METRICS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringcache::metrics {

// Label pairs, e.g. {{"vdi", "demo"}, {"op", "read"}}. Order is irrelevant; they are sorted.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Inc(double v = 1.0) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // REQUIRES: `bounds` strictly increasing (upper bounds of the finite buckets).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Returns the non-cumulative count of bucket i (i == bounds().size() is +Inf).
  uint64_t bucket_count(size_t i) const { return counts_[i].load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0.0};
};

// Returns latency buckets in seconds from 25 µs to ~13 s, doubling.
std::vector<double> LatencyBuckets();

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each getter returns the child with `labels` of family `name`, creating both on first use.
  // REQUIRES: `name` is a valid metric name; a name is used with one type only (checked: a
  // mismatch aborts in debug and returns a detached metric in release, never a crash).
  Counter* GetCounter(const std::string& name, const std::string& help, Labels labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, Labels labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help, Labels labels = {},
                          std::vector<double> bounds = LatencyBuckets());
  // Registers a gauge whose value is read from `fn` at render time. `fn` must stay callable for
  // the registry's life (or until the registry is destroyed) and must not call back into it.
  void AddCallbackGauge(const std::string& name, const std::string& help, Labels labels,
                        std::function<double()> fn);

  // Registers a counter whose value is read from `fn` at render time (same contract as above).
  void AddCallbackCounter(const std::string& name, const std::string& help, Labels labels,
                          std::function<double()> fn);

  // Returns every family in the text exposition format.
  std::string Render() const;

  // Returns the process-wide default registry.
  static Registry* Default();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Child {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> callback;
  };
  struct Family {
    std::string help;
    Type type;
    std::map<Labels, std::unique_ptr<Child>> children;
  };
  Child* GetChild(const std::string& name, const std::string& help, Type type, Labels labels)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Child>> detached_ ABSL_GUARDED_BY(mu_);
};

// Returns whether `name` matches [a-zA-Z_:][a-zA-Z0-9_:]*.
bool IsValidMetricName(const std::string& name);

}  // namespace ringcache::metrics

#endif  // RINGCACHE_COMMON_METRICS_H_
