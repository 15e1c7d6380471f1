// The gateway's catalog and data ring in etcd: see etcd_state.h.
#include "gateway/etcd_state.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "membership/membership.h"

namespace ringcache::gateway {

std::string DataRingKey(const std::string& prefix) { return prefix + "/rings/data"; }

absl::StatusOr<std::vector<VdiRecord>> EtcdCatalogStore::LoadAll() {
  RC_ASSIGN_OR_RETURN(membership::RangeResult range,
                      client_->GetPrefix(membership::VdisPrefix(prefix_)));
  std::vector<VdiRecord> out;
  for (const auto& kv : range.kvs) {
    auto r = DecodeVdiLine(kv.value);
    if (!r.ok()) return absl::DataLossError(absl::StrCat(kv.key, ": ", r.status().message()));
    if (membership::VdiKey(prefix_, r->geometry.name()) != kv.key) {
      return absl::DataLossError(
          absl::StrCat(kv.key, ": holds VDI '", r->geometry.name(), "', not its own"));
    }
    out.push_back(*std::move(r));
  }
  return out;
}

absl::Status EtcdCatalogStore::Put(const VdiRecord& r) {
  return client_->Put(membership::VdiKey(prefix_, r.geometry.name()), EncodeVdiLine(r)).status();
}

absl::Status EtcdCatalogStore::Remove(const std::string& name) {
  return client_->Delete(membership::VdiKey(prefix_, name)).status();
}

absl::StatusOr<std::optional<datanode::DataRing>> LoadEtcdDataRing(
    membership::EtcdClient* client, const std::string& prefix) {
  RC_ASSIGN_OR_RETURN(std::optional<membership::KeyValue> kv, client->Get(DataRingKey(prefix)));
  if (!kv.has_value()) return std::optional<datanode::DataRing>();
  auto ring = datanode::DecodeDataRing(kv->value);
  if (!ring.ok()) {
    return absl::DataLossError(absl::StrCat(DataRingKey(prefix), ": ", ring.status().message()));
  }
  return std::optional<datanode::DataRing>(*std::move(ring));
}

absl::Status SaveEtcdDataRing(membership::EtcdClient* client, const std::string& prefix,
                              const datanode::DataRing& ring) {
  return client->Put(DataRingKey(prefix), datanode::EncodeDataRing(ring)).status();
}

}  // namespace ringcache::gateway
