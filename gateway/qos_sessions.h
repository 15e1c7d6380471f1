// QosSessions (cluster mode, docs/qos.md): the gateways that have a limited VDI open share its
// limits. Every round (a second), for each VDI with limits that this gateway has open, its key
// P/qos-sessions/<vdi>/<gateway id> is put under the gateway's lease when it is missing (so it
// goes with the gateway, and comes back after a new lease), and the gateway applies 1/k of each
// limit, k the keys there are; the key of a VDI no longer open here, or no longer limited, is
// deleted. Until the others' keys are seen a gateway applies the whole limit: the sum over the
// gateways can exceed a limit for about a round after a second gateway opens the VDI.
//
// Reservations (gateway/qos_reserve.h): every round the gateway puts P/qos-holds/<gateway id>
// under its lease while one of its reserved VDIs was short since the round before (deletes it
// otherwise), and tells its Reservations whether another gateway's key is there.
//
// Thread-safety: thread-safe; one background thread.
#ifndef RINGCACHE_GATEWAY_QOS_SESSIONS_H_
#define RINGCACHE_GATEWAY_QOS_SESSIONS_H_

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gateway/qos.h"
#include "membership/etcd_client.h"
#include "membership/membership.h"

namespace ringcache::gateway {

// P/qos-sessions/<vdi>/ and P/qos-sessions/<vdi>/<gateway id>.
std::string QosSessionPrefix(absl::string_view prefix, absl::string_view vdi);
std::string QosSessionKey(absl::string_view prefix, absl::string_view vdi, uint32_t gateway);
// P/qos-holds/ and P/qos-holds/<gateway id>.
std::string QosHoldPrefix(absl::string_view prefix);
std::string QosHoldKey(absl::string_view prefix, uint32_t gateway);

class QosSessions {
 public:
  // None of the pointers is owned; all outlive this object. `registration` gives the lease.
  QosSessions(membership::EtcdClient* client, const membership::NodeRegistration* registration,
              std::string prefix, uint32_t gateway_id, QosRegistry* registry);
  ~QosSessions();  // stops the thread and deletes this gateway's keys (best effort)

  // Runs a round every `every` on a thread of its own.
  void Start(absl::Duration every = absl::Seconds(1));
  // One round, now (tests; the thread calls it).
  void Round();

 private:
  // The round's reservations part: this gateway's hold key, and the others'.
  void HoldsLocked(const membership::EtcdCallOptions& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  membership::EtcdClient* const client_;
  const membership::NodeRegistration* const registration_;
  const std::string prefix_;
  const uint32_t gateway_id_;
  QosRegistry* const registry_;
  absl::Mutex mu_;  // one round at a time
  std::set<std::string> mine_ ABSL_GUARDED_BY(mu_);  // VDIs whose key this gateway put
  bool hold_logged_ ABSL_GUARDED_BY(mu_) = false;     // another gateway's hold, as last logged
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace ringcache::gateway

#endif  // RINGCACHE_GATEWAY_QOS_SESSIONS_H_
