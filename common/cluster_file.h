// The static cluster file: which gateway, cache nodes and data nodes make up a cluster without
// etcd, with their addresses. Every daemon started with --cluster FILE --id N reads its own entry
// and its peers from it; deploy/cluster.sh starts one daemon per entry.
//
//   cluster_id: prod-eu-1                 # optional: stamped into every store (see below)
//   data_dir: /var/lib/ringcache          # node state: <data_dir>/<role>-<id>
//   replication: 3                        # default N for new VDIs
//   block_size: 4096
//   etcd_endpoints: 127.0.0.1:2379        # optional: cluster mode (membership in etcd)
//   etcd_prefix: /ringcache               # optional, default /ringcache
//   etcd_lease_ttl_s: 5                   # optional, default 5 (>= 2)
//   nodes:
//     - {role: datanode, id: 1, listen: 127.0.0.1:7401, http_listen: 127.0.0.1:9401}
//     - {role: cachenode, id: 1, listen: 127.0.0.1:7301, http_listen: 127.0.0.1:9301,
//        ssd_bytes: 1GiB, ram_bytes: 64MiB}
//     - {role: gateway, id: 1, nbd_listen: 127.0.0.1:10809, admin_listen: 127.0.0.1:7200,
//        http_listen: 127.0.0.1:9200}
//
// Thread-compatible.
#ifndef RINGCACHE_COMMON_CLUSTER_FILE_H_
#define RINGCACHE_COMMON_CLUSTER_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringcache {

struct ClusterNode {
  std::string role;         // gateway | cachenode | datanode
  uint32_t id = 0;
  std::string listen;       // gRPC (cache and data nodes)
  std::string http_listen;  // /metrics
  std::string nbd_listen;   // gateway
  std::string admin_listen; // gateway
  uint64_t ssd_bytes = 1ull << 30;
  uint64_t ram_bytes = 64ull << 20;
  double weight = 1.0;
  std::string zone;
  // Cache nodes: the SSD's write budget, "1dwpd" (drive writes per day) or "200GiB/day" (empty:
  // none), and the years its rating runs (docs/cache-node.md "SSD write budget").
  std::string ssd_write_budget;
  double ssd_rated_years = 5;
};

struct ClusterFile {
  // The cluster's identity (1-48 of [A-Za-z0-9._-]; empty: none). Each cache node's SSD store
  // and data node's store keep the id they were created (or first opened) with and refuse to
  // start in another cluster: a disk moved between clusters never serves its blocks as this
  // cluster's (docs/durability.md, "Incarnations").
  std::string cluster_id;
  std::string data_dir = "./ringcache-cluster";
  uint32_t replication = 3;
  uint32_t block_size = 4096;
  // The cache nodes' policy spec; empty: their built-in default (policy::kDefaultPolicy).
  std::string policy;
  // The cache nodes' RAM/SSD placement: uarc | lru, with NAME(exclusive) (the RAM tier adds
  // capacity) and/or NAME(sieve=N) (SE-UARC); cachenode/policy/placement.h.
  std::string placement = "uarc";
  // Cluster mode (membership/README.md) when non-empty: comma-separated etcd host:port list.
  std::string etcd_endpoints;
  std::string etcd_prefix = "/ringcache";
  uint32_t etcd_lease_ttl_s = 5;
  std::vector<ClusterNode> nodes;

  // Loads and validates `path` (unknown keys, duplicate (role, id), missing addresses are errors).
  static absl::StatusOr<ClusterFile> Load(const std::string& path);
  // Returns the entry (role, id) or kNotFound.
  absl::StatusOr<ClusterNode> Find(const std::string& role, uint32_t id) const;
  std::vector<ClusterNode> OfRole(const std::string& role) const;
  std::string NodeDir(const ClusterNode& n) const;
};

}  // namespace ringcache

#endif  // RINGCACHE_COMMON_CLUSTER_FILE_H_
