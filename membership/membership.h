// Cluster membership in etcd (docs/design.md §7): the key layout, the node record, a node's
// registration under a lease (with fencing), and the watcher that turns the registrations into
// member views.
//
// Key layout under a configurable prefix P (default "/ringcache"):
//   P/nodes/<role>/<id>   node record (NodeRecord, JSON), attached to the node's lease;
//                         role is cache | data | gateway, id the decimal uint32 node id
//   P/vdis/<name>         VDI record: opaque bytes owned by the caller (the gateway)
//   P/draining/<id>       marker: node <id> is being drained (value: free text, e.g. a reason)
//
// Epochs. A MemberView carries the etcd revision it reflects. etcd revisions are global and
// totally ordered, so any two watchers whose views have the same revision have the same member
// set: the revision is the ring epoch. (The converse does not hold: a watcher that listed after a
// change may report the same set at a higher revision.) A view's revision only grows.
//
// Fencing. NodeRegistration::ValidUntil() is (time the last successful keepalive or grant was
// *sent*) + (TTL the server returned) - safety margin. The server counts the TTL from when it
// *received* the request, which is later, so the lease cannot have expired at the server before
// ValidUntil (up to clock-rate differences, which the margin covers). A node that cannot reach
// etcd therefore knows it may have lost ownership before anyone else can take it over.
//
// Thread-safety: NodeRecord and the key functions are thread-compatible values. NodeRegistration
// and MembershipWatcher are thread-safe; each runs one background thread (the watcher two: its
// list loop and its Watch) and calls its callback from there, never concurrently with itself.
#ifndef RINGCACHE_MEMBERSHIP_MEMBERSHIP_H_
#define RINGCACHE_MEMBERSHIP_MEMBERSHIP_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "membership/etcd_client.h"

namespace ringcache::membership {

inline constexpr absl::string_view kDefaultPrefix = "/ringcache";

enum class Role { kCache = 0, kData = 1, kGateway = 2 };
inline constexpr int kNumRoles = 3;

// Returns "cache", "data" or "gateway".
absl::string_view RoleName(Role role);
// Parses a role name; kInvalidArgument naming the text otherwise.
absl::StatusOr<Role> ParseRole(absl::string_view name);

// One node as it registers itself. Serialized as one JSON object with exactly these field names,
// e.g. {"role":"cache","id":7,"address":"10.0.0.7:7301","http_address":"10.0.0.7:9301",
// "capacity_bytes":1099511627776,"weight":1,"zone":"rack-a"}. Decoding ignores unknown fields
// (newer writers) and fills absent ones with the defaults below.
struct NodeRecord {
  Role role = Role::kCache;
  uint32_t id = 0;
  std::string address;       // gRPC host:port
  std::string http_address;  // /metrics host:port; may be empty
  uint64_t capacity_bytes = 0;
  double weight = 1.0;  // relative ring weight (ring::Member::weight)
  std::string zone;     // failure domain; may be empty
  // The node's store identity (cache node: its SSD store; data node: its block store), made when
  // the store was created; empty from nodes that predate it. A new value for the same id means
  // a new disk (docs/durability.md, "Incarnations").
  std::string incarnation;
  // The release the node runs ("0.2.0"; common/version.h), set by NodeRegistration; empty from
  // nodes of releases before 0.2.0, which did not publish it (docs/upgrades.md).
  std::string release;
  // The highest cluster feature level the node's release supports (common/formats.h); 0 from
  // releases before 0.2.0, which support level 1 only.
  uint32_t feature_level = 0;

