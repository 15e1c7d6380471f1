#include "gateway/frontends.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/daemon.h"
#include "common/grpc_channel.h"
#include "common/status_macros.h"

namespace ringcache::gateway {

absl::Status Frontends::Start(const FrontendConfig& config, Router* router,
                              std::vector<v1::NodeInfo> nodes, metrics::Registry* registry) {
  NbdServerConfig nc;
  nc.listen = config.nbd_listen;
  nc.tls = config.nbd_tls;
  nc.tls_context = config.nbd_tls_context;
  nc.max_connections = config.nbd_max_connections;
  nc.max_connections_per_peer = config.nbd_max_connections_per_peer;
  nc.idle_timeout_ms = config.nbd_idle_timeout_ms;
  nc.max_inflight_bytes_per_peer = config.nbd_memory_per_peer;
  RC_RETURN_IF_ERROR(nc.Validate());
  nbd_ = std::make_unique<NbdServer>(nc, router, registry);
  RC_ASSIGN_OR_RETURN(nbd_port_, nbd_->Start());

  admin_ = std::make_unique<AdminService>(router, std::move(nodes));
  admin_->SetVdiDeletedHook(
      [nbd = nbd_.get()](const std::string& name) { nbd->ForgetExport(name); });
  router->ExportMetrics(registry);
  admin_->ExportMetrics(registry);
  admin_->StartHealthWatch(absl::Seconds(1));
  grpc::ServerBuilder ab;
  ExclusivePort(&ab);  // a port in use fails the start (common/grpc_channel.h)
  // Mutual TLS with --tls-dir: only ringcachectl's admin certificates (common/grpc_tls.h).
  ab.AddListeningPort(config.admin_listen, tls::ServerCredentialsFor({tls::kRoleAdmin}),
                      &admin_port_);
  ab.RegisterService(admin_.get());
  admin_server_ = ab.BuildAndStart();
  if (!admin_server_ || admin_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.admin_listen));
  }
  RC_ASSIGN_OR_RETURN(
      http_port_, ServeMetrics(&http_, registry, config.http_listen, config.metrics_web_config));
  return absl::OkStatus();
}

void NbdFlags::AddTo(CLI::App* app) {
  app->add_option("--nbd-tls", mode,
                  "NBD TLS (NBD_OPT_STARTTLS): off, on (the client chooses) or require (the "
                  "default when --tls-dir or --nbd-tls-psk is given; else off)")
      ->check(CLI::IsMember({"off", "on", "require"}));
  app->add_flag("--nbd-tls-verify-peer", verify_peer,
                "NBD clients must present a certificate signed by the cluster CA (--tls-dir); "
                "without it a certificate is asked for and checked when sent");
  app->add_option("--nbd-tls-psk", psk_file,
                  "Also accept TLS-PSK clients with the keys of this file (identity:hex-key "
                  "lines, as psktool writes them)")
      ->check(CLI::ExistingFile);
  app->add_option("--nbd-max-connections", max_connections,
                  "NBD connections open at once; more are closed at once (default 256)")
      ->check(CLI::Range(1, 65536));
  app->add_option("--nbd-max-connections-per-peer", max_connections_per_peer,
                  "NBD connections open at once from one client address, so that one host "
                  "cannot hold every slot (default: half of --nbd-max-connections; a gateway "
                  "serving a single hypervisor sets it to --nbd-max-connections)")
      ->check(CLI::Range(0, 65536));
  app->add_option("--nbd-idle-timeout", idle_timeout_s,
                  "Close an NBD connection that sent no request for this many seconds (default "
                  "0: never; an idle VM sends nothing for hours, so set it only for clients that "
                  "reconnect, e.g. qemu with reconnect-delay)")
      ->check(CLI::Range(0, 7 * 24 * 3600));
  app->add_option("--nbd-memory-per-peer", memory_per_peer,
                  "Memory the NBD connections of one client address may hold together for "
                  "requests in flight (WRITE payloads read, answers not yet sent); beyond it "
                  "their reading waits (default 512MiB; at least 128MiB, one connection's share)")
      ->type_name("SIZE");
}

absl::Status NbdFlags::Resolve(std::shared_ptr<const tls::Identity> identity,
                               FrontendConfig* config) const {
  config->nbd_max_connections = max_connections;
  config->nbd_max_connections_per_peer = max_connections_per_peer;
  config->nbd_idle_timeout_ms = idle_timeout_s * 1000;
  absl::StatusOr<uint64_t> memory = ParseByteSize(memory_per_peer);
  if (!memory.ok() || *memory < NbdServerConfig().max_inflight_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nbd-memory-per-peer '", memory_per_peer, "': want a size of at least 128MiB (",
        memory.ok() ? "one connection's share" : memory.status().message(), ")"));
  }
  config->nbd_memory_per_peer = *memory;
  if (max_connections_per_peer > max_connections) {
    return absl::InvalidArgumentError(
        "--nbd-max-connections-per-peer cannot be above --nbd-max-connections");
  }
  const bool creds = identity != nullptr || !psk_file.empty();
  std::string m = mode.empty() ? (creds ? "require" : "off") : mode;
  RC_ASSIGN_OR_RETURN(config->nbd_tls, nbd::ParseTlsMode(m));
  if (config->nbd_tls == nbd::TlsMode::kOff) return absl::OkStatus();
  if (!creds) {
    return absl::InvalidArgumentError("--nbd-tls " + m +
                                      " needs credentials: --tls-dir and/or --nbd-tls-psk");
  }
  if (verify_peer && identity == nullptr) {
    return absl::InvalidArgumentError("--nbd-tls-verify-peer needs --tls-dir (the CA to verify)");
  }
  tls::ServerOptions o;
  o.x509 = identity != nullptr;
  o.psk_file = psk_file;
  o.client_certs = verify_peer ? tls::ClientCerts::kRequire : tls::ClientCerts::kRequest;
  // Only client certificates are NBD identities: a node's key (a cache node's, say) opens no VDI.
  o.roles = {tls::kRoleClient};
  RC_ASSIGN_OR_RETURN(config->nbd_tls_context, tls::ServerContext::Create(identity, o));
  return absl::OkStatus();
}

absl::Status CreateVdisFromSpecs(Router* router, const std::vector<std::string>& specs) {
  for (const std::string& spec : specs) {
    const size_t colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--create-vdi '", spec, "': want NAME:SIZE"));
    }
    const std::string name = spec.substr(0, colon);
    RC_ASSIGN_OR_RETURN(uint64_t size, ParseByteSize(spec.substr(colon + 1)));
    if (router->catalog()->Find(name).ok()) continue;
    RC_RETURN_IF_ERROR(router->CreateVdi(name, size, 0, 0).status());
    spdlog::info("created VDI {} ({} bytes)", name, size);
  }
  return absl::OkStatus();
}

void Frontends::Stop() {
  if (nbd_) nbd_->Stop();
  if (admin_server_) {
    admin_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  // The health watch calls the router, which the caller may destroy right after Stop().
  if (admin_) admin_->StopHealthWatch();
  http_.Stop();
}

}  // namespace ringcache::gateway
