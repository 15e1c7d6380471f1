// ringcache's metrics: a thin registry over prometheus-cpp (Debian's prometheus-cpp-dev). Counters,
// gauges and histograms are prometheus-cpp's own types; this layer adds what the daemons need on
// top of them:
//   - get-or-create by (name, labels) from any thread, so components register lazily;
//   - callback gauges and counters, read at scrape time from a component's own state;
//   - removal of every series that carries a label value (the series of a deleted VDI);
//   - one Collectable for the pull exposer (common/daemon.h ServeMetrics) that merges both.
//
// Thread-safety: Registry is thread-safe. Metric handles (Counter*, Gauge*, Histogram*) stay valid
// until the series is removed with RemoveSeries or the registry is destroyed; updates are
// prometheus-cpp's (atomics; a histogram takes a short lock).
#ifndef RINGCACHE_COMMON_METRICS_H_
#define RINGCACHE_COMMON_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace ringcache::metrics {

// Label pairs, e.g. {{"vdi", "demo"}, {"op", "read"}}. Order is irrelevant; they are sorted.
using Labels = std::vector<std::pair<std::string, std::string>>;

using Counter = prometheus::Counter;      // Increment(v), Value()
using Gauge = prometheus::Gauge;          // Set(v), Increment(v), Decrement(v), Value()
using Histogram = prometheus::Histogram;  // Observe(v), Collect()

// Returns latency buckets in seconds from 25 µs to ~13 s, doubling.
std::vector<double> LatencyBuckets();

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Each getter returns the series with `labels` of family `name`, creating both on first use.
  // A name is used with one type and one kind (handle or callback) only: a conflicting request is
  // logged and gets a detached metric that is never exported (never a crash).
  Counter* GetCounter(const std::string& name, const std::string& help, Labels labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, Labels labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help, Labels labels = {},
                          std::vector<double> bounds = LatencyBuckets());
  // Registers (or replaces) a gauge whose value is read from `fn` at scrape time. `fn` must stay
  // callable until the series is removed or the registry is destroyed, and must not call back
  // into the registry.
  void AddCallbackGauge(const std::string& name, const std::string& help, Labels labels,
                        std::function<double()> fn);
  // Registers (or replaces) a counter read from `fn` at scrape time (same contract as above).
  void AddCallbackCounter(const std::string& name, const std::string& help, Labels labels,
                          std::function<double()> fn);

  // Registers (or replaces) family `name` whose series are all produced by `fn` at scrape time:
  // for label sets that come and go (one series per member node and its state, say). Same
  // contract as the callbacks above.
  using Samples = std::vector<std::pair<Labels, double>>;
  void AddGaugeCollector(const std::string& name, const std::string& help,
                         std::function<Samples()> fn);

  // Removes every series, of every family, that carries all the labels of `match` (e.g.
  // {{"vdi", "gone"}}), so a deleted object's series leave /metrics. Handles to removed series
  // must not be used after. Returns how many series were removed.
  size_t RemoveSeries(const Labels& match);

  // Returns every family in the Prometheus text exposition format (prometheus-cpp's serializer).
  std::string Render() const;

  // Returns what the pull exposer scrapes: the handle families and the callback families, merged.
  std::shared_ptr<prometheus::Collectable> collectable() const { return collectable_; }

  // Returns the process-wide default registry.
  static Registry* Default();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  class Collector;
  struct HandleFamily {
    Type type;
    prometheus::Family<Counter>* counters = nullptr;
    prometheus::Family<Gauge>* gauges = nullptr;
    prometheus::Family<Histogram>* histograms = nullptr;
    std::map<Labels, void*> series;  // the prometheus-cpp metric of each label set
  };
  struct CallbackFamily {
    Type type;
    std::string help;
    std::map<Labels, std::function<double()>> series;
    std::function<Samples()> collector;  // or every series at once
  };
  // Returns the family `name` of `type`, creating it; null when `name` is taken otherwise.
  HandleFamily* Handles(const std::string& name, const std::string& help, Type type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddCallback(const std::string& name, const std::string& help, Type type, Labels labels,
                   std::function<double()> fn);
  template <typename T>
  T* Detached(std::unique_ptr<T> m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> collectable_;  // a Collector
  mutable absl::Mutex mu_;
  std::map<std::string, HandleFamily> handles_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, CallbackFamily> callbacks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<void>> detached_ ABSL_GUARDED_BY(mu_);
};

// Returns whether `name` matches [a-zA-Z_:][a-zA-Z0-9_:]*.
bool IsValidMetricName(const std::string& name);

// Registers the process_* metrics of the Prometheus client conventions, read from /proc/self at
// scrape time: process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds, process_start_time_seconds,
// and process_threads. Idempotent.
void AddProcessMetrics(Registry* registry);

}  // namespace ringcache::metrics

#endif  // RINGCACHE_COMMON_METRICS_H_
