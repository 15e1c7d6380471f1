#include "datanode/config.h"

#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "common/socket.h"
#include "common/status_macros.h"

namespace ringcache::datanode {

void ReadHddConfig(YamlFields* parent, HddConfig* hdd) {
  YamlFields h = parent->Sub("hdd_emulation");
  h.Read("enabled", &hdd->enabled);
  h.Read("seek_ms", &hdd->seek_ms);
  h.Read("bandwidth_mb_s", &hdd->bandwidth_mb_s);
}

absl::Status DataNodeConfig::LoadYaml(const std::string& path) {
  RC_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlFile(path));
  YamlFields f(root, path);
  f.Read("node_id", &node_id);
  f.Read("listen", &listen);
  f.Read("http_listen", &http_listen);
  f.Read("log_listen", &log_listen);
  f.Read("data_dir", &data_dir);
  f.ReadSize("block_cache_bytes", &block_cache_bytes);
  f.ReadSize("log_limit_bytes", &log_limit_bytes);
  f.Read("zone", &zone);
  f.ReadSize("capacity_bytes", &capacity_bytes);
  f.Read("ready_file", &ready_file);
  f.Read("etcd_endpoints", &etcd_endpoints);
  f.Read("etcd_prefix", &etcd_prefix);
  f.Read("etcd_lease_ttl_s", &etcd_lease_ttl_s);
  ReadHddConfig(&f, &hdd);
  f.Read("scrub_interval_s", &scrub_interval_s);
  f.Read("scrub_mb_s", &scrub_mb_s);
  return f.Finish();
}

absl::Status DataNodeConfig::Validate() const {
  if (node_id == 0) return absl::InvalidArgumentError("node_id must be non-zero");
  std::string host;
  int port = 0;
  RC_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
  RC_RETURN_IF_ERROR(SplitHostPort(http_listen, &host, &port));
  if (!log_listen.empty()) RC_RETURN_IF_ERROR(SplitHostPort(log_listen, &host, &port));
  if (data_dir.empty()) return absl::InvalidArgumentError("data_dir must be set");
  if (block_cache_bytes < (1 << 20)) {
    return absl::InvalidArgumentError("block_cache_bytes must be at least 1MiB");
  }
  RC_RETURN_IF_ERROR(hdd.Validate());
  if (scrub_interval_s < 0 || scrub_mb_s <= 0) {
    return absl::InvalidArgumentError(
        "scrub_interval_s must be >= 0 (0: only when asked) and scrub_mb_s > 0");
  }
  return EnsureWritableDir(data_dir);
}

}  // namespace ringcache::datanode
