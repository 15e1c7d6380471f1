// The cluster commands of ringcachectl (commands.h): cluster version and finalize (the feature
// level, docs/upgrades.md), and vdi set-qos, the first format the level gates (docs/qos.md).
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "tools/ctl/commands.h"
#include "tools/ctl/format.h"
#include "tools/ctl/rpc.h"

namespace ringcache::ctl {

namespace {

// "1000 IOPS read, 50.0 MiB/s written, burst 1000 ms", or "none".
std::string QosText(const v1::VdiQos& q) {
  std::vector<std::string> parts;
  auto add = [&](uint64_t v, const std::string& text) {
    if (v) parts.push_back(text);
  };
  add(q.read_iops(), absl::StrCat(q.read_iops(), " IOPS read"));
  add(q.write_iops(), absl::StrCat(q.write_iops(), " IOPS write"));
  add(q.iops(), absl::StrCat(q.iops(), " IOPS"));
  add(q.read_bytes_per_s(), FormatBytes(q.read_bytes_per_s()) + "/s read");
  add(q.write_bytes_per_s(), FormatBytes(q.write_bytes_per_s()) + "/s written");
  add(q.bytes_per_s(), FormatBytes(q.bytes_per_s()) + "/s");
  if (!parts.empty()) {
    parts.push_back(absl::StrCat("burst ", q.burst_ms() ? q.burst_ms() : 1000, " ms"));
  }
  add(q.reserve_iops(), absl::StrCat(q.reserve_iops(), " IOPS reserved"));
  add(q.reserve_bytes_per_s(), FormatBytes(q.reserve_bytes_per_s()) + "/s reserved");
  add(q.ssd_min_permille(), absl::StrCat("at least ", q.ssd_min_permille() / 10.0,
                                         "% of each cache node's SSD"));
  add(q.ssd_max_permille(), absl::StrCat("at most ", q.ssd_max_permille() / 10.0,
                                         "% of each cache node's SSD"));
  if (parts.empty()) return "none";
  return absl::StrJoin(parts, ", ");
}

}  // namespace

void WriteQosJson(const v1::VdiQos& q, JsonWriter* j) {
  j->BeginObject()
      .Field("read_iops", q.read_iops())
      .Field("write_iops", q.write_iops())
      .Field("iops", q.iops())
      .Field("read_bytes_per_s", q.read_bytes_per_s())
      .Field("write_bytes_per_s", q.write_bytes_per_s())
      .Field("bytes_per_s", q.bytes_per_s())
      .Field("burst_ms", q.burst_ms())
      .Field("ssd_min_share", q.ssd_min_permille() / 1000.0)
      .Field("ssd_max_share", q.ssd_max_permille() / 1000.0)
      .Field("reserve_iops", q.reserve_iops())
      .Field("reserve_bytes_per_s", q.reserve_bytes_per_s())
      .EndObject();
}

absl::Status ClusterVersion(const AdminSession& s) {
  v1::ListNodesResponse resp;
  {
    grpc::ClientContext ctx;
    SetDeadline(s, &ctx);
    RC_RETURN_IF_ERROR(FromRpc(s, s.stub->ListNodes(&ctx, v1::ListNodesRequest(), &resp)));
  }
  v1::ClusterVersionResponse level;
  {
    grpc::ClientContext ctx;
    SetDeadline(s, &ctx);
    RC_RETURN_IF_ERROR(
        FromRpc(s, s.stub->GetClusterVersion(&ctx, v1::ClusterVersionRequest(), &level)));
  }
  // The releases the registered nodes run, each with its nodes ("role id"); nodes that are not
  // up and say nothing (down, removed) are left out.
  std::map<std::string, std::vector<std::string>> releases;
  for (const v1::NodeInfo& n : resp.nodes()) {
    if (n.release().empty() && n.state() != "up") continue;
    releases[n.release()].push_back(absl::StrCat(n.role(), " ", n.id()));
  }
  const bool one = releases.size() == 1 && !releases.begin()->first.empty();
  if (s.json) {
    JsonWriter j;
    j.BeginObject()
        .Field("ringcachectl", Version())
        .Field("uniform", one)
        .Field("feature_level", level.feature_level())
        .Field("max_feature_level", level.max_feature_level())
        .Field("cluster_mode", level.cluster_mode());
    j.Key("releases").BeginObject();
    for (const auto& [release, nodes] : releases) {
      j.Key(release.empty() ? "unknown" : release).BeginArray();
      for (const std::string& n : nodes) j.String(n);
      j.EndArray();
    }
    j.EndObject().EndObject();
    *s.out << j.str() << '\n';
    return absl::OkStatus();
  }
  Table t({{"RELEASE"}, {"NODES", Table::Align::kRight}, {"WHICH"}});
  for (const auto& [release, nodes] : releases) {
    t.AddRow({release.empty() ? "unknown (before 0.2.0, or static mode)" : release,
              std::to_string(nodes.size()), absl::StrJoin(nodes, ", ")});
  }
  t.Render(*s.out);
  const bool none_say = releases.size() == 1 && releases.begin()->first.empty();
  *s.out << (releases.empty() ? "no node is up"
             : one            ? "every node runs " + releases.begin()->first
             : none_say ? std::string("no node says its release (static mode, or nodes of a release "
                                      "before 0.2.0)")
                        : std::string("mixed releases: an upgrade or a rollback is under way "
                                      "(docs/upgrades.md)"))
         << '\n';
  *s.out << "feature level " << level.feature_level();
  if (!level.cluster_mode()) {
    *s.out << " (static mode: this gateway's release)";
  } else if (level.feature_level() < level.max_feature_level()) {
    *s.out << " (this gateway's release supports " << level.max_feature_level()
           << ": `ringcachectl cluster finalize` raises it once every node runs such a release)";
  }
  *s.out << "\nringcachectl " << Version() << "; " << FormatsLine() << '\n';
  return absl::OkStatus();
}

absl::Status FinalizeCluster(const AdminSession& s) {
  v1::FinalizeClusterResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  RC_RETURN_IF_ERROR(
      FromRpc(s, s.stub->FinalizeCluster(&ctx, v1::FinalizeClusterRequest(), &resp)));
  if (s.json) {
    JsonWriter j;
    j.BeginObject()
        .Field("feature_level", resp.feature_level())
        .Field("message", resp.message())
        .EndObject();
    *s.out << j.str() << '\n';
  } else {
    *s.out << resp.message() << '\n';
  }
  return absl::OkStatus();
}

absl::Status SetVdiQos(const AdminSession& s, const std::string& name, const v1::VdiQos& qos) {
  v1::SetVdiQosRequest req;
  req.set_name(name);
  *req.mutable_qos() = qos;
  v1::SetVdiQosResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(s, &ctx);
  RC_RETURN_IF_ERROR(FromRpc(s, s.stub->SetVdiQos(&ctx, req, &resp)));
  if (s.json) {
    JsonWriter j;
    WriteQosJson(resp.qos(), &j);
    *s.out << j.str() << '\n';
  } else {
    *s.out << "VDI " << name << ": I/O limits and cache share " << QosText(resp.qos()) << '\n';
  }
  return absl::OkStatus();
}

}  // namespace ringcache::ctl
