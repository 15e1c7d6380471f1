#include "common/daemon.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/config.h"
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

absl::StatusOr<int> MetricsServer::Start(metrics::Registry* registry, const std::string& listen,
                                         const std::string& web_config) {
  std::string host;
  int port = 0;
  RC_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  // civetweb's listening_ports syntax: "host:port", "[v6]:port".
  const std::string bind = host.find(':') != std::string::npos
                               ? absl::StrCat("[", host, "]:", port)
                               : absl::StrCat(host, ":", port);
  std::vector<std::string> options = {"listening_ports", bind, "num_threads", "2"};
  std::string combined;  // key + certificate for civetweb, removed once it has read them
  if (!web_config.empty()) {
    RC_ASSIGN_OR_RETURN(options, MetricsTlsOptions(web_config, bind, &combined));
  }
  auto forget_combined = [&combined] {
    if (combined.empty()) return;
    std::remove(combined.c_str());
    rmdir(combined.substr(0, combined.rfind('/')).c_str());
  };
  metrics::AddProcessMetrics(registry);
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(options);
  } catch (const std::exception& e) {
    forget_combined();
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen,
                                               web_config.empty() ? "" : " over TLS", ": ",
                                               e.what()));
  }
  forget_combined();
  exposer_->RegisterCollectable(registry->collectable(), "/metrics");
  health_ = std::make_shared<HealthCollectable>();
  exposer_->RegisterCollectable(health_, "/healthz");
  const std::vector<int> ports = exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics: no port for ", listen));
  return ports.front();
}

void MetricsServer::Stop() { exposer_.reset(); }

absl::StatusOr<int> ServeMetrics(MetricsServer* http, metrics::Registry* registry,
                                 const std::string& listen, const std::string& web_config) {
  return http->Start(registry, listen, web_config);
}

absl::StatusOr<std::vector<std::string>> MetricsTlsOptions(const std::string& web_config,
                                                           const std::string& bind,
                                                           std::string* combined_pem) {
  absl::StatusOr<YAML::Node> doc = LoadYamlFile(web_config);
  if (!doc.ok()) return doc.status();
  auto bad = [&web_config](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("metrics web config ", web_config, ": ", what));
  };
  std::map<std::string, std::string> tls;
  for (const auto& top : *doc) {
    const std::string key = top.first.as<std::string>();
    if (key != "tls_server_config") return bad("unknown key '" + key + "'");
    if (!top.second.IsMap()) return bad("tls_server_config must be a mapping");
    for (const auto& kv : top.second) {
      const std::string k = kv.first.as<std::string>();
      if (k != "cert_file" && k != "key_file" && k != "client_ca_file" &&
          k != "client_auth_type" && k != "min_version") {
        return bad("unknown key 'tls_server_config." + k + "'");
      }
      if (!kv.second.IsScalar()) return bad("tls_server_config." + k + " must be a string");
      tls[k] = kv.second.as<std::string>();
    }
  }
  if (tls["cert_file"].empty() || tls["key_file"].empty()) {
    return bad("tls_server_config needs cert_file and key_file");
  }
  const std::string auth = tls.count("client_auth_type") ? tls["client_auth_type"]
                                                         : "NoClientCert";
  std::string verify;
  if (auth == "NoClientCert") {
    verify = "no";
  } else if (auth == "RequireAndVerifyClientCert" || auth == "RequireAnyClientCert") {
    verify = "yes";
  } else if (auth == "VerifyClientCertIfGiven" || auth == "RequestClientCert") {
    verify = "optional";
  } else {
    return bad("client_auth_type '" + auth + "' is not one of NoClientCert, RequestClientCert, "
               "RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert");
  }
  if (verify != "no" && tls["client_ca_file"].empty()) {
    return bad("client_auth_type " + auth + " needs client_ca_file");
  }
  const std::string min = tls.count("min_version") ? tls["min_version"] : "TLS12";
  if (min != "TLS12" && min != "TLS13") return bad("min_version must be TLS12 or TLS13");
  absl::StatusOr<std::string> cert = ReadSmallFile(tls["cert_file"]);
  if (!cert.ok()) return bad(std::string(cert.status().message()));
  absl::StatusOr<std::string> key = ReadSmallFile(tls["key_file"]);
  if (!key.ok()) return bad(std::string(key.status().message()));
  // civetweb reads key and certificate from one file: a private one, removed after start-up.
  char dir[] = "/tmp/ringcache-metrics-XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::UnavailableError("metrics TLS: mkdtemp failed");
  *combined_pem = std::string(dir) + "/server.pem";
  {
    std::ofstream out(*combined_pem, std::ios::trunc);
    if (!(out << *key << "\n" << *cert)) {
      return absl::UnavailableError("metrics TLS: cannot write " + *combined_pem);
    }
  }
  std::vector<std::string> options = {"listening_ports", bind + "s",
                                      "num_threads", "2",
                                      "ssl_certificate", *combined_pem,
                                      "ssl_protocol_version", min == "TLS13" ? "5" : "4",
                                      "ssl_verify_peer", verify};
  if (!tls["client_ca_file"].empty()) {
    options.insert(options.end(), {"ssl_ca_file", tls["client_ca_file"]});
  }
  return options;
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
