// Configuration of ringcache-datanode: defaults, YAML loading (strict: unknown keys and bad
// values are errors naming the key), and validation. Thread-compatible.
#ifndef RINGCACHE_DATANODE_CONFIG_H_
#define RINGCACHE_DATANODE_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/config.h"
#include "datanode/hdd_emulator.h"

namespace ringcache::datanode {

// Reads the `hdd_emulation` mapping (enabled, seek_ms, bandwidth_mb_s) of a YAML config.
void ReadHddConfig(YamlFields* parent, HddConfig* hdd);

struct DataNodeConfig {
  uint32_t node_id = 1;
  std::string listen = "127.0.0.1:7400";       // gRPC
  std::string http_listen = "127.0.0.1:9400";  // /metrics and /healthz
  // The log port (datanode/log_port.h); empty: the host of `listen`, any free port.
  std::string log_listen;
  std::string data_dir = "./ringcache-data/datanode-1";
  uint64_t block_cache_bytes = 64ull << 20;
  uint64_t log_limit_bytes = 4ull << 30;       // reported to cache nodes; they destage above it
  std::string zone;                             // optional failure domain
  std::string cluster_id;                       // from the cluster file (StoreOptions)
  uint64_t capacity_bytes = 0;                  // ring weight; 0 = 1 TiB nominal
  std::string ready_file;                       // written with the bound ports once serving
  // Cluster mode when non-empty: register in etcd (comma-separated host:port list).
  std::string etcd_endpoints;
  std::string etcd_prefix = "/ringcache";
  uint32_t etcd_lease_ttl_s = 5;
  HddConfig hdd;
  // Background scrub (datanode/scrubber.h): a pass over every block and log record this often
  // (0: only when asked, `ringcachectl scrub start`), reading at most scrub_mb_s MB/s.
  double scrub_interval_s = 7 * 24 * 3600;
  double scrub_mb_s = 16;

  // Merges the YAML file at `path` into this config.
  absl::Status LoadYaml(const std::string& path);
  absl::Status Validate() const;
};

}  // namespace ringcache::datanode

#endif  // RINGCACHE_DATANODE_CONFIG_H_
