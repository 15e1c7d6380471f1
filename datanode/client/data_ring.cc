// The data ring's value type: validation, its protobuf and text forms, its file, its ring.
#include "datanode/client/datanode_pool.h"


#include <grpcpp/grpcpp.h>

#include <google/protobuf/text_format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/grpc_channel.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "membership/etcd_value.h"

namespace ringcache::datanode {


absl::Status DataRing::Validate() const {
  if (members.empty()) return absl::InvalidArgumentError("data ring without members");
  absl::flat_hash_map<uint32_t, int> seen;
  for (const auto& n : nodes) {
    if (n.id == 0) return absl::InvalidArgumentError("data node id 0");
    if (n.address.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("data node ", n.id, " has no address"));
    }
    if (++seen[n.id] > 1) {
      return absl::InvalidArgumentError(absl::StrCat("data node id ", n.id, " listed twice"));
    }
  }
  // Out nodes need no address: one that left the ring is only remembered.
  if (absl::flat_hash_set<uint32_t>(out.begin(), out.end()).size() != out.size()) {
    return absl::InvalidArgumentError("out data node listed twice");
  }
  for (const auto* ids : {&members, &target}) {
    absl::flat_hash_map<uint32_t, int> in;
    for (uint32_t id : *ids) {
      if (!seen.contains(id)) {
        return absl::InvalidArgumentError(absl::StrCat("ring member ", id, " has no address"));
      }
      if (++in[id] > 1) {
        return absl::InvalidArgumentError(absl::StrCat("ring member ", id, " listed twice"));
      }
    }
  }
  return absl::OkStatus();
}

bool DataRing::IsOut(uint32_t id) const {
  return std::find(out.begin(), out.end(), id) != out.end();
}

std::vector<DataNodeEndpoint> DataRing::Endpoints(const std::vector<uint32_t>& ids) const {
  std::vector<DataNodeEndpoint> out;
  for (uint32_t id : ids) {
    for (const auto& n : nodes) {
      if (n.id == id) out.push_back(n);
    }
  }
  return out;
}

v1::DataRing DataRing::ToProto() const {
  v1::DataRing p;
  p.set_epoch(epoch);
  for (const auto& n : nodes) {
    v1::DataNodeAddress* a = p.add_nodes();
    a->set_id(n.id);
    a->set_address(n.address);
    a->set_weight(n.weight);
    a->set_zone(n.zone);
  }
  for (uint32_t id : members) p.add_members(id);
  for (uint32_t id : target) p.add_target(id);
  for (uint32_t id : out) p.add_out(id);
  return p;
}

DataRing DataRing::FromProto(const v1::DataRing& p) {
  DataRing r;
  r.epoch = p.epoch();
  for (const auto& a : p.nodes()) {
    r.nodes.push_back({a.id(), a.address(), a.weight() > 0 ? a.weight() : 1.0, a.zone()});
  }
  r.members.assign(p.members().begin(), p.members().end());
  r.target.assign(p.target().begin(), p.target().end());
  r.out.assign(p.out().begin(), p.out().end());
  return r;
}

std::string EncodeDataRing(const DataRing& ring) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(ring.ToProto(), &text);
  return "# ringcache data ring (written by the node; do not edit)\n" + text;
}

absl::StatusOr<DataRing> DecodeDataRing(const std::string& text) {
  v1::DataRing p;
  if (!google::protobuf::TextFormat::ParseFromString(text, &p)) {
    return absl::DataLossError("not a data ring (damaged?)");
  }
  DataRing r = DataRing::FromProto(p);
  RC_RETURN_IF_ERROR(r.Validate());
  return r;
}

std::string EncodeDataRingValue(const DataRing& ring) {
  if (!membership::WritesEtcdValues()) return EncodeDataRing(ring);
  v1::EtcdValue v;
  *v.mutable_data_ring() = ring.ToProto();
  return membership::EncodeEtcdValue(std::move(v));
}

absl::StatusOr<DataRing> DecodeDataRingValue(const std::string& value) {
  if (!membership::IsEtcdValue(value)) return DecodeDataRing(value);
  RC_ASSIGN_OR_RETURN(v1::EtcdValue v,
                      membership::DecodeEtcdValue(value, v1::EtcdValue::kDataRing, "data ring"));
  DataRing r = DataRing::FromProto(v.data_ring());
  RC_RETURN_IF_ERROR(r.Validate());
  return r;
}

absl::Status SaveDataRing(const std::string& path, const DataRing& ring) {
  return WriteFileAtomically(path, EncodeDataRing(ring));
}

absl::StatusOr<std::optional<DataRing>> LoadDataRing(const std::string& path) {
  absl::StatusOr<std::string> body = ReadStateFile(path);
  if (absl::IsNotFound(body.status())) return std::optional<DataRing>();
  RC_RETURN_IF_ERROR(body.status());
  auto r = DecodeDataRing(*body);
  if (!r.ok()) return absl::DataLossError(absl::StrCat(path, ": ", r.status().message()));
  return std::optional<DataRing>(*std::move(r));
}

absl::StatusOr<ring::Ring> BuildDataRing(const std::vector<DataNodeEndpoint>& nodes) {
  ring::RingConfig rc;
  for (const auto& e : nodes) rc.members.push_back(ring::Member{e.id, e.weight, e.zone});
  return ring::Ring::Build(rc);
}


}  // namespace ringcache::datanode
