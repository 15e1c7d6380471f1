// What every ringcache daemon does the same way: block SIGINT/SIGTERM before threads start and
// wait for them on the main thread, serve /metrics and /healthz, and announce readiness in a JSON
// "ready file" (the bound ports) for scripts and tests.
//
// Thread-safety: call from the main thread.
#ifndef RINGCACHE_COMMON_DAEMON_H_
#define RINGCACHE_COMMON_DAEMON_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/http_admin.h"
#include "common/metrics.h"
#include "common/tls.h"
#include "common/tls_front.h"
#include "common/version.h"
#include "spdlog/spdlog.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace ringcache {

// Prepares a daemon process: blocks SIGINT and SIGTERM (inherited by threads started later),
// ignores SIGPIPE, and turns off abseil's debug-build mutex deadlock detector. Debian builds
// abseil without NDEBUG, so the detector is on by default: it records every lock acquisition
// order, including those of gRPC's internal absl mutexes, aborts on cycles that cannot deadlock
// (e.g. between short-lived mutexes whose addresses are reused), and its bookkeeping sits on
// every Lock(). Tests keep it on. REQUIRES: called first thing in main(), before any thread.
void InitDaemonProcess();
// Blocks SIGINT and SIGTERM (inherited by threads started later) and ignores SIGPIPE.
void BlockTerminationSignals();
// Waits for SIGINT or SIGTERM; returns the signal number. A SIGHUP meanwhile reloads the TLS
// credentials (tls::ReloadProcessIdentity) and is logged.
int WaitForTerminationSignal();
// The HTTP endpoint of a daemon: prometheus-cpp's pull exposer serving GET /metrics (the
// registry, plus the process_* metrics) and GET /healthz (200 with one sample,
// `ringcache_healthy 1`, while the process answers), and GET /readyz, GET and PUT /loglevel
// (common/http_admin.h). Stops when destroyed.
class MetricsServer {
 public:
  MetricsServer();
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds `listen` (host:port, port 0 picks a free one) and serves `registry`, which must outlive
  // this server. Returns the bound port. REQUIRES: called once.
  // With `web_config` (a Prometheus web configuration file, see MetricsTlsContext) it serves
  // HTTPS as that file says: the exposer listens on loopback behind a TLS front (tls_front.h).
  absl::StatusOr<int> Start(metrics::Registry* registry, const std::string& listen,
                            const std::string& web_config = "");
  // Stops serving and closes the socket. Idempotent.
  void Stop();

 private:
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string knock_host_;  // where Stop connects to wake the exposer's listener
  int knock_port_ = 0;
  std::unique_ptr<tls::TlsFront> front_;
  std::shared_ptr<prometheus::Collectable> health_;
};

// Starts `http` on `listen` for `registry`; see MetricsServer::Start.
absl::StatusOr<int> ServeMetrics(MetricsServer* http, metrics::Registry* registry,
                                 const std::string& listen, const std::string& web_config = "");

// Reads a Prometheus web configuration file (the exporter-toolkit convention, as node_exporter's
// --web.config.file) into the TLS server context of /metrics. Understood:
//   tls_server_config:
//     cert_file, key_file            # required
//     client_ca_file                 # CA of scrapers' certificates
//     client_auth_type               # NoClientCert (default), RequestClientCert,
//                                    # RequireAnyClientCert, VerifyClientCertIfGiven,
//                                    # RequireAndVerifyClientCert
//     min_version                    # TLS12 (default) or TLS13
// Any other key is an error naming it, so a setting is never silently ignored.
absl::StatusOr<std::shared_ptr<const tls::ServerContext>> MetricsTlsContext(
    const std::string& web_config);
// Prints "<program>: <message>" to stderr and returns `code`, for main() to return.
int FailExit(const std::string& program, int code, const std::string& message);

// systemd's notification protocol (sd_notify(3), Type=notify units): while it lives, systemd
// knows the daemon is ready ("READY=1" when made) and, when the unit sets WatchdogSec, gets
// "WATCHDOG=1" every half interval from a thread that first asks the process's readiness
// checks (common/http_admin.h): a daemon whose own state hangs stops feeding it and systemd
// restarts it. "STOPPING=1" when destroyed. Does nothing without $NOTIFY_SOCKET.
class SystemdNotifier {
 public:
  SystemdNotifier();
  ~SystemdNotifier();
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

 private:
  struct Watchdog;
  std::unique_ptr<Watchdog> watchdog_;
};
// Sends one notification ("READY=1", "STATUS=...") to $NOTIFY_SOCKET; false without one or when
// it cannot be sent.
bool NotifySystemd(const std::string& state);

// The rest of every daemon's main() once its flags are resolved: prepares the process
// (InitDaemonProcess), publishes ringcache_build_info for `role`, builds the daemon with
// `make(registry)` (a std::unique_ptr to a type with Open, Serve, Register and Stop), takes it
// through Open, Serve and Register, waits for SIGINT or SIGTERM and stops it; /readyz can say
// ready, and systemd hears READY=1 (SystemdNotifier), between Register and the signal. Returns the exit
// code: 0 after a signal; when a step fails, 2 for kInvalidArgument (bad configuration) and 1
// otherwise, the error printed by FailExit.
template <typename Make>
int RunDaemon(const std::string& program, const std::string& role, Make make) {
  InitDaemonProcess();
  metrics::Registry* registry = metrics::Registry::Default();
  registry
      ->GetGauge("ringcache_build_info", "Build information.",
                 {{"version", Version()}, {"role", role}})
      ->Set(1);
  auto daemon = make(registry);
  absl::Status s = daemon->Open();
  if (s.ok()) s = daemon->Serve();
  if (s.ok()) s = daemon->Register();
  if (!s.ok()) {
    daemon->Stop();
    return FailExit(program, absl::IsInvalidArgument(s) ? 2 : 1, s.ToString());
  }
  http_admin::SetServing(true);
  auto systemd = std::make_unique<SystemdNotifier>();
  spdlog::info("signal {}: shutting down", WaitForTerminationSignal());
  http_admin::SetServing(false);
  systemd.reset();
  daemon->Stop();
  spdlog::info("stopped");
  return 0;
}

// Writes {"name":value,...,"pid":N} to `path` atomically. No-op for an empty path.
absl::Status WriteReadyFile(const std::string& path, const std::map<std::string, int>& ports);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_DAEMON_H_
