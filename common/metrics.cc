// The metrics registry over prometheus-cpp, and the process_* collector.
#include "common/metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "prometheus/text_serializer.h"

namespace ringcache::metrics {
namespace {

prometheus::Labels ToPrometheus(const Labels& labels) {
  return prometheus::Labels(labels.begin(), labels.end());
}

bool HasLabels(const Labels& labels, const Labels& match) {
  for (const auto& m : match) {
    if (std::find(labels.begin(), labels.end(), m) == labels.end()) return false;
  }
  return true;
}

void Complain(const std::string& name, const char* why) {
  std::fprintf(stderr, "metrics: %s: %s; the series is not exported\n", name.c_str(), why);
}

}  // namespace

// The Collectable the exposer scrapes: prometheus-cpp's registry plus the callback families. The
// callbacks are called without the registry's lock: they take other components' locks, and those
// components register metrics while holding them.
class Registry::Collector : public prometheus::Collectable {
 public:
  explicit Collector(const Registry* owner) : owner_(owner) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out = owner_->registry_->Collect();
    struct Snapshot {
      std::string name, help;
      Type type;
      std::vector<std::pair<Labels, std::function<double()>>> series;
      std::function<Samples()> collector;
    };
    std::vector<Snapshot> snap;
    {
      absl::MutexLock l(&owner_->mu_);
      for (const auto& [name, fam] : owner_->callbacks_) {
        Snapshot s{name, fam.help, fam.type, {}, fam.collector};
        for (const auto& [labels, fn] : fam.series) s.series.emplace_back(labels, fn);
        snap.push_back(std::move(s));
      }
    }
    for (Snapshot& s : snap) {
      Samples collected;
      if (s.collector) collected = s.collector();
      for (auto& [labels, v] : collected) {
        std::sort(labels.begin(), labels.end());
        s.series.emplace_back(labels, [v = v] { return v; });
      }
      if (s.series.empty()) continue;
      prometheus::MetricFamily f;
      f.name = s.name;
      f.help = s.help;
      f.type = s.type == Type::kCounter ? prometheus::MetricType::Counter
                                        : prometheus::MetricType::Gauge;
      for (const auto& [labels, fn] : s.series) {
        prometheus::ClientMetric m;
        for (const auto& [k, v] : labels) m.label.push_back({k, v});
        const double v = fn();
        if (s.type == Type::kCounter) {
          m.counter.value = v;
        } else {
          m.gauge.value = v;
        }
        f.metric.push_back(std::move(m));
      }
      out.push_back(std::move(f));
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    return out;
  }

