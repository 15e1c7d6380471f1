// EtcdClient: a small synchronous client for the etcd v3 gRPC API (KV, Lease, Watch, Auth) as much
// as cluster membership needs: put/get/range/delete, a compare-and-swap transaction helper, leases,
// and prefix watches. Stubs are generated from Debian's etcd 3.4 protos; no generated type
// appears in this header.
//
// Failover and retries. The client holds one gRPC channel per endpoint and a "current" endpoint.
// A call is one or more attempts within a per-call deadline (Options::call_timeout, or
// CallOptions::timeout). An attempt first waits up to dial_timeout for the current endpoint's
// channel to be connected, then runs the RPC with a deadline of rpc_timeout. When an attempt
// fails with kUnavailable or kDeadlineExceeded the client moves to the next endpoint, sleeps an
// exponential backoff (backoff_min doubling up to backoff_max) and tries again until the call
// deadline passes; then the call returns kUnavailable naming the last error. So a call made while
// etcd is down (or restarting) blocks until etcd is back or the deadline passes. Other errors
// (kNotFound, kInvalidArgument, kOutOfRange "compacted", ...) return at once, except etcd's
// "revision of auth store is old" (a user or role changed while the request was in flight; it
// was not applied), which is retried like kUnavailable, Txn included.
//
// A request that may have reached the server is retried only when repeating it is harmless (Put,
// Delete, Get, leases). Txn is not: if an attempt fails after the request was sent, Txn returns
// kUnavailable ("outcome unknown") instead of retrying, because a repeated compare could report
// failure for a transaction that in fact committed. Re-read and decide.
//
// Thread-safety: EtcdClient is thread-safe; any number of threads may call it at once. A Watch
// runs its callbacks on its own thread, one at a time. REQUIRES: the client outlives its Watches.
#ifndef RINGCACHE_MEMBERSHIP_ETCD_CLIENT_H_
#define RINGCACHE_MEMBERSHIP_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ringcache::membership {

// One key as etcd stores it (mvccpb.KeyValue). Revisions are etcd store revisions.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // revision that created the key (0: key absent)
  int64_t mod_revision = 0;     // revision of the last write (for a delete event: the delete)
  int64_t version = 0;          // writes since creation
  int64_t lease = 0;            // attached lease id, 0 if none

  bool operator==(const KeyValue&) const = default;
};

// The keys under a prefix and the store revision they were read at.
struct RangeResult {
  std::vector<KeyValue> kvs;  // sorted by key
  int64_t revision = 0;
};

struct DeleteResult {
  int64_t deleted = 0;   // number of keys removed
  int64_t revision = 0;  // store revision after the delete
};

// One condition of a transaction.
struct TxnCompare {
  enum class Target { kCreateRevision, kModRevision, kValue };
  std::string key;
  Target target = Target::kCreateRevision;
  int64_t revision = 0;  // kCreateRevision, kModRevision
  std::string value;     // kValue

  // Holds when `key` does not exist (create_revision == 0).
  static TxnCompare KeyMissing(std::string key);
  static TxnCompare CreateRevisionIs(std::string key, int64_t revision);
  static TxnCompare ModRevisionIs(std::string key, int64_t revision);
  static TxnCompare ValueIs(std::string key, std::string value);
};

// One write of a transaction branch.
struct TxnOp {
  enum class Type { kPut, kDelete, kDeletePrefix };
  Type type = Type::kPut;
  std::string key;    // the key, or the prefix for kDeletePrefix
  std::string value;  // kPut
  int64_t lease = 0;  // kPut

  static TxnOp Put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp Delete(std::string key);
  static TxnOp DeletePrefix(std::string prefix);
};

struct TxnResult {
  bool succeeded = false;  // every compare held and the `then` branch ran
  int64_t revision = 0;    // store revision after the transaction
};

struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete: key and mod_revision (the delete's revision) only
};

