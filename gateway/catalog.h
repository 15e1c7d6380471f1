// Catalog: the VDI catalog of single-process and static-cluster mode — names, ids, sizes,
// geometry and cache modes, kept in one text file rewritten atomically (write temp, fsync,
// rename, fsync dir) on every change. Cluster mode keeps the same records in etcd.
//
// File format: a header line "# ringcache catalog v1", then one line per VDI:
//   id name size_bytes object_size block_size replication mode
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_GATEWAY_CATALOG_H_
#define RINGCACHE_GATEWAY_CATALOG_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "ringcache/v1/cachenode.pb.h"
#include "ringcache/v1/common.pb.h"

namespace ringcache::gateway {

struct VdiRecord {
  v1::VdiGeometry geometry;
  v1::CacheMode mode = v1::WRITEBACK;
};

struct VdiDefaults {
  uint32_t object_size = 4u << 20;
  uint32_t block_size = 4096;
  uint32_t replication = 3;
};

class Catalog {
 public:
  // Loads `path` (a missing file is an empty catalog). Malformed lines are kDataLoss naming the
  // line.
  static absl::StatusOr<std::unique_ptr<Catalog>> Open(const std::string& path,
                                                       VdiDefaults defaults);

  // Creates a VDI. Names are 1-64 characters of [A-Za-z0-9._-]; sizes are positive multiples of
  // 4096; object_size/replication 0 take the defaults. kAlreadyExists for a taken name.
  absl::StatusOr<VdiRecord> Create(const std::string& name, uint64_t size_bytes,
                                   uint32_t object_size, uint32_t replication);
  absl::Status Delete(const std::string& name);
  absl::StatusOr<VdiRecord> Resize(const std::string& name, uint64_t size_bytes);
  absl::Status SetMode(const std::string& name, v1::CacheMode mode);
  absl::StatusOr<VdiRecord> Find(const std::string& name) const;
  std::vector<VdiRecord> List() const;

 private:
  Catalog(std::string path, VdiDefaults d) : path_(std::move(path)), defaults_(d) {}
  absl::Status SaveLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const VdiDefaults defaults_;
  mutable absl::Mutex mu_;
  std::map<std::string, VdiRecord> by_name_ ABSL_GUARDED_BY(mu_);
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// Returns kInvalidArgument unless `name` is a valid VDI / export name.
absl::Status ValidateVdiName(const std::string& name);

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_CATALOG_H_
