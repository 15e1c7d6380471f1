// What every ringcache daemon does the same way: block SIGINT/SIGTERM before threads start and
// wait for them on the main thread, serve /metrics and /healthz, and announce readiness in a JSON
// "ready file" (the bound ports) for scripts and tests.
//
// Thread-safety: call from the main thread.
#ifndef RINGCACHE_COMMON_DAEMON_H_
#define RINGCACHE_COMMON_DAEMON_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/http_server.h"
#include "common/metrics.h"

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
// Waits for SIGINT or SIGTERM; returns the signal number.
int WaitForTerminationSignal();
// Starts `http` with /metrics (rendering `registry`) and /healthz on `listen` (host:port).
// Returns the bound port.
absl::StatusOr<int> ServeMetrics(HttpServer* http, metrics::Registry* registry,
                                 const std::string& listen);
// Writes {"name":value,...,"pid":N} to `path` atomically. No-op for an empty path.
absl::Status WriteReadyFile(const std::string& path, const std::map<std::string, int>& ports);

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_DAEMON_H_
