#include "membership/daemon_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_tls.h"
#include "common/http_admin.h"
#include "common/socket.h"

namespace ringcache::membership {

void DaemonFlags::AddTo(CLI::App* app, bool cluster_required, const std::string& cluster_help,
                        const std::string& etcd_help) {
  auto* cluster =
      app->add_option("--cluster", cluster_path, cluster_help)->check(CLI::ExistingFile);
  if (cluster_required) cluster->required();
  app->add_option("--etcd", etcd,
                  "Cluster mode: " + etcd_help +
                      " (etcd endpoints host:port,...; default: etcd_endpoints of the cluster "
                      "file)");
  app->add_option("--etcd-prefix", etcd_prefix,
                  "Key prefix in etcd (default: the cluster file's, else /ringcache)");
  app->add_option("--lease-ttl", lease_ttl,
                  "etcd lease TTL in seconds (default: the cluster file's, else 5)");
  app->add_option("--tls-dir", tls_dir,
                  "Mutual TLS on every port (gRPC, block data, NBD, etcd) with the credentials in "
                  "this directory: ca-cert.pem, cert.pem, key.pem (make them with `ringcachectl "
                  "tls`; docs/security.md)")
      ->check(CLI::ExistingDirectory);
  app->add_option("--metrics-web-config", metrics_web_config,
                  "Serve /metrics over HTTPS as this Prometheus web configuration file says "
                  "(tls_server_config: cert_file, key_file, client_ca_file, client_auth_type)")
      ->check(CLI::ExistingFile);
  app->add_flag("--insecure", insecure,
                "Allow plaintext listeners on addresses other than loopback (refused by default)");
  AddLogLevelFlag(app, &log_level);
}

void AddLogLevelFlag(CLI::App* app, std::optional<std::string>* level) {
  app->add_option("--log-level", *level,
                  "trace, debug, info, warn, error, critical or off (default: SPDLOG_LEVEL, else "
                  "info); PUT /loglevel on the HTTP port changes it while the daemon runs");
}

absl::Status DaemonFlags::ApplyLogLevel() const {
  return http_admin::ApplyStartLogLevel(log_level);
}

absl::Status DaemonFlags::ApplyTls(const std::string& role) const {
  if (tls_dir.empty()) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<const tls::Identity>> id = tls::LoadIdentity(tls_dir);
  if (!id.ok()) return id.status();
  if ((*id)->name.role != role) {
    return absl::InvalidArgumentError(
        absl::StrCat(tls_dir, "/", tls::kCertFile, " is the certificate of ",
                     (*id)->name.ToString(), ", but this daemon is a ", role,
                     "; its peers would refuse it. Issue one with "
                     "`ringcachectl tls issue --role ",
                     role, "`"));
  }
  tls::SetProcessIdentity(*id);
  return absl::OkStatus();
}

absl::Status DaemonFlags::CheckListener(const std::string& what, const std::string& address,
                                        bool encrypted) const {
  if (encrypted || insecure) return absl::OkStatus();
  std::string host;
  int port = 0;
  if (!SplitHostPort(address, &host, &port).ok() || IsLoopbackHost(host)) {
    return absl::OkStatus();  // a malformed address fails where it is bound, with its own error
  }
  return absl::FailedPreconditionError(
      absl::StrCat("refusing to serve ", what, " in plaintext on ", address,
                   ", which is not a loopback address: give --tls-dir",
                   what == "/metrics" ? " and --metrics-web-config" : "",
                   " to secure it, or --insecure to accept plaintext"));
}

std::optional<int> ParseCommandLine(CLI::App* app, int argc, char** argv) {
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app->exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

absl::Status DaemonFlags::CheckEtcd(const EtcdSettings& etcd) const {
  if (tls() || insecure) return absl::OkStatus();
  for (std::string endpoint : SplitEndpoints(etcd.endpoints)) {
    for (absl::string_view scheme : {"http://", "https://"}) {
      if (absl::StartsWith(endpoint, scheme)) endpoint = endpoint.substr(scheme.size());
    }
    std::string host;
    int port = 0;
    if (!SplitHostPort(endpoint, &host, &port).ok() || IsLoopbackHost(host)) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to reach etcd in plaintext at ", endpoint,
        ", which is not a loopback address (the cluster's membership and catalog travel "
        "there): give --tls-dir to secure it, or --insecure to accept plaintext"));
  }
  return absl::OkStatus();
}

EtcdSettings DaemonFlags::Resolve(const EtcdSettings& file) const {
  EtcdSettings s = file;
  if (etcd) s.endpoints = *etcd;
  if (etcd_prefix) s.prefix = *etcd_prefix;
  if (lease_ttl) s.lease_ttl_s = static_cast<int>(*lease_ttl);
  return s;
}

}  // namespace ringcache::membership
