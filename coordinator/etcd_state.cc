// The gateway's catalog and data ring in etcd: see etcd_state.h.
#include "coordinator/etcd_state.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "membership/membership.h"

namespace ringcache::coordinator {

std::string DataPurgeKey(const std::string& prefix) { return prefix + "/rings/data-purge"; }
std::string DataActionsKey(const std::string& prefix) { return prefix + "/rings/data-actions"; }
std::string VdiNextIdKey(const std::string& prefix) { return prefix + "/vdi-next-id"; }

namespace {

// One write, unconditional or only while `guard` holds.
absl::Status GuardedWrite(membership::EtcdClient* client, std::vector<membership::TxnOp> ops,
                          const std::optional<membership::TxnCompare>& guard) {
  const std::string key = ops.front().key;
  if (!guard.has_value()) {
    for (const membership::TxnOp& op : ops) {
      if (op.type == membership::TxnOp::Type::kDelete) {
        RC_RETURN_IF_ERROR(client->Delete(op.key).status());
      } else {
        RC_RETURN_IF_ERROR(client->Put(op.key, op.value).status());
      }
    }
    return absl::OkStatus();
  }
  RC_ASSIGN_OR_RETURN(membership::TxnResult r, client->Txn({*guard}, std::move(ops), {}));
  if (!r.succeeded) {
    return absl::FailedPreconditionError(
        absl::StrCat("not the coordinator any more: its term ended, ", key, " was not written"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CatalogStore::Contents> EtcdCatalogStore::LoadAll() {
  Contents out;
  RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> next,
                      client_->Get(VdiNextIdKey(prefix_)));
  if (next.has_value() && !absl::SimpleAtoi(next->value, &out.next_id)) {
    return absl::DataLossError(
        absl::StrCat(VdiNextIdKey(prefix_), ": \"", next->value, "\" is no VDI id"));
  }
  RC_ASSIGN_OR_RETURN(membership::RangeResult range,
                      client_->GetPrefix(membership::VdisPrefix(prefix_)));
  for (const auto& kv : range.kvs) {
    auto r = DecodeVdiLine(kv.value);
    if (!r.ok()) return absl::DataLossError(absl::StrCat(kv.key, ": ", r.status().message()));
    if (membership::VdiKey(prefix_, r->geometry.name()) != kv.key) {
      return absl::DataLossError(
          absl::StrCat(kv.key, ": holds VDI '", r->geometry.name(), "', not its own"));
    }
    out.next_id = std::max(out.next_id, r->geometry.vdi_id() + 1);
    out.records.push_back(*std::move(r));
  }
  return out;
}

void EtcdCatalogStore::SetGuard(std::optional<membership::TxnCompare> guard) {
  absl::MutexLock l(&mu_);
  guard_ = std::move(guard);
}

std::optional<membership::TxnCompare> EtcdCatalogStore::guard() const {
  absl::MutexLock l(&mu_);
  return guard_;
}

absl::Status EtcdCatalogStore::Put(const VdiRecord& r, uint32_t next_id) {
  return GuardedWrite(
      client_,
      {membership::TxnOp::Put(membership::VdiKey(prefix_, r.geometry.name()), EncodeVdiLine(r)),
       membership::TxnOp::Put(VdiNextIdKey(prefix_), absl::StrCat(next_id))},
      guard());
}

absl::Status EtcdCatalogStore::Remove(const std::string& name) {
  return GuardedWrite(client_, {membership::TxnOp::Delete(membership::VdiKey(prefix_, name))},
                      guard());
}

absl::StatusOr<std::optional<datanode::DataRing>> LoadEtcdDataRing(membership::EtcdClient* client,
                                                                   const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> kv, client->Get(DataRingKey(prefix)));
  if (!kv.has_value()) return std::optional<datanode::DataRing>();
  auto ring = datanode::DecodeDataRing(kv->value);
  if (!ring.ok()) {
    return absl::DataLossError(absl::StrCat(DataRingKey(prefix), ": ", ring.status().message()));
  }
  return std::optional<datanode::DataRing>(*std::move(ring));
}

absl::Status SaveEtcdDataRing(membership::EtcdClient* client, const std::string& prefix,
                              const datanode::DataRing& ring,
                              const std::optional<membership::TxnCompare>& guard) {
  // With its epoch alone beside it, for the cache nodes (membership/cache_ring_state.h).
  return GuardedWrite(client,
                      {membership::TxnOp::Put(DataRingKey(prefix), datanode::EncodeDataRing(ring)),
                       membership::TxnOp::Put(membership::DataRingEpochKey(prefix),
                                              membership::EncodeRingEpoch(ring.epoch))},
                      guard);
}

absl::Status SaveEtcdDataPurge(membership::EtcdClient* client, const std::string& prefix,
                               bool pending, const std::optional<membership::TxnCompare>& guard) {
  return GuardedWrite(client,
                      {pending ? membership::TxnOp::Put(DataPurgeKey(prefix), "purge\n")
                               : membership::TxnOp::Delete(DataPurgeKey(prefix))},
                      guard);
}

absl::StatusOr<bool> LoadEtcdDataPurge(membership::EtcdClient* client, const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> kv, client->Get(DataPurgeKey(prefix)));
  return kv.has_value();
}

absl::Status SaveEtcdDataActions(membership::EtcdClient* client, const std::string& prefix,
                                 const std::string& actions,
                                 const std::optional<membership::TxnCompare>& guard) {
  return GuardedWrite(client,
                      {actions.empty() ? membership::TxnOp::Delete(DataActionsKey(prefix))
                                       : membership::TxnOp::Put(DataActionsKey(prefix), actions)},
                      guard);
}

absl::StatusOr<std::string> LoadEtcdDataActions(membership::EtcdClient* client,
                                                const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> kv, client->Get(DataActionsKey(prefix)));
  return kv.has_value() ? kv->value : std::string();
}

absl::Status PublishEtcdCacheRing(membership::EtcdClient* client, const std::string& prefix,
                                  const membership::TxnCompare& guard,
                                  const membership::CacheRingState& state) {
  membership::EtcdCallOptions call;
  call.timeout = absl::Seconds(3);
  RC_ASSIGN_OR_RETURN(membership::TxnResult r,
                      client->Txn({guard}, membership::CacheRingPuts(prefix, state), {}, call));
  if (!r.succeeded) {
    return absl::FailedPreconditionError(
        "not the coordinator any more: its term ended, the cache ring was not published");
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TakeOverEpoch(membership::EtcdClient* client, const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(membership::RangeResult range,
                      client->GetPrefix(membership::CacheRingKey(prefix)));
  uint64_t epoch = static_cast<uint64_t>(std::max<int64_t>(range.revision, 0));
  for (const auto& kv : range.kvs) {
    if (kv.key != membership::CacheRingKey(prefix)) continue;
    RC_ASSIGN_OR_RETURN(membership::CacheRingState st, membership::DecodeCacheRingState(kv.value));
    epoch = std::max(epoch, st.epoch);
  }
  return epoch;
}

}  // namespace ringcache::coordinator
