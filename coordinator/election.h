// Election: picks one coordinator among the candidates through etcd (membership/README.md,
// "Coordinator election").
//
// The leader holds the key P/coordinator: created with a transaction that succeeds only while
// the key is missing, attached to the candidate's own registration lease (NodeRegistration) and
// holding the candidate's node record. The key's create revision is the leader's *term*: it
// grows with every new leader, and a write guarded by LeaderGuard() (a compare on that create
// revision) can only commit while that leader still holds the key. A leader that dies or is cut
// off loses the key when its lease expires (at most the lease TTL), and the next candidate to
// look (every `poll`) takes it over.
//
// A candidate counts as leader only while it holds the key AND its registration's lease is
// certainly valid (NodeRegistration::LeaseValid): a leader cut off from etcd steps down before
// another can be elected.
//
// Thread-safety: thread-safe. The callback runs on the election's thread, never two at once.
#ifndef RINGCACHE_COORDINATOR_ELECTION_H_
#define RINGCACHE_COORDINATOR_ELECTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "membership/etcd_client.h"
#include "membership/membership.h"

namespace ringcache::coordinator {

std::string CoordinatorKey(const std::string& prefix);  // P/coordinator
// P/cluster/restoring: present while `ringcachectl restore` repairs etcd's state after a restore
// from a backup (docs/upgrades.md). No candidate is elected while it exists (the election's
// create compares it missing), so no coordinator acts on the state being repaired.
std::string RestoreMarkKey(const std::string& prefix);
// The compare that holds only while `term` lasts (P/coordinator keeps that create revision);
// term 0 (no term) never holds. Every shared write of a coordinator is guarded by it.
membership::TxnCompare TermGuard(const std::string& prefix, int64_t term);

// The current leader's record and term, as read from etcd.
struct LeaderInfo {
  membership::NodeRecord record;
  int64_t term = 0;  // create revision of P/coordinator
};

// Reads the leader (nullopt: none elected now).
absl::StatusOr<std::optional<LeaderInfo>> ReadLeader(membership::EtcdClient* client,
                                                     const std::string& prefix);

class Election {
 public:
  struct Options {
    std::string prefix = std::string(membership::kDefaultPrefix);
    absl::Duration poll = absl::Milliseconds(250);  // how often a candidate looks
    // After a resignation (below): how long this candidate does not campaign.
    absl::Duration resign_backoff = absl::Seconds(10);
  };
  // Called with true when this candidate becomes leader (term given), false when it stops being
  // one. The callback may block (it starts or stops the coordinator's work); the election does
  // not look at etcd meanwhile. Returning false from a `leader` call resigns the term: a leader
  // that cannot do the coordinator's work (its takeover failed) must not hold it, or the cluster
  // would have no working coordinator. The election then steps down (callback false), deletes
  // the key and does not campaign again for `resign_backoff`. The return value of a step-down
  // call is ignored.
  using Callback = std::function<bool(bool leader, int64_t term)>;

  // Campaigns for `registration`'s node with its lease. `client` and `registration` are not
  // owned and must outlive the election.
  static std::unique_ptr<Election> Start(membership::EtcdClient* client,
                                         membership::NodeRegistration* registration,
                                         Options options, Callback callback);
  // Stops campaigning; a leader steps down (callback false) and deletes the key if it still
  // holds it, so another candidate takes over at once.
  ~Election();
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;

  bool leader() const;
  int64_t term() const;  // 0 when not leader
  // The compare that holds only while this candidate's term lasts (guarded writes).
  membership::TxnCompare LeaderGuard() const;

 private:
  Election(membership::EtcdClient* client, membership::NodeRegistration* registration,
           Options options, Callback callback);
  void Run();
  // One look at etcd: returns the term this candidate now leads (0: not leader).
  // `leading`: this candidate holds the current term; its look then ends (not leader) by the
  // time its lease may have expired, however slow etcd is to answer.
  int64_t Look(bool leading);
  // Deletes the key if `term` still holds it (a clean hand-over).
  void DeleteKey(int64_t term);
  // Ends `term` on this side: term_ = 0, then the callback (false).
  void StepDown(int64_t term);

  membership::EtcdClient* const client_;
  membership::NodeRegistration* const registration_;
  const Options options_;
  const Callback callback_;
  const std::string key_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t term_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace ringcache::coordinator

#endif  // RINGCACHE_COORDINATOR_ELECTION_H_
