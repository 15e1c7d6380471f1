#include "membership/daemon_flags.h"

namespace ringcache::membership {

void DaemonFlags::AddTo(CLI::App* app, bool cluster_required, const std::string& cluster_help,
                        const std::string& etcd_help) {
  auto* cluster = app->add_option("--cluster", cluster_path, cluster_help)
                      ->check(CLI::ExistingFile);
  if (cluster_required) cluster->required();
  app->add_option("--etcd", etcd,
                  "Cluster mode: " + etcd_help +
                      " (etcd endpoints host:port,...; default: etcd_endpoints of the cluster "
                      "file)");
  app->add_option("--etcd-prefix", etcd_prefix,
                  "Key prefix in etcd (default: the cluster file's, else /ringcache)");
  app->add_option("--lease-ttl", lease_ttl,
                  "etcd lease TTL in seconds (default: the cluster file's, else 5)");
}

EtcdSettings DaemonFlags::Resolve(const EtcdSettings& file) const {
  EtcdSettings s = file;
  if (etcd) s.endpoints = *etcd;
  if (etcd_prefix) s.prefix = *etcd_prefix;
  if (lease_ttl) s.lease_ttl_s = static_cast<int>(*lease_ttl);
  return s;
}

}  // namespace ringcache::membership
