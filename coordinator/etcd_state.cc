// The gateway's catalog and data ring in etcd: see etcd_state.h.
#include "coordinator/etcd_state.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "membership/etcd_value.h"
#include "membership/membership.h"

namespace ringcache::coordinator {

std::string DataPurgeKey(const std::string& prefix) { return prefix + "/rings/data-purge"; }
std::string DataActionsKey(const std::string& prefix) { return prefix + "/rings/data-actions"; }
std::string VdiNextIdKey(const std::string& prefix) { return prefix + "/vdi-next-id"; }

namespace {

// The ids in ascending order: the text and the message list them alike.
std::vector<uint32_t> Sorted(const absl::flat_hash_set<uint32_t>& ids) {
  std::vector<uint32_t> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

}  // namespace

std::string EncodeDataActions(const DataActions& a) {
  std::string text;
  auto add = [&text](const char* action, const absl::flat_hash_set<uint32_t>& ids) {
    for (uint32_t id : Sorted(ids)) absl::StrAppend(&text, action, " ", id, "\n");
  };
  add("out", a.out);
  add("in", a.in);
  add("decommission", a.decommission);
  return text;
}

absl::Status DecodeDataActions(const std::string& text, DataActions* a) {
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint32_t id = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(f[1], &id)) {
      return absl::DataLossError(absl::StrCat("bad data node action line '", line, "'"));
    }
    if (f[0] == "out") {
      a->out.insert(id);
    } else if (f[0] == "in") {
      a->in.insert(id);
    } else if (f[0] == "decommission") {
      a->decommission.insert(id);
    } else {
      return absl::DataLossError(absl::StrCat("unknown data node action in '", line, "'"));
    }
  }
  return absl::OkStatus();
}

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
  if (next.has_value()) {
    absl::StatusOr<uint64_t> n = membership::DecodeNumberValue(next->value, VdiNextIdKey(prefix_));
    if (!n.ok() || *n > UINT32_MAX) {
      return absl::DataLossError(absl::StrCat(VdiNextIdKey(prefix_), ": no VDI id (",
                                              n.ok() ? absl::StrCat(*n) : n.status().message(),
                                              ")"));
    }
    out.next_id = static_cast<uint32_t>(*n);
  }
  RC_ASSIGN_OR_RETURN(membership::RangeResult range,
                      client_->GetPrefix(membership::VdisPrefix(prefix_)));
  for (const auto& kv : range.kvs) {
    auto r = DecodeVdiValue(kv.value);
    if (!r.ok()) {
      return membership::EtcdReadError(kv.key, r.status());
    }
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
      {membership::TxnOp::Put(membership::VdiKey(prefix_, r.geometry.name()), EncodeVdiValue(r)),
       membership::TxnOp::Put(VdiNextIdKey(prefix_), membership::EncodeNumberValue(next_id))},
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
  auto ring = datanode::DecodeDataRingValue(kv->value);
  if (!ring.ok()) {
    return membership::EtcdReadError(DataRingKey(prefix), ring.status());
  }
  return std::optional<datanode::DataRing>(*std::move(ring));
}

absl::Status SaveEtcdDataRing(membership::EtcdClient* client, const std::string& prefix,
                              const datanode::DataRing& ring,
                              const std::optional<membership::TxnCompare>& guard) {
  // With its epoch alone beside it, for the cache nodes (membership/cache_ring_state.h).
  return GuardedWrite(client,
                      {membership::TxnOp::Put(DataRingKey(prefix),
                                              datanode::EncodeDataRingValue(ring)),
                       membership::TxnOp::Put(membership::DataRingEpochKey(prefix),
                                              membership::EncodeNumberValue(ring.epoch, true))},
                      guard);
}

absl::Status SaveEtcdDataPurge(membership::EtcdClient* client, const std::string& prefix,
                               bool pending, const std::optional<membership::TxnCompare>& guard) {
  return GuardedWrite(client,
                      {pending ? membership::TxnOp::Put(DataPurgeKey(prefix),
                                                        membership::EncodeMarkValue("purge\n"))
                               : membership::TxnOp::Delete(DataPurgeKey(prefix))},
                      guard);
}

absl::StatusOr<bool> LoadEtcdDataPurge(membership::EtcdClient* client, const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> kv, client->Get(DataPurgeKey(prefix)));
  if (!kv.has_value()) return false;
  RC_RETURN_IF_ERROR(membership::DecodeMarkValue(kv->value, DataPurgeKey(prefix)).status());
  return true;
}

absl::Status SaveEtcdDataActions(membership::EtcdClient* client, const std::string& prefix,
                                 const DataActions& actions,
                                 const std::optional<membership::TxnCompare>& guard) {
  if (actions.empty()) {
    return GuardedWrite(client, {membership::TxnOp::Delete(DataActionsKey(prefix))}, guard);
  }
  std::string value;
  if (membership::WritesEtcdValues()) {
    v1::EtcdValue v;
    v1::EtcdDataActions* m = v.mutable_data_actions();
    for (uint32_t id : Sorted(actions.out)) m->add_out(id);
    for (uint32_t id : Sorted(actions.in)) m->add_in(id);
    for (uint32_t id : Sorted(actions.decommission)) m->add_decommission(id);
    value = membership::EncodeEtcdValue(std::move(v));
  } else {
    value = EncodeDataActions(actions);
  }
  return GuardedWrite(client, {membership::TxnOp::Put(DataActionsKey(prefix), value)}, guard);
}

absl::StatusOr<DataActions> LoadEtcdDataActions(membership::EtcdClient* client,
                                                const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> kv, client->Get(DataActionsKey(prefix)));
  DataActions actions;
  if (!kv.has_value()) return actions;
  if (!membership::IsEtcdValue(kv->value)) {
    if (absl::Status s = DecodeDataActions(kv->value, &actions); !s.ok()) {
      return membership::EtcdReadError(DataActionsKey(prefix), s);
    }
    return actions;
  }
  RC_ASSIGN_OR_RETURN(v1::EtcdValue v,
                      membership::DecodeEtcdValue(kv->value, v1::EtcdValue::kDataActions,
                                                  DataActionsKey(prefix)));
  const v1::EtcdDataActions& m = v.data_actions();
  actions.out.insert(m.out().begin(), m.out().end());
  actions.in.insert(m.in().begin(), m.in().end());
  actions.decommission.insert(m.decommission().begin(), m.decommission().end());
  return actions;
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
