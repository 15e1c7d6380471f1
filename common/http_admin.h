// What a daemon's HTTP port answers besides /metrics and /healthz (common/daemon.h's
// MetricsServer): whether the daemon is ready to serve, and its log level, changeable while it
// runs. Both are the process's: a process running several components (ringcache-local) is ready
// when all of them are.
//
//   GET /readyz            200 "ready", or 503 "not ready: <why>" (not serving yet or any more,
//                          fenced, a failed device, ...): what compose's health checks and the
//                          systemd units wait for. /healthz stays 200 while the process answers.
//   GET /loglevel          the current level ("info\n")
//   PUT /loglevel          body: a level (trace, debug, info, warn, error, critical, off); only
//                          from a loopback peer (a local operator, or the HTTPS front of
//                          --metrics-web-config, which checked the client first)
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_COMMON_HTTP_ADMIN_H_
#define RINGCACHE_COMMON_HTTP_ADMIN_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"

struct mg_connection;

namespace ringcache::http_admin {

// A condition of the process's readiness, for as long as the object lives: `not_ready` returns
// "" when the component is ready, else why not ("fenced: ...").
class ReadinessCheck {
 public:
  ReadinessCheck(std::string name, std::function<std::string()> not_ready);
  ~ReadinessCheck();
  ReadinessCheck(const ReadinessCheck&) = delete;
  ReadinessCheck& operator=(const ReadinessCheck&) = delete;

 private:
  const int id_;
};

// Whether the daemon has started serving (RunDaemon sets it after Register and clears it on a
// termination signal). Until then /readyz answers "not ready: starting".
void SetServing(bool serving);

// "" when the process is serving and every check passes, else why not.
std::string NotReady();

// Sets the level of every spdlog logger. kInvalidArgument naming the levels for an unknown name.
absl::Status SetLogLevel(const std::string& level);
std::string LogLevel();
// The level at start: `flag` (--log-level) if given, else the environment's SPDLOG_LEVEL (its
// global level; per-logger "name=level" entries are ignored), else info.
absl::Status ApplyStartLogLevel(const std::optional<std::string>& flag);

// civetweb's begin_request callback of the HTTP port: answers /readyz and /loglevel, and
// returns 0 for every other path (the exposer serves it).
int BeginRequest(mg_connection* conn);

}  // namespace ringcache::http_admin

#endif  // RINGCACHE_COMMON_HTTP_ADMIN_H_
