#include "gateway/qos_sessions.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gateway/qos_reserve.h"

namespace ringcache::gateway {

std::string QosSessionPrefix(absl::string_view prefix, absl::string_view vdi) {
  return absl::StrCat(prefix, "/qos-sessions/", vdi, "/");
}

std::string QosSessionKey(absl::string_view prefix, absl::string_view vdi, uint32_t gateway) {
  return absl::StrCat(QosSessionPrefix(prefix, vdi), gateway);
}

std::string QosHoldPrefix(absl::string_view prefix) {
  return absl::StrCat(prefix, "/qos-holds/");
}

std::string QosHoldKey(absl::string_view prefix, uint32_t gateway) {
  return absl::StrCat(QosHoldPrefix(prefix), gateway);
}

QosSessions::QosSessions(membership::EtcdClient* client,
                         const membership::NodeRegistration* registration, std::string prefix,
                         uint32_t gateway_id, QosRegistry* registry)
    : client_(client),
      registration_(registration),
      prefix_(std::move(prefix)),
      gateway_id_(gateway_id),
      registry_(registry) {}

QosSessions::~QosSessions() {
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock l(&mu_);
  membership::EtcdCallOptions call;
  call.timeout = absl::Seconds(1);
  for (const std::string& vdi : mine_) {
    client_->Delete(QosSessionKey(prefix_, vdi, gateway_id_), call).IgnoreError();
  }
  client_->Delete(QosHoldKey(prefix_, gateway_id_), call).IgnoreError();
}

void QosSessions::HoldsLocked(const membership::EtcdCallOptions& call) {
  Reservations* const res = registry_->reservations();
  const bool mine_short = res->TakeShortSinceLastRound();
  absl::StatusOr<membership::RangeResult> keys = client_->GetPrefix(QosHoldPrefix(prefix_), call);
  if (!keys.ok()) return;  // etcd away: keep what there is
  const std::string key = QosHoldKey(prefix_, gateway_id_);
  bool present = false;
  size_t others = 0;
  for (const membership::KeyValue& kv : keys->kvs) {
    if (kv.key == key) {
      present = true;
    } else {
      ++others;
    }
  }
  if (mine_short && !present) {
    const int64_t lease = registration_->lease_id();
    if (lease != 0) client_->Put(key, "", lease, call).IgnoreError();  // again next round
  } else if (!mine_short && present) {
    client_->Delete(key, call).IgnoreError();
  }
  res->SetRemoteShort(others > 0);
  if ((others > 0) != hold_logged_) {
    hold_logged_ = others > 0;
    if (hold_logged_) {
      spdlog::info("I/O reservations: {} other gateway(s) have a VDI short of its reservation; "
                   "this gateway holds its own requests back too",
                   others);
    } else {
      spdlog::info("I/O reservations: no other gateway has a VDI short of its reservation");
    }
  }
}

void QosSessions::Start(absl::Duration every) {
  thread_ = std::thread([this, every] {
    while (!stop_.WaitForNotificationWithTimeout(every)) Round();
  });
}

void QosSessions::Round() {
  absl::MutexLock l(&mu_);
  membership::EtcdCallOptions call;
  call.timeout = absl::Seconds(1);
  std::set<std::string> wanted;
  for (auto& [vdi, limiter] : registry_->All()) {
    if (limiter->users() <= 0 || !coordinator::QosLimited(limiter->limits())) {
      limiter->SetShare(1.0);
      continue;
    }
    wanted.insert(vdi);
    absl::StatusOr<membership::RangeResult> keys =
        client_->GetPrefix(QosSessionPrefix(prefix_, vdi), call);
    if (!keys.ok()) continue;  // etcd away: keep the share there is
    const std::string key = QosSessionKey(prefix_, vdi, gateway_id_);
    size_t gateways = keys->kvs.size();
    const bool present = std::any_of(keys->kvs.begin(), keys->kvs.end(),
                                     [&](const membership::KeyValue& kv) { return kv.key == key; });
    if (!present) {
      const int64_t lease = registration_->lease_id();
      if (lease == 0 || !client_->Put(key, "", lease, call).ok()) continue;
      ++gateways;
    }
    mine_.insert(vdi);
    const double share = 1.0 / static_cast<double>(std::max<size_t>(gateways, 1));
    if (share != limiter->share()) {
      spdlog::info("VDI {}: open on {} gateway(s); this one applies {:.0f}% of its I/O limits",
                   vdi, gateways, share * 100);
    }
    limiter->SetShare(share);
  }
  for (auto it = mine_.begin(); it != mine_.end();) {
    if (wanted.count(*it) != 0) {
      ++it;
      continue;
    }
    if (!client_->Delete(QosSessionKey(prefix_, *it, gateway_id_), call).ok()) {
      ++it;  // again next round
      continue;
    }
    it = mine_.erase(it);
  }
  HoldsLocked(call);
}

}  // namespace ringcache::gateway
