// DaemonFlags: the flags every ringcache daemon shares — where the static cluster file is and how
// to reach etcd (--cluster, --etcd, --etcd-prefix, --lease-ttl) — declared once, with one wording
// and one rule: a flag overrides the cluster file, which overrides the built-in default.
//
// Thread-safety: call from main() only.
#ifndef RINGCACHE_MEMBERSHIP_DAEMON_FLAGS_H_
#define RINGCACHE_MEMBERSHIP_DAEMON_FLAGS_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "membership/presence.h"

namespace ringcache::membership {

struct DaemonFlags {
  std::string cluster_path;
  std::optional<std::string> etcd;
  std::optional<std::string> etcd_prefix;
  std::optional<uint32_t> lease_ttl;

  // Adds the four flags to `app`. `cluster_help` and `etcd_help` say what this daemon takes from
  // the cluster file and does in cluster mode.
  void AddTo(CLI::App* app, bool cluster_required, const std::string& cluster_help,
             const std::string& etcd_help);
  // The etcd settings: each flag given wins over `file` (the cluster file's, or the config
  // file's, settings).
  EtcdSettings Resolve(const EtcdSettings& file) const;
};

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_DAEMON_FLAGS_H_