 private:
  const Registry* const owner_;
};

bool IsValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

std::vector<double> LatencyBuckets() {
  std::vector<double> b;
  for (double v = 25e-6; v < 15.0; v *= 2) b.push_back(v);
  return b;
}

Registry::Registry()
    : registry_(std::make_shared<prometheus::Registry>()),
      collectable_(std::make_shared<Collector>(this)) {}

Registry::~Registry() = default;

Registry* Registry::Default() {
  static Registry* const r = new Registry();
  return r;
}

template <typename T>
T* Registry::Detached(std::unique_ptr<T> m) {
  std::shared_ptr<T> owned(std::move(m));
  detached_.push_back(owned);
  return owned.get();
}

Registry::HandleFamily* Registry::Handles(const std::string& name, const std::string& help,
                                          Type type) {
  if (!IsValidMetricName(name)) {
    Complain(name, "invalid metric name");
    return nullptr;
  }
  if (callbacks_.count(name) != 0) {
    Complain(name, "the name is taken by a callback metric");
    return nullptr;
  }
  auto [it, inserted] = handles_.try_emplace(name);
  HandleFamily& f = it->second;
  if (inserted) {
    f.type = type;
    switch (type) {
      case Type::kCounter:
        f.counters = &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
        break;
      case Type::kGauge:
        f.gauges = &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
        break;
      case Type::kHistogram:
        f.histograms = &prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
        break;
    }
  } else if (f.type != type) {
    Complain(name, "the name is registered with another type");
    return nullptr;
  }
  return &f;
}

Counter* Registry::GetCounter(const std::string& name, const std::string& help, Labels labels) {
  std::sort(labels.begin(), labels.end());
  absl::MutexLock l(&mu_);
  HandleFamily* f = Handles(name, help, Type::kCounter);
  if (f == nullptr) return Detached(std::make_unique<Counter>());
  void*& slot = f->series[labels];
  if (slot == nullptr) slot = &f->counters->Add(ToPrometheus(labels));
  return static_cast<Counter*>(slot);
}

Gauge* Registry::GetGauge(const std::string& name, const std::string& help, Labels labels) {
  std::sort(labels.begin(), labels.end());
  absl::MutexLock l(&mu_);
  HandleFamily* f = Handles(name, help, Type::kGauge);
  if (f == nullptr) return Detached(std::make_unique<Gauge>());
  void*& slot = f->series[labels];
  if (slot == nullptr) slot = &f->gauges->Add(ToPrometheus(labels));
  return static_cast<Gauge*>(slot);
}

Histogram* Registry::GetHistogram(const std::string& name, const std::string& help, Labels labels,
                                  std::vector<double> bounds) {
  std::sort(labels.begin(), labels.end());
  absl::MutexLock l(&mu_);
  HandleFamily* f = Handles(name, help, Type::kHistogram);
  if (f == nullptr) return Detached(std::make_unique<Histogram>(bounds));
  void*& slot = f->series[labels];
  if (slot == nullptr) slot = &f->histograms->Add(ToPrometheus(labels), bounds);
  return static_cast<Histogram*>(slot);
}

void Registry::AddCallback(const std::string& name, const std::string& help, Type type,
                           Labels labels, std::function<double()> fn) {
  std::sort(labels.begin(), labels.end());
  absl::MutexLock l(&mu_);
  if (!IsValidMetricName(name)) return Complain(name, "invalid metric name");
  if (handles_.count(name) != 0) return Complain(name, "the name is taken by a handle metric");
  auto [it, inserted] = callbacks_.try_emplace(name);
  CallbackFamily& f = it->second;
  if (inserted) {
    f.type = type;
    f.help = help;
  } else if (f.type != type) {
    return Complain(name, "the name is registered with another type");
  }
  f.series[std::move(labels)] = std::move(fn);
}

void Registry::AddCallbackGauge(const std::string& name, const std::string& help, Labels labels,
                                std::function<double()> fn) {
  AddCallback(name, help, Type::kGauge, std::move(labels), std::move(fn));
}

void Registry::AddCallbackCounter(const std::string& name, const std::string& help,
                                  Labels labels, std::function<double()> fn) {
  AddCallback(name, help, Type::kCounter, std::move(labels), std::move(fn));
}

void Registry::AddGaugeCollector(const std::string& name, const std::string& help,
                                 std::function<Samples()> fn) {
  absl::MutexLock l(&mu_);
  if (!IsValidMetricName(name)) return Complain(name, "invalid metric name");
  if (handles_.count(name) != 0) return Complain(name, "the name is taken by a handle metric");
  auto [it, inserted] = callbacks_.try_emplace(name);
  if (!inserted && (it->second.type != Type::kGauge || !it->second.series.empty())) {
    return Complain(name, "the name is registered as another metric");
  }
  it->second.type = Type::kGauge;
  it->second.help = help;
  it->second.collector = std::move(fn);
}

size_t Registry::RemoveSeries(const Labels& match) {
  std::vector<std::function<double()>> dropped;  // destroyed after the lock is released
  size_t removed = 0;
  absl::MutexLock l(&mu_);
  for (auto& [name, f] : handles_) {
    for (auto it = f.series.begin(); it != f.series.end();) {
      if (!HasLabels(it->first, match)) {
        ++it;
        continue;
      }
      switch (f.type) {
        case Type::kCounter:
          f.counters->Remove(static_cast<Counter*>(it->second));
          break;
        case Type::kGauge:
          f.gauges->Remove(static_cast<Gauge*>(it->second));
          break;
        case Type::kHistogram:
          f.histograms->Remove(static_cast<Histogram*>(it->second));
          break;
      }
      it = f.series.erase(it);
      ++removed;
    }
  }
  for (auto& [name, f] : callbacks_) {
    for (auto it = f.series.begin(); it != f.series.end();) {
      if (!HasLabels(it->first, match)) {
        ++it;
        continue;
      }
      dropped.push_back(std::move(it->second));
      it = f.series.erase(it);
      ++removed;
    }
  }
  return removed;
}

std::string Registry::Render() const {
  return prometheus::TextSerializer().Serialize(collectable_->Collect());
}

// ---- process_* ------------------------------------------------------------------------------------

namespace {

// Fields of /proc/self/stat after the command name, 0-based from field 3 ("state").
struct ProcStat {
  double cpu_seconds = 0;
  double start_time = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
  double threads = 0;
};

double BootTime() {
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return std::stod(line.substr(6));
  }
  return 0;
}

ProcStat ReadProcStat() {
  ProcStat s;
  std::ifstream in("/proc/self/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = all.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return s;
  std::vector<std::string> f = absl::StrSplit(all.substr(close + 2), ' ', absl::SkipEmpty());
  if (f.size() < 22) return s;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // proc(5): utime 14, stime 15, num_threads 20, starttime 22, vsize 23, rss 24 (1-based).
  s.cpu_seconds = (std::stod(f[14 - 3]) + std::stod(f[15 - 3])) / tick;
  s.threads = std::stod(f[20 - 3]);
  s.start_time = BootTime() + std::stod(f[22 - 3]) / tick;
  s.virtual_bytes = std::stod(f[23 - 3]);
  s.resident_bytes = std::stod(f[24 - 3]) * page;
  return s;
}

double OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  double n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory stream's own descriptor
}

}  // namespace

void AddProcessMetrics(Registry* r) {
  r->AddCallbackCounter("process_cpu_seconds_total", "User and system CPU time spent, seconds.",
                        {}, [] { return ReadProcStat().cpu_seconds; });
  r->AddCallbackGauge("process_resident_memory_bytes", "Resident memory size in bytes.", {},
                      [] { return ReadProcStat().resident_bytes; });
  r->AddCallbackGauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", {},
                      [] { return ReadProcStat().virtual_bytes; });
  r->AddCallbackGauge("process_start_time_seconds",
                      "Start time of the process since the Unix epoch, seconds.", {},
                      [] { return ReadProcStat().start_time; });
  r->AddCallbackGauge("process_threads", "Threads of the process.", {},
                      [] { return ReadProcStat().threads; });
  r->AddCallbackGauge("process_open_fds", "Open file descriptors.", {}, [] { return OpenFds(); });
  r->AddCallbackGauge("process_max_fds", "Limit of open file descriptors (RLIMIT_NOFILE).", {},
                      [] {
                        rlimit rl{};
                        if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0.0;
                        return static_cast<double>(rl.rlim_cur);
                      });
}

}  // namespace ringcache::metrics