// A running prefix watch (see EtcdClient::WatchPrefix). Destroying it stops it promptly: the
// stream is cancelled and the thread joined. REQUIRES: not destroyed from one of its own
// callbacks (the destructor joins the thread that runs them).
class Watch {
 public:
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // Returns the revision the watch will resume from after a reconnect: the last delivered
  // event's revision + 1 (initially the start revision).
  int64_t next_revision() const;
  // Returns true once the watch has stopped by itself (its start revision was compacted).
  bool compacted() const;

 private:
  friend class EtcdClient;
  struct State;  // shared with the watch thread; defined in etcd_client.cc
  explicit Watch(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A permission of an etcd role: what it may do with the keys that start with `prefix`.
struct EtcdGrant {
  enum class Access { kRead, kWrite, kReadWrite };
  std::string prefix;
  Access access = Access::kRead;
};

// Per-call overrides of EtcdClient::Options. (At namespace scope so that `= {}` default arguments
// of EtcdClient's methods can use its member initializers.)
struct EtcdCallOptions {
  // Deadline for the whole call, all attempts included. Zero: Options::call_timeout.
  absl::Duration timeout = absl::ZeroDuration();
};

class EtcdClient {
 public:
  struct Options {
    // "host:port" or "http://host:port" (no TLS). Tried in order, moving on when one fails.
    std::vector<std::string> endpoints;
    absl::Duration dial_timeout = absl::Seconds(1);   // per attempt: wait for a connection
    absl::Duration rpc_timeout = absl::Seconds(3);    // per attempt: the RPC itself
    absl::Duration call_timeout = absl::Seconds(10);  // per call, all attempts together
    absl::Duration backoff_min = absl::Milliseconds(50);
    absl::Duration backoff_max = absl::Seconds(1);

    // Returns OK, or kInvalidArgument naming the first bad field.
    absl::Status Validate() const;
  };

  using CallOptions = EtcdCallOptions;

  // Called by a Watch with the events of one watch response (in revision order, never splitting
  // a revision) and the revision of the last of them.
  using EventsCallback = std::function<void(const std::vector<Event>& events, int64_t revision)>;
  // Called by a Watch, once, when its resume revision has been compacted away: the events in
  // between are lost, so the caller must re-list and start a new watch. The watch then stops.
  using CompactedCallback = std::function<void(int64_t compact_revision)>;

  // Returns a client for `options`, or the error of options.Validate(). Connects lazily.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(Options options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Sets `key` to `value`, attached to `lease_id` if non-zero. Returns the new store revision.
  absl::StatusOr<int64_t> Put(absl::string_view key, absl::string_view value, int64_t lease_id = 0,
                              const CallOptions& call = {});
  // Returns `key`, or nullopt if it does not exist. Linearizable.
  absl::StatusOr<std::optional<KeyValue>> Get(absl::string_view key, const CallOptions& call = {});
  // Returns every key starting with `prefix` and the revision of that snapshot. Linearizable.
  absl::StatusOr<RangeResult> GetPrefix(absl::string_view prefix, const CallOptions& call = {});
  absl::StatusOr<DeleteResult> Delete(absl::string_view key, const CallOptions& call = {});
  absl::StatusOr<DeleteResult> DeletePrefix(absl::string_view prefix, const CallOptions& call = {});
  // Runs `then_ops` if every compare holds, else `else_ops`, atomically. Not retried once sent
  // (see the file comment).
  absl::StatusOr<TxnResult> Txn(const std::vector<TxnCompare>& compares,
                                const std::vector<TxnOp>& then_ops,
                                const std::vector<TxnOp>& else_ops = {},
                                const CallOptions& call = {});
  // Compacts the store's history up to `revision` (watches from before it get kCompacted).
  absl::Status Compact(int64_t revision, const CallOptions& call = {});

  // Receives the chunks of a snapshot in order; `restart` is true for the first chunk of an
  // attempt (a retry after a failed attempt streams the whole snapshot again: start over).
  // A non-OK status cancels the stream and is returned.
  using SnapshotSink = std::function<absl::Status(absl::string_view chunk, bool restart)>;
  // Streams a snapshot of the whole store (etcd's Maintenance.Snapshot: the backend database,
  // followed by its SHA-256 as etcd appends it) into `sink`. Returns the store revision the
  // snapshot was taken at (0 if the server did not say). The call's timeout (Options::
  // call_timeout unless given) bounds each attempt's whole stream.
  absl::StatusOr<int64_t> Snapshot(const SnapshotSink& sink, const CallOptions& call = {});

  // Grants a lease of `ttl_s` seconds and returns its id. etcd may raise a too-short TTL to its
  // minimum, never lower it.
  absl::StatusOr<int64_t> LeaseGrant(int64_t ttl_s, const CallOptions& call = {});
  // Revokes the lease, deleting the keys attached to it. kNotFound if it does not exist.
  absl::Status LeaseRevoke(int64_t lease_id, const CallOptions& call = {});
  // Renews the lease once and returns its TTL in seconds (the full granted TTL, counted from when
  // the server received the request). kNotFound if the lease has expired or never existed.
  absl::StatusOr<int64_t> LeaseKeepAliveOnce(int64_t lease_id, const CallOptions& call = {});

  // ---- Auth (etcd_auth.cc). Once authentication is on, only a user with etcd's `root` role may
  // call these. Users made here have no password: etcd knows them by the CN of their TLS client
  // certificate (it runs with --client-cert-auth).

  // Creates role `role` unless it exists and grants it `grants` (granting again is harmless).
  absl::Status EnsureRole(const std::string& role, const std::vector<EtcdGrant>& grants,
                          const CallOptions& call = {});
  // Creates user `name` (no password) unless it exists and grants it `role`.
  absl::Status EnsureUser(const std::string& name, const std::string& role,
                          const CallOptions& call = {});
  // Turns authentication on; OK when it is on already. etcd refuses unless a user `root` with the
  // role `root` exists.
  absl::Status AuthEnable(const CallOptions& call = {});

  // Watches every key starting with `prefix` from `start_revision` on a new thread. 0 means
  // "from now": the watch first reads the current revision R and then watches from R + 1, so a
  // reconnect before the first event does not skip what happened in between.
  // Reconnects after errors with backoff, rotating endpoints, resuming after the last delivered
  // event, until destroyed or compacted. Callbacks run on the watch thread, never concurrently;
  // `on_compacted` may be empty (the watch then just stops).
  std::unique_ptr<Watch> WatchPrefix(std::string prefix, int64_t start_revision,
                                     EventsCallback on_events, CompactedCallback on_compacted);

  const Options& options() const { return options_; }

  // Returns the exclusive end of the key range holding every key that starts with `prefix`, as
  // etcd's range_end expects ("\0" for the empty prefix: every key).
  static std::string PrefixRangeEnd(absl::string_view prefix);

 private:
  struct Endpoint;  // channel and stubs, defined in etcd_client.cc
  struct Attempt;

  explicit EtcdClient(Options options);

  // Runs `rpc` (see etcd_client.cc) under the retry rules of the file comment.
  absl::Status Call(absl::string_view what, const CallOptions& call, bool idempotent,
                    const std::function<absl::Status(Endpoint&, Attempt&)>& rpc);
  size_t current_endpoint() const { return current_.load(std::memory_order_relaxed); }
  // Moves the current endpoint past `failed` unless another thread already did.
  void RotateFrom(size_t failed);
  struct WatchAttempt;
  // The body of a Watch's thread: reconnects until stopped or compacted.
  void RunWatch(Watch::State* state);
  // Resolves a start revision of 0 ("now") to the current revision + 1.
  void PinWatchStart(Endpoint& ep, Watch::State* state, WatchAttempt* out);
  // Runs one watch stream until it breaks, delivering its events.
  void RunWatchStream(Endpoint& ep, Watch::State* state, WatchAttempt* out);

  const Options options_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::atomic<size_t> current_{0};
};

}  // namespace ringcache::membership

#endif  // RINGCACHE_MEMBERSHIP_ETCD_CLIENT_H_
