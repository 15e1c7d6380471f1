#include "common/daemon.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "prometheus/exposer.h"

namespace ringcache {
namespace {

sigset_t TermSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  return s;
}

}  // namespace

void InitDaemonProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  BlockTerminationSignals();
}

void BlockTerminationSignals() {
  sigset_t s = TermSignals();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int WaitForTerminationSignal() {
  sigset_t s = TermSignals();
  int sig = 0;
  sigwait(&s, &sig);
  return sig;
}

namespace {

// What /healthz serves: one gauge, 1 while the process answers.
class HealthCollectable : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily f;
    f.name = "ringcache_healthy";
    f.help = "1 while the daemon serves.";
    f.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric m;
    m.gauge.value = 1;
    f.metric.push_back(m);
    return {f};
  }
};

}  // namespace

MetricsServer::MetricsServer() = default;
MetricsServer::~MetricsServer() { Stop(); }

absl::StatusOr<int> MetricsServer::Start(metrics::Registry* registry, const std::string& listen) {
  std::string host;
  int port = 0;
  RC_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  metrics::AddProcessMetrics(registry);
  try {
    // civetweb's listening_ports syntax: "host:port", "[v6]:port".
    const std::string bind = host.find(':') != std::string::npos
                                 ? absl::StrCat("[", host, "]:", port)
                                 : absl::StrCat(host, ":", port);
    exposer_ = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry->collectable(), "/metrics");
  health_ = std::make_shared<HealthCollectable>();
  exposer_->RegisterCollectable(health_, "/healthz");
  const std::vector<int> ports = exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics: no port for ", listen));
  return ports.front();
}

void MetricsServer::Stop() { exposer_.reset(); }

absl::StatusOr<int> ServeMetrics(MetricsServer* http, metrics::Registry* registry,
                                 const std::string& listen) {
  return http->Start(registry, listen);
}

absl::Status WriteReadyFile(const std::string& path, const std::map<std::string, int>& ports) {
  if (path.empty()) return absl::OkStatus();
  std::string json = "{";
  for (const auto& [k, v] : ports) absl::StrAppend(&json, "\"", k, "\":", v, ",");
  absl::StrAppend(&json, "\"pid\":", getpid(), "}\n");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << json)) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ready file ", path));
  }
  return absl::OkStatus();
}

}  // namespace ringcache