  // Returns OK, or kInvalidArgument naming the bad field (empty address, weight <= 0, ...).
  absl::Status Validate() const;
  bool operator==(const NodeRecord&) const = default;
};

std::string EncodeNodeRecord(const NodeRecord& record);
// The record as this process writes it to etcd: the JSON above (etcd-value 1) or, once the
// cluster's feature level allows it, an EtcdValue (etcd_value.h).
std::string EncodeNodeValue(const NodeRecord& record);
// Parses and validates a record of either version; kInvalidArgument naming what was wrong
// (kFailedPrecondition for an EtcdValue of a newer version).
absl::StatusOr<NodeRecord> DecodeNodeRecord(absl::string_view value);

// The keys of the layout above. `prefix` has no trailing slash ("" is allowed: keys start "/").
std::string NodesPrefix(absl::string_view prefix);            // P/nodes/
// P/cluster/feature_level: the cluster's feature level, decimal (absent: level 1), raised by
// `ringcachectl cluster finalize` (docs/upgrades.md).
std::string FeatureLevelKey(absl::string_view prefix);
std::string RolePrefix(absl::string_view prefix, Role role);  // P/nodes/<role>/
std::string NodeKey(absl::string_view prefix, Role role, uint32_t id);
std::string VdisPrefix(absl::string_view prefix);  // P/vdis/
std::string VdiKey(absl::string_view prefix, absl::string_view name);
std::string DrainingPrefix(absl::string_view prefix);  // P/draining/
std::string DrainingKey(absl::string_view prefix, uint32_t id);

// Parses a P/nodes/<role>/<id> key into (role, id); kInvalidArgument otherwise.
absl::StatusOr<std::pair<Role, uint32_t>> ParseNodeKey(absl::string_view prefix,
                                                       absl::string_view key);

// The members registered at one etcd revision.
struct MemberView {
  int64_t revision = 0;                                    // the epoch: see the file comment
  std::array<std::vector<NodeRecord>, kNumRoles> by_role;  // each sorted by id
  // Keys under P/nodes/ whose record could not be used, each with the reason. They are not
  // members; surfaced so that operators see them.
  std::vector<std::string> malformed;
  // The lease each member's key is attached to. A node that registered again (restarted, or
  // lost its lease and granted a new one) shows a new lease even when no view ever lacked it.
  std::map<std::pair<Role, uint32_t>, int64_t> leases;

  const std::vector<NodeRecord>& nodes(Role role) const { return by_role[static_cast<int>(role)]; }
  // Returns the lease of member (role, id), or 0 if it is not a member.
  int64_t LeaseOf(Role role, uint32_t id) const {
    auto it = leases.find({role, id});
    return it == leases.end() ? 0 : it->second;
  }
};

// Keeps one node registered: P/nodes/<role>/<id> holds its record, attached to a lease that a
// background thread renews every TTL/3. If the lease is lost (expired while etcd was
// unreachable, or revoked), it grants a new one, writes the record again and reports the new
// lease through the callback. Destruction revokes the lease, removing the record at once.
class NodeRegistration {
 public:
  struct Options {
    std::string prefix = std::string(kDefaultPrefix);
    absl::Duration ttl = absl::Seconds(5);  // whole seconds, >= 2 s
    // Subtracted from the lease end in ValidUntil (see the file comment). < ttl / 2.
    absl::Duration safety_margin = absl::Milliseconds(500);
    // Delay before the next renewal or re-registration after a failed one.
    absl::Duration retry_interval = absl::Milliseconds(200);
    // How long Start() keeps trying the first registration while etcd is unreachable (not yet
    // up, a TLS handshake slow under load, a leader election): a daemon started beside its etcd
    // waits for it instead of exiting. Errors other than unavailability fail at once.
    absl::Duration start_timeout = absl::Seconds(60);

    // Returns OK, or kInvalidArgument naming the bad field.
    absl::Status Validate() const;
  };
  // Called on the registration thread after the record was written again under a new lease,
  // before the new lease's validity window opens: LeaseValid() stays false until it returned,
  // so whatever it closes (the cache node's quarantine) is closed before the node counts as valid.
  using ReregisteredCallback = std::function<void(int64_t new_lease_id, int64_t revision)>;

  // Grants a lease, writes `record` under it and starts renewing it. Returns the Validate()
  // errors, or the etcd error if the first registration failed (for an unreachable etcd: once
  // options.start_timeout has passed, real time). `client` and `clock` are not
  // owned and must outlive the registration. `clock` times the fencing computation only.
  static absl::StatusOr<std::unique_ptr<NodeRegistration>> Start(
      EtcdClient* client, Clock* clock, Options options, NodeRecord record,
      ReregisteredCallback on_reregistered = nullptr);
  // Stops renewing and revokes the lease (best effort, bounded by ttl / 3).
  ~NodeRegistration();
  NodeRegistration(const NodeRegistration&) = delete;
  NodeRegistration& operator=(const NodeRegistration&) = delete;

