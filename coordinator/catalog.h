// Catalog: the VDI catalog — names, ids, sizes, geometry and cache modes, kept in one text file
// rewritten atomically (write temp, fsync, rename, fsync dir) on every change. In cluster mode a
// CatalogStore (etcd, coordinator/etcd_state.h) is the source of truth: attaching it replaces
// the file's records with the store's (or seeds an empty store from the file), and every change
// is written to the store first, then to the file.
//
// VDI ids are never given twice: the next id to give is kept with the records (the file's
// "# next_id N" line, the store's own key) and only grows, so a VDI created after a delete never
// takes the deleted one's id, and with it the blocks and log records the deleted VDI left.
//
// File format: a header line "# ringcache catalog v1", a line "# next_id N" (older files have
// none: the next id is then one above the highest in use), then one line per VDI:
//   id name size_bytes object_size block_size replication mode
//
// Thread-safety: thread-safe.
#ifndef RINGCACHE_GATEWAY_CATALOG_H_
#define RINGCACHE_GATEWAY_CATALOG_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "ringcache/v1/admin.pb.h"
#include "ringcache/v1/cachenode.pb.h"
#include "ringcache/v1/common.pb.h"

namespace ringcache::coordinator {

struct VdiRecord {
  v1::VdiGeometry geometry;
  v1::CacheMode mode = v1::WRITEBACK;
  std::string policy;  // the VDI's own cache policy spec, no spaces; "" = the nodes' default
  // NBD access (docs/security.md, "Who may open what"): exported read-only; client identities
  // that may open it read-write and read-only (both empty: any client with an identity when the
  // gateway serves TLS); public: any client at all, the lists do not apply.
  bool read_only = false;
  std::vector<std::string> allowed_clients;
  std::vector<std::string> read_only_clients;
  bool public_export = false;
  // I/O limits the gateways enforce (gateway/qos.h); all 0: none. In the record as `qos=...`,
  // which releases before 0.2.0 cannot read: written only at feature level 2 (docs/upgrades.md).
  v1::VdiQos qos;
};

// A change of a VDI's NBD access; what is unset stays as it is.
struct AccessChange {
  std::optional<bool> read_only;
  // Replaces the read-write list and empties the read-only one (empty: any identity).
  std::optional<std::vector<std::string>> allowed_clients;
  std::optional<bool> public_export;
  // Adds one identity, read-write or read-only, moving it from the other list.
  std::string allow;
  bool allow_read_only = false;
  // Removes one identity from both lists.
  std::string deny;
};

// The highest VDI id the catalog gives. Ids stay below 0xFF000000 so that the first byte of a
// data node's log record (the top byte of its VDI id, big-endian) is never the mark of a
// versioned record (datanode/store_keys.h, kLogVersionMark).
inline constexpr uint32_t kMaxVdiId = 0xFEFFFFFF;

struct VdiDefaults {
  uint32_t object_size = 4u << 20;
  uint32_t block_size = 4096;
  uint32_t replication = 3;
};

// Encodes one record as a catalog line (without newline) and back; kDataLoss if malformed.
std::string EncodeVdiLine(const VdiRecord& r);
absl::StatusOr<VdiRecord> DecodeVdiLine(const std::string& line);
// A record as this process writes it to etcd: the catalog line (etcd-value 1) or, once the
// cluster's feature level allows it, an EtcdValue (membership/etcd_value.h); and back, either
// version (kDataLoss if malformed, kFailedPrecondition for an EtcdValue of a newer version).
std::string EncodeVdiValue(const VdiRecord& r);
absl::StatusOr<VdiRecord> DecodeVdiValue(const std::string& value);
// A record's limits as its `qos=` token holds them ("ri:1000,wb:1048576,burst:500"; "" when
// none), and back (false on a malformed token).
std::string EncodeQos(const v1::VdiQos& qos);
// True when `qos` limits or reserves anything (a burst alone limits nothing).
bool QosLimited(const v1::VdiQos& qos);
// Whether `qos` gives the VDI a share of the cache nodes' SSDs (ssd_min/max_permille).
bool QosShares(const v1::VdiQos& qos);
// Copies the record's shares (its qos) into its geometry, which carries them to the cache nodes.
void ApplyShares(VdiRecord* r);
bool DecodeQos(absl::string_view text, v1::VdiQos* qos);

// Where a catalog keeps its records besides its file (cluster mode: etcd).
class CatalogStore {
 public:
  // What a store holds: the records, and the next VDI id to give (at least one above every id
  // in use).
  struct Contents {
    std::vector<VdiRecord> records;
    uint32_t next_id = 1;
  };
  virtual ~CatalogStore() = default;
  virtual absl::StatusOr<Contents> LoadAll() = 0;
  // Writes `r` and the next id to give, together.
  virtual absl::Status Put(const VdiRecord& r, uint32_t next_id) = 0;
  virtual absl::Status Remove(const std::string& name) = 0;
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
  // Records the VDI's cache policy spec ("" = the nodes' default).
  absl::Status SetPolicy(const std::string& name, const std::string& policy);
  // Changes the NBD access of a VDI (client identities: 1-64 characters of [A-Za-z0-9._@:-]).
  // Returns the record as saved.
  absl::StatusOr<VdiRecord> SetAccess(const std::string& name, AccessChange change);
  // Sets a VDI's I/O limits (all 0: none).
  absl::StatusOr<VdiRecord> SetQos(const std::string& name, const v1::VdiQos& qos);
  absl::StatusOr<VdiRecord> Find(const std::string& name) const;
  std::vector<VdiRecord> List() const;

  // Makes `store` (not owned, outlives the catalog) the source of truth; see the file comment.
  absl::Status AttachStore(CatalogStore* store);
  // Replaces the catalog by the attached store's records (a gateway that is not the coordinator
  // follows the catalog the coordinator writes). Returns whether anything changed.
  absl::StatusOr<bool> Reload();

 private:
  Catalog(std::string path, VdiDefaults d) : path_(std::move(path)), defaults_(d) {}
  // Applies `change` to VDI `name`'s record and saves it; a failed save restores the record.
  absl::StatusOr<VdiRecord> Update(const std::string& name,
                                   const std::function<void(VdiRecord*)>& change);
  // Writes the change of VDI `name` (gone from by_name_: deleted) to the store, then the file.
  absl::Status SaveLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reload's second half: replaces the records with `next` (read from the store) unless they
  // are the same. Returns whether anything changed.
  absl::StatusOr<bool> ApplyLoadedLocked(std::map<std::string, VdiRecord> next, uint32_t next_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveFileLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  CatalogStore* store_ ABSL_GUARDED_BY(mu_) = nullptr;

  const std::string path_;
  const VdiDefaults defaults_;
  mutable absl::Mutex mu_;
  std::map<std::string, VdiRecord> by_name_ ABSL_GUARDED_BY(mu_);
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // local changes so far (SaveLocked)
};

// Returns kInvalidArgument unless `name` is a valid VDI / export name.
absl::Status ValidateVdiName(const std::string& name);
// OK for an NBD client identity of an access list; kInvalidArgument naming it otherwise.
absl::Status ValidateClientIdentity(const std::string& id);

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_GATEWAY_CATALOG_H_
