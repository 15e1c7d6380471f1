// Prometheus text exposition for the metrics registry.
#include "common/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace ringcache::metrics {
namespace {

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Renders {a="x",b="y"} with `extra` appended (for histogram "le"); empty labels render nothing.
std::string FormatLabels(const Labels& labels, const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::string& k, const std::string& v) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, k, "=\"", EscapeLabelValue(v), "\"");
  };
  for (const auto& [k, v] : labels) add(k, v);
  if (extra != nullptr) add(extra->first, extra->second);
  out += "}";
  return out;
}

}  // namespace

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

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::Observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<double> LatencyBuckets() {
  std::vector<double> b;
  for (double v = 25e-6; v < 15.0; v *= 2) b.push_back(v);
  return b;
}

Registry* Registry::Default() {
  static Registry* const r = new Registry();
  return r;
}

Registry::Child* Registry::GetChild(const std::string& name, const std::string& help, Type type,
                                    Labels labels) {
  std::sort(labels.begin(), labels.end());
  const bool valid = IsValidMetricName(name);
  assert(valid && "invalid metric name");
  auto [it, inserted] = families_.try_emplace(name);
  Family& fam = it->second;
  if (inserted) {
    fam.help = help;
    fam.type = type;
  }
  if (!valid || fam.type != type) {
    assert(false && "metric registered twice with different types");
    detached_.push_back(std::make_unique<Child>());
    return detached_.back().get();
  }
  auto& slot = fam.children[labels];
  if (!slot) {
    slot = std::make_unique<Child>();
    slot->labels = std::move(labels);
  }
  return slot.get();
}

Counter* Registry::GetCounter(const std::string& name, const std::string& help, Labels labels) {
  absl::MutexLock l(&mu_);
  Child* c = GetChild(name, help, Type::kCounter, std::move(labels));
  if (!c->counter) c->counter = std::make_unique<Counter>();  // detached if a callback owns it
  return c->counter.get();
}

Gauge* Registry::GetGauge(const std::string& name, const std::string& help, Labels labels) {
  absl::MutexLock l(&mu_);
  Child* c = GetChild(name, help, Type::kGauge, std::move(labels));
  if (!c->gauge && !c->callback) c->gauge = std::make_unique<Gauge>();
  if (!c->gauge) c->gauge = std::make_unique<Gauge>();  // callback child: detached handle
  return c->gauge.get();
}

Histogram* Registry::GetHistogram(const std::string& name, const std::string& help, Labels labels,
                                  std::vector<double> bounds) {
  absl::MutexLock l(&mu_);
  Child* c = GetChild(name, help, Type::kHistogram, std::move(labels));
  if (!c->histogram) c->histogram = std::make_unique<Histogram>(std::move(bounds));
  return c->histogram.get();
}

void Registry::AddCallbackGauge(const std::string& name, const std::string& help, Labels labels,
                                std::function<double()> fn) {
  absl::MutexLock l(&mu_);
  Child* c = GetChild(name, help, Type::kGauge, std::move(labels));
  c->callback = std::move(fn);
  c->gauge.reset();
}

void Registry::AddCallbackCounter(const std::string& name, const std::string& help,
                                  Labels labels, std::function<double()> fn) {
  absl::MutexLock l(&mu_);
  Child* c = GetChild(name, help, Type::kCounter, std::move(labels));
  c->callback = std::move(fn);
}

std::string Registry::Render() const {
  // Snapshot the families under the lock, then format (and call callbacks) without it: callbacks
  // take other components' locks, and those components register metrics while holding them.
  struct Item {
    const std::string* name;
    const Family* family;
    const Child* child;
    std::function<double()> callback;
  };
  std::vector<Item> items;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [name, fam] : families_) {
      for (const auto& [labels, child] : fam.children) {
        items.push_back({&name, &fam, child.get(), child->callback});
      }
    }
  }
  // Families and children are never removed, so the pointers stay valid.
  std::string out;
  const std::string* last = nullptr;
  for (const Item& it : items) {
    const std::string& name = *it.name;
    const Family& fam = *it.family;
    if (last != it.name) {
      const char* type = fam.type == Type::kCounter  ? "counter"
                         : fam.type == Type::kGauge ? "gauge"
                                                    : "histogram";
      absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(fam.help), "\n");
      absl::StrAppend(&out, "# TYPE ", name, " ", type, "\n");
      last = it.name;
    }
    const Labels& labels = it.child->labels;
    const std::string ls = FormatLabels(labels, nullptr);
    switch (fam.type) {
      case Type::kCounter:
      case Type::kGauge: {
        double v = 0;
        if (it.callback) {
          v = it.callback();
        } else if (it.child->counter) {
          v = it.child->counter->value();
        } else if (it.child->gauge) {
          v = it.child->gauge->value();
        }
        absl::StrAppend(&out, name, ls, " ", FormatValue(v), "\n");
        break;
      }
      case Type::kHistogram: {
        const Histogram& h = *it.child->histogram;
        uint64_t cumulative = 0;
        for (size_t i = 0; i <= h.bounds().size(); ++i) {
          cumulative += h.bucket_count(i);
          const std::pair<std::string, std::string> le{
              "le", i < h.bounds().size() ? FormatValue(h.bounds()[i]) : "+Inf"};
          absl::StrAppend(&out, name, "_bucket", FormatLabels(labels, &le), " ", cumulative,
                          "\n");
        }
        absl::StrAppend(&out, name, "_sum", ls, " ", FormatValue(h.sum()), "\n");
        absl::StrAppend(&out, name, "_count", ls, " ", cumulative, "\n");
        break;
      }
    }
  }
  return out;
}

}  // namespace ringcache::metrics