  // Returns true if the lease is certainly still alive at the server at `now`, a time on the
  // injected clock's timeline (Clock::Now). False once it may have expired: stop serving as
  // owner.
  bool LeaseValid(absl::Time now) const;
  bool LeaseValid() const;  // at the injected clock's now
  // Returns the end of the conservative validity window (InfinitePast after the lease was lost
  // and before a new one is granted).
  absl::Time ValidUntil() const;
  // How long the window stays open from now (zero once it closed).
  absl::Duration ValidFor() const;
  int64_t lease_id() const;
  const std::string& key() const { return key_; }
  const NodeRecord& record() const { return record_; }

  // Stops the renewals without revoking, as if the process had hung: the record disappears when
  // the lease expires.
  void StopKeepAliveForTest();

 private:
  NodeRegistration(EtcdClient* client, Clock* clock, Options options, NodeRecord record,
                   ReregisteredCallback on_reregistered);

  // Grants a lease and writes the record under it; on success installs the lease (not yet its
  // validity window: OpenWindow does that) and returns the revision of the write and the end of
  // the new lease's validity window.
  struct Registered {
    int64_t revision = 0;
    absl::Time valid_until;
  };
  absl::StatusOr<Registered> Register();
  void OpenWindow(absl::Time valid_until);
  enum class Renewal { kRenewed, kUnreachable, kLost };
  // Renews once, extending the validity window on success and closing it if the lease is gone.
  Renewal RenewOnce();
  void Run();
  void StopThread();

  EtcdClient* const client_;
  Clock* const clock_;
  const Options options_;
  const NodeRecord record_;
  const std::string key_;
  const std::string value_;
  const ReregisteredCallback on_reregistered_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time valid_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread thread_;
};

// Follows the members under P/nodes/: lists them, then watches the prefix, and calls back with
// the full member set after every change. After a compaction of the watch's resume revision it
// lists again; reconnects to etcd are handled by the Watch (resuming without a gap).
class MembershipWatcher {
 public:
  struct Options {
    std::string prefix = std::string(kDefaultPrefix);
    // Timeout of one list attempt; also bounds how long destruction can wait for one.
    absl::Duration list_timeout = absl::Seconds(2);
    absl::Duration retry_interval = absl::Milliseconds(200);  // after a failed list
  };
  using Callback = std::function<void(const MemberView& view)>;

  // Starts following; `callback` gets the first view once the first list succeeds. `client`
  // is not owned and must outlive the watcher.
  static std::unique_ptr<MembershipWatcher> Start(EtcdClient* client, Options options,
                                                  Callback callback);
  ~MembershipWatcher();
  MembershipWatcher(const MembershipWatcher&) = delete;
  MembershipWatcher& operator=(const MembershipWatcher&) = delete;

  // Returns the latest view, or nullopt before the first list succeeded.
  std::optional<MemberView> Current() const;
  // Returns how many times the watcher listed (1 + the re-lists after compactions).
  int lists() const;

 private:
  MembershipWatcher(EtcdClient* client, Options options, Callback callback);
  void Run();
  // Applies one watch response and publishes the resulting view.
  void OnEvents(const std::vector<Event>& events, int64_t revision);
  // Builds the view of keys_ at `revision` and stores it in current_.
  MemberView PublishLocked(int64_t revision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  EtcdClient* const client_;
  const Options options_;
  const std::string nodes_prefix_;
  const Callback callback_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool relist_ ABSL_GUARDED_BY(mu_) = false;
  int lists_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> keys_ ABSL_GUARDED_BY(mu_);  // key -> record JSON
  std::map<std::string, int64_t> leases_ ABSL_GUARDED_BY(mu_);     // key -> lease id
  std::optional<MemberView> current_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_MEMBERSHIP_H_
