#include "common/daemon.h"

#include <CivetServer.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/config.h"
#include "common/http_admin.h"
#include "common/socket.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "prometheus/exposer.h"

namespace ringcache {
namespace {

sigset_t TermSignals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGHUP);  // reload the TLS credentials (WaitForTerminationSignal)
  return s;
}

}  // namespace

int FailExit(const std::string& program, int code, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program.c_str(), message.c_str());
  return code;
}

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
  for (;;) {
    int sig = 0;
    sigwait(&s, &sig);
    if (sig != SIGHUP) return sig;
    // SIGHUP: a renewed certificate, a new CA bundle or revocation list in --tls-dir. New
    // handshakes use them; open connections keep theirs.
    absl::StatusOr<std::string> reloaded = tls::ReloadProcessIdentity();
    if (!reloaded.ok()) {
      spdlog::error("SIGHUP: {}", reloaded.status().ToString());
    } else if (reloaded->empty()) {
      spdlog::info("SIGHUP: no TLS credentials to reload (no --tls-dir)");
    } else {
      spdlog::info("SIGHUP: {}", *reloaded);
    }
  }
}

bool NotifySystemd(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const ssize_t sent =
      sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
             static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len));
  close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

struct SystemdNotifier::Watchdog {
  absl::Mutex mu;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::thread thread;
};

SystemdNotifier::SystemdNotifier() {
  if (!NotifySystemd("READY=1\nSTATUS=serving")) return;
  spdlog::info("told systemd: ready");
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  int64_t interval_us = 0;
  if (usec == nullptr || !absl::SimpleAtoi(usec, &interval_us) || interval_us <= 0) return;
  if (pid != nullptr && std::string(pid) != std::to_string(getpid())) return;  // another's
  watchdog_ = std::make_unique<Watchdog>();
  Watchdog* w = watchdog_.get();
  const absl::Duration every = absl::Microseconds(interval_us / 2);
  w->thread = std::thread([w, every] {
    absl::MutexLock l(&w->mu);
    auto stopped = [w]() ABSL_SHARED_LOCKS_REQUIRED(w->mu) { return w->stop; };
    while (!w->stop) {
      w->mu.Unlock();
      const std::string why = http_admin::NotReady();  // hangs if the daemon's state does
      NotifySystemd(why.empty() ? "WATCHDOG=1\nSTATUS=serving"
                                : "WATCHDOG=1\nSTATUS=not ready: " + why);
      w->mu.Lock();
      w->mu.AwaitWithTimeout(absl::Condition(&stopped), every);
    }
  });
}

SystemdNotifier::~SystemdNotifier() {
  if (watchdog_ != nullptr) {
    {
      absl::MutexLock l(&watchdog_->mu);
      watchdog_->stop = true;
    }
    watchdog_->thread.join();
  }
  NotifySystemd("STOPPING=1");
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
  std::shared_ptr<const tls::ServerContext> tls_context;
  if (!web_config.empty()) {
    RC_ASSIGN_OR_RETURN(tls_context, MetricsTlsContext(web_config));
    host = "127.0.0.1";  // the exposer serves the TLS front only
    port = 0;
  }
  metrics::AddProcessMetrics(registry);
  try {
    // civetweb's listening_ports syntax: "host:port", "[v6]:port".
    const std::string bind = host.find(':') != std::string::npos
                                 ? absl::StrCat("[", host, "]:", port)
                                 : absl::StrCat(host, ":", port);
    // civetweb asks http_admin first: /readyz and /loglevel are answered there.
    static const CivetCallbacks* const callbacks = [] {
      auto* c = new CivetCallbacks();
      c->begin_request = &http_admin::BeginRequest;
      return c;
    }();
    exposer_ = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/2, callbacks);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  exposer_->RegisterCollectable(registry->collectable(), "/metrics");
  health_ = std::make_shared<HealthCollectable>();
  exposer_->RegisterCollectable(health_, "/healthz");
  const std::vector<int> ports = exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics: no port for ", listen));
  knock_host_ = host.empty() || host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host;
  knock_port_ = ports.front();
  if (tls_context == nullptr) return ports.front();
  absl::StatusOr<std::unique_ptr<tls::TlsFront>> front =
      tls::TlsFront::Start(listen, tls_context, ports.front());
  if (!front.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics over TLS on ", listen, ": ", front.status().message()));
  }
  front_ = *std::move(front);
  return front_->port();
}

