// DaemonFlags: the flags every ringcache daemon shares — where the static cluster file is and how
// to reach etcd (--cluster, --etcd, --etcd-prefix, --lease-ttl), and how its ports are secured
// (--tls-dir, --metrics-web-config, --insecure), and its log level (--log-level) — declared once, with one wording and one rule: a
// flag overrides the cluster file, which overrides the built-in default.
//
// Thread-safety: call from main() only.
#ifndef RINGCACHE_MEMBERSHIP_DAEMON_FLAGS_H_
#define RINGCACHE_MEMBERSHIP_DAEMON_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "membership/presence.h"

namespace ringcache::membership {

// Parses the command line into `app`'s options: the exit code when the process ends here (0
// after --help or --version, 2 for a bad flag, with CLI11's message), nullopt to go on.
std::optional<int> ParseCommandLine(CLI::App* app, int argc, char** argv);

// The --log-level flag (every daemon, ringcache-local included) into `level`.
void AddLogLevelFlag(CLI::App* app, std::optional<std::string>* level);

struct DaemonFlags {
  std::string cluster_path;
  std::optional<std::string> etcd;
  std::optional<std::string> etcd_prefix;
  std::optional<uint32_t> lease_ttl;
  std::string tls_dir;             // mutual TLS on every gRPC and data port, and to etcd
  std::string metrics_web_config;  // HTTPS for /metrics (Prometheus web config file)
  bool insecure = false;           // allow plaintext listeners on non-loopback addresses
  std::optional<std::string> log_level;  // --log-level; else SPDLOG_LEVEL; else info

  // Adds the four flags to `app`. `cluster_help` and `etcd_help` say what this daemon takes from
  // the cluster file and does in cluster mode.
  void AddTo(CLI::App* app, bool cluster_required, const std::string& cluster_help,
             const std::string& etcd_help);
  // The etcd settings: each flag given wins over `file` (the cluster file's, or the config
  // file's, settings).
  EtcdSettings Resolve(const EtcdSettings& file) const;
  // Sets the log level at start (--log-level, else SPDLOG_LEVEL, else info; changed later with
  // PUT /loglevel on the HTTP port, common/http_admin.h). kInvalidArgument for an unknown level.
  absl::Status ApplyLogLevel() const;
  // Loads --tls-dir (if given) as the process's TLS identity (common/grpc_tls.h). Errors name the
  // file at fault. The certificate must carry `role` (OU): a daemon started with another role's
  // certificate would be refused by every peer, so it stops here and says which to issue.
  absl::Status ApplyTls(const std::string& role) const;
  bool tls() const { return !tls_dir.empty(); }
  // Refuses a plaintext listener (`encrypted` false) for `what` on a non-loopback address unless
  // --insecure was given: kFailedPrecondition saying how to fix it.
  absl::Status CheckListener(const std::string& what, const std::string& address,
                             bool encrypted) const;
  // The same rule for reaching etcd: plaintext (no --tls-dir) to an endpoint that is not a
  // loopback address is refused unless --insecure was given.
  absl::Status CheckEtcd(const EtcdSettings& etcd) const;
};

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_DAEMON_FLAGS_H_