void MetricsServer::Stop() {
  front_.reset();
  if (exposer_ == nullptr) return;
  // civetweb's listener thread sees the stop only when its poll() returns: on a connection, or
  // after its 2 s quantum. Connections to the port while the exposer stops end that wait, so a
  // daemon stops in milliseconds instead of 2 s (every SIGTERM, every test that stops one).
  std::atomic<bool> stopped{false};
  std::thread knock([this, &stopped] {
    while (!stopped.load()) {
      absl::StatusOr<int> fd = DialTcp(knock_host_, knock_port_, absl::Milliseconds(100));
      if (fd.ok()) close(*fd);
      if (!stopped.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  exposer_.reset();
  stopped.store(true);
  knock.join();
}

absl::StatusOr<int> ServeMetrics(MetricsServer* http, metrics::Registry* registry,
                                 const std::string& listen, const std::string& web_config) {
  return http->Start(registry, listen, web_config);
}

absl::StatusOr<std::shared_ptr<const tls::ServerContext>> MetricsTlsContext(
    const std::string& web_config) {
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
      if (k != "cert_file" && k != "key_file" && k != "client_ca_file" && k != "client_auth_type" &&
          k != "min_version") {
        return bad("unknown key 'tls_server_config." + k + "'");
      }
      if (!kv.second.IsScalar()) return bad("tls_server_config." + k + " must be a string");
      tls[k] = kv.second.as<std::string>();
    }
  }
  if (tls["cert_file"].empty() || tls["key_file"].empty()) {
    return bad("tls_server_config needs cert_file and key_file");
  }
  const std::string auth = tls.count("client_auth_type") ? tls["client_auth_type"] : "NoClientCert";
  std::string verify;
  if (auth == "NoClientCert") {
    verify = "no";
  } else if (auth == "RequireAndVerifyClientCert" || auth == "RequireAnyClientCert") {
    verify = "yes";
  } else if (auth == "VerifyClientCertIfGiven" || auth == "RequestClientCert") {
    verify = "optional";
  } else {
    return bad("client_auth_type '" + auth +
               "' is not one of NoClientCert, RequestClientCert, "
               "RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert");
  }
  if (verify != "no" && tls["client_ca_file"].empty()) {
    return bad("client_auth_type " + auth + " needs client_ca_file");
  }
  const std::string min = tls.count("min_version") ? tls["min_version"] : "TLS12";
  if (min != "TLS12" && min != "TLS13") return bad("min_version must be TLS12 or TLS13");
  absl::StatusOr<std::shared_ptr<const tls::Identity>> id =
      tls::LoadIdentityFiles(tls["client_ca_file"], tls["cert_file"], tls["key_file"]);
  if (!id.ok()) return bad(std::string(id.status().message()));
  tls::ServerOptions o;
  o.check_cluster = false;  // scrapers' certificates may come from another CA
  o.tls13_only = min == "TLS13";
  o.client_certs = verify == "yes"        ? tls::ClientCerts::kRequire
                   : verify == "optional" ? tls::ClientCerts::kRequest
                                          : tls::ClientCerts::kNone;
  absl::StatusOr<std::shared_ptr<const tls::ServerContext>> ctx =
      tls::ServerContext::Create(*id, o);
  if (!ctx.ok()) return bad(std::string(ctx.status().message()));
  return *ctx;
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
